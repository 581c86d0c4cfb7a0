// Package index is a gateway's query index of the job records: the admin
// API's listings and counts. It is derived from the records' change log
// (the stream under the JOBGATE_JOBS bucket) and kept in a bbolt file in
// the gateway's data dir; it is never the source of truth. A missing,
// unreadable or foreign file is rebuilt from the change log, one that is
// behind resumes where it stopped, and a listing's caller reads each job
// again from the bucket.
//
// Being derived, the file is written without an fsync per transaction
// (bbolt's NoSync) where the kernel names its boot: a mark beside the file
// holds the boot id while the file may hold writes not yet on disk, and is
// removed once Close synced it. A process that crashed leaves the mark of
// the running boot, and its writes are in the page cache, so the file is
// whole and resumes; a mark of another boot (a power loss or a kernel
// crash while the index was open) means pages may be lost or torn, and the
// file is rebuilt. Without a boot id (not Linux) every commit is synced.
//
// What each operation costs: a page reads its entries in one ordered range
// of the file (one per filter dimension, newest first) plus, for filters
// the range does not cover, one lookup per entry looked at, bounded by
// MaxScan; stats read, per job type, three counters, one key for the
// oldest queued job and at most ~150 time-bucket counters per terminal
// state — none of it grows with the number of jobs stored.
package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Source is the change log the index is derived from (natsjs.Store).
type Source interface {
	LogBounds(ctx context.Context) (natsjs.LogBounds, error)
	ReadLog(ctx context.Context, from uint64) (Log, error)
}

// Log is one read of the change log (natsjs.RecordLog).
type Log interface {
	Next() (natsjs.RecordChange, error)
	Stop()
}

// StoreSource is the change log of a natsjs.Store.
func StoreSource(s *natsjs.Store) Source { return storeSource{s} }

type storeSource struct{ s *natsjs.Store }

func (s storeSource) LogBounds(ctx context.Context) (natsjs.LogBounds, error) {
	return s.s.LogBounds(ctx)
}

func (s storeSource) ReadLog(ctx context.Context, from uint64) (Log, error) {
	l, err := s.s.ReadLog(ctx, from)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// formatVersion names the file's layout; a file of another is rebuilt.
const formatVersion = "jobgate-index-2"

var (
	bMeta   = []byte("meta")
	bJobs   = []byte("jobs")   // id → entry (JSON)
	bList   = []byte("list")   // dim scope 0 value 0 created id → nil
	bRev    = []byte("rev")    // revision id → nil (to drop records the log no longer holds)
	bCount  = []byte("count")  // scope 0 type 0 class → uint64
	bQueued = []byte("queued") // scope 0 type 0 created id → nil
	bFin    = []byte("fin")    // scope 0 type 0 state 0 kind bucket → uint64
	bTypes  = []byte("types")  // scope 0 type → nil

	kVersion = []byte("version")
	kSeq     = []byte("seq")
)

// Entry is what the index keeps of one job.
type Entry struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"t"`
	Requester string    `json:"r"`
	Type      string    `json:"y"`
	State     job.State `json:"s"`
	// Class is the state as stats count it: queued, running, retrying
	// (running, waiting for its next attempt) or the terminal state.
	Class    string `json:"c"`
	Category string `json:"e,omitempty"` // failed only
	Created  int64  `json:"ct"`          // unix nanoseconds
	Finished int64  `json:"ft,omitempty"`
	Rev      uint64 `json:"v"`
}

const classRetrying = "retrying"

func entryOf(r *job.Record) Entry {
	e := Entry{ID: r.ID, Tenant: r.Tenant, Requester: r.Requester, Type: r.Type, State: r.State,
		Class: string(r.State), Created: r.CreatedAt.UnixNano(), Rev: r.Revision}
	if r.State == job.StateRunning && r.Worker == "" && r.RetryAt != nil {
		e.Class = classRetrying
	}
	if r.Error != nil && (r.State == job.StateFailed || r.State == job.StateCanceled && r.Error.Category == job.CategoryDeadline) {
		e.Category = r.Error.Category
	}
	if r.FinishedAt != nil {
		e.Finished = r.FinishedAt.UnixNano()
	}
	return e
}

// Index is one gateway's query index.
type Index struct {
	db  *bolt.DB
	src Source
	log *slog.Logger
	now func() time.Time

	applied atomic.Uint64 // the last change log sequence applied
	linger  time.Duration
	waiting atomic.Int64  // readers in WaitFor
	hurry   chan struct{} // a reader began waiting (capacity 1)
	mu      sync.Mutex
	moved   chan struct{} // closed and replaced whenever applied grows
	stop    context.CancelFunc
	done    chan struct{}
	pruned  time.Time // only the applier touches it
}

// Options tune an index (tests).
type Options struct {
	Now func() time.Time
	Log *slog.Logger
	// Linger is how long a batch of changes waits for more while no
	// reader waits (default batchLinger).
	Linger time.Duration
}

// Open opens (or creates, or rebuilds) the index file at path and starts
// following src. Close stops it.
func Open(path string, src Source, o Options) (*Index, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Linger <= 0 {
		o.Linger = batchLinger
	}
	db, err := openFile(path, o.Log)
	if err != nil {
		return nil, err
	}
	x := &Index{db: db, src: src, log: o.Log, now: o.Now, linger: o.Linger, hurry: make(chan struct{}, 1),
		moved: make(chan struct{}), done: make(chan struct{})}
	_ = db.View(func(tx *bolt.Tx) error {
		x.applied.Store(u64(tx.Bucket(bMeta).Get(kSeq)))
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	x.stop = cancel
	go x.run(ctx)
	return x, nil
}

// openFile opens path as an index of this format, starting afresh when the
// file is missing, unreadable, of another format or written without an
// fsync before the machine restarted.
func openFile(path string, log *slog.Logger) (*bolt.DB, error) {
	boot := bootID()
	// Before opening: bbolt's open walks the pages (the freelist is not
	// stored), which a torn file must never reach. A live gateway's mark
	// names this boot (it writes it right after opening), so this never
	// removes a file in use.
	if err := checkMark(path, boot); errors.Is(err, errUnsynced) {
		log.Warn("query index written without fsync before the machine restarted, rebuilding it from the change log", "path", path)
		if err := removeIndex(path); err != nil {
			return nil, fmt.Errorf("index %s: %w", path, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("index %s: %w", path, err)
	}
	for try := 0; ; try++ {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, NoSync: boot != ""})
		if err == nil && boot != "" {
			err = writeMark(path, boot)
		}
		if err == nil {
			err = db.Update(func(tx *bolt.Tx) error {
				meta, err := tx.CreateBucketIfNotExists(bMeta)
				if err != nil {
					return err
				}
				if v := meta.Get(kVersion); v != nil && string(v) != formatVersion {
					return errForeign
				}
				for _, b := range [][]byte{bJobs, bList, bRev, bCount, bQueued, bFin, bTypes} {
					if _, err := tx.CreateBucketIfNotExists(b); err != nil {
						return err
					}
				}
				return meta.Put(kVersion, []byte(formatVersion))
			})
		}
		if err == nil {
			return db, nil
		}
		if db != nil {
			_ = db.Close()
		}
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("index %s: %w", path, ErrLocked)
		}
		if try > 0 {
			return nil, fmt.Errorf("index %s: %w", path, err)
		}
		log.Warn("query index unreadable, rebuilding it from the change log", "path", path, "err", err)
		if rerr := removeIndex(path); rerr != nil {
			return nil, fmt.Errorf("index %s: %w", path, rerr)
		}
	}
}

// removeIndex removes the file at path, then its mark: a crash between the
// two leaves a mark beside no file or a new one, rebuilt once more, never
// a torn file without its mark.
func removeIndex(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(markPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// bootID names the running boot of the machine ("" where the kernel does
// not say); a variable for tests.
var bootID = readBootID

func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// markPath is the mark of unsynced writes beside the index file at path.
func markPath(path string) string { return path + ".unsynced" }

// errUnsynced: the file was written without an fsync under another boot.
var errUnsynced = errors.New("written without fsync before the machine restarted")

// checkMark fails with errUnsynced when the file may have lost writes: its
// mark names another boot than boot (or there is a mark and boot is "").
func checkMark(path, boot string) error {
	b, err := os.ReadFile(markPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if boot == "" || string(b) != boot {
		return errUnsynced
	}
	return nil
}

// writeMark records, durably and before any unsynced commit, that the file
// at path is being written without fsync under boot.
func writeMark(path, boot string) error {
	mark := markPath(path)
	if b, err := os.ReadFile(mark); err == nil && string(b) == boot {
		return nil
	}
	tmp := mark + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(boot)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, mark)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
}

// removeMark removes the mark once the file is synced.
func removeMark(path string) error {
	if err := os.Remove(markPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

var errForeign = errors.New("index file of another format")

// ErrLocked: another process holds the index file (two gateways given one
// data dir).
var ErrLocked = errors.New("query index file held by another process")

// Close stops following the change log, syncs and closes the file.
func (x *Index) Close() error {
	x.stop()
	<-x.done
	path, nosync := x.db.Path(), x.db.NoSync
	var err error
	if nosync {
		err = x.db.Sync()
	}
	if cerr := x.db.Close(); err == nil {
		err = cerr
	}
	if err == nil && nosync {
		err = removeMark(path)
	}
	return err
}

// Applied is the last change log sequence the index holds.
func (x *Index) Applied() uint64 { return x.applied.Load() }

// WaitFor waits until the index holds every change up to sequence seq.
func (x *Index) WaitFor(ctx context.Context, seq uint64) error {
	if x.applied.Load() >= seq {
		return nil
	}
	// The applier stops lingering while anyone waits: a batch's linger
	// saves work only when nobody is reading.
	x.waiting.Add(1)
	defer x.waiting.Add(-1)
	select {
	case x.hurry <- struct{}{}:
	default:
	}
	for {
		x.mu.Lock()
		ch := x.moved
		x.mu.Unlock()
		if x.applied.Load() >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: the query index is behind the job store (at %d of %d)", job.ErrUnavailable, x.applied.Load(), seq)
		}
	}
}

// CatchUp waits, at most wait, until the index holds every change stored
// before the call: a job admitted before it is counted and listed.
func (x *Index) CatchUp(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	b, err := x.src.LogBounds(ctx)
	if err != nil {
		return err
	}
	return x.WaitFor(ctx, b.Last)
}

func (x *Index) advance(seq uint64) {
	x.applied.Store(seq)
	x.mu.Lock()
	close(x.moved)
	x.moved = make(chan struct{})
	x.mu.Unlock()
}

// run follows the change log until ctx ends, reading again after an error.
func (x *Index) run(ctx context.Context) {
	defer close(x.done)
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := x.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		x.log.Warn("query index: change log read failed, reading again", "err", err, "applied", x.applied.Load())
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

const batchSize = 2000

// batchLinger bounds how long a change waits for others to share its
// transaction while no reader waits for it. Under load a job's admission,
// claim and finish then mostly fall into one batch, which writes the job
// once (apply) instead of three times, and the transaction's fsync is
// shared by a few thousand changes; a reader (WaitFor, CatchUp) ends the
// wait at once, so lists still see their own writes without the lag.
const batchLinger = 250 * time.Millisecond

// follow reads the change log from the first change the index lacks and
// applies it in batches, until ctx ends or the read fails.
func (x *Index) follow(ctx context.Context) error {
	b, err := x.src.LogBounds(ctx)
	if err != nil {
		return err
	}
	if x.applied.Load() > b.Last {
		// The log is younger than the index (a new deployment under the
		// same data dir): start over.
		x.log.Warn("query index ahead of the change log, rebuilding it", "applied", x.applied.Load(), "last", b.Last)
		if err := x.reset(); err != nil {
			return err
		}
	}
	if err := x.prune(b.First); err != nil {
		return err
	}
	log, err := x.src.ReadLog(ctx, x.applied.Load()+1)
	if err != nil {
		return err
	}
	changes := make(chan natsjs.RecordChange, batchSize)
	readErr := make(chan error, 1)
	go func() {
		defer close(changes)
		for {
			c, err := log.Next()
			if err != nil {
				readErr <- err
				return
			}
			select {
			case changes <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() {
		log.Stop()
		for range changes { //nolint:revive // drain so the reader ends
		}
	}()
	batch := make([]natsjs.RecordChange, 0, batchSize)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok := <-changes:
			if !ok {
				return <-readErr
			}
			batch = append(batch[:0], c)
			// Changes come one at a time under a steady load: waiting a
			// moment for more makes one transaction (one fsync) of many
			// instead of one of each, at the cost of that moment's lag,
			// which only a reader would see: one waiting ends it.
			linger := time.NewTimer(x.linger)
		fill:
			for len(batch) < batchSize {
				if x.waiting.Load() > 0 {
					select {
					case c, ok := <-changes:
						if !ok {
							break fill
						}
						batch = append(batch, c)
						continue
					default:
						break fill
					}
				}
				select {
				case c, ok := <-changes:
					if !ok {
						break fill
					}
					batch = append(batch, c)
				case <-x.hurry:
				case <-linger.C:
					break fill
				case <-ctx.Done():
					linger.Stop()
					return ctx.Err()
				}
			}
			linger.Stop()
			if err := x.apply(batch); err != nil {
				return err
			}
		}
	}
}

// reset empties the index.
func (x *Index) reset() error {
	err := x.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bJobs, bList, bRev, bCount, bQueued, bFin, bTypes} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(kSeq, be64(0))
	})
	if err == nil {
		x.applied.Store(0)
	}
	return err
}

// prune drops the jobs whose last known revision the change log no longer
// holds (below first): their record is gone — expired or purged — and no
// newer version of it is left to read.
func (x *Index) prune(first uint64) error {
	return x.db.Update(func(tx *bolt.Tx) error {
		t := newTxn(tx, x.now())
		c := tx.Bucket(bRev).Cursor()
		var gone []string
		for k, _ := c.First(); len(k) > 8 && binary.BigEndian.Uint64(k) < first; k, _ = c.Next() {
			gone = append(gone, string(k[8:]))
		}
		for _, id := range gone {
			if old, ok := t.entry(id); ok {
				t.change(&old, nil)
			}
		}
		t.flush()
		return nil
	})
}

// apply writes a batch of changes in one transaction.
func (x *Index) apply(batch []natsjs.RecordChange) error {
	last := x.applied.Load()
	now := x.now()
	// A job's last change in the batch says where it is now: the ones
	// before it (a job admitted, claimed and finished within one batch)
	// would be written only to be overwritten.
	lastOf := make(map[string]int, len(batch))
	for i, c := range batch {
		if id := idOfKey(c.Key); id != "" {
			lastOf[id] = i
		}
	}
	err := x.db.Update(func(tx *bolt.Tx) error {
		t := newTxn(tx, now)
		for i, c := range batch {
			last = max(last, c.Revision)
			id := idOfKey(c.Key)
			if id == "" || lastOf[id] != i {
				continue
			}
			old, had := t.entry(id)
			if had && old.Rev >= c.Revision {
				continue // a change the index already holds
			}
			var oldp *Entry
			if had {
				oldp = &old
			}
			if c.Deleted {
				if had {
					t.change(oldp, nil)
				}
				continue
			}
			rec, err := c.Record()
			if err != nil {
				x.log.Warn("query index: a record that does not decode is left out", "key_id", id, "revision", c.Revision, "err", err)
				continue
			}
			e := entryOf(rec)
			t.change(oldp, &e)
		}
		t.flush()
		if now.Sub(x.pruned) > 10*time.Minute {
			t.pruneFinishes()
			x.pruned = now
		}
		return tx.Bucket(bMeta).Put(kSeq, be64(last))
	})
	if err != nil {
		return err
	}
	x.advance(last)
	return nil
}

// idOfKey is the job id of a record key (tenant.requester.id).
func idOfKey(key string) string {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || !job.ValidID(parts[2]) {
		return ""
	}
	return parts[2]
}

// txn is one write transaction of the index.
type txn struct {
	tx                             *bolt.Tx
	jobs, list, rev, count, queued *bolt.Bucket
	fin, types                     *bolt.Bucket
	now                            time.Time
	// counters holds the transaction's net change of each counter, written
	// once at flush: a batch's jobs share a few counters (per type and
	// state, per finish minute and hour), which would otherwise each be
	// read and written again for every job.
	counters map[string]int
	// typed is the type scopes known to be stored already.
	typed map[string]bool
	// olds and news are the contributions of one change (reused).
	olds, news []string
}

func newTxn(tx *bolt.Tx, now time.Time) *txn {
	t := &txn{tx: tx, jobs: tx.Bucket(bJobs), list: tx.Bucket(bList), rev: tx.Bucket(bRev), count: tx.Bucket(bCount),
		queued: tx.Bucket(bQueued), fin: tx.Bucket(bFin), types: tx.Bucket(bTypes), now: now,
		counters: map[string]int{}, typed: map[string]bool{}}
	// The list, queue and revision keys of new jobs go at the end of their
	// ranges (newest created, highest revision): pages split there are
	// never filled later, so they are split full rather than half full.
	for _, b := range []*bolt.Bucket{t.list, t.queued, t.rev} {
		b.FillPercent = 0.9
	}
	return t
}

// flush writes the counters' net changes, in key order.
func (t *txn) flush() {
	keys := make([]string, 0, len(t.counters))
	for k, n := range t.counters {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b := t.count
		if k[0] == 'F' {
			b = t.fin
		}
		add(b, []byte(k[1:]), t.counters[k])
	}
	clear(t.counters)
}

func (t *txn) entry(id string) (Entry, bool) {
	return entryIn(t.jobs, id)
}

func entryIn(b *bolt.Bucket, id string) (Entry, bool) {
	v := b.Get([]byte(id))
	if v == nil {
		return Entry{}, false
	}
	var e Entry
	if err := json.Unmarshal(v, &e); err != nil {
		return Entry{}, false
	}
	return e, true
}

// change replaces what old contributes (nil: a new job) by what e does
// (nil: the job is gone). Only the differences are written, so a change
// that leaves a job's counts alone (an admin retry adding retried_as to a
// terminal record) touches no counter.
func (t *txn) change(old, e *Entry) {
	t.olds, t.news = t.olds[:0], t.news[:0]
	if old != nil {
		t.olds = contributions(t.olds, old, t.now)
		_ = t.rev.Delete(append(be64(old.Rev), old.ID...))
	}
	if e != nil {
		t.news = contributions(t.news, e, t.now)
		v, _ := json.Marshal(e)
		_ = t.jobs.Put([]byte(e.ID), v)
		_ = t.rev.Put(append(be64(e.Rev), e.ID...), nil)
		for _, scope := range scopes(e) {
			k := scope + "\x00" + e.Type
			if !t.typed[k] {
				if t.types.Get([]byte(k)) == nil {
					_ = t.types.Put([]byte(k), nil)
				}
				t.typed[k] = true
			}
		}
	} else if old != nil {
		_ = t.jobs.Delete([]byte(old.ID))
	}
	for _, k := range t.olds {
		if !slices.Contains(t.news, k) {
			t.apply(k, -1)
		}
	}
	for _, k := range t.news {
		if !slices.Contains(t.olds, k) {
			t.apply(k, 1)
		}
	}
}

// A contribution's key starts with the bucket it goes to: L list, Q
// queued, C counter, F finish counter.
func (t *txn) apply(k string, n int) {
	switch k[0] {
	case 'L':
		t.member(t.list, []byte(k[1:]), n)
	case 'Q':
		t.member(t.queued, []byte(k[1:]), n)
	case 'C', 'F':
		t.counters[k] += n
	}
}

func (t *txn) member(b *bolt.Bucket, key []byte, n int) {
	if n > 0 {
		_ = b.Put(key, nil)
	} else {
		_ = b.Delete(key)
	}
}

// add changes a counter by n; it never goes below zero, and one at zero
// is removed.
func add(b *bolt.Bucket, key []byte, n int) {
	v := int64(u64(b.Get(key))) + int64(n)
	if v <= 0 {
		_ = b.Delete(key)
		return
	}
	_ = b.Put(key, be64(uint64(v)))
}

// finishKept is how long the finish counters are kept: a day's window and
// the partial hours at its ends.
const finishKept = 26 * time.Hour

// pruneFinishes drops the finish counters older than finishKept.
func (t *txn) pruneFinishes() {
	floor := t.now.Add(-finishKept)
	c := t.fin.Cursor()
	var old [][]byte
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) < 9 {
			continue
		}
		kind, at := k[len(k)-9], int64(binary.BigEndian.Uint64(k[len(k)-8:]))
		unit := time.Minute
		if kind == 'h' {
			unit = time.Hour
		}
		if time.Unix(0, at*int64(unit)).Add(unit).Before(floor) {
			old = append(old, append([]byte(nil), k...))
		}
	}
	for _, k := range old {
		_ = t.fin.Delete(k)
	}
}

// scopes are the tenant scopes a job counts in: its tenant's, and every
// tenant's (""), which operators read.
func scopes(e *Entry) [2]string { return [2]string{e.Tenant, ""} }

// contributions appends the keys a job adds to the index to out; each
// counts 1 (a membership, or one job in a counter).
func contributions(out []string, e *Entry, now time.Time) []string {
	created := string(be64(uint64(e.Created))) + e.ID
	for _, scope := range scopes(e) {
		out = append(out, "L"+listPrefix(dimAll, scope, "")+created,
			"L"+listPrefix(dimType, scope, e.Type)+created,
			"L"+listPrefix(dimState, scope, string(e.State))+created,
			"L"+listPrefix(dimTypeState, scope, e.Type+"\x00"+string(e.State))+created)
		if e.Category != "" {
			out = append(out, "L"+listPrefix(dimCategory, scope, e.Category)+created)
		}
		st := scope + "\x00" + e.Type + "\x00"
		switch e.Class {
		case string(job.StateQueued):
			out = append(out, "C"+st+e.Class, "Q"+st+created)
		case string(job.StateRunning), classRetrying, string(job.StateScheduled):
			out = append(out, "C"+st+e.Class)
		default:
			if e.Finished == 0 || now.Sub(time.Unix(0, e.Finished)) > finishKept {
				break
			}
			f := time.Unix(0, e.Finished)
			out = append(out, "F"+st+e.Class+"\x00m"+string(be64(uint64(f.Unix()/60))),
				"F"+st+e.Class+"\x00h"+string(be64(uint64(f.Unix()/3600))))
		}
	}
	return append(out, "L"+listPrefix(dimRequester, e.Tenant, e.Requester)+created)
}

// The list dimensions: one ordered range per scope and value.
const (
	dimAll  = 'a'
	dimType = 'y'
	// dimTypeState is the operator's usual question ("the failed jobs of
	// this type"), which the type's or the state's list would answer only
	// by scanning past every other.
	dimTypeState = 't'
	dimState     = 's'
	dimCategory  = 'c'
	dimRequester = 'r'
)

func listPrefix(dim byte, scope, value string) string {
	return string(dim) + scope + "\x00" + value + "\x00"
}

func be64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// hasPrefix for readability where keys are compared with prefixes.
func hasPrefix(k []byte, p string) bool { return bytes.HasPrefix(k, []byte(p)) }
