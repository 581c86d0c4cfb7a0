package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Request is a validated submission: its type, its params with defaults
// applied and numbers normalized, the canonical bytes of both and the
// fingerprint over them.
type Request struct {
	Type        string
	Params      json.RawMessage // canonical params
	Canonical   []byte          // canonical {"params":...,"type":...}
	Fingerprint string          // hex SHA-256 of Canonical
}

// DecodeSubmission parses a submission body and validates it against the
// declared types. The body must be one JSON object (DecodeStrict: a
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
func DecodeSubmission(body []byte, types Types) (*Request, error) {
	v, err := DecodeStrict(body)
	if err != nil {
		return nil, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: body must be a JSON object", ErrMalformed)
	}
	var fe []FieldError
	for k := range top {
		if k != "type" && k != "params" {
			fe = append(fe, FieldError{Field: "/" + EscapePointerToken(k), Rule: "additionalProperties", Message: "is not allowed"})
		}
	}
	var schema ParamsSchema
	rawType, present := top["type"]
	typ, isString := rawType.(string)
	switch {
	case !present:
		fe = append(fe, FieldError{Field: "/type", Rule: "required", Message: "is required"})
	case !isString:
		fe = append(fe, FieldError{Field: "/type", Rule: "type", Message: "must be a string"})
	default:
		var found bool
		if schema, found = types.Schema(typ); !found || schema == nil {
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
	params, fe = schema.Apply(params)
	if len(fe) > 0 {
		return nil, validation(fe)
	}
	canon := make([]byte, 0, len(body)+16)
	canon = append(canon, `{"params":`...)
	if canon, err = AppendCanonical(canon, params); err != nil {
		var ce *CanonicalError
		if errors.As(err, &ce) {
			return nil, validation([]FieldError{{Field: "/params" + ce.Pointer, Rule: "range", Message: "has no exact JSON form: " + ce.Reason}})
		}
		return nil, err
	}
	paramsEnd := len(canon)
	canon = append(canon, `,"type":`...)
	if canon, err = appendCanonicalString(canon, typ); err != nil {
		return nil, validation([]FieldError{{Field: "/type", Rule: "type", Message: "must be valid UTF-8"}})
	}
	canon = append(canon, '}')
	sum := sha256.Sum256(canon)
	return &Request{
		Type:        typ,
		Params:      json.RawMessage(canon[len(`{"params":`):paramsEnd:paramsEnd]),
		Canonical:   canon,
		Fingerprint: hex.EncodeToString(sum[:]),
	}, nil
}

// DecodeRequest parses a submission body, validates it against the registry
// and computes its canonical form. Invalid JSON is ErrMalformed; an unknown
// type or bad params is a *ValidationError.
func (reg *Registry) DecodeRequest(body []byte) (*Request, error) {
	// The common shape takes a reflection-free path; anything it does not
	// recognise, every error included, takes the general one below.
	if typ, params, ok := fastDecode(body); ok {
		if spec, found := reg.specs[typ]; found {
			if norm, fe := spec.normalize(params); len(fe) == 0 {
				return finishRequest(typ, norm)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrMalformed, jsonMessage(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrMalformed)
	}
	if top == nil {
		return nil, fmt.Errorf("%w: body must be a JSON object", ErrMalformed)
	}
	var fe []FieldError
	for k := range top {
		if k != "type" && k != "params" {
			fe = append(fe, FieldError{Field: k, Message: "unknown field"})
		}
	}
	typ, ok := top["type"].(string)
	if !ok || typ == "" {
		fe = append(fe, FieldError{Field: "type", Message: "required string"})
		return nil, validation(fe)
	}
	spec, ok := reg.specs[typ]
	if !ok {
		fe = append(fe, FieldError{Field: "type", Message: fmt.Sprintf("unknown job type %q", typ)})
		return nil, validation(fe)
	}
	var params map[string]any
	switch p := top["params"].(type) {
	case nil:
		if _, present := top["params"]; present {
			fe = append(fe, FieldError{Field: "params", Message: "must be an object"})
		}
		params = map[string]any{}
	case map[string]any:
		params = p
	default:
		fe = append(fe, FieldError{Field: "params", Message: "must be an object"})
	}
	norm, pfe := spec.normalize(params)
	fe = append(fe, pfe...)
	if len(fe) > 0 {
		return nil, validation(fe)
	}
	return finishRequest(typ, norm)
}

// finishRequest computes the canonical form and fingerprint of a valid
// request.
func finishRequest(typ string, norm map[string]any) (*Request, error) {
	canonParams, err := canonicalParams(norm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	canon := make([]byte, 0, len(canonParams)+len(typ)+24)
	canon = append(canon, `{"params":`...)
	canon = append(canon, canonParams...)
	canon = append(canon, `,"type":`...)
	canon = appendString(canon, typ)
	canon = append(canon, '}')
	sum := sha256.Sum256(canon)
	return &Request{Type: typ, Params: canonParams, Canonical: canon, Fingerprint: hex.EncodeToString(sum[:])}, nil
}

// canonicalParams writes normalized params as encoding/json writes a map:
// keys sorted, no white space. Fingerprints of stored jobs depend on these
// bytes, so they must never change; integers (every kind today) are written
// by hand, anything else by encoding/json.
func canonicalParams(norm map[string]any) (json.RawMessage, error) {
	keys := make([]string, 0, len(norm))
	for k := range norm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]byte, 0, 16*len(keys)+2)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, k)
		out = append(out, ':')
		switch v := norm[k].(type) {
		case int64:
			out = strconv.AppendInt(out, v, 10)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
	}
	return append(out, '}'), nil
}

func validation(fe []FieldError) error {
	sort.SliceStable(fe, func(i, j int) bool { return fe[i].Field < fe[j].Field })
	return &ValidationError{Errors: fe}
}

func jsonMessage(err error) string {
	if err == io.EOF {
		return "empty body"
	}
	return err.Error()
}
