package notifier

import (
	"sync/atomic"

	"github.com/jobgate/jobgate/internal/metrics"
)

// Stats are the notifier's counters since start, for logs, tests and the
// metrics endpoint.
type Stats struct {
	Events            int64 // events handled to the end (acknowledged)
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

type counters struct {
	events, webhooksDelivered, webhookRetries, webhooksFailed, webhooksRefused, endpointsDisabled atomic.Int64
	mailsSent, mailsDuplicate, mailRetries, mailsFailed, mailsUncertain                           atomic.Int64
}

// Stats returns a snapshot of the counters.
func (n *Notifier) Stats() Stats {
	c := &n.stats
	return Stats{
		Events: c.events.Load(), WebhooksDelivered: c.webhooksDelivered.Load(), WebhookRetries: c.webhookRetries.Load(),
		WebhooksFailed: c.webhooksFailed.Load(), WebhooksRefused: c.webhooksRefused.Load(),
		EndpointsDisabled: c.endpointsDisabled.Load(), MailsSent: c.mailsSent.Load(),
		MailsDuplicate: c.mailsDuplicate.Load(), MailRetries: c.mailRetries.Load(),
		MailsFailed: c.mailsFailed.Load(), MailsUncertain: c.mailsUncertain.Load(),
	}
}

// deliveries are the counters as jobgate_deliveries_total exports them.
func (n *Notifier) deliveries() []metrics.Delivery {
	s := n.Stats()
	return []metrics.Delivery{
		{Channel: "webhook", Outcome: "delivered", Count: float64(s.WebhooksDelivered)},
		{Channel: "webhook", Outcome: "retry", Count: float64(s.WebhookRetries)},
		{Channel: "webhook", Outcome: "failed", Count: float64(s.WebhooksFailed)},
		{Channel: "webhook", Outcome: "refused", Count: float64(s.WebhooksRefused)},
		{Channel: "webhook", Outcome: "disabled", Count: float64(s.EndpointsDisabled)},
		{Channel: "mail", Outcome: "sent", Count: float64(s.MailsSent)},
		{Channel: "mail", Outcome: "duplicate", Count: float64(s.MailsDuplicate)},
		{Channel: "mail", Outcome: "retry", Count: float64(s.MailRetries)},
		{Channel: "mail", Outcome: "failed", Count: float64(s.MailsFailed)},
		{Channel: "mail", Outcome: "uncertain", Count: float64(s.MailsUncertain)},
	}
}
