package broker

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/stretchr/testify/require"
)

// nextVia asks broker b itself (not the queue group) for work of typ.
func nextVia(t *testing.T, b *Broker, cred, typ, worker string, wait time.Duration) *wire.Reply {
	t.Helper()
	return b.next(context.Background(), &request{cred: cred, typ: typ,
		msg: mustMsg(t, wire.NextRequest{Worker: worker, WaitMS: wait.Milliseconds()})})
}

// sees waits until b's view of typ's declaration is paused (or not).
func sees(t *testing.T, b *Broker, typ string, paused bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		c, ok := b.decls[typ]
		return ok && c.d.Paused == paused
	}, 10*time.Second, 10*time.Millisecond, "broker never saw %s paused=%v", typ, paused)
}

func setPaused(t *testing.T, tb *testBundle, typ string, paused bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := tb.conn.Res.Types.SetPaused(ctx, typ, paused)
	require.NoError(t, err)
	require.Equal(t, paused, d.Paused)
}

func storedPaused(t *testing.T, tb *testBundle, typ string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := tb.conn.Res.Types.Get(ctx, typ)
	require.NoError(t, err)
	return d.Paused
}

// A paused type's job waits queued on every broker while live workers ask
// for work, a worker's re-declaration keeps the pause, and the resume
// starts the job at once.
func TestAPausedTypeStartsNothingOnAnyBrokerUntilResumed(t *testing.T) {
	t.Parallel()
	b1, tb := setup(t)
	b2 := tb.broker(t, true)
	require.Nil(t, tb.declare(t, credA, "paused_t", "text/plain").Error)
	// Both brokers schedule the type (and watch the declarations) before
	// the pause: the watch, not a first read, must bring it to them.
	for _, b := range []*Broker{b1, b2} {
		r := nextVia(t, b, credA, "paused_t", "w-warm", 200*time.Millisecond)
		require.Nil(t, r.Error)
		require.Nil(t, r.Job)
	}
	setPaused(t, tb, "paused_t", true)
	sees(t, b1, "paused_t", true)
	sees(t, b2, "paused_t", true)

	rec := tb.admit(t, "paused_t", "p-1")
	for _, b := range []*Broker{b1, b2, b1} {
		r := nextVia(t, b, credA, "paused_t", "w-1", 1500*time.Millisecond)
		require.Nil(t, r.Error)
		require.Nil(t, r.Job, "a paused type's job was handed out")
	}
	require.Equal(t, job.StateQueued, tb.record(t, rec.Key()).State)

	// The worker declares its type again (a restart): the pause stays.
	require.Nil(t, tb.declare(t, credA, "paused_t", "text/plain").Error)
	require.True(t, storedPaused(t, tb, "paused_t"), "a re-declaration cleared the pause")
	r := nextVia(t, b2, credA, "paused_t", "w-1", 1200*time.Millisecond)
	require.Nil(t, r.Error)
	require.Nil(t, r.Job)
	require.Equal(t, job.StateQueued, tb.record(t, rec.Key()).State)

	setPaused(t, tb, "paused_t", false)
	a := tb.next(t, credA, "paused_t", "w-1")
	require.Equal(t, rec.Key(), a.Key)
	require.Equal(t, 1, a.Attempt)
}

// A request already waiting when the type is resumed is woken by it: it
// gets the job within its wait, not a wait later.
func TestAResumeWakesAWaitingRequest(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "woken_t", "text/plain").Error)
	setPaused(t, tb, "woken_t", true)
	rec := tb.admit(t, "woken_t", "w-1")
	r := nextVia(t, b, credA, "woken_t", "w-1", 300*time.Millisecond)
	require.Nil(t, r.Job)
	sees(t, b, "woken_t", true)

	got := make(chan *wire.Reply, 1)
	req := &request{cred: credA, typ: "woken_t", msg: mustMsg(t, wire.NextRequest{Worker: "w-1", WaitMS: 8000})}
	go func() { got <- b.next(context.Background(), req) }()
	// The request is held, paused; a look at the record proves nothing
	// was claimed meanwhile.
	require.Equal(t, job.StateQueued, tb.record(t, rec.Key()).State)
	setPaused(t, tb, "woken_t", false)
	resumed := time.Now()
	select {
	case r := <-got:
		require.Nil(t, r.Error)
		require.NotNil(t, r.Job)
		require.Equal(t, rec.Key(), r.Job.Key)
		require.Less(t, time.Since(resumed), pausedWake-time.Second,
			"the resume did not wake the request: it waited for its next look")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request never got the resumed job")
	}
}

// A job that runs when its type is paused goes on and succeeds.
func TestARunningJobOfAPausedTypeFinishes(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "busy_t", "text/plain").Error)
	rec := tb.admit(t, "busy_t", "b-1")
	a := tb.next(t, credA, "busy_t", "w-1")
	setPaused(t, tb, "busy_t", true)
	held := wire.Held{Key: a.Key, Token: a.Token}
	require.Nil(t, tb.ask(t, credA, "busy_t", wire.OpBeat, wire.BeatRequest{Held: held}).Error)
	require.Nil(t, tb.ask(t, credA, "busy_t", wire.OpDone, wire.DoneRequest{Held: held}).Error)
	require.Equal(t, job.StateSucceeded, tb.record(t, rec.Key()).State)
}

// An operator's delete frees the name: another credential declares it, and
// the first credential's worker is refused from then on.
func TestADeletedTypeIsFreeForAnotherCredential(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "freed_t", "text/plain").Error)
	r := tb.declare(t, credB, "freed_t", "text/plain")
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeForbidden, r.Error.Code)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tb.conn.Res.Types.DeleteType(ctx, "freed_t", func(*job.TypeDecl) error { return nil }))
	require.Nil(t, tb.declare(t, credB, "freed_t", "text/plain").Error)
	d, err := tb.conn.Res.Types.Get(ctx, "freed_t")
	require.NoError(t, err)
	require.Equal(t, credB, d.Owner)
	require.False(t, d.Paused)
	r = tb.declare(t, credA, "freed_t", "text/plain")
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeForbidden, r.Error.Code)
}

// hello stores the credential and the busy slots a worker says it has;
// a busy count out of bounds is refused.
func TestHelloStoresCredentialAndBusy(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "hello_t", "text/plain").Error)
	busy := 2
	r := tb.ask(t, credA, "hello_t", wire.OpHello, wire.HelloRequest{Worker: "w-9", Concurrency: 4, StartedAt: time.Now(), Busy: &busy})
	require.Nil(t, r.Error)
	bad := wire.MaxBusy + 1
	r = tb.ask(t, credA, "hello_t", wire.OpHello, wire.HelloRequest{Worker: "w-9", Concurrency: 4, StartedAt: time.Now(), Busy: &bad})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeBadRequest, r.Error.Code)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan natsjs.Presence, 16)
	require.NoError(t, tb.conn.Res.Types.WatchWorkers(ctx, func(key string, p *natsjs.Presence) {
		if key == "hello_t.w-9" && p != nil {
			got <- *p
		}
	}))
	select {
	case p := <-got:
		require.Equal(t, credA, p.Credential)
		require.Equal(t, 4, p.Concurrency)
		require.NotNil(t, p.Busy)
		require.Equal(t, 2, *p.Busy)
	case <-ctx.Done():
		t.Fatal("no presence stored")
	}
}
