//go:build !linux

package schemapool

// background runs f: only Linux lowers a thread's priority.
func background(f func()) { f() }
