package api

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The bounds of a validation problem's field errors (docs/api.md,
// "Validation"): whatever a request and its type's schema are, a 422 lists
// at most MaxFieldErrors of them and its body stays within MaxProblemBytes,
// with "errors_truncated": true when something was left out.
const (
	// MaxFieldErrors is the most field errors one 422 lists.
	MaxFieldErrors = 100
	// MaxProblemBytes bounds the encoded body of a validation problem.
	MaxProblemBytes = 64 << 10
	// MaxFieldBytes and MaxMessageBytes bound one field error's pointer and
	// message: a member name may be nearly the whole body, an enum's
	// message lists every allowed value.
	MaxFieldBytes   = 512
	MaxMessageBytes = 512
)

// fieldErrorsBudget is what the listed errors may take of MaxProblemBytes:
// the rest of the document (type, title, detail, request id) is a few
// hundred bytes.
const fieldErrorsBudget = MaxProblemBytes - 4<<10

// BoundFieldErrors returns at most MaxFieldErrors of fe, each field and
// message cut to its bound (on a rune boundary, marked with "..."), and no
// more of them than fit in a MaxProblemBytes body when JSON-encoded; and
// whether anything was left out or cut. fe is not modified.
func BoundFieldErrors(fe []FieldError) ([]FieldError, bool) {
	truncated := len(fe) > MaxFieldErrors
	if truncated {
		fe = fe[:MaxFieldErrors]
	}
	out := make([]FieldError, 0, len(fe))
	size := 0
	for _, e := range fe {
		var cut bool
		e.Field, cut = clip(e.Field, MaxFieldBytes)
		truncated = truncated || cut
		e.Message, cut = clip(e.Message, MaxMessageBytes)
		truncated = truncated || cut
		e.Rule, cut = clip(e.Rule, 64)
		truncated = truncated || cut
		// Encoded, a byte may take six ("\u0000"): count the worst case,
		// so the bound holds without encoding anything here.
		size += 40 + 6*(len(e.Field)+len(e.Message)+len(e.Rule))
		if size > fieldErrorsBudget {
			return out, true
		}
		out = append(out, e)
	}
	return out, truncated
}

// clip cuts s to at most n bytes on a rune boundary, ending in "...".
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "...", true
}

// summary is a short account of field errors for an error's text and a
// log line: how many, and the first few fields.
func summary(fe []FieldError, truncated bool) string {
	const shown = 3
	var sb strings.Builder
	for i, e := range fe {
		if i == shown {
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		f, _ := clip(e.Field, 128)
		m, _ := clip(e.Message, 128)
		sb.WriteString(f + ": " + m)
	}
	more := len(fe) - shown
	switch {
	case more > 0 && truncated:
		fmt.Fprintf(&sb, " (and more: %d listed, the list was cut)", len(fe))
	case more > 0:
		fmt.Fprintf(&sb, " (and %d more)", more)
	case truncated:
		sb.WriteString(" (the list was cut)")
	}
	return sb.String()
}
