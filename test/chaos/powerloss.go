package chaos

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// natsSyncInterval is nats-server's default sync_interval: without
// sync_interval "always", a node fsyncs its stores this often, and a power
// loss takes what was written since (Jepsen's NATS 2.12.1 analysis).
const natsSyncInterval = 2 * time.Minute

// storeLog samples the length of every message block (*.blk) of each NATS
// node's store once a second, so a power loss can be played back: the
// harness cannot see the server's fsyncs, but a message block only grows
// (appends; a compaction writes a new one), and a block's length at a
// moment within the last sync interval is what a disk that lost its
// unsynced writes would hold. Index and metadata files are left alone:
// nats-server writes those whole, and a torn or stale one is rebuilt from
// the blocks it indexes.
type storeLog struct {
	mu      sync.Mutex
	samples map[string][]storeSample // store dir → oldest first
	start   time.Time
	rng     *rand.Rand
	sync    bool // sync_interval always: every acknowledged write was fsynced
}

type storeSample struct {
	t     time.Time
	sizes map[string]int64 // path → length
}

func newStoreLog(seed uint64, syncAlways bool) *storeLog {
	return &storeLog{samples: map[string][]storeSample{}, start: time.Now(), rng: rand.New(rand.NewPCG(seed, 0x9097e2)), sync: syncAlways}
}

// run samples dirs until ctx ends.
func (l *storeLog) run(ctx context.Context, dirs []string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for _, d := range dirs {
			s := storeSample{t: time.Now(), sizes: blockSizes(d)}
			l.mu.Lock()
			ss := append(l.samples[d], s)
			// Keep one sync interval (and a margin) of samples.
			for len(ss) > 0 && s.t.Sub(ss[0].t) > natsSyncInterval+10*time.Second {
				ss = ss[1:]
			}
			l.samples[d] = ss
			l.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func blockSizes(dir string) map[string]int64 {
	out := map[string]int64{}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".blk") {
			return nil
		}
		if info, err := d.Info(); err == nil {
			out[path] = info.Size()
		}
		return nil
	})
	return out
}

// drop plays a power loss back on a node's store (the node is down): a
// moment is drawn within the last sync interval (not before the first
// sample), every message block is cut to its length then, and blocks
// created since are removed. With sync_interval always nothing is dropped:
// every write a node acknowledged was on its disk.
func (l *storeLog) drop(dir string) (string, error) {
	if l.sync {
		return "sync_interval always: nothing unsynced to drop", nil
	}
	l.mu.Lock()
	ss := l.samples[dir]
	var at storeSample
	if len(ss) > 0 {
		from := ss[0].t
		if w := time.Now().Add(-natsSyncInterval); w.After(from) {
			from = w
		}
		pick := from.Add(time.Duration(l.rng.Int64N(int64(time.Since(from)) + 1)))
		at = ss[0]
		for _, s := range ss {
			if s.t.After(pick) {
				break
			}
			at = s
		}
	}
	l.mu.Unlock()
	if at.sizes == nil {
		return "no sample of the store yet: nothing dropped", nil
	}
	var cut, removed int
	var bytes int64
	for path, size := range blockSizes(dir) {
		was, ok := at.sizes[path]
		switch {
		case !ok:
			if err := os.Remove(path); err != nil {
				return "", fmt.Errorf("power loss: %w", err)
			}
			removed++
			bytes += size
		case size > was:
			if err := os.Truncate(path, was); err != nil {
				return "", fmt.Errorf("power loss: %w", err)
			}
			cut++
			bytes += size - was
		}
	}
	return fmt.Sprintf("store as of %s before: %d blocks cut, %d removed, %d bytes dropped",
		time.Since(at.t).Round(time.Second), cut, removed, bytes), nil
}
