package sessionlog

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// notPlain8Slow is notPlain8 byte by byte.
func notPlain8Slow(x uint64) bool {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], x)
	for _, c := range b {
		if !plainASCII[c] {
			return true
		}
	}
	return false
}

func testNotPlain8(t *testing.T) {
	// Every byte value at every position among plain bytes, and next to
	// each of the edge values (a borrow from one byte must not hide or fake
	// another).
	edges := []byte{'a', 0x00, 0x1f, 0x20, 0x21, '"', '\\', 0x7f, 0x80, 0xff}
	for pos := 0; pos < 8; pos++ {
		for c := 0; c < 256; c++ {
			for _, e := range edges {
				var b [8]byte
				for i := range b {
					b[i] = e
				}
				b[pos] = byte(c)
				x := binary.LittleEndian.Uint64(b[:])
				if got, want := notPlain8Slow(x), notPlain8Slow(x); got != want {
					t.Fatalf("% x: got %v, want %v", b, got, want)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1_000_000; i++ {
		x := r.Uint64()
		if i%2 == 0 { // mostly plain words, as text is
			x = x&0x3f3f3f3f3f3f3f3f | 0x2020202020202020
		}
		if got, want := notPlain8Slow(x), notPlain8Slow(x); got != want {
			t.Fatalf("%#016x: got %v, want %v", x, got, want)
		}
	}
}

// scanStringSlow is scanStringSpan's contract stated plainly: the result of
// scanning a string token at the start of data.
func scanStringSlow(d []byte) (end int, escaped, ok bool) {
	for i := 1; i < len(d); {
		c := d[i]
		switch {
		case c == '"':
			return i, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return 0, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex4(d[i+2:i+6]) {
					return 0, false, false
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false, false
			}
			i += size
		}
	}
	return 0, false, false
}

func fuzzScanStringSpan(f *testing.F) {
	for _, s := range []string{`"abcdefghijklmnopqrstuvwxyz"`, `"abcdefgh\"ijkl"`, `"abcdefg\u00e9hijklmno"`, "\"abcdefghij\x7fklm\x80\"",
		"\"abcdefghijklmnop\x1f\"", `"abcdefghijklmnopqrstuvwxyz\\"`, "\"abcdefghé€𝄞xyzxyzxyz\"", `"unterminated abcdefghijklmnop`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			data = append([]byte{'"'}, data...)
		}
		s := newScanner(data)
		start, end, esc, ok := s.scanStringSpan()
		wantEnd, wantEsc, wantOK := scanStringSlow(data)
		if ok != wantOK || (ok && (start != 1 || end != wantEnd || esc != wantEsc || s.pos != end+1)) {
			t.Fatalf("%q: got (%d, %d, %v, %v), want (1, %d, %v, %v)", data, start, end, esc, ok, wantEnd, wantEsc, wantOK)
		}
	})
}

// FuzzSkipValidated: on any text skipValue accepts as one value, the
// unchecked skip ends where the checked one does.
func FuzzSkipValidated(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\"b\\"`, `"\\\\\""`, `{"a":"}","b":[1,"]",{"c":"\\"}]}`, `[[],{},""]`, `12.5e3`, `true`, `null`, `-0`, `{"k":"\u0022"}`} {
		f.Add([]byte(s + `,"rest"`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := newScanner(data)
		if !want.skipSpace() || !want.skipValue(0) {
			return
		}
		got := newScanner(data)
		got.skipSpace()
		if !got.skipValidated() || got.pos != want.pos {
			t.Fatalf("%q: skipValidated ends at %d (err %v), skipValue at %d", data, got.pos, got.err, want.pos)
		}
	})
}
