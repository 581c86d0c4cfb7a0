// Package clustertest runs jobgate against a real three-node JetStream
// cluster inside the test process (three nats-server instances routed on
// loopback, file storage in temp dirs, R3 resources) and proves that the
// components survive a node loss and a gateway crash without duplicate jobs,
// renders or notices. Its helpers (Start, Cluster) are for tests only.
package clustertest
