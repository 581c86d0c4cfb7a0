package natsserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// checkDisk refuses a reservation the disk under storeDir cannot hold: the
// embedded server is given the byte budgets' sum as its JetStream storage
// whatever the disk (left to itself it would grant 75% of the space free
// at start and refuse the budgets past that), so without this check a
// deployment on a small disk would start, admit, and fail writes once the
// disk, not a budget, runs out: JetStream's own 90%-mark refusal (507)
// would never come. What the store holds already counts as room: it is
// part of what the reservation covers.
func checkDisk(storeDir string, reserve int64) error {
	free, ok, err := freeBytes(storeDir)
	if err != nil {
		return fmt.Errorf("the disk of %s: %w", storeDir, err)
	}
	if !ok {
		return nil // a platform without statfs: not checked
	}
	stored, err := dirBytes(storeDir)
	if err != nil {
		return fmt.Errorf("the disk of %s: %w", storeDir, err)
	}
	if free+stored >= reserve {
		return nil
	}
	return fmt.Errorf("the byte budgets need %s of JetStream storage (6 x JOBGATE_STORE_MAX_BYTES + JOBGATE_RESULTS_MAX_BYTES "+
		"+ 64 MiB for each small store), but the disk of %s has %s free and the store holds %s: lower the budgets "+
		"(store_max_bytes, results_max_bytes) or give the data dir a larger disk (docs/operations.md, \"Disk budgets\")",
		gib(reserve), storeDir, gib(free), gib(stored))
}

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }

// freeBytes is the space an unprivileged process may still write on the
// file system of dir, or of its nearest existing parent (a data dir not
// created yet).
func freeBytes(dir string) (int64, bool, error) {
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, false, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return statfsFree(dir)
}

// dirBytes sums the sizes of the files under dir (0 when it does not exist).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}
