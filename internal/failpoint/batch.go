package failpoint

// The places of the batch crash tests (docs/reliability.md, "Batches").
const (
	// GatewayBatchAfterCommit is hit after a gateway's commit of a batch
	// record, before it creates any of the batch's jobs.
	GatewayBatchAfterCommit = "gateway.batch-after-commit"
	// DispatcherBatchMidItems is hit by the batch relay once it has
	// created half of a batch's jobs.
	DispatcherBatchMidItems = "dispatcher.batch-mid-items"
)
