package fsm

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// Packed entries (command version 8). The leader compresses a grouped entry
// once, before raft.Apply, so every node's Raft log, the replication traffic
// and the entries raft keeps in memory carry the compressed bytes; each node
// decompresses an entry once, when it applies it. Event text (JSON prose)
// shrinks to about 0.4 of its size, so the Raft log stops being a second
// full copy of it next to state.db.
//
// The packed form is an Entry of its own, {version 8, packed, packed_size},
// so a build that predates it refuses it by version like any newer command
// (its FSM panics rather than skip it); the leader packs only once every
// voter advertises version 8 (PackedVersion).

const (
	// packMin is the smallest encoded entry worth packing: below it, a Create or
	// a plan-mode call, the frame's own overhead eats most of the gain.
	packMin = 512
	// packMax bounds what is packed and, so, what unpacking may allocate: an
	// entry is at most MaxGroupBytes (1 MiB) of commands, or one command of a
	// large Append; anything larger is proposed as it is.
	packMax = 64 << 20
)

// packEncoder compresses at zstd's fastest level: on event text it keeps
// within a few percent of the default level's size for far less CPU. The
// content checksum makes a damaged frame fail to unpack instead of decoding
// to other commands.
var packEncoder = func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(true),
		zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), 4)),
	)
	if err != nil {
		panic("fsm: zstd encoder options rejected: " + err.Error())
	}
	return enc
}()

// packDecoder's limits keep a hostile or damaged frame from allocating more
// than packMax.
var packDecoder = func() *zstd.Decoder {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(packMax),
		zstd.WithDecoderMaxWindow(packMax),
	)
	if err != nil {
		panic("fsm: zstd decoder options rejected: " + err.Error())
	}
	return dec
}()

// packScratch holds the compressed bytes while the packed entry is built;
// buffers above packScratchMax (an unusually large entry) are not kept.
var packScratch = sync.Pool{New: func() any { return new([]byte) }}

const packScratchMax = 4 << 20

// Pack returns the packed form of an encoded entry (Encode's output), or data
// itself when packing would not save an eighth of it or data is outside
// packMin..packMax. Only propose a packed entry once every voter applies
// PackedVersion. Safe for concurrent use.
func Pack(data []byte) []byte {
	if len(data) < packMin || len(data) > packMax {
		return data
	}
	sp := packScratch.Get().(*[]byte)
	defer packScratch.Put(sp)
	z := packEncoder.EncodeAll(data, (*sp)[:0])
	if cap(z) <= packScratchMax {
		*sp = z[:0]
	}
	if len(z) > len(data)-len(data)/8 {
		return data
	}
	// Field by field, in field-number order, as proto.Marshal writes it
	// (TestPackWireForm), without copying z twice.
	out := make([]byte, 0, len(z)+5*binary.MaxVarintLen64)
	out = protowire.AppendTag(out, 1, protowire.VarintType)
	out = protowire.AppendVarint(out, PackedVersion)
	out = protowire.AppendTag(out, 4, protowire.BytesType)
	out = protowire.AppendBytes(out, z)
	out = protowire.AppendTag(out, 5, protowire.VarintType)
	out = protowire.AppendVarint(out, uint64(len(data)))
	return out
}

// unpack returns the entry a packed one carries, stamped with the packed
// entry's version (so a node limited to an older version refuses it as that
// build would).
func unpack(outer *fsmpb.Entry) (*fsmpb.Entry, error) {
	switch {
	case outer.Version < PackedVersion:
		return nil, fmt.Errorf("decode entry: packed entry of command version %d", outer.Version)
	case len(outer.Commands) > 0 || outer.NowUnixMs != 0:
		return nil, fmt.Errorf("decode entry: packed entry with fields of its own")
	case outer.PackedSize == 0 || outer.PackedSize > packMax:
		return nil, fmt.Errorf("decode entry: packed size %d outside 1..%d", outer.PackedSize, packMax)
	}
	raw, err := packDecoder.DecodeAll(outer.Packed, make([]byte, 0, outer.PackedSize))
	if err != nil {
		return nil, fmt.Errorf("decode entry: unpack: %w", err)
	}
	if uint64(len(raw)) != outer.PackedSize {
		return nil, fmt.Errorf("decode entry: unpacked %d bytes, want %d", len(raw), outer.PackedSize)
	}
	var e fsmpb.Entry
	if err := proto.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("decode packed entry: %w", err)
	}
	switch {
	case e.Packed != nil || e.PackedSize != 0:
		return nil, fmt.Errorf("decode entry: packed entry inside a packed entry")
	case e.Version == 0 || e.Version > CommandVersion:
		return nil, fmt.Errorf("decode entry: command version %d not supported (this build: %d)", e.Version, CommandVersion)
	}
	e.Version = max(e.Version, outer.Version)
	return &e, nil
}
