package notifier

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// memNotices is a notice store in memory whose Get can be made to fail: the
// notifier depends on the small interface it declares, so a test stubs one
// method without a JetStream server.
type memNotices struct {
	mu     sync.Mutex
	m      map[string][]byte
	getErr error
}

func (s *memNotices) Get(_ context.Context, key string) ([]byte, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getErr != nil {
		return nil, 0, s.getErr
	}
	v, ok := s.m[key]
	if !ok {
		return nil, 0, job.ErrNotFound
	}
	return v, 1, nil
}

func (s *memNotices) Put(_ context.Context, key string, v []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = v
	return 1, nil
}

func (s *memNotices) Create(_ context.Context, key string, v []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		return 0, natsjs.ErrExists
	}
	s.m[key] = v
	return 1, nil
}

func (s *memNotices) Update(ctx context.Context, key string, v []byte, _ uint64) (uint64, error) {
	return s.Put(ctx, key, v)
}

func (s *memNotices) Delete(_ context.Context, key string, _ uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// A notice store that does not answer costs no delivery attempt: the event
// is tried again soon, and the receiver hears nothing meanwhile.
func TestNoticeStoreOutageIsNotAnAttempt(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusNoContent))
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	store := &memNotices{m: map[string][]byte{}, getErr: fmt.Errorf("%w: no responders", job.ErrUnavailable)}
	n, err := newNotifier(Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}},
		AllowPrivate: true,
		Now:          func() time.Time { return now },
	}, Stores{Notices: store}, nil)
	require.NoError(t, err)
	ep := n.endpoints["4"][0]
	r := record("4", "reviewer-47", "job_outage", job.StateSucceeded)
	ev := &event{ID: natsjs.EventMsgID(r), Tenant: "4", Requester: "reviewer-47", Job: r.Resource("", now)}
	body, err := ev.webhookBody()
	require.NoError(t, err)

	o := n.runWebhook(context.Background(), ep, ev, body)
	require.False(t, o.done)
	require.Equal(t, now.Add(transientDelay), o.due, "retried after the transient delay, on the injected clock")
	require.Zero(t, rcv.count(), "nothing was sent")

	store.mu.Lock()
	store.getErr = nil
	store.mu.Unlock()
	o = n.runWebhook(context.Background(), ep, ev, body)
	require.True(t, o.done)
	require.Equal(t, 1, rcv.count())
	st, err := loadState(context.Background(), store, ev.webhookKey(ep.id))
	require.NoError(t, err)
	require.Equal(t, statusDelivered, st.Status)
	require.Equal(t, 1, st.Attempts, "the outage did not count as an attempt")
	require.Equal(t, now, st.UpdatedAt)
}

// Every store is required: New names the one missing, also when it is a
// nil adapter (what mapping resources without batches would give).
func TestNewNamesAMissingStore(t *testing.T) {
	t.Parallel()
	_, err := New(Config{}, Stores{}, nil)
	require.EqualError(t, err, "notifier: Stores.Events is nil: every field is required")
	st := Stores{Events: &natsjs.EventStream{}, Deliveries: &natsjs.Deliveries{}, Notices: &natsjs.Notices{}, Jobs: &natsjs.Store{},
		Batches: (*natsjs.BatchStore)(nil)}
	_, err = New(Config{}, st, nil)
	require.EqualError(t, err, "notifier: Stores.Batches is nil: every field is required")
	st.Batches = &natsjs.BatchStore{}
	_, err = New(Config{}, st, nil)
	require.NoError(t, err)
}
