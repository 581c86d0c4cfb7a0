// Package natsserver is the embedded NATS server and who may log in to it:
// the in-process server with JetStream that `jobgate serve` runs when no
// external NATS is configured (StartEmbedded, Embedded and its in-process
// connections; StartEmbedded refuses a storage reservation its disk cannot
// hold, disk.go), and, when it also listens for network clients, their
// authentication (TenantAuth): in-process connections keep full access,
// every network client logs in as a tenant's event subscriber (TenantUser,
// TenantPassword, confined by TenantPermissions to that tenant's events) or
// as a worker credential for its types (WorkerUser, WorkerPassword,
// confined by WorkerPermissions to those types' protocol requests), whose
// passwords derive from the data dir's secret (SubscriberSecret), so
// `jobgate nats-user` mints them without the server and the server accepts
// them without a restart. Besides the test cluster (test/clustertest),
// it is the one package of jobgate that imports nats-server: the JetStream
// adapters it builds on (internal/natsjs) and the public pkg/worker and
// pkg/client link none of it (test/archtest checks).
package natsserver
