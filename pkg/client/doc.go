// Package client is jobgate's Go SDK: it submits work so that no logical
// request is ever lost or doubled. Each submission's idempotency key is made
// once; every retry — after a timeout, a reset connection, 429, 503 or
// another 5xx — reuses it, so the server admits exactly one job. With
// WithJournal the key is also written, with the request's fingerprint, to a
// durable journal (bbolt) before the first attempt, and every resumption
// after a crash reuses it too; without it nothing is written to disk. It reads, lists, cancels
// and waits for jobs (Server-Sent Events when the gateway offers them, else
// long-polls honouring ETag and Retry-After) and downloads results through
// their signed links. The jobgate CLI's client commands are built on it
// (with a journal). Its types are pkg/api's.
package client
