package canon

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The scanner primitives read what the JSON grammar says and stop where it
// does.
func TestScannerPrimitives(t *testing.T) {
	t.Parallel()
	require.Equal(t, 4, SkipSpace([]byte(" \t\r\nx "), 0))
	require.Equal(t, 3, SkipSpace([]byte("   "), 0))
	require.Equal(t, 1, SkipSpace([]byte("x\v"), 1), "a vertical tab is not JSON white space")

	require.Equal(t, 3, PlainRun([]byte(`"ab"`), 1), "up to the closing quote")
	for _, stop := range []string{`"`, `\`, "\x1f", "\x7f", "é", "\xff"} {
		require.Equal(t, 3, PlainRun([]byte("xab"+stop+"cd"), 1), "%q ends a plain run", stop)
	}
	require.Equal(t, 3, PlainRun([]byte("x~ "), 1))

	for _, lit := range []string{"0", "-0", "47", "-47.5", "1e9", "1E+9", "2.5e-3", "12345678901234567890"} {
		end, ok := ScanNumber([]byte(lit+","), 0)
		require.True(t, ok, lit)
		require.Equal(t, len(lit), end, lit)
	}
	for lit, stop := range map[string]int{"-": 1, "-x": 1, "1.": 2, "1.e3": 2, "1e": 2, "1e+": 3, "x": 0, ".5": 0} {
		end, ok := ScanNumber([]byte(lit), 0)
		require.False(t, ok, lit)
		require.Equal(t, stop, end, "%q: where the grammar failed", lit)
	}
	end, ok := ScanNumber([]byte("01"), 0)
	require.True(t, ok, "a leading zero ends the number; the reader then sees the 1")
	require.Equal(t, 1, end)
}

// BenchmarkDecodeStrict: a submission with plain and non-ASCII strings, an
// escape, numbers and nesting, as the gateway reads each body.
func BenchmarkDecodeStrict(b *testing.B) {
	body := []byte(`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63,"title":"Baugesuch Müller, Zürich","note":"line\none","ratio":-2.5e3,"tags":["a","b",{"x":true,"y":null}]},"priority":2,"run_at":"2026-12-05T09:00:00Z"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeStrict(body); err != nil {
			b.Fatal(err)
		}
	}
}
