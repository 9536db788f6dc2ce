package sessionlog

import (
	"encoding/json"
	"math"
	"testing"
)

// specialChars exercises every JSON.stringify rule that differs from Go's
// encoding/json: no HTML escaping, U+2028/U+2029 verbatim, lower-case \u00xx.
const specialChars = "<>&\u2028\u2029\t\"\\\x01é😀"

// specialCharsJS is JSON.stringify(specialChars) without the quotes, written
// by hand from the ECMAScript QuoteJSONString rules.
const specialCharsJS = "<>&\u2028\u2029" + `\t\"\\\u0001` + "é😀"

func TestAppendJSString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello", `"hello"`},
		{"special", specialChars, `"` + specialCharsJS + `"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls", "\x00\x1f", `"\u0000\u001f"`},
		{"DEL verbatim", "\x7f", "\"\x7f\""},
		{"slash verbatim", "a/b", `"a/b"`},
		{"lone high surrogate (WTF-8)", "\xed\xa0\x80", `"\ud800"`},
		{"lone low surrogate (WTF-8)", "x\xed\xbf\xbfy", `"x\udfffy"`},
		{"invalid byte", "a\xffb", "\"a\uFFFDb\""},
		{"empty", "", `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendJSString(nil, tt.in)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStringRoundTrip(t *testing.T) {
	// Parsing then serialising gives what JSON.parse + JSON.stringify give.
	tests := []struct{ in, want string }{
		{`"\u0041\/\u00e9"`, `"A/é"`},
		{`"\uD83D\uDE00"`, "\"😀\""},
		{`"\ud800"`, `"\ud800"`},
		{`"\ud800\u0041"`, `"\ud800A"`},
		{`"\udc00\ud800"`, `"\udc00\ud800"`},
		{`"\u2028"`, "\"\u2028\""},
		{`"\u001F"`, `"\u001f"`},
		{`"<\u003e&"`, `"<>&"`},
	}
	for _, tt := range tests {
		v, err := parseValue([]byte(tt.in))
		if err != nil {
			t.Fatalf("parse %s: %v", tt.in, err)
		}
		if got := string(appendJSON(nil, v)); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestJSNumber(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{1.5, "1.5"},
		{0.1, "0.1"},
		{123.456, "123.456"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{123456789012345680000, "123456789012345680000"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{1.2345e-5, "0.000012345"},
		{-1.5e-10, "-1.5e-10"},
		{1 << 53, "9007199254740992"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{5e-324, "5e-324"},
		{0.30000000000000004, "0.30000000000000004"},
		{math.Inf(1), "Infinity"},
	}
	for _, tt := range tests {
		if got := jsNumber(tt.in); got != tt.want {
			t.Errorf("jsNumber(%v): got %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestNumberLossless(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"0", true},
		{"-0", false},
		{"-0.0", false},
		{"-0e5", false},
		{"0.0", true},
		{"0e5", true},
		{"1", true},
		{"-1", true},
		{"1.0", true},
		{"0.1", true},
		{"1e2", true},
		{"1E+2", true},
		{"1.50e2", true},
		{"1e400", false},
		{"-1e400", false},
		{"1e-400", false},
		{"-1e-400", false},
		{"9007199254740991", true},
		{"9007199254740992", true},
		{"9007199254740993", false},
		{"123456789012345", true},
		{"1234567890123456789", false},
		{"1e23", true},
		{"100000000000000000000000", true},
		{"0.30000000000000004", true},
		{"0.1000000000000000055511151231257827", false},
		{"5e-324", true},
		{"1.7976931348623157e308", true},
		{"1.7976931348623159e308", false},
	}
	for _, tt := range tests {
		if got := numberLossless([]byte(tt.text)); got != tt.want {
			t.Errorf("numberLossless(%s): got %v, want %v", tt.text, got, tt.want)
		}
	}
}

func TestAppendJSONKeyOrder(t *testing.T) {
	// JavaScript enumerates array-index keys first, ascending, then the
	// other keys in insertion order; JSON.stringify follows.
	tests := []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"b":1,"a":2}`},
		{`{"b":1,"10":2,"2":3,"a":4}`, `{"2":3,"10":2,"b":1,"a":4}`},
		{`{"01":1,"4294967295":2,"4294967294":3}`, `{"4294967294":3,"01":1,"4294967295":2}`},
		{`{"x":[1.0,1e2,-0.5,{"k":null}]}`, `{"x":[1,100,-0.5,{"k":null}]}`},
		{` { "a" : true , "b" : [ ] } `, `{"a":true,"b":[]}`},
	}
	for _, tt := range tests {
		v, err := parseValue([]byte(tt.in))
		if err != nil {
			t.Fatalf("parse %s: %v", tt.in, err)
		}
		if got := string(appendJSON(nil, v)); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseValueRefuses(t *testing.T) {
	bad := []string{
		`{"a":1,"a":2}`,
		`{"a":{"b":1,"\u0062":2}}`,
		`[1,]`,
		`{"a":1}x`,
		`"a` + "\n" + `"`,
		"\"\xff\"",
		`01`,
		`1.`,
		`-`,
		`tru`,
		``,
	}
	for _, in := range bad {
		if _, err := parseValue([]byte(in)); err == nil {
			t.Errorf("parseValue(%q): got nil error, want a refusal", in)
		}
	}
}

func TestWideObjectDuplicate(t *testing.T) {
	// Past 32 keys the duplicate check switches to a map; it must still
	// find a repeat of an early key.
	raw := []byte(`{"type":"x","seq":0,"time":0,"data":{`)
	for i := 0; i < 100; i++ {
		raw = append(raw, `"k`...)
		raw = append(raw, itoa(i)...)
		raw = append(raw, `":0,`...)
	}
	ok := append(append([]byte(nil), raw...), `"last":0}}`...)
	dup := append(append([]byte(nil), raw...), `"k3":1}}`...)
	if _, err := CheckEvent("s", ok); err != nil {
		t.Fatalf("wide object: got %v, want nil", err)
	}
	if _, err := CheckEvent("s", dup); !isReason(err, "NOT_JSON") {
		t.Fatalf("wide object with duplicate: got %v, want NOT_JSON", err)
	}
	if _, err := parseValue(dup[len(`{"type":"x","seq":0,"time":0,"data":`) : len(dup)-1]); err == nil {
		t.Fatalf("parseValue of a wide duplicate: got nil error")
	}
	if !json.Valid(ok) {
		t.Fatal("fixture is not valid JSON")
	}
}
