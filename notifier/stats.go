package notifier

import (
	"sync/atomic"

	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Stats are the notifier's counters since start, for logs, tests and the
// metrics endpoint.
type Stats struct {
	Events            int64 // events turned into delivery tasks (acknowledged)
	Settled           int64 // delivery tasks done for good (delivered, given up, refused, ...)
	TasksDuplicate    int64 // delivery tasks already queued by an earlier copy of their event
	HeldForOrder      int64 // delivery attempts put off behind an earlier change of the job
	PausedDeliveries  int64 // deliveries put off, unsent, while their endpoint asked for a pause
	WebhooksDropped   int64 // webhook notices dropped: the endpoint had too many pending
	MailsDropped      int64 // mails dropped: the tenant's mail had too many pending
	WebhooksDelivered int64 // deliveries answered 2xx
	WebhookRetries    int64 // failed attempts that will be retried
	WebhooksFailed    int64 // deliveries given up for good (refusals included)
	WebhooksRefused   int64 // deliveries refused: non-public address (SSRF)
	EndpointsDisabled int64 // endpoints disabled by a 410 Gone
	MailsSent         int64 // mails accepted by the server or written to the outbox
	MailsDuplicate    int64 // mails not sent because one was already claimed
	MailRetries       int64 // mail attempts that provably sent nothing and will be retried
	MailsFailed       int64 // mails given up for good
	MailsUncertain    int64 // mails that may or may not have gone out; never retried
}

// counters are the notifier's counts, kept in internal/metrics (one count
// for Stats and /metrics).
type counters struct {
	all                                                                                           *metrics.Deliveries
	events, webhooksDelivered, webhookRetries, webhooksFailed, webhooksRefused, endpointsDisabled prometheus.Counter
	mailsSent, mailsDuplicate, mailRetries, mailsFailed, mailsUncertain                           prometheus.Counter
	webhooksDropped, mailsDropped                                                                 prometheus.Counter
	// Internal to the notifier (tests, logs): how routing and ordering went.
	settled, tasksDuplicate, heldForOrder atomic.Int64
	pausedDeliveries                      atomic.Int64
}

func newCounters() counters {
	d := metrics.NewDeliveries()
	return counters{
		all: d, events: d.Events,
		webhooksDelivered: d.Counter("webhook", "delivered"), webhookRetries: d.Counter("webhook", "retry"),
		webhooksFailed: d.Counter("webhook", "failed"), webhooksRefused: d.Counter("webhook", "refused"),
		endpointsDisabled: d.Counter("webhook", "disabled"),
		mailsSent:         d.Counter("mail", "sent"), mailsDuplicate: d.Counter("mail", "duplicate"),
		mailRetries: d.Counter("mail", "retry"), mailsFailed: d.Counter("mail", "failed"),
		mailsUncertain:  d.Counter("mail", "uncertain"),
		webhooksDropped: d.Counter("webhook", "dropped"), mailsDropped: d.Counter("mail", "dropped"),
	}
}

// Stats returns a snapshot of the counters.
func (n *Notifier) Stats() Stats {
	c := &n.stats
	v := func(m prometheus.Counter) int64 { return int64(metrics.Value(m)) }
	return Stats{
		Events: v(c.events), WebhooksDelivered: v(c.webhooksDelivered), WebhookRetries: v(c.webhookRetries),
		WebhooksFailed: v(c.webhooksFailed), WebhooksRefused: v(c.webhooksRefused),
		EndpointsDisabled: v(c.endpointsDisabled), MailsSent: v(c.mailsSent),
		MailsDuplicate: v(c.mailsDuplicate), MailRetries: v(c.mailRetries),
		MailsFailed: v(c.mailsFailed), MailsUncertain: v(c.mailsUncertain),
		WebhooksDropped: v(c.webhooksDropped), MailsDropped: v(c.mailsDropped),
		Settled: c.settled.Load(), TasksDuplicate: c.tasksDuplicate.Load(), HeldForOrder: c.heldForOrder.Load(),
		PausedDeliveries: c.pausedDeliveries.Load(),
	}
}
