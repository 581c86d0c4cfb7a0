package broker

import (
	"encoding/json"

	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/stretchr/testify/require"
)

// An empty result is a result (docs/protocol.md, "Empty results"): one
// empty last chunk is stored as zero bytes with the SHA-256 of nothing, and
// a done carrying it succeeds the job with a result of 0 bytes; a done
// without a result succeeds it with none.
func TestAnEmptyUploadIsAResultOfNoBytes(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "report", "text/csv").Error)

	empty := tb.admit(t, "report", "e-1")
	a := tb.next(t, credA, "report", "w-1")
	require.Equal(t, empty.Key(), a.Key)
	held := wire.Held{Key: a.Key, Token: a.Token}
	open := tb.ask(t, credA, "report", wire.OpOpen, held)
	require.Nil(t, open.Error)
	last := tb.chunk(t, credA, "report", open.Upload, 0, nil, true)
	require.Nil(t, last.Error)
	require.Equal(t, &wire.StoredResult{Object: open.Upload.Object, Size: 0,
		SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}, last.Stored)
	require.Nil(t, tb.ask(t, credA, "report", wire.OpDone, wire.DoneRequest{Held: held, Result: last.Stored}).Error)
	rec := tb.record(t, empty.Key())
	require.Equal(t, job.StateSucceeded, rec.State)
	require.NotNil(t, rec.Output, "a result of no bytes")
	require.Zero(t, rec.Output.Size)
	require.Equal(t, "text/csv", rec.Output.ContentType)

	none := tb.admit(t, "report", "e-2")
	b := tb.next(t, credA, "report", "w-1")
	require.Equal(t, none.Key(), b.Key)
	require.Nil(t, tb.ask(t, credA, "report", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: b.Key, Token: b.Token}}).Error)
	rec = tb.record(t, none.Key())
	require.Equal(t, job.StateSucceeded, rec.State)
	require.Nil(t, rec.Output, "no result")
}

// A give-back moves the claim's number (the token is signed over it, and
// the given-back claim must stay refused) but uses none of the job's
// attempts: a job of 2 attempts given back once is claimed as attempt 2
// and still has both to use, so its failure at attempt 2 is retried and its
// failure at attempt 3 is final (docs/protocol.md, the assignment).
func TestAGiveBackMovesTheAttemptNumberNotTheBudget(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "report", "text/csv").Error)
	rec := tb.admit(t, "report", "g-1") // MaxAttempts 2

	first := tb.next(t, credA, "report", "w-1")
	require.Equal(t, 1, first.Attempt)
	require.Nil(t, tb.ask(t, credA, "report", wire.OpGiveBack, wire.GiveBackRequest{Held: wire.Held{Key: first.Key, Token: first.Token}, Reason: "shutdown"}).Error)

	second := tb.next(t, credA, "report", "w-2")
	require.Equal(t, 2, second.Attempt, "the claim's number moves")
	require.Equal(t, 2, second.Attempts)
	require.NotEqual(t, first.Token, second.Token)
	r := tb.ask(t, credA, "report", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: first.Key, Token: first.Token}})
	require.Equal(t, wire.CodeLost, r.Error.Code, "the given-back claim stays refused")

	require.Nil(t, tb.ask(t, credA, "report", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: second.Key, Token: second.Token}, Kind: wire.KindError, Message: "m"}).Error)
	got := tb.record(t, rec.Key())
	require.Equal(t, job.StateRunning, got.State, "retried: the give-back used none of the 2 attempts")
	require.Equal(t, 1, got.AttemptsUsed())

	third := tb.next(t, credA, "report", "w-2") // after the retry's backoff
	require.Equal(t, 3, third.Attempt)
	require.Nil(t, tb.ask(t, credA, "report", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: third.Key, Token: third.Token}, Kind: wire.KindError, Message: "m"}).Error)
	got = tb.record(t, rec.Key())
	require.Equal(t, job.StateFailed, got.State, "the second attempt used was the last")
	require.Equal(t, 2, got.AttemptsUsed())
}

// A job's max_result_bytes is its type's as declared when it is claimed,
// not as when it was submitted (docs/protocol.md, the assignment): a
// declaration that lowers it bounds the jobs already waiting, while their
// attempts and timeout stay the ones they were admitted with.
func TestAJobsResultLimitIsItsTypesCurrentOne(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	decl := wire.DeclareRequest{Worker: "w-1", Type: wire.Declaration{Name: "report",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`), TimeoutSeconds: 60, Attempts: 2,
		MaxResultBytes: 1 << 20, ContentType: "text/csv"}}
	require.Nil(t, tb.ask(t, credA, "report", wire.OpDeclare, decl).Error)
	rec := tb.admit(t, "report", "m-1") // admitted with 2 attempts of 60 s
	decl.Type.MaxResultBytes, decl.Type.Attempts, decl.Type.TimeoutSeconds = 4, 5, 30
	require.Nil(t, tb.ask(t, credA, "report", wire.OpDeclare, decl).Error)

	a := tb.next(t, credA, "report", "w-1")
	require.Equal(t, rec.Key(), a.Key)
	require.EqualValues(t, 4, a.MaxResultBytes, "the current declaration's")
	require.Equal(t, 2, a.Attempts, "the admitted job's")
	require.EqualValues(t, 60_000, a.TimeoutMS, "the admitted job's")
	open := tb.ask(t, credA, "report", wire.OpOpen, wire.Held{Key: a.Key, Token: a.Token})
	require.Nil(t, open.Error)
	r := tb.chunk(t, credA, "report", open.Upload, 0, []byte("a,b,c"), true)
	require.Equal(t, wire.CodeTooLarge, r.Error.Code)
}
