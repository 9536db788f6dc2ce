package sessionlog

import (
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

func TestEncodeSegment(t *testing.T) {
	tests := []struct{ in, want string }{
		{".", "~002E"},
		{"..", "~002E~002E"},
		{"...", "..."},
		{"a/b", "a~002Fb"},
		{"a~b", "a~007Eb"},
		{"crash-1", "crash-1"},
		{"A_z.0-9", "A_z.0-9"},
		{"\x00", "~0000"},
		{"a b", "a~0020b"},
		{"é", "~00E9"},
		{"😀", "~D83D~DE00"},
		{"\xed\xa0\x80", "~D800"}, // a WTF-8 lone surrogate is its own unit
		{"C:\\work", "C~003A~005Cwork"},
	}
	for _, tt := range tests {
		got, err := EncodeSegment(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("EncodeSegment(%q): got %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	_, err := EncodeSegment("")
	wantErr(t, err, sessionstore.ReasonInvalidArgument, "cannot encode an empty path segment")
}

func TestProjectKey(t *testing.T) {
	long := "/" + strings.Repeat("a", 300)
	tests := []struct{ in, want string }{
		{"/", "--root--"},
		{"///", "--root--"},
		{`C:\work\agent`, "--C-work-agent--"},
		{"/Users/qyj/work/deepseek-harness", "--Users-qyj-work-deepseek-harness--"},
		{"/home/u/proj", "--home-u-proj--"},
		{"/a/b-c", "--a-b-c--"},
		{"/a-b/c", "--a-b-c--"},
		{"//a//b::c\\\\d", "--a-b-c-d--"},
		{"/-x", "--x--"},
		{"/home/u/源码", "--home-u-~6E90~7801--"},
		{"/w/~", "--w-~007E--"},
		{"/a.b/.", "--a.b-.--"},
		{long, "--" + strings.Repeat("a", 251) + "--"},
		// Truncation counts characters of the escaped slug and may cut an escape.
		{"/" + strings.Repeat("a", 249) + "é", "--" + strings.Repeat("a", 249) + "~0--"},
	}
	for _, tt := range tests {
		got, err := ProjectKey(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ProjectKey(%q): got %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if len(got) > 255 {
			t.Errorf("ProjectKey(%q): got %d bytes, want at most 255", tt.in, len(got))
		}
	}
	_, err := ProjectKey("")
	wantErr(t, err, sessionstore.ReasonInvalidArgument, "cannot encode an empty project path")
}

func TestValidateSessionID(t *testing.T) {
	valid := []string{"s1", "..", ".", "a/b", "\x00", "😀", strings.Repeat("a", 255), strings.Repeat("é", 51)}
	for _, id := range valid {
		if err := ValidateSessionID(id); err != nil {
			t.Errorf("ValidateSessionID(%q): got %v, want nil", id, err)
		}
	}
	invalid := []string{"", "\xff", strings.Repeat("a", 256), strings.Repeat("é", 52), strings.Repeat("/", 52)}
	for _, id := range invalid {
		wantErr(t, ValidateSessionID(id), sessionstore.ReasonInvalidSessionID, "")
	}
}

// segmentLen counts what EncodeSegment writes, for every kind of unit.
func TestSegmentLenIsEncodeSegmentsLength(t *testing.T) {
	for _, id := range []string{".", "..", "...", "a.b", "~", "aZ09._-", "a/b", "\x00", "\x7f", "é", "\u00ff", "\u0800",
		"\uffff", "\ufffd", "😀", "a😀b~c", strings.Repeat("é😀x", 30)} {
		seg, err := EncodeSegment(id)
		if err != nil || segmentLen(id) != len(seg) {
			t.Errorf("segmentLen(%q) = %d, EncodeSegment gives %d bytes (%v)", id, segmentLen(id), len(seg), err)
		}
	}
}
