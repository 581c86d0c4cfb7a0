// Package check holds the tests of the deployment kit under deploy/: the
// Helm chart renders through Helm's own Go engine into objects that decode
// strictly into k8s.io/api types, the Compose file loads with compose-go,
// the systemd units in deploy/systemd pass systemd-analyze verify and its
// offline security rating, and every setting any of them passes is one
// jobgate reads, every command and flag one it has. It is a module of its
// own so that Helm's and Kubernetes' dependency trees stay out of
// jobgate's go.mod; `make test` runs it.
package check
