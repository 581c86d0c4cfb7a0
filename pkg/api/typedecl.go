package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"
)

// TypeDecl is a job type as its worker declares it: the params' schema and
// the limits every job of the type is admitted and run under (the worker
// protocol's declare message, GET /v1/types/{name}).
type TypeDecl struct {
	// Name is the type's name, [a-z][a-z0-9_]{0,63}.
	Name string `json:"name"`
	// Description says what the type produces, for people and forms.
	Description string `json:"description,omitempty"`
	// Schema is the JSON Schema (2020-12) of the params.
	Schema json.RawMessage `json:"schema"`
	// TimeoutSeconds is the time budget of one attempt.
	TimeoutSeconds int `json:"timeout_seconds"`
	// Attempts is how many attempts a job of this type gets.
	Attempts int `json:"attempts"`
	// MaxResultBytes bounds the size of one result.
	MaxResultBytes int64 `json:"max_result_bytes"`
	// ContentType is the media type of the results.
	ContentType string `json:"content_type"`
	// Flow is the type's retry policy, concurrency keys and rate limit.
	Flow
}

// Limits of a declaration.
const (
	MaxTypeNameLen      = 64
	MaxSchemaBytes      = 32 << 10
	MaxDescriptionBytes = 1024
	MaxTypeAttempts     = 25
	MaxTypeTimeout      = 24 * time.Hour
	MaxResultBytesLimit = 4 << 30
	// MaxContentTypeLen bounds a declared content type (RFC 6838 gives
	// type and subtype 127 characters each).
	MaxContentTypeLen = 255
	// MaxTypes bounds how many types a deployment holds (each gateway keeps
	// every compiled schema in memory).
	MaxTypes = 1000
)

// ErrInvalidType: a type declaration breaks the rules above.
var ErrInvalidType = errors.New("invalid job type declaration")

// ValidTypeName reports whether s is a legal job type name:
// [a-z][a-z0-9_]{0,63}. Type names appear in NATS subjects and consumer
// names, so nothing else is ever allowed.
func ValidTypeName(s string) bool {
	if len(s) == 0 || len(s) > MaxTypeNameLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// CheckContentType checks a declared result content type: a media type
// (not a range) "type/subtype" with optional parameters, as
// mime.ParseMediaType reads it, whose type and subtype are RFC 6838
// restricted names, in at most MaxContentTypeLen printable ASCII
// characters. Gateways send it as the Content-Type of every result of the
// type, so nothing else (a CR or LF, a control character, a wildcard, a
// bare word) is ever allowed.
func CheckContentType(s string) error {
	if s == "" || len(s) > MaxContentTypeLen {
		return fmt.Errorf("content type must be 1 to %d characters, got %d", MaxContentTypeLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("content type %q holds a control or non-ASCII character at %d", s, i)
		}
	}
	mt, _, err := mime.ParseMediaType(s)
	if err != nil {
		return fmt.Errorf("content type %q is not a media type: %w", s, err)
	}
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || !restrictedName(typ) || !restrictedName(sub) {
		return fmt.Errorf("content type %q must be type/subtype, each a media type name (RFC 6838), such as application/pdf", s)
	}
	return nil
}

// restrictedName reports whether s is an RFC 6838 restricted-name: 1 to 127
// characters, a letter or digit first, then letters, digits and
// ! # $ & - ^ _ . +
func restrictedName(s string) bool {
	if len(s) == 0 || len(s) > 127 || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && !strings.ContainsRune("!#$&-^_.+", rune(c)) {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// Timeout is the attempt time budget as a duration.
func (d *TypeDecl) Timeout() time.Duration { return time.Duration(d.TimeoutSeconds) * time.Second }

// Validate checks the declaration's own fields (not the schema's contents,
// which the schema compiler checks).
func (d *TypeDecl) Validate() error {
	var errs []error
	if !ValidTypeName(d.Name) {
		errs = append(errs, fmt.Errorf("name %q must match [a-z][a-z0-9_]{0,63}", d.Name))
	}
	if len(d.Description) > MaxDescriptionBytes {
		errs = append(errs, fmt.Errorf("description is %d bytes, at most %d", len(d.Description), MaxDescriptionBytes))
	}
	if len(d.Schema) == 0 || len(d.Schema) > MaxSchemaBytes {
		errs = append(errs, fmt.Errorf("schema must be 1 to %d bytes, got %d", MaxSchemaBytes, len(d.Schema)))
	}
	if d.TimeoutSeconds < 1 || time.Duration(d.TimeoutSeconds)*time.Second > MaxTypeTimeout {
		errs = append(errs, fmt.Errorf("timeout must be 1s to %s, got %ds", MaxTypeTimeout, d.TimeoutSeconds))
	}
	if d.Attempts < 1 || d.Attempts > MaxTypeAttempts {
		errs = append(errs, fmt.Errorf("attempts must be 1 to %d, got %d", MaxTypeAttempts, d.Attempts))
	}
	if d.MaxResultBytes < 1 || d.MaxResultBytes > MaxResultBytesLimit {
		errs = append(errs, fmt.Errorf("max result bytes must be 1 to %d, got %d", int64(MaxResultBytesLimit), d.MaxResultBytes))
	}
	if err := CheckContentType(d.ContentType); err != nil {
		errs = append(errs, err)
	}
	if err := d.Flow.Check(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidType, err)
	}
	return nil
}

// What a declaration gets for a limit it leaves out (pkg/worker's Type),
// and what jobgate's own settings default to for its built-in types.
const (
	DefaultTimeout        = 2 * time.Minute
	DefaultAttempts       = 3
	DefaultMaxResultBytes = 64 << 20
	// DefaultConcurrency is how many jobs of a type one worker process
	// runs at once unless told.
	DefaultConcurrency = 2
)
