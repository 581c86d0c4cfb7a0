package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A chunk of a result whose acknowledgement never comes (it went to a
// stream leader that was lost with it, as when a NATS node is killed or
// frozen mid-upload) does not hold the upload until its deadline, nor give
// the job back: the worker stores the result again, and the job succeeds
// in its first attempt, its handler run once, with one result object that
// holds exactly what the handler wrote.
func TestResultUploadSurvivesALostChunkAcknowledgement(t *testing.T) {
	env := jobtest.Start(t)
	admin := env.Connect(t, "admin")
	chunks := "$O." + natsjs.BucketResults + ".C.>"

	// The results stream stops taking chunks; a subscriber takes them
	// instead and never answers. When it has taken the first, the stream
	// takes chunks again.
	setChunks := func(take bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := admin.Res.JS.Stream(ctx, "OBJ_"+natsjs.BucketResults)
		require.NoError(t, err)
		cfg := s.CachedInfo().Config
		cfg.Subjects = []string{"$O." + natsjs.BucketResults + ".M.>"}
		if take {
			cfg.Subjects = append(cfg.Subjects, chunks)
		}
		_, err = admin.Res.JS.UpdateStream(ctx, cfg)
		require.NoError(t, err)
	}
	setChunks(false)
	var once sync.Once
	lost := make(chan struct{})
	sub, err := admin.NC.Subscribe(chunks, func(*nats.Msg) { once.Do(func() { close(lost) }) })
	require.NoError(t, err)
	require.NoError(t, admin.NC.Flush())
	restored := make(chan struct{})
	go func() {
		defer close(restored)
		select {
		case <-lost:
		case <-time.After(30 * time.Second):
			return
		}
		_ = sub.Unsubscribe()
		setChunks(true)
	}()

	output := bytes.Repeat([]byte("%PDF lost acknowledgement "), 12000) // 312 kB: three chunks
	r := newRuns()
	_, conn := startWorkers(t, env, "w-lost-ack", 1, nil, func(ctx context.Context, j *worker.Job[permitParams]) error {
		r.begin(j.Tenant, j.ID)
		defer r.end(j.Tenant)
		_, err := j.Output().Write(output)
		return err
	})
	rec := env.Admit(t, conn.Res, jobtest.Request{Key: "lost-ack"})

	start := time.Now()
	done := jobtest.Terminal(t, admin.Res, rec.Key(), 30*time.Second)
	t.Logf("job %s %s after %s", done.ID, done.State, time.Since(start).Round(time.Millisecond))
	select {
	case <-lost:
	default:
		require.FailNow(t, "no chunk went astray: the test did not test anything")
	}
	<-restored
	require.Equal(t, job.StateSucceeded, done.State, "last error %+v", done.Error)
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, 1, r.of(done.ID), "the handler ran once")
	require.NotNil(t, done.Output)
	require.Equal(t, done.ID+".a1", done.Output.Object)
	require.Equal(t, []string{done.Output.Object}, jobtest.Objects(t, admin.Res), "one result object")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := admin.Res.Files.Open(ctx, done.Output.Object)
	require.NoError(t, err)
	defer f.Close()
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, output, got)
	sum := sha256.Sum256(output)
	require.Equal(t, hex.EncodeToString(sum[:]), done.Output.SHA256)
	require.Equal(t, int64(len(output)), done.Output.Size)
}
