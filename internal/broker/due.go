package broker

import (
	"container/heap"
	"time"
)

// dueQ is a lane's deferred messages in order of their due time, so that
// whether a lane has one due is a look at its top, not a scan of every
// claim this broker holds there. An entry is current while the lane's
// deferred map gives its sequence the same due time; the others (a message
// deferred again, or settled) are dropped when they reach the top.
type dueQ []dueEntry

type dueEntry struct {
	due time.Time
	seq uint64
}

func (q dueQ) Len() int           { return len(q) }
func (q dueQ) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q dueQ) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *dueQ) Push(x any)        { *q = append(*q, x.(dueEntry)) }
func (q *dueQ) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// deferral is when a lane looks at a deferred message again, and the
// priority of its job (0: not known, taken as job.DefaultPriority).
type deferral struct {
	due      time.Time
	priority int
}

// deferTo sets when the lane looks at seq again; a priority of 0 keeps
// the one known of seq.
func (l *laneQ) deferTo(seq uint64, due time.Time, priority int) {
	if priority == 0 {
		priority = l.deferred[seq].priority
	}
	l.deferred[seq] = deferral{due: due, priority: priority}
	heap.Push(&l.dues, dueEntry{due: due, seq: seq})
}

// undefer forgets seq (its top entry goes when it surfaces).
func (l *laneQ) undefer(seq uint64) {
	delete(l.deferred, seq)
	if len(l.deferred) == 0 {
		l.dues = l.dues[:0]
	}
}

// firstDue is the lane's earliest current deferred message (ok false when
// it has none).
func (l *laneQ) firstDue() (dueEntry, bool) {
	for len(l.dues) > 0 {
		top := l.dues[0]
		if d, ok := l.deferred[top.seq]; ok && d.due.Equal(top.due) {
			return top, true
		}
		heap.Pop(&l.dues)
	}
	return dueEntry{}, false
}

// takeDue removes and returns the earliest deferred message due by now.
func (l *laneQ) takeDue(now time.Time) (uint64, bool) {
	top, ok := l.firstDue()
	if !ok || top.due.After(now) {
		return 0, false
	}
	heap.Pop(&l.dues)
	delete(l.deferred, top.seq)
	return top.seq, true
}
