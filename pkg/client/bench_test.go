package client_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/jobgate/jobgate/pkg/client"
)

// benchSubmit measures one Submit against a minimal contract server, so
// the figure is the SDK's own cost: with a journal that is two durable
// bbolt transactions (claim before the request, record after it).
func benchSubmit(b *testing.B, opts ...client.Option) {
	clk := newFakeClock()
	cs := &contractServer{clk: clk}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	tok := mintFor(&testing.T{}, "4", "reviewer-47")
	c, err := client.New(srv.URL, tok, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": i + 1, "revision": 1}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSubmitJournaled(b *testing.B) {
	benchSubmit(b, client.WithJournal(filepath.Join(b.TempDir(), "journal.db")))
}

func BenchmarkSubmitWithoutJournal(b *testing.B) {
	benchSubmit(b, client.WithoutJournal())
}
