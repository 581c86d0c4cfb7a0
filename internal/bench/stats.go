package bench

import (
	"math"
	"slices"
	"time"
)

// Summary is what one measured run produced: how many operations in how long
// and the latency distribution. Latencies are in milliseconds in JSON.
type Summary struct {
	Ops     int64   `json:"ops"`
	Errors  int64   `json:"errors"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate_per_s"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	P999    float64 `json:"p999_ms"`
	Max     float64 `json:"max_ms"`
	// FirstError is the first unexpected outcome, to say what went wrong.
	FirstError string `json:"first_error,omitempty"`
}

// Summarize computes rate and percentiles from latencies measured over
// elapsed. It sorts lat in place.
func Summarize(lat []time.Duration, errs int64, elapsed time.Duration) Summary {
	s := Summary{Ops: int64(len(lat)), Errors: errs, Seconds: elapsed.Seconds()}
	if elapsed > 0 {
		s.Rate = float64(len(lat)) / elapsed.Seconds()
	}
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	s.P50 = ms(Percentile(lat, 50))
	s.P99 = ms(Percentile(lat, 99))
	s.P999 = ms(Percentile(lat, 99.9))
	s.Max = ms(lat[len(lat)-1])
	return s
}

// Percentile returns the p-th percentile (nearest rank) of sorted values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9)) // 99.9% of 1000 is rank 999
	rank = max(1, min(len(sorted), rank))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// recorder collects one worker's latencies; workers merge at the end so the
// hot loop takes no lock.
type recorder struct {
	lat      []time.Duration
	errs     int64
	firstErr string
}

func (r *recorder) fail(msg string) {
	if r.errs == 0 {
		r.firstErr = msg
	}
	r.errs++
}

// Samples are the raw outcome of one or more measured runs, so runs taken
// in rounds (interleaved with a baseline) can be summarized together.
type Samples struct {
	Lat        []time.Duration `json:"lat_ns"`
	Errors     int64           `json:"errors"`
	FirstError string          `json:"first_error,omitempty"`
	Elapsed    time.Duration   `json:"elapsed_ns"`
	// ClientCPU is the CPU time a load generator of its own used (a
	// peer's, e.g. tools/asynqbench), when it was measured.
	ClientCPU time.Duration `json:"client_cpu_ns,omitempty"`
}

// Add appends another run's samples.
func (s *Samples) Add(o Samples) {
	s.Lat = append(s.Lat, o.Lat...)
	s.Errors += o.Errors
	if s.FirstError == "" {
		s.FirstError = o.FirstError
	}
	s.Elapsed += o.Elapsed
	s.ClientCPU += o.ClientCPU
}

// Summary computes rate and percentiles over all runs (sorting Lat).
func (s Samples) Summary() Summary {
	sum := Summarize(s.Lat, s.Errors, s.Elapsed)
	sum.FirstError = s.FirstError
	return sum
}

func collect(rs []*recorder, elapsed time.Duration) Samples {
	n := 0
	for _, r := range rs {
		n += len(r.lat)
	}
	out := Samples{Lat: make([]time.Duration, 0, n), Elapsed: elapsed}
	for _, r := range rs {
		out.Lat = append(out.Lat, r.lat...)
		out.Errors += r.errs
		if out.FirstError == "" {
			out.FirstError = r.firstErr
		}
	}
	return out
}
