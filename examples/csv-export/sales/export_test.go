package sales

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustNew(t testing.TB, p Params) *Export {
	t.Helper()
	e, err := New(p)
	require.NoError(t, err)
	return e
}

func write(t testing.TB, e *Export) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := e.Write(context.Background(), &buf, nil)
	require.NoError(t, err)
	require.Equal(t, e.Rows(), n)
	return buf.Bytes()
}

func TestExportHasTheRowsItAnnounces(t *testing.T) {
	t.Parallel()
	p := Params{Region: "North", From: "2026-01-01", To: "2026-03-31", Currency: "GBP", Products: []string{"CHR-101", "MON-401", "PAP-902"}}
	e := mustNew(t, p)
	require.Equal(t, 90, e.Days())
	var reported []int64
	var buf bytes.Buffer
	n, err := e.Write(context.Background(), &buf, func(rows int64) { reported = append(reported, rows) })
	require.NoError(t, err)
	require.Equal(t, e.Rows(), n)
	require.Equal(t, n, reported[len(reported)-1], "progress ends at the total")

	// A real CSV reader reads it: a header and Rows() rows of 15 cells.
	records, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
	require.NoError(t, err)
	require.Equal(t, columns, records[0])
	require.Len(t, records, int(n)+1)
	from, _ := time.Parse(dateLayout, p.From)
	to, _ := time.Parse(dateLayout, p.To)
	codes := map[string]bool{"CHR-101": true, "MON-401": true, "PAP-902": true}
	ids := map[string]bool{}
	for _, r := range records[1:] {
		require.Len(t, r, len(columns))
		require.False(t, ids[r[0]], "order ids are unique: %s", r[0])
		ids[r[0]] = true
		day, err := time.Parse(dateLayout, r[1])
		require.NoError(t, err)
		require.False(t, day.Before(from) || day.After(to), r[1])
		require.Equal(t, "North", r[3])
		require.True(t, codes[r[6]], "only the products asked for: %s", r[6])
		require.Equal(t, catalog[productIndex[r[6]]].name, r[7], "quoted names read back")
		require.Equal(t, "GBP", r[14])
		qty, unit, disc := atoi(t, r[8]), cents(t, r[9]), atoi(t, r[10])
		net, tax, gross := cents(t, r[11]), cents(t, r[12]), cents(t, r[13])
		require.Equal(t, (unit*qty*(100-disc)+50)/100, net, "%v", r)
		require.Equal(t, (net*vatPercent+50)/100, tax, "%v", r)
		require.Equal(t, net+tax, gross, "%v", r)
	}
	// Without a product filter there are more rows, of every product.
	p.Products = nil
	all := mustNew(t, p)
	require.Greater(t, all.Rows(), 3*e.Rows())
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

func cents(t *testing.T, s string) int64 {
	t.Helper()
	units, frac, ok := strings.Cut(s, ".")
	require.True(t, ok, s)
	require.Len(t, frac, 2, s)
	return atoi(t, units)*100 + atoi(t, frac)
}

// TestSchemaDescribesParams: the hand-written schema and the Go struct
// name the same fields, and the schema requires exactly the fields without
// omitempty.
func TestSchemaDescribesParams(t *testing.T) {
	t.Parallel()
	var doc struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(Schema, &doc))
	var fields, required []string
	rt := reflect.TypeOf(Params{})
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
		if opts != "omitempty" {
			required = append(required, name)
		}
	}
	require.ElementsMatch(t, fields, slices.Collect(maps.Keys(doc.Properties)))
	require.ElementsMatch(t, required, doc.Required)
}

func TestExportIsDeterministic(t *testing.T) {
	t.Parallel()
	p := Params{Region: "Lower Saxony", From: "2025-12-30", To: "2026-01-04"}
	a, b := write(t, mustNew(t, p)), write(t, mustNew(t, p))
	require.Equal(t, sha256.Sum256(a), sha256.Sum256(b))

	// A day reads the same in any range that covers it.
	p2 := p
	p2.From, p2.To = "2026-01-01", "2026-01-01"
	day := write(t, mustNew(t, p2))
	_, rows, _ := bytes.Cut(day, []byte("\n"))
	require.True(t, bytes.Contains(a, rows))
	require.Contains(t, string(rows), ",2026-01-01,")

	// Another region, other sales.
	p.Region = "Bavaria"
	require.NotEqual(t, sha256.Sum256(a), sha256.Sum256(write(t, mustNew(t, p))))
	// Another currency: the same sales in other amounts.
	p.Region, p.Currency = "Lower Saxony", "USD"
	usd := write(t, mustNew(t, p))
	require.Equal(t, bytes.Count(a, []byte("\n")), bytes.Count(usd, []byte("\n")))
	require.NotEqual(t, a, usd)
}

func TestParamsNoExportCanServeAreInvalid(t *testing.T) {
	t.Parallel()
	ok := Params{Region: "North", From: "2026-01-01", To: "2026-01-31"}
	for name, edit := range map[string]func(*Params){
		"to before from":   func(p *Params) { p.To = "2025-12-31" },
		"not a date":       func(p *Params) { p.From = "2026-02-30" },
		"range too long":   func(p *Params) { p.From = "2024-01-01" },
		"unknown product":  func(p *Params) { p.Products = []string{"CHR-101", "XYZ-999"} },
		"unknown currency": func(p *Params) { p.Currency = "JPY" },
		"formula region":   func(p *Params) { p.Region = "=HYPERLINK(1)" },
		"empty region":     func(p *Params) { p.Region = "" },
	} {
		p := ok
		edit(&p)
		_, err := New(p)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	// The longest range is fine; one day is fine.
	ok.From, ok.To = "2024-01-01", "2025-12-31" // a leap year: 731 days
	e, err := New(ok)
	require.NoError(t, err)
	require.Equal(t, MaxDays, e.Days())
	ok.To = "2026-01-01"
	_, err = New(ok)
	require.ErrorIs(t, err, ErrInvalid, "one day more")
	ok.To = "2025-12-31"
	ok.To = ok.From
	_, err = New(ok)
	require.NoError(t, err)
}

// TestExportStreamsInSmallMemory writes more than 50 MB and checks that
// the export allocated next to nothing: it never holds more than a row and
// its write buffer.
func TestExportStreamsInSmallMemory(t *testing.T) {
	// Not parallel: it reads the process's allocation counters.
	if testing.Short() {
		t.Skip("50 MB in -short")
	}
	var exports []*Export
	for _, region := range []string{"North", "South", "East", "West", "Central", "Coast"} {
		exports = append(exports, mustNew(t, Params{Region: region, From: "2025-01-01", To: "2026-12-31"}))
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var written countingWriter
	var rows int64
	for _, e := range exports {
		if written.n >= 50<<20 {
			break
		}
		n, err := e.Write(context.Background(), &written, nil)
		require.NoError(t, err)
		rows += n
	}
	runtime.ReadMemStats(&after)
	require.GreaterOrEqual(t, written.n, int64(50<<20))
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d rows, %d MB written, %d KiB allocated, heap in use %d KiB", rows, written.n>>20, allocated>>10, after.HeapInuse>>10)
	require.Less(t, allocated, uint64(1<<20), "bytes allocated while writing %d MB", written.n>>20)
	require.Less(t, after.HeapInuse, before.HeapInuse+4<<20)
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// TestLargestExportFitsTheResultBudget: the longest range, the longest
// region name and the busiest region stay within the 64 MiB result budget
// the example declares.
func TestLargestExportFitsTheResultBudget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 3-year export in -short")
	}
	var busiest *Export
	for i := range 200 {
		region := "R" + strings.Repeat("x", 59) + strconv.Itoa(1000+i)
		e := mustNew(t, Params{Region: region, From: "2024-01-01", To: "2025-12-31"})
		if busiest == nil || e.base > busiest.base {
			busiest = e
		}
	}
	require.Len(t, busiest.region, 64)
	var w countingWriter
	_, err := busiest.Write(context.Background(), &w, nil)
	require.NoError(t, err)
	t.Logf("largest export: %d rows, %d bytes", busiest.Rows(), w.n)
	require.Less(t, w.n, int64(MaxResultBytes*9/10))
}

func TestExportStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	e := mustNew(t, Params{Region: "North", From: "2025-01-01", To: "2026-12-31"})
	ctx, cancel := context.WithCancel(context.Background())
	n, err := e.Write(ctx, io.Discard, func(rows int64) {
		if rows >= 20000 {
			cancel()
		}
	})
	require.True(t, errors.Is(err, context.Canceled))
	require.Less(t, n, int64(30000))
}

// BenchmarkExport is the generator alone: a year of one region into
// io.Discard.
func BenchmarkExport(b *testing.B) {
	e := mustNew(b, Params{Region: "North", From: "2025-01-01", To: "2025-12-31"})
	var w countingWriter
	if _, err := e.Write(context.Background(), &w, nil); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(w.n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Write(context.Background(), io.Discard, nil); err != nil {
			b.Fatal(err)
		}
	}
}
