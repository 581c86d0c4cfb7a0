package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
)

// TargetEnv is what the measured process hands the control loop: the
// resources its services use (same server, same connection) and the
// gateway's address and stream counter.
type TargetEnv struct {
	Res        *natsjs.Resources
	URL        string
	SSEStreams func() int64 // nil when no gateway runs
	Log        *slog.Logger
	// Conns returns the process's NATS connections (its services each
	// have their own), whose message counters the pipeline section sums.
	Conns func() []*nats.Conn
	// Noop is the bench_noop worker's counter; nil when it does not run.
	Noop *Noop
}

// ServeTarget answers the bench's requests on in/out until in ends or ctx
// is done. It runs inside the measured process.
func ServeTarget(ctx context.Context, env TargetEnv, in io.Reader, out io.Writer) error {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(Ready{URL: env.URL, PID: os.Getpid()}); err != nil {
		return err
	}
	t := &target{env: env}
	defer t.stopDrive()
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	for {
		var line []byte
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case line, ok = <-lines:
			if !ok {
				return nil
			}
		}
		var req Request
		resp := Response{}
		if err := json.Unmarshal(line, &req); err != nil {
			resp.Err = err.Error()
		} else if err := t.handle(ctx, req, &resp); err != nil {
			resp.Err = err.Error()
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
	}
}

type target struct {
	env      TargetEnv
	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
	changes  atomic.Int64
	prof     *os.File
	trace    *os.File
	profPath string
	epDone   *endpointDone
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup(name).WriteTo(f, 0), f.Close())
}

func (t *target) handle(ctx context.Context, req Request, resp *Response) error {
	switch req.Op {
	case opNoticeEvents:
		n, err := publishNoticeEvents(ctx, t.env.Res, req.Tenant, req.Path, req.Keys, req.Pages)
		resp.Changes = n
		return err
	case opFloor:
		s, err := runFloor(ctx, t.env.Res, req.Tenant, req.Clients, req.Duration)
		resp.Floor = &s
		return err
	case opTraceStart:
		if t.trace != nil {
			return errors.New("a trace is already running")
		}
		f, err := os.Create(req.Path)
		if err != nil {
			return err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return err
		}
		t.trace = f
		return nil
	case opTraceStop:
		if t.trace == nil {
			return nil
		}
		trace.Stop()
		err := t.trace.Close()
		t.trace = nil
		return err
	case opRawPipe:
		before, err := pipeStats(ctx, t.env)
		if err != nil {
			return err
		}
		pr, err := runRawPipeline(ctx, t.env.Res, req.Clients, req.Workers, req.Duration, req.Round)
		if err != nil {
			return err
		}
		after, err := pipeStats(ctx, t.env)
		if err != nil {
			return err
		}
		pr.StatsDiff = after.minus(before)
		resp.Pipe = &pr
		return nil
	case opPipeStats:
		ps, err := pipeStats(ctx, t.env)
		resp.Stats = ps
		return err
	case opEndpointDone:
		d, err := t.endpointDone(req.Tenant)
		if err != nil {
			return err
		}
		resp.Changes, resp.Waits = d.take()
		return nil
	case opNoopWaits:
		if t.env.Noop != nil {
			resp.Waits = t.env.Noop.takeWaits()
		}
		return nil
	case opGCPercent:
		resp.Percent = debug.SetGCPercent(req.Percent)
		if req.Percent >= 0 {
			debug.FreeOSMemory() // collect and give back what the GC-off window held
		}
		return nil
	case opDrive:
		return t.startDrive(req.Keys, req.Interval, req.Pages, req.Events)
	case opDriveStop:
		resp.Changes = t.stopDrive()
		return nil
	case opMem:
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mi := &MemInfo{HeapInuse: ms.HeapInuse, HeapSys: ms.HeapSys, HeapIdle: ms.HeapIdle, Released: ms.HeapReleased, StackInuse: ms.StackInuse, Sys: ms.Sys, NumGC: ms.NumGC, Goroutines: runtime.NumGoroutine()}
		if t.env.SSEStreams != nil {
			mi.SSEStreams = t.env.SSEStreams()
		}
		resp.Mem = mi
		return nil
	case opProfileStart:
		if t.prof != nil {
			return errors.New("a profile is already running")
		}
		f, err := os.Create(req.Path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		t.prof = f
		t.profPath = req.Path
		// Allocations are cumulative: a snapshot now is the base of the one
		// at the stop (go tool pprof -base x.allocs.base x.allocs).
		return writeProfile("allocs", req.Path+".allocs.base")
	case opHeapProfile:
		return writeProfile("heap", req.Path)
	case opProfileStop:
		if t.prof == nil {
			return nil
		}
		pprof.StopCPUProfile()
		err := t.prof.Close()
		t.prof = nil
		return errors.Join(err, writeProfile("allocs", t.profPath+".allocs"))
	}
	return fmt.Errorf("unknown op %q", req.Op)
}

// startDrive advances every job under keys once per interval, spread evenly
// over the interval, the way a renderer's checkpoints would: first to
// running, then progress in tenths of pages. Jobs never become terminal, so
// watchers keep watching for the whole window. With events, each change's
// event is published too (GET /v1/events follows those, not the records).
func (t *target) startDrive(keys []string, interval time.Duration, pages int, events bool) error {
	if interval <= 0 || len(keys) == 0 {
		return errors.New("drive needs keys and a positive interval")
	}
	pages = max(pages, 10)
	t.stopDrive()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.mu.Lock()
	t.cancel, t.done = cancel, done
	t.mu.Unlock()
	t.changes.Store(0)
	go func() {
		defer close(done)
		start := time.Now()
		for step := 0; ; step++ {
			for i, key := range keys {
				at := start.Add(time.Duration(step)*interval + time.Duration(i)*interval/time.Duration(len(keys)))
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(at)):
				}
				if err := t.advance(ctx, key, step, pages, events); err != nil {
					t.env.Log.Warn("bench driver", "key", key, "err", err)
					continue
				}
				t.changes.Add(1)
			}
		}
	}()
	return nil
}

func (t *target) advance(ctx context.Context, key string, step, pages int, events bool) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rec, err := t.env.Res.Jobs.Mutate(cctx, key, func(r *job.Record) error {
		now := time.Now().UTC()
		if r.State == job.StateQueued {
			if err := r.Transition(job.StateRunning, now); err != nil {
				return err
			}
			r.Attempt++
			r.Worker = "bench-driver"
			r.Progress = &job.Progress{Total: pages, Unit: "pages"}
		}
		if r.Progress == nil {
			r.Progress = &job.Progress{Total: pages, Unit: "pages"}
		}
		r.Progress.Done = min(pages-1, step*pages/10)
		r.HeartbeatAt = &now
		r.UpdatedAt = now
		return nil
	})
	if err != nil || !events {
		return err
	}
	_, err = t.env.Res.Events.Publish(cctx, rec)
	return err
}

func (t *target) stopDrive() int64 {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.cancel, t.done = nil, nil
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return t.changes.Load()
}
