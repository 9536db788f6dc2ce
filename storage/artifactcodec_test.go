package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore"
)

const (
	testHeaderLine = `{"type":"session","version":0,"id":"s-1","createdAt":1700000000000,"cwd":"/work/a\u2028b","delegationDepth":0}` + "\n"
	testEventLine  = `{"type":"turn/start","seq":1,"time":1700000000001,"data":{"turn":1}}` + "\n"
	testEventLines = `{"type":"turn/start","seq":1,"time":1700000000001,"data":{"turn":1}}` + "\n" +
		`{"type":"user/message","seq":2,"time":1700000000002,"data":{"text":"hello <&>"}}` + "\n" +
		`{"type":"turn/end","seq":3,"time":1700000000003,"data":{"turn":1}}` + "\n"
)

var zstdMagicBytes = []byte{0x28, 0xB5, 0x2F, 0xFD}

// cat concatenates byte slices and single bytes into a new slice.
func cat(parts ...any) []byte {
	var out []byte
	for _, p := range parts {
		switch v := p.(type) {
		case []byte:
			out = append(out, v...)
		case byte:
			out = append(out, v)
		case int:
			out = append(out, byte(v))
		case string:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("cat: unsupported %T", p))
		}
	}
	return out
}

// blk hand-assembles a block: its 3-byte header followed by payload.
func blk(typ, size int, last bool, payload ...byte) []byte {
	v := size<<3 | typ<<1
	if last {
		v |= 1
	}
	return append([]byte{byte(v), byte(v >> 8), byte(v >> 16)}, payload...)
}

// rawBlk is a raw block holding s.
func rawBlk(s string, last bool) []byte { return blk(zstdBlockRaw, len(s), last, []byte(s)...) }

// artifact builds an artifact of one frame per plaintext.
func artifact(plaintexts ...string) []byte {
	var out []byte
	for _, p := range plaintexts {
		out = EncodeFrame(out, []byte(p))
	}
	return out
}

// frameLen is the length of the encoded frame of p.
func frameLen(p string) int64 { return int64(len(EncodeFrame(nil, []byte(p)))) }

// wantCorruption checks that err is a CORRUPTION *sessionstore.Error with exactly msg.
func wantCorruption(t *testing.T, err error, msg string) {
	t.Helper()
	var se *sessionstore.Error
	if !errors.As(err, &se) {
		t.Fatalf("error = %v (%T), want *sessionstore.Error %q", err, err, msg)
	}
	if se.Reason != sessionstore.ReasonCorruption || !errors.Is(err, sessionstore.ErrCorruption) {
		t.Errorf("reason = %s, want %s", se.Reason, sessionstore.ReasonCorruption)
	}
	if se.Message != msg {
		t.Errorf("message = %q, want %q", se.Message, msg)
	}
}

func TestEncodeFrameTwoFramesScanAndDecode(t *testing.T) {
	data := artifact(testHeaderLine, testEventLine)
	n1 := frameLen(testHeaderLine)

	frames, torn, err := ScanFrames(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Frame{{0, n1}, {n1, int64(len(data))}}
	if fmt.Sprint(frames) != fmt.Sprint(want) || torn != -1 {
		t.Fatalf("ScanFrames = %v, %d; want %v, -1", frames, torn, want)
	}
	for _, f := range frames {
		if !bytes.Equal(data[f.Start:f.Start+4], zstdMagicBytes) {
			t.Errorf("frame at %d does not start with the magic", f.Start)
		}
		if d := data[f.Start+4]; d&0x04 == 0 {
			t.Errorf("frame at %d: descriptor %#02x lacks the content-checksum bit", f.Start, d)
		}
	}

	d, err := DecodeArtifact(data)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Text) != testHeaderLine+testEventLine {
		t.Errorf("Text = %q", d.Text)
	}
	if fmt.Sprint(d.Frames) != fmt.Sprint(want) || d.TornStart != -1 || len(d.Recovered) != 0 {
		t.Errorf("Decoded = frames %v torn %d recovered %q", d.Frames, d.TornStart, d.Recovered)
	}
}

func TestEncodeFrameEmptyPlaintext(t *testing.T) {
	f := EncodeFrame([]byte("prefix"), nil)
	if !bytes.HasPrefix(f, []byte("prefix")) {
		t.Fatalf("EncodeFrame dropped dst: %x", f)
	}
	f = f[len("prefix"):]
	if f[4]&0x04 == 0 {
		t.Errorf("empty frame lacks the checksum bit: %x", f)
	}
	frames, torn, err := ScanFrames(f)
	if err != nil || len(frames) != 1 || frames[0].End != int64(len(f)) || torn != -1 {
		t.Fatalf("ScanFrames(empty frame) = %v, %d, %v", frames, torn, err)
	}
	out, err := zstdFrameDecoder.DecodeAll(f, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("decode empty frame = %q, %v", out, err)
	}
}

func TestScanFramesStructural(t *testing.T) {
	complete := EncodeFrame(nil, []byte(testHeaderLine))
	n := int64(len(complete))
	win := byte(0x00) // window descriptor: 1 KiB

	type tc struct {
		name    string
		data    []byte
		frames  int   // complete frames expected
		torn    int64 // expected tornStart
		wantErr string
	}
	cases := []tc{
		{name: "empty", data: nil, torn: -1},
		{name: "2 magic bytes", data: zstdMagicBytes[:2], torn: 0},
		{name: "4 magic bytes", data: zstdMagicBytes, torn: 0},
		{name: "1 byte", data: []byte{0x28}, torn: 0},
		{name: "3 zero bytes", data: []byte{0, 0, 0}, torn: 0},
		{name: "4 zero bytes", data: []byte{0, 0, 0, 0}, wantErr: "corrupt Zstandard session log: invalid frame magic at byte 0"},
		{name: "skippable frame", data: cat([]byte{0x50, 0x2A, 0x4D, 0x18}, 0, 0, 0, 0), wantErr: "corrupt Zstandard session log: invalid frame magic at byte 0"},
		{name: "descriptor 0x08", data: cat(zstdMagicBytes, 0x08), wantErr: "corrupt Zstandard session log: reserved frame-header bit at byte 4"},
		{name: "descriptor 0x10", data: cat(zstdMagicBytes, 0x10, win), wantErr: "corrupt Zstandard session log: reserved frame-header bit at byte 4"},
		{name: "missing window byte", data: cat(zstdMagicBytes, 0x00), torn: 0},
		{name: "missing content-size bytes", data: cat(zstdMagicBytes, 0xC0, win, 1, 2, 3), torn: 0},
		{name: "missing dictionary-id bytes", data: cat(zstdMagicBytes, 0x03, win, 1, 2), torn: 0},
		{name: "no block header", data: cat(zstdMagicBytes, 0x00, win), torn: 0},
		{name: "2 of 3 block-header bytes", data: cat(zstdMagicBytes, 0x00, win, rawBlk("ab", true)[:2]), torn: 0},
		{name: "short raw payload", data: cat(zstdMagicBytes, 0x00, win, rawBlk("abcde", true)[:6]), torn: 0},
		{name: "short compressed payload", data: cat(zstdMagicBytes, 0x00, win, blk(zstdBlockCompressed, 4, true, 1, 2, 3)), torn: 0},
		{name: "RLE block without its byte", data: cat(zstdMagicBytes, 0x00, win, blk(zstdBlockRLE, 9, true)), torn: 0},
		{name: "non-last block then nothing", data: cat(zstdMagicBytes, 0x00, win, rawBlk("ab", false)), torn: 0},
		{name: "missing all checksum bytes", data: cat(zstdMagicBytes, 0x04, win, rawBlk("", true)), torn: 0},
		{name: "missing checksum bytes", data: cat(zstdMagicBytes, 0x04, win, rawBlk("", true), 1, 2), torn: 0},
		{name: "real frame missing last checksum byte", data: complete[:n-1], torn: 0},
		{name: "reserved block type", data: cat(zstdMagicBytes, 0x00, win, blk(zstdBlockReserved, 0, true)), wantErr: "corrupt Zstandard session log: reserved block type at byte 6"},
		{name: "reserved block type in 2nd block", data: cat(zstdMagicBytes, 0x00, win, rawBlk("ab", false), blk(zstdBlockReserved, 0, true)), wantErr: "corrupt Zstandard session log: reserved block type at byte 11"},

		// RFC 8878 header variants, RLE blocks and multi-block frames.
		{name: "descriptor 0x00", data: cat(zstdMagicBytes, 0x00, win, rawBlk("{}\n", true)), frames: 1, torn: -1},
		{name: "descriptor 0x21", data: cat(zstdMagicBytes, 0x21, 7, 3, rawBlk("{}\n", true)), frames: 1, torn: -1},
		{name: "descriptor 0x42", data: cat(zstdMagicBytes, 0x42, win, 7, 0, 0, 0, rawBlk("x", true)), frames: 1, torn: -1},
		{name: "descriptor 0x83", data: cat(zstdMagicBytes, 0x83, win, 7, 0, 0, 0, 3, 0, 0, 0, rawBlk("{}\n", true)), frames: 1, torn: -1},
		{name: "descriptor 0xE3", data: cat(zstdMagicBytes, 0xE3, 7, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, rawBlk("{}\n", true)), frames: 1, torn: -1},
		{name: "descriptor 0x24", data: cat(zstdMagicBytes, 0x24, 0, rawBlk("", true), 0x99, 0xE9, 0xD8, 0x51), frames: 1, torn: -1},
		{name: "descriptor 0x00 with empty last block", data: cat(zstdMagicBytes, 0x00, win, blk(zstdBlockRaw, 0, true)), frames: 1, torn: -1},
		{name: "RLE block", data: cat(zstdMagicBytes, 0x20, 100, blk(zstdBlockRLE, 100, true, 'a')), frames: 1, torn: -1},
		{name: "multi-block frame", data: cat(zstdMagicBytes, 0x04, win,
			rawBlk("ab", false), blk(zstdBlockRLE, 5, false, 'c'), blk(zstdBlockCompressed, 3, false, 1, 2, 3), rawBlk("\n", true), 1, 2, 3, 4), frames: 1, torn: -1},
		{name: "three hand-built frames", data: cat(
			zstdMagicBytes, 0x00, win, rawBlk("a", true),
			zstdMagicBytes, 0x20, 1, blk(zstdBlockRLE, 1, true, 'b'),
			zstdMagicBytes, 0x24, 0, rawBlk("", true), 0x99, 0xE9, 0xD8, 0x51), frames: 3, torn: -1},
	}
	// The torn and erroneous cases again, after one complete frame.
	for _, c := range cases {
		if len(c.data) == 0 || c.wantErr == "" && c.torn != 0 {
			continue
		}
		after := tc{name: "after a frame: " + c.name, data: cat(complete, c.data), frames: 1, torn: -1}
		switch {
		case c.wantErr != "":
			var at int64
			msg, _, _ := strings.Cut(c.wantErr, " at byte ")
			fmt.Sscanf(c.wantErr[len(msg):], " at byte %d", &at)
			after.wantErr = fmt.Sprintf("%s at byte %d", msg, at+n)
		case c.torn == 0:
			after.torn = n
		}
		cases = append(cases, after)
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frames, torn, err := ScanFrames(c.data)
			if c.wantErr != "" {
				wantCorruption(t, err, c.wantErr)
				if frames != nil || torn != -1 {
					t.Errorf("on error: frames %v torn %d", frames, torn)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(frames) != c.frames || torn != c.torn {
				t.Fatalf("ScanFrames = %v, torn %d; want %d frames, torn %d", frames, torn, c.frames, c.torn)
			}
			// Frames tile the data from 0 up to the torn start or the end.
			at := int64(0)
			for _, f := range frames {
				if f.Start != at || f.End <= f.Start {
					t.Fatalf("frames do not tile the data: %v", frames)
				}
				at = f.End
			}
			if torn >= 0 && torn != at || torn < 0 && at != int64(len(c.data)) {
				t.Fatalf("frames %v end at %d, torn %d, len %d", frames, at, torn, len(c.data))
			}
		})
	}
}

// Every proper prefix of a two-frame artifact scans as its complete frames plus
// a torn frame starting where the last complete one ends.
func TestScanFramesEveryTruncation(t *testing.T) {
	data := artifact(testHeaderLine, testEventLines)
	n1 := frameLen(testHeaderLine)
	for cut := 0; cut <= len(data); cut++ {
		frames, torn, err := ScanFrames(data[:cut])
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		var wantFrames int
		wantTorn := int64(0)
		switch {
		case cut == 0:
			wantTorn = -1
		case int64(cut) < n1:
		case int64(cut) == n1:
			wantFrames, wantTorn = 1, -1
		case cut < len(data):
			wantFrames, wantTorn = 1, n1
		default:
			wantFrames, wantTorn = 2, -1
		}
		if len(frames) != wantFrames || torn != wantTorn {
			t.Fatalf("cut %d: frames %v torn %d; want %d frames, torn %d", cut, frames, torn, wantFrames, wantTorn)
		}
	}
}

func TestDecodeArtifactTornFinalFrame(t *testing.T) {
	header := EncodeFrame(nil, []byte(testHeaderLine))
	n1 := int64(len(header))
	events := EncodeFrame(nil, []byte(testEventLines))
	// Small batches are stored raw (EncodeFrame); older builds compressed them.
	compressed := zstdFrameEncoder.EncodeAll([]byte(testEventLines), nil)
	partial := EncodeFrame(nil, []byte(testEventLines+`{"type":"assistant/chunk","seq":4`))

	// A large frame of several compressed blocks (128 KiB of plaintext each).
	var big strings.Builder
	for i := 0; big.Len() < 300<<10; i++ {
		fmt.Fprintf(&big, `{"type":"assistant/chunk","seq":%d,"time":%d,"data":{"text":"%x"}}`+"\n", i+4, 1700000000000+i*7, sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
	}
	// Encoded at the default level, whose blocks hold 128 KiB of plaintext
	// each as libzstd's do (the fastest level, which this build writes with,
	// makes 64 KiB blocks): the decoder is what is tested here.
	defEnc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	bigFrame := defEnc.EncodeAll([]byte(big.String()), nil)
	bigCut := blockEnd(t, bigFrame, 2) + 5 // two whole blocks and 5 bytes of the third
	bigWant := big.String()[:strings.LastIndexByte(big.String()[:2*zstdMaxBlockSize], '\n')+1]

	// A hand-built frame with a raw block: flush mode emits its bytes as they arrive.
	rawFrame := cat(zstdMagicBytes, 0x04, 0x00, rawBlk("e1\ne2\nxx\n", true), 1, 2, 3, 4)
	rawCut := len(rawFrame) - 4 - 3 // the checksum and "xx\n" missing

	cases := []struct {
		name      string
		tail      []byte
		recovered string
	}{
		{"only the last checksum byte missing", events[:len(events)-1], testEventLines},
		{"the whole checksum missing", events[:len(events)-4], testEventLines},
		{"partial last line dropped", partial[:len(partial)-1], testEventLines},
		{"torn inside the magic", events[:2], ""},
		{"torn after the magic", events[:4], ""},
		{"torn inside the header", events[:5], ""},
		{"torn inside the first block header", events[:7], ""},
		{"torn inside a compressed block", compressed[:len(compressed)-8], ""},
		{"torn inside a raw block", events[:len(events)-8], testEventLines[:strings.LastIndexByte(testEventLines[:len(testEventLines)-4], '\n')+1]},
		{"multi-block frame torn in block 3", bigFrame[:bigCut], bigWant},
		{"raw block torn mid-payload", rawFrame[:rawCut], "e1\ne2\n"},
		{"raw block torn after one byte", rawFrame[:10], ""},
		{"window too large for the reference decoder", cat(zstdMagicBytes, 0xE0, 0, 0, 0, 0, 0, 1, 0, 0, rawBlk("a\n", false)), ""},
		{"dictionary frame", cat(zstdMagicBytes, 0x01, 0x00, 9, rawBlk("a\n", false)), ""},
		{"empty dictionary id is no dictionary", cat(zstdMagicBytes, 0x01, 0x00, 0, rawBlk("a\n", false)), "a\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeArtifact(cat(header, c.tail))
			if err != nil {
				t.Fatal(err)
			}
			if string(d.Text) != testHeaderLine || len(d.Frames) != 1 || d.TornStart != n1 {
				t.Fatalf("Text %q frames %v torn %d", d.Text, d.Frames, d.TornStart)
			}
			if string(d.Recovered) != c.recovered {
				t.Fatalf("Recovered = %d bytes %.80q…, want %d bytes %.80q…", len(d.Recovered), d.Recovered, len(c.recovered), c.recovered)
			}
		})
	}
}

// blockEnd returns the offset just past the k-th block (1-based) of the frame.
func blockEnd(t *testing.T, frame []byte, k int) int {
	t.Helper()
	_, off, ok, err := parseZstdFrameHeader(frame, 0)
	if !ok || err != nil {
		t.Fatal("bad frame header")
	}
	for i := 0; i < k; i++ {
		b, ok, err := parseZstdBlockHeader(frame, off)
		if !ok || err != nil {
			t.Fatal("bad block header")
		}
		if b.last {
			t.Fatalf("frame has only %d blocks", i+1)
		}
		off += 3 + b.payload
	}
	return off
}

func TestDecodeArtifactErrors(t *testing.T) {
	header := EncodeFrame(nil, []byte(testHeaderLine))
	n1 := len(header)
	events := EncodeFrame(nil, []byte(testEventLines))
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		if i < 0 {
			i += len(b)
		}
		b[i] ^= 0x5A
		return b
	}
	const (
		empty     = "empty or header-less Zstandard session log"
		notHeader = "corrupt Zstandard session log: first frame is not exactly one header line"
		tornRec   = "corrupt Zstandard session log: complete frame contains a torn JSONL record"
	)
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"zero-length data", nil, empty},
		{"magic only", zstdMagicBytes, empty},
		{"2 magic bytes", zstdMagicBytes[:2], empty},
		{"header frame torn", header[:n1-1], empty},
		{"invalid magic", []byte("{\"type\":\"session\"}\n"), "corrupt Zstandard session log: invalid frame magic at byte 0"},
		{"invalid magic after the header", cat(header, "junk"), fmt.Sprintf("corrupt Zstandard session log: invalid frame magic at byte %d", n1)},
		{"reserved bit in the torn frame", cat(header, zstdMagicBytes, 0x08), fmt.Sprintf("corrupt Zstandard session log: reserved frame-header bit at byte %d", n1+4)},
		{"event frame checksum corrupted", cat(header, flip(events, -1)), fmt.Sprintf("corrupt Zstandard session log: frame at byte %d failed validation", n1)},
		{"event frame payload corrupted", cat(header, flip(events, len(events)/2)), fmt.Sprintf("corrupt Zstandard session log: frame at byte %d failed validation", n1)},
		{"header frame checksum corrupted", cat(flip(header, -2), events), "corrupt Zstandard session log: frame at byte 0 failed validation"},
		{"validation before header check", cat(EncodeFrame(nil, []byte("a\nb\n")), flip(events, -1)), fmt.Sprintf("corrupt Zstandard session log: frame at byte %d failed validation", len(EncodeFrame(nil, []byte("a\nb\n"))))},
		{"dictionary frame", cat(zstdMagicBytes, 0x21, 3, 4, rawBlk("{}\n", true)), "corrupt Zstandard session log: frame at byte 0 failed validation"},
		{"first frame with two lines", artifact(testHeaderLine+testEventLine, testEventLine), notHeader},
		{"first frame empty", artifact("", testEventLine), notHeader},
		{"first frame without newline", artifact(strings.TrimSuffix(testHeaderLine, "\n")), notHeader},
		{"first frame with a leading newline", artifact("\n" + testHeaderLine), notHeader},
		{"complete frame ends mid-line", artifact(testHeaderLine, testEventLines+`{"type":"x"`), tornRec},
		{"middle frame ends mid-line", artifact(testHeaderLine, `{"type":`, `"x"}`+"\n"), tornRec},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeArtifact(c.data)
			wantCorruption(t, err, c.msg)
			if c.msg != tornRec && (d.Text != nil || d.Frames != nil || d.TornStart != -1 || d.Recovered != nil) {
				t.Errorf("on error: Decoded = %+v, want empty with TornStart -1", d)
			}
		})
	}
}

func TestDecodeArtifactTornRecordKeepsResult(t *testing.T) {
	data := artifact(testHeaderLine, "a\nb", "c\n")
	d, err := DecodeArtifact(data)
	wantCorruption(t, err, "corrupt Zstandard session log: complete frame contains a torn JSONL record")
	if string(d.Text) != testHeaderLine+"a\nbc\n" || len(d.Frames) != 3 || d.TornStart != -1 {
		t.Errorf("Decoded = %+v", d)
	}
}

func TestDecodeArtifactAccepts(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		text string
	}{
		{"header only", artifact(testHeaderLine), testHeaderLine},
		{"empty event frame", artifact(testHeaderLine, "", testEventLine), testHeaderLine + testEventLine},
		{"many frames", artifact(testHeaderLine, testEventLine, testEventLines, testEventLine), testHeaderLine + testEventLine + testEventLines + testEventLine},
		{"hand-built raw frames without checksum", cat(
			zstdMagicBytes, 0x00, 0x00, rawBlk("{}\n", true),
			zstdMagicBytes, 0x20, 4, rawBlk("ab", false), blk(zstdBlockRLE, 2, true, '\n')), "{}\nab\n\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeArtifact(c.data)
			if err != nil {
				t.Fatal(err)
			}
			if string(d.Text) != c.text || d.TornStart != -1 || len(d.Recovered) != 0 {
				t.Fatalf("Decoded = %+v", d)
			}
		})
	}
}

// deterministicJSONLine returns a JSON line of exactly n bytes (n ≥ 64), the
// same on every call.
func deterministicJSONLine(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"assistant/chunk","seq":1,"time":1700000000000,"data":{"text":"`)
	for i := 0; b.Len() < n-4; i++ {
		fmt.Fprintf(&b, "%x ", sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)}))
	}
	s := b.String()[:n-4] + `"}}` + "\n"
	return []byte(s)
}

func TestEncodeFrameDeterministic(t *testing.T) {
	// Pinned output of this build's encoder. A change here means a library or
	// option change: harmless to readers (artifacts are compared by their
	// text), but worth knowing, since a whole rebuild is then no longer the
	// same bytes as an older build's (docs/design.md "Artifacts").
	golden := map[string]string{
		"empty":  "f96deff1816083fdff8bc3e46c3fe6ca46a6bb49f4d5a00627616c13237a512c",
		"header": "244286b85ab7dc2ddd3f48c2f53eabb0311ff1ef8606dd190741aee37ce9db15",
		"1KiB":   "b44c5cb0569c13b60204de92e25279721e0d798bf782a972021d44e65a6f4b01",
		"1MiB":   "55056bcb0e253198cd595e47a6deab101bc20f99a7c7530a78669aa521702c24",
	}
	inputs := map[string][]byte{
		"empty":  nil,
		"header": []byte(testHeaderLine),
		"1KiB":   deterministicJSONLine(1 << 10),
		"1MiB":   deterministicJSONLine(1 << 20),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			a := EncodeFrame(nil, in)
			b := EncodeFrame(make([]byte, 0, 7), in)
			c := EncodeFrame([]byte("xyz"), in)
			if !bytes.Equal(a, b) || !bytes.Equal(c, append([]byte("xyz"), a...)) {
				t.Fatal("EncodeFrame is not deterministic")
			}
			if a[4]&0x04 == 0 {
				t.Errorf("descriptor %#02x lacks the content-checksum bit", a[4])
			}
			out, err := zstdFrameDecoder.DecodeAll(a, nil)
			if err != nil || !bytes.Equal(out, in) {
				t.Fatalf("round trip failed: %v", err)
			}
			sum := sha256.Sum256(a)
			if g := golden[name]; g != "" && g != hex.EncodeToString(sum[:]) {
				t.Errorf("encoder output changed: sha256 %x, pinned %s", sum, g)
			}
			t.Logf("%s: %d → %d bytes, sha256 %x", name, len(in), len(a), sum)
		})
	}
}

// Below RawFrameMax a frame is one raw block with a 1- or 2-byte content
// size; from it on, the encoder's compressed output. Every size decodes, and
// scans as exactly one frame.
func TestEncodeFrameRawBlocks(t *testing.T) {
	for _, n := range []int{1, 255, 256, 257, RawFrameMax - 1, RawFrameMax} {
		in := deterministicJSONLine(max(n, 64))[:n]
		f := EncodeFrame(nil, in)
		if n >= RawFrameMax {
			if !bytes.Equal(f, zstdFrameEncoder.EncodeAll(in, nil)) {
				t.Errorf("%d bytes: not the encoder's frame", n)
			}
		} else if !(f[4]&0xC0 == 0 && len(f) == 4+1+1+3+n+4 || f[4]&0xC0 == 0x40 && len(f) == 4+1+2+3+n+4) {
			t.Errorf("%d bytes: not a raw single-block frame (%d bytes, descriptor %#02x)", n, len(f), f[4])
		}
		out, err := zstdFrameDecoder.DecodeAll(f, nil)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%d bytes: round trip: %v", n, err)
		}
		frames, torn, err := ScanFrames(f)
		if err != nil || torn != -1 || len(frames) != 1 || frames[0].End != int64(len(f)) {
			t.Fatalf("%d bytes: ScanFrames = %v %d %v", n, frames, torn, err)
		}
		bad := bytes.Clone(f)
		bad[len(bad)-5] ^= 1 // last plaintext byte: the checksum must catch it
		if _, err := zstdFrameDecoder.DecodeAll(bad, nil); err == nil {
			t.Errorf("%d bytes: a flipped byte decodes without a checksum error", n)
		}
	}
}

func TestEncodeFrameConcurrent(t *testing.T) {
	inputs := [][]byte{nil, []byte(testHeaderLine), deterministicJSONLine(1 << 10), deterministicJSONLine(200 << 10)}
	want := make([][]byte, len(inputs))
	for i, in := range inputs {
		want[i] = EncodeFrame(nil, in)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 20; r++ {
				i := (g + r) % len(inputs)
				if got := EncodeFrame(nil, inputs[i]); !bytes.Equal(got, want[i]) {
					errs <- fmt.Sprintf("goroutine %d: input %d encoded differently", g, i)
					return
				}
				if _, err := DecodeArtifact(cat(want[1], want[i])); err != nil {
					errs <- fmt.Sprintf("goroutine %d: decode: %v", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The reference harness and Debian's zstd must read our artifacts, and we must
// read artifacts written by libzstd (the reference's encoder).
func TestArtifactInteropZstdCLI(t *testing.T) {
	zstdPath, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("zstd CLI not on PATH; CI must install it (apt-get install zstd)")
		}
		t.Skip("zstd CLI not on PATH")
	}
	dir := t.TempDir()
	second := string(deterministicJSONLine(300 << 10)) // a multi-block frame
	plain := testHeaderLine + testEventLines + second
	path := filepath.Join(dir, "session.jsonl.zstd")
	if err := os.WriteFile(path, artifact(testHeaderLine, testEventLines, second), 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(zstdPath, "-d", "-c", path).Output()
	if err != nil {
		t.Fatalf("zstd -d -c: %v (%s)", err, stderrOf(err))
	}
	if string(out) != plain {
		t.Fatalf("zstd -d -c output differs: %d bytes, want %d", len(out), len(plain))
	}
	if out, err := exec.Command(zstdPath, "-t", path).CombinedOutput(); err != nil {
		t.Fatalf("zstd -t: %v (%s)", err, out)
	}

	// Frames written by libzstd, one per line batch, with --check as the reference writes them.
	var libFrames []byte
	for _, p := range []string{testHeaderLine, testEventLines, second} {
		cmd := exec.Command(zstdPath, "-q", "-c", "--check", "-3")
		cmd.Stdin = strings.NewReader(p)
		f, err := cmd.Output()
		if err != nil {
			t.Fatalf("zstd -c: %v (%s)", err, stderrOf(err))
		}
		if f[4]&0x04 == 0 {
			t.Fatalf("libzstd frame lacks the checksum bit: %x", f[:8])
		}
		libFrames = append(libFrames, f...)
	}
	d, err := DecodeArtifact(libFrames)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Text) != plain || len(d.Frames) != 3 || d.TornStart != -1 {
		t.Fatalf("decoding libzstd frames: %d bytes, %d frames, torn %d", len(d.Text), len(d.Frames), d.TornStart)
	}
	d, err = DecodeArtifact(libFrames[:d.Frames[1].End-1])
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Recovered) != testEventLines {
		t.Fatalf("recovering a libzstd frame: %q", d.Recovered)
	}
}

// Flush-mode recovery agrees with libzstd's streaming decoder: for a truncated
// artifact, `zstd -d -c` writes everything it decoded before running out of
// input, and its complete lines are exactly Text followed by Recovered.
func TestRecoveryMatchesZstdCLI(t *testing.T) {
	zstdPath, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("zstd CLI not on PATH; CI must install it (apt-get install zstd)")
		}
		t.Skip("zstd CLI not on PATH")
	}
	big := deterministicJSONLine(200 << 10)[:150<<10] // short hex lines: compressed blocks
	big = append(bytes.ReplaceAll(big, []byte("a"), []byte("\n")), '\n')
	data := cat(
		EncodeFrame(nil, []byte(testHeaderLine)),
		EncodeFrame(nil, []byte(testEventLines)),
		zstdMagicBytes, 0x00, 0x00, rawBlk("r1\nr2\n", false), blk(zstdBlockRLE, 3, false, 'x'), rawBlk("\nr3\n", true), // no checksum
		EncodeFrame(nil, big),
	)
	frames, _, err := ScanFrames(data)
	if err != nil || len(frames) != 4 {
		t.Fatalf("ScanFrames: %v, %v", frames, err)
	}
	var cuts []int
	for c := int(frames[0].End); c <= int(frames[2].End); c++ {
		cuts = append(cuts, c)
	}
	for off := int(frames[3].Start) + 6; ; {
		b, ok, _ := parseZstdBlockHeader(data, off)
		if !ok {
			break
		}
		for d := -2; d <= 4; d++ {
			cuts = append(cuts, off+d)
		}
		off += 3 + b.payload
		if b.last {
			cuts = append(cuts, off, off+1, off+3, off+4)
			break
		}
	}
	path := filepath.Join(t.TempDir(), "torn.zstd")
	recovering := 0
	for _, cut := range cuts {
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(zstdPath, "-d", "-c", "-q", path).Output() // fails on a torn frame, after writing what it decoded
		want := out[:bytes.LastIndexByte(out, '\n')+1]
		d, err := DecodeArtifact(data[:cut])
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if got := cat(d.Text, d.Recovered); !bytes.Equal(got, want) {
			t.Fatalf("cut %d (torn at %d): decoded %d bytes (%d recovered), zstd CLI %d bytes", cut, d.TornStart, len(got), len(d.Recovered), len(want))
		}
		if len(d.Recovered) > 0 {
			recovering++
		}
	}
	if recovering < 10 {
		t.Fatalf("only %d of %d cuts recovered anything", recovering, len(cuts))
	}
	t.Logf("%d cuts, %d with recovered lines", len(cuts), recovering)
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// BenchmarkEncodeFrame encodes one 1 KiB JSON event line: "hex" is nearly
// incompressible (stored as a raw block), "prose" is a typical assistant message.
func BenchmarkEncodeFrame(b *testing.B) {
	prose := `{"type":"assistant/message","seq":42,"time":1700000000042,"data":{"turn":3,"step":1,"text":"`
	for i := 0; len(prose) < 1<<10-5; i++ {
		prose += fmt.Sprintf("The session store replicates event %d of the log to every node. ", i)
	}
	lines := map[string][]byte{
		"hex":   deterministicJSONLine(1 << 10),
		"prose": []byte(prose[:1<<10-4] + `"}}` + "\n"),
	}
	for _, name := range []string{"hex", "prose"} {
		line := lines[name]
		if len(line) != 1<<10 {
			b.Fatalf("%s line is %d bytes", name, len(line))
		}
		b.Run(name+"/fresh", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				_ = EncodeFrame(nil, line)
			}
		})
		b.Run(name+"/reuse", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			var dst []byte
			for b.Loop() {
				dst = EncodeFrame(dst[:0], line)
			}
			b.ReportMetric(float64(len(dst)), "frame-bytes")
		})
	}
}

// EncodeLines puts whole lines in as few frames as hold maxPlain bytes each
// (a longer line alone), and the frames decode to the lines.
func TestEncodeLines(t *testing.T) {
	a, b, long := "aaaa\n", "bbbbbb\n", strings.Repeat("c", 20)+"\n"
	for _, tc := range []struct {
		name   string
		lines  string
		max    int
		frames []string
	}{
		{"nothing", "", 16, nil},
		{"one line", a, 16, []string{a}},
		{"lines under the bound share a frame", a + b, 16, []string{a + b}},
		{"exactly the bound", a + b, len(a + b), []string{a + b}},
		{"split where the next line would pass it", a + b + a, 12, []string{a + b, a}},
		{"a longer line alone", a + long + b, 12, []string{a, long, b}},
		{"a longer line first", long + a, 12, []string{long, a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := EncodeLines([]byte("x"), []byte(tc.lines), tc.max)
			if data[0] != 'x' {
				t.Fatal("dst's bytes were not kept")
			}
			var want []byte
			for _, f := range tc.frames {
				want = EncodeFrame(want, []byte(f))
			}
			if !bytes.Equal(data[1:], want) {
				t.Fatalf("%d bytes, want the frames %q (%d bytes)", len(data)-1, tc.frames, len(want))
			}
		})
	}
	// Compressed frames (past RawFrameMax) decode to the lines too.
	var lines []byte
	for i := 0; len(lines) < 3*RawFrameMax; i++ {
		lines = fmt.Appendf(lines, "{\"seq\":%d,\"text\":\"%s\"}\n", i, strings.Repeat("word ", i%7))
	}
	data := EncodeLines(EncodeFrame(nil, []byte(testHeaderLine)), lines, RawFrameMax)
	d, err := DecodeArtifact(data)
	if err != nil || d.TornStart != -1 || string(d.Text) != testHeaderLine+string(lines) || len(d.Frames) < 4 {
		t.Fatalf("decoded %d frames, %v, torn %d; text equal %v", len(d.Frames), err, d.TornStart, string(d.Text) == testHeaderLine+string(lines))
	}
}

// ArtifactText gives a whole artifact's text and refuses a torn or damaged one.
func TestArtifactText(t *testing.T) {
	whole := EncodeLines(EncodeFrame(nil, []byte(testHeaderLine)), []byte(testEventLines), MaxFramePlain)
	if text, err := ArtifactText(whole); err != nil || string(text) != testHeaderLine+testEventLines {
		t.Fatalf("whole: %q, %v", text, err)
	}
	for name, data := range map[string][]byte{
		"torn":    whole[:len(whole)-2],
		"damaged": append(append([]byte(nil), whole[:len(whole)-1]...), whole[len(whole)-1]^1),
		"empty":   nil,
	} {
		if text, err := ArtifactText(data); err == nil || text != nil {
			t.Errorf("%s: %q, %v; want an error and no text", name, text, err)
		}
	}
}
