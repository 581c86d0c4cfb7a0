// Package secretfile keeps a generated secret in a file of the data dir:
// read it, or create it on first use so that any number of processes racing
// to create it agree on one value. The services' shared secrets (the bearer
// token secret, the NATS subscriber secret) use it.
package secretfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrEmpty: the file exists but holds no secret.
var ErrEmpty = errors.New("secret file is empty")

// Read returns the secret in path (surrounding white space trimmed). A
// missing file is an error matching os.ErrNotExist.
func Read(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return nil, fmt.Errorf("%s: %w", path, ErrEmpty)
	}
	return []byte(s), nil
}

// ReadOrCreate returns the secret in path, creating the file (0600, its
// directory 0700) with 32 random bytes in hex when it does not exist.
// Concurrent first uses, in any number of processes, agree on one value: the
// secret is written to a temporary file and linked into place, so a reader
// never sees half a secret and of two racing creators exactly one wins.
func ReadOrCreate(path string) ([]byte, error) {
	for range 3 {
		s, err := Read(path)
		if !errors.Is(err, os.ErrNotExist) {
			return s, err
		}
		dir := filepath.Dir(path)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		_, werr := tmp.WriteString(hex.EncodeToString(b) + "\n")
		serr := tmp.Sync()
		cerr := tmp.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			_ = os.Remove(tmp.Name())
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		lerr := os.Link(tmp.Name(), path)
		_ = os.Remove(tmp.Name())
		if lerr != nil && !errors.Is(lerr, os.ErrExist) {
			return nil, fmt.Errorf("write %s: %w", path, lerr)
		}
	}
	return nil, fmt.Errorf("secret %s: could not settle a value", path)
}
