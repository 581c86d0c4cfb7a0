package gateway

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A byte-identical retry answers 200 with the job as it is now (not as it
// was admitted), its Location and Idempotent-Replayed, and writes nothing.
func TestByteIdenticalReplayAnswersTheJobNow(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	first := b.submit(t, tok, "now", permit)
	require.Equal(t, http.StatusAccepted, first.status)
	id := first.job(t).ID

	moved := b.advance(t, "4", "reviewer-47", id, func(r *job.Record) error {
		if err := r.Transition(job.StateRunning, time.Now()); err != nil {
			return err
		}
		r.Attempt = 1
		r.Progress = &job.Progress{Done: 12, Total: 63, Unit: "pages"}
		return nil
	})
	again := b.submit(t, tok, "now", permit)
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, "/v1/jobs/"+id, again.header.Get("Location"))
	require.Equal(t, `"`+strconv.FormatUint(moved.Revision, 10)+`"`, again.header.Get("ETag"))
	j := again.job(t)
	require.Equal(t, id, j.ID)
	require.Equal(t, job.StateRunning, j.State)
	require.Equal(t, 1, j.Attempt)
	require.NotNil(t, j.Progress)
	require.Equal(t, 12, j.Progress.Done)

	b.succeed(t, "4", "reviewer-47", id, []byte("%PDF-1.7"))
	done := b.submit(t, tok, "now", permit)
	require.Equal(t, http.StatusOK, done.status)
	require.Equal(t, job.StateSucceeded, done.job(t).State)
	require.NotNil(t, done.job(t).Result, "a succeeded job's replay carries its result link")
	stored, err := b.res.Jobs.Get(context.Background(), job.StoreKey("4", "reviewer-47", id))
	require.NoError(t, err)
	require.Equal(t, job.StateSucceeded, stored.State)
	require.Equal(t, `"`+strconv.FormatUint(stored.Revision, 10)+`"`, done.header.Get("ETag"), "the replays wrote nothing")
	require.Equal(t, 1, b.countJobs(t))
}

// Other bytes take the full decode: the same params formatted otherwise
// replay, other params are a conflict, and neither costs the job's own body
// its shortcut.
func TestReplayByFingerprintWhenTheBytesDiffer(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	first := b.submit(t, tok, "k", permit)
	require.Equal(t, http.StatusAccepted, first.status)
	id := first.job(t).ID
	storeKey := job.StoreKey("4", "reviewer-47", id)
	proof, ok := g.seen.lookup(storeKey)
	require.True(t, ok)
	require.NotEqual(t, bodyProof{}, proof, "the admission keeps its body's proof")

	for _, body := range []string{
		`{"params":{"pages":63,"revision":29,"case_id":47},"type":"permit_report"}`,
		"{ \"type\" : \"permit_report\",\n \"params\": {\"case_id\": 47.0, \"revision\": 29, \"pages\": 63.0} }",
	} {
		r := b.submit(t, tok, "k", body)
		require.Equal(t, http.StatusOK, r.status, "%s → %s", body, r.body)
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		require.Equal(t, id, r.job(t).ID)
	}
	conflict := b.submit(t, tok, "k", `{"type":"permit_report","params":{"case_id":47,"revision":30,"pages":63}}`)
	require.Equal(t, http.StatusConflict, conflict.status)
	require.Equal(t, "/problems/idempotency-key-reused", conflict.json(t)["type"])
	require.Equal(t, id, conflict.json(t)["job_id"])
	// The last body that replayed keeps the shortcut; a conflict takes
	// nothing away.
	stored, err := b.res.Jobs.Get(context.Background(), storeKey)
	require.NoError(t, err)
	kept, _ := g.seen.lookup(storeKey)
	lastReplayed := "{ \"type\" : \"permit_report\",\n \"params\": {\"case_id\": 47.0, \"revision\": 29, \"pages\": 63.0} }"
	require.Equal(t, makeProof(g.types.gen.Load(), stored.Fingerprint, []byte(lastReplayed)), kept)
	require.Equal(t, http.StatusOK, b.submit(t, tok, "k", permit).status)
	require.Equal(t, 1, b.countJobs(t))
}

// A byte-identical retry is answered without decoding its body: with the
// type's schema swapped for one that refuses everything (behind the
// gateway's back, so the generation does not move) it still replays, while
// a reformatted body, decoded in full, is refused. Once the generation moves
// (any declaration changes), the same bytes are decoded again.
func TestByteIdenticalReplaySkipsTheDecode(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	require.Equal(t, http.StatusAccepted, b.submit(t, tok, "k", permit).status)

	refuse, err := schema.Compile([]byte(`{"type":"object","additionalProperties":false,"properties":{"case_id":{"type":"string","maxLength":8}}}`))
	require.NoError(t, err)
	g.types.schemas.Set("permit_report", refuse)

	require.Equal(t, http.StatusOK, b.submit(t, tok, "k", permit).status, "answered from the proof")
	reformatted := b.submit(t, tok, "k", `{"params":{"pages":63,"revision":29,"case_id":47},"type":"permit_report"}`)
	require.Equal(t, http.StatusUnprocessableEntity, reformatted.status, "decoded in full: %s", reformatted.body)

	g.types.gen.Add(1)
	again := b.submit(t, tok, "k", permit)
	require.Equal(t, http.StatusUnprocessableEntity, again.status, "a new generation decodes again: %s", again.body)
}

// A type re-declared with another default changes what a body means: the
// byte-identical retry of a body that relied on the old default is judged
// by the full decode under the new schema (a conflict), exactly as without
// the shortcut.
func TestRedeclaredTypeRejudgesTheSameBytes(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	body := `{"type":"permit_report","params":{"case_id":47,"revision":29}}` // pages: default 10
	require.Equal(t, http.StatusAccepted, b.submit(t, tok, "d", body).status)
	require.Equal(t, http.StatusOK, b.submit(t, tok, "d", body).status)

	gen := g.types.gen.Load()
	d := jobtest.PermitReport()
	d.Schema = []byte(`{"type":"object","additionalProperties":false,"required":["case_id","revision"],
	  "properties":{"case_id":{"type":"integer","minimum":1},"revision":{"type":"integer","minimum":1},
	  "pages":{"type":"integer","minimum":1,"maximum":2000,"default":20}}}`)
	jobtest.DeclareTypes(t, b.res, d)
	require.Eventually(t, func() bool { return g.types.gen.Load() > gen }, 10*time.Second, 5*time.Millisecond)

	r := b.submit(t, tok, "d", body)
	require.Equal(t, http.StatusConflict, r.status, "pages now defaults to 20: %s", r.body)
	explicit := b.submit(t, tok, "d", `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":10}}`)
	require.Equal(t, http.StatusOK, explicit.status, "the job's own params still replay")
}

// The proofs live in the seen-keys hint and share its bound; a key marked
// after a conflict keeps the proof it had.
func TestSeenKeysKeepProofsWithinTheBound(t *testing.T) {
	t.Parallel()
	s := newSeenKeys(4)
	key := func(i int) string { return "bench.client-1.job_" + strconv.Itoa(i) }
	proof := func(i int) bodyProof { return makeProof(1, "fp"+strconv.Itoa(i), []byte(permit)) }
	for i := range 8 {
		s.add(key(i), proof(i))
	}
	for i := range 8 {
		p, ok := s.lookup(key(i))
		require.True(t, ok, "key %d", i)
		require.Equal(t, proof(i), p, "key %d", i)
	}
	s.mark(key(5))
	p, _ := s.lookup(key(5))
	require.Equal(t, proof(5), p, "a mark keeps the proof")
	s.mark(key(100))
	p, ok := s.lookup(key(100))
	require.True(t, ok)
	require.Equal(t, bodyProof{}, p, "a new mark proves nothing")
	for i := 200; i < 300; i++ {
		s.add(key(i), proof(i))
	}
	require.LessOrEqual(t, s.keys.Len(), 2*4)
	_, ok = s.lookup(key(0))
	require.False(t, ok, "old keys are dropped")

	require.NotEqual(t, makeProof(1, "fp", []byte(permit)), makeProof(2, "fp", []byte(permit)), "the generation counts")
	require.NotEqual(t, makeProof(1, "fp", []byte(permit)), makeProof(1, "fq", []byte(permit)), "the fingerprint counts")
	require.NotEqual(t, makeProof(1, "fp", []byte(permit)), makeProof(1, "fp", []byte(permit+" ")), "every byte counts")
}
