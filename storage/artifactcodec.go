package storage

// The Zstandard artifact codec (docs/events.md#zstd,
// docs/events.md#committed-region; docs/design.md "Artifacts").
//
// An artifact (`session.jsonl.zstd`) is a plain concatenation of independent,
// standard Zstandard frames (RFC 8878), each with the content-checksum flag set.
// Frame 1 holds exactly the header line; every later frame holds whole
// `\n`-terminated lines (EncodeLines: at most MaxFramePlain bytes of them,
// a longer line alone). This file encodes frames, locates
// frames structurally (without decompressing, exactly as the reference does), and
// decodes a whole artifact, including the flush-mode recovery of a torn final
// frame. It does not parse JSON: the record scanner above it does.

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore"
)

const (
	// zstdFrameMagic is the Zstandard frame magic number, stored little-endian
	// as 28 B5 2F FD.
	zstdFrameMagic = 0xFD2FB528

	// zstdMaxWindow is the largest window a frame may require: libzstd's
	// default windowLogMax (27) for streaming decompression, which is what the
	// reference harness (Node's zlib zstd bindings) decodes with. Frames this
	// package writes need at most 8 MiB.
	zstdMaxWindow = 1 << 27

	// zstdMaxBlockSize is RFC 8878's Block_Maximum_Size (128 KiB).
	zstdMaxBlockSize = 128 << 10

	// zstdMinWindow is RFC 8878's smallest window (1 KiB).
	zstdMinWindow = 1 << 10
)

// Frame header descriptor bits (RFC 8878 §3.1.1.1.1).
const (
	zstdFHDReserved      = 0x18 // the reserved bit 0x08 and the unused bit 0x10; the reference rejects both
	zstdFHDSingleSegment = 0x20
	zstdFHDChecksum      = 0x04
	zstdFHDDictMask      = 0x03
)

// Block types (RFC 8878 §3.1.1.2.2).
const (
	zstdBlockRaw        = 0
	zstdBlockRLE        = 1
	zstdBlockCompressed = 2
	zstdBlockReserved   = 3
)

// zstdEmptyFrame is the frame of an empty plaintext, byte-identical to what libzstd
// (and the `zstd --check` CLI) writes: single-segment, content size 0, checksum
// flag set, one empty raw last block, and the low 32 bits of XXH64("") =
// 0x51D8E999. The library's own zero frame omits the checksum, and every
// artifact frame must carry one (docs/events.md#zstd).
var zstdEmptyFrame = []byte{0x28, 0xB5, 0x2F, 0xFD, 0x24, 0x00, 0x01, 0x00, 0x00, 0x99, 0xE9, 0xD8, 0x51}

// zstdFrameEncoder writes every artifact frame. Its options are pinned so that
// a frame is a function of its plaintext within one build (a whole rebuild of
// a session's artifact is the same bytes on every node): a fixed level, no
// dictionary, content checksum on, no padding and hence no skippable frames.
// The level is the fastest: on session logs it compresses within a few
// percent of the default (22 % against 21 % of the text) for 30 % less CPU.
// EncodeAll runs each call on the calling goroutine with one of
// zstdFrameEncoders encoder states, reset first: which one, or how many there
// are, does not change a byte, and an artifact rebuild (several workers) does
// not wait for one.
var zstdFrameEncoder = newZstdFrameEncoder()

// zstdFrameEncoders bounds the encoder states (about 1.3 MiB each, allocated
// on first use) on a machine with many processors.
var zstdFrameEncoders = min(runtime.GOMAXPROCS(0), 8)

func newZstdFrameEncoder() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(true),
		zstd.WithEncoderConcurrency(zstdFrameEncoders),
		zstd.WithZeroFrames(true),
	)
	if err != nil {
		panic("storage: zstd encoder options rejected: " + err.Error())
	}
	return enc
}

// zstdFrameDecoder verifies and decodes complete frames. DecodeAll is safe for
// concurrent use; no streams are ever attached to this decoder.
var zstdFrameDecoder = newZstdFrameDecoder()

func newZstdFrameDecoder() *zstd.Decoder {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
	)
	if err != nil {
		panic("storage: zstd decoder options rejected: " + err.Error())
	}
	return dec
}

// EncodeFrame appends to dst one standard Zstandard frame (RFC 8878) holding
// plaintext, with the content-checksum flag set, and returns the extended slice.
// Output is deterministic for a given input and library version (pinned level,
// single-threaded encoder, no dictionary, never skippable frames). Safe for
// concurrent use.
//
// A plaintext shorter than RawFrameMax is stored in one raw block: one JSON
// line of that size compresses by a fifth at best, and compressing such
// frames was 8-13 % of a node's CPU at one-event Appends (a profile at 256
// writers), more than writing them.
func EncodeFrame(dst, plaintext []byte) []byte {
	if len(plaintext) == 0 {
		return append(dst, zstdEmptyFrame...)
	}
	if len(plaintext) < RawFrameMax {
		return appendRawFrame(dst, plaintext)
	}
	return zstdFrameEncoder.EncodeAll(plaintext, dst)
}

// RawFrameMax is the plaintext size from which EncodeFrame compresses.
const RawFrameMax = 2 << 10

// MaxFramePlain bounds the plaintext of a frame EncodeLines writes: a reader
// decodes a frame whole, so its memory stays bounded however much one write
// carries.
const MaxFramePlain = 1 << 20

// EncodeLines appends to dst the frames of lines (whole `\n`-terminated
// lines): as few as hold at most maxPlain bytes of plaintext each, a longer
// line alone in its frame; nothing for no lines. Many lines in one frame
// compress far better than a frame each (a lone event line is stored raw).
func EncodeLines(dst, lines []byte, maxPlain int) []byte {
	start, end := 0, 0
	for end < len(lines) {
		next := len(lines)
		if nl := bytes.IndexByte(lines[end:], '\n'); nl >= 0 {
			next = end + nl + 1
		}
		if next-start > maxPlain && end > start {
			dst = EncodeFrame(dst, lines[start:end])
			start = end
		}
		end = next
	}
	if end > start {
		dst = EncodeFrame(dst, lines[start:end])
	}
	return dst
}

// appendRawFrame appends a single-segment frame of one raw last block:
// magic, descriptor (single segment, checksum, a 1- or 2-byte content size),
// the content size, the block header, the plaintext and the low 32 bits of
// its XXH64, as libzstd writes for an incompressible input. 0 < len(p) <
// 65536+256.
func appendRawFrame(dst, p []byte) []byte {
	n := len(p)
	dst = binary.LittleEndian.AppendUint32(dst, zstdFrameMagic)
	if n < 256 {
		dst = append(dst, zstdFHDSingleSegment|zstdFHDChecksum, byte(n))
	} else {
		dst = append(dst, 0x40|zstdFHDSingleSegment|zstdFHDChecksum) // content-size flag 1: 2 bytes, minus 256
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n-256))
	}
	bh := uint32(n)<<3 | zstdBlockRaw<<1 | 1 // last block
	dst = append(dst, byte(bh), byte(bh>>8), byte(bh>>16))
	dst = append(dst, p...)
	return binary.LittleEndian.AppendUint32(dst, uint32(xxhash.Sum64(p)))
}

// Frame is the byte range [Start, End) of one complete frame in an artifact.
type Frame struct{ Start, End int64 }

// ScanFrames locates frames structurally without decompressing, exactly as
// docs/events.md#zstd describes: magic 28 B5 2F FD; a frame header descriptor
// whose bits 0x18 must be clear; a window byte unless single-segment; 0, 1, 2 or 4
// dictionary-id bytes; frame-content-size bytes per flag; 3-byte block headers
// with a last-block bit and a type, where raw and compressed blocks carry `size`
// bytes, RLE blocks 1 byte, and the reserved type 3 is an error; an optional
// 4-byte checksum. Skippable frames are rejected as invalid magic.
//
// If the data ends inside a frame (fewer than 4 bytes of magic, or part of the
// header, a block header, a block payload or the checksum missing), tornStart is
// that frame's start offset and frames holds every frame before it; otherwise
// tornStart is -1. Structural errors in the bytes present are
// `corrupt Zstandard session log: invalid frame magic at byte N` (N: frame start),
// `corrupt Zstandard session log: reserved frame-header bit at byte N` (N: the
// descriptor byte) and `corrupt Zstandard session log: reserved block type at byte N`
// (N: the block header), as *sessionstore.Error with reason CORRUPTION.
func ScanFrames(data []byte) (frames []Frame, tornStart int64, err error) {
	for off := 0; off < len(data); {
		end, err := scanZstdFrame(data, off)
		if err != nil {
			return nil, -1, err
		}
		if end < 0 {
			return frames, int64(off), nil
		}
		frames = append(frames, Frame{Start: int64(off), End: int64(end)})
		off = end
	}
	return frames, -1, nil
}

// zstdFrameHeader is the parsed header of a frame (RFC 8878 §3.1.1.1).
type zstdFrameHeader struct {
	descriptor  byte
	window      uint64 // Window_Size, or the content size for a single-segment frame
	dictID      uint32
	contentSize uint64 // meaningful only when hasSize
	hasSize     bool
}

// parseZstdFrameHeader reads the frame header at data[start:], whose magic has been
// checked. It returns the header, the offset of the first block header, and
// ok=false if the data ends inside the header. A reserved descriptor bit is an
// error.
func parseZstdFrameHeader(data []byte, start int) (h zstdFrameHeader, next int, ok bool, err error) {
	off := start + 4
	if off >= len(data) {
		return h, 0, false, nil
	}
	h.descriptor = data[off]
	if h.descriptor&zstdFHDReserved != 0 {
		return h, 0, false, zstdCorruptf("corrupt Zstandard session log: reserved frame-header bit at byte %d", off)
	}
	off++
	single := h.descriptor&zstdFHDSingleSegment != 0
	dictBytes := [4]int{0, 1, 2, 4}[h.descriptor&zstdFHDDictMask]
	sizeBytes := [4]int{0, 2, 4, 8}[h.descriptor>>6]
	if sizeBytes == 0 && single {
		sizeBytes = 1
	}
	need := dictBytes + sizeBytes
	if !single {
		need++
	}
	if len(data)-off < need {
		return h, 0, false, nil
	}
	if !single {
		wd := data[off]
		off++
		exp, mantissa := uint(wd>>3), uint64(wd&7)
		base := uint64(1) << (10 + exp)
		h.window = base + base/8*mantissa
	}
	switch dictBytes {
	case 1:
		h.dictID = uint32(data[off])
	case 2:
		h.dictID = uint32(binary.LittleEndian.Uint16(data[off:]))
	case 4:
		h.dictID = binary.LittleEndian.Uint32(data[off:])
	}
	off += dictBytes
	h.hasSize = sizeBytes > 0
	switch sizeBytes {
	case 1:
		h.contentSize = uint64(data[off])
	case 2:
		h.contentSize = uint64(binary.LittleEndian.Uint16(data[off:])) + 256
	case 4:
		h.contentSize = uint64(binary.LittleEndian.Uint32(data[off:]))
	case 8:
		h.contentSize = binary.LittleEndian.Uint64(data[off:])
	}
	off += sizeBytes
	if single {
		h.window = h.contentSize
	}
	return h, off, true, nil
}

// zstdBlockHeader is a parsed 3-byte block header (RFC 8878 §3.1.1.2.1).
type zstdBlockHeader struct {
	last    bool
	typ     int
	size    int // Block_Size
	payload int // bytes following the header: 1 for RLE, else size
}

// parseZstdBlockHeader reads the block header at data[off:]; ok=false if fewer than
// 3 bytes remain. The reserved block type is an error.
func parseZstdBlockHeader(data []byte, off int) (b zstdBlockHeader, ok bool, err error) {
	if len(data)-off < 3 {
		return b, false, nil
	}
	v := uint32(data[off]) | uint32(data[off+1])<<8 | uint32(data[off+2])<<16
	b.last = v&1 != 0
	b.typ = int(v>>1) & 3
	b.size = int(v >> 3)
	if b.typ == zstdBlockReserved {
		return b, false, zstdCorruptf("corrupt Zstandard session log: reserved block type at byte %d", off)
	}
	b.payload = b.size
	if b.typ == zstdBlockRLE {
		b.payload = 1
	}
	return b, true, nil
}

// scanZstdFrame walks the frame starting at data[start:] and returns its end offset,
// or -1 if the data ends inside it.
func scanZstdFrame(data []byte, start int) (end int, err error) {
	if len(data)-start < 4 {
		return -1, nil
	}
	if binary.LittleEndian.Uint32(data[start:]) != zstdFrameMagic {
		return 0, zstdCorruptf("corrupt Zstandard session log: invalid frame magic at byte %d", start)
	}
	h, off, ok, err := parseZstdFrameHeader(data, start)
	if err != nil || !ok {
		return -1, err
	}
	for {
		b, ok, err := parseZstdBlockHeader(data, off)
		if err != nil || !ok {
			return -1, err
		}
		off += 3
		if len(data)-off < b.payload {
			return -1, nil
		}
		off += b.payload
		if b.last {
			break
		}
	}
	if h.descriptor&zstdFHDChecksum != 0 {
		if len(data)-off < 4 {
			return -1, nil
		}
		off += 4
	}
	return off, nil
}

// Decoded is the result of DecodeArtifact.
type Decoded struct {
	Text      []byte  // concatenated plaintext of all complete frames (header line first)
	Frames    []Frame // the complete frames
	TornStart int64   // start of a structurally incomplete final frame, or -1
	Recovered []byte  // complete lines recovered from the torn final frame (flush-mode decode, no checksum), possibly empty
}

// ArtifactText is the text of a whole artifact: DecodeArtifact's, where a
// torn final frame is an error too (a file being written, or cut short).
// Replicas agree on this text, not on the bytes (where each cut its frames).
func ArtifactText(data []byte) ([]byte, error) {
	d, err := DecodeArtifact(data)
	if err == nil && d.TornStart >= 0 {
		err = zstdCorruptf("Zstandard session log ends inside a frame at byte %d", d.TornStart)
	}
	if err != nil {
		return nil, err
	}
	return d.Text, nil
}

// DecodeArtifact decodes a whole artifact as docs/events.md#zstd specifies.
// Frames are located with ScanFrames (whose structural errors it returns). With
// no complete frame at all it fails with `empty or header-less Zstandard session log`.
// Every complete frame is decompressed with checksum verification, in order; the
// first that fails gives `corrupt Zstandard session log: frame at byte <start> failed validation`.
// Frame 1 must then hold exactly one line ending in "\n"
// (`corrupt Zstandard session log: first frame is not exactly one header line`),
// and every complete frame's plaintext must be empty or end with "\n"
// (`corrupt Zstandard session log: complete frame contains a torn JSONL record`).
// The available bytes of a torn final frame are decoded without end or checksum
// verification, as a streaming decoder in flush mode does, and the complete
// lines among them are returned as Recovered.
//
// Errors are *sessionstore.Error with reason CORRUPTION. On the torn-record
// error the returned Decoded is nevertheless filled in, so that a caller
// scanning records can give a committed-region error
// (docs/events.md#committed-region) precedence; on every other error it is
// empty with TornStart -1. DecodeArtifact does not parse JSON.
func DecodeArtifact(data []byte) (Decoded, error) {
	frames, tornStart, err := ScanFrames(data)
	if err != nil {
		return Decoded{TornStart: -1}, err
	}
	if len(frames) == 0 {
		return Decoded{TornStart: -1}, zstdCorruptf("empty or header-less Zstandard session log")
	}
	var (
		text    []byte
		scratch []byte
		ends    = make([]int, len(frames)) // end of each frame's plaintext in text
	)
	for i, f := range frames {
		// Decode into a reused buffer and append: DecodeAll sizes a fresh
		// destination exactly from the content size, so decoding straight into
		// text would copy it once per frame.
		scratch, err = zstdFrameDecoder.DecodeAll(data[f.Start:f.End], scratch[:0])
		if err != nil {
			return Decoded{TornStart: -1}, zstdCorruptf("corrupt Zstandard session log: frame at byte %d failed validation", f.Start)
		}
		text = append(text, scratch...)
		ends[i] = len(text)
	}
	header := text[:ends[0]]
	if len(header) == 0 || bytes.IndexByte(header, '\n') != len(header)-1 {
		return Decoded{TornStart: -1}, zstdCorruptf("corrupt Zstandard session log: first frame is not exactly one header line")
	}
	d := Decoded{Text: text, Frames: frames, TornStart: tornStart}
	if tornStart >= 0 {
		d.Recovered = recoverTornZstdFrame(data[tornStart:])
	}
	for i := 1; i < len(ends); i++ {
		if ends[i] > ends[i-1] && text[ends[i]-1] != '\n' {
			return d, zstdCorruptf("corrupt Zstandard session log: complete frame contains a torn JSONL record")
		}
	}
	return d, nil
}

// recoverTornZstdFrame decodes the bytes of a structurally incomplete final frame as
// far as they go, the way a streaming decoder in flush mode does (libzstd emits
// each complete block and the available part of a raw block; nothing is
// verified at the end), and returns the complete lines of that output.
//
// It rebuilds the available blocks as a well-formed frame with no content size
// and no checksum, the last available block marked last, and streams it through
// a decoder, keeping what was produced before any error. Nothing is recovered
// when the header is incomplete, names a dictionary, or needs a window larger
// than libzstd's default limit.
func recoverTornZstdFrame(torn []byte) []byte {
	if len(torn) < 4 || binary.LittleEndian.Uint32(torn) != zstdFrameMagic {
		return nil
	}
	h, off, ok, err := parseZstdFrameHeader(torn, 0)
	if err != nil || !ok || h.dictID != 0 {
		return nil
	}
	window := max(h.window, zstdMinWindow)
	if window > zstdMaxWindow {
		return nil
	}

	type span struct {
		at   int // offset of the payload in torn
		hdr  zstdBlockHeader
		data int // payload bytes available
	}
	var (
		blocks []span
		bound  uint64 // upper bound of the output of blocks
	)
	for {
		b, ok, err := parseZstdBlockHeader(torn, off)
		if err != nil || !ok {
			break
		}
		off += 3
		avail := len(torn) - off
		if avail < b.payload {
			if b.typ == zstdBlockRaw && avail > 0 {
				// A streaming decoder copies a raw block's bytes as they arrive.
				b.size = avail
				blocks = append(blocks, span{at: off, hdr: b, data: avail})
				bound += uint64(avail)
			}
			break
		}
		blocks = append(blocks, span{at: off, hdr: b, data: b.payload})
		if b.typ == zstdBlockCompressed {
			bound += min(window, zstdMaxBlockSize)
		} else {
			bound += uint64(b.size)
		}
		off += b.payload
		if b.last {
			break
		}
	}
	if len(blocks) == 0 {
		return nil
	}

	// A window covering everything the blocks can produce decodes them exactly
	// as the original window does, without reserving the original's memory.
	wd := zstdWindowDescriptor(min(window, max(bound, zstdMinWindow)))
	synth := make([]byte, 0, 6+off+3)
	synth = binary.LittleEndian.AppendUint32(synth, zstdFrameMagic)
	synth = append(synth, 0x00, wd) // no content size, multi-segment, no checksum, no dictionary
	for i, s := range blocks {
		v := uint32(s.hdr.size)<<3 | uint32(s.hdr.typ)<<1
		if i == len(blocks)-1 {
			v |= 1
		}
		synth = append(synth, byte(v), byte(v>>8), byte(v>>16))
		synth = append(synth, torn[s.at:s.at+s.data]...)
	}

	dec, err := zstd.NewReader(struct{ io.Reader }{bytes.NewReader(synth)},
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
	)
	if err != nil {
		return nil
	}
	defer dec.Close()
	var out []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := dec.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	return out[:bytes.LastIndexByte(out, '\n')+1]
}

// zstdWindowDescriptor returns the smallest Window_Descriptor (RFC 8878
// §3.1.1.1.2) whose window is at least size (1 KiB ≤ size ≤ zstdMaxWindow).
func zstdWindowDescriptor(size uint64) byte {
	for exp := uint(0); exp < 32; exp++ {
		base := uint64(1) << (10 + exp)
		for mantissa := uint64(0); mantissa < 8; mantissa++ {
			if base+base/8*mantissa >= size {
				return byte(exp<<3) | byte(mantissa)
			}
		}
	}
	return 0xFF
}

// zstdCorruptf builds a CORRUPTION error with one of the reference's texts.
func zstdCorruptf(format string, args ...any) *sessionstore.Error {
	return sessionstore.Errorf(sessionstore.ReasonCorruption, format, args...)
}
