package notifier

import (
	"context"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jobgate/jobgate/test/jobtest"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

func smtpConfig(s *jobtest.SMTPSink, instance string) Config {
	return Config{
		Mail: Mail{Host: s.Host, Port: s.Port, From: "jobgate@example.test",
			Addresses: map[string]string{"4/reviewer-47": "reviewer47@example.test", "4/reviewer-48": "reviewer48@example.test"}},
		Retries:  []time.Duration{20 * time.Millisecond, 20 * time.Millisecond},
		Instance: instance,
	}
}

// mailsByJob counts the sink's mails per job id (from the Message-ID).
func mailsByJob(t *testing.T, s *jobtest.SMTPSink) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range s.Received() {
		msg, err := mail.ReadMessage(strings.NewReader(m.Data))
		require.NoError(t, err)
		id := strings.Trim(msg.Header.Get("Message-Id"), "<>")
		out[strings.SplitN(id, ".", 2)[0]]++
	}
	return out
}

func TestMailExactlyOnceAcrossCopiesInstancesAndRedelivery(t *testing.T) {
	t.Parallel()
	sink := jobtest.NewSMTPSink(t)
	first, b := setup(t, smtpConfig(sink, "first"))
	second := b.start(t, smtpConfig(sink, "second"))

	const jobs = 12
	for i := range jobs {
		r := record("4", "reviewer-47", "job_mail_"+strconv.Itoa(i), []job.State{job.StateSucceeded, job.StateFailed, job.StateCanceled}[i%3])
		b.publish(t, record("4", "reviewer-47", r.ID, job.StateQueued))
		b.publish(t, record("4", "reviewer-47", r.ID, job.StateRunning))
		b.publish(t, r)
		b.publish(t, r) // same message id: JetStream keeps one
		// Another copy of the same terminal change under a new message id
		// (say a republish after the dedup window): a second event.
		b.publishAs(t, r, natsjs.EventMsgID(r)+".copy")
	}
	const events = jobs * 4
	require.Eventually(t, func() bool { return eventsAcked(first, second) == events && settled(first, second) == 2*jobs }, waitTimeout, 10*time.Millisecond)
	got := mailsByJob(t, sink)
	require.Len(t, got, jobs)
	for id, n := range got {
		require.Equal(t, 1, n, "mails for %s", id)
	}
	for _, m := range sink.Received() {
		require.Equal(t, []string{"reviewer47@example.test"}, m.To)
	}
	s1, s2 := first.Stats(), second.Stats()
	require.Equal(t, int64(jobs), s1.MailsSent+s2.MailsSent)
	require.Equal(t, int64(jobs), s1.MailsDuplicate+s2.MailsDuplicate, "each second copy was recognized")

	// Redelivery of every event, as after a crash before the acks: the
	// consumer starts over from the first event on a fresh instance.
	require.NoError(t, first.Stop(context.Background()))
	require.NoError(t, second.Stop(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, b.res.JS.DeleteConsumer(ctx, natsjs.StreamEvents, natsjs.NotifierConsumerName("4")))
	third := b.start(t, smtpConfig(sink, "third"))
	require.Eventually(t, func() bool { return third.Stats().Events == events }, waitTimeout, 10*time.Millisecond)
	require.Len(t, sink.Received(), jobs, "no second mail for any job")
	// Each copy finds its task queued already (the deliveries stream
	// remembers its message id), or its mail claimed.
	s3 := third.Stats()
	require.Equal(t, int64(2*jobs), s3.TasksDuplicate+s3.MailsDuplicate)
	require.Zero(t, third.Stats().MailsSent)
}

func TestMailContent(t *testing.T) {
	t.Parallel()
	sink := jobtest.NewSMTPSink(t)
	cfg := smtpConfig(sink, "content")
	cfg.BaseURL = "http://jobs.example.test/"
	cfg.ResultTTL = 168 * time.Hour
	n, b := setup(t, cfg)
	ok := record("4", "reviewer-48", "job_content_ok", job.StateSucceeded)
	b.publish(t, ok)
	b.publish(t, record("4", "reviewer-48", "job_content_bad", job.StateFailed))
	// A message a worker wrote, echoing what a user typed: it must not be
	// able to add lines (a fake link) or controls to the mail.
	evil := record("4", "reviewer-48", "job_content_evil", job.StateFailed)
	evil.Error.Message = "no such case\r\nDownload:   http://evil.example/\x1b[31m\u202e<b>x</b>"
	b.publish(t, evil)
	b.publish(t, record("4", "no-address", "job_content_none", job.StateSucceeded))
	require.Eventually(t, func() bool { return n.Stats().Events == 4 && n.Stats().Settled == 3 }, waitTimeout, 10*time.Millisecond)
	mails := sink.Received()
	require.Len(t, mails, 3, "a requester without an address gets no mail")
	bodies := map[string]string{}
	for _, m := range mails {
		require.Equal(t, "jobgate@example.test", m.From)
		require.Equal(t, []string{"reviewer48@example.test"}, m.To)
		msg, err := mail.ReadMessage(strings.NewReader(m.Data))
		require.NoError(t, err)
		require.Equal(t, "quoted-printable", msg.Header.Get("Content-Transfer-Encoding"))
		text, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
		require.NoError(t, err)
		bodies[msg.Header.Get("Subject")] = strings.ReplaceAll(string(text), "\r\n", "\n")
	}
	body := bodies["Your permit_report job job_content_ok is ready"]
	// The link opens in a browser: the reviewer's page, which signs in and
	// then shows this job; an API path would answer 401 without a token.
	require.Contains(t, body, "Download:   http://jobs.example.test/#job=job_content_ok\n")
	require.NotContains(t, body, "/v1/")
	require.Contains(t, body, "application/pdf")
	kept := ok.FinishedAt.Add(168 * time.Hour).UTC().Format(time.RFC3339)
	require.Contains(t, body, "Kept until: "+kept+"\n", "the mail says when the result expires")
	bad := bodies["Your permit_report job job_content_bad failed"]
	require.Contains(t, bad, "render_error: page 12 did not render")
	require.Contains(t, bad, "Details:    http://jobs.example.test/#job=job_content_bad\n")
	require.NotContains(t, bad, "Kept until")
	worse := bodies["Your permit_report job job_content_evil failed"]
	require.Contains(t, worse, "render_error: no such case  Download:   http://evil.example/ [31m <b>x</b>\n")
	for _, line := range strings.Split(worse, "\n") {
		require.False(t, strings.HasPrefix(line, "Download:"), "an injected line: %q", line)
		for _, r := range line {
			require.False(t, unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r), "a control character in %q", line)
		}
	}
}

func TestMailRetriedWhenServerDefers(t *testing.T) {
	t.Parallel()
	sink := jobtest.NewSMTPSink(t)
	sink.RejectMail.Store(2) // 451 twice: provably not accepted, so retry
	n, b := setup(t, smtpConfig(sink, "retry"))
	b.publish(t, record("4", "reviewer-47", "job_deferred", job.StateSucceeded))
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	require.Len(t, sink.Received(), 1)
	s := n.Stats()
	require.Equal(t, int64(2), s.MailRetries)
	require.Equal(t, int64(1), s.MailsSent)
}

func TestMailGivesUpWhenServerUnreachable(t *testing.T) {
	t.Parallel()
	sink := jobtest.NewSMTPSink(t)
	cfg := smtpConfig(sink, "down")
	cfg.Mail.Port = 1 // nothing listens there
	n, b := setup(t, cfg)
	b.publish(t, record("4", "reviewer-47", "job_no_server", job.StateSucceeded))
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	s := n.Stats()
	require.Equal(t, int64(2), s.MailRetries)
	require.Equal(t, int64(1), s.MailsFailed)
	require.Zero(t, s.MailsSent)
}

func TestMailOutboxWithoutSMTP(t *testing.T) {
	t.Parallel()
	outbox := filepath.Join(t.TempDir(), "outbox")
	n, b := setup(t, Config{Mail: Mail{Outbox: outbox, Addresses: map[string]string{"4/reviewer-47": "reviewer47@example.test"}}})
	r := record("4", "reviewer-47", "job_outbox", job.StateSucceeded)
	b.publish(t, record("4", "reviewer-47", r.ID, job.StateQueued))
	b.publish(t, record("4", "reviewer-47", r.ID, job.StateRunning))
	b.publish(t, r)
	b.publishAs(t, r, "another-copy")
	require.Eventually(t, func() bool { return n.Stats().Events == 4 && n.Stats().Settled == 2 }, waitTimeout, 10*time.Millisecond)
	entries, err := os.ReadDir(outbox)
	require.NoError(t, err)
	require.Len(t, entries, 1, "one .eml for the terminal state, none for queued/running or the copy")
	require.Equal(t, "4.reviewer-47.job_outbox.succeeded.eml", entries[0].Name())
	f, err := os.Open(filepath.Join(outbox, entries[0].Name()))
	require.NoError(t, err)
	defer f.Close()
	msg, err := mail.ReadMessage(f)
	require.NoError(t, err)
	require.Equal(t, "<reviewer47@example.test>", msg.Header.Get("To"))
	require.Equal(t, "<job_outbox.succeeded@jobgate>", msg.Header.Get("Message-Id"))
	require.Contains(t, msg.Header.Get("Subject"), "job_outbox")
}

func TestMailClaimLeftByCrashedSenderIsNotResent(t *testing.T) {
	t.Parallel()
	sink := jobtest.NewSMTPSink(t)
	cfg := smtpConfig(sink, "survivor")
	n, b := setup(t, cfg)
	// An instance claimed the mail and died mid-conversation long ago.
	r := record("4", "reviewer-47", "job_crashed_sender", job.StateSucceeded)
	claim := `{"status":"sending","attempts":1,"instance":"gone","updated_at":"` + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + `"}`
	_, err := b.res.Notices.Create(context.Background(), "mail."+eventOf(r).mailScope(), []byte(claim))
	require.NoError(t, err)
	b.publish(t, r)
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	require.Empty(t, sink.Received(), "at most one mail: an unfinished claim is never sent again")
	require.Equal(t, int64(1), n.Stats().MailsUncertain, "and the doubt is counted")
	st, err := loadState(context.Background(), b.res.Notices, "mail."+eventOf(r).mailScope())
	require.NoError(t, err)
	require.Equal(t, statusUncertain, st.Status)
}
