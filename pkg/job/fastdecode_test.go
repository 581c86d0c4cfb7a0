package job

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// slowDecode is the general path's parse, for comparison.
func slowDecode(body []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top map[string]any
	if dec.Decode(&top) != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return top, top != nil
}

// checkFastDecode: whatever the fast path accepts, the general one accepts
// with the same type and params.
func checkFastDecode(t *testing.T, body []byte) bool {
	typ, params, ok := fastDecode(body)
	if !ok {
		return false
	}
	top, valid := slowDecode(body)
	require.True(t, valid, "fast path accepted what encoding/json refuses: %q", body)
	require.Len(t, top, 2, "%q", body)
	require.Equal(t, top["type"], typ, "%q", body)
	require.Equal(t, top["params"], params, "%q", body)
	return true
}

func TestFastDecodeAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	accepted := []string{
		`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`,
		" \n{ \"params\" : { \"revision\" : 2.9e1 , \"case_id\":-0.5E-3 } ,\t\"type\":\"x\" }\r\n",
		`{"type":"a","params":{}}`,
	}
	for _, s := range accepted {
		require.True(t, checkFastDecode(t, []byte(s)), "fast path should take %q", s)
	}
	rejected := []string{
		``, `{}`, `{"type":"a"}`, `{"params":{}}`, `{"type":"","params":{}}`,
		`{"type":"a","params":{},"x":1}`, `{"type":"a","type":"b","params":{}}`,
		`{"type":"a","params":{"n":1,"n":2}}`, `{"type":"a","params":{"n":"1"}}`,
		`{"type":"a","params":{"n":01}}`, `{"type":"a","params":{"n":1.}}`, `{"type":"a","params":{"n":.5}}`,
		`{"type":"a","params":{"n":1e}}`, `{"type":"a","params":{"n":-}}`, `{"type":"a","params":{"n":null}}`,
		`{"type":"a\u0062","params":{}}`, `{"type":"é","params":{}}`, `{"type":"a","params":{}} x`,
		`{"type":"a","params":{}}{}`, `{"type":"a","params":{},}`, `{"type":"a","params":{"n":1,}}`,
		`{"type":"a","params":null}`, `{"type":1,"params":{}}`,
	}
	for _, s := range rejected {
		require.False(t, checkFastDecode(t, []byte(s)), "fast path should leave %q to the general one", s)
	}
}

// FuzzFastDecode: the fast path never accepts an input differently from
// the general one.
func FuzzFastDecode(f *testing.F) {
	f.Add([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`))
	f.Add([]byte(`{"params":{"revision":2.9e1,"case_id":-0.5E-3},"type":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) { checkFastDecode(t, body) })
}
