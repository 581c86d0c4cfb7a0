package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// footprintSuite measures the target's memory idle, with SSEStreams open
// event streams, and after FootprintJobs admissions, and the bytes on disk
// per admitted job.
func (r *runner) footprintSuite(ctx context.Context) error {
	// The gateway with the dispatcher, as serve runs them: admission is the
	// record, and the relay adds the work message and the admission event
	// (no worker consumes the work here).
	p, err := r.start([]string{"dispatcher", "gateway"}, false, 0)
	if err != nil {
		return err
	}
	defer p.stop()
	a, err := r.apiFor(p, "footprint")
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let start-up settle
	idle := r.rep.add(Row{Section: SecFootprint, Name: "target RSS idle", Fsync: "default", Value: mib(p.rss()), Unit: "MiB"})
	if m, err := p.mem(); err == nil {
		idle.Note = memNote(m)
	}

	// One job per stream, admitted by the usual clients.
	n := r.o.SSEStreams
	r.logf("footprint: %d event streams", n)
	ids := make([][]string, r.o.Clients)
	body := permitBody(47, 29, 63)
	s := closedLoop(ctx, r.o.Clients, 0, int64(n), func(w, i int) error {
		st, id, err := a.submit(a.token("sse-"+strconv.Itoa(w)), "sse-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
		if err := expect(st, http.StatusAccepted, err); err != nil {
			return err
		}
		ids[w] = append(ids[w], id)
		return nil
	})
	if s.Errors > 0 {
		return fmt.Errorf("bench: footprint jobs: %s", s.FirstError)
	}
	sctx, closeStreams := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var streamErr error
	for w, list := range ids {
		tok := a.token("sse-" + strconv.Itoa(w))
		for _, id := range list {
			wg.Go(func() {
				err := a.follow(sctx, tok, id, "", nil, func(string, string) bool { return false })
				if err != nil && sctx.Err() == nil {
					mu.Lock()
					streamErr = errors.Join(streamErr, err)
					mu.Unlock()
				}
			})
		}
	}
	open := int64(0)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		m, err := p.mem()
		if err != nil {
			closeStreams()
			wg.Wait()
			return err
		}
		if open = m.SSEStreams; open >= int64(n) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	row := r.rep.add(Row{Section: SecFootprint, Name: fmt.Sprintf("target RSS with %d SSE streams open", n), Fsync: "default",
		Value: mib(p.rss()), Unit: "MiB"})
	relate(row, idle, "idle")
	goal(row, "≤ 100 MiB", open >= int64(n) && row.Value <= 100)
	if m, err := p.mem(); err == nil {
		row.Note = fmt.Sprintf("%d streams open; %s", m.SSEStreams, memNote(m))
	}
	r.profile(p, opHeapProfile, "footprint-sse-heap.pprof") // what the open streams hold
	closeStreams()
	wg.Wait()
	if streamErr != nil {
		row.Note += "; stream errors: " + streamErr.Error()
	}
	// A stream notices its client left at its next write (a keep-alive
	// every 15s); wait for them to end so they do not count below.
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if m, err := p.mem(); err != nil || m.SSEStreams == 0 {
			break
		}
	}

	// Many admitted jobs: memory and disk.
	jobs := r.o.FootprintJobs
	r.logf("footprint: admitting %d jobs", jobs)
	store := filepath.Join(p.spec.DataDir, "nats")
	before, beforeAlloc := dirBytes(store)
	body = permitBody(47, 29, 1)
	var adm Summary
	before0, err := p.call(Request{Op: opPipeStats})
	if err != nil {
		return err
	}
	u := r.measure(p, "footprint-admit", func() {
		adm = closedLoop(ctx, r.o.Clients, 0, int64(jobs), func(w, i int) error {
			st, _, err := a.submit(a.token("bulk-"+strconv.Itoa(w)), "bulk-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
			return expect(st, http.StatusAccepted, err)
		})
	})
	// The relay follows the change log: wait until it published every
	// admitted job's work message, so its part is in the figures too.
	relayLag := int64(-1)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		now, err := p.call(Request{Op: opPipeStats})
		if err != nil {
			return err
		}
		if relayLag = adm.Ops - int64(now.Stats.Streams["JOBGATE_WORK"]-before0.Stats.Streams["JOBGATE_WORK"]); relayLag <= 0 {
			break
		}
	}
	time.Sleep(time.Second)
	after, afterAlloc := dirBytes(store)
	rss := r.rep.add(Row{Section: SecFootprint, Name: fmt.Sprintf("target RSS after %d more admitted jobs", adm.Ops), Fsync: "default",
		Value: mib(p.rss()), Unit: "MiB",
		Note: noteErrors(&adm, fmt.Sprintf("admitted at %.0f jobs/s", adm.Rate))}).use(u)
	relate(rss, idle, "idle")
	if m, err := p.mem(); err == nil {
		rss.Note += "; " + memNote(m)
	}
	if relayLag > 0 {
		rss.Note += fmt.Sprintf("; the relay had %d work messages still to publish", relayLag)
	}
	r.profile(p, opHeapProfile, "footprint-heap.pprof")
	if adm.Ops > 0 {
		per := float64(after-before) / float64(adm.Ops)
		r.rep.add(Row{Section: SecFootprint, Name: "bytes on disk per admitted job (record, work message, event)", Fsync: "default",
			Value: per, Unit: "B", Note: fmt.Sprintf("file sizes; allocated blocks: %.0f B/job", float64(afterAlloc-beforeAlloc)/float64(adm.Ops))})
	}
	return nil
}

func memNote(m *MemInfo) string {
	return fmt.Sprintf("Go heap in use %.1f MiB, idle and kept %.1f MiB, stacks %.1f MiB, runtime total %.1f MiB, %d goroutines",
		mib(int64(m.HeapInuse)), mib(int64(m.HeapIdle-m.Released)), mib(int64(m.StackInuse)), mib(int64(m.Sys)), m.Goroutines)
}
