package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// gatewaySuite measures sections 1–5 against a target running the gateway
// alone on its embedded server: the raw floor, admission (saturated and at
// half that rate), replay, conflict and status reads.
func (r *runner) gatewaySuite(ctx context.Context, always bool) error {
	fs := fsyncName(always)
	p, err := r.start([]string{"gateway"}, always, 0)
	if err != nil {
		return err
	}
	if p != nil {
		defer p.stop()
	}
	a, err := r.apiFor(p, "bench")
	if err != nil {
		return err
	}
	n, d := r.o.Clients, r.o.Duration

	tokens := make([]string, n)
	for w := range tokens {
		tokens[w] = a.token("client-" + strconv.Itoa(w))
	}
	body := permitBody(47, 29, 1)
	keyPrefix := "adm-" + fs + "-"

	// The floor and admission run in interleaved rounds, so a change in
	// what else the machine runs hits both alike and the ratio holds.
	doFloor, doAdm := r.any(SecFloor) && p != nil, r.any(SecAdmission)
	rounds := 1
	if doFloor && doAdm {
		rounds = 3
	}
	var floorS, admS Samples
	var floorU, admU usage
	for round := range rounds {
		rd := d / time.Duration(rounds)
		if doFloor {
			r.logf("raw floor, %d clients, %s, fsync %s (round %d/%d)", n, rd, fs, round+1, rounds)
			var resp Response
			var ferr error
			floorU.add(r.measure(p, fmt.Sprintf("floor-%s-%d", fs, round), func() {
				resp, ferr = p.call(Request{Op: opFloor, Clients: n, Duration: rd, Tenant: "floor" + strconv.Itoa(round)})
			}))
			if ferr != nil {
				return ferr
			}
			floorS.Add(*resp.Floor)
		}
		if doAdm {
			r.logf("admission, %d clients, %s, fsync %s (round %d/%d)", n, rd, fs, round+1, rounds)
			prefix := keyPrefix + strconv.Itoa(round) + "-"
			admU.add(r.measure(p, fmt.Sprintf("admission-%s-%d", fs, round), func() {
				admS.Add(closedLoopSamples(ctx, n, rd, 0, func(w, i int) error {
					st, _, err := a.submit(tokens[w], prefix+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
					return expect(st, http.StatusAccepted, err)
				}))
			}))
		}
	}
	var floor, adm *Row
	if doFloor {
		fsum := floorS.Summary()
		floor = r.rep.add(Row{Section: SecFloor, Name: fmt.Sprintf("kv create + work publish, %d clients", n), Fsync: fs,
			Value: fsum.Rate, Unit: "jobs/s", Summary: &fsum,
			Note: noteErrors(&fsum, fmt.Sprintf("in-process, same server and connection as the gateway; %d rounds interleaved with admission", rounds))}).use(floorU)
	}
	if doAdm {
		s := admS.Summary()
		adm = r.rep.add(Row{Section: SecAdmission, Name: fmt.Sprintf("new keys, %d clients, saturated", n), Fsync: fs,
			Value: s.Rate, Unit: "jobs/s", Summary: &s, Note: noteErrors(&s, "")}).use(admU)
		relate(adm, floor, "floor")
		if !always {
			goal(adm, "≥ 0.60× floor", floor != nil && adm.Ratio >= 0.6)
		}

		half := s.Rate / 2
		if half >= 1 {
			r.logf("admission at half the saturated rate (%.0f/s), fsync %s", half, fs)
			var ps Summary
			u := r.measure(p, "admission-half-"+fs, func() {
				ps = pacedLoop(ctx, n*4, half, d, func(w, i int) error {
					st, _, err := a.submit(tokens[w%n], keyPrefix+"half-"+strconv.Itoa(i), body)
					return expect(st, http.StatusAccepted, err)
				})
			})
			row := r.rep.add(Row{Section: SecAdmission, Name: fmt.Sprintf("new keys at half rate (%.0f/s offered), p99", half), Fsync: fs,
				Value: ps.P99, Unit: "ms", Summary: &ps,
				Note: noteErrors(&ps, "open loop; latency from each request's scheduled start")}).use(u)
			if !always {
				goal(row, "p99 ≤ 10 ms", ps.Errors == 0 && ps.P99 <= 10)
			}
		}
	}

	// Replay, conflict and status reads work on one job per client.
	ids := make([]string, n)
	if r.any(SecReplay, SecConflict, SecStatus) {
		for w := range n {
			st, id, err := a.submit(tokens[w], "same-"+fs+"-"+strconv.Itoa(w), body)
			if err != nil || (st != http.StatusAccepted && st != http.StatusOK) {
				return fmt.Errorf("bench: seeding replay jobs: status %d: %v", st, err)
			}
			ids[w] = id
		}
	}
	if r.any(SecReplay) {
		r.logf("replay, %d clients, %s, fsync %s", n, d, fs)
		var s Summary
		u := r.measure(p, "replay-"+fs, func() {
			s = closedLoop(ctx, n, d, 0, func(w, _ int) error {
				st, _, err := a.submit(tokens[w], "same-"+fs+"-"+strconv.Itoa(w), body)
				return expect(st, http.StatusOK, err)
			})
		})
		row := r.rep.add(Row{Section: SecReplay, Name: fmt.Sprintf("same key re-posted, %d clients", n), Fsync: fs,
			Value: s.Rate, Unit: "req/s", Summary: &s, Note: noteErrors(&s, "")}).use(u)
		relate(row, adm, "admission")
		if !always {
			goal(row, "≥ 1.5× admission", adm != nil && row.Ratio >= 1.5)
		}
	}
	if always {
		return nil // the read paths write nothing: fsync does not matter
	}
	if r.any(SecConflict) {
		r.logf("conflict, %d clients, %s", n, d)
		changed := permitBody(47, 30, 1)
		var s Summary
		u := r.measure(p, "conflict-"+fs, func() {
			s = closedLoop(ctx, n, d, 0, func(w, _ int) error {
				st, _, err := a.submit(tokens[w], "same-"+fs+"-"+strconv.Itoa(w), changed)
				return expect(st, http.StatusConflict, err)
			})
		})
		row := r.rep.add(Row{Section: SecConflict, Name: fmt.Sprintf("same key, changed payload, %d clients", n), Fsync: fs,
			Value: s.Rate, Unit: "req/s", Summary: &s, Note: noteErrors(&s, "")}).use(u)
		relate(row, adm, "admission")
	}
	if r.any(SecStatus) {
		r.logf("status reads, %d clients, %s", n, d)
		etags := make([]string, n)
		for w := range n {
			g, err := a.get(tokens[w], "/v1/jobs/"+ids[w], "")
			if err != nil || g.status != http.StatusOK {
				return fmt.Errorf("bench: status seed read: %d %v", g.status, err)
			}
			etags[w] = g.etag
		}
		var full, cached Summary
		u := r.measure(p, "status-"+fs, func() {
			full = closedLoop(ctx, n, d, 0, func(w, _ int) error {
				g, err := a.get(tokens[w], "/v1/jobs/"+ids[w], "")
				return expect(g.status, http.StatusOK, err)
			})
		})
		fullRow := r.rep.add(Row{Section: SecStatus, Name: fmt.Sprintf("GET by id, %d clients", n), Fsync: fs,
			Value: full.Rate, Unit: "req/s", Summary: &full, Note: noteErrors(&full, "")}).use(u)
		relate(fullRow, adm, "admission")
		u = r.measure(p, "status-304-"+fs, func() {
			cached = closedLoop(ctx, n, d, 0, func(w, _ int) error {
				g, err := a.get(tokens[w], "/v1/jobs/"+ids[w], etags[w])
				return expect(g.status, http.StatusNotModified, err)
			})
		})
		row := r.rep.add(Row{Section: SecStatus, Name: fmt.Sprintf("GET by id with If-None-Match (304), %d clients", n), Fsync: fs,
			Value: cached.Rate, Unit: "req/s", Summary: &cached, Note: noteErrors(&cached, "")}).use(u)
		relate(row, fullRow, "GET 200")
	}
	if p != nil {
		r.rep.add(Row{Section: SecFootprint, Name: "target RSS after the gateway figures", Fsync: fs, Value: mib(p.rss()), Unit: "MiB"})
	}
	return nil
}

// noteErrors mentions failed operations, which a figure must never hide.
func noteErrors(s *Summary, extra string) string {
	if s == nil || s.Errors == 0 {
		return extra
	}
	msg := fmt.Sprintf("%d failed operations, first: %s", s.Errors, s.FirstError)
	if extra != "" {
		msg = extra + "; " + msg
	}
	return msg
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
