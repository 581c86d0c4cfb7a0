package gateway

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The page names a download by the result's media type (result.content_type
// of the job resource), not always ".pdf": node runs the page's own naming
// code, as served, on a few results.
func TestPageNamesDownloadByContentType(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (Debian: apt-get install nodejs)")
	}
	_, b := setup(t)
	r := b.do(t, http.MethodGet, "/ui/app.js", "", "")
	require.Equal(t, http.StatusOK, r.status)
	js := string(r.body)
	require.False(t, strings.Contains(js, "${job.id}.pdf"), "the download is not always named .pdf")
	start := strings.Index(js, "  const RESULT_KINDS")
	end := strings.Index(js, "  // describe names a job")
	require.True(t, start >= 0 && end > start, "app.js has its result naming (RESULT_KINDS ... resultFileName)")

	script := js[start:end] + `
const out = [
  ['job_a', 'application/pdf'], ['job_b', 'text/csv; charset=utf-8'], ['job_c', 'Application/JSON'],
  ['job_d', 'application/x-unknown'], ['job_e', '__proto__'], ['job_f', undefined],
].map(([id, ct]) => resultFileName({ id, result: { content_type: ct } }));
out.push(resultKind('text/csv').label, resultKind('application/pdf').label, resultKind('image/x-nope').label);
console.log(out.join(' '));
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "-e", script)
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "node: %s", got)
	require.Equal(t, "job_a.pdf job_b.csv job_c.json job_d.bin job_e.bin job_f.bin CSV PDF file", strings.TrimSpace(string(got)))
}
