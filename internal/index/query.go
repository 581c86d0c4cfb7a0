package index

import (
	"encoding/base64"
	"encoding/binary"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
	bolt "go.etcd.io/bbolt"
)

// MaxScan bounds the index entries one page looks at when its filters
// skip most of them; the page then ends early, with a cursor.
const MaxScan = 1000

// Query selects a page of jobs, newest first. Tenant "" is every tenant.
type Query struct {
	Tenant, Requester, Type, Category string
	State                             job.State
	CreatedAfter, CreatedBefore       time.Time // exclusive; zero: unbounded
	Limit                             int
	// After is a cursor of a previous page ("" for the first).
	After string
}

// Page is the entries of a query's page and the cursor of the next one
// ("" when there is none).
type Page struct {
	Entries []Entry
	Next    string
}

// ErrBadCursor: a cursor this index did not issue.
var ErrBadCursor = job.Userf(api.ErrBadRequest, "cursor is not one this server issued")

// Page reads a page of q. Its cost is in proportion to the page: one range
// of the most selective dimension q names, at most MaxScan entries.
func (x *Index) Page(q Query) (Page, error) {
	var pos []byte // position to read strictly below (created id)
	if q.After != "" {
		p, err := decodeCursor(q.After)
		if err != nil {
			return Page{}, err
		}
		pos = p
	}
	if !q.CreatedBefore.IsZero() {
		b := be64(uint64(q.CreatedBefore.UnixNano()))
		if pos == nil || string(b) < string(pos) {
			pos = b
		}
	}
	var prefix string
	switch {
	case q.Requester != "" && q.Tenant != "":
		prefix = listPrefix(dimRequester, q.Tenant, q.Requester)
	case q.Category != "":
		prefix = listPrefix(dimCategory, q.Tenant, q.Category)
	case q.Type != "" && q.State != "":
		prefix = listPrefix(dimTypeState, q.Tenant, q.Type+"\x00"+string(q.State))
	case q.State != "":
		prefix = listPrefix(dimState, q.Tenant, string(q.State))
	case q.Type != "":
		prefix = listPrefix(dimType, q.Tenant, q.Type)
	default:
		prefix = listPrefix(dimAll, q.Tenant, "")
	}
	after := int64(0)
	if !q.CreatedAfter.IsZero() {
		after = q.CreatedAfter.UnixNano()
	}
	limit := max(1, q.Limit)
	var page Page
	err := x.db.View(func(tx *bolt.Tx) error {
		jobs := tx.Bucket(bJobs)
		c := tx.Bucket(bList).Cursor()
		start := []byte(prefix + "\xff\xff\xff\xff\xff\xff\xff\xff\xff")
		if pos != nil {
			start = append([]byte(prefix), pos...)
		}
		k, _ := c.Seek(start)
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		scanned := 0
		for ; k != nil && hasPrefix(k, prefix); k, _ = c.Prev() {
			rest := k[len(prefix):]
			if len(rest) < 9 {
				continue
			}
			created := int64(binary.BigEndian.Uint64(rest))
			if created <= after {
				return nil
			}
			if len(page.Entries) == limit || scanned == MaxScan {
				page.Next = encodeCursor(pos) // below the last entry looked at
				return nil
			}
			scanned++
			pos = append(pos[:0:0], rest...)
			e, ok := entryIn(jobs, string(rest[8:]))
			if !ok || !q.keeps(&e) {
				continue
			}
			page.Entries = append(page.Entries, e)
		}
		return nil
	})
	return page, err
}

func (q *Query) keeps(e *Entry) bool {
	return (q.Tenant == "" || e.Tenant == q.Tenant) && (q.Requester == "" || e.Requester == q.Requester) &&
		(q.Type == "" || e.Type == q.Type) && (q.State == "" || e.State == q.State) &&
		(q.Category == "" || e.Category == q.Category)
}

// A cursor is the position (created, id) of the last entry a page looked
// at.
func encodeCursor(pos []byte) string {
	return base64.RawURLEncoding.EncodeToString([]byte("x" + strconv.FormatUint(binary.BigEndian.Uint64(pos), 10) + "." + string(pos[8:])))
}

// CursorAfter is the cursor of a page whose last entry is e: the next page
// goes on strictly below it (a caller that stops within a page).
func CursorAfter(e Entry) string { return encodeCursor(append(be64(uint64(e.Created)), e.ID...)) }

func decodeCursor(s string) ([]byte, error) {
	if len(s) > api.MaxAdminCursorLen {
		return nil, ErrBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBadCursor
	}
	rest, ok := strings.CutPrefix(string(raw), "x")
	ns, id, ok2 := strings.Cut(rest, ".")
	n, perr := strconv.ParseUint(ns, 10, 64)
	if !ok || !ok2 || perr != nil || !job.ValidID(id) {
		return nil, ErrBadCursor
	}
	return append(be64(n), id...), nil
}

// Lookup finds a job by id.
func (x *Index) Lookup(id string) (Entry, bool) {
	var e Entry
	var ok bool
	_ = x.db.View(func(tx *bolt.Tx) error {
		e, ok = entryIn(tx.Bucket(bJobs), id)
		return nil
	})
	return e, ok
}

// Stats counts the jobs of tenant ("" for every tenant) per type, at now.
// Its cost is per type, never per job: three counters, one key, and the
// finish counters of an hour and a day (at most 60 minute counters and
// 23 hour counters and 120 minute counters at the day's two ends, per
// terminal state).
func (x *Index) Stats(tenant string, now time.Time) ([]api.TypeStats, error) {
	var out []api.TypeStats
	err := x.db.View(func(tx *bolt.Tx) error {
		counts, queued, fin := tx.Bucket(bCount), tx.Bucket(bQueued), tx.Bucket(bFin)
		tc := tx.Bucket(bTypes).Cursor()
		scope := tenant + "\x00"
		for k, _ := tc.Seek([]byte(scope)); k != nil && hasPrefix(k, scope); k, _ = tc.Next() {
			typ := string(k[len(scope):])
			st := scope + typ + "\x00"
			s := api.TypeStats{Type: typ,
				Queued:    int64(u64(counts.Get([]byte(st + string(job.StateQueued))))),
				Running:   int64(u64(counts.Get([]byte(st + string(job.StateRunning))))),
				Retrying:  int64(u64(counts.Get([]byte(st + classRetrying)))),
				Scheduled: int64(u64(counts.Get([]byte(st + string(job.StateScheduled))))),
			}
			qc := queued.Cursor()
			if qk, _ := qc.Seek([]byte(st)); qk != nil && hasPrefix(qk, st) && len(qk) >= len(st)+8 {
				oldest := time.Unix(0, int64(binary.BigEndian.Uint64(qk[len(st):])))
				s.OldestQueuedSeconds = max(0, now.Sub(oldest).Seconds())
			}
			fc := fin.Cursor()
			for _, state := range []job.State{job.StateSucceeded, job.StateFailed, job.StateCanceled} {
				p := st + string(state) + "\x00"
				hour := finishes(fc, p, now.Add(-time.Hour), now)
				day := finishes(fc, p, now.Add(-24*time.Hour), now)
				switch state {
				case job.StateSucceeded:
					s.LastHour.Succeeded, s.LastDay.Succeeded = hour, day
				case job.StateFailed:
					s.LastHour.Failed, s.LastDay.Failed = hour, day
				case job.StateCanceled:
					s.LastHour.Canceled, s.LastDay.Canceled = hour, day
				}
			}
			out = append(out, s)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out, err
}

// Minutes is, per type of tenant ("" for every tenant), the jobs finished
// in each of the api.SeriesMinutes minutes up to now's, by terminal state:
// at most 180 minute counters a type, never a cost per job.
func (x *Index) Minutes(tenant string, now time.Time) (map[string]*api.MinuteSeries, error) {
	out := map[string]*api.MinuteSeries{}
	last := now.Unix() / 60
	first := last - api.SeriesMinutes + 1
	start := time.Unix(first*60, 0).UTC()
	err := x.db.View(func(tx *bolt.Tx) error {
		fc := tx.Bucket(bFin).Cursor()
		tc := tx.Bucket(bTypes).Cursor()
		scope := tenant + "\x00"
		for k, _ := tc.Seek([]byte(scope)); k != nil && hasPrefix(k, scope); k, _ = tc.Next() {
			typ := string(k[len(scope):])
			s := &api.MinuteSeries{Start: start, Succeeded: make([]int64, api.SeriesMinutes),
				Failed: make([]int64, api.SeriesMinutes), Canceled: make([]int64, api.SeriesMinutes)}
			for state, dst := range map[job.State][]int64{job.StateSucceeded: s.Succeeded, job.StateFailed: s.Failed, job.StateCanceled: s.Canceled} {
				p := scope + typ + "\x00" + string(state) + "\x00m"
				end := p + string(be64(uint64(last)))
				for k, v := fc.Seek([]byte(p + string(be64(uint64(first))))); k != nil && string(k) <= end; k, v = fc.Next() {
					if len(k) != len(p)+8 {
						continue
					}
					if i := int64(binary.BigEndian.Uint64(k[len(p):])) - first; i >= 0 && i < api.SeriesMinutes {
						dst[i] += int64(u64(v))
					}
				}
			}
			out[typ] = s
		}
		return nil
	})
	return out, err
}

// finishes sums the finish counters under p from the minute of from to the
// minute of to: whole hours from hour counters, the partial hours at the
// ends from minute counters (exact to the minute).
func finishes(c *bolt.Cursor, p string, from, to time.Time) int64 {
	fm, tm := from.Unix()/60, to.Unix()/60
	if tm-fm <= 120 {
		return sum(c, p+"m", fm, tm)
	}
	firstHour := (fm + 59) / 60 // the first whole hour at or after from
	lastHour := tm / 60         // the hour to is in, counted by minutes
	n := sum(c, p+"m", fm, firstHour*60-1)
	n += sum(c, p+"h", firstHour, lastHour-1)
	n += sum(c, p+"m", lastHour*60, tm)
	return n
}

// sum adds the counters under p for the buckets lo to hi, inclusive.
func sum(c *bolt.Cursor, p string, lo, hi int64) int64 {
	if hi < lo {
		return 0
	}
	var n int64
	end := p + string(be64(uint64(hi)))
	for k, v := c.Seek([]byte(p + string(be64(uint64(lo))))); k != nil && string(k) <= end; k, v = c.Next() {
		n += int64(u64(v))
	}
	return n
}
