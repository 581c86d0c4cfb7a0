package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Format names the layout of a backup directory; a restore refuses any other.
const Format = "jobgate-backup/1"

// ManifestFile is the backup directory's table of contents, written last.
const ManifestFile = "manifest.json"

// Manifest lists what a backup holds.
type Manifest struct {
	Format    string    `json:"format"`
	CreatedAt time.Time `json:"created_at"`
	// Jobgate and NATS are the versions of the binary that made the backup
	// and of the server it read.
	Jobgate string       `json:"jobgate_version"`
	NATS    string       `json:"nats_server_version"`
	Streams []StreamFile `json:"streams"`
	Secrets []File       `json:"secrets"`
}

// File is one file of a backup, relative to its directory.
type File struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// StreamFile is a stream's snapshot with the configuration and state the
// server gave with it (a restore sends them back).
type StreamFile struct {
	File
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
}

// order is where a stream goes in a backup: what a record refers to after
// the record (a batch's jobs after the batch, a job's work, events and
// result after the job), so a restored record finds what it names, or
// finds it missing the way a crash leaves it, which the deployment
// recovers. Streams it does not name go last, by name.
var order = []string{
	"KV_" + natsjs.BucketMeta, "KV_" + natsjs.BucketTypes, "KV_" + natsjs.BucketBatches, "KV_" + natsjs.BucketJobs,
	natsjs.StreamWork, natsjs.StreamEvents, "OBJ_" + natsjs.BucketResults, "KV_" + natsjs.BucketNotices, natsjs.StreamDeliveries,
}

func rank(stream string) int {
	if i := slices.Index(order, stream); i >= 0 {
		return i
	}
	return len(order)
}

// Options is what Backup needs besides the connection.
type Options struct {
	// To is the backup directory: created, or empty.
	To string
	// DataDir, when set, is a single-box deployment's data dir whose
	// secret files (*.secret) are copied too.
	DataDir string
	// Version is the jobgate binary's version, for the manifest.
	Version string
	Log     *slog.Logger
}

// Backup copies every jobgate stream the connection reaches, and the data
// dir's secrets, into opts.To, and writes the manifest last.
func Backup(ctx context.Context, nc *nats.Conn, opts Options) (*Manifest, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := emptyDir(opts.To); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var streams []string
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if strings.Contains(name, "JOBGATE_") {
			streams = append(streams, name)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("listing the streams: %w", err)
	}
	if len(streams) == 0 {
		return nil, errors.New("no jobgate stream on this server: is it the deployment's NATS?")
	}
	slices.SortFunc(streams, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	m := &Manifest{Format: Format, CreatedAt: time.Now().UTC(), Jobgate: opts.Version, NATS: nc.ConnectedServerVersion()}
	if err := os.MkdirAll(filepath.Join(opts.To, "streams"), 0o700); err != nil {
		return nil, err
	}
	for _, stream := range streams {
		began := time.Now()
		sf := StreamFile{File: File{Name: stream, Path: filepath.Join("streams", stream+".snapshot")}}
		err := writeFile(filepath.Join(opts.To, sf.Path), &sf.File, func(w io.Writer) error {
			ans, err := snapshot(ctx, nc, stream, w)
			if err == nil {
				sf.Config, sf.State = ans.Config, ans.State
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		m.Streams = append(m.Streams, sf)
		log.Info("stream backed up", "stream", stream, "bytes", sf.Bytes, "took", time.Since(began).Round(time.Millisecond))
	}
	if opts.DataDir != "" {
		if err := copySecrets(opts.DataDir, opts.To, m); err != nil {
			return nil, err
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(opts.To, ManifestFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(opts.To, ManifestFile)); err != nil {
		return nil, err
	}
	return m, nil
}

// copySecrets copies the data dir's secret files into the backup.
func copySecrets(dataDir, to string, m *Manifest) error {
	found, err := filepath.Glob(filepath.Join(dataDir, "*.secret"))
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("no secret file in %s: is it the deployment's data dir?", dataDir)
	}
	if err := os.MkdirAll(filepath.Join(to, "secrets"), 0o700); err != nil {
		return err
	}
	for _, src := range found {
		f := File{Name: filepath.Base(src), Path: filepath.Join("secrets", filepath.Base(src))}
		err := writeFile(filepath.Join(to, f.Path), &f, func(w io.Writer) error {
			in, err := os.Open(src)
			if err != nil {
				return err
			}
			defer in.Close()
			_, err = io.Copy(w, in)
			return err
		})
		if err != nil {
			return err
		}
		m.Secrets = append(m.Secrets, f)
	}
	return nil
}

// writeFile creates path (0600), fills it with fill, syncs it and notes
// its size and SHA-256 in f.
func writeFile(path string, f *File, fill func(io.Writer) error) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(out, h)}
	if err := fill(cw); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	f.Bytes, f.SHA256 = cw.n, hex.EncodeToString(h.Sum(nil))
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// emptyDir makes sure dir exists and holds nothing.
func emptyDir(dir string) error {
	if dir == "" {
		return errors.New("no directory given")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o700)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: refusing to write into it", dir)
	}
	return nil
}
