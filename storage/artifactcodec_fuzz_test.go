package storage

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

// fuzzMaxInput bounds arbitrary inputs: an RLE block of 4 bytes expands to
// 128 KiB, so a larger input could decode to gigabytes.
const fuzzMaxInput = 1 << 10

var (
	fuzzSeedText     = testHeaderLine + testEventLines
	fuzzSeedArtifact = artifact(testHeaderLine, testEventLines)
	fuzzHeaderEnd    = int(frameLen(testHeaderLine))
)

// FuzzDecodeArtifact checks two things on every input:
//
//   - arbitrary bytes: ScanFrames and DecodeArtifact never panic, return only
//     CORRUPTION errors with the reference's texts, and a successful result is
//     well-formed;
//   - mutations of a valid two-frame artifact (truncated to cut bytes, with the
//     byte at flipAt xored with flip): a truncation alone never fails once the
//     header frame is complete, and recovers only lines of the original; a
//     failure needs a modified complete frame; Text is always a prefix of the
//     original text.
func FuzzDecodeArtifact(f *testing.F) {
	l := uint16(len(fuzzSeedArtifact))
	h := uint16(fuzzHeaderEnd)
	f.Add(fuzzSeedArtifact, l, uint16(0), byte(0))
	f.Add(fuzzSeedArtifact[:l-1], l-1, h+4, byte(0x04))
	f.Add(fuzzSeedArtifact[:h+2], h+2, h+4, byte(0x18))
	f.Add([]byte{}, uint16(0), uint16(0), byte(0))
	f.Add([]byte{0, 0, 0, 0}, h, uint16(4), byte(0x08))
	f.Add(cat(zstdMagicBytes, 0x04, 0x00, rawBlk("a\nb", false), blk(zstdBlockRLE, 3, false, '\n'), blk(zstdBlockCompressed, 2, true, 1, 2), 1, 2, 3, 4), h+5, h+8, byte(0x01))
	f.Add(cat(zstdMagicBytes, 0x00, 0x00, rawBlk("{}\n", true), zstdMagicBytes, 0x20, 3, rawBlk("x\ny", true)), l-4, l-5, byte(0x80))
	f.Add(cat(zstdMagicBytes, 0xE3, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, blk(zstdBlockReserved, 0, true)), uint16(3), uint16(1), byte(0xFF))

	f.Fuzz(func(t *testing.T, data []byte, cut, flipAt uint16, flip byte) {
		if len(data) > fuzzMaxInput {
			data = data[:fuzzMaxInput]
		}
		checkArbitraryArtifact(t, data)
		checkMutatedArtifact(t, int(cut), int(flipAt), flip)
	})
}

// knownCodecError reports whether msg is one of the texts this codec returns.
func knownCodecError(msg string) bool {
	for _, p := range []string{
		"corrupt Zstandard session log: invalid frame magic at byte ",
		"corrupt Zstandard session log: reserved frame-header bit at byte ",
		"corrupt Zstandard session log: reserved block type at byte ",
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	if strings.HasPrefix(msg, "corrupt Zstandard session log: frame at byte ") && strings.HasSuffix(msg, " failed validation") {
		return true
	}
	switch msg {
	case "empty or header-less Zstandard session log",
		"corrupt Zstandard session log: first frame is not exactly one header line",
		"corrupt Zstandard session log: complete frame contains a torn JSONL record":
		return true
	}
	return false
}

func checkCodecError(t *testing.T, what string, err error) {
	t.Helper()
	var se *sessionstore.Error
	if !errors.As(err, &se) || se.Reason != sessionstore.ReasonCorruption || !knownCodecError(se.Message) {
		t.Fatalf("%s: unexpected error %T %v", what, err, err)
	}
}

func isScanError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "invalid frame magic") || strings.Contains(msg, "reserved frame-header bit") || strings.Contains(msg, "reserved block type")
}

func checkArbitraryArtifact(t *testing.T, data []byte) {
	frames, torn, scanErr := ScanFrames(data)
	if scanErr != nil {
		checkCodecError(t, "ScanFrames", scanErr)
		if !isScanError(scanErr) {
			t.Fatalf("ScanFrames returned a decode error: %v", scanErr)
		}
	} else {
		at := int64(0)
		for _, fr := range frames {
			if fr.Start != at || fr.End <= fr.Start+4 {
				t.Fatalf("frames do not tile the data: %v", frames)
			}
			at = fr.End
		}
		if torn >= 0 && (torn != at || at >= int64(len(data))) || torn < 0 && at != int64(len(data)) {
			t.Fatalf("frames %v, torn %d, len %d", frames, torn, len(data))
		}
	}

	d, err := DecodeArtifact(data)
	if err != nil {
		checkCodecError(t, "DecodeArtifact", err)
		if (scanErr != nil) != isScanError(err) {
			t.Fatalf("ScanFrames error %v, DecodeArtifact error %v", scanErr, err)
		}
		return
	}
	if scanErr != nil || len(d.Frames) == 0 || len(d.Frames) != len(frames) || d.TornStart != torn {
		t.Fatalf("DecodeArtifact = frames %v torn %d; ScanFrames = %v, %d, %v", d.Frames, d.TornStart, frames, torn, scanErr)
	}
	if i := bytes.IndexByte(d.Text, '\n'); i < 0 || d.Text[len(d.Text)-1] != '\n' {
		t.Fatalf("Text %q lacks a header line or ends mid-line", d.Text)
	}
	if len(d.Recovered) > 0 && (d.TornStart < 0 || d.Recovered[len(d.Recovered)-1] != '\n') {
		t.Fatalf("Recovered %q with torn start %d", d.Recovered, d.TornStart)
	}
}

func checkMutatedArtifact(t *testing.T, cut, flipAt int, flip byte) {
	base := fuzzSeedArtifact
	cut %= len(base) + 1
	data := bytes.Clone(base[:cut])
	pos := flipAt % len(base)
	modified := flip != 0 && pos < cut
	if modified {
		data[pos] ^= flip
	}

	d, err := DecodeArtifact(data)
	if err == nil && !strings.HasPrefix(fuzzSeedText, string(d.Text)) {
		t.Fatalf("cut %d flip %d^%#x: Text %q is not a prefix of the original", cut, pos, flip, d.Text)
	}

	if !modified {
		events := fuzzSeedText[len(testHeaderLine):]
		switch {
		case cut < fuzzHeaderEnd:
			if err == nil || err.Error() != "empty or header-less Zstandard session log" {
				t.Fatalf("cut %d: error %v, want empty or header-less", cut, err)
			}
		case err != nil:
			t.Fatalf("truncation to %d bytes failed: %v", cut, err)
		case cut == len(base):
			if string(d.Text) != fuzzSeedText || d.TornStart != -1 || len(d.Recovered) != 0 {
				t.Fatalf("whole artifact: %+v", d)
			}
		case cut == fuzzHeaderEnd:
			if string(d.Text) != testHeaderLine || d.TornStart != -1 || len(d.Recovered) != 0 {
				t.Fatalf("cut at the frame boundary: %+v", d)
			}
		default:
			if string(d.Text) != testHeaderLine || d.TornStart != int64(fuzzHeaderEnd) {
				t.Fatalf("cut %d: Text %q torn %d", cut, d.Text, d.TornStart)
			}
			if !strings.HasPrefix(events, string(d.Recovered)) || len(d.Recovered) > 0 && d.Recovered[len(d.Recovered)-1] != '\n' {
				t.Fatalf("cut %d: Recovered %q", cut, d.Recovered)
			}
			if cut >= len(base)-4 && string(d.Recovered) != events {
				t.Fatalf("cut %d (only checksum bytes missing): Recovered %q", cut, d.Recovered)
			}
		}
		return
	}

	// Modified: a failure needs a modified complete frame (or bytes that no
	// longer scan). If the flipped byte lies in the torn region, every complete
	// frame is an unmodified frame of the original.
	frames, torn, scanErr := ScanFrames(data)
	if scanErr != nil {
		if err == nil || err.Error() != scanErr.Error() {
			t.Fatalf("cut %d flip %d^%#x: ScanFrames %v, DecodeArtifact %v", cut, pos, flip, scanErr, err)
		}
		return
	}
	if torn >= 0 && int64(pos) >= torn {
		if len(frames) == 0 {
			if err == nil || err.Error() != "empty or header-less Zstandard session log" {
				t.Fatalf("cut %d flip %d^%#x: error %v, want empty or header-less", cut, pos, flip, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("cut %d flip %d^%#x in the torn frame at %d: %v", cut, pos, flip, torn, err)
		}
		if want := fuzzSeedText[:len(d.Text)]; string(d.Text) != want || len(d.Frames) != len(frames) {
			t.Fatalf("cut %d flip %d^%#x: Text %q", cut, pos, flip, d.Text)
		}
		return
	}
	if err != nil {
		checkCodecError(t, "DecodeArtifact", err)
	}
}
