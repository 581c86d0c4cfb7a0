// Package jobtest holds test helpers shared by the worker packages' tests:
// a real embedded JetStream per test, connections with provisioned
// resources, admission exactly as the gateway does it (create-only record,
// then the generation-0 work message), and polling for a job's state. It
// is imported by tests only.
package jobtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Env is one embedded JetStream server living as long as its test.
type Env struct {
	Emb    *natsserver.Embedded
	Secret []byte
}

// Start runs an embedded JetStream with file storage in a temp dir.
func Start(t testing.TB) *Env {
	t.Helper()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	return &Env{Emb: emb, Secret: []byte("jobtest-secret")}
}

// Conn is one client connection with the deployment's resources on it.
type Conn struct {
	NC  *nats.Conn
	Res *natsjs.Resources
}

// Connect opens a connection of its own (so a test can cut one component
// off, as a crash would) and provisions the default layout on it.
func (e *Env) Connect(t testing.TB, name string) *Conn {
	t.Helper()
	return e.ConnectLayout(t, name, natsjs.DefaultLayout())
}

// ConnectLayout is Connect with a layout of the test's own (a short job
// TTL, say); every connection of one Env must use the same.
func (e *Env) ConnectLayout(t testing.TB, name string, layout natsjs.Layout) *Conn {
	t.Helper()
	nc, err := e.Emb.Connect(name)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := natsjs.Provision(ctx, js, layout)
	require.NoError(t, err)
	return &Conn{NC: nc, Res: res}
}

// Request is a permit_report submission.
type Request struct {
	Tenant, Requester, Key string
	CaseID, Revision       int
	Pages                  int
}

// Commit writes the job record the way the gateway's admission does (one
// create-only write, state queued) without publishing its work: what a
// gateway that crashed right after its commit leaves behind.
func (e *Env) Commit(t testing.TB, res *natsjs.Resources, r Request) *job.Record {
	t.Helper()
	return e.CommitAs(t, res, r, nil)
}

// CommitAs commits a record that edit has first changed, as if the job had
// come that far: a test starts from a running or failed job without its
// queued version ever being stored.
func (e *Env) CommitAs(t testing.TB, res *natsjs.Resources, r Request, edit func(*job.Record)) *job.Record {
	t.Helper()
	if r.Tenant == "" {
		r.Tenant = "4"
	}
	if r.Requester == "" {
		r.Requester = "reviewer-47"
	}
	if r.CaseID == 0 {
		r.CaseID = 47
	}
	if r.Revision == 0 {
		r.Revision = 29
	}
	params := map[string]any{"case_id": r.CaseID, "revision": r.Revision}
	if r.Pages != 0 {
		params["pages"] = r.Pages
	}
	body, err := json.Marshal(map[string]any{"type": "permit_report", "params": params})
	require.NoError(t, err)
	req, err := job.DecodeSubmission(body, PermitTypes(t))
	require.NoError(t, err)
	now := time.Now().UTC()
	rec := &job.Record{
		ID: job.DeriveID(e.Secret, r.Tenant, r.Requester, r.Key), Tenant: r.Tenant, Requester: r.Requester,
		KeyHash: job.HashKey(r.Key), Fingerprint: req.Fingerprint, Type: req.Type, Params: req.Params,
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now,
	}
	if edit != nil {
		edit(rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, res.Jobs.Create(ctx, rec))
	return rec
}

// Admit is the gateway's admission: Commit, then the generation-0 work
// message.
func (e *Env) Admit(t testing.TB, res *natsjs.Resources, r Request) *job.Record {
	t.Helper()
	return e.AdmitAs(t, res, r, nil)
}

// AdmitAs is Admit of a record that edit has first changed (CommitAs):
// a job admitted with fields a Request does not set, its priority say.
func (e *Env) AdmitAs(t testing.TB, res *natsjs.Resources, r Request, edit func(*job.Record)) *job.Record {
	t.Helper()
	rec := e.CommitAs(t, res, r, edit)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, natsjs.PublishWork(ctx, res.JS, rec, 0))
	return rec
}

// WaitFor polls the job until cond holds and returns it; it fails the test
// at the deadline with the last record seen.
func WaitFor(t testing.TB, res *natsjs.Resources, key string, timeout time.Duration, cond func(*job.Record) bool) *job.Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *job.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := res.Jobs.Get(ctx, key)
		cancel()
		if err == nil {
			last = r
			if cond(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(last)
			require.FailNowf(t, "job did not reach the expected state", "after %s; last record: %s", timeout, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Terminal waits for the job to reach a terminal state.
func Terminal(t testing.TB, res *natsjs.Resources, key string, timeout time.Duration) *job.Record {
	t.Helper()
	return WaitFor(t, res, key, timeout, func(r *job.Record) bool { return r.State.Terminal() })
}

// Event is one message on JOBGATE_EVENTS.
type Event struct {
	MsgID    string
	Resource job.Resource
}

// Events returns what landed on the job's event subject, in stream order.
func Events(t testing.TB, res *natsjs.Resources, rec *job.Record) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := res.JS.OrderedConsumer(ctx, natsjs.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{natsjs.EventSubject(rec.Tenant, rec.Requester, rec.ID)},
	})
	require.NoError(t, err)
	var out []Event
	for {
		msgs, err := c.FetchNoWait(100)
		require.NoError(t, err)
		n := 0
		for m := range msgs.Messages() {
			n++
			var e Event
			e.MsgID = m.Headers().Get(jetstream.MsgIDHeader)
			require.NoError(t, json.Unmarshal(m.Data(), &e.Resource))
			out = append(out, e)
		}
		if n == 0 {
			return out
		}
	}
}

// EventIDs lists the Nats-Msg-Ids of Events, sorted.
func EventIDs(events []Event) []string {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.MsgID
	}
	sort.Strings(ids)
	return ids
}

// WorkMessages counts the messages left in the work queue.
func WorkMessages(t testing.TB, res *natsjs.Resources) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := res.JS.Stream(ctx, natsjs.StreamWork)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	return info.State.Msgs
}

// Objects lists the names of the stored result objects.
func Objects(t testing.TB, res *natsjs.Resources) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	infos, err := res.Results.List(ctx)
	if err != nil && err != jetstream.ErrNoObjectsFound {
		require.NoError(t, err)
	}
	names := make([]string, 0, len(infos))
	for _, i := range infos {
		names = append(names, i.Name)
	}
	sort.Strings(names)
	return names
}

// ID is a short unique key for a test's jobs.
func ID(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// History collects every version of one job record a watch delivers, so a
// test can assert on states that did not last (a watch is pushed each
// change as it is stored; polling could miss a short one).
type History struct {
	mu   sync.Mutex
	recs []*job.Record
}

// Watch starts collecting the versions of the record under key.
func Watch(t testing.TB, res *natsjs.Resources, key string) *History {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := res.Jobs.KV().Watch(ctx, key)
	require.NoError(t, err)
	h := &History{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if r, err := codec.UnmarshalRecord(e.Value(), e.Revision()); err == nil {
				h.mu.Lock()
				h.recs = append(h.recs, r)
				h.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); _ = w.Stop(); <-done })
	return h
}

// Find returns the first version seen that satisfies cond, or nil.
func (h *History) Find(cond func(*job.Record) bool) *job.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if cond(r) {
			return r
		}
	}
	return nil
}

// All returns the versions seen so far.
func (h *History) All() []*job.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*job.Record(nil), h.recs...)
}

// WorkIDs lists the Nats-Msg-Ids of the work messages stored for rec, in
// stream order. (A work queue admits no second consumer to look with, so
// this reads the stream directly.)
func WorkIDs(t testing.TB, res *natsjs.Resources, rec *job.Record) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := res.JS.Stream(ctx, natsjs.StreamWork)
	require.NoError(t, err)
	subject := natsjs.WorkSubjectOf(rec)
	var ids []string
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return ids
		}
		require.NoError(t, err)
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
		seq = m.Sequence + 1
	}
}

// States lists the states of events in stream order, a run of events of
// one state (progress) counted once.
func States(events []Event) []job.State {
	var out []job.State
	for _, e := range events {
		if len(out) == 0 || out[len(out)-1] != e.Resource.State {
			out = append(out, e.Resource.State)
		}
	}
	return out
}

// RequireOneIDPerRevision checks that every event's Nats-Msg-Id is
// <job id>.<revision> and that no two events share one.
func RequireOneIDPerRevision(t testing.TB, rec *job.Record, events []Event) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range events {
		rev, ok := natsjs.EventRevision(e.MsgID)
		require.True(t, ok && rev > 0 && e.MsgID == fmt.Sprintf("%s.%d", rec.ID, rev), "event id %q", e.MsgID)
		require.False(t, seen[e.MsgID], "event id %q twice", e.MsgID)
		seen[e.MsgID] = true
	}
}
