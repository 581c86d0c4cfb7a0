package renderer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-pdf/fpdf"
	"github.com/jobgate/jobgate/internal/job"
)

// defaultReportDate is the report date when the input carries no creation
// time. A fixed date keeps the bytes a pure function of the request, so a
// re-render after a crash stores the very same file.
var defaultReportDate = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// ContentTypePDF is the content type of permit reports.
const ContentTypePDF = "application/pdf"

// ReportInput is everything a permit report shows.
type ReportInput struct {
	Tenant    string
	Requester string
	CaseID    int64
	Revision  int64
	Pages     int
	// CreatedAt is when the job was created: the report's date (and the
	// PDF's creation date), so a re-render yields the same bytes. Zero
	// means defaultReportDate.
	CreatedAt time.Time
}

// reportDate is the date the report carries, in UTC.
func (in ReportInput) reportDate() time.Time {
	if in.CreatedAt.IsZero() {
		return defaultReportDate
	}
	return in.CreatedAt.UTC()
}

// errOutputTooLarge: the finished document exceeds the output budget.
var errOutputTooLarge = errors.New("report exceeds the output size budget")

// RenderPermitReport writes a permit report of exactly in.Pages pages to w:
// a title page, a summary page with the results per section (from page 2),
// then inspection pages, each recording measured items against their
// limits; every page numbered. With one page, the title page carries the
// totals. The output is a pure function of in. After each finished page it
// calls progress with the number of pages done; an error from progress, or
// ctx ending, stops the render.
func RenderPermitReport(ctx context.Context, in ReportInput, w io.Writer, progress func(done int) error) error {
	if in.Pages < 1 {
		return permanent(job.CategoryRenderError, "pages must be at least 1, got %d", in.Pages)
	}
	// The summary comes before the pages it sums up: generate every page's
	// items first (cheap, nothing is kept but the totals), then draw.
	sum, err := summarize(ctx, in)
	if err != nil {
		return err
	}
	d := newReportDoc(in, sum)
	d.titlePage()
	if err := step(ctx, d.pdf, progress, 1); err != nil {
		return err
	}
	if in.Pages >= 2 {
		d.summaryPage()
		if err := step(ctx, d.pdf, progress, 2); err != nil {
			return err
		}
	}
	for page := firstInspectionPage; page <= in.Pages; page++ {
		p := generatePage(in, page)
		d.inspectionPage(&p)
		if err := step(ctx, d.pdf, progress, page); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.pdf.Output(w); err != nil {
		if errors.Is(err, errOutputTooLarge) {
			return err
		}
		return permanent(job.CategoryRenderError, "the PDF could not be written: %v", err)
	}
	return nil
}

func step(ctx context.Context, pdf *fpdf.Fpdf, progress func(int) error, done int) error {
	if err := pdf.Error(); err != nil {
		return permanent(job.CategoryRenderError, "page %d could not be rendered: %v", done, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if progress != nil {
		return progress(done)
	}
	return nil
}

// reportDoc is a report being drawn.
type reportDoc struct {
	pdf  *fpdf.Fpdf
	in   ReportInput
	sum  *reportSummary
	date time.Time
	buf  []byte // scratch for formatting values
}

func newReportDoc(in ReportInput, sum *reportSummary) *reportDoc {
	d := &reportDoc{in: in, sum: sum, date: in.reportDate(), buf: make([]byte, 0, 64)}
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetCreationDate(d.date)
	pdf.SetModificationDate(d.date)
	pdf.SetCatalogSort(true)
	pdf.SetCompression(true)
	pdf.SetProducer("jobgate", false)
	pdf.SetTitle(fmt.Sprintf("Permit inspection report, case %d, revision %d", in.CaseID, in.Revision), false)
	pdf.SetSubject(fmt.Sprintf("Building permit inspection, case %d", in.CaseID), false)
	pdf.SetAuthor("jobgate", false)
	pdf.AliasNbPages("{nb}")
	pdf.SetMargins(marginX, 12, marginX)
	pdf.SetAutoPageBreak(false, 15)
	footer := cp1252(fmt.Sprintf("Case %d · revision %d · %s", in.CaseID, in.Revision, d.date.Format("2 January 2006")))
	pdf.SetFooterFunc(func() {
		pdf.SetDrawColor(190, 196, 208)
		pdf.SetLineWidth(0.2)
		pdf.Line(marginX, pageH-14, pageW-marginX, pageH-14)
		pdf.SetY(-13)
		pdf.SetFont("Helvetica", "", 8)
		pdf.SetTextColor(110, 110, 110)
		pdf.CellFormat(0, 6, footer, "", 0, "L", false, 0, "")
		pdf.SetX(marginX)
		pdf.CellFormat(0, 6, fmt.Sprintf("Page %d of {nb}", pdf.PageNo()), "", 0, "R", false, 0, "")
	})
	d.pdf = pdf
	return d
}
