// Package netns gives the partition chaos run (make chaos-partitions) a
// network it can cut: one Linux network namespace per NATS node, each
// joined to a bridge on the host by a veth pair, with an address of its own
// on a private /24 the host also has an address on. Processes run in a node's
// namespace through `ip netns exec`; clients stay on the host and reach every
// namespace over the bridge.
//
// Faults are nftables rules inside the namespaces (a table of this
// package's own, replaced whole on each change): Partition drops the packets
// between nodes of different groups, Isolate also those between a node and
// the host, Heal removes the rules. Dropping (not rejecting) makes a cut look
// like a dead link: established TCP connections hang until their own
// timeouts, as across a real partition.
//
// Everything is created by Setup and removed by Close; Setup first removes
// what an earlier run left behind whose process is gone (a run killed with
// SIGKILL cannot clean up after itself). It needs root, iproute2 and nft.
package netns
