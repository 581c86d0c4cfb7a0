package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/jobgate/jobgate/pkg/api"
)

// Download describes a downloaded result.
type Download struct {
	JobID       string
	ContentType string
	Size        int64
	SHA256      string
}

// countingWriter tracks whether any byte reached the caller's writer: until
// then a failed transfer can simply be retried.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Download writes a succeeded job's result to w. It asks the job's result
// endpoint, follows the 303 to the freshly signed link (without the bearer
// token: the signature is the authority) and checks the bytes against the
// size and SHA-256 the job announced. A job that is not done is a
// *ProblemError matching api.ErrResultNotReady, api.ErrJobFailed or
// api.ErrJobCanceled. If the transfer breaks after bytes were written the
// error says so; the caller should start over with an empty writer.
func (c *Client) Download(ctx context.Context, id string, w io.Writer) (*Download, error) {
	res, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: w}
	// A link can expire between the redirect and the fetch (a slow
	// network, a long Retry-After); a fresh one is one request away.
	for tries := 0; ; tries++ {
		d, err := c.download(ctx, id, res, cw)
		if err == nil || cw.n > 0 || tries == 2 || !errors.Is(err, api.ErrLinkExpired) {
			return d, err
		}
	}
}

func (c *Client) download(ctx context.Context, id string, res *api.Resource, cw *countingWriter) (*Download, error) {
	resp, _, err := c.send(ctx, &request{method: http.MethodGet, path: jobPath(id) + "/result"})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusTemporaryRedirect {
		return nil, c.unexpected(resp)
	}
	loc := resp.Header.Get("Location")
	resp.Body.Close()
	if loc == "" {
		return nil, fmt.Errorf("%w: redirect without Location", ErrUnexpectedResponse)
	}
	resp, _, err = c.send(ctx, &request{method: http.MethodGet, path: loc, noAuth: true, stream: true})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.unexpected(resp)
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(cw, h), resp.Body)
	if err != nil {
		return nil, fmt.Errorf("result of %s cut off after %d bytes: %w", id, n, err)
	}
	d := &Download{JobID: id, ContentType: resp.Header.Get("Content-Type"), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return nil, fmt.Errorf("%w: got %d bytes, server announced %d", ErrDigestMismatch, n, resp.ContentLength)
	}
	if r := res.Result; r != nil {
		if r.Size > 0 && r.Size != n {
			return nil, fmt.Errorf("%w: got %d bytes, job announced %d", ErrDigestMismatch, n, r.Size)
		}
		if r.SHA256 != "" && r.SHA256 != d.SHA256 {
			return nil, fmt.Errorf("%w: sha256 %s, job announced %s", ErrDigestMismatch, d.SHA256, r.SHA256)
		}
	}
	return d, nil
}
