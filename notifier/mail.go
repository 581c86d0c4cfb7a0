package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/wneessen/go-mail"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// sendResult is what a mail attempt tells about the message.
type sendResult int

const (
	// mailSent: the server (or the outbox) has the message.
	mailSent sendResult = iota
	// mailNotSent: it provably does not; trying again cannot duplicate it.
	mailNotSent
	// mailRejected: the server refused it for good (5xx); do not retry.
	mailRejected
	// mailUncertain: the conversation broke after the message was complete;
	// it may have been accepted. Never retried (at most one mail).
	mailUncertain
)

// mailer hands a message to the mail system.
type mailer interface {
	send(ctx context.Context, m *mail.Msg, name string) (sendResult, error)
}

// runMail sends the one mail of a terminal event, unless it was sent (or
// claimed) before by any instance for any copy of this event.
func (n *Notifier) runMail(ctx context.Context, ev *event, addr string) outcome {
	scope := ev.mailScope()
	claimKey, tryKey := "mail."+scope, "mailtry."+scope
	log := n.log.With("tenant", ev.Tenant, "requester", ev.Requester, "job", ev.Job.ID, "state", ev.Job.State, "event", ev.ID)
	if done, err := n.mailClaimed(ctx, claimKey, log); err != nil {
		return n.transient(ctx, log, err)
	} else if done {
		return finished
	}
	st, err := loadState(ctx, n.notices, tryKey)
	if err != nil {
		return n.transient(ctx, log, err)
	}
	if st.final() {
		return finished
	}
	if n.cfg.Now().Before(st.NextAt) {
		return outcome{due: st.NextAt}
	}
	// The claim: of all copies of this event, on all instances, one creates
	// the key and only that one talks to the mail server.
	claim := deliveryState{Status: statusSending, Attempts: st.Attempts + 1, Instance: n.cfg.Instance, UpdatedAt: n.cfg.Now().UTC()}
	data, _ := json.Marshal(claim)
	rev, err := n.notices.Create(ctx, claimKey, data)
	if errors.Is(err, natsjs.ErrExists) {
		n.stats.mailsDuplicate.Add(1)
		log.DebugContext(ctx, "mail already claimed by another delivery")
		return finished
	}
	if err != nil {
		return n.transient(ctx, log, err)
	}
	st.Attempts++
	build := n.buildMail
	if ev.batch != nil {
		build = n.buildBatchMail
	}
	msg, name, err := build(ev, addr)
	var res sendResult
	if err != nil {
		res = mailRejected
	} else {
		// The attempt's span, a child of the job's trace: the server,
		// never the addresses.
		var attrs []attribute.KeyValue
		if h := n.cfg.Mail.Host; h != "" {
			attrs = append(attrs, attribute.String("server.address", h), attribute.Int("server.port", n.cfg.Mail.Port))
		} else {
			attrs = append(attrs, attribute.Bool("jobgate.mail.outbox", true))
		}
		var sctx context.Context
		var span trace.Span
		sctx, span = n.startDeliverySpan(ctx, "mail send", "mail", ev, st.Attempts, attrs...)
		res, err = n.mail.send(sctx, msg, name)
		endDeliverySpan(span, map[sendResult]string{mailSent: spanSent, mailNotSent: spanNotSent, mailRejected: spanRejected,
			mailUncertain: spanUncertain}[res])
		ctx = trace.ContextWithSpan(ctx, span) // the attempt's log lines name its span
	}
	// The claim's fate is written even when the handler is being stopped:
	// a release lost here would mean the mail is never sent.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	update := func(status string, cause error) {
		claim.Status, claim.UpdatedAt = status, n.cfg.Now().UTC()
		if cause != nil {
			claim.LastError = cause.Error()
		}
		data, _ := json.Marshal(claim)
		if _, err := n.notices.Update(wctx, claimKey, data, rev); err != nil {
			log.WarnContext(ctx, "could not record the mail's outcome; its claim stays, so it is not sent again", "status", status, "err", err)
		}
	}
	switch res {
	case mailSent:
		n.stats.mailsSent.Add(1)
		log.InfoContext(ctx, "mail sent", "attempt", st.Attempts)
		update(statusSent, nil)
		return finished
	case mailUncertain:
		n.stats.mailsUncertain.Add(1)
		log.ErrorContext(ctx, "mail may not have been delivered; not retried so it cannot arrive twice", "err", err)
		update(statusUncertain, err)
		return finished
	case mailRejected:
		n.stats.mailsFailed.Add(1)
		log.ErrorContext(ctx, "mail rejected for good", "err", err)
		update(statusFailed, err)
		return finished
	}
	if st.Attempts > len(n.cfg.Retries) {
		n.stats.mailsFailed.Add(1)
		log.ErrorContext(ctx, "mail failed for good", "attempts", st.Attempts, "err", err)
		update(statusFailed, err)
		return finished
	}
	// Not sent: release the claim so a later attempt (by any instance) may
	// send. If the release fails the claim stays and no mail is ever sent:
	// the at-most-once side of the trade-off.
	if err := n.notices.Delete(wctx, claimKey, rev); err != nil {
		n.stats.mailsFailed.Add(1)
		log.ErrorContext(ctx, "mail not sent and its claim could not be released: giving up", "err", err)
		return finished
	}
	delay := n.backoff(st.Attempts, 0)
	st.Status, st.NextAt, st.LastError, st.Instance = statusPending, n.cfg.Now().Add(delay), err.Error(), n.cfg.Instance
	n.stats.mailRetries.Add(1)
	log.WarnContext(ctx, "mail not sent, will retry", "attempt", st.Attempts, "err", err, "retry_in", delay)
	if err := n.putState(wctx, tryKey, st); err != nil {
		return n.transient(ctx, log, err)
	}
	return outcome{due: st.NextAt}
}

// mailClaimed reports whether a mail for this state was claimed already. A
// claim still "sending" long after any send could have finished was left by
// a crashed instance: it is marked uncertain and not sent again.
func (n *Notifier) mailClaimed(ctx context.Context, claimKey string, log *slog.Logger) (bool, error) {
	value, rev, err := n.notices.Get(ctx, claimKey)
	if errors.Is(err, job.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", claimKey, err)
	}
	var claim deliveryState
	_ = json.Unmarshal(value, &claim)
	if claim.Status == statusSending && n.cfg.Now().Sub(claim.UpdatedAt) > n.cfg.Mail.Timeout+n.cfg.AckWait {
		claim.Status, claim.LastError, claim.UpdatedAt = statusUncertain, "claimed by "+claim.Instance+", which never recorded the outcome", n.cfg.Now().UTC()
		data, _ := json.Marshal(claim)
		if _, err := n.notices.Update(ctx, claimKey, data, rev); err == nil {
			n.stats.mailsUncertain.Add(1)
			log.ErrorContext(ctx, "mail claimed by an instance that stopped while sending; not sent again (at most one mail)", "claimed_by", claim.Instance)
		}
		return true, nil
	}
	n.stats.mailsDuplicate.Add(1)
	return true, nil
}

// buildMail writes the notice of a terminal event. Its links open the
// reviewer's page on this job (`<base>/#job=<id>`): a person reads the mail
// in a browser-less client, clicks, signs in and sees the job with its
// Download button; an API path would answer 401 without a bearer token.
// Every string that did not come from jobgate itself (a worker's error
// message, which may echo what a user typed) goes through plain() so it
// cannot add lines or controls to the mail.
func (n *Notifier) buildMail(ev *event, addr string) (*mail.Msg, string, error) {
	r := ev.Job
	m := mail.NewMsg()
	if err := m.From(n.cfg.Mail.From); err != nil {
		return nil, "", fmt.Errorf("mail from: %w", err)
	}
	if err := m.To(addr); err != nil {
		return nil, "", fmt.Errorf("mail to: %w", err)
	}
	verb := map[job.State]string{job.StateSucceeded: "is ready", job.StateFailed: "failed", job.StateCanceled: "was canceled"}[r.State]
	typ, id := plain(r.Type, 64), plain(r.ID, 64)
	m.Subject(fmt.Sprintf("Your %s job %s %s", typ, id, verb))
	// The same Message-ID for any copy lets a mail client fold duplicates,
	// should an operator ever resend by hand.
	m.SetMessageIDWithValue(r.ID + "." + string(r.State) + "@jobgate")
	m.SetDateWithValue(n.cfg.Now())
	m.SetGenHeader("Auto-Submitted", "auto-generated")
	m.SetGenHeader("X-Jobgate-Event", ev.ID)

	page := n.jobPage(r.ID)
	var b strings.Builder
	fmt.Fprintf(&b, "Your %s job %s %s.\n\n", typ, id, verb)
	fmt.Fprintf(&b, "State:      %s\n", r.State)
	fmt.Fprintf(&b, "Attempts:   %d\n", r.Attempt)
	fmt.Fprintf(&b, "Submitted:  %s\n", r.CreatedAt.UTC().Format(time.RFC3339))
	if r.FinishedAt != nil {
		fmt.Fprintf(&b, "Finished:   %s\n", r.FinishedAt.UTC().Format(time.RFC3339))
	}
	if r.Error != nil {
		fmt.Fprintf(&b, "Error:      %s: %s\n", plain(string(r.Error.Category), 64), plain(r.Error.Message, 500))
	}
	if r.Result != nil {
		fmt.Fprintf(&b, "Result:     %s, %d bytes, sha256 %s\n", plain(r.Result.ContentType, 128), r.Result.Size, plain(r.Result.SHA256, 64))
		if r.FinishedAt != nil && n.cfg.ResultTTL > 0 {
			// The file is stored just before the job is marked finished, so
			// it goes at this time or a moment before.
			fmt.Fprintf(&b, "Kept until: %s\n", r.FinishedAt.Add(n.cfg.ResultTTL).UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(&b, "Download:   %s\n", page)
		b.WriteString("\nThe link opens the reviewer's page: sign in as usual, then press Download PDF.\n")
	} else {
		fmt.Fprintf(&b, "Details:    %s\n", page)
		b.WriteString("\nThe link opens the reviewer's page: sign in as usual to see the job.\n")
	}
	b.WriteString("This notice is sent once per job.\n")
	m.SetBodyString(mail.TypeTextPlain, b.String())
	name := ev.Tenant + "." + ev.Requester + "." + keyToken(r.ID) + "." + string(r.State) + ".eml"
	return m, name, nil
}

// jobPage is the link a mail gives to a job: the reviewer's page on it.
func (n *Notifier) jobPage(id string) string {
	return n.cfg.BaseURL + "/#job=" + url.QueryEscape(id)
}

// plain makes s safe to show on one line of a plain-text mail: control and
// bidirectional-override characters (which could add lines, fake a link or
// reorder what the reader sees) become spaces, and it is cut to max runes.
func plain(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) ||
			r == '\u2028' || r == '\u2029' {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// smtpMailer sends through an SMTP server.
type smtpMailer struct{ cfg Mail }

func (s *smtpMailer) send(ctx context.Context, m *mail.Msg, _ string) (sendResult, error) {
	opts := []mail.Option{
		mail.WithPort(s.cfg.Port),
		mail.WithTimeout(s.cfg.Timeout),
	}
	if s.cfg.Port == 465 {
		opts = append(opts, mail.WithSSL())
	} else {
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	}
	if s.cfg.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(s.cfg.Username), mail.WithPassword(s.cfg.Password))
	}
	c, err := mail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return mailRejected, fmt.Errorf("mail client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	err = c.DialAndSendWithContext(ctx, m)
	return classifySend(m, err), err
}

// classifySend decides from go-mail's answer whether the server has the
// message. Only a failure before the end of DATA, or an explicit refusal of
// it, proves it does not.
func classifySend(m *mail.Msg, err error) sendResult {
	if err == nil || m.IsDelivered() { // a failed QUIT after acceptance is still sent
		return mailSent
	}
	var se *mail.SendError
	if !errors.As(err, &se) {
		return mailNotSent // dial, TLS or auth failure: no transaction began
	}
	code := se.ErrorCode()
	switch {
	case se.Reason == mail.ErrSMTPDataClose && code < 400:
		return mailUncertain // the final "." went out, its answer did not come back
	case code >= 500:
		return mailRejected
	}
	return mailNotSent
}

// outboxMailer writes each mail as an .eml file into a directory, for
// deployments without a mail server.
type outboxMailer struct{ dir string }

func (o *outboxMailer) send(_ context.Context, m *mail.Msg, name string) (sendResult, error) {
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return mailNotSent, fmt.Errorf("outbox: %w", err)
	}
	// Write aside and rename: the outbox never shows half a mail.
	f, err := os.CreateTemp(o.dir, ".tmp-*.eml")
	if err != nil {
		return mailNotSent, fmt.Errorf("outbox: %w", err)
	}
	_, werr := m.WriteTo(f)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return mailNotSent, fmt.Errorf("outbox: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(o.dir, name)); err != nil {
		_ = os.Remove(f.Name())
		return mailNotSent, fmt.Errorf("outbox: %w", err)
	}
	return mailSent, nil
}
