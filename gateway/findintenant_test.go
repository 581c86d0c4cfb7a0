package gateway

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// countingRecords counts the key listings an admin read opens.
type countingRecords struct {
	records
	listings atomic.Int64
}

func (c *countingRecords) FindInTenant(ctx context.Context, tenant, id string) (*job.Record, error) {
	c.listings.Add(1)
	return c.records.FindInTenant(ctx, tenant, id)
}

// An admin token reads another requester's job of its tenant through the
// query index: neither a hit nor a miss lists the bucket's keys (a consumer
// each, which under thousands of admin reads answered 500s).
func TestAdminReadsFindJobsByTheIndex(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	counting := &countingRecords{records: g.jobs}
	g.jobs = counting
	r := b.submit(t, b.token(t, "A", "alice", false), "k", permit)
	require.Equal(t, http.StatusAccepted, r.status)
	id := r.job(t).ID

	admin := b.token(t, "A", "root", true)
	got := b.do(t, http.MethodGet, "/v1/jobs/"+id, admin, "")
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, id, got.job(t).ID)
	for range 20 {
		require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa", admin, "").status)
	}
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/v1/jobs/"+id, b.token(t, "B", "root", true), "").status,
		"another tenant's admin")
	require.Zero(t, counting.listings.Load(), "no key listing")
}
