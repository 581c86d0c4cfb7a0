package system

import (
	"github.com/nats-io/nats.go"
)

// natsAsyncError logs what a connection's subscriptions and the server
// report asynchronously: a subscription whose messages the client dropped
// (a slow consumer; for a JetStream pull that is a delivery back only
// after the consumer's ack wait, or a pull request's end never heard), or
// a permission refused. nats.go reports a slow consumer once until the
// subscription catches up, so this does not flood.
func (s *System) natsAsyncError(conn string) nats.ErrHandler {
	log := s.log.With("component", "nats", "connection", "jobgate-"+conn)
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if sub == nil {
			log.Warn("nats connection error", "err", err)
			return
		}
		dropped, _ := sub.Dropped()
		log.Warn("nats subscription error", "subject", sub.Subject, "dropped", dropped, "err", err)
	}
}
