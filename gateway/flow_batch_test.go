package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// A batch counts its scheduled items as scheduled, not queued; run now,
// one moves to queued.
func TestBatchCountsScheduledItems(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	item := `{"type":"permit_report","params":{"case_id":1,"revision":1}`
	r := b.postBatch(t, alice, "bs", `{"jobs":[`+item+`,"delay":"1h"},`+item+`,"delay":"2h"},`+item+`}]}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	v := r.batch(t)
	require.Equal(t, 2, v.Counts["scheduled"], "%s", r.body)
	require.Equal(t, 1, v.Counts["queued"])
	ids := v.ids()
	require.Equal(t, job.StateScheduled, b.do(t, http.MethodGet, "/v1/jobs/"+ids[0], alice, "").job(t).State)

	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/v1/admin/jobs/"+ids[0]+"/run-now", admin, "").status)
	require.Eventually(t, func() bool {
		g := b.do(t, http.MethodGet, "/v1/batches/"+v.ID, alice, "")
		c := g.batch(t).Counts
		return c["scheduled"] == 1 && c["queued"] == 2
	}, 10*time.Second, 20*time.Millisecond, "one item run now")
}
