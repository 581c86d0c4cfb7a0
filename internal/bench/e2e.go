package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// e2eSuite runs the whole of `serve` (dispatcher, renderer, notifier,
// gateway): submit → succeeded for 1-page reports, and the render
// throughput of 63-page reports with one and with two render slots.
func (r *runner) e2eSuite(ctx context.Context) error {
	full := []string{"dispatcher", "renderer", "notifier", "gateway"}
	var one *Row
	for _, renderers := range []int{1, 2} {
		p, err := r.start(full, false, renderers)
		if err != nil {
			return err
		}
		err = func() error {
			if p != nil {
				defer p.stop()
			}
			a, err := r.apiFor(p, "e2e")
			if err != nil {
				return err
			}
			if renderers == 2 { // the default: the latency figure a user gets
				if err := r.e2eLatency(ctx, p, a); err != nil {
					return err
				}
			}
			row, err := r.renderThroughput(ctx, p, a, renderers)
			if err != nil {
				return err
			}
			if renderers == 1 {
				one = row
			} else {
				relate(row, one, "1 renderer")
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// e2eLatency times submit → `succeeded` event (over SSE) of 1-page reports
// from 4 concurrent submitters.
func (r *runner) e2eLatency(ctx context.Context, p *proc, a *api) error {
	const submitters = 4
	r.logf("end to end: %d 1-page reports, %d submitters", r.o.E2EJobs, submitters)
	body := permitBody(47, 29, 1)
	var s Summary
	u := r.measure(p, "e2e-1page", func() {
		s = closedLoop(ctx, submitters, 0, int64(r.o.E2EJobs), func(w, i int) error {
			tok := a.token("e2e-" + strconv.Itoa(w))
			st, id, err := a.submit(tok, "e2e-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
			if err := expect(st, http.StatusAccepted, err); err != nil {
				return err
			}
			return a.awaitSucceeded(ctx, tok, id, time.Minute)
		})
	})
	r.rep.add(Row{Section: SecE2E, Name: "1-page report, submit → succeeded event (SSE), 4 submitters", Fsync: "default",
		Value: s.P50, Unit: "ms p50", Summary: &s, Note: noteErrors(&s, "")}).use(u)
	return nil
}

// awaitSucceeded follows a job's events until it is terminal.
func (a *api) awaitSucceeded(ctx context.Context, tok, id string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	final := ""
	err := a.follow(ctx, tok, id, "", nil, func(state, _ string) bool {
		final = state
		return terminal(state)
	})
	if err != nil {
		return err
	}
	if final != "succeeded" {
		if ctx.Err() != nil {
			return fmt.Errorf("job %s not done within %s (last state %q)", id, limit, final)
		}
		return fmt.Errorf("job %s ended %q", id, final)
	}
	return nil
}

// renderThroughput submits RenderJobs 63-page reports at once and times
// until the last one succeeded.
func (r *runner) renderThroughput(ctx context.Context, p *proc, a *api, renderers int) (*Row, error) {
	const pages = 63
	n := r.o.RenderJobs
	r.logf("render throughput: %d × %d-page reports, %d renderer(s)", n, pages, renderers)
	var failed []error
	var mu sync.Mutex
	var elapsed time.Duration
	u := r.measure(p, "render-"+strconv.Itoa(renderers), func() {
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			tok := a.token("render-" + strconv.Itoa(i))
			st, id, err := a.submit(tok, "render-"+strconv.Itoa(renderers)+"-"+strconv.Itoa(i), permitBody(1000+i, 1, pages))
			if err := expect(st, http.StatusAccepted, err); err != nil {
				failed = append(failed, err)
				continue
			}
			wg.Go(func() {
				if err := a.awaitSucceeded(ctx, tok, id, 3*time.Minute); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed = time.Since(start)
	})
	done := n - len(failed)
	perMin := float64(done) / elapsed.Minutes()
	row := r.rep.add(Row{Section: SecE2E, Name: fmt.Sprintf("63-page reports, %d renderer(s)", renderers), Fsync: "default",
		Value: perMin, Unit: "reports/min",
		Note: fmt.Sprintf("%d reports in %.1fs = %.0f pages/s", done, elapsed.Seconds(), float64(done*pages)/elapsed.Seconds())}).use(u)
	if len(failed) > 0 {
		row.Note += fmt.Sprintf("; %d failed, first: %v", len(failed), errors.Join(failed[0]))
	}
	return row, nil
}
