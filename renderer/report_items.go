package renderer

import (
	"cmp"
	"context"
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// The content of a permit report, apart from its layout: which section each
// inspection page covers, the items measured on it and their results, and
// the totals the summary shows. Everything here is a pure function of the
// ReportInput, so the summary (drawn before the pages) and the pages agree
// item for item, and a re-render yields the same file.

// outcome is an item's result.
type outcome uint8

const (
	pass outcome = iota
	observation
	fail
	numOutcomes
)

var outcomeNames = [numOutcomes]string{pass: "Pass", observation: "Observation", fail: "Fail"}

func (o outcome) String() string { return outcomeNames[o] }

// itemsPerPage is how many items an inspection page records.
const itemsPerPage = 20

// item is one measured inspection item.
type item struct {
	check int   // index into checks
	value int64 // measured value in 10^-dec units of the check (exactly as printed)
	// The location: a level and a grid cell, or for site works an area
	// and a spot number.
	level, gridCol, gridRow uint8
	result                  outcome
}

// inspectionPage is the content of one inspection page.
type inspectionPage struct {
	page        int // page number in the document
	section     int
	sectionPage int // 1 for the first page of its section
	inspector   string
	level       uint8 // the level (or site area) the page's round covers
	items       [itemsPerPage]item
}

var pow10 = [...]float64{1, 10, 100, 1000}

// scaled is v in units of the check's printed precision.
func (c *check) scaled(v float64) int64 { return int64(math.Round(v * pow10[c.dec])) }

// judge derives the result from a measured value (in printed precision)
// and the check's limit: Fail beyond the limit, Observation within the
// tolerance band on the complying side, Pass otherwise.
func judge(c *check, value int64) outcome {
	margin := c.margin(value)
	switch {
	case margin < 0:
		return fail
	case c.tol > 0 && margin <= c.scaled(c.tol):
		return observation
	}
	return pass
}

// margin is how far value is on the complying side of the limit (negative:
// beyond it), in printed-precision units.
func (c *check) margin(value int64) int64 {
	if c.kind == atMost {
		return c.scaled(c.limit) - value
	}
	return value - c.scaled(c.limit)
}

// appendValue appends a value of the check as printed: "194 mm", "1:14.5".
func (c *check) appendValue(b []byte, v float64) []byte {
	if c.ratio {
		b = append(b, "1:"...)
		return strconv.AppendFloat(b, v, 'f', c.dec, 64)
	}
	b = strconv.AppendFloat(b, v, 'f', c.dec, 64)
	return append(append(b, ' '), c.unit...)
}

// limitText is the limit as printed: "max 190 mm", "min 900 mm"; for
// gradients the words speak of the slope ("max 1:12": not steeper; "min
// 1:80": not shallower) and the ratio carries no trailing zeros.
func (c *check) limitText() string {
	word := "min "
	if (c.kind == atMost) != c.ratio {
		word = "max "
	}
	if c.ratio {
		return word + "1:" + strconv.FormatFloat(c.limit, 'f', -1, 64)
	}
	return string(c.appendValue([]byte(word), c.limit))
}

// appendMeasured appends an item's measured value as printed.
func (c *check) appendMeasured(b []byte, value int64) []byte {
	return c.appendValue(b, float64(value)/pow10[c.dec])
}

// pageRand is the page's own generator: seeded by case, revision and page,
// so every page is reproducible on its own.
func pageRand(in ReportInput, page int) *rand.Rand {
	h := fnv.New64a()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(in.CaseID))
	binary.LittleEndian.PutUint64(b[8:], uint64(in.Revision))
	binary.LittleEndian.PutUint64(b[16:], uint64(page))
	h.Write(b[:])
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// firstInspectionPage is the page number of the first inspection page:
// page 1 is the title, page 2 the summary.
const firstInspectionPage = 3

// inspectionPages is how many inspection pages a report of in.Pages has.
func inspectionPages(pages int) int { return max(0, pages-firstInspectionPage+1) }

// sectionOf is the section the i-th of n inspection pages covers: the
// sections take turns in report order, in contiguous blocks of pages as
// even as possible; with fewer pages than sections, the first n sections
// get one page each.
func sectionOf(i, n int) int {
	if n <= numSections {
		return i
	}
	return i * numSections / n
}

// sectionStart is the index of the first of n inspection pages that covers
// section s (the inverse of sectionOf).
func sectionStart(s, n int) int {
	if n <= numSections {
		return s
	}
	return (s*n + numSections - 1) / numSections
}

var inspectors = []string{
	"A. Okafor", "M. Lindqvist", "R. Haddad", "S. Moreau", "K. Tanaka", "J. Novak", "L. Brennan", "P. Castillo",
}

// Levels are printed by their index: basement, ground floor, upper floors.
var levelNames = []string{"B1", "GF", "L1", "L2", "L3", "L4", "L5"}

// siteAreas are where site works are inspected.
var siteAreas = []string{"North car park", "Main entrance", "East footpath", "Service yard", "West boundary", "Drop-off bay"}

// generatePage generates inspection page number page of a report of
// in.Pages pages (page ≥ firstInspectionPage).
func generatePage(in ReportInput, page int) inspectionPage {
	n := inspectionPages(in.Pages)
	i := page - firstInspectionPage
	s := sectionOf(i, n)
	rng := pageRand(in, page)
	p := inspectionPage{page: page, section: s, sectionPage: i - sectionStart(s, n) + 1}
	p.inspector = inspectors[rng.IntN(len(inspectors))]
	switch s {
	case secFoundations:
		p.level = uint8(rng.IntN(2)) // B1 or GF
	case secSite:
		p.level = uint8(rng.IntN(len(siteAreas)))
	default:
		p.level = uint8(1 + rng.IntN(len(levelNames)-1))
	}
	ids := sectionChecks[s]
	for r := range p.items {
		it := &p.items[r]
		it.check = ids[rng.IntN(len(ids))]
		c := &checks[it.check]
		if c.steps != nil {
			it.value = c.scaled(c.steps[rng.IntN(len(c.steps))])
		} else {
			// Triangular between lo and hi: values cluster mid-range,
			// the tails (where limits sit) are thinner.
			u := (rng.Float64() + rng.Float64()) / 2
			it.value = c.scaled(c.lo + u*(c.hi-c.lo))
		}
		it.level = p.level
		it.gridCol = uint8(rng.IntN(8))
		it.gridRow = uint8(1 + rng.IntN(9))
		it.result = judge(c, it.value)
	}
	return p
}

// tally counts items by result.
type tally [numOutcomes]int

func (t tally) items() int { return t[pass] + t[observation] + t[fail] }

func (t *tally) add(o tally) {
	for i := range o {
		t[i] += o[i]
	}
}

// sectionSummary is one section's line in the summary.
type sectionSummary struct {
	firstPage, lastPage int // 0 when the report has no page of the section
	tally
}

// finding locates an item in the report.
type finding struct {
	page, row int
	it        item
}

// exceedance is how far a failed item is beyond its limit, relative to the
// limit (0.05 = 5 % over a max, or 5 % short of a min).
func (f finding) exceedance() float64 {
	c := &checks[f.it.check]
	return float64(-c.margin(f.it.value)) / float64(c.scaled(c.limit))
}

// maxWorst is how many of the largest non-compliances the summary lists:
// the worst item of each check, largest exceedance first.
const maxWorst = 8

// reportSummary is what the title and summary pages show.
type reportSummary struct {
	inspectionPages int
	sections        [numSections]sectionSummary
	total           tally
	worst           []finding // per check its worst failed item; largest exceedances first, at most maxWorst
}

// summarize generates every inspection page of the report and totals its
// items. It checks ctx every few pages: a 2000-page report is generated
// here once before its pages are drawn.
func summarize(ctx context.Context, in ReportInput) (*reportSummary, error) {
	sum := &reportSummary{inspectionPages: inspectionPages(in.Pages)}
	worst := make([]finding, len(checks)) // per check; page 0: none failed
	for page := firstInspectionPage; page <= in.Pages; page++ {
		if page%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		p := generatePage(in, page)
		sec := &sum.sections[p.section]
		if sec.firstPage == 0 {
			sec.firstPage = page
		}
		sec.lastPage = page
		for r, it := range p.items {
			sec.tally[it.result]++
			if it.result == fail {
				// The earliest of equal exceedances stays.
				f := finding{page: page, row: r + 1, it: it}
				if w := &worst[it.check]; w.page == 0 || f.exceedance() > w.exceedance() {
					*w = f
				}
			}
		}
	}
	for _, sec := range sum.sections {
		sum.total.add(sec.tally)
	}
	for _, w := range worst {
		if w.page != 0 {
			sum.worst = append(sum.worst, w)
		}
	}
	slices.SortStableFunc(sum.worst, func(a, b finding) int {
		if c := cmp.Compare(b.exceedance(), a.exceedance()); c != 0 {
			return c
		}
		return cmp.Compare(a.page*itemsPerPage+a.row, b.page*itemsPerPage+b.row)
	})
	sum.worst = sum.worst[:min(len(sum.worst), maxWorst)]
	return sum, nil
}

// visitDate is when a section was inspected: the sections were visited
// on consecutive working days before the report date.
func visitDate(reportDate time.Time, section int) time.Time {
	d := reportDate.AddDate(0, 0, -2*(numSections-section))
	switch d.Weekday() {
	case time.Saturday:
		d = d.AddDate(0, 0, -1)
	case time.Sunday:
		d = d.AddDate(0, 0, -2)
	}
	return d
}
