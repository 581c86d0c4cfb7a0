package natsjs

import (
	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
)

// A job's priority other than the default is a token before its id, so a
// priority's filter ends in its wildcard like the default's; each filter
// matches its priority's subjects and no other's, and the subject reads
// back as the job's scope and priority.
func TestPrioritySubjectsAreOneFilterEndingInItsWildcard(t *testing.T) {
	t.Parallel()
	for p := 1; p <= 5; p++ {
		r := &job.Record{Type: "export", Tenant: "4", Requester: "alice", ID: "job_7", Priority: p}
		subj := WorkSubjectOf(r)
		want := "jobgate.work.export.4.alice." + string(rune('0'+p)) + ".job_7"
		if p == job.DefaultPriority {
			want = "jobgate.work.export.4.alice.job_7"
		}
		require.Equal(t, want, subj)
		for q := 1; q <= 5; q++ {
			filter := priorityWork("export", "4", "alice", q)
			require.Equal(t, p == q, server.SubjectMatchesFilter(subj, filter), "priority %d's subject against priority %d's filter %s", p, q, filter)
			require.Equal(t, '*', rune(filter[len(filter)-1]), "the filter ends in its wildcard")
		}
		require.True(t, server.SubjectMatchesFilter(subj, RequesterWork("export", "4", "alice")), "the lane's")
		tenant, requester, id, prio, ok := workScopeOf(subj)
		require.True(t, ok)
		require.Equal(t, []any{"4", "alice", "job_7", p}, []any{tenant, requester, id, prio})
	}
	for _, bad := range []string{
		"jobgate.work.export.4.alice.3.job_7", // the default has no token
		"jobgate.work.export.4.alice.9.job_7",
		"jobgate.work.export.4.alice.12.job_7",
		"jobgate.work.export.4.alice.job_7.2", // the layout before
		"jobgate.work.export.4..2.job_7",
		"jobgate.work.export.4.alice.2.",
	} {
		_, _, _, _, ok := workScopeOf(bad)
		require.False(t, ok, bad)
	}
}
