package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// commitTyped commits one queued record of the given type, as admission
// would, and returns its id.
func (b *testBundle) commitTyped(t *testing.T, tenant, requester, typ string, i int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at := time.Now().UTC().Add(-time.Hour + time.Duration(i)*time.Millisecond)
	rec := &job.Record{
		ID: job.DeriveID([]byte("type-filter"), tenant, requester, fmt.Sprint(i)), Tenant: tenant, Requester: requester,
		KeyHash: "00", Fingerprint: "ff", Type: typ, Params: json.RawMessage(`{}`), State: job.StateQueued, CreatedAt: at, UpdatedAt: at,
	}
	require.NoError(t, b.res.Jobs.Create(ctx, rec))
	return rec.ID
}

// GET /v1/jobs?type= lists only the requester's jobs of that type, from
// the query index and from the records (a gateway whose index is being
// built) alike.
func TestListFiltersByType(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	var permits, exports []string // newest first
	for i := range 5 {
		if i%2 == 0 {
			permits = append([]string{b.commitTyped(t, "4", "reviewer-47", "permit_report", i)}, permits...)
		} else {
			exports = append([]string{b.commitTyped(t, "4", "reviewer-47", "csv_export", i)}, exports...)
		}
	}
	b.commitTyped(t, "4", "someone-else", "csv_export", 9)
	ids := func(page listBody) []string {
		out := []string{}
		for _, j := range page.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	check := func(how string) {
		t.Helper()
		require.Equal(t, exports, ids(b.list(t, tok, "?type=csv_export")), how)
		require.Equal(t, permits, ids(b.list(t, tok, "?type=permit_report")), how)
		require.Equal(t, exports, ids(b.list(t, tok, "?type=csv_export&state=queued")), how)
		require.Empty(t, ids(b.list(t, tok, "?type=csv_export&state=running")), how)
		require.Empty(t, ids(b.list(t, tok, "?type=greeting")), "%s: a type without jobs lists none", how)
		require.Len(t, b.list(t, tok, "").Jobs, 5, how)
		first := b.list(t, tok, "?type=permit_report&limit=2")
		require.Equal(t, permits[:2], ids(first), how)
		require.NotEmpty(t, first.NextCursor, how)
		require.Equal(t, permits[2:], ids(b.list(t, tok, "?type=permit_report&limit=2&cursor="+first.NextCursor)), how)
	}
	check("from the index")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scan := func(typ string, limit int, after *cursor) listPage {
		t.Helper()
		p, err := g.scanPage(ctx, "4", "reviewer-47", listFilter{typ: typ}, limit, after)
		require.NoError(t, err)
		return p
	}
	pageIDs := func(p listPage) []string {
		out := []string{}
		for _, j := range p.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	require.Equal(t, exports, pageIDs(scan("csv_export", 20, nil)), "from the records")
	first := scan("permit_report", 2, nil)
	require.Equal(t, permits[:2], pageIDs(first))
	cur, err := decodeCursor(first.NextCursor)
	require.NoError(t, err)
	require.Equal(t, permits[2:], pageIDs(scan("permit_report", 2, &cur)))
}

// A query parameter GET /v1/jobs does not take, or one given twice, is a
// 400 that names it, never silently ignored; a bad value says what is
// allowed.
func TestListRefusesUnknownParameters(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	for query, detail := range map[string]string{
		"?sort=created":              `unknown query parameter "sort": GET /v1/jobs takes state, type, limit and cursor`,
		"?state=queued&tenant=5":     `unknown query parameter "tenant": GET /v1/jobs takes state, type, limit and cursor`,
		"?Type=csv_export":           `unknown query parameter "Type": GET /v1/jobs takes state, type, limit and cursor`,
		"?state=queued&state=failed": `query parameter "state" given more than once`,
		"?type=a&type=b":             `query parameter "type" given more than once`,
		"?type=CSV-Export":           `type must be a job type name ([a-z][a-z0-9_]{0,63})`,
		"?limit=0":                   "limit must be 1 to 100",
		"?state=done":                "state must be queued, running, succeeded, failed or canceled",
	} {
		r := b.do(t, http.MethodGet, "/v1/jobs"+query, tok, "")
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", query, r.body)
		p := r.json(t)
		require.Equal(t, "/problems/bad-request", p["type"], query)
		require.Equal(t, detail, p["detail"], query)
	}
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs?type=permit_report&state=queued&limit=5", tok, "").status)
}
