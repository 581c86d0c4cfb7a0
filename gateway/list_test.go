package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

type listBody struct {
	Jobs       []job.Resource `json:"jobs"`
	NextCursor string         `json:"next_cursor"`
}

func (b *testBundle) list(t *testing.T, tok, query string) listBody {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/jobs"+query, tok, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var body listBody
	require.NoError(t, json.Unmarshal(r.body, &body))
	return body
}

// commitJobs commits n records of one requester directly, oldest first,
// as admission does (one create each), and returns their ids newest first.
func (b *testBundle) commitJobs(t testing.TB, tenant, requester string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := time.Now().UTC().Add(-time.Hour)
	ids := make([]string, n)
	for i := range n {
		at := base.Add(time.Duration(i) * time.Millisecond)
		rec := &job.Record{
			ID: job.DeriveID([]byte("list-test"), tenant, requester, fmt.Sprint(i)), Tenant: tenant, Requester: requester,
			KeyHash: "00", Fingerprint: "ff", Type: "permit_report", Params: json.RawMessage(`{"case_id":1,"pages":1,"revision":1}`),
			State: job.StateQueued, CreatedAt: at, UpdatedAt: at,
		}
		require.NoError(t, b.res.Jobs.Create(ctx, rec))
		ids[n-1-i] = rec.ID
	}
	return ids
}

// A page of GET /v1/jobs costs in proportion to the page, not to the
// requester's history: with 2,000 jobs, ?limit=1 reads one record.
func TestListPageCostsInProportionToThePage(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	ids := b.commitJobs(t, "4", "reviewer-47", 2000)
	b.commitJobs(t, "4", "someone-else", 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	records := b.res.Jobs.Reads()
	page := b.list(t, tok, "?limit=1")
	require.Len(t, page.Jobs, 1)
	require.Equal(t, ids[0], page.Jobs[0].ID, "newest first")
	require.NotEmpty(t, page.NextCursor)
	require.LessOrEqual(t, b.res.Jobs.Reads()-records, uint64(1), "records read for one job")

	records = b.res.Jobs.Reads()
	page = b.list(t, tok, "?limit=1&cursor="+page.NextCursor)
	require.Equal(t, ids[1], page.Jobs[0].ID)
	require.LessOrEqual(t, b.res.Jobs.Reads()-records, uint64(1))

	// Paging through all of them gives each job once, newest first.
	var got []string
	cursor := ""
	for range 30 {
		q := "?limit=100"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		page = b.list(t, tok, q)
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, ids, got)

	// A job admitted just before the call is on its first page, even while
	// the relay is busy with others.
	for i := range 20 {
		r := b.submit(t, tok, fmt.Sprintf("fresh-%d", i), permit)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		first := b.list(t, tok, "?limit=1")
		require.Equal(t, r.job(t).ID, first.Jobs[0].ID, "admission %d is listed at once", i)
	}

	// A state filter looks at a bounded number of entries and hands back
	// a cursor to go on.
	oldest := ids[len(ids)-1]
	_, err := b.res.Jobs.Mutate(ctx, job.StoreKey("4", "reviewer-47", oldest), func(r *job.Record) error {
		return r.Transition(job.StateCanceled, time.Now())
	})
	require.NoError(t, err)
	var canceled []string
	pages := 0
	cursor = ""
	for pages = 1; pages < 20; pages++ {
		records = b.res.Jobs.Reads()
		q := "?state=canceled&limit=5"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		page = b.list(t, tok, q)
		require.LessOrEqual(t, b.res.Jobs.Reads()-records, uint64(5), "records are read for the jobs the index keeps")
		for _, j := range page.Jobs {
			canceled = append(canceled, j.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, []string{oldest}, canceled)
	require.Greater(t, pages, 1, "2,020 entries take more than one bounded scan (index.MaxScan)")
}

var listJobs = flag.Int("list-jobs", 20000, "jobs of the one requester in BenchmarkListFirstPage")

// BenchmarkListFirstPage measures GET /v1/jobs?limit=1 for a requester with
// -list-jobs jobs (default 20,000): through the query index, and reading
// every record as a gateway does while its index is behind (scan).
// records/op is the records read per request.
//
//	go test -run '^$' -bench BenchmarkListFirstPage -list-jobs 20000 ./gateway/
func BenchmarkListFirstPage(b *testing.B) {
	g, bundle := benchSetup(b)
	bundle.commitJobs(b, "4", "reviewer-47", *listJobs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := g.query.CatchUp(ctx, 10*time.Minute); err != nil {
		b.Fatal(err)
	}
	tok, err := auth.Mint(bundle.secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	query := g.query
	for _, mode := range []string{"index", "scan"} {
		b.Run(mode, func(b *testing.B) {
			g.query = query
			if mode == "scan" {
				g.query = behindIndex{query}
			}
			defer func() { g.query = query }()
			reads := bundle.res.Jobs.Reads()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodGet, bundle.url+"/v1/jobs?limit=1", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := bundle.http.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.ReportMetric(float64(bundle.res.Jobs.Reads()-reads)/float64(b.N), "records/op")
		})
	}
}

// behindIndex is a query index that never catches up: a list from the
// first page scans the records.
type behindIndex struct{ queryIndex }

func (behindIndex) CatchUp(context.Context, time.Duration) error {
	return errors.New("behind")
}
