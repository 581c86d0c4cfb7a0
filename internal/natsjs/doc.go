// Package natsjs is the only place that knows jobgate's NATS layout: stream,
// bucket and subject names, how they are provisioned, how an embedded server
// is started, and the typed stores the services use on top of JetStream (the
// job record store, the work queue, the event stream, the result objects).
// Services depend on it and on package job; they never name a subject
// themselves.
package natsjs
