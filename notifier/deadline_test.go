package notifier

import (
	"io"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A job canceled because no attempt had started by its start_by is
// notified like any terminal state, and its mail says why.
func TestADeadlineCancelIsMailed(t *testing.T) {
	t.Parallel()
	sink := jobtest.NewSMTPSink(t)
	n, b := setup(t, smtpConfig(sink, "deadline"))
	r := record("4", "reviewer-48", "job_deadline", job.StateQueued)
	startBy := r.CreatedAt.Add(time.Minute)
	r.StartBy = &startBy
	require.NoError(t, r.CancelDeadline(startBy.Add(time.Second)))
	r.Revision = 2
	b.publish(t, r)
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	mails := sink.Received()
	require.Len(t, mails, 1)
	msg, err := mail.ReadMessage(strings.NewReader(mails[0].Data))
	require.NoError(t, err)
	require.Equal(t, "Your permit_report job job_deadline was canceled", msg.Header.Get("Subject"))
	text, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	require.NoError(t, err)
	require.Contains(t, string(text), "deadline_exceeded: no attempt had started by the job's start_by")
}
