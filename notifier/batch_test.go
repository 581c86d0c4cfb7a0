package notifier

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// testBatch is a batch stored as the gateway stores one: its record and
// its items' job records, queued.
type testBatch struct {
	b   *testBundle
	rec *job.BatchRecord
}

// storeBatch commits a batch of n items of reviewer-47 with the notice
// choice notify and admits its items.
func (b *testBundle) storeBatch(t *testing.T, id string, n int, notify string) *testBatch {
	t.Helper()
	return b.storeBatchWith(t, id, n, notify, nil)
}

// storeBatchWith is storeBatch with the batch record changed by edit first.
func (b *testBundle) storeBatchWith(t *testing.T, id string, n int, notify string, edit func(*job.BatchRecord)) *testBatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := &job.BatchRecord{ID: id, Tenant: "4", Requester: "reviewer-47", KeyHash: "kh", Fingerprint: "fp", CreatedAt: now, Notify: notify}
	for i := range n {
		rec.Items = append(rec.Items, job.BatchItem{JobID: "job_" + id[4:] + strconv.Itoa(i), Type: "permit_report",
			Params: json.RawMessage(`{"case_id":47}`), Fingerprint: "f" + strconv.Itoa(i)})
	}
	if edit != nil {
		edit(rec)
	}
	require.NoError(t, b.res.Batches.Create(ctx, rec))
	_, err := natsjs.AdmitItems(ctx, b.res.Jobs, rec, nil)
	require.NoError(t, err)
	return &testBatch{b: b, rec: rec}
}

// end moves item i through running to state in its record and publishes
// the terminal change's event, as the dispatcher does.
func (tb *testBatch) end(t *testing.T, i int, state job.State) *job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	key := job.StoreKey(tb.rec.Tenant, tb.rec.Requester, tb.rec.Items[i].JobID)
	r, err := tb.b.res.Jobs.Mutate(ctx, key, func(r *job.Record) error {
		r.Attempt = 1
		if err := r.Transition(job.StateRunning, time.Now()); err != nil {
			return err
		}
		if err := r.Transition(state, time.Now()); err != nil {
			return err
		}
		switch state {
		case job.StateSucceeded:
			r.Output = &job.Output{Object: r.ID, ContentType: "application/pdf", Size: 100, SHA256: strings.Repeat("ab", 32)}
		case job.StateFailed:
			r.Error = &job.Failure{Category: job.CategoryRenderError, Message: "page 3 did not render"}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, tb.rec.ID, r.Batch, "the item's record names its batch")
	require.NoError(t, natsjs.PublishEvent(ctx, tb.b.res.JS, r))
	return r
}

// publishCopy publishes r's event again under another message id, headers
// and all: a second copy JetStream's de-duplication does not catch.
func (tb *testBatch) publishCopy(t *testing.T, r *job.Record, suffix string) {
	t.Helper()
	data, err := json.Marshal(r.Resource("", r.UpdatedAt))
	require.NoError(t, err)
	msg := &nats.Msg{Subject: natsjs.EventSubject(r.Tenant, r.Requester, r.ID), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, natsjs.EventMsgID(r)+suffix)
	msg.Header.Set(natsjs.HeaderBatch, r.Batch)
	if r.BatchNotify != "" {
		msg.Header.Set(natsjs.HeaderBatchNotify, r.BatchNotify)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err = tb.b.res.JS.PublishMsg(ctx, msg)
	require.NoError(t, err)
}

func batchConfig(rcv *receiver, sink *jobtest.SMTPSink, instance string) Config {
	cfg := smtpConfig(sink, instance)
	cfg.BaseURL = "http://jobs.example.test"
	cfg.Webhooks = map[string][]Webhook{"4": {{URL: rcv.srv.URL + "/hooks", Secret: testSecret}}}
	cfg.AllowPrivate = true
	return cfg
}

// quiet waits until the instances acknowledged events events and settled
// settle tasks, and nothing is left queued at any destination.
func quiet(t *testing.T, b *testBundle, events, settle int64, ns ...*Notifier) {
	t.Helper()
	require.Eventually(t, func() bool {
		if eventsAcked(ns...) != events || settled(ns...) != settle {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for _, d := range ns[0].dests {
			if p, err := b.res.Deliveries.Pending(ctx, d.id); err != nil || p != 0 {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond)
}

type batchPayload struct {
	Type string      `json:"type"`
	Data batchNotice `json:"data"`
}

// mailText reads a received mail's subject and decoded body.
func mailText(t *testing.T, m jobtest.Mail) (string, string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(m.Data))
	require.NoError(t, err)
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	require.NoError(t, err)
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	return subject, string(body)
}

func TestBatchEndIsOneWebhookAndOneMailEvenAcrossARestart(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusNoContent))
	sink := jobtest.NewSMTPSink(t)
	first, b := setup(t, batchConfig(rcv, sink, "first"))
	tb := b.storeBatch(t, "bat_aaaaaaaaaaaaaaaaaaaaaaaaaa", 5, "")
	states := []job.State{job.StateSucceeded, job.StateSucceeded, job.StateFailed, job.StateSucceeded, job.StateCanceled}
	for i := range 4 {
		tb.end(t, i, states[i])
	}
	quiet(t, b, 4, 0, first)
	require.Zero(t, rcv.count(), "no notice per job, none before the batch's end")
	require.Empty(t, sink.Received())

	// The notifier goes away; the last job ends meanwhile; another comes.
	require.NoError(t, first.Stop(context.Background()))
	last := tb.end(t, 4, states[4])
	second := b.start(t, batchConfig(rcv, sink, "second"))
	quiet(t, b, 1, 2, second)

	got := rcv.deliveries()
	require.Len(t, got, 1, "one webhook for the batch, none per job")
	id, _ := verify(t, got[0])
	require.Equal(t, batchEventID(tb.rec.ID, tb.rec.CreatedAt), id)
	var p batchPayload
	require.NoError(t, json.Unmarshal(got[0].body, &p))
	require.Equal(t, "batch.completed", p.Type)
	require.Equal(t, tb.rec.ID, p.Data.ID)
	require.Equal(t, 5, p.Data.Total)
	require.Equal(t, batchCounts{Succeeded: 3, Failed: 1, Canceled: 1}, p.Data.Counts)
	require.Len(t, p.Data.Jobs, 5)
	for i, j := range p.Data.Jobs {
		require.Equal(t, tb.rec.Items[i].JobID, j.ID)
		require.Equal(t, states[i], j.State)
	}
	require.Equal(t, last.FinishedAt.UTC(), p.Data.FinishedAt.UTC())

	mails := sink.Received()
	require.Len(t, mails, 1, "one mail for the batch, none per job")
	require.Equal(t, map[string]int{tb.rec.ID + ".completed@jobgate": 1}, sink.MessageIDs())
	subject, body := mailText(t, mails[0])
	require.Contains(t, subject, tb.rec.ID)
	require.Contains(t, subject, "3 succeeded, 1 failed, 1 canceled")
	for i, it := range tb.rec.Items {
		line := ""
		for l := range strings.SplitSeq(body, "\n") {
			if strings.HasPrefix(l, it.JobID) {
				line = l
			}
		}
		require.NotEmpty(t, line, "the mail lists %s", it.JobID)
		require.Contains(t, line, string(states[i]))
		require.Contains(t, line, "http://jobs.example.test/#job="+it.JobID, "the job's own mail link")
	}
}

func TestBatchNotifiedEachIsFiveJobNoticesAndNoBatchOne(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusNoContent))
	sink := jobtest.NewSMTPSink(t)
	n, b := setup(t, batchConfig(rcv, sink, "each"))
	tb := b.storeBatch(t, "bat_bbbbbbbbbbbbbbbbbbbbbbbbbb", 5, job.NotifyEach)
	for i := range 5 {
		tb.end(t, i, job.StateSucceeded)
	}
	quiet(t, b, 5, 10, n)
	got := rcv.deliveries()
	require.Len(t, got, 5)
	seen := map[string]bool{}
	for _, d := range got {
		var p struct {
			Type string       `json:"type"`
			Data job.Resource `json:"data"`
		}
		require.NoError(t, json.Unmarshal(d.body, &p))
		require.Equal(t, "job.succeeded", p.Type)
		seen[p.Data.ID] = true
	}
	require.Len(t, seen, 5)
	ids := sink.MessageIDs()
	require.Len(t, ids, 5)
	for _, it := range tb.rec.Items {
		require.Equal(t, 1, ids[it.JobID+".succeeded@jobgate"])
	}
}

func TestBatchNoticeOnceWhenInstancesRaceAndEventsAreRedelivered(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusNoContent))
	sink := jobtest.NewSMTPSink(t)
	first, b := setup(t, batchConfig(rcv, sink, "first"))
	second := b.start(t, batchConfig(rcv, sink, "second"))
	tb := b.storeBatch(t, "bat_cccccccccccccccccccccccccc", 5, "")
	var ended []*job.Record
	for i := range 5 {
		ended = append(ended, tb.end(t, i, job.StateSucceeded))
	}
	// Every item's end told again under other message ids, on both
	// instances at once: each copy sees the batch done.
	for _, r := range ended {
		tb.publishCopy(t, r, ".copy1")
		tb.publishCopy(t, r, ".copy2")
	}
	quiet(t, b, 15, 2, first, second)
	require.Equal(t, 1, rcv.count())
	require.Len(t, sink.Received(), 1)

	// A crash before the acks: every event is delivered again, to a fresh
	// instance.
	require.NoError(t, first.Stop(context.Background()))
	require.NoError(t, second.Stop(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, b.res.JS.DeleteConsumer(ctx, natsjs.StreamEvents, natsjs.NotifierConsumerName("4")))
	third := b.start(t, batchConfig(rcv, sink, "third"))
	quiet(t, b, 15, 0, third)
	require.Equal(t, 1, rcv.count(), "still one webhook")
	require.Len(t, sink.Received(), 1, "still one mail")
}
