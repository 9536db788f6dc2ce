package storage

// Packed events (state format 3). An event is a short JSON line whose field
// names, event types and message framing repeat from event to event and from
// session to session; compressed alone, as a general-purpose codec sees it,
// it barely shrinks (0.87–0.94 of its size for the recorded sessions under
// testdata/recorded, with S2), because the repetition is across events, not
// within one. Compressed against a fixed dictionary of lines in the event
// log's own shape, the same events take 0.30–0.49 of their size. Each event is
// packed on its own, so damage stays within the event it hits: its checksum
// (over the unpacked bytes) names its seq, and it is repaired from an
// artifact as before (repairEvent2).
//
// The codec is S2 (block format, klauspost/compress), whose dictionary
// encoder costs about 2 µs per event here (most of it clearing its 64 KiB
// hash table, whatever the event's size) and decodes in about 0.1 µs;
// zstd with a dictionary packs a little tighter but costs about 10 µs per
// event, which every node would pay on every append.
//
// Stored events do not name their dictionary: a frame of version 2
// (framelog.go) means this one. eventdict1.jsonl must therefore never change
// (TestEventDictionaryIsPinned); a better dictionary is a new frame version.

import (
	_ "embed"

	"github.com/klauspost/compress/s2"
)

// eventDictText is the dictionary: event lines of every common type, written
// for this purpose (no user's data), the most frequent shapes last, where
// S2's shortest offsets reach them.
//
//go:embed eventdict1.jsonl
var eventDictText []byte

// eventDict starts its first match at the start of an event's line.
var eventDict = s2.MakeDict(eventDictText, []byte(`{"type":"`))

// minPackedEvent is the smallest event worth packing.
const minPackedEvent = 24

// maxPackedEvent bounds an event's unpacked size (a frame's header, which
// states it, is checksummed; this guards the allocation anyway).
const maxPackedEvent = 1 << 30

// packEvent returns ev packed into dst (which must have room for
// s2.MaxEncodedLen(len(ev)) bytes) when that, with the size the frame
// header then stores, is shorter than ev; ok is false otherwise.
func packEvent(dst, ev []byte) (packed []byte, ok bool) {
	if len(ev) < minPackedEvent {
		return nil, false
	}
	packed = eventDict.Encode(dst, ev)
	if len(packed)+uvarintLen(uint64(len(ev))) >= len(ev) {
		return nil, false
	}
	return packed, true
}

// unpackEvent unpacks a packed event of size bytes into dst (whose capacity
// is at least size); ok is false when it does not unpack to exactly size
// bytes (damage: the caller's checksum then names the event).
func unpackEvent(dst, packed []byte, size int) (ev []byte, ok bool) {
	if n, err := s2.DecodedLen(packed); err != nil || n != size {
		return nil, false
	}
	ev, err := eventDict.Decode(dst[:0:size], packed)
	if err != nil || len(ev) != size {
		return nil, false
	}
	return ev, true
}

// PackedEvent returns the bytes a frame of state format 3 stores for ev when
// it packs it; ok is false when ev is stored as it is. For tools and tests
// that look for an event's bytes in a state file.
func PackedEvent(ev []byte) (packed []byte, ok bool) {
	return packEvent(make([]byte, s2.MaxEncodedLen(len(ev))), ev)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
