// Package startstop is the one lifecycle of jobgate's services (gateway,
// dispatcher, notifier, renderer, pkg/worker's Workers), modelled on River's
// startstop package but with a start-up bound instead of a run context:
//
//   - Start(ctx) returns once the service runs. ctx bounds only the start-up
//     (connecting, provisioning, the first load); the service then runs until
//     Stop, and ending ctx after Start returned changes nothing. The service's
//     loops run on a context of their own that keeps ctx's values.
//   - Stop(ctx) stops the service and returns once it stopped. It honours
//     ctx's deadline: when the drain does not finish in time it forces what it
//     can (in-flight operations are cancelled) and returns an error wrapping
//     ctx.Err(). It is safe to call more than once (later calls wait for the
//     stop under way and return how it ended) and before or without Start (nil). It never
//     waits behind a start-up in progress: it cancels the start-up, whose Start
//     returns an error wrapping ErrStopped.
//
// A service keeps a Lifecycle and hands it its start and stop functions.
package startstop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrStopped is the cause of the contexts Stop ends, and what Start returns
// (wrapped) when Stop came first or during the start-up.
var ErrStopped = errors.New("service stopped")

// ErrStarted is returned by a second Start.
var ErrStarted = errors.New("service already started")

// ForceGrace is how long Wait gives forced work to end after the stop's
// deadline passed: long enough for cancelled operations to return, short
// enough that Stop still returns about when its caller asked.
const ForceGrace = 500 * time.Millisecond

// StartFunc starts a service. startCtx ends when Start's ctx ends or Stop
// is called; runCtx, on which the service's loops run, ends only when Stop
// is called (its cause ErrStopped). A StartFunc that fails undoes what it
// started before it returns.
type StartFunc func(startCtx, runCtx context.Context) error

// StopFunc stops a service that started: runCtx has ended already. It
// drains within ctx, forces the rest when ctx ends, and then returns an
// error wrapping ctx.Err() (Wait does this for one wait).
type StopFunc func(ctx context.Context) error

type state int

const (
	idle state = iota
	starting
	running
	stopping
	stopped
)

// Lifecycle is the state of one service. The zero value is ready; it is
// used once: a stopped (or failed) service does not start again.
type Lifecycle struct {
	mu        sync.Mutex
	state     state
	stop      StopFunc
	cancelRun context.CancelCauseFunc
	startDone chan struct{} // closed when the start-up ended
	startErr  error
	done      chan struct{} // closed when the service is stopped
	stopErr   error
}

// Start runs start (see StartFunc) and records stop for Stop.
func (l *Lifecycle) Start(ctx context.Context, start StartFunc, stop StopFunc) error {
	l.mu.Lock()
	switch l.state {
	case idle:
	case stopping, stopped:
		l.mu.Unlock()
		return fmt.Errorf("start: %w", ErrStopped)
	default:
		l.mu.Unlock()
		return ErrStarted
	}
	runCtx, cancelRun := context.WithCancelCause(context.WithoutCancel(ctx))
	startCtx, cancelStart := context.WithCancelCause(ctx)
	unbind := context.AfterFunc(runCtx, func() { cancelStart(context.Cause(runCtx)) })
	l.state, l.stop, l.cancelRun = starting, stop, cancelRun
	l.startDone, l.done = make(chan struct{}), make(chan struct{})
	l.mu.Unlock()

	err := start(startCtx, runCtx)
	unbind()
	cancelStart(nil)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.startErr = err
	close(l.startDone)
	switch {
	case l.state == stopping:
		// Stop came during the start-up; it stops what did start.
		if err == nil {
			return fmt.Errorf("%w during the start-up", ErrStopped)
		}
		return fmt.Errorf("%w during the start-up: %w", ErrStopped, err)
	case err != nil:
		cancelRun(err)
		l.state = stopped
		close(l.done)
		return err
	}
	l.state = running
	return nil
}

// Stop stops the service (see the package doc).
func (l *Lifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	switch l.state {
	case idle:
		l.state = stopped
		l.done = make(chan struct{})
		close(l.done)
		l.mu.Unlock()
		return nil
	case stopping, stopped:
		done := l.done
		l.mu.Unlock()
		select {
		case <-done:
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.stopErr
		case <-ctx.Done():
			return fmt.Errorf("stop: waiting for the first stop: %w", ctx.Err())
		}
	}
	l.state = stopping
	l.cancelRun(ErrStopped)
	startDone := l.startDone
	l.mu.Unlock()

	select {
	case <-startDone:
	case <-ctx.Done():
		// The start-up ignores its context: when it ends, what it started
		// is stopped at once (ctx has ended, so the stop forces).
		go func() {
			<-startDone
			_ = l.finish(ctx)
		}()
		return fmt.Errorf("stop: the start-up did not end: %w", ctx.Err())
	}
	return l.finish(ctx)
}

// finish runs the service's stop if its start succeeded.
func (l *Lifecycle) finish(ctx context.Context) error {
	l.mu.Lock()
	failed, stop := l.startErr != nil, l.stop
	l.mu.Unlock()
	var err error
	if !failed && stop != nil {
		err = stop(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopErr, l.state = err, stopped
	close(l.done)
	return err
}

// Wait waits for done until ctx ends. Then it calls force (when not nil),
// gives done ForceGrace more, and returns an error wrapping ctx.Err(), also
// when the forced work ended within the grace: the drain did not finish in
// time.
func Wait(ctx context.Context, done <-chan struct{}, force func()) error {
	select {
	case <-done:
		return nil // finished, even if the deadline has passed as well
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	if force != nil {
		force()
	}
	t := time.NewTimer(ForceGrace)
	defer t.Stop()
	select {
	case <-done:
		return fmt.Errorf("drain cut short: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("drain cut short, work abandoned: %w", ctx.Err())
	}
}

// WaitGroup is Wait for a sync.WaitGroup.
func WaitGroup(ctx context.Context, wg *sync.WaitGroup, force func()) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return Wait(ctx, done, force)
}
