// Package check holds the tests of the deployment kit under deploy/: the
// Helm chart renders through Helm's own Go engine into objects that decode
// strictly into k8s.io/api types, the Compose file loads with compose-go,
// and every setting either of them passes is one jobgate reads. It is a
// module of its own so that Helm's and Kubernetes' dependency trees stay
// out of jobgate's go.mod; `make test` runs it.
package check
