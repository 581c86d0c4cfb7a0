package bench

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// The endpoints section counts a job done from its succeeded event, in the
// very bytes the stores publish: a change of their format that the count
// no longer reads would leave the section waiting for jobs that finished.
func TestSucceededAfterReadsTheStoredEvent(t *testing.T) {
	created := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	r := &job.Record{ID: "job_01", Type: EndpointType, Tenant: "ep", Requester: "ep-0", State: job.StateQueued,
		Params: []byte(`{"n":1}`), CreatedAt: created, UpdatedAt: created, Revision: 1}
	event := func() []byte { return codec.AppendResource(nil, r.Resource("", r.UpdatedAt)) }

	_, ok := succeededAfter(event(), EndpointType)
	require.False(t, ok, "a queued job is not done")

	require.NoError(t, r.Transition(job.StateRunning, created.Add(time.Millisecond)))
	require.NoError(t, r.Transition(job.StateSucceeded, created.Add(7*time.Millisecond)))
	wait, ok := succeededAfter(event(), EndpointType)
	require.True(t, ok, "%s", event())
	require.Equal(t, 7*time.Millisecond, wait)

	_, ok = succeededAfter(event(), NoopType)
	require.False(t, ok, "another type's job is not counted")
}
