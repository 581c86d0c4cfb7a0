package gateway

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The console is served at /admin with the reviewer page's headers, from
// the embedded files only; its page is not also under /ui/.
func TestConsoleServedWithPageHeaders(t *testing.T) {
	t.Parallel()
	_, b := setup(t)

	for _, path := range []string{"/admin"} {
		r := b.do(t, http.MethodGet, path, "", "")
		require.Equal(t, http.StatusOK, r.status, path)
		require.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
		require.Equal(t, pageCSP, r.header.Get("Content-Security-Policy"))
		require.Equal(t, "no-referrer", r.header.Get("Referrer-Policy"))
		require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
		require.Equal(t, "DENY", r.header.Get("X-Frame-Options"))
		html := string(r.body)
		require.Contains(t, html, `src="/ui/admin.js"`)
		require.Contains(t, html, `href="/ui/admin.css"`)
		require.NotContains(t, html, "http://", "the console loads nothing from elsewhere")
		require.NotContains(t, html, "https://")
		require.NotRegexp(t, regexp.MustCompile(`(?i)<script>|\son[a-z]+=|style=`), html, "no inline script, handler or style (the CSP allows none)")
	}
	for path, ctype := range map[string]string{"/ui/admin.js": "text/javascript", "/ui/admin.css": "text/css"} {
		r := b.do(t, http.MethodGet, path, "", "")
		require.Equal(t, http.StatusOK, r.status, path)
		require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), ctype), path)
		require.False(t, strings.Contains(string(r.body), "https://"), "%s loads nothing from elsewhere", path)
		for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "localStorage", "eval("} {
			require.False(t, strings.Contains(string(r.body), banned), "%s uses %s", path, banned)
		}
	}
	r := b.do(t, http.MethodGet, "/ui/admin.html", "", "")
	require.Equal(t, http.StatusNotFound, r.status, "the console page is served at /admin only")
}
