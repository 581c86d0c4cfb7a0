package gateway

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/pkg/job"
)

// resultRedirect is GET /v1/jobs/{id}/result: 303 to a freshly signed link.
func (g *Gateway) resultRedirect(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	defer cancel()
	rec, err := g.lookup(ctx, identity(c), strings.Clone(c.Params("id")))
	if err != nil {
		return writeProblem(c, err)
	}
	switch rec.State {
	case job.StateSucceeded:
		if rec.Output == nil {
			// A type whose handler wrote nothing (a bulk operation) has
			// no result to link to.
			return writeProblem(c, fmt.Errorf("job %s succeeded without a result: %w", rec.ID, job.ErrNotFound))
		}
		href, _ := g.signer.sign(rec.Tenant, rec.Requester, rec.ID, rec.Output.Object)
		c.Set(fiber.HeaderLocation, href)
		c.Set(fiber.HeaderCacheControl, "private, no-store")
		return c.SendStatus(http.StatusSeeOther)
	case job.StateFailed:
		return writeProblem(c, fmt.Errorf("job %s failed: %w", rec.ID, job.ErrJobFailed))
	case job.StateCanceled:
		return writeProblem(c, fmt.Errorf("job %s: %w", rec.ID, job.ErrJobCanceled))
	}
	setRetryAfter(c, retryAfter(rec, g.cfg.Now()))
	return writeProblem(c, fmt.Errorf("job %s is %s: %w", rec.ID, rec.State, job.ErrResultNotReady))
}

// downloadResult is GET /v1/results/{signed}: the file, for whoever holds a
// valid, unexpired link. The signature is the authorization.
func (g *Gateway) downloadResult(c *fiber.Ctx) error {
	claims, err := g.signer.verify(strings.Clone(c.Params("token")))
	if err != nil {
		return writeProblem(c, err)
	}
	obj, err := g.files.Open(c.UserContext(), claims.Object)
	if err != nil {
		return writeProblem(c, fmt.Errorf("result of %s: %w", claims.JobID, err))
	}
	ct := "application/octet-stream"
	if obj.ContentType != "" {
		ct = obj.ContentType
	}
	c.Set(fiber.HeaderContentType, ct)
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s%s"`, claims.JobID, extension(ct)))
	if obj.ContentDisposition != "" {
		c.Set(fiber.HeaderContentDisposition, obj.ContentDisposition)
	}
	// Fasthttp closes the object reader once the body has been sent.
	return c.SendStream(obj, int(obj.Size))
}

// extension is the file name extension for a result's content type: the
// job id names the file, the type's declared content type its kind.
func extension(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ".bin"
	}
	switch mt {
	case "application/pdf":
		return ".pdf"
	case "text/csv":
		return ".csv"
	case "text/tab-separated-values":
		return ".tsv"
	case "text/plain":
		return ".txt"
	case "application/json":
		return ".json"
	case "application/zip":
		return ".zip"
	}
	if exts, err := mime.ExtensionsByType(mt); err == nil && len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}
