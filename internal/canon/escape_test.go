package canon

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// escapeSamples: every byte alone and inside text, the runes encoding/json
// treats apart, and broken UTF-8.
func escapeSamples() []string {
	var out []string
	for c := range 256 {
		out = append(out, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	return append(out, "", "plain", "é", "日本", "😀", "\u2028", "x\u2029y", "<a href=\"x\">&amp;</a>",
		"\xff", "a\xc3", "\xed\xa0\x80", "tab\there\nnew\\line\"quote\x7f")
}

// The one escaper writes, in HTMLSafe mode, exactly what encoding/json's
// Marshal writes; in Canonical mode what encoding/json writes without HTML
// escaping, less its escapes of U+2028 and U+2029 (RFC 8785 writes them as
// themselves), and it refuses what is not UTF-8.
func TestAppendEscapedMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range escapeSamples() {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		got, ok := AppendEscaped([]byte(`"`), s, HTMLSafe)
		require.True(t, ok)
		require.Equal(t, string(want), string(got)+`"`, "HTMLSafe %q", s)

		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		canonical := strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(strings.TrimSuffix(buf.String(), "\n"))
		got, ok = AppendEscaped([]byte(`"`), s, Canonical)
		require.Equal(t, utf8.ValidString(s), ok, "Canonical %q: only valid UTF-8 has a canonical form", s)
		if ok {
			require.Equal(t, canonical, string(got)+`"`, "Canonical %q", s)
		}
	}
}
