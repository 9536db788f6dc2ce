package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// proseTurn is a turn whose text is ordinary prose, as agent logs are.
func proseTurn(id string, first int64, events int) *fsmpb.Command {
	words := strings.Fields("the model read the file and ran the tests again before it wrote a short answer about what changed and why")
	var evs []string
	for i := range events {
		var text strings.Builder
		for j := range 40 {
			text.WriteString(words[(i*7+j*3)%len(words)])
			text.WriteByte(' ')
		}
		evs = append(evs, fmt.Sprintf(`{"type":"assistant/chunk","seq":%d,"time":5,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":%q}}}`,
			first+int64(i), text.String()))
	}
	return appendCmd(id, first, evs...)
}

// noiseCmd carries bytes no compressor shrinks.
func noiseCmd(id string, n int) *fsmpb.Command {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return &fsmpb.Command{Cmd: &fsmpb.Command_Append{Append: &fsmpb.Append{SessionId: id, Events: [][]byte{b}}}}
}

func TestPack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cmds   []*fsmpb.Command
		packed bool
	}{
		{"a create is below packMin", []*fsmpb.Command{createCmd("s")}, false},
		{"turns of prose", []*fsmpb.Command{createCmd("s"), proseTurn("s", 0, 20), proseTurn("t", 3, 5)}, true},
		{"incompressible bytes", []*fsmpb.Command{noiseCmd("s", 4096)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := Encode(&fsmpb.Entry{NowUnixMs: 77, Commands: tc.cmds})
			if err != nil {
				t.Fatal(err)
			}
			p := Pack(data)
			if got := !bytes.Equal(p, data); got != tc.packed {
				t.Fatalf("packed = %v (%d → %d bytes), want %v", got, len(data), len(p), tc.packed)
			}
			want, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(p)
			if err != nil {
				t.Fatalf("decode packed: %v", err)
			}
			if tc.packed {
				if len(p) > len(data)/2 {
					t.Errorf("prose packed to %d of %d bytes, want at most half", len(p), len(data))
				}
				if got.Version != PackedVersion {
					t.Errorf("packed entry decodes with version %d, want %d", got.Version, PackedVersion)
				}
				want.Version = PackedVersion
			}
			if !proto.Equal(got, want) {
				t.Fatalf("decoded packed entry differs:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// Pack writes by hand what proto.Marshal would write for the same message.
func TestPackWireForm(t *testing.T) {
	data, err := Encode(&fsmpb.Entry{NowUnixMs: 1, Commands: []*fsmpb.Command{proseTurn("s", 0, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	p := Pack(data)
	var e fsmpb.Entry
	if err := proto.Unmarshal(p, &e); err != nil {
		t.Fatal(err)
	}
	if e.Version != PackedVersion || e.PackedSize != uint64(len(data)) || len(e.Packed) == 0 || len(e.Commands) != 0 {
		t.Fatalf("packed entry = version %d, size %d, %d packed bytes, %d commands", e.Version, e.PackedSize, len(e.Packed), len(e.Commands))
	}
	m, err := proto.MarshalOptions{Deterministic: true}.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m, p) {
		t.Fatalf("Pack's bytes differ from proto.Marshal's")
	}
}

func TestDecodeRefusesBadPacks(t *testing.T) {
	inner, err := Encode(&fsmpb.Entry{NowUnixMs: 1, Commands: []*fsmpb.Command{proseTurn("s", 0, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	z := packEncoder.EncodeAll(inner, nil)
	packed := Pack(inner)
	damaged := bytes.Clone(z)
	damaged[len(damaged)/2] ^= 0x40
	for _, tc := range []struct {
		name  string
		entry *fsmpb.Entry
		want  string
	}{
		{"version 7", &fsmpb.Entry{Version: 7, Packed: z, PackedSize: uint64(len(inner))}, "packed entry of command version 7"},
		{"newer than this build", &fsmpb.Entry{Version: CommandVersion + 1, Packed: z, PackedSize: uint64(len(inner))}, "not supported"},
		{"commands of its own", &fsmpb.Entry{Version: PackedVersion, Packed: z, PackedSize: uint64(len(inner)), Commands: []*fsmpb.Command{createCmd("x")}}, "fields of its own"},
		{"a clock of its own", &fsmpb.Entry{Version: PackedVersion, Packed: z, PackedSize: uint64(len(inner)), NowUnixMs: 3}, "fields of its own"},
		{"size too small", &fsmpb.Entry{Version: PackedVersion, Packed: z, PackedSize: uint64(len(inner)) - 1}, "unpack"},
		{"size too large", &fsmpb.Entry{Version: PackedVersion, Packed: z, PackedSize: uint64(len(inner)) + 1}, "want"},
		{"size above the bound", &fsmpb.Entry{Version: PackedVersion, Packed: z, PackedSize: packMax + 1}, "outside"},
		{"size without bytes", &fsmpb.Entry{Version: PackedVersion, PackedSize: 10}, "unpack"},
		{"bytes without size", &fsmpb.Entry{Version: PackedVersion, Packed: z}, "outside"},
		{"damaged frame", &fsmpb.Entry{Version: PackedVersion, Packed: damaged, PackedSize: uint64(len(inner))}, "unpack"},
		{"not a frame", &fsmpb.Entry{Version: PackedVersion, Packed: inner, PackedSize: uint64(len(inner))}, "unpack"},
		{"packed twice", &fsmpb.Entry{Version: PackedVersion, Packed: packEncoder.EncodeAll(packed, nil), PackedSize: uint64(len(packed))}, "inside a packed entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.entry)
			if err != nil {
				t.Fatal(err)
			}
			e, err := Decode(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, %v; want an error containing %q", e, err, tc.want)
			}
		})
	}
}

// A packed entry applies exactly as the entry it carries, and a node that
// applies only older versions refuses it as that build would: by panicking.
func TestApplyPackedEntries(t *testing.T) {
	var plain, packed []*raft.Log
	for i, cmds := range [][]*fsmpb.Command{
		{{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c"}}}},
		{createCmd("a"), createCmd("b")},
		{proseTurn("a", 0, 8), proseTurn("b", 0, 3)},
		{proseTurn("a", 8, 30)},
	} {
		l := entry(t, uint64(i+1), int64(100+i), cmds...)
		plain = append(plain, l)
		p := *l
		p.Data = Pack(l.Data)
		packed = append(packed, &p)
	}
	if bytes.Equal(packed[3].Data, plain[3].Data) {
		t.Fatal("the last entry was not packed")
	}
	f1, db1 := newTestFSM(t)
	f2, db2 := newTestFSM(t)
	r1, r2 := results(t, f1.ApplyBatch(plain)), results(t, f2.ApplyBatch(packed))
	if len(r1) != len(r2) {
		t.Fatalf("%d results from plain entries, %d from packed ones", len(r1), len(r2))
	}
	for i := range r1 {
		if !proto.Equal(r1[i], r2[i]) {
			t.Errorf("result %d: plain %v, packed %v", i, r1[i], r2[i])
		}
	}
	if a, b := logicalDump(t, db1), logicalDump(t, db2); a != b {
		t.Fatalf("state differs:\nplain:  %s\npacked: %s", a, b)
	}

	old, _ := newTestFSM(t)
	old.LimitVersion(PackedVersion - 1)
	old.ApplyBatch(plain[:3])
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "command version 8 not supported") {
			t.Fatalf("a version-7 node applying a packed entry: recovered %v, want a version panic", r)
		}
	}()
	old.ApplyBatch(packed[3:])
}
