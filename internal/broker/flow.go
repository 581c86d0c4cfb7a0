package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/api"
)

// A type's flow control (api.Flow) is enforced where a job starts: the
// claim. Before it writes a claim, the broker takes a place under each of
// the job's concurrency keys and a token of its rate bucket, all in
// JOBGATE_SLOTS by compare-and-set (natsjs.SlotStore), so the limits hold
// whichever dispatcher starts the job. A job that finds a key full or the
// bucket empty is not claimed and costs no attempt: its work message is
// parked (park.go) and the lane goes on with its other messages, so a job
// at its limit blocks neither its lane nor other keys. A place is held by
// the claim (its ClaimID), renewed by the job's beats on any broker, and
// given back at the attempt's verdict, at a takeover, and when a broker
// finds the job ended; one never given back runs out SlotTTL after its
// last renewal.

// What a start waits for, as the job resource's waiting_for says it.
const (
	blockedConcurrency = "concurrency"
	blockedRate        = "rate limit"
)

// flowKey is one limit a start of a job must pass: a concurrency entry's
// key in JOBGATE_SLOTS with its limit, or the rate bucket's (rate set).
type flowKey struct {
	key   string
	class string // "tenant", "requester", "params" or "rate"
	limit int
	rate  *api.RateLimit
}

// flowKeys are the limits rec's starts pass under d: its concurrency
// entries, then its rate bucket.
func flowKeys(d *job.TypeDecl, rec *job.Record) []flowKey {
	if len(d.Concurrency) == 0 && d.RateLimit == nil {
		return nil
	}
	keys := make([]flowKey, 0, len(d.Concurrency)+1)
	for _, c := range d.Concurrency {
		keys = append(keys, concurrencyKey(d.Name, c, rec))
	}
	if r := d.RateLimit; r != nil {
		k := "fr." + d.Name + ".all.x"
		if r.KeyOr() == api.KeyTenant {
			k = "fr." + d.Name + ".t." + digest(rec.Tenant)
		}
		keys = append(keys, flowKey{key: k, class: "rate", rate: r})
	}
	return keys
}

// concurrencyKey is the entry of c's value for rec. A value read from the
// params counts within the job's tenant: another tenant's params, however
// alike, never take this tenant's places.
func concurrencyKey(typ string, c api.ConcurrencyKey, rec *job.Record) flowKey {
	switch c.Key {
	case api.KeyTenant:
		return flowKey{key: "fc." + typ + ".t." + digest(rec.Tenant), class: "tenant", limit: c.Limit}
	case api.KeyRequester:
		return flowKey{key: "fc." + typ + ".r." + digest(rec.Tenant+"\x00"+rec.Requester), class: "requester", limit: c.Limit}
	}
	v := paramValue(rec.Params, strings.TrimPrefix(c.Key, api.KeyParamsPrefix))
	return flowKey{key: "fc." + typ + ".p" + digest(c.Key)[:12] + "." + digest(rec.Tenant+"\x00"+string(v)),
		class: "params", limit: c.Limit}
}

// digest names a value in a key: 96 bits of its SHA-256, hex (keys never
// hold raw ids or params).
func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:12])
}

// paramValue is the JSON value at pointer (RFC 6901, without its leading
// "/params/") in params, in Go's encoding of it (object keys sorted), or
// null when there is none.
func paramValue(params json.RawMessage, pointer string) []byte {
	var v any
	if json.Unmarshal(params, &v) != nil {
		return []byte("null")
	}
	for _, tok := range strings.Split(pointer, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || (len(tok) > 1 && tok[0] == '0') {
				return []byte("null")
			}
			v = x[i]
		default:
			return []byte("null")
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return out
}

// flowBlock is why a start did not pass its limits: the key it waits on,
// what for (blockedConcurrency or blockedRate) and when to look again.
type flowBlock struct {
	key   string
	why   string
	delay time.Duration
}

// admit takes rec's places and a rate token for the claim holder before
// the claim is written; on a block (or an error) it gives back what it
// took. The rate token is taken last: a job that waits for a place spends
// none.
func (b *Broker) admit(ctx context.Context, keys []flowKey, holder string) *flowBlock {
	now := b.cfg.Now()
	var taken []flowKey
	undo := func() { b.unlease(ctx, taken, holder) }
	for _, k := range keys {
		if k.rate != nil {
			wait, err := b.stores.Slots.TakeToken(ctx, k.key, k.rate.PerSecond, k.rate.BurstOr(), now)
			if err != nil || wait > 0 {
				undo()
				return &flowBlock{key: k.key, why: blockedRate, delay: max(wait, time.Millisecond) + jitter(20*time.Millisecond) + blockErr(err)}
			}
			continue
		}
		err := b.stores.Slots.Lease(ctx, k.key, k.limit, holder, now)
		if err != nil {
			undo()
			return &flowBlock{key: k.key, why: blockedConcurrency, delay: probeEvery + blockErr(err)}
		}
		taken = append(taken, k)
	}
	return nil
}

// blockErr is the extra wait of a block that came from a store error
// rather than a limit.
func blockErr(err error) time.Duration {
	if err == nil || errors.Is(err, natsjs.ErrNoSlot) {
		return 0
	}
	return outageDelay(1)
}

// unlease gives back holder's places under keys (best effort: a place not
// given back runs out SlotTTL after its last renewal).
func (b *Broker) unlease(ctx context.Context, keys []flowKey, holder string) {
	if holder == "" {
		return
	}
	for _, k := range keys {
		if k.rate != nil {
			continue
		}
		if err := b.stores.Slots.Unlease(ctx, k.key, holder, b.cfg.Now()); err != nil {
			b.log.Debug("concurrency place not given back, it runs out", "key", k.key, "err", err)
		}
	}
}

// release gives back the places of rec's current claim under d, when d
// has concurrency keys: its attempt ended, or a broker found it ended.
func (b *Broker) release(ctx context.Context, d *job.TypeDecl, rec *job.Record) {
	if d == nil || rec == nil || len(d.Concurrency) == 0 || rec.ClaimID == "" {
		return
	}
	keys := flowKeys(d, rec)
	b.unlease(ctx, keys, rec.ClaimID)
	if s := b.schedOf(rec.Type); s != nil {
		for _, k := range keys {
			if k.rate == nil {
				s.unpark(k.key)
			}
		}
	}
}

// renew keeps the places of a running claim, on its beats. A place lost
// meanwhile (the lease ran out, say while no broker ran) is taken again if
// there is room; without room the attempt runs on over the limit, which
// is logged: it cannot be stopped from here.
func (b *Broker) renew(ctx context.Context, d *job.TypeDecl, rec *job.Record) {
	if len(d.Concurrency) == 0 || rec.ClaimID == "" {
		return
	}
	now := b.cfg.Now()
	for _, k := range flowKeys(d, rec) {
		if k.rate != nil {
			continue
		}
		err := b.stores.Slots.Lease(ctx, k.key, k.limit, rec.ClaimID, now)
		if errors.Is(err, natsjs.ErrNoSlot) {
			b.log.Warn("a running attempt lost its concurrency place", "job_id", rec.ID, "type", rec.Type, "class", k.class)
		} else if err != nil {
			b.log.Debug("concurrency place not renewed", "job_id", rec.ID, "err", err)
		}
	}
}
