package endpointcall_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A done or fail callback is answered 204 only once the broker has the
// verdict on record: the job read right after the answer has changed,
// every time (without the wait, the job read at once is often still
// running, for the verdict is reported after the answer went out).
func TestAsyncDoneAndFailAreAnsweredOnceRecorded(t *testing.T) {
	t.Parallel()
	d := startAsync(t, 10*time.Second)
	url, calls := accepted(t)
	d.declare(t, "async_rec", url, map[string]any{"timeout_seconds": 60})
	for i := range 6 {
		id := d.submit(t, "async_rec", `{}`)
		cb := nextCallback(t, calls)
		want := "succeeded"
		if i%2 == 0 {
			status, data := callback(t, http.MethodPut, cb+"/result", "made in the background")
			require.Equal(t, http.StatusNoContent, status, string(data))
			status, data = callback(t, http.MethodPost, cb+"/done", "")
			require.Equal(t, http.StatusNoContent, status, string(data))
		} else {
			want = "failed"
			status, data := callback(t, http.MethodPost, cb+"/fail", `{"message":"no","retryable":false}`)
			require.Equal(t, http.StatusNoContent, status, string(data))
		}
		require.Equal(t, want, d.job(t, id).State, "job %d read right after the 204", i)
	}
}
