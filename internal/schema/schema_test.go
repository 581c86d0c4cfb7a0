package schema

import (
	"encoding/json"
	"fmt"
	"github.com/jobgate/jobgate/internal/canon"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

const permitReport = `{"type":"object","additionalProperties":false,"required":["case_id","revision"],"properties":{"case_id":{"type":"integer","minimum":1},"revision":{"type":"integer","minimum":1},"pages":{"type":"integer","minimum":1,"maximum":2000,"default":10}}}`

// rich exercises most keywords, nested objects and nested defaults.
const rich = `{
  "type": "object", "additionalProperties": false, "required": ["case_id", "title"],
  "properties": {
    "case_id": {"type": "integer", "minimum": 1, "maximum": 2000},
    "ratio":   {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25},
    "title":   {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
    "kind":    {"enum": ["draft", "final"]},
    "fixed":   {"const": 7},
    "when":    {"type": "string", "format": "date", "maxLength": 10},
    "flag":    {"type": "boolean"},
    "maybe":   {"type": ["string", "null"], "maxLength": 3},
    "tags":    {"type": "array", "minItems": 1, "maxItems": 2, "uniqueItems": true, "items": {"type": "string", "maxLength": 3}},
    "opts": {
      "type": "object", "additionalProperties": false, "required": ["mode"], "default": {"mode": "auto"},
      "properties": {
        "mode":  {"enum": ["auto", "manual"]},
        "color": {"type": "string", "maxLength": 10, "default": "blue"},
        "size":  {"type": "object", "additionalProperties": false, "default": {},
                  "properties": {"w": {"type": "integer", "default": 3}, "h": {"type": "integer"}}}
      }
    },
    "ref":   {"$ref": "#/$defs/box"},
    "both":  {"allOf": [{"$ref": "#/$defs/box"}, {"properties": {"extra": {"type": "integer", "default": 1}}}]}
  },
  "$defs": {
    "box": {"type": "object", "additionalProperties": false, "maxProperties": 3,
            "properties": {"depth": {"type": "integer", "default": 2}, "extra": {"type": "integer"}}}
  }
}`

func mustCompile(t *testing.T, raw string) *Schema {
	t.Helper()
	s, err := Compile([]byte(raw))
	require.NoError(t, err)
	return s
}

func decode(t *testing.T, s string) any {
	t.Helper()
	v, err := canon.DecodeStrict([]byte(s))
	require.NoError(t, err, s)
	return v
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := canon.AppendCanonical(nil, v)
	require.NoError(t, err)
	return string(b)
}

func TestApplyDefaults(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, rich)
	for _, c := range []struct{ in, want string }{
		{`{"case_id":1,"title":"ab"}`, `{"case_id":1,"opts":{"color":"blue","mode":"auto","size":{"w":3}},"title":"ab"}`},
		{`{"case_id":1,"title":"ab","opts":{"mode":"manual","size":{"h":1}}}`, `{"case_id":1,"opts":{"color":"blue","mode":"manual","size":{"h":1,"w":3}},"title":"ab"}`},
		{`{"case_id":1,"title":"ab","opts":{"mode":"manual","color":"red","size":{"w":9}}}`, `{"case_id":1,"opts":{"color":"red","mode":"manual","size":{"w":9}},"title":"ab"}`},
		{`{"case_id":1,"title":"ab","ref":{}}`, `{"case_id":1,"opts":{"color":"blue","mode":"auto","size":{"w":3}},"ref":{"depth":2},"title":"ab"}`},
		{`{"case_id":1,"title":"ab","both":{"depth":5}}`, `{"both":{"depth":5,"extra":1},"case_id":1,"opts":{"color":"blue","mode":"auto","size":{"w":3}},"title":"ab"}`},
	} {
		in := decode(t, c.in)
		before := canonical(t, in)
		out, fe := s.Apply(in)
		require.Empty(t, fe, c.in)
		require.Equal(t, c.want, canonical(t, out), c.in)
		require.Equal(t, before, canonical(t, in), "Apply must not modify its input")
	}
	// Defaults are copies: changing one result leaves the next alone.
	out, fe := s.Apply(decode(t, `{"case_id":1,"title":"ab"}`))
	require.Empty(t, fe)
	out.(map[string]any)["opts"].(map[string]any)["size"].(map[string]any)["w"] = json.Number("99")
	again, _ := s.Apply(decode(t, `{"case_id":1,"title":"ab"}`))
	require.Equal(t, json.Number("3"), again.(map[string]any)["opts"].(map[string]any)["size"].(map[string]any)["w"])
}

func TestApplyErrors(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, rich)
	type fe struct{ field, rule string }
	for _, c := range []struct {
		in   string
		want []fe
	}{
		{`{}`, []fe{{"/params/case_id", "required"}, {"/params/title", "required"}}},
		{`[]`, []fe{{"/params", "type"}}},
		{`{"case_id":0,"title":"ab"}`, []fe{{"/params/case_id", "minimum"}}},
		{`{"case_id":2001,"title":"ab"}`, []fe{{"/params/case_id", "maximum"}}},
		{`{"case_id":"1","title":"ab"}`, []fe{{"/params/case_id", "type"}}},
		{`{"case_id":1.5,"title":"ab"}`, []fe{{"/params/case_id", "type"}}},
		{`{"case_id":46.99999999999999999,"title":"ab"}`, []fe{{"/params/case_id", "type"}}},
		{`{"case_id":1,"title":"ab","ratio":0}`, []fe{{"/params/ratio", "exclusiveMinimum"}}},
		{`{"case_id":1,"title":"ab","ratio":1}`, []fe{{"/params/ratio", "exclusiveMaximum"}}},
		{`{"case_id":1,"title":"ab","ratio":0.3}`, []fe{{"/params/ratio", "multipleOf"}}},
		{`{"case_id":1,"title":"a"}`, []fe{{"/params/title", "minLength"}}},
		{`{"case_id":1,"title":"abcdef"}`, []fe{{"/params/title", "maxLength"}}},
		{`{"case_id":1,"title":"AB"}`, []fe{{"/params/title", "pattern"}}},
		{`{"case_id":1,"title":"ab","kind":"x"}`, []fe{{"/params/kind", "enum"}}},
		{`{"case_id":1,"title":"ab","fixed":8}`, []fe{{"/params/fixed", "const"}}},
		{`{"case_id":1,"title":"ab","when":"2026-13-01"}`, []fe{{"/params/when", "format"}}},
		{`{"case_id":1,"title":"ab","flag":1}`, []fe{{"/params/flag", "type"}}},
		{`{"case_id":1,"title":"ab","maybe":1}`, []fe{{"/params/maybe", "type"}}},
		{`{"case_id":1,"title":"ab","tags":[]}`, []fe{{"/params/tags", "minItems"}}},
		{`{"case_id":1,"title":"ab","tags":["a","b","c"]}`, []fe{{"/params/tags", "maxItems"}}},
		{`{"case_id":1,"title":"ab","tags":["a","a"]}`, []fe{{"/params/tags", "uniqueItems"}}},
		{`{"case_id":1,"title":"ab","tags":["abcd"]}`, []fe{{"/params/tags/0", "maxLength"}}},
		{`{"case_id":1,"title":"ab","opts":{}}`, []fe{{"/params/opts/mode", "required"}}},
		{`{"case_id":1,"title":"ab","opts":{"mode":"auto","size":{"d":1}}}`, []fe{{"/params/opts/size/d", "additionalProperties"}}},
		{`{"case_id":1,"title":"ab","ref":{"depth":"x"}}`, []fe{{"/params/ref/depth", "type"}}},
		{`{"case_id":1,"title":"ab","ref":{"extra":1,"x":1}}`, []fe{{"/params/ref/x", "additionalProperties"}}},
		{`{"case_id":1,"title":"ab","a/b~c":1,"z":2}`, []fe{{"/params/a~1b~0c", "additionalProperties"}, {"/params/z", "additionalProperties"}}},
		{`{"case_id":1e400,"title":"ab"}`, []fe{{"/params/case_id", "range"}}},
		{`{"case_id":1,"title":"ab","ratio":1e-10000000}`, []fe{{"/params/ratio", "range"}}},
		{`{"case_id":1,"title":"ab","ratio":1e1000000}`, []fe{{"/params/ratio", "range"}}},
		{`{"case_id":-1,"title":"x","kind":1}`, []fe{{"/params/case_id", "minimum"}, {"/params/kind", "enum"}, {"/params/title", "minLength"}}},
	} {
		errs := fieldsOf(s.Apply(decode(t, c.in)))
		got := make([]fe, len(errs))
		for i, e := range errs {
			got[i] = fe{e.Field, e.Rule}
			require.NotEmpty(t, e.Message, c.in)
		}
		require.Equal(t, c.want, got, "%s: %+v", c.in, errs)
	}
}

func TestApplyMessages(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, permitReport)
	errs := fieldsOf(s.Apply(decode(t, `{"revision":0,"pages":2001,"color":1}`)))
	require.Equal(t, []api.FieldError{
		{Field: "/params/case_id", Rule: "required", Message: "is required"},
		{Field: "/params/color", Rule: "additionalProperties", Message: "is not allowed"},
		{Field: "/params/pages", Rule: "maximum", Message: "must be at most 2000"},
		{Field: "/params/revision", Rule: "minimum", Message: "must be at least 1"},
	}, errs)
	errs = fieldsOf(s.Apply(decode(t, `{"case_id":1.5,"revision":"x"}`)))
	require.Equal(t, []api.FieldError{
		{Field: "/params/case_id", Rule: "type", Message: "must be an integer"},
		{Field: "/params/revision", Rule: "type", Message: "must be an integer"},
	}, errs)
	r := mustCompile(t, rich)
	errs = fieldsOf(r.Apply(decode(t, `{"case_id":1,"title":"ab","kind":"x","maybe":2}`)))
	require.Equal(t, []api.FieldError{
		{Field: "/params/kind", Rule: "enum", Message: `must be one of "draft", "final"`},
		{Field: "/params/maybe", Rule: "type", Message: "must be null or a string"},
	}, errs)
}

func TestPermitReportSchema(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, permitReport)
	for _, in := range []string{`{"case_id":47,"revision":29}`, `{"case_id":47.0,"revision":29,"pages":10}`, `{"pages":1e1,"revision":2.9e1,"case_id":47}`} {
		out, fe := s.Apply(decode(t, in))
		require.Empty(t, fe, in)
		require.Equal(t, `{"case_id":47,"pages":10,"revision":29}`, canonical(t, out), in)
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, schema, pointer, keyword string }{
		{"not an object schema", `{"type":"array","maxItems":1}`, "", "type"},
		{"no type", `{"properties":{}}`, "", "type"},
		{"type list at the top", `{"type":["object"],"additionalProperties":false}`, "", "type"},
		{"unbounded string", `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"object","additionalProperties":false,"properties":{"name":{"type":"string"}}}}}`, "/properties/a/properties/name", "maxLength"},
		{"unbounded nullable string", `{"type":"object","additionalProperties":false,"properties":{"s":{"type":["null","string"]}}}`, "/properties/s", "maxLength"},
		{"unbounded array", `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","items":{"type":"integer"}}}}`, "/properties/xs", "maxItems"},
		{"unbounded items", `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":3,"items":{"type":"string"}}}}`, "/properties/xs/items", "maxLength"},
		{"open object", `{"type":"object","properties":{"a":{"type":"integer"}}}`, "", "additionalProperties"},
		{"open nested object", `{"type":"object","additionalProperties":false,"properties":{"o":{"type":"object","additionalProperties":{"type":"integer"}}}}`, "/properties/o", "additionalProperties"},
		{"pattern properties", `{"type":"object","additionalProperties":false,"patternProperties":{"^x":{"type":"integer"}}}`, "", "additionalProperties"},
		{"unbounded string in $defs", `{"type":"object","additionalProperties":false,"$defs":{"a/b":{"type":"string"}}}`, "/$defs/a~1b", "maxLength"},
		{"unbounded string in anyOf", `{"type":"object","additionalProperties":false,"properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}`, "/properties/v/anyOf/1", "maxLength"},
		{"remote $ref", `{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"https://example.com/a.json"}}}`, "/properties/a/$ref", "$ref"},
		{"relative $ref", `{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"a.json#/x"}}}`, "/properties/a/$ref", "$ref"},
		{"file $ref", `{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "/properties/a/$ref", "$ref"},
		{"$dynamicRef", `{"type":"object","additionalProperties":false,"properties":{"a":{"$dynamicRef":"https://example.com/a.json"}}}`, "/properties/a/$dynamicRef", "$dynamicRef"},
		{"anchor $ref", `{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"#s"}},"$defs":{"s":{"$anchor":"s","type":"integer"}}}`, "/properties/a/$ref", "$ref"},
		{"$ref to an unbounded string outside the keywords", `{"type":"object","additionalProperties":false,"properties":{"s":{"$ref":"#/x/y"}},"x":{"y":{"type":"string"}}}`, "/x/y", "maxLength"},
		{"$ref to an unbounded string inside its target", `{"type":"object","additionalProperties":false,"properties":{"s":{"$ref":"#/x"}},"x":{"type":"object","additionalProperties":false,"properties":{"t":{"type":"string"}}}}`, "/x/properties/t", "maxLength"},
		{"$id", `{"$id":"https://example.com/p.json","type":"object","additionalProperties":false}`, "/$id", "$id"},
		{"nested $id", `{"type":"object","additionalProperties":false,"$defs":{"a":{"$id":"https://example.com/a.json","type":"integer"}}}`, "/$defs/a/$id", "$id"},
		{"other draft", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false}`, "/$schema", "$schema"},
		{"nested $schema", `{"type":"object","additionalProperties":false,"$defs":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`, "/$defs/a/$schema", "$schema"},
		{"invalid default", `{"type":"object","additionalProperties":false,"properties":{"pages":{"type":"integer","maximum":5,"default":10}}}`, "/properties/pages/default", "default"},
		{"invalid nested default", `{"type":"object","additionalProperties":false,"properties":{"o":{"type":"object","additionalProperties":false,"default":{"x":1},"properties":{"y":{"type":"integer"}}}}}`, "/properties/o/default", "default"},
		{"invalid default behind a $ref", `{"type":"object","additionalProperties":false,"properties":{"s":{"$ref":"#/x"}},"x":{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer","default":"ten"}}}}`, "/x/properties/n/default", "default"},
		{"invalid default in $defs", `{"type":"object","additionalProperties":false,"$defs":{"s":{"type":"string","maxLength":2,"default":"abc"}}}`, "/$defs/s/default", "default"},
		{"metaschema", `{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer","minimum":"one"}}}`, "", ""},
		{"bad regexp", `{"type":"object","additionalProperties":false,"properties":{"s":{"type":"string","maxLength":3,"pattern":"(?<=a)b"}}}`, "", ""},
		{"dangling $ref", `{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"#/$defs/nope"}}}`, "", ""},
	} {
		_, err := Compile([]byte(c.schema))
		var se *Error
		require.ErrorAs(t, err, &se, c.name)
		require.Equal(t, c.pointer, se.Pointer, "%s: %v", c.name, err)
		require.Equal(t, c.keyword, se.Keyword, "%s: %v", c.name, err)
		require.NotContains(t, err.Error(), location, c.name)
	}
	for _, raw := range []string{`{"type":"object",`, `{"type":"object","type":"object"}`, ``} {
		_, err := Compile([]byte(raw))
		require.ErrorIs(t, err, api.ErrMalformed, raw)
	}
	// Bounded the other ways are fine.
	for _, ok := range []string{
		permitReport, rich,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","maxProperties":4,"additionalProperties":{"type":"integer"}}`,
		`{"type":"object","additionalProperties":false,"properties":{"s":{"type":"string","enum":["a","b"]},"c":{"type":"string","const":"x"},"t":{"type":"array","prefixItems":[{"type":"integer"}],"items":false}}}`,
		`{"type":"object","unevaluatedProperties":false,"allOf":[{"properties":{"a":{"type":"integer"}}}]}`,
		`{"type":"object","additionalProperties":false,"properties":{"tree":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","additionalProperties":false,"properties":{"kids":{"type":"array","maxItems":2,"items":{"$ref":"#/$defs/node"}}}}}}`,
		`{"type":"object","additionalProperties":false,"properties":{"a b%":{"type":"integer","default":1}}}`,
	} {
		_, err := Compile([]byte(ok))
		require.NoError(t, err, ok)
	}
}

// The compiler never loads anything: a remote $ref is refused by the check
// and, behind it, by the loader, and a server at that address sees nothing.
func TestRemoteRefLoadsNothing(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"integer"}`))
	}))
	defer srv.Close()
	ref := srv.URL + "/a.json"
	raw := fmt.Sprintf(`{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":%q}}}`, ref)
	_, err := Compile([]byte(raw))
	require.Error(t, err)
	require.Contains(t, err.Error(), ref)

	// Behind the check: the library with our loader.
	c := newCompiler()
	require.NoError(t, c.AddResource(location, decode(t, raw)))
	_, err = c.Compile(location)
	require.ErrorContains(t, err, "refused")
	fileRaw := `{"type":"object","properties":{"a":{"$ref":"file:///etc/hostname"}}}`
	c = newCompiler()
	require.NoError(t, c.AddResource(location, decode(t, fileRaw)))
	_, err = c.Compile(location)
	require.ErrorContains(t, err, "refused")
	require.Zero(t, hits.Load())
}

func TestRecursiveDefaultsEnd(t *testing.T) {
	t.Parallel()
	// Each level defaults its child: Apply stops at the depth bound.
	s := mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","additionalProperties":false,"properties":{"child":{"$ref":"#/$defs/n","default":{}}}}}}`)
	out, fe := s.Apply(decode(t, `{"n":{}}`))
	require.Empty(t, fe)
	depth := 0
	for v := out.(map[string]any)["n"]; v != nil; depth++ {
		v = v.(map[string]any)["child"]
	}
	require.LessOrEqual(t, depth, canon.MaxDepth+3)
	require.Greater(t, depth, 3)
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	var r Registry // the zero value works
	_, ok := r.Schema("permit_report")
	require.False(t, ok)
	s := mustCompile(t, permitReport)
	r.Set("permit_report", s)
	got, ok := r.Schema("permit_report")
	require.True(t, ok)
	require.NotNil(t, got)
	looked, ok := r.Lookup("permit_report")
	require.True(t, ok)
	require.Same(t, s, looked)
	require.Equal(t, []string{"permit_report"}, r.Names())
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 200 {
				if ps, ok := r.Schema("permit_report"); ok {
					_, _ = ps.Apply(map[string]any{"case_id": json.Number("1"), "revision": json.Number("1")})
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := range 200 {
				name := fmt.Sprintf("t%d_%d", i, j%3)
				r.Set(name, s)
				r.Delete(name)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, []string{"permit_report"}, r.Names())
	r.Delete("permit_report")
	_, ok = r.Schema("permit_report")
	require.False(t, ok)
	var types Types = &r
	ps, ok := types.Schema("permit_report")
	require.False(t, ok)
	require.Nil(t, ps, "no typed nil")
}

func TestSchemaJSONIsCanonical(t *testing.T) {
	t.Parallel()
	a := mustCompile(t, permitReport)
	b := mustCompile(t, `{ "properties": {"pages":{"default":10,"maximum":2000,"minimum":1,"type":"integer"},
	  "revision":{"minimum":1,"type":"integer"},"case_id":{"minimum":1.0,"type":"integer"}},
	  "required":["case_id","revision"], "additionalProperties":false, "type":"object" }`)
	require.Equal(t, string(a.JSON()), string(b.JSON()))
	require.True(t, json.Valid(a.JSON()))
}

type permitParams struct {
	CaseID   int `json:"case_id" jsonschema:"minimum=1"`
	Revision int `json:"revision" jsonschema:"minimum=1"`
	Pages    int `json:"pages,omitempty" jsonschema:"minimum=1,maximum=2000,default=10"`
}

type letterParams struct {
	To      string   `json:"to" jsonschema:"maxLength=64,format=email"`
	Lines   []string `json:"lines" jsonschema:"maxItems=20,maxLength=80"`
	Options struct {
		Color string `json:"color,omitempty" jsonschema:"maxLength=10,default=blue"`
	} `json:"options,omitempty"`
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	raw, err := Generate(permitParams{})
	require.NoError(t, err)
	require.NotContains(t, string(raw), "$ref")
	require.NotContains(t, string(raw), "$id")
	s := mustCompile(t, string(raw))
	out, fe := s.Apply(decode(t, `{"case_id":47,"revision":29}`))
	require.Empty(t, fe)
	require.Equal(t, `{"case_id":47,"pages":10,"revision":29}`, canonical(t, out))
	_, ve := s.Apply(decode(t, `{"case_id":47,"x":1}`))
	require.Equal(t, []api.FieldError{
		{Field: "/params/revision", Rule: "required", Message: "is required"},
		{Field: "/params/x", Rule: "additionalProperties", Message: "is not allowed"},
	}, ve.Errors)

	raw, err = Generate(&letterParams{})
	require.NoError(t, err)
	s = mustCompile(t, string(raw))
	_, ve = s.Apply(decode(t, `{"to":"nobody","lines":[]}`))
	require.Equal(t, []api.FieldError{{Field: "/params/to", Rule: "format", Message: "must be a valid email"}}, ve.Errors)

	type unbounded struct {
		Name string `json:"name"`
	}
	_, err = Generate(unbounded{})
	require.ErrorContains(t, err, `jsonschema:"maxLength=N"`)
	require.ErrorContains(t, err, "/properties/name")
	type list struct {
		Xs []int `json:"xs"`
	}
	_, err = Generate(list{})
	require.ErrorContains(t, err, `jsonschema:"maxItems=N"`)
	type withMap struct {
		M map[string]int `json:"m"`
	}
	_, err = Generate(withMap{})
	require.ErrorContains(t, err, "use a struct instead of a map")
	type node struct {
		Kids []node `json:"kids" jsonschema:"maxItems=2"`
	}
	_, err = Generate(node{})
	require.ErrorContains(t, err, "contains itself")
	_, err = Generate(3)
	require.Error(t, err)
}

func BenchmarkApplyPermitReport(b *testing.B) {
	s, err := Compile([]byte(permitReport))
	require.NoError(b, err)
	params := map[string]any{"case_id": json.Number("47"), "revision": json.Number("29"), "pages": json.Number("63")}
	b.ReportAllocs()
	for b.Loop() {
		if _, fe := s.Apply(params); fe != nil {
			b.Fatal(fe)
		}
	}
}

// fieldsOf is Apply's list of problems (nil when it found none).
func fieldsOf(_ any, ve *api.ValidationError) []api.FieldError {
	if ve == nil {
		return nil
	}
	return ve.Errors
}
