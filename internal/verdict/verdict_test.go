package verdict

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// A user type's handler failure is handler_error; only jobgate's built-in
// renderer's is render_error (issue 34).
func TestHandlerFailuresAreTheHandlersCategory(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{wire.KindError, wire.KindPermanent, wire.KindPanic} {
		f, err := Failure(&wire.FailRequest{Kind: kind, UserMessage: "no such region"}, "csv_export", time.Minute, 1<<20)
		require.NoError(t, err)
		require.Equal(t, api.CategoryHandlerError, f.Category, kind)
		f, err = Failure(&wire.FailRequest{Kind: kind}, "permit_report", time.Minute, 1<<20)
		require.NoError(t, err)
		require.Equal(t, api.CategoryRenderError, f.Category, kind)
	}
}

// What each kind becomes, as the owner reads it.
func TestFailureOfEachKind(t *testing.T) {
	t.Parallel()
	cases := []struct {
		req       wire.FailRequest
		category  string
		retryable bool
		message   string
	}{
		{wire.FailRequest{Kind: wire.KindError, Message: "dial 10.0.0.1"}, api.CategoryHandlerError, true, "the job's worker reported an error"},
		{wire.FailRequest{Kind: wire.KindError, UserMessage: "try later"}, api.CategoryHandlerError, true, "try later"},
		{wire.FailRequest{Kind: wire.KindPermanent, UserMessage: "case 47 has no revision 29"}, api.CategoryHandlerError, false, "case 47 has no revision 29"},
		{wire.FailRequest{Kind: wire.KindPanic, UserMessage: "ignored"}, api.CategoryHandlerError, false, "the job's worker failed"},
		{wire.FailRequest{Kind: wire.KindTimeout}, api.CategoryTimeout, true, "the attempt did not finish within its time budget of 1m0s"},
		{wire.FailRequest{Kind: wire.KindTooLarge, Retryable: true}, api.CategoryBudgetExceeded, false, "the result would be larger than the limit of 1048576 bytes"},
		{wire.FailRequest{Kind: wire.KindBudget, Retryable: true}, api.CategoryBudgetExceeded, true, "the job exceeds a limit of its worker"},
		{wire.FailRequest{Kind: wire.KindBudget, UserMessage: "over 10 000 rows"}, api.CategoryBudgetExceeded, false, "over 10 000 rows"},
		{wire.FailRequest{Kind: wire.KindInternal}, api.CategoryInternal, true, "the result could not be stored; the job is retried"},
		{wire.FailRequest{Kind: wire.KindInternal, UserMessage: "refused"}, api.CategoryInternal, false, "refused"},
	}
	for _, c := range cases {
		f, err := Failure(&c.req, "csv_export", time.Minute, 1<<20)
		require.NoError(t, err)
		require.Equal(t, &api.Failure{Category: c.category, Retryable: c.retryable, Message: c.message}, f, "%+v", c.req)
	}
	_, err := Failure(&wire.FailRequest{Kind: "oops"}, "csv_export", time.Minute, 1)
	require.ErrorContains(t, err, "unknown failure kind")
	_, err = Failure(&wire.FailRequest{Kind: wire.KindError, UserMessage: "a\nb"}, "csv_export", time.Minute, 1)
	require.ErrorIs(t, err, ErrNotPrintable)
}

// docs/protocol.md's table of kinds and categories is this package's
// table: every kind once, with its category and whether it is retried.
func TestProtocolDocsShowTheTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/protocol.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "## Failure kinds and categories")
	require.True(t, ok, "docs/protocol.md has the section")
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue
		}
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		rows[cells[0]] = cells[1:]
	}
	require.Len(t, rows, len(kinds), "one row a kind: %v", rows)
	for kind, r := range kinds {
		row, ok := rows[kind]
		require.True(t, ok, "kind %s in the docs", kind)
		want := r.category
		if want == handlerError {
			want = "handler"
		}
		require.Equal(t, want, row[0], kind)
		switch r.retry {
		case retryAlways:
			require.Equal(t, "yes", row[1], kind)
		case retryNever:
			require.Equal(t, "no", row[1], kind)
		default:
			require.True(t, strings.HasPrefix(row[1], "as `retryable` says"), kind)
		}
		shown := "no"
		if r.userMessage {
			shown = "yes"
		}
		require.Equal(t, shown, row[2], kind)
	}
}
