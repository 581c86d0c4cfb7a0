package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
)

// runFetch is `jobgate fetch ID [--out F]`: download a succeeded job's
// result through a freshly signed link, verified against the job's SHA-256.
// Without --out (or with a directory) the file is named after the job and
// the result's content type: <id>.pdf, <id>.csv, ...
func (m *Main) runFetch(ctx context.Context, args []string) error {
	fs := newFlagSet("fetch", m)
	cf := bindClientFlags(fs, time.Minute)
	out := fs.String("out", "", "file or directory to write to (default <job id> and the extension of the result's content type, e.g. .pdf or .csv; - for stdout)")
	pos, err := parseArgs(fs, args, 1, 1, "one job id")
	if err != nil {
		return err
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	path, err := m.fetchTo(ctx, c, pos[0], *out, cf.quiet)
	if err != nil {
		return classify("fetch "+pos[0], err)
	}
	if path != "-" {
		fmt.Fprintln(m.Stdout, path)
	}
	return nil
}

// fetchTo downloads a result into out and returns the file's path: out
// itself, or, when out is empty or a directory, <id><ext> there, ext
// following the content type the result is served with (job.FileExtension,
// as in the gateway's Content-Disposition). "-" writes to stdout. The bytes
// go into a temporary file next to the target, renamed into place only once
// complete and verified, so a broken transfer never leaves a truncated
// report under the real name. A transfer cut off midway is started over (a
// couple of times).
func (m *Main) fetchTo(ctx context.Context, c *client.Client, id, out string, quiet bool) (string, error) {
	if out == "-" {
		_, err := c.Download(ctx, id, m.Stdout)
		return out, err
	}
	dir, name := filepath.Dir(out), filepath.Base(out)
	if out == "" {
		dir, name = ".", ""
	} else if st, err := os.Stat(out); (err == nil && st.IsDir()) || os.IsPathSeparator(out[len(out)-1]) {
		dir, name = out, ""
	}
	prefix := name
	if prefix == "" {
		prefix = id
	}
	var lastErr error
	for range 3 {
		tmp, err := os.CreateTemp(dir, "."+prefix+".*.part")
		if err != nil {
			return "", err
		}
		d, err := c.Download(ctx, id, tmp)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			if name == "" {
				name = id + job.FileExtension(d.ContentType)
			}
			path := filepath.Join(dir, name)
			if err := os.Rename(tmp.Name(), path); err != nil {
				os.Remove(tmp.Name())
				return "", err
			}
			if !quiet {
				fmt.Fprintf(m.Stderr, "saved %s (%d bytes, sha256 %s)\n", path, d.Size, d.SHA256)
			}
			return path, nil
		}
		os.Remove(tmp.Name())
		lastErr = err
		var pe *client.ProblemError
		if errors.As(err, &pe) || ctx.Err() != nil {
			return "", err // a problem answer will not change by asking again
		}
	}
	return "", lastErr
}
