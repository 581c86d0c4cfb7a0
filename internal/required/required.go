// Package required checks that a service was given every adapter its
// Stores declares. Each service takes a struct of its own naming the
// adapters it uses, system maps the provisioned resources to it,
// and a field left out is a mistake that the service's New reports by name
// rather than a nil dereference later.
package required

import (
	"fmt"
	"reflect"
)

// Fields returns an error naming the first nil field of the struct v,
// looking into the structs it holds: a nil interface, pointer, func, map,
// slice or channel, or an interface holding a nil pointer (what a mapping
// from a nil adapter gives). It returns nil when every field is set.
func Fields(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		return fmt.Errorf("required: %T is not a struct", v)
	}
	if name := nilField(rv); name != "" {
		return fmt.Errorf("%s.%s is nil: every field is required", rv.Type().Name(), name)
	}
	return nil
}

// nilField is the path of the first nil field of the struct s, or "".
func nilField(s reflect.Value) string {
	for i := range s.NumField() {
		f, name := s.Field(i), s.Type().Field(i).Name
		if f.Kind() == reflect.Struct {
			if inner := nilField(f); inner != "" {
				return name + "." + inner
			}
			continue
		}
		if isNil(f) {
			return name
		}
	}
	return ""
}

func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Interface:
		return v.IsNil() || isNil(v.Elem())
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}
