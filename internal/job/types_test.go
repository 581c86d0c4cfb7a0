package job

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func validDecl(contentType string) *TypeDecl {
	return &TypeDecl{
		Name: "csv_export", Schema: json.RawMessage(`{"type":"object"}`),
		TimeoutSeconds: 60, Attempts: 3, MaxResultBytes: 1 << 20, ContentType: contentType,
	}
}

// A declared content type becomes the Content-Type header of every result
// of the type: Validate accepts a real media type and nothing else.
func TestTypeDeclContentType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ct string
		ok bool
	}{
		{"application/pdf", true},
		{"text/csv", true},
		{"text/csv; charset=utf-8", true},
		{`text/plain; charset="utf-8"`, true},
		{"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", true},
		{"application/ld+json", true},
		{"Application/PDF", true},
		{"image/svg+xml", true},
		{"text/html", true},                                      // a real type: served as an inert attachment
		{"application/pdf; x=" + strings.Repeat("y", 236), true}, // 255 bytes
		{"application/" + strings.Repeat("x", 127), true},        // RFC 6838's longest subtype

		{"", false},
		{"application/pdf; x=" + strings.Repeat("y", 237), false}, // 256 bytes
		{"application/" + strings.Repeat("x", 128), false},
		{"pdf", false},          // no subtype
		{"application", false},  // no subtype
		{"application/", false}, // empty subtype
		{"/pdf", false},         // empty type
		{"*/*", false},          // a range, not a type
		{"text/*", false},
		{"application/pdf/x", false},
		{"application /pdf", false},
		{"application/pdf\r\nContent-Disposition: inline", false},
		{"application/pdf\nX: y", false},
		{"application/pdf\r", false},
		{"application/pdf\x00", false},
		{"application/pdf\x7f", false},
		{"application/pdf\t", false},
		{"application/pdf; charset=\x01", false},
		{"text/plain; charset=utf-8; charset=latin1", false}, // a duplicate parameter
		{"text/plain; charset", false},                       // a parameter without value
		{"text/plain; =utf-8", false},
		{"application/pdf; a=\"unterminated", false},
		{"tëxt/plain", false}, // not ASCII
		{"application/p(d)f", false},
		{"application/_pdf", false}, // a restricted name starts with a letter or digit
		{"application/pdf,text/html", false},
	} {
		err := validDecl(tc.ct).Validate()
		if tc.ok {
			require.NoError(t, err, "%q", tc.ct)
			require.NoError(t, CheckContentType(tc.ct), "%q", tc.ct)
		} else {
			require.ErrorIs(t, err, ErrInvalidType, "%q", tc.ct)
			require.ErrorContains(t, err, "content type", "%q", tc.ct)
			require.Error(t, CheckContentType(tc.ct), "%q", tc.ct)
		}
	}
}
