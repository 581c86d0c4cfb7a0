package renderer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/worker"
)

// Renderer runs the permit_report job type: an ordinary worker written with
// the public worker package, like any user's. Any number of renderers, in
// any number of processes, may run at once.
type Renderer struct {
	cfg     Config
	workers *worker.Workers
}

// New builds a renderer on the worker connection settings wc (its Conn, or
// URL and credentials, and Logger); Start runs it.
func New(cfg Config, wc worker.Config) (*Renderer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	wc.Name = cfg.Worker
	wc.HeartbeatInterval, wc.PullWait, wc.DrainTimeout, wc.Now = cfg.HeartbeatInterval, cfg.PullWait, cfg.DrainTimeout, cfg.Now
	if wc.Credential == "" {
		// permit_report is built in: only jobgate's own credential
		// declares it.
		wc.Credential = wire.JobgateCredential
	}
	if cfg.Metrics != nil {
		wc.OnAttempt = func(_, outcome string, took time.Duration) { cfg.Metrics.Render(outcome, took) }
	}
	w, err := worker.New(wc)
	if err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	r := &Renderer{cfg: cfg, workers: w}
	err = worker.Register(w, worker.Type[reportParams]{
		Name:           TypeName,
		Description:    "A permit report: the inspection items of a case at a revision, as a PDF of the pages asked for.",
		Schema:         Schema,
		Timeout:        (cfg.RenderTimeout + time.Second - 1).Truncate(time.Second),
		Attempts:       cfg.MaxAttempts,
		MaxResultBytes: cfg.MaxOutputBytes,
		ContentType:    ContentTypePDF,
		Concurrency:    cfg.Concurrency,
		Work:           r.render,
	})
	if err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	return r, nil
}

// Worker is the name this renderer writes into the records it claims.
func (r *Renderer) Worker() string { return r.workers.Name() }

// Start declares permit_report and starts pulling its work (see
// worker.Workers.Start: ctx bounds only the start-up).
func (r *Renderer) Start(ctx context.Context) error {
	if err := r.workers.Start(ctx); err != nil {
		return fmt.Errorf("renderer: %w", err)
	}
	return nil
}

// Stop stops pulling, lets running renders finish for DrainTimeout (less
// when ctx's deadline is nearer), then interrupts the rest (their jobs go
// back to the queue for another renderer) and waits for them within ctx
// (see worker.Workers.Stop).
func (r *Renderer) Stop(ctx context.Context) error {
	if err := r.workers.Stop(ctx); err != nil {
		return fmt.Errorf("renderer: %w", err)
	}
	return nil
}

// render is one attempt of a permit report.
func (r *Renderer) render(ctx context.Context, j *worker.Job[reportParams]) error {
	p := j.Params
	if p.CaseID < 1 || p.Revision < 1 || p.Pages < 1 {
		return permanent(job.CategoryRenderError, "case_id, revision and pages must be at least 1")
	}
	if p.Pages > r.cfg.MaxPages {
		return permanent(job.CategoryBudgetExceeded, "%d pages exceed the page budget of %d", p.Pages, r.cfg.MaxPages)
	}
	if r.cfg.OnRender != nil {
		r.cfg.OnRender(ctx, &job.Record{ID: j.ID, Tenant: j.Tenant, Requester: j.Requester, Type: j.Type, Attempt: j.Attempt})
	}
	in := ReportInput{Tenant: j.Tenant, Requester: j.Requester, CaseID: p.CaseID, Revision: p.Revision, Pages: p.Pages, CreatedAt: j.CreatedAt}
	j.Progress(0, p.Pages, "pages")
	hit := false
	err := RenderPermitReport(ctx, in, j.Output(), func(done int) error {
		j.Progress(done, p.Pages, "pages")
		if !hit && done >= 2 {
			hit = true
			if err := r.cfg.Failpoints.Hit(failpoint.RendererMidRender); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
	if err != nil && ctx.Err() != nil && !errors.Is(err, errOutputTooLarge) {
		return fmt.Errorf("render stopped: %w", context.Cause(ctx))
	}
	return err
}
