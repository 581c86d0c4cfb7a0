// Command asynqbench is the Asynq side of `jobgate bench --sections
// nethttp` (issue 40): clients goroutines enqueue one task per unique id
// (asynq.TaskID, Asynq's "one job per key") with Asynq's client on a Redis
// the bench started, for the given duration, and print the samples as one
// JSON object (internal/bench.Samples: lat_ns, errors, first_error,
// elapsed_ns). It is a module of its own so that Asynq and go-redis stay
// out of jobgate's go.mod; `make bench` builds it into bin/.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

type samples struct {
	Lat        []time.Duration `json:"lat_ns"`
	Errors     int64           `json:"errors"`
	FirstError string          `json:"first_error,omitempty"`
	Elapsed    time.Duration   `json:"elapsed_ns"`
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	clients := flag.Int("clients", 32, "concurrent enqueuers")
	d := flag.Duration("duration", 5*time.Second, "how long to enqueue")
	prefix := flag.String("prefix", "k", "task id prefix (unique per run)")
	flag.Parse()
	if err := run(*addr, *clients, *d, *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "asynqbench:", err)
		os.Exit(1)
	}
}

func run(addr string, clients int, d time.Duration, prefix string) error {
	// One client (one go-redis pool) shared by the goroutines, as a web
	// backend holds one; its pool is sized for them.
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: clients})
	defer c.Close()
	type rec struct {
		lat      []time.Duration
		errs     int64
		firstErr string
	}
	recs := make([]*rec, clients)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range clients {
		r := &rec{lat: make([]time.Duration, 0, 8192)}
		recs[w] = r
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				// The same params as jobgate's permit_report submission.
				payload := []byte(`{"case_id":47,"revision":` + strconv.Itoa(i) + `,"pages":1}`)
				t0 := time.Now()
				_, err := c.Enqueue(asynq.NewTask("permit_report", payload),
					asynq.TaskID(prefix+"-"+strconv.Itoa(w)+"-"+strconv.Itoa(i)), asynq.MaxRetry(3))
				if err != nil {
					if r.errs == 0 {
						r.firstErr = err.Error()
					}
					r.errs++
					continue
				}
				r.lat = append(r.lat, time.Since(t0))
			}
		})
	}
	wg.Wait()
	out := samples{Elapsed: time.Since(start)}
	for _, r := range recs {
		out.Lat = append(out.Lat, r.lat...)
		out.Errors += r.errs
		if out.FirstError == "" {
			out.FirstError = r.firstErr
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
