package conformance

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// T is what a scenario needs of its test: *testing.T in the Go suite, a
// scenario of the runner (Run) otherwise. require's assertions take it.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
	TempDir() string
}

// scenarioT is a scenario's T in the runner: FailNow ends the scenario's
// goroutine, as testing.T's does, and the cleanups run when it is done.
type scenarioT struct {
	mu       sync.Mutex
	failed   bool
	errors   []string
	logs     []string
	cleanups []func()
	dirs     []string
}

var _ T = (*scenarioT)(nil)

func (s *scenarioT) Helper() {}

func (s *scenarioT) Errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
	s.errors = append(s.errors, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (s *scenarioT) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	s.FailNow()
}

func (s *scenarioT) FailNow() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	runtime.Goexit()
}

func (s *scenarioT) Logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = append(s.logs, fmt.Sprintf(format, args...))
}

func (s *scenarioT) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *scenarioT) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *scenarioT) TempDir() string {
	dir, err := os.MkdirTemp("", "jobgate-conformance-")
	if err != nil {
		s.Fatalf("temp dir: %v", err)
	}
	s.mu.Lock()
	s.dirs = append(s.dirs, dir)
	s.mu.Unlock()
	return dir
}

// runScenario runs f as a scenario and returns its T once it has ended
// and its cleanups have run (last registered first, as testing does).
func runScenario(f func(T)) *scenarioT {
	s := runUntilDone(f)
	s.finish()
	return s
}

// finish runs the cleanups (each on its own goroutine, so a FailNow in
// one ends only that one) and removes the temp dirs.
func (s *scenarioT) finish() {
	s.mu.Lock()
	cleanups := slices.Clone(s.cleanups)
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		done := make(chan struct{})
		go func() {
			defer close(done)
			cleanups[i]()
		}()
		<-done
	}
	for _, d := range s.dirs {
		_ = os.RemoveAll(d)
	}
}
