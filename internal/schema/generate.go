package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// Generate derives a params schema (draft 2020-12) from a Go struct: one
// expanded document without $refs or $id, "additionalProperties": false on
// every struct, required from `json` tags without omitempty, bounds and
// defaults from `jsonschema:"maxLength=64,default=10"` tags. The result
// passes Compile, or Generate says which tag to add (every string needs
// maxLength, every slice maxItems; maps are refused, use a struct).
func Generate(v any) ([]byte, error) {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("generate params schema: %T is not a struct", v)
	}
	if err := noRecursion(t, map[reflect.Type]bool{}); err != nil {
		return nil, fmt.Errorf("generate params schema for %s: %w", t, err)
	}
	r := &jsonschema.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
	raw, err := json.Marshal(r.ReflectFromType(t))
	if err != nil {
		return nil, fmt.Errorf("generate params schema for %s: %w", t, err)
	}
	if _, err := Compile(raw); err != nil {
		var se *Error
		if errors.As(err, &se) {
			switch se.Keyword {
			case "maxLength":
				return nil, fmt.Errorf("generate params schema for %s: %w; add a `jsonschema:\"maxLength=N\"` tag to that field", t, err)
			case "maxItems":
				return nil, fmt.Errorf("generate params schema for %s: %w; add a `jsonschema:\"maxItems=N\"` tag to that field", t, err)
			case "additionalProperties":
				return nil, fmt.Errorf("generate params schema for %s: %w; use a struct instead of a map", t, err)
			}
		}
		return nil, fmt.Errorf("generate params schema for %s: %w", t, err)
	}
	return raw, nil
}

// noRecursion refuses self-referencing types, which an expanded schema
// cannot describe (the reflector would not end).
func noRecursion(t reflect.Type, onPath map[reflect.Type]bool) error {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return noRecursion(t.Elem(), onPath)
	case reflect.Map:
		return noRecursion(t.Elem(), onPath)
	case reflect.Struct:
		if onPath[t] {
			return fmt.Errorf("type %s contains itself", t)
		}
		onPath[t] = true
		defer delete(onPath, t)
		for i := range t.NumField() {
			if err := noRecursion(t.Field(i).Type, onPath); err != nil {
				return err
			}
		}
	}
	return nil
}
