package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
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
			return writeProblem(c, fmt.Errorf("job %s succeeded without a result: %w", rec.ID, job.ErrNoResult))
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

// downloadResult is GET (and HEAD) /v1/results/{signed}: the file, for
// whoever holds a valid, unexpired link. The signature is the authorization.
//
// A result's bytes come from a worker, which jobgate does not trust: they
// are served inert, whatever the worker stored alongside them. The media
// type is the one the job's type declared (validated at declaration), or
// application/octet-stream when that declaration is gone; the file is
// always an attachment named after the job, never sniffed, and sandboxed
// should a browser render it all the same, so it can run nothing on the
// gateway's origin.
func (g *Gateway) downloadResult(c *fiber.Ctx) error {
	claims, err := g.signer.verify(strings.Clone(c.Params("token")))
	if err != nil {
		return writeProblem(c, err)
	}
	ct, err := g.declaredResultType(c.UserContext(), claims)
	if err != nil {
		return writeProblem(c, fmt.Errorf("result of %s: %w", claims.JobID, err))
	}
	obj, err := g.files.Open(c.UserContext(), claims.Object)
	if err != nil {
		return writeProblem(c, fmt.Errorf("result of %s: %w", claims.JobID, err))
	}
	// Nothing of obj's own headers (ContentType, ContentDisposition) is
	// used: a worker wrote them.
	setResultHeaders(c, claims.JobID, ct)
	// Fasthttp closes the object reader once the body has been sent (or,
	// for HEAD, once the head has).
	return c.SendStream(obj, int(obj.Size))
}

// fallbackResultType is the media type of a result whose type's
// declaration is gone: bytes, to be saved, not shown.
const fallbackResultType = "application/octet-stream"

// declaredResultType is the media type a link's job's type declares for
// its results. A job record or declaration that is gone answers
// fallbackResultType; a store that cannot be read is an error (retrying is
// better than a file of the wrong kind).
func (g *Gateway) declaredResultType(ctx context.Context, claims linkClaims) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	rec, err := g.jobs.Get(ctx, job.StoreKey(claims.Tenant, claims.Requester, claims.JobID))
	if errors.Is(err, job.ErrNotFound) {
		return fallbackResultType, nil
	}
	if err != nil {
		return "", err
	}
	d, ok := g.types.decl(rec.Type)
	if !ok || job.CheckContentType(d.ContentType) != nil {
		// Declarations are checked when they are read; the second check
		// keeps a header from ever carrying what one let through.
		return fallbackResultType, nil
	}
	return d.ContentType, nil
}

// setResultHeaders sets the headers of a result download: they depend on
// the job and its type's declaration only.
func setResultHeaders(c *fiber.Ctx, jobID, contentType string) {
	c.Set(fiber.HeaderContentType, contentType)
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s%s"`, jobID, job.FileExtension(contentType)))
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentSecurityPolicy, "sandbox")
}
