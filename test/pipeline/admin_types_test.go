package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

type pauseParams struct {
	N int `json:"n"`
}

// peek is call for a poll's condition, which runs on another goroutine:
// it fails nothing (status 0 when the request failed).
func peek(url, tok string) answer {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return answer{}
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	_ = json.NewDecoder(resp.Body).Decode(&a.body)
	return a
}

var pauseSchema = json.RawMessage(`{"type":"object","additionalProperties":false,
 "properties":{"n":{"type":"integer","minimum":0,"maximum":100}}}`)

// An operator's pause and delete through pkg/client against a live
// pkg/worker process (two brokers: the dispatcher's and the test's): the
// workers list shows the process with its type and slots; a job admitted
// while its type is paused stays queued while the worker keeps asking for
// work, the type cannot be deleted meanwhile (type-in-use), the resume
// runs it, and once it ended the delete takes the type away.
func TestAnOperatorPausesResumesAndDeletesATypeWithALiveWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base, tok := b.gateway(t)
	b.dispatcher(t, "dispatcher")
	opTok, err := auth.Mint([]byte("pipeline-test-secret-0123456789ab"), auth.Identity{Requester: "root", Operator: true}, time.Hour, time.Now())
	require.NoError(t, err)
	c, err := client.New(base, opTok)
	require.NoError(t, err)
	admin := c.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var runs atomic.Int32
	b.startWorkers(t, "pauser-1", func(w *worker.Workers) {
		require.NoError(t, worker.Register(w, worker.Type[pauseParams]{
			Name: "pausing", Schema: pauseSchema, ContentType: "text/plain", Concurrency: 3,
			Work: func(_ context.Context, j *worker.Job[pauseParams]) error {
				runs.Add(1)
				_, err := j.Output().Write([]byte("done"))
				return err
			},
		}))
	})
	require.Eventually(t, func() bool { return peek(base+"/v1/types/pausing", tok).status == http.StatusOK },
		10*time.Second, 20*time.Millisecond)

	// The process, from its hello: its type and slots, nothing busy.
	var proc api.AdminWorker
	require.Eventually(t, func() bool {
		p, err := admin.Workers(ctx, client.WorkerFilter{})
		if err != nil {
			return false
		}
		for _, w := range p.Workers {
			if w.Worker == "pauser-1" {
				proc = w // read by the test after Eventually returned
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)
	require.NotEmpty(t, proc.Credential)
	require.Equal(t, 3, proc.Slots)
	require.Len(t, proc.Types, 1)
	require.Equal(t, "pausing", proc.Types[0].Type)
	require.Equal(t, 3, proc.Types[0].Slots)
	require.NotNil(t, proc.Busy, "pkg/worker says how busy it is")
	require.Equal(t, 0, *proc.Busy)
	require.WithinDuration(t, time.Now(), proc.SeenAt, 30*time.Second)

	st, err := admin.PauseType(ctx, "pausing")
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Eventually(t, func() bool { return peek(base+"/v1/types/pausing", tok).body["paused"] == true },
		10*time.Second, 20*time.Millisecond)

	sub := call(t, "POST", base+"/v1/jobs", tok, "pz-1", `{"type":"pausing","params":{"n":1}}`)
	require.Equal(t, http.StatusAccepted, sub.status, "a paused type's jobs are admitted")
	id := sub.body["id"].(string)
	// The worker asks for work every PullWait (300 ms) all along.
	require.Never(t, func() bool {
		a := peek(base+"/v1/jobs/"+id, tok)
		return a.status == http.StatusOK && a.body["state"] != "queued"
	},
		2*time.Second, 100*time.Millisecond, "a paused type's job started")
	require.Zero(t, runs.Load())
	require.ErrorIs(t, admin.DeleteType(ctx, "pausing"), api.ErrTypeInUse)

	st, err = admin.ResumeType(ctx, "pausing")
	require.NoError(t, err)
	require.False(t, st.Paused)
	var done answer
	require.Eventually(t, func() bool { done = peek(base+"/v1/jobs/"+id, tok); return done.body["state"] == "succeeded" },
		20*time.Second, 50*time.Millisecond)
	// One run per attempt: this broker takes a claim over after 500 ms
	// without a beat, which a loaded CI machine can cause (seen once: two
	// runs); what the pause holds back is any run before the resume.
	require.EqualValues(t, done.body["attempt"], runs.Load(), "one run per attempt")

	require.NoError(t, admin.DeleteType(ctx, "pausing"))
	require.Eventually(t, func() bool {
		return peek(base+"/v1/types/pausing", tok).status == http.StatusNotFound
	},
		10*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", base+"/v1/jobs", tok, "pz-2", `{"type":"pausing","params":{"n":1}}`).status)
	require.ErrorIs(t, admin.DeleteType(ctx, "permit_report"), api.ErrForbidden)
}
