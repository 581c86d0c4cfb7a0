package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// Watch modes, in the order they run.
var watchModes = []string{"naive 1s polling", "Retry-After polling", "long-poll ?wait=20s", "SSE"}

// watchSuite: Watchers reviewers each watch their own job for WatchWindow
// in each mode, while the target's change driver advances every job once
// per ChangeInterval as a renderer's checkpoints would. It reports HTTP
// requests per minute and the target's CPU.
func (r *runner) watchSuite(ctx context.Context) error {
	p, err := r.start([]string{"gateway"}, false, 0)
	if err != nil {
		return err
	}
	if p != nil {
		defer p.stop()
	}
	a, err := r.apiFor(p, "watch")
	if err != nil {
		return err
	}
	var naive *Row
	for mi, mode := range watchModes {
		// Fresh jobs per mode, so every mode sees the same ages and changes.
		ids := make([]string, r.o.Watchers)
		keys := make([]string, r.o.Watchers)
		for i := range ids {
			requester := "reviewer-" + strconv.Itoa(i)
			st, id, err := a.submit(a.token(requester), fmt.Sprintf("watch-%d-%d", mi, i), permitBody(47, 29, 63))
			if err := expect(st, http.StatusAccepted, err); err != nil {
				return fmt.Errorf("bench: watch jobs: %w", err)
			}
			ids[i], keys[i] = id, job.StoreKey(a.tenant, requester, id)
		}
		if p != nil {
			if _, err := p.call(Request{Op: opDrive, Keys: keys, Interval: r.o.ChangeInterval, Pages: 63}); err != nil {
				return err
			}
		}
		r.logf("watching: %d reviewers, %s, %s", r.o.Watchers, mode, r.o.WatchWindow)
		var requests, seen, failures atomic.Int64
		u := r.measure(p, "watch-"+strconv.Itoa(mi), func() {
			wctx, cancel := context.WithTimeout(ctx, r.o.WatchWindow)
			defer cancel()
			var wg sync.WaitGroup
			for i, id := range ids {
				tok := a.token("reviewer-" + strconv.Itoa(i))
				wg.Go(func() {
					w := &watcher{a: a, tok: tok, id: id, requests: &requests, seen: &seen, failures: &failures}
					w.run(wctx, mi)
				})
			}
			wg.Wait()
		})
		var changes int64
		if p != nil {
			resp, err := p.call(Request{Op: opDriveStop})
			if err != nil {
				return err
			}
			changes = resp.Changes
		}
		perMin := float64(requests.Load()) / r.o.WatchWindow.Minutes()
		row := r.rep.add(Row{Section: SecWatch, Name: fmt.Sprintf("%d reviewers, %s", r.o.Watchers, mode), Fsync: "default",
			Value: perMin, Unit: "HTTP req/min",
			Note: fmt.Sprintf("%d job changes made, %d seen by watchers", changes, seen.Load())}).use(u)
		if f := failures.Load(); f > 0 {
			row.Note += fmt.Sprintf(", %d failed requests", f)
		}
		if mi == 0 {
			naive = row
		} else {
			relate(row, naive, "naive")
		}
		if mode == "SSE" {
			goal(row, "≤ 0.05× naive", naive != nil && row.Ratio <= 0.05)
		}
	}
	return nil
}

// watcher is one reviewer watching their job.
type watcher struct {
	a                        *api
	tok, id                  string
	requests, seen, failures *atomic.Int64
	etag, lastEvent          string
	rev                      string
}

func (w *watcher) run(ctx context.Context, mode int) {
	for ctx.Err() == nil {
		var wait time.Duration
		switch mode {
		case 0: // naive: a full read every second
			w.poll(ctx, "", "")
			wait = time.Second
		case 1: // conditional read, then sleep as long as Retry-After says
			ra := w.poll(ctx, w.etag, "")
			wait = time.Duration(max(ra, 1)) * time.Second
		case 2: // long-poll: answers on a change or after 20s
			if w.etag == "" {
				w.poll(ctx, "", "")
			} else {
				w.poll(ctx, w.etag, "?wait=20s")
			}
		case 3: // one stream for the whole window
			w.requests.Add(1)
			first := w.lastEvent == ""
			err := w.a.follow(ctx, w.tok, w.id, w.lastEvent, nil, func(_, eventID string) bool {
				if !first { // the first event is the state at connect, not a change
					w.seen.Add(1)
				}
				first = false
				w.lastEvent = eventID
				return false
			})
			if err != nil && ctx.Err() == nil {
				w.failures.Add(1)
				wait = time.Second
			}
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// poll makes one status read and returns its Retry-After.
func (w *watcher) poll(ctx context.Context, inm, query string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.a.base+"/v1/jobs/"+w.id+query, nil)
	if err != nil {
		return 1
	}
	req.Header.Set("Authorization", w.tok)
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	w.requests.Add(1)
	resp, err := w.a.std.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			w.failures.Add(1)
		}
		return 1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if tag := resp.Header.Get("ETag"); tag != w.rev {
			if w.rev != "" {
				w.seen.Add(1)
			}
			w.rev = tag
		}
		w.etag = w.rev
	case http.StatusNotModified:
	default:
		w.failures.Add(1)
	}
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return ra
}
