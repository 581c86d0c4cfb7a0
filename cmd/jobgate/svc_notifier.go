package main

import (
	"fmt"
	"os"

	"github.com/jobgate/jobgate/notifier"
	"github.com/jobgate/jobgate/pkg/job"
)

// newNotifier builds the notifier from the runtime's settings. Without an
// SMTP host, mails land as .eml files in <data dir>/outbox.
func newNotifier(rt *process) (service, error) {
	c := rt.cfg.Notifier
	host, _ := os.Hostname()
	cfg := notifier.Config{
		Webhooks:     map[string][]notifier.Webhook{},
		AllowPrivate: c.AllowPrivateWebhooks,
		Retries:      c.WebhookRetries,
		Mail: notifier.Mail{
			Host: c.Mail.SMTPHost, Port: c.Mail.SMTPPort, Username: c.Mail.Username, Password: c.Mail.Password,
			From: c.Mail.From, Addresses: c.Mail.Addresses, Outbox: rt.cfg.Path("outbox"),
		},
		MaxPendingPerDestination: c.MaxPendingPerDestination,
		DestinationConcurrency:   c.DestinationConcurrency,
		Instance:                 fmt.Sprintf("%s-%d", host, os.Getpid()),
		BaseURL:                  "http://" + rt.cfg.HTTPAddr,
		ResultTTL:                rt.cfg.ResultTTL,
	}
	for tenant, hooks := range c.Webhooks {
		for _, h := range hooks {
			w := notifier.Webhook{URL: h.URL, Secret: h.Secret}
			for _, s := range h.States {
				w.States = append(w.States, job.State(s))
			}
			cfg.Webhooks[tenant] = append(cfg.Webhooks[tenant], w)
		}
	}
	cfg.Metrics = rt.metrics
	n, err := notifier.New(cfg, rt.res, rt.log.With("service", "notifier"))
	if err != nil {
		return nil, err
	}
	return n, nil
}
