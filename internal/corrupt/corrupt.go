// Package corrupt damages files the way a disk does, for the tests that show
// damage is caught and never served.
package corrupt

import (
	"bytes"
	"os"
	"testing"
)

// FlipAll flips bit 0x04 of the byte at offset off from every occurrence of
// needle in the file (bbolt may also hold stale copies in free pages) and
// returns how many it changed; check, when set, must accept each occurrence.
func FlipAll(t testing.TB, path string, needle []byte, off int, check func(b []byte, at int) bool) int {
	t.Helper()
	return Flip(t, path, needle, off, 0x04, check)
}

// Flip is FlipAll with the bits to flip given by mask.
func Flip(t testing.TB, path string, needle []byte, off int, mask byte, check func(b []byte, at int) bool) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; ; {
		j := bytes.Index(b[i:], needle)
		if j < 0 {
			break
		}
		at := i + j
		if check == nil || check(b, at) {
			b[at+off] ^= mask
			n++
		}
		i = at + len(needle)
	}
	if n == 0 {
		t.Fatalf("%q not found in %s", needle, path)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}
