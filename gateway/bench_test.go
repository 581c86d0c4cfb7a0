package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"
)

// benchSetup is a gateway on embedded JetStream for benchmarks.
func benchSetup(b *testing.B) (*Gateway, *testBundle) {
	b.Helper()
	bundle := &testBundle{dir: b.TempDir(), secret: []byte("bench"), clock: &testClock{}}
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: bundle.dir})
	if err != nil {
		b.Fatal(err)
	}
	nc, err := emb.Connect("bench")
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	res, err := natsjs.Provision(context.Background(), js, natsjs.DefaultLayout())
	if err != nil {
		b.Fatal(err)
	}
	jobtest.DeclareTypes(b, res) // as the renderer would, on start
	g, err := New(Config{Addr: "127.0.0.1:0", AuthSecret: bundle.secret, SubmitRate: 1e9, SubmitBurst: 1 << 30, ReadRate: 1e9, ReadBurst: 1 << 30,
		LeaveWorkToRelay: true}, storesOf(res), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Stop(context.Background()); nc.Close(); emb.Shutdown() })
	bundle.emb, bundle.res, bundle.url = emb, res, "http://"+g.Addr()
	bundle.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return g, bundle
}

func benchPost(b *testing.B, c *http.Client, url, tok, key string) int {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(permit))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var buf [4096]byte
	for {
		if _, err := resp.Body.Read(buf[:]); err != nil {
			break
		}
	}
	resp.Body.Close()
	return resp.StatusCode
}

// BenchmarkRawFloor: the JetStream operations one admission needs (the
// create-only commit and the work publish), without HTTP: the floor the
// admission benchmarks are compared with.
func BenchmarkRawFloor(b *testing.B) {
	_, bundle := benchSetup(b)
	var n atomic.Int64
	b.SetParallelism(16) // ×GOMAXPROCS goroutines, as the HTTP benchmarks
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			now := time.Now()
			rec := &job.Record{ID: fmt.Sprintf("job_%026d", i), Tenant: "4", Requester: "r", Type: "permit_report",
				Params: []byte(`{"case_id":47,"pages":63,"revision":29}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
			if err := bundle.res.Jobs.Create(ctx, rec); err != nil {
				b.Fatal(err)
			}
			msg := &nats.Msg{Subject: natsjs.WorkSubject(rec.Type, "4", "r", rec.ID), Data: []byte(rec.Key()), Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, rec.ID)
			if _, err := bundle.res.JS.PublishMsg(ctx, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAdmissionNew: unique keys over HTTP, parallel clients.
func BenchmarkAdmissionNew(b *testing.B) {
	_, bundle := benchSetup(b)
	tok := bundle.token(&testing.T{}, "4", "reviewer-47", false)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s := benchPost(b, bundle.http, bundle.url, tok, fmt.Sprintf("k-%d", n.Add(1))); s != http.StatusAccepted {
				b.Fatalf("status %d", s)
			}
		}
	})
}

// BenchmarkAdmissionReplay: the same key re-posted; writes nothing.
func BenchmarkAdmissionReplay(b *testing.B) {
	_, bundle := benchSetup(b)
	tok := bundle.token(&testing.T{}, "4", "reviewer-47", false)
	benchPost(b, bundle.http, bundle.url, tok, "same")
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s := benchPost(b, bundle.http, bundle.url, tok, "same"); s != http.StatusOK {
				b.Fatalf("status %d", s)
			}
		}
	})
}

// BenchmarkSubmitHandler calls the gateway's HTTP handler in-process (no
// sockets, no client) on embedded JetStream, one request at a time, so the
// figures are the server's own: allocations per request and the process's
// CPU time per request (cpu-µs/op, gateway and embedded server together,
// which is what `jobgate bench` reports as srv µs/op). A replay should cost
// well under an admission: it writes nothing and, for a byte-identical body,
// decodes nothing (bodyProof).
func BenchmarkSubmitHandler(b *testing.B) {
	// Two formattings of permit's params, taken in turn: each one's proof
	// replaces the other's, so every request takes the full decode.
	reformatted := [][]byte{
		[]byte(`{"params":{"pages":63,"revision":29,"case_id":47},"type":"permit_report"}`),
		[]byte(`{"type":"permit_report","params":{"case_id":47.0,"revision":29,"pages":63}}`),
	}
	other := []byte(`{"type":"permit_report","params":{"case_id":47,"revision":30,"pages":63}}`)
	one := func(b []byte) [][]byte { return [][]byte{b} }
	cases := []struct {
		name   string
		bodies [][]byte
		newKey bool
		want   int
	}{
		{"new", one([]byte(permit)), true, http.StatusAccepted},
		{"replay", one([]byte(permit)), false, http.StatusOK},
		{"replay-reformatted", reformatted, false, http.StatusOK},
		{"conflict", one(other), false, http.StatusConflict},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			g, bundle := benchSetup(b)
			auth := []byte("Bearer " + bundle.token(&testing.T{}, "4", "reviewer-47", false))
			h := g.app.Handler()
			var ctx fasthttp.RequestCtx
			ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
			var key []byte
			do := func(body []byte, want int) {
				ctx.Request.Reset()
				ctx.Response.Reset()
				ctx.Request.Header.SetMethod(fasthttp.MethodPost)
				ctx.Request.SetRequestURI("/v1/jobs")
				ctx.Request.Header.SetBytesV("Authorization", auth)
				ctx.Request.Header.SetBytesV("Idempotency-Key", key)
				ctx.Request.Header.SetContentType("application/json")
				ctx.Request.SetBody(body)
				h(&ctx)
				if s := ctx.Response.StatusCode(); s != want {
					b.Fatalf("status %d: %s", s, ctx.Response.Body())
				}
			}
			key = append(key[:0], "same"...)
			do([]byte(permit), http.StatusAccepted) // the job replays and conflicts meet
			if !tc.newKey {
				do(tc.bodies[0], tc.want) // warm, as the loop runs
			}
			n := 0
			cpu0 := processCPU()
			b.ReportAllocs()
			for b.Loop() {
				if tc.newKey {
					n++
					key = strconv.AppendInt(append(key[:0], "k-"...), int64(n), 10)
				}
				do(tc.bodies[n%len(tc.bodies)], tc.want)
				if !tc.newKey {
					n++
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkStore is the store's share of BenchmarkSubmitHandler, in its
// units: one record created (admission's one write) and one record read (a
// replay's one read), serially, with the process's CPU time per operation.
// The HTTP and gateway cost of a request is the handler's figure minus
// these (docs/performance.md, "Replay").
func BenchmarkStore(b *testing.B) {
	_, bundle := benchSetup(b)
	ctx := context.Background()
	now := time.Now()
	rec := func(i int) *job.Record {
		return &job.Record{ID: fmt.Sprintf("job_%026d", i), Tenant: "4", Requester: "reviewer-47", Type: "permit_report",
			Params: []byte(`{"case_id":47,"pages":63,"revision":29}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
	}
	i := 0 // across runs of the sub-benchmark: every create is a new key
	b.Run("create", func(b *testing.B) {
		cpu0 := processCPU()
		b.ReportAllocs()
		for b.Loop() {
			i++
			if err := bundle.res.Jobs.Create(ctx, rec(i)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
	r := rec(0)
	if err := bundle.res.Jobs.Create(ctx, r); err != nil {
		b.Fatal(err)
	}
	b.Run("read", func(b *testing.B) {
		cpu0 := processCPU()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bundle.res.Jobs.Get(ctx, r.Key()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSignLink and BenchmarkVerifyLink: result link signing.
func BenchmarkSignLink(b *testing.B) {
	s := &linkSigner{key: []byte("0123456789abcdef0123456789abcdef"), ttl: 5 * time.Minute, now: time.Now}
	b.ReportAllocs()
	for b.Loop() {
		s.sign("4", "reviewer-47", "job_abcdefghijklmnopqrstuvwxyz", "job_abcdefghijklmnopqrstuvwxyz")
	}
}

func BenchmarkVerifyLink(b *testing.B) {
	s := &linkSigner{key: []byte("0123456789abcdef0123456789abcdef"), ttl: 5 * time.Minute, now: time.Now}
	href, _ := s.sign("4", "reviewer-47", "job_abcdefghijklmnopqrstuvwxyz", "job_abcdefghijklmnopqrstuvwxyz")
	tok := strings.TrimPrefix(href, "/v1/results/")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
