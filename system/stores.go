package system

import (
	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/notifier"
)

// The services take the adapters they declare (each package's Stores), not
// the provisioned resources whole: this is the one place that maps
// natsjs.Resources to them. A harness that builds a service by hand calls
// these, and replaces a field to stub one adapter.

// GatewayStores are the gateway's adapters on res.
func GatewayStores(res *natsjs.Resources) gateway.Stores {
	return gateway.Stores{
		Jobs: res.Jobs, Work: res.Work, Events: res.Events, Secrets: res.Secrets, Files: res.Files, Types: res.Types,
		Batches: res.Batches, Storage: res, Changes: res.Jobs, Log: index.StoreSource(res.Jobs), Slots: res.Slots,
	}
}

// DispatcherStores are the dispatcher's adapters on res, its broker's
// included.
func DispatcherStores(res *natsjs.Resources) dispatcher.Stores {
	return dispatcher.Stores{Jobs: res.Jobs, Work: res.Work, Events: res.Events, Schedule: res.Schedule, Broker: BrokerStores(res)}
}

// BatchRelayStores are the batch relay's adapters on res.
func BatchRelayStores(res *natsjs.Resources) dispatcher.BatchRelayStores {
	return dispatcher.BatchRelayStores{Batches: res.Batches, Items: res.Jobs}
}

// BrokerStores are the broker's adapters on res, answering on res's
// connection.
func BrokerStores(res *natsjs.Resources) broker.Stores {
	return broker.Stores{
		Jobs: res.Jobs, Work: res.Work, Events: res.Events, Secrets: res.Secrets, Types: res.Types, Results: res,
		Slots: res.Slots, Conn: res.JS.Conn(),
	}
}

// NotifierStores are the notifier's adapters on res.
func NotifierStores(res *natsjs.Resources) notifier.Stores {
	return notifier.Stores{Events: res.Events, Deliveries: res.Deliveries, Notices: res.Notices, Jobs: res.Jobs, Batches: res.Batches}
}
