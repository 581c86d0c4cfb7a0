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

// fairRendersSuite is the renders half of the fairness section, the noisy
// neighbour of renders, on the whole of `serve` with its default two render
// slots: tenant B's 20 one-page reports,
// submitted one a second, timed submit → succeeded alone and again while
// tenant A's FairJobs 63-page reports (of one requester) are queued; in
// the same run, 20 one-page reports of A's other requesters, half a period
// after each of B's, timed the same way against the same "alone" figure
// (a one-page report on an idle server is the same work whoever submits
// it, and a run of its own would cost another backlog); and A's
// throughput alone and with B active.
func (r *runner) fairRendersSuite(ctx context.Context) error {
	p, err := r.start([]string{"dispatcher", "renderer", "notifier", "gateway"}, false, 0)
	if err != nil {
		return err
	}
	if p != nil {
		defer p.stop()
	}
	a, err := r.apiFor(p, "fair-a")
	if err != nil {
		return err
	}
	b, err := r.apiFor(p, "fair-b")
	if err != nil {
		return err
	}
	const bJobs = 20
	n := r.o.FairJobs

	r.logf("fairness: A alone, %d 63-page reports", n)
	var aAlone flood
	u := r.measure(p, "fair-a-alone", func() { aAlone = r.flood(ctx, a, "alone", n) })
	aAloneRow := r.rep.add(Row{Section: SecFairness, Name: fmt.Sprintf("A's %d 63-page reports alone", n), Fsync: "default",
		Value: aAlone.perMin(), Unit: "reports/min", Note: aAlone.note()}).use(u)

	// B's reports are spread over most of the time A's backlog takes, so
	// every one of them meets it (at most one a second).
	bEvery := min(time.Second, aAlone.elapsed*3/4/bJobs)
	r.logf("fairness: B alone, %d 1-page reports, one every %s", bJobs, bEvery)
	var alone Summary
	u = r.measure(p, "fair-b-alone", func() { alone, _ = r.trickle(ctx, b, "fair-b-alone", bJobs, bEvery) })
	aloneRow := r.rep.add(Row{Section: SecFairness, Name: "B's 1-page reports alone, submit → succeeded", Fsync: "default",
		Value: alone.P99, Unit: "ms p99", Summary: &alone, Note: noteErrors(&alone, "")}).use(u)

	r.logf("fairness: A's %d 63-page reports queued, B's %d 1-page reports one every %s, and as many of A's other requesters",
		n, bJobs, bEvery)
	var with, a2With Summary
	var aWith flood
	var bDone, a2Done []time.Time
	u = r.measure(p, "fair-both", func() {
		var wg sync.WaitGroup
		started := make(chan struct{})
		wg.Go(func() { aWith = r.flood(ctx, a, "with-b", n, started) })
		<-started // A's backlog is admitted before B's first report
		wg.Go(func() {
			if sleepUntil(ctx, time.Now().Add(bEvery/2)) {
				a2With, a2Done = r.trickle(ctx, a, "fair-a2-with-a", bJobs, bEvery)
			}
		})
		with, bDone = r.trickle(ctx, b, "fair-b-with-a", bJobs, bEvery)
		wg.Wait()
	})
	withRow := r.rep.add(Row{Section: SecFairness, Name: fmt.Sprintf("B's 1-page reports while A has %d queued", n), Fsync: "default",
		Value: with.P99, Unit: "ms p99", Summary: &with, Note: noteErrors(&with, "")}).use(u)
	during := func(done []time.Time) int {
		n := 0
		for _, t := range done {
			if t.Before(aWith.end) {
				n++
			}
		}
		return n
	}
	withRow.Note = noteErrors(&with, fmt.Sprintf("%d of B's %d reports succeeded while A's backlog was still draining; one every %s",
		during(bDone), bJobs, bEvery))
	relate(withRow, aloneRow, "B alone")
	goal(withRow, "≤ 3× B alone", withRow.Ratio > 0 && withRow.Ratio <= 3 && with.Errors == 0)
	a2Row := r.rep.add(Row{Section: SecFairness, Name: fmt.Sprintf("A's other requesters' 1-page reports while A's first has %d queued", n),
		Fsync: "default", Value: a2With.P99, Unit: "ms p99", Summary: &a2With,
		Note: noteErrors(&a2With, fmt.Sprintf("%d of %d succeeded while A's backlog was still draining; one every %s, in B's run; "+
			"alone = B alone (the same reports on an idle server)", during(a2Done), bJobs, bEvery))}).use(u)
	relate(a2Row, aloneRow, "B alone")
	goal(a2Row, "≤ 3× alone", a2Row.Ratio > 0 && a2Row.Ratio <= 3 && a2With.Errors == 0)
	aWithRow := r.rep.add(Row{Section: SecFairness, Name: fmt.Sprintf("A's %d 63-page reports with B active", n), Fsync: "default",
		Value: aWith.perMin(), Unit: "reports/min", Note: aWith.note()}).use(u)
	relate(aWithRow, aAloneRow, "A alone")
	goal(aWithRow, "≥ 0.9× A alone", aWithRow.Ratio >= 0.9 && aWith.failed == 0)
	return nil
}

// trickle submits n 1-page reports of four requesters (reviewer-0..3),
// one every `every`, each timed from its submit to its succeeded event; it
// also returns when each succeeded. run prefixes the idempotency keys.
func (r *runner) trickle(ctx context.Context, a *api, run string, n int, every time.Duration) (Summary, []time.Time) {
	lat := make([]time.Duration, n)
	var done []time.Time
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if i > 0 && !sleepUntil(ctx, start.Add(time.Duration(i)*every)) {
			break
		}
		wg.Go(func() {
			tok := a.token("reviewer-" + strconv.Itoa(i%4))
			t0 := time.Now()
			st, id, err := a.submit(tok, run+"-"+strconv.Itoa(i), permitBody(500+i, 1, 1))
			if err = expect(st, http.StatusAccepted, err); err == nil {
				err = a.awaitSucceeded(ctx, tok, id, 10*time.Minute)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			lat[i] = time.Since(t0)
			done = append(done, time.Now())
		})
	}
	wg.Wait()
	var ok []time.Duration
	for _, d := range lat {
		if d > 0 {
			ok = append(ok, d)
		}
	}
	if len(errs) > 0 {
		r.logf("fairness: %d of %s's reports failed, first: %v", len(errs), run, errs[0])
	}
	return Summarize(ok, int64(n-len(ok)), time.Since(start)), done
}

// flood is one run of A's backlog.
type flood struct {
	n, failed int
	elapsed   time.Duration
	end       time.Time // when the last report admitted succeeded
	first     error
}

func (f flood) perMin() float64 {
	if f.elapsed <= 0 {
		return 0
	}
	return float64(f.n-f.failed) / f.elapsed.Minutes()
}

func (f flood) note() string {
	s := fmt.Sprintf("%d reports in %.1fs from the first submit", f.n-f.failed, f.elapsed.Seconds())
	if f.failed > 0 {
		s += fmt.Sprintf("; %d failed, first: %v", f.failed, f.first)
	}
	return s
}

// flood submits n 63-page reports of one requester (8 submitters), closes
// started once all are admitted, and times from the first submit until the
// last one admitted has succeeded. A requester's own work is taken in
// order, so that is when its backlog is done; every job is checked
// afterwards.
func (r *runner) flood(ctx context.Context, a *api, run string, n int, started ...chan struct{}) flood {
	const pages, submitters = 63, 8
	tok := a.token("flood")
	ids := make([]string, n)
	last := "" // the report whose admission was answered last
	var errs []error
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for w := range submitters {
		wg.Go(func() {
			for i := w; i < n; i += submitters {
				st, id, err := a.submit(tok, "fair-a-"+run+"-"+strconv.Itoa(i), permitBody(1+i, 2, pages))
				if err = expect(st, http.StatusAccepted, err); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				mu.Lock()
				ids[i], last = id, id
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, c := range started {
		close(c)
	}
	f := flood{n: n}
	if last != "" {
		if err := a.awaitSucceeded(ctx, tok, last, 30*time.Minute); err != nil {
			errs = append(errs, err)
		}
	}
	f.end = time.Now()
	f.elapsed = f.end.Sub(start)
	for _, id := range ids {
		if id == "" || id == last {
			continue
		}
		if err := a.awaitSucceeded(ctx, tok, id, time.Minute); err != nil {
			errs = append(errs, err)
		}
	}
	f.failed = len(errs)
	if len(errs) > 0 {
		f.first = errors.Join(errs[0])
	}
	return f
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
