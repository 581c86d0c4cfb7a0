package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// An admin's retry keeps the job's flow fields: its priority always; its
// run_at while still ahead (the retry waits scheduled for it again) and
// its start_by while still ahead. A retry past them runs now, without
// them.
func TestAdminRetryKeepsTheFlowFields(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	now := b.clock.now().UTC().Truncate(time.Second)
	startBy := now.Add(2 * time.Hour)
	cancel := func(id string) {
		t.Helper()
		c := b.do(t, http.MethodDelete, "/v1/jobs/"+id, alice, "")
		require.Equal(t, http.StatusAccepted, c.status, "%s", c.body)
	}
	retry := func(id, key string) job.Resource {
		t.Helper()
		r := b.do(t, http.MethodPost, "/v1/admin/jobs/"+id+"/retry", admin, "", "Idempotency-Key: "+key)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		return b.do(t, http.MethodGet, "/v1/jobs/"+adminJob(t, r).ID, alice, "").job(t)
	}

	urgent := b.submit(t, alice, "u", withFlow(`,"priority":1,"start_by":"`+startBy.Format(time.RFC3339)+`"`)).job(t)
	cancel(urgent.ID)
	n := retry(urgent.ID, "r-u")
	require.Equal(t, job.StateQueued, n.State)
	require.Equal(t, 1, n.Priority, "the priority kept")
	require.NotNil(t, n.StartBy)
	require.Equal(t, startBy, n.StartBy.UTC(), "start_by kept while ahead")
	require.Nil(t, n.RunAt)

	later := b.submit(t, alice, "l", withFlow(`,"delay":"1h","priority":5`)).job(t)
	require.Equal(t, job.StateScheduled, later.State)
	cancel(later.ID)
	n = retry(later.ID, "r-l")
	require.Equal(t, job.StateScheduled, n.State, "a retry before its run_at waits for it again")
	require.Equal(t, later.RunAt.UTC(), n.RunAt.UTC())
	require.Equal(t, 5, n.Priority)

	late := b.submit(t, alice, "x", withFlow(`,"delay":"1h","priority":2,"start_by":"`+startBy.Format(time.RFC3339)+`"`)).job(t)
	cancel(late.ID)
	b.clock.advance(3 * time.Hour)
	// Tokens fresh at the new time.
	mint := func(id auth.Identity) string {
		tok, err := auth.Mint(b.secret, id, time.Hour, b.clock.now())
		require.NoError(t, err)
		return tok
	}
	alice, admin = mint(auth.Identity{Tenant: "4", Requester: "alice"}), mint(auth.Identity{Tenant: "4", Requester: "ops", Admin: true})
	n = retry(late.ID, "r-x")
	require.Equal(t, job.StateQueued, n.State, "past its run_at the retry runs now")
	require.Nil(t, n.RunAt)
	require.Nil(t, n.StartBy, "past its start_by the retry has none")
	require.Equal(t, 2, n.Priority)
}
