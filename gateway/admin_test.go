package gateway

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// An admin token reads every job of its tenant and cancels only its own: a
// DELETE of someone else's job answers exactly like one of a job that does
// not exist, and the job goes on.
func TestAdminReadsButDoesNotCancelOthersJobs(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	owner := b.token(t, "4", "reviewer-47", false)
	admin := b.token(t, "4", "ops", true)

	r := b.submit(t, owner, "theirs", permit)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	id := r.job(t).ID

	read := b.do(t, http.MethodGet, "/v1/jobs/"+id, admin, "")
	require.Equal(t, http.StatusOK, read.status, "an admin reads the tenant's jobs")

	del := b.do(t, http.MethodDelete, "/v1/jobs/"+id, admin, "")
	missing := b.do(t, http.MethodDelete, "/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa", admin, "")
	require.Equal(t, http.StatusNotFound, del.status, "%s", del.body)
	require.Equal(t, missing.status, del.status)
	require.Equal(t, string(missing.body), string(del.body), "indistinguishable from a job that does not exist")

	after := b.do(t, http.MethodGet, "/v1/jobs/"+id, owner, "")
	require.Equal(t, "queued", after.json(t)["state"], "the job goes on")

	// Its own jobs an admin cancels like anyone.
	r = b.submit(t, admin, "mine", permit)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	del = b.do(t, http.MethodDelete, "/v1/jobs/"+r.job(t).ID, admin, "")
	require.Equal(t, http.StatusAccepted, del.status, "%s", del.body)
	require.Equal(t, "canceled", del.json(t)["state"])
}
