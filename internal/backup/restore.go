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
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
)

// ErrCorrupt is a backup whose manifest or files do not agree.
var ErrCorrupt = errors.New("backup corrupted")

// Open reads a backup's manifest and checks every file it lists (size and
// SHA-256) before anything is restored from it.
func Open(from string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(from, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s (an unfinished backup?)", ErrCorrupt, from, ManifestFile)
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, ManifestFile, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: format %q, this jobgate restores %q", ErrCorrupt, m.Format, Format)
	}
	if len(m.Streams) == 0 {
		return nil, fmt.Errorf("%w: the manifest lists no stream", ErrCorrupt)
	}
	files := make([]File, 0, len(m.Streams)+len(m.Secrets))
	for _, s := range m.Streams {
		if !strings.Contains(s.Name, "JOBGATE_") || len(s.Config) == 0 || len(s.State) == 0 {
			return nil, fmt.Errorf("%w: the manifest's stream %q", ErrCorrupt, s.Name)
		}
		files = append(files, s.File)
	}
	files = append(files, m.Secrets...)
	for _, f := range files {
		if err := check(from, f); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// check verifies one file of a backup against the manifest.
func check(from string, f File) error {
	if !filepath.IsLocal(f.Path) {
		return fmt.Errorf("%w: the manifest names %q, outside the backup", ErrCorrupt, f.Path)
	}
	in, err := os.Open(filepath.Join(from, f.Path))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer in.Close()
	h := sha256.New()
	n, err := io.Copy(h, in)
	if err != nil {
		return fmt.Errorf("%w: reading %s: %v", ErrCorrupt, f.Path, err)
	}
	if n != f.Bytes || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%w: %s has %d bytes (SHA-256 %.12s…), the manifest says %d (%.12s…)",
			ErrCorrupt, f.Path, n, hex.EncodeToString(h.Sum(nil)), f.Bytes, f.SHA256)
	}
	return nil
}

// ErrNotEmpty is a restore target that already holds what it would restore.
var ErrNotEmpty = errors.New("the restore's target is not empty")

// Restore puts a checked backup's streams back on the server nc reaches,
// which must have none of them (ErrNotEmpty, before anything is written).
func Restore(ctx context.Context, nc *nats.Conn, from string, m *Manifest, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, s := range m.Streams {
		found, err := exists(ctx, nc, s.Name)
		if err != nil {
			return err
		}
		if found {
			return fmt.Errorf("%w: the server has the stream %s already", ErrNotEmpty, s.Name)
		}
	}
	for _, s := range m.Streams {
		began := time.Now()
		in, err := os.Open(filepath.Join(from, s.Path))
		if err != nil {
			return err
		}
		err = restore(ctx, nc, s.Name, s.Config, s.State, in)
		in.Close()
		if err != nil {
			return err
		}
		log.Info("stream restored", "stream", s.Name, "bytes", s.Bytes, "took", time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// RestoreSecrets copies a checked backup's secret files into dataDir.
func RestoreSecrets(from string, m *Manifest, dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	for _, f := range m.Secrets {
		if !filepath.IsLocal(f.Name) || strings.ContainsRune(f.Name, filepath.Separator) {
			return fmt.Errorf("%w: secret file %q", ErrCorrupt, f.Name)
		}
		data, err := os.ReadFile(filepath.Join(from, f.Path))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dataDir, f.Name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// StorageReserve is the JetStream storage an embedded server needs to take
// the backup's streams: their byte budgets in all (the default layout's
// reserve when one has none).
func (m *Manifest) StorageReserve() int64 {
	var total int64
	for _, s := range m.Streams {
		var cfg struct {
			MaxBytes int64 `json:"max_bytes"`
		}
		if json.Unmarshal(s.Config, &cfg) != nil || cfg.MaxBytes <= 0 {
			return natsjs.DefaultLayout().StorageReserve()
		}
		total += cfg.MaxBytes
	}
	return total
}
