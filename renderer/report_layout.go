package renderer

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Page geometry (A4, mm).
const (
	pageW   = 210.0
	pageH   = 297.0
	marginX = 12.0
	bodyW   = pageW - 2*marginX
)

type rgb struct{ r, g, b int }

var (
	colNavy     = rgb{20, 40, 80}
	colText     = rgb{25, 25, 25}
	colMuted    = rgb{105, 110, 120}
	colRule     = rgb{190, 196, 208}
	colHeadFill = rgb{225, 230, 240}
	colStripe   = rgb{246, 247, 250}
	// Per outcome: the ink of its word and bar, and a light fill behind it.
	outcomeInk  = [numOutcomes]rgb{pass: {30, 120, 60}, observation: {176, 112, 0}, fail: {185, 28, 36}}
	outcomeFill = [numOutcomes]rgb{pass: {226, 242, 231}, observation: {253, 240, 208}, fail: {250, 224, 225}}
	outcomeBar  = [numOutcomes]rgb{pass: {64, 155, 95}, observation: {232, 168, 40}, fail: {206, 60, 60}}
)

func (d *reportDoc) text(c rgb) { d.pdf.SetTextColor(c.r, c.g, c.b) }
func (d *reportDoc) fill(c rgb) { d.pdf.SetFillColor(c.r, c.g, c.b) }
func (d *reportDoc) draw(c rgb) { d.pdf.SetDrawColor(c.r, c.g, c.b) }

// cp1252 converts s to the code page of the PDF core fonts (Windows-1252),
// which has °, ², ³, · and the dashes the report prints. fpdf's own
// translator shares one buffer between calls and so cannot serve renders
// running at once; this one is a pure function. A rune outside the code
// page becomes '?' (the report prints none: a test checks every unit).
func cp1252(s string) string {
	ascii := true
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	b := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r < 0x80 || (r >= 0xA0 && r <= 0xFF):
			b = append(b, byte(r))
		default:
			c, ok := cp1252High[r]
			if !ok {
				c = '?'
			}
			b = append(b, c)
		}
	}
	return string(b)
}

// cp1252High maps the printable characters of Windows-1252 in 0x80–0x9F.
var cp1252High = map[rune]byte{
	'€': 0x80, '‚': 0x82, 'ƒ': 0x83, '„': 0x84, '…': 0x85, '†': 0x86, '‡': 0x87, 'ˆ': 0x88, '‰': 0x89,
	'Š': 0x8A, '‹': 0x8B, 'Œ': 0x8C, 'Ž': 0x8E, '‘': 0x91, '’': 0x92, '“': 0x93, '”': 0x94, '•': 0x95,
	'–': 0x96, '—': 0x97, '˜': 0x98, '™': 0x99, 'š': 0x9A, '›': 0x9B, 'œ': 0x9C, 'ž': 0x9E, 'Ÿ': 0x9F,
}

// Checks' printed strings, in the PDF's code page, computed once.
var (
	checkUnits  = make([]string, len(checks))
	checkLimits = make([]string, len(checks))
	checkBands  = make([]string, len(checks))
)

func init() {
	for i := range checks {
		c := &checks[i]
		c.unit = cp1252(c.unit)
		checkUnits[i] = c.unit
		checkLimits[i] = c.limitText()
		checkBands[i] = c.bandText()
	}
}

// bandText is the observation band as printed: "188–190 mm", "1:12.0–1:12.5".
func (c *check) bandText() string {
	if c.tol == 0 {
		return ""
	}
	edge := c.limit - c.tol
	if c.kind == atLeast {
		edge = c.limit + c.tol
	}
	lo, hi := min(edge, c.limit), max(edge, c.limit)
	var b []byte
	if c.ratio {
		b = c.appendValue(b, lo)
	} else {
		b = strconv.AppendFloat(b, lo, 'f', c.dec, 64)
	}
	b = append(b, 0x96) // en dash, cp1252
	return string(c.appendValue(b, hi))
}

// sectionIntro says what was inspected in a section.
var sectionIntro = [numSections]string{
	secStructural:    "Beams, columns and connections of the frame were measured against the structural drawings and the engineer's calculations. Concrete strengths are from the laboratory's 28-day cube results.",
	secFoundations:   "Excavations, footings, the ground slab and the damp-proof membrane were inspected before backfilling and before the concrete pour.",
	secFire:          "Compartment walls, fire doors and service penetrations were checked for the fire resistance the approved drawings require.",
	secEgress:        "Stairs, guarding, exit doors, travel distances and escape lighting were measured along every escape route.",
	secElectrical:    "Protective devices, earthing and insulation were tested per circuit; each value is the least favourable reading of the circuit.",
	secPlumbing:      "Traps, drain falls, vents, hot water storage and the incoming supply were inspected and tested.",
	secVentilation:   "Extract and whole-dwelling ventilation rates were measured at commissioning; fan noise with the fan on its normal setting.",
	secAccessibility: "The approach, entrances, doors, ramps and sanitary facilities were measured against the accessibility provisions.",
	secEnergy:        "U-values are taken from the installed products' certificates, insulation thicknesses measured on site, air permeability from the pressure test.",
	secSite:          "External works: kerbs, footpaths, parking, boundaries and surface water drainage.",
}

// num formats an integer count.
func num(n int) string { return strconv.Itoa(n) }

// percent formats part of whole as "81.8 %"; "-" when whole is 0.
func percent(part, whole int) string {
	if whole == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + " %"
}

// pageRange is "3-8", "3", or "-" when the section has no page.
func pageRange(s sectionSummary) string {
	switch {
	case s.firstPage == 0:
		return "-"
	case s.firstPage == s.lastPage:
		return num(s.firstPage)
	}
	return cp1252(num(s.firstPage) + "–" + num(s.lastPage))
}

// fitCell prints s in a cell of width w, shrinking the font down to minPt
// and then cutting s short with "..." so a long value never overflows the
// cell. The font size is restored after.
func (d *reportDoc) fitCell(w, h float64, s, border string, ln int, align string, fill bool, minPt float64) {
	pdf := d.pdf
	pt, _ := pdf.GetFontSize()
	room := w - 2*pdf.GetCellMargin()
	size := pt
	for size > minPt && pdf.GetStringWidth(s) > room {
		size -= 0.5
		pdf.SetFontSize(size)
	}
	if pdf.GetStringWidth(s) > room {
		for len(s) > 0 && pdf.GetStringWidth(s+"...") > room {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	pdf.CellFormat(w, h, s, border, ln, align, fill, 0, "")
	pdf.SetFontSize(pt)
}

// runningHead is the line at the top of the summary and inspection pages.
func (d *reportDoc) runningHead(right string) {
	pdf := d.pdf
	pdf.SetY(10)
	pdf.SetFont("Helvetica", "", 8)
	d.text(colMuted)
	pdf.CellFormat(bodyW/2, 5, fmt.Sprintf("Permit inspection report - case %d, revision %d", d.in.CaseID, d.in.Revision), "", 0, "L", false, 0, "")
	pdf.CellFormat(bodyW/2, 5, right, "", 1, "R", false, 0, "")
	d.draw(colRule)
	pdf.SetLineWidth(0.2)
	pdf.Line(marginX, 16, pageW-marginX, 16)
	pdf.SetY(20)
}

// verdict is the report's overall outcome in words, and its colour.
func (d *reportDoc) verdict() (head, body string, o outcome) {
	t := d.sum.total
	switch {
	case t.items() == 0:
		return "No items recorded", "This document has no inspection pages, so it records no inspection items. " +
			"A report of three or more pages lists the items of the case.", observation
	case t[fail] > 0:
		return "Not compliant", fmt.Sprintf("Failed items: %d of %d. Each needs remedial work and a re-inspection before the permit can be signed off.",
			t[fail], t.items()), fail
	case t[observation] > 0:
		return "Compliant with observations", fmt.Sprintf("No item fails. %s within their tolerance of the limit must be re-measured before sign-off.",
			plural(t[observation], "observation", "observations")), observation
	}
	return "Compliant", fmt.Sprintf("All %s items comply with their limits.", num(t.items())), pass
}

func items(n int) string { return plural(n, "item", "items") }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return num(n) + " " + many
}

func (d *reportDoc) titlePage() {
	pdf, in, sum := d.pdf, d.in, d.sum
	pdf.AddPage()

	// Banner.
	d.fill(colNavy)
	pdf.Rect(0, 0, pageW, 46, "F")
	pdf.SetTextColor(255, 255, 255)
	pdf.SetXY(marginX, 14)
	pdf.SetFont("Helvetica", "", 11)
	pdf.CellFormat(bodyW, 6, "BUILDING CONTROL", "", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "B", 24)
	pdf.CellFormat(bodyW, 13, "Permit Inspection Report", "", 1, "L", false, 0, "")

	pdf.SetXY(marginX, 58)
	d.text(colNavy)
	pdf.SetFont("Helvetica", "B", 20)
	pdf.CellFormat(bodyW, 10, fmt.Sprintf("Case %d, revision %d", in.CaseID, in.Revision), "", 1, "L", false, 0, "")
	// Particulars.
	pdf.SetY(76)
	doc := "1 page: title page"
	if in.Pages >= 2 {
		doc = fmt.Sprintf("%d pages: title, summary", in.Pages)
		if sum.inspectionPages > 0 {
			doc += ", " + plural(sum.inspectionPages, "inspection page", "inspection pages")
		}
	}
	sections := 0
	for _, s := range sum.sections {
		if s.items() > 0 {
			sections++
		}
	}
	rows := [][2]string{
		{"Tenant", in.Tenant},
		{"Case", num64(in.CaseID)},
		{"Revision", num64(in.Revision)},
		{"Requested by", in.Requester},
		{"Report date", d.date.Format("2 January 2006, 15:04 UTC")},
		{"Document", doc},
		{"Inspection items", fmt.Sprintf("%s in %s", num(sum.total.items()), plural(sections, "section", "sections"))},
	}
	if sum.total.items() == 0 {
		rows[len(rows)-1][1] = "none"
	}
	for _, r := range rows {
		pdf.SetX(marginX)
		pdf.SetFont("Helvetica", "B", 11)
		d.text(colText)
		d.draw(colRule)
		pdf.CellFormat(48, 8, r[0], "B", 0, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 11)
		d.fitCell(bodyW-48, 8, r[1], "B", 1, "L", false, 7)
	}

	// Outcome.
	head, body, o := d.verdict()
	y := pdf.GetY() + 8
	d.fill(outcomeFill[o])
	d.draw(outcomeInk[o])
	pdf.SetLineWidth(0.6)
	pdf.Rect(marginX, y, bodyW, 44, "FD")
	pdf.SetLineWidth(0.2)
	pdf.SetXY(marginX+5, y+4)
	pdf.SetFont("Helvetica", "", 9)
	d.text(colMuted)
	pdf.CellFormat(bodyW-10, 5, "OUTCOME", "", 1, "L", false, 0, "")
	pdf.SetX(marginX + 5)
	pdf.SetFont("Helvetica", "B", 16)
	d.text(outcomeInk[o])
	pdf.CellFormat(bodyW-10, 9, head, "", 1, "L", false, 0, "")
	pdf.SetX(marginX + 5)
	pdf.SetFont("Helvetica", "", 10)
	d.text(colText)
	pdf.MultiCell(bodyW-10, 5, body, "", "L", false)
	// The totals, on every title page: with one page, the only place.
	d.totals(marginX+5, y+33, bodyW-10, 8)

	// Contents.
	pdf.SetY(y + 52)
	if in.Pages >= 2 {
		pdf.SetFont("Helvetica", "B", 12)
		d.text(colNavy)
		pdf.CellFormat(bodyW, 8, "Contents", "", 1, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 10)
		d.text(colText)
		entries := [][2]string{{"Summary of findings", "2"}}
		for s, sec := range sum.sections {
			if sec.firstPage != 0 {
				entries = append(entries, [2]string{fmt.Sprintf("%d  %s", s+1, sectionNames[s]), pageRange(sec)})
			}
		}
		// Two columns, filled top to bottom.
		const colW, gap, lineH = (bodyW - 12) / 2, 12.0, 5.6
		rows := (len(entries) + 1) / 2
		top := pdf.GetY()
		for i, e := range entries {
			pdf.SetXY(marginX+float64(i/rows)*(colW+gap), top+float64(i%rows)*lineH)
			pdf.CellFormat(colW-16, lineH, e[0], "", 0, "L", false, 0, "")
			pdf.CellFormat(16, lineH, e[1], "", 0, "R", false, 0, "")
		}
	}

	pdf.SetXY(marginX, pageH-34)
	pdf.SetFont("Helvetica", "I", 8)
	d.text(colMuted)
	pdf.MultiCell(bodyW, 4, cp1252(fmt.Sprintf("Prepared by jobgate for %s on %s. Each result follows from the measured value and the limit printed next to it: "+
		"Pass complies; Observation complies but lies within the check's measurement tolerance of the limit; Fail does not comply. "+
		"The inspection values in this document are generated from the case and revision, so the same request always yields the same document.",
		in.Requester, d.date.Format("2 January 2006"))), "", "L", false)
}

func num64(n int64) string { return strconv.FormatInt(n, 10) }

// totals draws the four totals (items, pass, observation, fail) in a row
// at (x, y), w wide, h high.
func (d *reportDoc) totals(x, y, w, h float64) {
	pdf, t := d.pdf, d.sum.total
	cw := w / 4
	labels := [4]string{"Items", "Pass", "Observation", "Fail"}
	values := [4]string{num(t.items()), num(t[pass]), num(t[observation]), num(t[fail])}
	for i := range 4 {
		cx := x + float64(i)*cw
		ink := colNavy
		if i > 0 {
			ink = outcomeInk[i-1]
		}
		d.fill(ink)
		pdf.Rect(cx, y, 1.2, h, "F")
		pdf.SetXY(cx+2.5, y)
		pdf.SetFont("Helvetica", "B", 12)
		d.text(ink)
		vw := pdf.GetStringWidth(values[i]) + 2
		pdf.CellFormat(vw, h, values[i], "", 0, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 9)
		d.text(colMuted)
		label := labels[i]
		if i > 0 && t.items() > 0 {
			label += " (" + percent(t[i-1], t.items()) + ")"
		}
		pdf.CellFormat(cw-vw-3, h, label, "", 0, "L", false, 0, "")
	}
}

func (d *reportDoc) summaryPage() {
	pdf, sum := d.pdf, d.sum
	pdf.AddPage()
	d.runningHead("Summary of findings")

	pdf.SetX(marginX)
	pdf.SetFont("Helvetica", "B", 18)
	d.text(colNavy)
	pdf.CellFormat(bodyW, 10, "Summary of findings", "", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 10)
	d.text(colText)
	pdf.MultiCell(bodyW, 5, fmt.Sprintf("%s recorded on %s, by section of the building.",
		items(sum.total.items()), plural(sum.inspectionPages, "inspection page", "inspection pages")), "", "L", false)
	pdf.Ln(3)

	// Totals band.
	y := pdf.GetY()
	d.fill(colStripe)
	pdf.Rect(marginX, y, bodyW, 14, "F")
	d.totals(marginX+3, y+3, bodyW-6, 8)
	pdf.SetY(y + 20)

	d.sectionChart()
	d.worstList()

	// How to read the results.
	pdf.SetXY(marginX, pageH-44)
	pdf.SetFont("Helvetica", "B", 9)
	d.text(colNavy)
	pdf.CellFormat(bodyW, 5, "How results are derived", "", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 8.5)
	d.text(colText)
	pdf.MultiCell(bodyW, 4.2, cp1252("Every item is measured in the unit of its check and compared with the check's limit, which is either a maximum "+
		"(riser height max 190 mm, U-value max 1.40 W/m²K) or a minimum (handrail height min 900 mm, air change rate min 0.50 ACH); "+
		"values are compared as printed. Pass: the value complies. Observation: it complies but lies within the check's measurement "+
		"tolerance of the limit (for example 188–190 mm for a 190 mm maximum riser, tolerance 2 mm) and is to be re-measured before sign-off. "+
		"Fail: the value is beyond the limit. Gradients are written 1:x; max 1:12 means no steeper than 1:12."), "", "L", false)
}

// sectionChart draws the results per section as a table whose middle
// column is a stacked bar (pass, observation, fail) scaled to the largest
// section.
func (d *reportDoc) sectionChart() {
	pdf, sum := d.pdf, d.sum
	const (
		rowH  = 7.4
		barH  = 4.4
		wName = 44.0
		wPage = 20.0
		wBar  = 62.0
		wNum  = 12.0
		wRate = bodyW - wName - wPage - wBar - 3*wNum
	)
	pdf.SetFont("Helvetica", "B", 12)
	d.text(colNavy)
	pdf.CellFormat(bodyW, 8, "Results per section", "", 1, "L", false, 0, "")

	most := 0
	for _, s := range sum.sections {
		most = max(most, s.items())
	}
	step := niceStep(most)
	scaleMax := float64(step) * math.Ceil(float64(max(most, 1))/float64(step))

	// Header.
	pdf.SetFont("Helvetica", "B", 8.5)
	d.text(colText)
	d.fill(colHeadFill)
	y := pdf.GetY()
	pdf.SetX(marginX)
	pdf.CellFormat(wName, 7, "Section", "", 0, "L", true, 0, "")
	pdf.CellFormat(wPage, 7, "Pages", "", 0, "L", true, 0, "")
	pdf.CellFormat(wBar, 7, "Items by result", "", 0, "L", true, 0, "")
	pdf.CellFormat(wNum, 7, "Pass", "", 0, "R", true, 0, "")
	pdf.CellFormat(wNum, 7, "Obs.", "", 0, "R", true, 0, "")
	pdf.CellFormat(wNum, 7, "Fail", "", 0, "R", true, 0, "")
	pdf.CellFormat(wRate, 7, "Pass rate", "", 1, "R", true, 0, "")
	top := y + 7
	barX := marginX + wName + wPage + 1
	barW := wBar - 4

	// Grid lines behind the bars.
	d.draw(rgb{220, 224, 232})
	pdf.SetLineWidth(0.15)
	for v := 0; float64(v) <= scaleMax; v += step {
		x := barX + barW*float64(v)/scaleMax
		pdf.Line(x, top, x, top+rowH*numSections)
	}

	for s, sec := range sum.sections {
		ry := top + rowH*float64(s)
		if s%2 == 1 {
			d.fill(colStripe)
			pdf.Rect(marginX, ry, bodyW, rowH, "F")
			// The stripe covers the grid; draw it again over the stripe.
			d.draw(rgb{220, 224, 232})
			for v := 0; float64(v) <= scaleMax; v += step {
				x := barX + barW*float64(v)/scaleMax
				pdf.Line(x, ry, x, ry+rowH)
			}
		}
		pdf.SetXY(marginX, ry)
		pdf.SetFont("Helvetica", "", 9)
		d.text(colText)
		pdf.CellFormat(wName, rowH, fmt.Sprintf("%d  %s", s+1, sectionNames[s]), "", 0, "L", false, 0, "")
		d.text(colMuted)
		pdf.CellFormat(wPage, rowH, pageRange(sec), "", 0, "L", false, 0, "")
		// The bar.
		x := barX
		for o := range numOutcomes {
			n := sec.tally[o]
			if n == 0 {
				continue
			}
			w := barW * float64(n) / scaleMax
			d.fill(outcomeBar[o])
			pdf.Rect(x, ry+(rowH-barH)/2, w, barH, "F")
			x += w
		}
		if sec.items() == 0 {
			pdf.SetFont("Helvetica", "I", 8)
			pdf.SetXY(barX, ry)
			pdf.CellFormat(barW, rowH, "not inspected in this report", "", 0, "L", false, 0, "")
		}
		pdf.SetXY(marginX+wName+wPage+wBar, ry)
		pdf.SetFont("Helvetica", "", 9)
		for o := range numOutcomes {
			d.text(colText)
			if o != pass && sec.tally[o] > 0 {
				d.text(outcomeInk[o])
			}
			pdf.CellFormat(wNum, rowH, num(sec.tally[o]), "", 0, "R", false, 0, "")
		}
		d.text(colText)
		pdf.CellFormat(wRate, rowH, percent(sec.tally[pass], sec.items()), "", 1, "R", false, 0, "")
	}

	// Axis: tick values under the bar column, totals on the right.
	ay := top + rowH*numSections
	d.draw(colRule)
	pdf.SetLineWidth(0.3)
	pdf.Line(marginX, ay, pageW-marginX, ay)
	pdf.SetFont("Helvetica", "", 7)
	d.text(colMuted)
	for v := 0; float64(v) <= scaleMax; v += step {
		x := barX + barW*float64(v)/scaleMax
		pdf.SetXY(x-8, ay+0.5)
		pdf.CellFormat(16, 4, num(v), "", 0, "C", false, 0, "")
	}
	pdf.SetXY(marginX, ay)
	pdf.SetFont("Helvetica", "B", 9)
	d.text(colText)
	pdf.CellFormat(wName+wPage, rowH, "All sections", "", 0, "L", false, 0, "")
	pdf.SetX(marginX + wName + wPage + wBar)
	for o := range numOutcomes {
		pdf.CellFormat(wNum, rowH, num(sum.total[o]), "", 0, "R", false, 0, "")
	}
	pdf.CellFormat(wRate, rowH, percent(sum.total[pass], sum.total.items()), "", 1, "R", false, 0, "")

	// Legend.
	pdf.SetY(pdf.GetY() + 1)
	x := barX
	pdf.SetFont("Helvetica", "", 8)
	for o := range numOutcomes {
		d.fill(outcomeBar[o])
		pdf.Rect(x, pdf.GetY()+1.2, 3.2, 3.2, "F")
		pdf.SetX(x + 4)
		d.text(colText)
		label := outcomeNames[o]
		lw := pdf.GetStringWidth(label) + 3
		pdf.CellFormat(lw, 5.6, label, "", 0, "L", false, 0, "")
		x += lw + 7
	}
	pdf.Ln(8)
}

// niceStep is a grid step (1, 2 or 5 times a power of ten) giving at most
// five intervals up to most.
func niceStep(most int) int {
	step := 1
	for {
		for _, m := range []int{1, 2, 5} {
			if most <= 5*step*m {
				return step * m
			}
		}
		step *= 10
	}
}

// worstList lists the largest non-compliances of the whole report.
func (d *reportDoc) worstList() {
	pdf, sum := d.pdf, d.sum
	pdf.SetX(marginX)
	pdf.SetFont("Helvetica", "B", 12)
	d.text(colNavy)
	pdf.CellFormat(bodyW, 8, "Largest non-compliances", "", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 9)
	d.text(colMuted)
	pdf.CellFormat(bodyW, 5, "The failed item of each check that lies furthest beyond its limit, relative to the limit.", "", 1, "L", false, 0, "")
	pdf.Ln(1)
	if len(sum.worst) == 0 {
		pdf.SetFont("Helvetica", "", 9.5)
		d.text(colText)
		pdf.CellFormat(bodyW, 6, "No item fails its limit.", "", 1, "L", false, 0, "")
		return
	}
	widths := []float64{20, 12, 66, 28, 30, 30}
	heads := []string{"Ref", "Page", "Check", "Measured", "Limit", "Beyond limit"}
	pdf.SetFont("Helvetica", "B", 8.5)
	d.text(colText)
	d.fill(colHeadFill)
	pdf.SetX(marginX)
	for i, h := range heads {
		align := "L"
		if i == len(heads)-1 {
			align = "R"
		}
		pdf.CellFormat(widths[i], 6.5, h, "", 0, align, true, 0, "")
	}
	pdf.Ln(-1)
	pdf.SetFont("Helvetica", "", 8.5)
	for r, f := range sum.worst {
		c := &checks[f.it.check]
		pdf.SetX(marginX)
		d.fill(colStripe)
		fill := r%2 == 1
		d.text(colText)
		pdf.CellFormat(widths[0], 5.8, itemRef(f.page, f.row), "", 0, "L", fill, 0, "")
		pdf.CellFormat(widths[1], 5.8, num(f.page), "", 0, "L", fill, 0, "")
		pdf.CellFormat(widths[2], 5.8, c.name, "", 0, "L", fill, 0, "")
		d.buf = c.appendMeasured(d.buf[:0], f.it.value)
		pdf.CellFormat(widths[3], 5.8, string(d.buf), "", 0, "L", fill, 0, "")
		pdf.CellFormat(widths[4], 5.8, checkLimits[f.it.check], "", 0, "L", fill, 0, "")
		d.text(outcomeInk[fail])
		pdf.CellFormat(widths[5], 5.8, d.beyond(c, f.it.value), "", 1, "R", fill, 0, "")
	}
}

// beyond is how far a failed value lies beyond the limit: "4 mm (2.1 %)".
func (d *reportDoc) beyond(c *check, value int64) string {
	over := -c.margin(value)
	rel := 100 * float64(over) / float64(c.scaled(c.limit))
	var b []byte
	if c.ratio {
		b = strconv.AppendFloat(b, rel, 'f', 1, 64)
		return string(append(b, " %"...))
	}
	b = strconv.AppendFloat(b, float64(over)/pow10[c.dec], 'f', c.dec, 64)
	b = append(append(b, ' '), c.unit...)
	b = append(b, " ("...)
	b = strconv.AppendFloat(b, rel, 'f', 1, 64)
	return string(append(b, " %)"...))
}

// beyondWord says which way a failed value misses its limit.
func (c *check) beyondWord() string {
	switch {
	case c.ratio && c.kind == atLeast:
		return "too steep"
	case c.ratio:
		return "too flat"
	case c.kind == atMost:
		return "over"
	}
	return "short"
}

// itemRef names an item: page and row, "0017-05".
func itemRef(page, row int) string {
	var b [12]byte
	out := b[:0]
	if page < 1000 {
		out = append(out, '0')
	}
	if page < 100 {
		out = append(out, '0')
	}
	if page < 10 {
		out = append(out, '0')
	}
	out = strconv.AppendInt(out, int64(page), 10)
	out = append(out, '-')
	if row < 10 {
		out = append(out, '0')
	}
	return string(strconv.AppendInt(out, int64(row), 10))
}

// location is where an item was measured: "L2 C/4", or for site works
// the area and a spot, "Service yard, spot 4".
func location(section int, it item) string {
	if section == secSite {
		return siteAreas[it.level] + ", spot " + num(int(it.gridRow))
	}
	return levelNames[it.level] + " grid " + string(rune('A'+it.gridCol)) + "/" + num(int(it.gridRow))
}

// Inspection table columns.
var (
	itemCols  = [...]float64{17, 32, 60, 26, 27, 24}
	itemHeads = [...]string{"Ref", "Location", "Check", "Measured", "Limit", "Result"}
)

func (d *reportDoc) inspectionPage(p *inspectionPage) {
	pdf := d.pdf
	pdf.AddPage()
	name := sectionNames[p.section]
	d.runningHead(fmt.Sprintf("%d  %s", p.section+1, name))

	pdf.SetX(marginX)
	pdf.SetFont("Helvetica", "B", 15)
	d.text(colNavy)
	head := fmt.Sprintf("%d  %s", p.section+1, name)
	if p.sectionPage > 1 {
		head += fmt.Sprintf(" (continued, sheet %d)", p.sectionPage)
	}
	pdf.CellFormat(bodyW, 9, head, "", 1, "L", false, 0, "")

	where := levelNames[p.level]
	if p.section == secSite {
		where = siteAreas[p.level]
	} else {
		where = "level " + where
	}
	pdf.SetFont("Helvetica", "", 9)
	d.text(colMuted)
	pdf.CellFormat(bodyW, 5, cp1252(fmt.Sprintf("Site visit %s · inspector %s · %s",
		visitDate(d.date, p.section).Format("Monday 2 January 2006"), p.inspector, where)), "", 1, "L", false, 0, "")
	pdf.Ln(1.5)
	pdf.SetFont("Helvetica", "", 9.5)
	d.text(colText)
	if p.sectionPage == 1 {
		pdf.MultiCell(bodyW, 4.6, cp1252(sectionIntro[p.section]), "", "L", false)
	} else {
		pdf.MultiCell(bodyW, 4.6, fmt.Sprintf("Continued from page %d.", p.page-1), "", "L", false)
	}
	pdf.Ln(2.5)

	// The items.
	pdf.SetFont("Helvetica", "B", 8.5)
	d.fill(colHeadFill)
	d.draw(colRule)
	pdf.SetLineWidth(0.2)
	pdf.SetX(marginX)
	for i, h := range itemHeads {
		pdf.CellFormat(itemCols[i], 7, h, "", 0, "L", true, 0, "")
	}
	pdf.Ln(-1)
	var t tally
	const rowH = 6.4
	// Fonts and fills are set only when they change: each change is an
	// operator in the page's content, and 2000 pages of them add up.
	pdf.SetFont("Helvetica", "", 8.5)
	for r := range p.items {
		it := &p.items[r]
		c := &checks[it.check]
		t[it.result]++
		y := pdf.GetY()
		if r%2 == 1 {
			d.fill(colStripe)
			pdf.Rect(marginX, y, bodyW, rowH, "F")
		}
		pdf.SetX(marginX)
		d.text(colText)
		pdf.CellFormat(itemCols[0], rowH, itemRef(p.page, r+1), "", 0, "L", false, 0, "")
		pdf.CellFormat(itemCols[1], rowH, location(p.section, *it), "", 0, "L", false, 0, "")
		pdf.CellFormat(itemCols[2], rowH, c.name, "", 0, "L", false, 0, "")
		d.buf = c.appendMeasured(d.buf[:0], it.value)
		pdf.CellFormat(itemCols[3], rowH, string(d.buf), "", 0, "L", false, 0, "")
		pdf.CellFormat(itemCols[4], rowH, checkLimits[it.check], "", 0, "L", false, 0, "")
		// The result: a coloured tag.
		x := pdf.GetX()
		d.fill(outcomeFill[it.result])
		pdf.Rect(x+1, y+1, itemCols[5]-2, rowH-2, "F")
		d.text(outcomeInk[it.result])
		if it.result != pass {
			pdf.SetFont("Helvetica", "B", 8.5)
		}
		pdf.CellFormat(itemCols[5], rowH, it.result.String(), "", 1, "C", false, 0, "")
		if it.result != pass {
			pdf.SetFont("Helvetica", "", 8.5)
		}
	}
	d.draw(colRule)
	pdf.Line(marginX, pdf.GetY(), pageW-marginX, pdf.GetY())

	// Findings: what a reviewer has to act on, in words.
	pdf.Ln(4)
	pdf.SetX(marginX)
	pdf.SetFont("Helvetica", "B", 10)
	d.text(colNavy)
	pdf.CellFormat(bodyW, 6, "Findings on this sheet", "", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 8.5)
	d.text(colText)
	pdf.SetX(marginX)
	pdf.CellFormat(bodyW, 5, fmt.Sprintf("%s: %d pass, %s, %d fail.", items(t.items()), t[pass],
		plural(t[observation], "observation", "observations"), t[fail]), "", 1, "L", false, 0, "")
	listed := 0
	for r := range p.items {
		it := &p.items[r]
		if it.result == pass {
			continue
		}
		if pdf.GetY() > pageH-48 {
			pdf.SetX(marginX)
			pdf.SetFont("Helvetica", "I", 8.5)
			d.text(colMuted)
			pdf.CellFormat(bodyW, 4.8, fmt.Sprintf("%d further findings are marked in the table above.", t[observation]+t[fail]-listed), "", 1, "L", false, 0, "")
			break
		}
		listed++
		c := &checks[it.check]
		d.buf = c.appendMeasured(d.buf[:0], it.value)
		var note string
		if it.result == fail {
			note = fmt.Sprintf("%s: %s against %s, %s %s. Remedy and re-inspect.",
				c.name, d.buf, checkLimits[it.check], d.beyond(c, it.value), c.beyondWord())
		} else {
			note = fmt.Sprintf("%s: %s against %s complies, but within the tolerance band %s. Re-measure before sign-off.",
				c.name, d.buf, checkLimits[it.check], checkBands[it.check])
		}
		pdf.SetX(marginX)
		d.text(outcomeInk[it.result])
		pdf.SetFont("Helvetica", "B", 8.5)
		pdf.CellFormat(22, 4.6, it.result.String(), "", 0, "L", false, 0, "")
		d.text(colText)
		pdf.CellFormat(16, 4.6, itemRef(p.page, r+1), "", 0, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 8.5)
		pdf.MultiCell(bodyW-38, 4.6, note, "", "L", false)
	}

	// Sign-off.
	y := pageH - 34
	d.draw(colRule)
	pdf.SetLineWidth(0.2)
	pdf.Rect(marginX, y, bodyW, 14, "D")
	pdf.SetFont("Helvetica", "", 8)
	d.text(colMuted)
	labels := [3]string{"Inspected by", "Signature", "Date"}
	values := [3]string{p.inspector, "", visitDate(d.date, p.section).Format("2 January 2006")}
	for i := range 3 {
		x := marginX + float64(i)*bodyW/3
		if i > 0 {
			pdf.Line(x, y, x, y+14)
		}
		pdf.SetXY(x+2, y+1)
		d.text(colMuted)
		pdf.SetFont("Helvetica", "", 7.5)
		pdf.CellFormat(bodyW/3-4, 4, labels[i], "", 2, "L", false, 0, "")
		pdf.SetX(x + 2)
		d.text(colText)
		pdf.SetFont("Helvetica", "", 10)
		pdf.CellFormat(bodyW/3-4, 7, values[i], "", 0, "L", false, 0, "")
	}
}
