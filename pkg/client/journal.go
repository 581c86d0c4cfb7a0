package client

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// EntryState is where a journaled submission is.
type EntryState string

const (
	// EntryPending: the key is written, no definitive answer yet (the
	// request may or may not have reached the server).
	EntryPending EntryState = "pending"
	// EntryAccepted: the server answered with the job, which was not
	// finished when last seen.
	EntryAccepted EntryState = "accepted"
	// EntryDone: the job was seen in a terminal state. The entry stays
	// until the key's retention passed, then it is pruned.
	EntryDone EntryState = "done"
)

// Entry is one journaled submission. Key is the raw idempotency key: the
// journal file is private to its user (0600).
type Entry struct {
	Key   string `json:"key"`
	Scope string `json:"scope"`
	Type  string `json:"type"`
	// Path is "/v1/batches" for a SubmitBatch (JobID is then the batch's
	// id), else empty (POST /v1/jobs).
	Path        string          `json:"path,omitempty"`
	Body        json.RawMessage `json:"body"`
	Fingerprint string          `json:"fingerprint"`
	State       EntryState      `json:"state"`
	JobID       string          `json:"job_id,omitempty"`
	JobState    api.State       `json:"job_state,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// open reports whether the entry's logical request is still in flight: a
// repeated identical Submit reuses its key.
func (e *Entry) open() bool { return e.State == EntryPending || e.State == EntryAccepted }

// Journal is the durable record of idempotency keys: one bbolt file. It is
// opened per operation, so several processes can share it; bbolt's file lock
// serialises them, and one that holds it too long makes the others fail with
// ErrJournalLocked instead of corrupting anything.
type Journal struct {
	path        string
	lockTimeout time.Duration
	retention   time.Duration
	now         func() time.Time
}

var (
	bucketEntries = []byte("entries") // key → Entry
	bucketJobs    = []byte("jobs")    // job id → key
	bucketOpen    = []byte("open")    // scope NUL fingerprint → key of the newest open entry
	bucketMeta    = []byte("meta")    // pruned_at → RFC 3339 time of the last prune

	metaPrunedAt = []byte("pruned_at")
)

// pruneEvery spaces out the retention sweep, which reads every entry, so a
// Submit costs the same with ten thousand entries as with ten.
const pruneEvery = time.Hour

func openIndexKey(e *Entry) []byte { return []byte(e.Scope + "\x00" + e.Fingerprint) }

// DefaultJournalPath is $XDG_STATE_HOME/jobgate/journal.db, falling back to
// ~/.local/state on Unix and the user config directory elsewhere.
func DefaultJournalPath() (string, error) { return JournalPath(os.Getenv) }

// JournalPath is DefaultJournalPath with an explicit environment.
func JournalPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "jobgate", "journal.db"), nil
	}
	switch runtime.GOOS {
	case "windows", "darwin", "ios", "plan9":
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("journal location: %w", err)
		}
		return filepath.Join(d, "jobgate", "journal.db"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("journal location: %w", err)
		}
	}
	return filepath.Join(home, ".local", "state", "jobgate", "journal.db"), nil
}

// Path is the journal file.
func (j *Journal) Path() string { return j.path }

// update runs fn in one write transaction of the freshly opened file.
func (j *Journal) update(fn func(tx *bolt.Tx) error) error {
	if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	db, err := bolt.Open(j.path, 0o600, &bolt.Options{Timeout: j.lockTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return fmt.Errorf("%w: %s still held after %s", ErrJournalLocked, j.path, j.lockTimeout)
		}
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketEntries, bucketJobs, bucketOpen, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return fn(tx)
	})
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

func getEntry(tx *bolt.Tx, key string) (*Entry, error) {
	raw := tx.Bucket(bucketEntries).Get([]byte(key))
	if raw == nil {
		return nil, nil
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("entry unreadable: %w", err)
	}
	return &e, nil
}

// putEntry stores e and keeps the indexes in step. newest makes e the open
// entry its identical submissions reuse even if another one is open (a new
// logical request, WithFreshKey).
func putEntry(tx *bolt.Tx, e *Entry, newest bool) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bucketEntries).Put([]byte(e.Key), raw); err != nil {
		return err
	}
	if e.JobID != "" {
		if err := tx.Bucket(bucketJobs).Put([]byte(e.JobID), []byte(e.Key)); err != nil {
			return err
		}
	}
	open := tx.Bucket(bucketOpen)
	idx := openIndexKey(e)
	cur := open.Get(idx)
	switch {
	case e.open() && (newest || cur == nil):
		return open.Put(idx, []byte(e.Key))
	case !e.open() && string(cur) == e.Key:
		return open.Delete(idx)
	}
	return nil
}

func deleteEntry(tx *bolt.Tx, e *Entry) error {
	if e.JobID != "" {
		if err := tx.Bucket(bucketJobs).Delete([]byte(e.JobID)); err != nil {
			return err
		}
	}
	if idx := openIndexKey(e); string(tx.Bucket(bucketOpen).Get(idx)) == e.Key {
		if err := tx.Bucket(bucketOpen).Delete(idx); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketEntries).Delete([]byte(e.Key))
}

func eachEntry(tx *bolt.Tx, fn func(*Entry) error) error {
	return tx.Bucket(bucketEntries).ForEach(func(_, raw []byte) error {
		var e Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil // an unreadable entry is skipped, not fatal
		}
		return fn(&e)
	})
}

// claim finds or creates the entry a submission uses, before anything is
// sent: the caller's key (which must not belong to another request), else
// an open entry of the same identity and fingerprint (a retry of the same
// logical request, e.g. after a crash), else a new entry with a new key.
// It prunes expired entries on the way.
func (j *Journal) claim(want *Entry, explicit, fresh bool) (e *Entry, reused bool, err error) {
	err = j.update(func(tx *bolt.Tx) error {
		if err := j.pruneDue(tx); err != nil {
			return err
		}
		if explicit {
			old, err := getEntry(tx, want.Key)
			if err != nil {
				return err
			}
			if old != nil {
				if old.Fingerprint != want.Fingerprint || old.Scope != want.Scope {
					return localConflict(old)
				}
				e, reused = old, true
				return nil
			}
		} else if !fresh {
			if key := tx.Bucket(bucketOpen).Get(openIndexKey(want)); key != nil {
				old, err := getEntry(tx, string(key))
				if err != nil {
					return err
				}
				if old != nil && old.open() {
					e, reused = old, true
					return nil
				}
			}
		}
		e = want
		return putEntry(tx, e, true)
	})
	return e, reused, err
}

// localConflict refuses a caller's key that the journal knows belongs to a
// different request, before the server is asked: the same answer the server
// would give, without the risk of the other request resuming into a 409.
func localConflict(old *Entry) error {
	p := &ProblemError{
		Status: 409, Type: "/problems/idempotency-key-reused", Title: "Idempotency-Key already used for a different request",
		Detail: "the journal holds this key for a different " + old.Type + " request", JobID: old.JobID,
	}
	return p
}

// record stores the server's answer to the entry's submission.
func (j *Journal) record(key string, res *api.Resource) error {
	return j.recordID(key, res.ID, res.State, res.State.Terminal())
}

// recordID stores the id the server answered (a job's, a batch's) and
// whether it has ended.
func (j *Journal) recordID(key, id string, state api.State, ended bool) error {
	return j.update(func(tx *bolt.Tx) error {
		e, err := getEntry(tx, key)
		if err != nil || e == nil {
			return err
		}
		e.JobID, e.JobState, e.UpdatedAt = id, state, j.now().UTC()
		e.State = EntryAccepted
		if ended {
			e.State = EntryDone
		}
		return putEntry(tx, e, false)
	})
}

// forget removes an entry whose key the server definitively refused (the
// request was invalid, or the key belongs to another request).
func (j *Journal) forget(key string) error {
	return j.update(func(tx *bolt.Tx) error {
		e, err := getEntry(tx, key)
		if err != nil || e == nil {
			return err
		}
		return deleteEntry(tx, e)
	})
}

// observe notes that a journaled job reached a terminal state: its logical
// request is finished, and a new identical Submit gets a new key.
func (j *Journal) observe(res *api.Resource) error {
	if !res.State.Terminal() {
		return nil
	}
	return j.observeID(res.ID, res.State)
}

// observeID finishes the entry of a job (or batch) id seen ended.
func (j *Journal) observeID(id string, state api.State) error {
	return j.update(func(tx *bolt.Tx) error {
		key := tx.Bucket(bucketJobs).Get([]byte(id))
		if key == nil {
			return nil
		}
		e, err := getEntry(tx, string(key))
		if err != nil || e == nil || e.State == EntryDone {
			return err
		}
		e.State, e.JobState, e.UpdatedAt = EntryDone, state, j.now().UTC()
		return putEntry(tx, e, false)
	})
}

// Settle marks a journaled submission finished by key, so the next identical
// Submit makes a new job. Callers that do not Wait for their jobs use it once
// they have what they need (the CLI's submit without --wait does).
func (j *Journal) Settle(key string) error {
	return j.update(func(tx *bolt.Tx) error {
		e, err := getEntry(tx, key)
		if err != nil || e == nil || e.State == EntryDone {
			return err
		}
		if e.State == EntryPending {
			return nil // no answer yet: it must stay resumable
		}
		e.State, e.UpdatedAt = EntryDone, j.now().UTC()
		return putEntry(tx, e, false)
	})
}

// Entries returns the journal's entries of one scope ("" = all), oldest first.
func (j *Journal) Entries(scope string) ([]Entry, error) {
	var out []Entry
	err := j.update(func(tx *bolt.Tx) error {
		return eachEntry(tx, func(e *Entry) error {
			if scope == "" || e.Scope == scope {
				out = append(out, *e)
			}
			return nil
		})
	})
	sort.Slice(out, func(a, b int) bool { return out[a].CreatedAt.Before(out[b].CreatedAt) })
	return out, err
}

// Prune removes entries whose job is finished (or whose key the server no
// longer remembers) once the key's retention has passed since creation.
// Entries that never got an answer are kept: they are work the user asked
// for and must be resumable.
func (j *Journal) Prune() error { return j.update(j.prune) }

// pruneDue prunes when the last sweep is more than pruneEvery ago.
func (j *Journal) pruneDue(tx *bolt.Tx) error {
	now := j.now()
	meta := tx.Bucket(bucketMeta)
	if last, err := time.Parse(time.RFC3339Nano, string(meta.Get(metaPrunedAt))); err == nil &&
		now.Sub(last) < pruneEvery && !now.Before(last) {
		return nil
	}
	return j.prune(tx)
}

func (j *Journal) prune(tx *bolt.Tx) error {
	now := j.now()
	if err := tx.Bucket(bucketMeta).Put(metaPrunedAt, []byte(now.UTC().Format(time.RFC3339Nano))); err != nil {
		return err
	}
	cutoff := now.Add(-j.retention)
	var stale []*Entry
	err := eachEntry(tx, func(e *Entry) error {
		if e.State != EntryPending && e.CreatedAt.Before(cutoff) {
			stale = append(stale, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range stale {
		if err := deleteEntry(tx, e); err != nil {
			return err
		}
	}
	return nil
}

// keyTag is a short tag for an idempotency key in the client's own logs. It
// is a plain digest, so a guessable key can be recovered from it; the
// server tags keys with a keyed hash instead.
func keyTag(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
