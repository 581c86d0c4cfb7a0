package job

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/internal/canon"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/pkg/api"
	"sort"
	"strings"
)

// Request is a validated submission: its type, its params with defaults
// applied and numbers normalized, the canonical bytes of both and the
// fingerprint over them.
type Request struct {
	Type        string
	Params      json.RawMessage // canonical params
	Canonical   []byte          // canonical {"params":...,"type":...}, with the flow fields when given
	Fingerprint string          // hex SHA-256 of Canonical
	Flow        Flow            // run_at or delay, priority, start_by (flow.go)
}

// DecodeSubmission parses a submission body and validates it against the
// declared types. The body must be one JSON object (canon.DecodeStrict: a
// duplicated member name anywhere, trailing data or invalid JSON is
// ErrMalformed) with a "type" string and an optional "params" object
// ({} when absent). Everything else is a *ValidationError whose fields are
// JSON pointers into the body: an unknown member ("/x"), a missing or
// unknown type ("/type", `unknown job type "x"`), params that are not an
// object, and whatever the type's schema reports ("/params/...").
//
// The request's Params are the params with the schema's defaults applied,
// in canonical form (RFC 8785); Canonical is the canonical form of
// {"params":...,"type":...} and Fingerprint its hex SHA-256. For params of
// integers these are the bytes the first decoder wrote, so fingerprints of
// stored jobs do not change.
func DecodeSubmission(body []byte, types schema.Types) (*Request, error) {
	v, err := canon.DecodeStrict(body)
	if err != nil {
		return nil, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, Userf(ErrMalformed, "body must be a JSON object")
	}
	return requestOf(top, len(body), types)
}

// requestOf validates one decoded submission object (DecodeSubmission, and
// each item of a batch: DecodeBatch); size is the length of its encoding,
// a hint for the canonical form's buffer.
func requestOf(top map[string]any, size int, types schema.Types) (*Request, error) {
	var err error
	var fe []FieldError
	flow, fe := flowOf(top)
	for k := range top {
		if k != "type" && k != "params" && !flowMembers[k] {
			fe = append(fe, FieldError{Field: "/" + canon.EscapePointerToken(k), Rule: "additionalProperties", Message: "is not allowed"})
		}
	}
	var sch schema.ParamsSchema
	rawType, present := top["type"]
	typ, isString := rawType.(string)
	switch {
	case !present:
		fe = append(fe, FieldError{Field: "/type", Rule: "required", Message: "is required"})
	case !isString:
		fe = append(fe, FieldError{Field: "/type", Rule: "type", Message: "must be a string"})
	default:
		var found bool
		if sch, found = types.Schema(typ); !found || sch == nil {
			shown := typ
			if len(shown) > MaxTypeNameLen { // no name is longer; do not echo a whole body
				shown = strings.ToValidUTF8(shown[:MaxTypeNameLen], "") + "..."
			}
			fe = append(fe, FieldError{Field: "/type", Rule: "enum", Message: fmt.Sprintf("unknown job type %q", shown)})
		}
	}
	params, present := top["params"]
	if !present {
		params = map[string]any{}
	} else if _, ok := params.(map[string]any); !ok {
		fe = append(fe, FieldError{Field: "/params", Rule: "type", Message: "must be an object"})
	}
	if len(fe) > 0 {
		return nil, validation(fe)
	}
	params, ve := sch.Apply(params)
	if ve != nil {
		return nil, ve
	}
	buf := make([]byte, 0, size+16)
	buf = append(buf, '{')
	buf = flow.appendBefore(buf)
	paramsStart := len(buf) + len(`"params":`)
	buf = append(buf, `"params":`...)
	if buf, err = canon.AppendCanonical(buf, params); err != nil {
		var ce *canon.CanonicalError
		if errors.As(err, &ce) {
			return nil, validation([]FieldError{{Field: "/params" + ce.Pointer, Rule: "range", Message: "has no exact JSON form: " + ce.Reason}})
		}
		return nil, err
	}
	paramsEnd := len(buf)
	buf = flow.appendAfter(buf)
	buf = append(buf, `,"type":`...)
	if buf, err = canon.AppendCanonical(buf, typ); err != nil {
		return nil, validation([]FieldError{{Field: "/type", Rule: "type", Message: "must be valid UTF-8"}})
	}
	buf = append(buf, '}')
	sum := sha256.Sum256(buf)
	return &Request{
		Type:        typ,
		Params:      json.RawMessage(buf[paramsStart:paramsEnd:paramsEnd]),
		Canonical:   buf,
		Fingerprint: hex.EncodeToString(sum[:]),
		Flow:        flow,
	}, nil
}

// validation sorts the field errors of a request's own members and keeps
// the first api.MaxFieldErrors: a body of 64 KiB holds thousands of
// unknown members.
func validation(fe []FieldError) error {
	sort.SliceStable(fe, func(i, j int) bool { return fe[i].Field < fe[j].Field })
	ve := &ValidationError{Errors: fe}
	if len(fe) > api.MaxFieldErrors {
		ve.Errors, ve.Truncated = fe[:api.MaxFieldErrors], true
	}
	return ve
}
