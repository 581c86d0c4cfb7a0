package renderer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-pdf/fpdf"
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

// pageContent is the decoded content stream of one page (its text shows as
// "(...) Tj" operands, in the PDF's code page).
func pageContent(t testing.TB, data []byte, page int) string {
	t.Helper()
	var out string
	err := api.ExtractContent(bytes.NewReader(data), []string{strconv.Itoa(page)}, func(r io.Reader, _ int) error {
		b, err := io.ReadAll(r)
		out += string(b)
		return err
	}, model.NewDefaultConfiguration())
	require.NoError(t, err)
	return out
}

func renderReport(t testing.TB, in ReportInput) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, RenderPermitReport(context.Background(), in, &buf, nil))
	return buf.Bytes()
}

var created = time.Date(2026, 11, 30, 14, 5, 0, 0, time.UTC)

func TestPermitReportHasExactlyThePagesAsked(t *testing.T) {
	t.Parallel()
	for _, pages := range []int{1, 2, 3, 63, 2000} {
		t.Run(strconv.Itoa(pages), func(t *testing.T) {
			t.Parallel()
			if pages == 2000 && testing.Short() {
				t.Skip("2000 pages in -short")
			}
			var done []int
			var buf bytes.Buffer
			in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: pages, CreatedAt: created}
			require.NoError(t, RenderPermitReport(context.Background(), in, &buf, func(d int) error {
				done = append(done, d)
				return nil
			}))
			data := buf.Bytes()
			require.True(t, bytes.HasPrefix(data, []byte("%PDF-")))
			require.Equal(t, pages, pdfPages(t, data))
			require.Len(t, done, pages, "progress after every page")
			for i, d := range done {
				require.Equal(t, i+1, d)
			}
			// Every page is numbered "Page n of N".
			for _, p := range []int{1, pages} {
				require.Contains(t, pageContent(t, data, p), fmt.Sprintf("(Page %d of %d)", p, pages))
			}
		})
	}
}

func TestPermitReportIsDeterministic(t *testing.T) {
	t.Parallel()
	in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: 12, CreatedAt: created}
	a, b := renderReport(t, in), renderReport(t, in)
	require.Equal(t, sha256.Sum256(a), sha256.Sum256(b))

	other := in
	other.Revision = 30
	require.NotEqual(t, sha256.Sum256(a), sha256.Sum256(renderReport(t, other)))

	// The report date is the job's creation time: it is printed and it is
	// the PDF's creation date; another creation time, another file.
	require.Contains(t, string(a), "/CreationDate (D:20261130140500")
	require.Contains(t, pageContent(t, a, 1), "(30 November 2026, 14:05 UTC)")
	other = in
	other.CreatedAt = created.Add(time.Hour)
	require.NotEqual(t, sha256.Sum256(a), sha256.Sum256(renderReport(t, other)))
	// In another zone, the same instant is the same report.
	other.CreatedAt = created.In(time.FixedZone("CET", 3600))
	require.Equal(t, a, renderReport(t, other))

	// No creation time: the old fixed date, still deterministic.
	in.CreatedAt = time.Time{}
	c := renderReport(t, in)
	require.Equal(t, c, renderReport(t, in))
	require.Contains(t, string(c), "/CreationDate (D:20240101000000")
}

// parseLimit reads a limit as printed ("max 190 mm", "min 1:12") back: its
// number, whether the number is the x of a gradient 1:x, and whether the
// compliant values are the ones at most the number.
func parseLimit(t *testing.T, s string) (limit float64, ratio, atMostNumber bool) {
	t.Helper()
	word, rest, ok := strings.Cut(s, " ")
	require.True(t, ok, s)
	require.Contains(t, []string{"max", "min"}, word, s)
	v, ratio := parseValue(t, rest)
	// "max 190 mm": at most 190. "max 1:12": no steeper than 1:12, so
	// x at least 12.
	return v, ratio, (word == "max") != ratio
}

// parseValue reads a measured value as printed: "194 mm", "1:14.5".
func parseValue(t *testing.T, s string) (float64, bool) {
	t.Helper()
	if x, ok := strings.CutPrefix(s, "1:"); ok {
		v, err := strconv.ParseFloat(x, 64)
		require.NoError(t, err, s)
		return v, true
	}
	n, _, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(n, 64)
	require.NoError(t, err, s)
	return v, false
}

// TestItemResultsFollowFromTheirValues reads every item's measured value
// and limit as the page prints them and derives the result independently:
// beyond the limit fails, within the check's tolerance of it on the
// complying side is an observation, otherwise it passes.
func TestItemResultsFollowFromTheirValues(t *testing.T) {
	t.Parallel()
	var total tally
	for _, in := range []ReportInput{
		{CaseID: 47, Revision: 29, Pages: 63},
		{CaseID: 1, Revision: 1, Pages: 400},
		{CaseID: 9001, Revision: 3, Pages: 5},
	} {
		for page := firstInspectionPage; page <= in.Pages; page++ {
			p := generatePage(in, page)
			for r, it := range p.items {
				c := &checks[it.check]
				measured := string(c.appendMeasured(nil, it.value))
				v, vRatio := parseValue(t, measured)
				limit, lRatio, atMostNumber := parseLimit(t, c.limitText())
				require.Equal(t, lRatio, vRatio, "%s: value %q and limit %q in the same notation", c.name, measured, c.limitText())

				margin := v - limit
				if atMostNumber {
					margin = limit - v
				}
				const eps = 1e-9
				want := pass
				switch {
				case margin < -eps:
					want = fail
				case c.tol > 0 && margin <= c.tol+eps:
					want = observation
				}
				require.Equal(t, want, it.result, "page %d row %d: %s %s against %s (tolerance %v)",
					page, r+1, c.name, measured, c.limitText(), c.tol)
				total[it.result]++
			}
		}
	}
	// A realistic mix: mostly passes, some of each other result.
	n := float64(total.items())
	require.Greater(t, float64(total[pass])/n, 0.75, "%v", total)
	require.InDelta(t, 0.06, float64(total[fail])/n, 0.04, "%v", total)
	require.InDelta(t, 0.07, float64(total[observation])/n, 0.04, "%v", total)
}

func checkNamed(t *testing.T, name string) *check {
	t.Helper()
	for i := range checks {
		if checks[i].name == name {
			return &checks[i]
		}
	}
	t.Fatalf("no check %q", name)
	return nil
}

// TestLimitsPointTheRightWay: max-type and min-type limits, gradients both
// ways, a rating without tolerance, at the edges.
func TestLimitsPointTheRightWay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		check, limit string
		values       map[float64]outcome
	}{
		{"Stair riser height", "max 190 mm", map[float64]outcome{160: pass, 187: pass, 188: observation, 190: observation, 191: fail}},
		{"Stair handrail height", "min 900 mm", map[float64]outcome{1000: pass, 911: pass, 910: observation, 900: observation, 899: fail}},
		{"Window U-value", "max 1.40 W/m²K", map[float64]outcome{1.1: pass, 1.35: observation, 1.4: observation, 1.41: fail}},
		{"Whole-dwelling air change rate", "min 0.50 ACH", map[float64]outcome{0.8: pass, 0.55: observation, 0.49: fail}},
		// Ramp: 1:14 is shallower than 1:12 (complies), 1:11.9 steeper.
		{"Ramp gradient", "max 1:12", map[float64]outcome{14: pass, 12.6: pass, 12.5: observation, 12: observation, 11.9: fail}},
		// Drain: 1:60 falls more than 1:80 (complies), 1:81 too flat.
		{"Foul drain fall", "min 1:80", map[float64]outcome{60: pass, 77: observation, 80: observation, 81: fail}},
		// A 32 A breaker on a 32 A limit is simply right.
		{"Final circuit breaker rating", "max 32 A", map[float64]outcome{16: pass, 32: pass, 40: fail}},
		{"Earth electrode resistance", "max 200 ohm", map[float64]outcome{20: pass, 196: observation, 201: fail}},
	}
	for _, tc := range cases {
		c := checkNamed(t, tc.check)
		require.Equal(t, cp1252(tc.limit), c.limitText(), c.name)
		for v, want := range tc.values {
			require.Equal(t, want, judge(c, c.scaled(v)), "%s %v", c.name, v)
		}
	}
}

// TestChecksHaveFittingUnitsAndSections: each check is measured in a unit
// that fits it and belongs to the section it is printed in.
func TestChecksHaveFittingUnitsAndSections(t *testing.T) {
	t.Parallel()
	want := []struct {
		name, section, unit string
		kind                limitKind
		limit               float64
	}{
		{"Beam bearing length", "Structural frame", "mm", atLeast, 100},
		{"Concrete cube strength, 28 days", "Structural frame", "N/mm²", atLeast, 37},
		{"Ground slab thickness", "Foundations", "mm", atLeast, 150},
		{"Fire door leaf-to-frame gap", "Fire separation", "mm", atMost, 4},
		{"Stair riser height", "Means of egress", "mm", atMost, 190},
		{"Stair handrail height", "Means of egress", "mm", atLeast, 900},
		{"Exit door clear width", "Means of egress", "mm", atLeast, 850},
		{"Travel distance to final exit", "Means of egress", "m", atMost, 45},
		{"Final circuit breaker rating", "Electrical service", "A", atMost, 32},
		{"Earth electrode resistance", "Electrical service", "ohm", atMost, 200},
		{"RCD trip time at rated current", "Electrical service", "ms", atMost, 300},
		{"Main bonding conductor size", "Electrical service", "mm²", atLeast, 10},
		{"Trap seal depth", "Plumbing and drainage", "mm", atLeast, 50},
		{"Hot water storage temperature", "Plumbing and drainage", "°C", atLeast, 60},
		{"Whole-dwelling air change rate", "Mechanical ventilation", "ACH", atLeast, 0.5},
		{"Kitchen extract rate (hood)", "Mechanical ventilation", "L/s", atLeast, 30},
		{"Duct insulation thickness", "Mechanical ventilation", "mm", atLeast, 25},
		{"Door clear opening width", "Accessibility", "mm", atLeast, 800},
		{"Door opening force", "Accessibility", "N", atMost, 30},
		{"Ramp handrail height", "Accessibility", "mm", atLeast, 900},
		{"Window U-value", "Energy envelope", "W/m²K", atMost, 1.4},
		{"External wall U-value", "Energy envelope", "W/m²K", atMost, 0.26},
		{"Wall insulation thickness", "Energy envelope", "mm", atLeast, 100},
		{"Air permeability at 50 Pa", "Energy envelope", "m³/(h·m²)", atMost, 8},
		{"Accessible parking bay width", "Site works", "mm", atLeast, 3600},
	}
	for _, w := range want {
		c := checkNamed(t, w.name)
		require.Equal(t, w.section, sectionNames[c.section], w.name)
		require.Equal(t, cp1252(w.unit), c.unit, w.name)
		require.Equal(t, w.kind, c.kind, w.name)
		require.Equal(t, w.limit, c.limit, w.name)
	}
	// Gradients are ratios, in the sections that have slopes.
	for _, name := range []string{"Ramp gradient", "Foul drain fall", "Footpath cross-fall"} {
		c := checkNamed(t, name)
		require.True(t, c.ratio, name)
		require.Empty(t, c.unit, name)
	}
	for i := range checks {
		c := &checks[i]
		// Units by what is measured: no U-value in mm, no rate in mm, no
		// thickness in anything but mm.
		switch lower := strings.ToLower(c.name); {
		case strings.Contains(lower, "u-value"):
			require.Equal(t, cp1252("W/m²K"), c.unit, c.name)
		case strings.Contains(lower, "thickness"), strings.Contains(lower, "height"),
			strings.Contains(lower, "width"), strings.Contains(lower, "depth"), strings.Contains(lower, "gap"):
			require.Equal(t, "mm", c.unit, c.name)
		case strings.Contains(lower, "extract rate"):
			require.Equal(t, "L/s", c.unit, c.name)
		case strings.Contains(lower, "resistance"), strings.Contains(lower, "impedance"):
			require.Contains(t, c.unit, "ohm", c.name)
		}
		// The limit sits inside the realistic range, so both sides occur.
		if c.steps == nil {
			require.Less(t, c.lo, c.limit, c.name)
			require.Greater(t, c.hi, c.limit, c.name)
			require.Less(t, c.tol, (c.hi-c.lo)/4, c.name)
			require.Equal(t, c.limit, float64(c.scaled(c.limit))/pow10[c.dec], "%s: the limit is exact at the printed precision", c.name)
		} else {
			var below, above bool
			for _, s := range c.steps {
				below = below || s < c.limit
				above = above || s > c.limit
			}
			require.True(t, below && above, c.name)
		}
	}
}

// TestUnitsAreInTheFontsCodePage: every unit and limit prints with the PDF
// core fonts (Windows-1252), as fpdf's own translator maps it.
func TestUnitsAreInTheFontsCodePage(t *testing.T) {
	t.Parallel()
	tr := fpdf.New("P", "mm", "A4", "").UnicodeTranslatorFromDescriptor("")
	for _, s := range []string{"W/m²K", "m³/(h·m²)", "°C", "N/mm²", "mm²", "–", "·"} {
		require.Equal(t, tr(s), cp1252(s), s)
	}
	for r := rune(0xA0); r <= 0xFF; r++ {
		require.Equal(t, tr(string(r)), cp1252(string(r)), "U+%04X", r)
	}
	for r := range cp1252High {
		require.Equal(t, tr(string(r)), cp1252(string(r)), "U+%04X", r)
	}
	for i := range checks {
		require.NotContains(t, checks[i].unit, "?", checks[i].name)
		require.NotContains(t, checkLimits[i], "?", checks[i].name)
		require.NotContains(t, checkBands[i], "?", checks[i].name)
	}
}

// TestPagesHoldTheirSectionsItems: a page records only its own section's
// checks; sections come in report order, in contiguous runs of pages, all
// of them once there are enough pages.
func TestPagesHoldTheirSectionsItems(t *testing.T) {
	t.Parallel()
	for _, pages := range []int{3, 7, 12, 13, 63, 2000} {
		in := ReportInput{CaseID: 47, Revision: 29, Pages: pages}
		prev := -1
		seen := map[int]bool{}
		sheet := 0
		for page := firstInspectionPage; page <= pages; page++ {
			p := generatePage(in, page)
			require.GreaterOrEqual(t, p.section, prev, "pages %d page %d: sections in order", pages, page)
			require.False(t, p.section != prev && seen[p.section], "section %d split", p.section)
			if p.section != prev {
				sheet = 0
			}
			sheet++
			require.Equal(t, sheet, p.sectionPage, "pages %d page %d", pages, page)
			seen[p.section] = true
			prev = p.section
			for _, it := range p.items {
				require.Equal(t, p.section, checks[it.check].section, "page %d: %s in %s", page, checks[it.check].name, sectionNames[p.section])
			}
		}
		require.Len(t, seen, min(numSections, pages-2), "pages %d", pages)
	}
}

// TestSummaryIsTheSumOfThePages: the summary counts exactly the items the
// pages show, and the rendered summary page prints those counts.
func TestSummaryIsTheSumOfThePages(t *testing.T) {
	t.Parallel()
	in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: 63, CreatedAt: created}
	sum, err := summarize(context.Background(), in)
	require.NoError(t, err)

	var want [numSections]sectionSummary
	var total tally
	var fails []finding
	for page := firstInspectionPage; page <= in.Pages; page++ {
		p := generatePage(in, page)
		s := &want[p.section]
		if s.firstPage == 0 {
			s.firstPage = page
		}
		s.lastPage = page
		for r, it := range p.items {
			s.tally[it.result]++
			total[it.result]++
			if it.result == fail {
				fails = append(fails, finding{page: page, row: r + 1, it: it})
			}
		}
	}
	require.Equal(t, want, sum.sections)
	require.Equal(t, total, sum.total)
	require.Equal(t, 61*itemsPerPage, total.items())
	require.Positive(t, total[fail])

	// The worst list: per check its furthest failed item, largest
	// exceedance first, none larger left out.
	perCheck := map[int]float64{}
	for _, f := range fails {
		perCheck[f.it.check] = max(perCheck[f.it.check], f.exceedance())
	}
	require.Len(t, sum.worst, min(maxWorst, len(perCheck)))
	seen := map[int]bool{}
	for i, f := range sum.worst {
		require.Equal(t, fail, f.it.result)
		require.Equal(t, f.it, generatePage(in, f.page).items[f.row-1], "the finding is the page's item")
		require.False(t, seen[f.it.check], "one item per check")
		seen[f.it.check] = true
		require.Equal(t, perCheck[f.it.check], f.exceedance(), "the check's worst item")
		if i > 0 {
			require.GreaterOrEqual(t, sum.worst[i-1].exceedance(), f.exceedance())
		}
	}
	last := sum.worst[len(sum.worst)-1].exceedance()
	larger := 0
	for _, e := range perCheck {
		if e > last {
			larger++
		}
	}
	require.Less(t, larger, len(sum.worst))

	// The summary page prints the same numbers; so does the title page.
	data := renderReport(t, in)
	page2 := pageContent(t, data, 2)
	for _, n := range []int{total.items(), total[pass], total[observation], total[fail]} {
		require.Contains(t, page2, "("+strconv.Itoa(n)+")")
	}
	for s, sec := range sum.sections {
		require.Contains(t, page2, fmt.Sprintf("(%d  %s)", s+1, sectionNames[s]))
		require.Contains(t, page2, "("+pageRange(sec)+")")
	}
	require.Contains(t, pageContent(t, data, 1), fmt.Sprintf("(%d)", total[fail]))
}

// TestOnePageReportCarriesTheTotals: a one-page report is a title page
// that states its (empty) totals and outcome; two pages add the summary.
func TestOnePageReportCarriesTheTotals(t *testing.T) {
	t.Parallel()
	in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: 1, CreatedAt: created}
	data := renderReport(t, in)
	title := pageContent(t, data, 1)
	require.Contains(t, title, "(No items recorded)")
	require.Contains(t, title, "(Items)")
	require.Contains(t, title, "(Fail)")

	in.Pages = 3
	data = renderReport(t, in)
	require.Contains(t, pageContent(t, data, 2), "(Summary of findings)")
	require.Contains(t, pageContent(t, data, 3), "(1  Structural frame)")
}

func TestRenderStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: 200, CreatedAt: created}
	ctx, cancel := context.WithCancel(context.Background())
	var last int
	err := RenderPermitReport(ctx, in, io.Discard, func(done int) error {
		last = done
		if done == 5 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 5, last)

	stop := errors.New("stop")
	require.ErrorIs(t, RenderPermitReport(context.Background(), in, io.Discard, func(int) error { return stop }), stop)
}

func BenchmarkPermitReport63(b *testing.B) { benchRender(b, 63, RenderPermitReport) }

func BenchmarkPermitReport2000(b *testing.B) { benchRender(b, 2000, RenderPermitReport) }

// BenchmarkSummarize2000 is the cost of generating every item once before
// drawing (the summary pass).
func BenchmarkSummarize2000(b *testing.B) {
	in := ReportInput{CaseID: 47, Revision: 29, Pages: 2000}
	for b.Loop() {
		if _, err := summarize(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRender renders a report per iteration and also reports the peak
// live heap seen while rendering (sampled every millisecond: the memory a
// renderer needs per concurrent render, garbage not yet collected
// included) and the size of the file.
func benchRender(b *testing.B, pages int, render func(context.Context, ReportInput, io.Writer, func(int) error) error) {
	in := ReportInput{Tenant: "4", Requester: "reviewer-47", CaseID: 47, Revision: 29, Pages: pages, CreatedAt: created}
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
		if err := render(context.Background(), in, &buf, nil); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	close(stop)
	b.ReportMetric(float64(size), "bytes/report")
	b.ReportMetric(float64(<-peak)/(1<<20), "peak-heap-MiB")
}
