//go:build !unix

package system

// lockDataDir does not lock on systems without flock; one process per data
// dir is then the operator's duty.
func lockDataDir(string) (func(), error) { return func() {}, nil }
