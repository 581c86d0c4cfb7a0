// Package client is jobgate's Go SDK: it submits work so that no logical
// request is ever lost or doubled. Each submission's idempotency key is made
// once and written, with the request's fingerprint, to a durable journal
// (bbolt) before the first attempt; every retry — after a timeout, a reset
// connection, 429, 503 or another 5xx — and every resumption after a crash
// reuses it, so the server admits exactly one job. It reads, lists, cancels
// and waits for jobs (Server-Sent Events when the gateway offers them, else
// long-polls honouring ETag and Retry-After) and downloads results through
// their signed links. The jobgate CLI's client commands are built on it.
package client
