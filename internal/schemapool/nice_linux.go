package schemapool

import (
	"runtime"
	"syscall"
)

// background runs f on an OS thread of its own at the lowest scheduling
// priority (nice 19), so that while it compiles, the kernel gives the
// process's other threads (the submissions, the embedded NATS server)
// the cores first. The thread is not handed back to the runtime: the
// goroutine exits locked to it, and the runtime ends it, with its
// priority.
func background(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
		f()
	}()
	<-done
}
