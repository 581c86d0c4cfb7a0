//go:build unix

package system

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFileName is the lock of a data dir, held by the one process that
// serves from it.
const lockFileName = "LOCK"

// lockDataDir takes an exclusive OS lock (flock) on <dir>/LOCK for as long
// as the process runs; the kernel drops it when the process ends, however
// it ends, so a crash never leaves a stale lock. Two servers on one data dir
// would each run an embedded NATS server over the same files and admit one
// idempotency key twice; the second one fails here, before it changes
// anything in the directory. The lock file records the holder's pid for the
// message; its content is informational only.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, lockFileName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil && len(b) > 0 {
			holder = " by pid " + strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use: lock %s is held%s; one process serves a data dir", dir, path, holder)
		}
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
