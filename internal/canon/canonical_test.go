package canon

import (
	"github.com/jobgate/jobgate/pkg/api"

	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
func TestCanonicalNumbersRFC8785AppendixB(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"}, // minus zero
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"}, // round to even
	} {
		u, err := strconv.ParseUint(c.bits, 16, 64)
		require.NoError(t, err)
		f := math.Float64frombits(u)
		got, err := AppendCanonical(nil, f)
		require.NoError(t, err, c.bits)
		require.Equal(t, c.want, string(got), c.bits)
		// The canonical text of the literal is the same text.
		got, err = Canonicalize([]byte(c.want))
		require.NoError(t, err, c.want)
		require.Equal(t, c.want, string(got), c.want)
	}
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		_, err := AppendCanonical(nil, math.Float64frombits(bits))
		var ce *CanonicalError
		require.ErrorAs(t, err, &ce, "%x must be refused", bits)
	}
}

func TestCanonicalizeRFC8785Samples(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ in, want string }{
		// RFC 8785 §3.2.2 (the cyberphone "values" vector).
		"values": {`{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785 §3.2.3: sorting by UTF-16 code units puts the emoji (a
		// surrogate pair, D83D DE00) before U+FB33.
		"sorting": {`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		"arrays":       {`[56, {"d": true, "10": null, "1": [ ]}]`, `[56,{"1":[],"10":null,"d":true}]`},
		"french":       {`{"peach":"a","péché":"b","pêche":"c","sin":"d"}`, `{"peach":"a","péché":"b","pêche":"c","sin":"d"}`},
		"structures":   {`{"1": {"f": {"f": "hi","F": 5} ,"\n": 56.0}, "10": { }, "": "empty", "a": { }, "111": [ {"e": "yes","E": "no" } ], "A": { }}`, `{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],"A":{},"a":{}}`},
		"unnormalized": {`{"Unnormalized Unicode":"A\u030a"}`, "{\"Unnormalized Unicode\":\"A\u030a\"}"},
		"controls":     {`"\u0000\u001f\u007f\u2028 <>&"`, "\"\\u0000\\u001f\u007f\u2028 <>&\""},
		"permit":       {"{ \"type\": \"permit_report\", \"params\": {\"revision\": 29.0, \"pages\": 6.3e1, \"case_id\": 47} }", `{"params":{"case_id":47,"pages":63,"revision":29},"type":"permit_report"}`},
	} {
		got, err := Canonicalize([]byte(c.in))
		require.NoError(t, err, name)
		require.Equal(t, c.want, string(got), name)
		again, err := Canonicalize(got)
		require.NoError(t, err, name)
		require.Equal(t, string(got), string(again), "%s: canonical form is a fixed point", name)
	}
}

func TestCanonicalNumberLiterals(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]string{
		"0": "0", "-0": "0", "-0.0": "0", "0e10": "0", "47": "47", "47.0": "47", "4.7e1": "47", "470e-1": "47",
		"-12": "-12", "1E30": "1e+30", "1e21": "1e+21", "1e20": "100000000000000000000", "0.1": "0.1",
		"1e-7": "1e-7", "0.000001": "0.000001", "1e-400": "0", "46.99999999999999999": "47",
		"9007199254740992": "9007199254740992", "-9007199254740992": "-9007199254740992",
		"9007199254740992.0": "9007199254740992", "295147905179352830000": "295147905179352830000",
		"999999999999999": "999999999999999", "1000000000000000": "1000000000000000",
		"123456789012345678e-3": "123456789012345.67",
	} {
		got, err := AppendCanonical(nil, json.Number(lit))
		require.NoError(t, err, lit)
		require.Equal(t, want, string(got), lit)
	}
	// Integers a double would silently turn into other integers, and
	// numbers out of a double's range.
	for _, lit := range []string{
		"9007199254740993", "-9007199254740993", "12345678901234567890", "9007199254740993.0",
		"9.007199254740993e15", "1152921504606846976", "1e400", "-1e400", "1e99999999999999999999",
		"0x10", "NaN", "Inf", "1_0", "+1", "01", "1.", ".5", "", "-", "1e",
	} {
		_, err := AppendCanonical(nil, json.Number(lit))
		var ce *CanonicalError
		require.ErrorAs(t, err, &ce, lit)
	}
	// Go integers follow the same rule.
	got, err := AppendCanonical(nil, map[string]any{"a": 1 << 53, "b": int64(-7), "c": uint64(1 << 60)})
	require.Error(t, err)
	require.Nil(t, got)
	got, err = AppendCanonical(nil, map[string]any{"a": 1 << 53, "b": int64(-7), "c": 0.5})
	require.NoError(t, err)
	require.Equal(t, `{"a":9007199254740992,"b":-7,"c":0.5}`, string(got))
}

func TestCanonicalErrorNamesThePointer(t *testing.T) {
	t.Parallel()
	v, err := DecodeStrict([]byte(`{"a":[1,{"b/c":[{"d~":9007199254740993}]}]}`))
	require.NoError(t, err)
	_, err = AppendCanonical(nil, v)
	var ce *CanonicalError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "/a/1/b~1c/0/d~0", ce.Pointer)
	_, err = AppendCanonical(nil, map[string]any{"x": "\xff"})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "/x", ce.Pointer)
	_, err = AppendCanonical(nil, map[string]any{"x": struct{}{}})
	require.ErrorAs(t, err, &ce)
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	sorted := []string{"", "\r", "1", "10", "A", "a", "aa", "\u0080", "ö", "€", "\U00010000", "😀", "\U0010FFFF", "\ue000", "\ufb33", "\uffff"}
	for i := range sorted {
		for j := range sorted {
			got := compareUTF16(sorted[i], sorted[j])
			switch {
			case i < j:
				require.Negative(t, got, "%q < %q", sorted[i], sorted[j])
			case i > j:
				require.Positive(t, got, "%q > %q", sorted[i], sorted[j])
			default:
				require.Zero(t, got)
			}
		}
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	v, err := DecodeStrict([]byte(" {\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"], \"b\": {}} \n"))
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"a": []any{json.Number("1"), json.Number("-2.5e3"), true, false, nil, "xé😀\n"},
		"b": map[string]any{},
	}, v)

	for body, wantMsg := range map[string]string{
		`{"type":"a","type":"b"}`:               `duplicate member name "type" at the top level`,
		`{"params":{"case_id":47,"case_id":1}}`: `duplicate member name "case_id" at /params`,
		`{"a":[0,{"b":{"c":1,"c":1}}]}`:         `duplicate member name "c" at /a/1/b`,
		`{"a/b":{"m~n":{"x":1,"x":2}}}`:         `duplicate member name "x" at /a~1b/m~0n`,
		`{"\u0061":1,"a":2}`:                    `duplicate member name "a" at the top level`,
		``:                                      "empty body",
		`  `:                                    "empty body",
		`{} {}`:                                 "trailing data",
		`{}x`:                                   "trailing data",
		`{`:                                     "unexpected end",
		`{"a":1,}`:                              "invalid character '}'",
		`[1,]`:                                  "invalid character ']'",
		`01`:                                    "trailing data",
		`1.`:                                    "unexpected end",
		`.5`:                                    "invalid character '.'",
		`-`:                                     "unexpected end",
		`+1`:                                    "invalid character '+'",
		`tru`:                                   "unexpected end",
		`nul`:                                   "unexpected end",
		`NaN`:                                   "invalid character 'N'",
		"\"a\tb\"":                              "control character",
		"\"\xff\"":                              "invalid UTF-8",
		"\"\xed\xa0\x80\"":                      "invalid UTF-8", // an encoded surrogate
		`"\ud800"`:                              "lone surrogate",
		`"\udc00\ud800"`:                        "lone surrogate",
		`"\ud800\u0041"`:                        "lone surrogate",
		`"\x"`:                                  "invalid escape",
		`"\u12"`:                                "invalid \\u escape",
		"\xef\xbb\xbf{}":                        "invalid byte 0xef",
		`{"a" 1}`:                               "invalid character '1'",
		`{1:1}`:                                 "invalid character '1'",
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1): "nesting deeper than 64",
	} {
		_, err := DecodeStrict([]byte(body))
		require.ErrorIs(t, err, api.ErrMalformed, "%q", body)
		require.Contains(t, err.Error(), wantMsg, "%q", body)
	}
	_, err = DecodeStrict([]byte(strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)))
	require.NoError(t, err, "MaxDepth levels are fine")
	_, err = DecodeStrict([]byte(strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)))
	require.ErrorIs(t, err, api.ErrMalformed)
}

// checkStrictAgrees: what DecodeStrict accepts, encoding/json accepts with
// the same value.
func checkStrictAgrees(t *testing.T, data []byte) {
	v, err := DecodeStrict(data)
	if err != nil {
		if !errors.Is(err, api.ErrMalformed) {
			t.Fatalf("DecodeStrict: error without api.ErrMalformed: %v", err)
		}
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("DecodeStrict accepted %q, encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(want, v) {
		t.Fatalf("DecodeStrict(%q) = %#v, encoding/json = %#v", data, v, want)
	}
}

// FuzzCanonicalize: no panic; whatever canonicalizes is a fixed point, valid
// JSON, and decodes (encoding/json) to the same value as its input.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"literals":[null,true,false]}`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`[9007199254740993, 1e400, -0, "\u0000\"\\"]`, `{"a":{"b":1,"b":2}}`, `"\ud800"`, `[[[[[]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStrictAgrees(t, data)
		c, err := Canonicalize(data)
		if err != nil {
			var ce *CanonicalError
			if !errors.Is(err, api.ErrMalformed) && !errors.As(err, &ce) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %q", c)
		}
		again, err := Canonicalize(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("canonical form %q is not a fixed point: %q, %v", c, again, err)
		}
		var in, out any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatalf("encoding/json refuses accepted input %q: %v", data, err)
		}
		if err := json.Unmarshal(c, &out); err != nil {
			t.Fatalf("encoding/json refuses canonical form %q: %v", c, err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("canonical form %q decodes to %#v, input %q to %#v", c, out, data, in)
		}
	})
}

func BenchmarkCanonicalize(b *testing.B) {
	body := []byte(`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(body); err != nil {
			b.Fatal(err)
		}
	}
}

// IntDigits is the one scan of an integer literal (the canonical form's
// plain integers, the schema's fast path): JSON's grammar, no leading zero,
// and the digits counted without the sign.
func TestIntDigits(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]int{"0": 1, "-0": 1, "7": 1, "-47": 2, "9007199254740991": 16, "123456789012345": 15} {
		n, ok := IntDigits(lit)
		require.True(t, ok, lit)
		require.Equal(t, want, n, lit)
	}
	for _, lit := range []string{"", "-", "01", "-01", "1.0", "1e3", "+1", " 1", "1a", "--1"} {
		_, ok := IntDigits(lit)
		require.False(t, ok, "%q", lit)
	}
	require.True(t, plainSmallInt("-123456789012345"))
	require.False(t, plainSmallInt("1234567890123456"), "16 digits are not all exact in a double")
}
