package renderer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/stretchr/testify/require"
)

func init() { api.DisableConfigDir() }

// pdfPages reads a PDF with a real PDF reader (pdfcpu), validating it, and
// returns its page count.
func pdfPages(t testing.TB, data []byte) int {
	t.Helper()
	conf := model.NewDefaultConfiguration()
	require.NoError(t, api.Validate(bytes.NewReader(data), conf), "pdfcpu validation")
	n, err := api.PageCount(bytes.NewReader(data), conf)
	require.NoError(t, err)
	return n
}

func renderReport(t testing.TB, in ReportInput) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, RenderPermitReport(context.Background(), in, &buf, nil))
	return buf.Bytes()
}

func TestPermitReportHasExactlyThePagesAsked(t *testing.T) {
	t.Parallel()
	for _, pages := range []int{1, 2, 63} {
		data := renderReport(t, ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: pages})
		require.True(t, bytes.HasPrefix(data, []byte("%PDF-")))
		require.Equal(t, pages, pdfPages(t, data))
	}
}

func TestPermitReportIsDeterministic(t *testing.T) {
	t.Parallel()
	in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: 12}
	a, b := renderReport(t, in), renderReport(t, in)
	require.Equal(t, sha256.Sum256(a), sha256.Sum256(b))
	in.Revision = 30
	require.NotEqual(t, sha256.Sum256(a), sha256.Sum256(renderReport(t, in)))
}

func BenchmarkPermitReport63(b *testing.B) { benchReport(b, 63) }

func BenchmarkPermitReport2000(b *testing.B) { benchReport(b, 2000) }

// benchReport renders a report per iteration and also reports the peak
// live heap seen while rendering (sampled every millisecond: the memory a
// renderer needs per concurrent render, garbage not yet collected
// included) and the size of the file.
func benchReport(b *testing.B, pages int) {
	in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: pages}
	b.ReportAllocs()
	runtime.GC()
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var max uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > max {
				max = v
			}
			select {
			case <-stop:
				peak <- max
				return
			case <-t.C:
			}
		}
	}()
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := RenderPermitReport(context.Background(), in, &buf, nil); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	close(stop)
	b.ReportMetric(float64(size), "bytes/report")
	b.ReportMetric(float64(<-peak)/(1<<20), "peak-heap-MiB")
}
