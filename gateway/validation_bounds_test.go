package gateway

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// requiredListSchema takes up to 30 objects in a, each of which must have
// 4,200 members: the declaration of issue 34 with as many items as its
// worst case allows (with 65,536 it is refused).
var requiredListSchema = func() string {
	names := make([]string, 4200)
	for i := range names {
		names[i] = fmt.Sprintf(`"a%d"`, i)
	}
	return `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"array","maxItems":500,"items":{"type":"object","maxProperties":1,"required":[` + strings.Join(names, ",") + `]}}}}`
}()

func objects(n int) string { return strings.TrimSuffix(strings.Repeat("{},", n), ",") }

// requireBoundedProblem checks a 422 against the contract's bounds and
// returns its field errors.
func requireBoundedProblem(t *testing.T, r response, truncated bool) []any {
	t.Helper()
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%.300s", r.body)
	require.LessOrEqual(t, len(r.body), api.MaxProblemBytes)
	p := r.json(t)
	require.Equal(t, "/problems/validation", p["type"])
	errs := p["errors"].([]any)
	require.LessOrEqual(t, len(errs), api.MaxFieldErrors)
	if truncated {
		require.Equal(t, true, p["errors_truncated"], "%.300s", r.body)
	} else {
		require.NotContains(t, p, "errors_truncated")
	}
	return errs
}

// Issue 34: one requester's 1.5 KB POST against a worker's declaration
// made a 154 MB 422 (2.1 million field errors), a 60 KB one took serve to
// 22 GB, and a 64 KB body of unknown members a 538 KB 422, logged whole at
// debug. Every 422 now lists at most 100 errors in at most 64 KiB, says
// when it cut the list, and logs a summary; the key stays unused.
func TestEveryValidationProblemIsBounded(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	b := &testBundle{dir: t.TempDir(), secret: []byte("test-secret"), clock: &testClock{},
		logs: slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})}
	b.start(t)
	tok := b.token(t, "4", "reviewer-47", false)
	jobtest.DeclareTypes(t, b.res, testDecl("required_list", requiredListSchema))
	b.awaitType(t, tok, "required_list")

	// 30 items: 126,000 missing members, 100 listed.
	errs := requireBoundedProblem(t, b.submit(t, tok, "k-1", `{"type":"required_list","params":{"a":[`+objects(30)+`]}}`), true)
	require.Len(t, errs, api.MaxFieldErrors)
	require.Equal(t, "/params/a/0/a0", errs[0].(map[string]any)["field"])
	// 500 items: over the validation budget, one error.
	errs = requireBoundedProblem(t, b.submit(t, tok, "k-1", `{"type":"required_list","params":{"a":[`+objects(500)+`]}}`), false)
	require.Equal(t, "cost", errs[0].(map[string]any)["rule"])
	// 20,000 items (60 KB): the same, at once.
	errs = requireBoundedProblem(t, b.submit(t, tok, "k-1", `{"type":"required_list","params":{"a":[`+objects(20000)+`]}}`), false)
	require.Equal(t, "cost", errs[0].(map[string]any)["rule"])

	// 6,500 unknown members of permit_report (64 KB): 100 listed.
	var members []string
	for i := range 6500 {
		members = append(members, fmt.Sprintf(`"u%04d":1`, i))
	}
	body := `{"type":"permit_report","params":{"case_id":1,"revision":1,` + strings.Join(members, ",") + `}}`
	require.Less(t, len(body), 64<<10)
	errs = requireBoundedProblem(t, b.submit(t, tok, "k-1", body), true)
	require.Len(t, errs, api.MaxFieldErrors)
	// The body's own unknown members too.
	body = `{"type":"permit_report","params":{"case_id":1,"revision":1},` + strings.Join(members, ",") + `}`
	errs = requireBoundedProblem(t, b.submit(t, tok, "k-1", body), true)
	require.Len(t, errs, api.MaxFieldErrors)
	// A member name of 60,000 bytes is cut in the answer.
	errs = requireBoundedProblem(t, b.submit(t, tok, "k-1", `{"type":"permit_report","params":{"case_id":1,"revision":1,"`+strings.Repeat("x", 60000)+`":1}}`), true)
	require.LessOrEqual(t, len(errs[0].(map[string]any)["field"].(string)), api.MaxFieldBytes)

	// A batch: each item's list stops at the bound, the batch's too.
	items := strings.TrimSuffix(strings.Repeat(`{"type":"required_list","params":{"a":[`+objects(30)+`]}},`, 20), ",")
	errs = requireBoundedProblem(t, b.do(t, http.MethodPost, "/v1/batches", tok, `{"jobs":[`+items+`]}`, "Idempotency-Key: b-1"), true)
	require.Len(t, errs, api.MaxFieldErrors)
	require.Equal(t, "/jobs/0/params/a/0/a0", errs[0].(map[string]any)["field"])

	// None of it consumed the key; the debug log has a summary a line.
	r := b.submit(t, tok, "k-1", `{"type":"required_list","params":{"a":[]}}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	problems := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		require.Less(t, len(line), 4<<10, "a log line of %d bytes: %.300s", len(line), line)
		if strings.Contains(line, "request answered with a problem") {
			problems++
		}
	}
	require.GreaterOrEqual(t, problems, 7)
}
