package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
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

// DecodeRequest parses a submission body, validates it against the registry
// and computes its canonical form. Invalid JSON is ErrMalformed; an unknown
// type or bad params is a *ValidationError.
func (reg *Registry) DecodeRequest(body []byte) (*Request, error) {
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
	canonParams, err := json.Marshal(norm) // map keys are sorted by encoding/json
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	canon, err := json.Marshal(struct {
		Params json.RawMessage `json:"params"`
		Type   string          `json:"type"`
	}{canonParams, typ})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	sum := sha256.Sum256(canon)
	return &Request{Type: typ, Params: canonParams, Canonical: canon, Fingerprint: hex.EncodeToString(sum[:])}, nil
}

func validation(fe []FieldError) error {
	sort.Slice(fe, func(i, j int) bool { return fe[i].Field < fe[j].Field })
	return &ValidationError{Errors: fe}
}

func jsonMessage(err error) string {
	if err == io.EOF {
		return "empty body"
	}
	return err.Error()
}
