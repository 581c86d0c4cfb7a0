package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jobgate/jobgate/pkg/client"
)

// runFetch is `jobgate fetch ID [--out F]`: download a succeeded job's
// result through a freshly signed link, verified against the job's SHA-256.
func (m *Main) runFetch(ctx context.Context, args []string) error {
	fs := newFlagSet("fetch", m)
	cf := bindClientFlags(fs, time.Minute)
	out := fs.String("out", "", "file to write (default <job id>.pdf; - for stdout)")
	pos, err := parseArgs(fs, args, 1, 1, "one job id")
	if err != nil {
		return err
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	path := *out
	if path == "" {
		path = pos[0] + ".pdf"
	}
	if err := m.fetchTo(ctx, c, pos[0], path, cf.quiet); err != nil {
		return classify("fetch "+pos[0], err)
	}
	if path != "-" {
		fmt.Fprintln(m.Stdout, path)
	}
	return nil
}

// fetchTo downloads a result into path: into a temporary file next to it,
// renamed into place only once complete and verified, so a broken transfer
// never leaves a truncated report under the real name. A transfer cut off
// midway is started over (a couple of times).
func (m *Main) fetchTo(ctx context.Context, c *client.Client, id, path string, quiet bool) error {
	if path == "-" {
		_, err := c.Download(ctx, id, m.Stdout)
		return err
	}
	dir := filepath.Dir(path)
	var lastErr error
	for range 3 {
		tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.part")
		if err != nil {
			return err
		}
		d, err := c.Download(ctx, id, tmp)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			if err := os.Rename(tmp.Name(), path); err != nil {
				os.Remove(tmp.Name())
				return err
			}
			if !quiet {
				fmt.Fprintf(m.Stderr, "saved %s (%d bytes, sha256 %s)\n", path, d.Size, d.SHA256)
			}
			return nil
		}
		os.Remove(tmp.Name())
		lastErr = err
		var pe *client.ProblemError
		if errors.As(err, &pe) || ctx.Err() != nil {
			return err // a problem answer will not change by asking again
		}
	}
	return lastErr
}
