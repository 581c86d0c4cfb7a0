// Package schemapool compiles the params schemas of job type declarations
// for the broker and the gateway: once per process for a schema (by the
// hash of its canonical form), a bounded number at a time, so that a
// flood of declarations costs the process at most that many cores and
// never the submissions' whole machine (issue 34: 40 costly declarations
// at once took another tenant's submissions from 2 ms to over a second).
package schemapool

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/jobgate/jobgate/internal/canon"
	"github.com/jobgate/jobgate/internal/schema"
)

// ErrBusy is a compile that could not start before its context ended: the
// pool was compiling other schemas all along.
var ErrBusy = errors.New("the schema compiler is busy")

// Default is the process's pool: one compile at a time, shared by the
// broker and the gateway of a process (serve runs both), so a schema the
// broker compiled for a declaration is the one the gateway's watch then
// finds compiled.
var Default = New(1)

// keepRecent is how many compiled schemas a pool holds on to beside the
// ones its callers hold: enough for the broker's compile to still be there
// when the gateway of its process reads the declaration moments later.
const keepRecent = 2

// maxFailed bounds the refused schemas remembered (each an error message).
const maxFailed = 256

// Key identifies a schema by its canonical form (RFC 8785): two
// declarations of the same schema have the same key whatever their
// member order or white space. A document without canonical form (not
// JSON) is keyed by its bytes.
type Key [sha256.Size]byte

// maxKeys bounds the keys remembered by the hash of the bytes they were
// computed from.
const maxKeys = 1024

// keys remembers the keys of the schemas seen lately by the hash of their
// bytes: canonicalizing 32 KiB takes about a millisecond, hashing it
// tens of microseconds, and a type's declarations arrive again and again
// in the same bytes (its stored version, its worker's restarts).
var keys = struct {
	sync.Mutex
	m map[[sha256.Size]byte]Key
}{m: map[[sha256.Size]byte]Key{}}

// KeyOf is the key of a schema document.
func KeyOf(raw []byte) Key {
	sum := sha256.Sum256(raw)
	keys.Lock()
	k, ok := keys.m[sum]
	keys.Unlock()
	if ok {
		return k
	}
	k = sum
	if c, err := canon.Canonicalize(raw); err == nil {
		k = sha256.Sum256(c)
	}
	keys.Lock()
	if len(keys.m) >= maxKeys {
		clear(keys.m)
	}
	keys.m[sum] = k
	keys.Unlock()
	return k
}

// Pool compiles schemas, at most its size at a time, each key once while
// someone holds its result.
type Pool struct {
	slots    chan struct{}
	compile  func([]byte) (*schema.Schema, error)
	compiles atomic.Int64

	mu       sync.Mutex
	done     map[Key]weak.Pointer[schema.Schema]
	recent   [keepRecent]*schema.Schema
	next     int
	failed   map[Key]error
	inFlight map[Key]*flight
}

// flight is a compile under way; callers of the same key wait for it.
type flight struct {
	done chan struct{}
	s    *schema.Schema
	err  error
}

// New returns a pool compiling at most size schemas at once.
func New(size int) *Pool { return NewWith(size, schema.Compile) }

// NewWith is New with another compiler than schema.Compile: tests count
// or hold the compiles.
func NewWith(size int, compile func([]byte) (*schema.Schema, error)) *Pool {
	return &Pool{slots: make(chan struct{}, max(size, 1)), compile: compile,
		done: map[Key]weak.Pointer[schema.Schema]{}, failed: map[Key]error{}, inFlight: map[Key]*flight{}}
}

// Compiles counts the schemas this pool compiled.
func (p *Pool) Compiles() int64 { return p.compiles.Load() }

// Compile returns raw's compiled schema: the one compiled already for its
// key if it is still held (or its refusal, remembered), else compiled
// once the pool has a free slot. A caller whose ctx ends while it waits
// for a slot gets ErrBusy (wrapping ctx's error); one whose key another
// caller is compiling waits for that compile.
func (p *Pool) Compile(ctx context.Context, raw json.RawMessage) (*schema.Schema, error) {
	k := KeyOf(raw)
	for {
		p.mu.Lock()
		if s := p.done[k].Value(); s != nil {
			p.mu.Unlock()
			return s, nil
		}
		if err, refused := p.failed[k]; refused {
			p.mu.Unlock()
			return nil, err
		}
		f := p.inFlight[k]
		if f == nil {
			break // p.mu held: this caller compiles
		}
		p.mu.Unlock()
		select {
		case <-f.done:
			if !errors.Is(f.err, ErrBusy) {
				return f.s, f.err
			}
			// Its caller gave up waiting for a slot; this one may not.
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		}
	}
	f := &flight{done: make(chan struct{})}
	p.inFlight[k] = f
	p.mu.Unlock()

	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		err := fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		p.finish(k, f, nil, err, false)
		return nil, err
	}
	p.compiles.Add(1)
	var s *schema.Schema
	var err error
	background(func() { s, err = p.compile(raw) })
	<-p.slots
	p.finish(k, f, s, err, true)
	return s, err
}

// finish ends a flight; a compile's outcome (not a wait's) is kept.
func (p *Pool) finish(k Key, f *flight, s *schema.Schema, err error, compiled bool) {
	p.mu.Lock()
	delete(p.inFlight, k)
	if compiled {
		switch {
		case err != nil:
			if len(p.failed) >= maxFailed {
				clear(p.failed)
			}
			p.failed[k] = err
		default:
			for key, w := range p.done { // drop what the collector took
				if w.Value() == nil {
					delete(p.done, key)
				}
			}
			p.done[k] = weak.Make(s)
			p.recent[p.next] = s
			p.next = (p.next + 1) % keepRecent
		}
	}
	f.s, f.err = s, err
	p.mu.Unlock()
	close(f.done)
}
