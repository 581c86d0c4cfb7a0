package renderer

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/jobgate/jobgate/pkg/job"
)

// reportParams are the canonical params of a permit_report job, as the
// gateway stored them (defaults applied).
type reportParams struct {
	CaseID   int64 `json:"case_id"`
	Revision int64 `json:"revision"`
	Pages    int   `json:"pages"`
}

func decodeParams(raw json.RawMessage) (reportParams, error) {
	var p reportParams
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("params: %w", err)
	}
	return p, nil
}

// reportInput checks a claimed record against what this renderer can do and
// its budgets; what it refuses is a permanent failure.
func (r *Renderer) reportInput(rec *job.Record) (ReportInput, error) {
	if rec.Type != job.PermitReport.Name {
		return ReportInput{}, permanent(job.CategoryRenderError, "job type %q cannot be rendered", rec.Type)
	}
	p, err := decodeParams(rec.Params)
	if err != nil {
		return ReportInput{}, permanent(job.CategoryRenderError, "the job's params cannot be read: %v", err)
	}
	if p.CaseID < 1 || p.Revision < 1 || p.Pages < 1 {
		return ReportInput{}, permanent(job.CategoryRenderError, "case_id, revision and pages must be at least 1")
	}
	if p.Pages > r.cfg.MaxPages {
		return ReportInput{}, permanent(job.CategoryBudgetExceeded, "%d pages exceed the page budget of %d", p.Pages, r.cfg.MaxPages)
	}
	return ReportInput{Tenant: rec.Tenant, Requester: rec.Requester, CaseID: p.CaseID, Revision: p.Revision, Pages: p.Pages}, nil
}
