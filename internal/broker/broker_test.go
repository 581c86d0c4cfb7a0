package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func itoa(n int) string { return strconv.Itoa(n) }

const credA, credB = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"

// Two brokers race for one job between their read of the record and their
// write: exactly one claim is stored and answered. Without the claim's
// compare-and-set both would win.
func TestOfTwoRacingClaimsExactlyOneWins(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	b1, b2 := tb.broker(t, false), tb.broker(t, false)
	decl := jobtest.PermitReport()
	rec := env.Commit(t, tb.conn.Res, jobtest.Request{Key: "race"})
	ctx := context.Background()
	var second claimResult
	var once sync.Once
	b1.beforeClaimWrite = func(key string) {
		// b1 has read the queued record; b2 claims the job in between.
		once.Do(func() { second = b2.claim(ctx, decl, key, 1, "worker-b") })
	}
	first := b1.claim(ctx, decl, rec.Key(), 1, "worker-a")
	wins := 0
	for _, c := range []claimResult{first, second} {
		if c.verdict == verdictRun {
			wins++
		}
	}
	require.Equal(t, 1, wins, "exactly one claim wins (first %v, second %v)", first.verdict, second.verdict)
	stored := tb.record(t, rec.Key())
	require.Equal(t, job.StateRunning, stored.State)
	require.Equal(t, 1, stored.Attempt, "one attempt used")
	require.Equal(t, "worker-b", stored.Worker, "the claim written first stands")
	require.Equal(t, verdictNak, first.verdict, "the loser comes back to check on the claim")
}

// A work message that names the job's newest event (the relay's, after
// the admission's event) lets the claim announce itself without looking
// that event up: the claim's event follows the admission's, and the event
// stream gets no read.
func TestTheClaimsEventFollowsTheEventTheWorkNames(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "named", "text/plain").Error)
	ctx := context.Background()
	rec := tb.admitWith(t, "named", "named-1", func(rec *job.Record) {
		seq, first, err := tb.conn.Res.Events.PublishFirst(ctx, rec)
		require.NoError(t, err)
		require.True(t, first)
		require.NoError(t, tb.conn.Res.Work.PublishAfterEvent(ctx, rec, 0, seq))
	})
	reads := tb.env.CountEventReads(t)
	watch := tb.env.Connect(t, "watch")

	a := tb.next(t, credA, "named", "worker-a")
	require.Equal(t, rec.Key(), a.Key)
	require.Zero(t, reads.Load(), "no read of the event stream")
	s, err := tb.conn.Res.JS.Stream(ctx, natsjs.StreamEvents)
	require.NoError(t, err)
	m, err := s.GetLastMsgForSubject(ctx, natsjs.EventSubject(rec.Tenant, rec.Requester, rec.ID))
	require.NoError(t, err)
	var ev struct {
		State job.State `json:"state"`
	}
	require.NoError(t, json.Unmarshal(m.Data, &ev))
	require.Equal(t, job.StateRunning, ev.State, "the claim's event is the newest")
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(natsjs.EventSubject(rec.Tenant, rec.Requester, rec.ID)))
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.State.Msgs, "the admission's event, then the claim's")

	// A takeover's claim does not trust the work's event (stale by then):
	// a publish against it, refused by JetStream, would still reach the
	// job's plain subscribers, one change announced twice.
	// A synchronous subscription: after a flush, every message the server
	// sent before it waits in the subscription (an asynchronous handler
	// may not have run yet: CI).
	sub, err := watch.NC.SubscribeSync(natsjs.EventSubject(rec.Tenant, rec.Requester, rec.ID))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, watch.NC.Flush())
	taken := tb.next(t, credA, "named", "worker-b") // worker-a went silent
	require.Equal(t, 2, taken.Attempt)
	require.Eventually(t, func() bool {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(natsjs.EventSubject(rec.Tenant, rec.Requester, rec.ID)))
		return err == nil && info.State.Msgs == 3
	}, 10*time.Second, 10*time.Millisecond, "the takeover's event stored")
	require.NoError(t, watch.NC.Flush())
	seen := map[string]int{}
	for {
		m, err := sub.NextMsg(20 * time.Millisecond)
		if err != nil {
			require.ErrorIs(t, err, nats.ErrTimeout)
			break
		}
		seen[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	require.Len(t, seen, 1, "one event published: %v", seen)
	for id, n := range seen {
		require.Equal(t, 1, n, "event %s reached subscribers %d times", id, n)
	}
}

// A work message holds the record as it was published: the first claim of
// a job reads no record, and a record changed since (here its time budget)
// is claimed as it is now, not as the message has it.
func TestAClaimStartsFromTheRecordItsWorkHolds(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "held_rec", "text/plain").Error)
	var reads atomic.Int64
	watch := tb.env.Connect(t, "watch")
	for _, subj := range []string{"$JS.API.DIRECT.GET.KV_" + natsjs.BucketJobs + ".>", "$JS.API.DIRECT.GET.KV_" + natsjs.BucketJobs,
		"$JS.API.STREAM.MSG.GET.KV_" + natsjs.BucketJobs} {
		sub, err := watch.NC.Subscribe(subj, func(*nats.Msg) { reads.Add(1) })
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, watch.NC.Flush())

	fresh := tb.admit(t, "held_rec", "fresh")
	a := tb.next(t, credA, "held_rec", "worker-a")
	require.Equal(t, fresh.Key(), a.Key)
	require.Zero(t, reads.Load(), "the claim read no record")
	require.Equal(t, job.StateRunning, tb.record(t, fresh.Key()).State)

	changed := tb.admit(t, "held_rec", "changed")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tb.conn.Res.Jobs.Mutate(ctx, changed.Key(), func(r *job.Record) error { r.TimeoutSeconds = 77; return nil })
	require.NoError(t, err)
	b := tb.next(t, credA, "held_rec", "worker-b")
	require.Equal(t, changed.Key(), b.Key)
	require.Equal(t, int64(77_000), b.TimeoutMS, "the record as it is now")
	stored := tb.record(t, changed.Key())
	require.Equal(t, 77, stored.TimeoutSeconds, "the change kept")
	require.Equal(t, "worker-b", stored.Worker)
}

// A claim made after its worker gave up on the answer (the store was slow:
// here the clock jumps 20 s between the claim's read and its write) is not
// answered; the next worker that asks gets the job as the same attempt,
// instead of the claim going stale and the job losing an attempt.
func TestAClaimMadeTooLateForItsWorkerGoesToTheNextAsTheSameAttempt(t *testing.T) {
	t.Parallel()
	var slow sync.Once
	_, tb, _ := setupClocked(t, func(b *Broker, offset *atomic.Int64) {
		b.beforeClaimWrite = func(string) { slow.Do(func() { offset.Add(int64(20 * time.Second)) }) }
	})

	require.Nil(t, tb.declare(t, credA, "late", "text/plain").Error)
	rec := tb.admit(t, "late", "late-1")
	r := tb.ask(t, credA, "late", wire.OpNext, wire.NextRequest{Worker: "worker-a", WaitMS: 1000})
	require.Nil(t, r.Error)
	require.Nil(t, r.Job, "no answer to a worker that gave up")
	lost := tb.record(t, rec.Key())
	require.Equal(t, "worker-a", lost.Worker, "the claim was stored")

	a := tb.next(t, credA, "late", "worker-b")
	require.Equal(t, rec.Key(), a.Key)
	require.Equal(t, 1, a.Attempt, "the same attempt")
	stored := tb.record(t, rec.Key())
	require.Equal(t, 1, stored.AttemptsUsed())
	require.Equal(t, "worker-b", stored.Worker)
}

// A claim stored with its answer lost (the store's leader stopped between
// the write and its reply) reached no worker: the broker that wrote it
// hands it out again as the same attempt when it meets it, rather than
// let it go silent and be taken over as a second attempt.
func TestAClaimWhoseAnswerWasLostIsHandedOutAsTheSameAttempt(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	b := tb.broker(t, false)
	decl := jobtest.PermitReport()
	rec := env.Commit(t, tb.conn.Res, jobtest.Request{Key: "lost-answer"})
	ctx := context.Background()
	writes := 0
	b.afterClaimWrite = func(string) error {
		if writes++; writes == 1 {
			return errors.New("timeout: the store's leader stopped")
		}
		return nil
	}
	first := b.claim(ctx, decl, rec.Key(), 1, "renderer-a")
	require.Equal(t, verdictNak, first.verdict, "no answer: no assignment")
	lost := tb.record(t, rec.Key())
	require.Equal(t, "renderer-a", lost.Worker, "the claim is stored")

	second := b.claim(ctx, decl, rec.Key(), 2, "renderer-b")
	require.Equal(t, verdictRun, second.verdict, "%s", second.why)
	require.Equal(t, 1, second.rec.Attempt, "the lost claim's attempt, handed out again")
	stored := tb.record(t, rec.Key())
	require.Equal(t, 1, stored.Attempt)
	require.Equal(t, 1, stored.AttemptsUsed())
	require.Equal(t, "renderer-b", stored.Worker)
	require.Len(t, stored.Attempts, 1, "one attempt in the history")
	require.Equal(t, "renderer-b", stored.Attempts[0].Worker)

	// Another broker meeting the same standing claim cannot tell it from
	// one a worker holds: it waits for it to go silent.
	other := tb.broker(t, false)
	require.Equal(t, verdictNak, other.claim(ctx, decl, rec.Key(), 1, "renderer-c").verdict)
}

// A type belongs to the credential that declared it first; a built-in type
// only to jobgate's own.
func TestTypesCannotBeSquatted(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	r := tb.ask(t, credA, "permit_report", wire.OpDeclare, wire.DeclareRequest{Worker: "w", Type: wire.Declaration{
		Name: "permit_report", Schema: jobtest.PermitReport().Schema, TimeoutSeconds: 60, Attempts: 3,
		MaxResultBytes: 1 << 20, ContentType: "application/pdf"}})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeForbidden, r.Error.Code)

	require.Nil(t, tb.declare(t, credA, "export_a", "text/csv").Error)
	require.Nil(t, tb.declare(t, credA, "export_a", "text/csv").Error, "its owner may declare it again")
	r = tb.declare(t, credB, "export_a", "text/html")
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeForbidden, r.Error.Code)
	d, err := tb.conn.Res.Types.Get(context.Background(), "export_a")
	require.NoError(t, err)
	require.Equal(t, "text/csv", d.ContentType, "the owner's declaration stands")
	require.Equal(t, credA, d.Owner)

	r = tb.ask(t, credB, "export_a", wire.OpNext, wire.NextRequest{Worker: "w", WaitMS: 500})
	require.NotNil(t, r.Error, "another credential takes none of its jobs")
	require.Equal(t, wire.CodeForbidden, r.Error.Code)
}

// A declaration's schema is compiled with jobgate's bounds, whatever the
// worker checked.
func TestAnUnboundedSchemaIsRefusedAtDeclaration(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	r := tb.ask(t, credA, "open_ended", wire.OpDeclare, wire.DeclareRequest{Worker: "w", Type: wire.Declaration{
		Name: "open_ended", Schema: []byte(`{"type":"object","properties":{"s":{"type":"string"}}}`),
		TimeoutSeconds: 60, Attempts: 2, MaxResultBytes: 1 << 20, ContentType: "text/plain"}})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeInvalid, r.Error.Code)
	_, err := tb.conn.Res.Types.Get(context.Background(), "open_ended")
	require.ErrorIs(t, err, job.ErrNotFound)
}

// A success that asks for the next job (DoneRequest.Next) gets the job
// ready next in its reply, claimed for the worker it names, and nothing
// when none is ready, without waiting; the success stands either way, and
// a bad worker name gets no job.
func TestASuccessCarriesTheNextJobReadyNow(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "chained", "text/plain").Error)
	first := tb.admit(t, "chained", "chain-1")
	second := tb.admit(t, "chained", "chain-2")
	a := tb.next(t, credA, "chained", "worker-a")
	require.Equal(t, first.Key(), a.Key)

	r := tb.ask(t, credA, "chained", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token},
		Next: &wire.NextRequest{Worker: "worker-a2", WaitMS: 60_000}})
	require.Nil(t, r.Error)
	require.NotNil(t, r.Job, "the next job comes with the success")
	require.Equal(t, second.Key(), r.Job.Key)
	require.Equal(t, 1, r.Job.Attempt)
	require.Equal(t, job.StateSucceeded, tb.record(t, first.Key()).State)
	held := tb.record(t, second.Key())
	require.Equal(t, job.StateRunning, held.State)
	require.Equal(t, "worker-a2", held.Worker)

	began := time.Now()
	r = tb.ask(t, credA, "chained", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: r.Job.Key, Token: r.Job.Token},
		Next: &wire.NextRequest{Worker: "worker-a2", WaitMS: 60_000}})
	require.Nil(t, r.Error)
	require.Nil(t, r.Job, "nothing ready: no job, and no wait")
	require.Less(t, time.Since(began), 5*time.Second)
	require.Equal(t, job.StateSucceeded, tb.record(t, second.Key()).State)

	third := tb.admit(t, "chained", "chain-3")
	b := tb.next(t, credA, "chained", "worker-b")
	require.Equal(t, third.Key(), b.Key)
	tb.admit(t, "chained", "chain-4")
	r = tb.ask(t, credA, "chained", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: b.Key, Token: b.Token},
		Next: &wire.NextRequest{Worker: "bad name!"}})
	require.Nil(t, r.Error, "the success stands")
	require.Nil(t, r.Job, "a bad worker name gets no job")
	require.Equal(t, job.StateSucceeded, tb.record(t, third.Key()).State)
}

// A claim that was taken over changes nothing: its token is refused for
// every step, and the job stays the new holder's.
func TestALostClaimChangesNothing(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "fenced", "text/plain").Error)
	rec := tb.admit(t, "fenced", "fence-1")
	first := tb.next(t, credA, "fenced", "worker-a")
	require.Equal(t, rec.Key(), first.Key)
	// worker-a goes silent; its claim is taken over after StaleAfter.
	second := tb.next(t, credA, "fenced", "worker-b")
	require.Equal(t, 2, second.Attempt)
	require.NotEqual(t, first.Token, second.Token)
	before := tb.record(t, rec.Key())

	old := wire.Held{Key: first.Key, Token: first.Token}
	for op, req := range map[string]any{
		wire.OpBeat:     wire.BeatRequest{Held: old, Progress: &wire.Progress{Done: 9, Total: 10, Unit: "x"}},
		wire.OpDone:     wire.DoneRequest{Held: old},
		wire.OpFail:     wire.FailRequest{Held: old, Kind: wire.KindPermanent, UserMessage: "evil"},
		wire.OpGiveBack: wire.GiveBackRequest{Held: old, Reason: "shutdown"},
		wire.OpOpen:     old,
	} {
		r := tb.ask(t, credA, "fenced", op, req)
		require.NotNil(t, r.Error, op)
		require.Equal(t, wire.CodeLost, r.Error.Code, op)
	}
	forged := wire.Held{Key: first.Key, Token: "AAAAAAAAAAAAAAAAAAAAAAAA"}
	r := tb.ask(t, credA, "fenced", wire.OpDone, wire.DoneRequest{Held: forged})
	require.Equal(t, wire.CodeLost, r.Error.Code, "a forged token")
	after := tb.record(t, rec.Key())
	require.Equal(t, before.Revision, after.Revision, "no write")
	require.Equal(t, "worker-b", after.Worker)

	// The holder's token works.
	r = tb.ask(t, credA, "fenced", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: second.Key, Token: second.Token}})
	require.Nil(t, r.Error)
	require.Equal(t, job.StateSucceeded, tb.record(t, rec.Key()).State)
}

// A token is for one job: presented with another job's key (of its own
// type, or of a type it does not own) it is refused.
func TestATokenReachesOnlyItsJob(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "mine", "text/plain").Error)
	require.Nil(t, tb.declare(t, credB, "theirs", "text/plain").Error)
	tb.admit(t, "mine", "m-1")
	other := tb.admit(t, "theirs", "t-1")
	a := tb.next(t, credA, "mine", "worker-a")
	r := tb.ask(t, credA, "mine", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: other.Key(), Token: a.Token}})
	require.Equal(t, wire.CodeLost, r.Error.Code)
	r = tb.ask(t, credA, "theirs", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: other.Key(), Token: a.Token}})
	require.Equal(t, wire.CodeForbidden, r.Error.Code)
	require.Equal(t, job.StateQueued, tb.record(t, other.Key()).State)
}

// A result is stored under the type's declared content type and checked
// against the store on done; past the type's limit the upload is refused.
func TestResultsAreStoredAsDeclaredAndWithinTheLimit(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "report", "text/csv").Error)
	rec := tb.admit(t, "report", "r-1")
	a := tb.next(t, credA, "report", "worker-a")
	held := wire.Held{Key: a.Key, Token: a.Token}
	open := tb.ask(t, credA, "report", wire.OpOpen, held)
	require.Nil(t, open.Error)
	body := bytes.Repeat([]byte("a,b\n"), 100_000) // 400 KB: two chunks
	require.Nil(t, tb.chunk(t, credA, "report", open.Upload, 0, body[:wire.ChunkSize], false).Error)
	last := tb.chunk(t, credA, "report", open.Upload, 1, body[wire.ChunkSize:], true)
	require.Nil(t, last.Error)
	sum := sha256.Sum256(body)
	require.Equal(t, &wire.StoredResult{Object: open.Upload.Object, Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}, last.Stored)

	lie := *last.Stored
	lie.Size++
	r := tb.ask(t, credA, "report", wire.OpDone, wire.DoneRequest{Held: held, Result: &lie})
	require.Equal(t, wire.CodeBadRequest, r.Error.Code, "a size the store does not hold")
	r = tb.ask(t, credA, "report", wire.OpDone, wire.DoneRequest{Held: held, Result: last.Stored})
	require.Nil(t, r.Error)
	done := tb.record(t, rec.Key())
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, "text/csv", done.Output.ContentType)
	require.EqualValues(t, len(body), done.Output.Size)

	// Past the limit (1 MiB): refused mid-upload.
	big := tb.admit(t, "report", "r-2")
	b := tb.next(t, credA, "report", "worker-a")
	require.Equal(t, big.Key(), b.Key)
	open = tb.ask(t, credA, "report", wire.OpOpen, wire.Held{Key: b.Key, Token: b.Token})
	require.Nil(t, open.Error)
	chunk := make([]byte, wire.ChunkSize)
	var refused *wire.Reply
	for seq := 0; seq < 6 && refused == nil; seq++ {
		if r := tb.chunk(t, credA, "report", open.Upload, seq, chunk, false); r.Error != nil {
			refused = r
		}
	}
	require.NotNil(t, refused)
	require.Equal(t, wire.CodeTooLarge, refused.Error.Code)
}

// What the job's owner reads of a failure is jobgate's message unless the
// worker wrote one for users; its own text goes to the operator only.
func TestFailureMessagesForTheOwner(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "flaky", "text/plain").Error)
	rec := tb.admit(t, "flaky", "f-1")
	a := tb.next(t, credA, "flaky", "worker-a")
	r := tb.ask(t, credA, "flaky", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: a.Key, Token: a.Token},
		Kind: wire.KindError, Message: "dial tcp 10.1.2.3:5432: connection refused"})
	require.Nil(t, r.Error)
	retry := tb.record(t, rec.Key())
	require.Equal(t, job.StateRunning, retry.State)
	require.NotNil(t, retry.RetryAt, "retried while attempts remain")
	require.Equal(t, job.CategoryHandlerError, retry.Error.Category)
	require.NotContains(t, retry.Error.Message, "10.1.2.3")
	require.NotEmpty(t, retry.Attempts)
	last := retry.Attempts[len(retry.Attempts)-1]
	require.Equal(t, "dial tcp 10.1.2.3:5432: connection refused", last.Error.Message, "the operator reads the cause")

	b := tb.next(t, credA, "flaky", "worker-a")
	require.Equal(t, 2, b.Attempt)
	r = tb.ask(t, credA, "flaky", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: b.Key, Token: b.Token},
		Kind: wire.KindPermanent, Message: "internal detail", UserMessage: "case 47 has no revision 29"})
	require.Nil(t, r.Error)
	failed := tb.record(t, rec.Key())
	require.Equal(t, job.StateFailed, failed.State)
	require.Equal(t, "case 47 has no revision 29", failed.Error.Message)
}

// Requests of one credential past its rate are answered throttled.
func TestACredentialsRequestsAreRateLimited(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	cfg := testConfig()
	cfg.Rate, cfg.Burst = 1, 3
	conn := env.Connect(t, "broker")
	b, err := New(cfg, storesOf(conn), nil)
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	stopAtCleanup(t, b)
	throttled := 0
	for range 6 {
		r := tb.ask(t, credA, "nothing", wire.OpHello, wire.HelloRequest{Worker: "w", Concurrency: 1})
		if r.Error != nil && r.Error.Code == wire.CodeThrottled {
			throttled++
		}
	}
	require.GreaterOrEqual(t, throttled, 2)
	r := tb.ask(t, credB, "nothing", wire.OpHello, wire.HelloRequest{Worker: "w", Concurrency: 1})
	require.NotEqual(t, wire.CodeThrottled, r.Error.Code, "another credential is not slowed")
	_ = time.Second
}

// While no broker ran, a worker's beats had nowhere to go: a broker that
// starts gives a claim StaleAfter to beat again before it takes the job
// over, so a dispatcher's restart costs no job an attempt.
func TestABrokerThatStartsGivesClaimsTimeToBeatAgain(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	jobtest.DeclareTypes(t, tb.conn.Res, jobtest.PermitReport())
	long := time.Now().UTC().Add(-time.Hour)
	rec := env.CommitAs(t, tb.conn.Res, jobtest.Request{Key: "held-through-a-restart"}, func(r *job.Record) {
		r.State, r.Attempt, r.Worker, r.StartedAt, r.HeartbeatAt = job.StateRunning, 1, "worker-old", &long, &long
	})
	require.NoError(t, tb.conn.Res.Work.Publish(context.Background(), rec, 0))
	b := tb.broker(t, true)
	r := tb.ask(t, wire.JobgateCredential, "permit_report", wire.OpNext, wire.NextRequest{Worker: "worker-new", WaitMS: 1500})
	require.Nil(t, r.Error)
	require.Nil(t, r.Job, "the claim is not taken within StaleAfter of the broker's start")
	require.Equal(t, rec.Revision, tb.record(t, rec.Key()).Revision)
	require.Less(t, time.Since(b.started), b.cfg.StaleAfter, "the test asked within StaleAfter")
	a := tb.next(t, wire.JobgateCredential, "permit_report", "worker-new")
	require.Equal(t, 2, a.Attempt, "then it is taken over")
}

// One credential cannot flood the workers bucket with made-up processes,
// nor hold every upload slot.
func TestACredentialsPresenceAndUploadsAreBounded(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	cfg := testConfig()
	cfg.MaxWorkers, cfg.MaxUploadsPer = 3, 1
	conn := env.Connect(t, "broker")
	b, err := New(cfg, storesOf(conn), nil)
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	stopAtCleanup(t, b)
	require.Nil(t, tb.declare(t, credA, "bounded", "text/plain").Error)
	for i := range 3 {
		r := tb.ask(t, credA, "bounded", wire.OpHello, wire.HelloRequest{Worker: "w" + itoa(i), Concurrency: 1})
		require.Nil(t, r.Error)
	}
	r := tb.ask(t, credA, "bounded", wire.OpHello, wire.HelloRequest{Worker: "w9", Concurrency: 1})
	require.Equal(t, wire.CodeThrottled, r.Error.Code)
	r = tb.ask(t, credA, "bounded", wire.OpHello, wire.HelloRequest{Worker: "w1", Concurrency: 1})
	require.Nil(t, r.Error, "a known process announces itself again")

	tb.admit(t, "bounded", "u-1")
	tb.admit(t, "bounded", "u-2")
	a1, a2 := tb.next(t, credA, "bounded", "w0"), tb.next(t, credA, "bounded", "w1")
	require.Nil(t, tb.ask(t, credA, "bounded", wire.OpOpen, wire.Held{Key: a1.Key, Token: a1.Token}).Error)
	r = tb.ask(t, credA, "bounded", wire.OpOpen, wire.Held{Key: a2.Key, Token: a2.Token})
	require.Equal(t, wire.CodeThrottled, r.Error.Code)
}

// A done sent again (its first answer lost, or late: a paused broker) may
// reach another broker while the first is still writing: the job succeeds
// once, both are answered ok, and the result it names stays in the store
// (the chaos run of seed 267244213 found two succeeded jobs whose result
// the losing write had deleted).
func TestADoneSentTwiceKeepsItsResult(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	b1, b2 := tb.broker(t, false), tb.broker(t, false)
	require.Nil(t, tb.declareWith(t, b1, credA, "twice").Error)
	tb.admit(t, "twice", "d-1")
	s, err := b1.sched(context.Background(), "twice")
	require.NoError(t, err)
	var a *wire.Assignment
	for a == nil {
		t1, l, seq := s.pick(time.Now(), nil)
		require.NotNil(t, t1)
		msg, err := s.read(context.Background(), t1, l, seq)
		require.NoError(t, err)
		if msg != nil {
			d, _ := b1.decl(context.Background(), credA, "twice")
			a = b1.handle(context.Background(), s, d, msg, "w", true)
		}
	}
	held := wire.Held{Key: a.Key, Token: a.Token}
	stored := tb.upload(t, b1, credA, "twice", held, []byte("the result"))
	req := &request{cred: credA, typ: "twice", msg: mustMsg(t, wire.DoneRequest{Held: held, Result: stored})}
	var second *wire.Reply
	var once sync.Once
	b1.beforeWrite = func(string) { once.Do(func() { second = b2.done(context.Background(), req) }) }
	first := b1.done(context.Background(), req)
	require.Nil(t, first.Error, "%v", first.Error)
	require.Nil(t, second.Error, "%v", second.Error)
	rec := tb.record(t, a.Key)
	require.Equal(t, job.StateSucceeded, rec.State)
	size, _, err := tb.conn.Res.ResultInfo(context.Background(), rec.Output.Object)
	require.NoError(t, err, "the result is still stored")
	require.EqualValues(t, len("the result"), size)
}

// A broker handles a bounded number of requests at once, whatever the
// number of credentials: past it a request is answered throttled.
func TestABrokersRequestsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	cfg := testConfig()
	cfg.MaxInFlight = 1
	conn := env.Connect(t, "broker")
	b, err := New(cfg, storesOf(conn), nil)
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	stopAtCleanup(t, b)
	require.Nil(t, tb.declare(t, credA, "held", "text/plain").Error)
	// A next request with no work is held for its wait.
	held := make(chan *wire.Reply, 1)
	go func() { held <- tb.ask(t, credA, "held", wire.OpNext, wire.NextRequest{Worker: "w", WaitMS: 3000}) }()
	require.Eventually(t, func() bool { return len(b.inFlight) == 1 }, 5*time.Second, 5*time.Millisecond)
	r := tb.ask(t, credB, "held", wire.OpHello, wire.HelloRequest{Worker: "w", Concurrency: 1})
	require.Equal(t, wire.CodeThrottled, r.Error.Code)
	require.Nil(t, (<-held).Error)
}
