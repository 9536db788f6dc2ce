package jepsen

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore/jepsen/cluster"
	"github.com/sessionstore/sessionstore/storage"
)

// The disk faults: damage to a stopped node's files (corrupt-disk) and a data
// directory of another cluster (foreign-volume). Each injects, checks that
// the node reacted as README "Damaged files" and "Identity of a data
// directory" say, and undoes with the operator's documented repair where the
// node does not repair itself.

// diskBackend is what the disk faults need from a backend besides Backend.
type diskBackend interface {
	cluster.Backend
	// Logs returns what n wrote since the given time.
	Logs(ctx context.Context, n cluster.Node, since time.Time) (string, error)
	// Exited reports whether n stopped by itself, and its exit code.
	Exited(ctx context.Context, n cluster.Node) (bool, int, error)
	// Offline runs a node command on n's data directory while n is stopped.
	Offline(ctx context.Context, n cluster.Node, args ...string) (string, error)
	// ForeignDeployment leaves data directories of another cluster with the
	// same node ids and addresses under root/<node> and returns its id.
	ForeignDeployment(ctx context.Context, root string) (string, error)
	// ReplaceDataDir moves stopped n's data directory to aside and puts
	// with in its place ("" = a new empty directory).
	ReplaceDataDir(n cluster.Node, aside, with string) error
}

// What the nodes log (and exit with) when they meet the damage; the
// documented reactions the faults verify.
const (
	logStateRebuilt = "state database is damaged or cannot be opened; moving it aside and rebuilding"
	logWALTornCut   = "raft wal: truncated a torn tail"
	logWALRefused   = "the Raft log lost committed entries"
	logRepairHint   = "sessionstore repair --data-dir"
	logHandshake    = "Raft connection refused by the handshake"
)

// sameSizeArtifactFlips makes half of corrupt-disk's artifact damage a bare
// bit flip that keeps the file's size. The start-up pass compares sizes with
// the watermarks only; a same-size flip is caught when the artifact is
// served (its CRC-32C against the watermark's): the download comes from the
// state database and the artifact is rewritten. The undo downloads it to
// see both. (Off, every damage also changes the size.)
const sameSizeArtifactFlips = true

// diskDamage is what corrupt-disk did to one node, for verify and undo.
type diskDamage struct {
	node     cluster.Node
	kind     string // "state.db" or "wal"
	what     string // what was flipped, for the note
	started  time.Time
	expect   string // the WAL case: "refuse" (the record is at or below the committed index) or "cut"
	refused  bool   // the node refused to start (the WAL case at a committed index)
	artPath  string // the damaged artifact ("" when the node had none)
	artOrig  []byte // its bytes before the damage
	artFlip  int    // the flipped byte's offset
	artTotal int    // its size after the damage
}

// diskState is the disk faults' state within a run (the nemesis runs one
// fault at a time).
type diskState struct {
	next    int // the rotation of corrupt-disk's file kinds
	rotated bool
	last    *diskDamage

	foreign     map[cluster.Node]string // unused foreign data directories
	foreignID   string
	foreignRuns int
	swap        *foreignSwap
	// prepared is closed when the foreign deployment started at the
	// beginning of the schedule is done (foreignErr says how).
	prepared    chan struct{}
	foreignNote string
	foreignErr  error
}

type foreignSwap struct {
	node      cluster.Node
	started   time.Time
	clusterID string // the foreign cluster's
	own       string // where the node's own directory was moved
}

func diskOf(r *run) (diskBackend, error) {
	db, ok := r.b.(diskBackend)
	if !ok {
		return nil, fmt.Errorf("%w: disk faults need node logs, offline commands and a second deployment", cluster.ErrUnsupported)
	}
	return db, nil
}

// stopped kills n and waits until its container is down, so nothing writes
// its files while they are damaged.
func stopped(ctx context.Context, db diskBackend, n cluster.Node) error {
	if err := db.Kill(ctx, n); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		if down, _, err := db.Exited(ctx, n); err == nil && down {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s still runs after docker kill", n)
}

// corruptDisk stops a random node, flips bits in one of its files — the
// state database or the Raft log's last record, in turn — and in one
// artifact, and starts it again.
func corruptDisk(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
	db, err := diskOf(r)
	if err != nil {
		return nil, nil, err
	}
	ds := &r.disk
	kinds := []string{"state.db", "wal", "wal-quiet"}
	if !ds.rotated {
		ds.next, ds.rotated = r.rng.Intn(len(kinds)), true
	}
	kind := kinds[ds.next%len(kinds)]
	ds.next++
	n := r.target(ctx, false)
	dmg := &diskDamage{node: n, kind: kind}
	ds.last = dmg
	if kind == "wal-quiet" {
		// Under load a node's newest record is almost always a batch whose
		// commit it has not heard of yet (so the start cuts it as a torn
		// write). Holding the clients a moment lets every node apply what it
		// has: the damage then hits a committed record, which the node must
		// refuse to drop.
		dmg.kind, dmg.what = "wal", "clients held; "
		r.quiet.Lock()
		time.Sleep(r.cfg.OpTimeout + time.Second)
		err := stopped(ctx, db, n)
		r.quiet.Unlock()
		if err != nil {
			return []cluster.Node{n}, nil, err
		}
	} else if err := stopped(ctx, db, n); err != nil {
		return []cluster.Node{n}, nil, err
	}
	dir := r.b.DataDir(n)
	if dmg.kind == "wal" {
		committed, err := committedEvidence(dir)
		if err != nil {
			return []cluster.Node{n}, nil, err
		}
		what, index, err := flipLastWALRecord(filepath.Join(dir, "raft", "wal"), r.rng)
		if errors.Is(err, errNothingToFlip) {
			// A log just emptied by a repair or snapshot has no record.
			dmg.kind = "state.db"
		} else if err != nil {
			return []cluster.Node{n}, nil, err
		} else {
			dmg.what, dmg.expect = dmg.what+what, "cut"
			if index <= committed {
				dmg.expect = "refuse"
			}
			dmg.what += fmt.Sprintf(" (committed index %d)", committed)
		}
	}
	if dmg.kind == "state.db" {
		what, err := flipStatePages(filepath.Join(dir, "state.db"), r.rng)
		if err != nil {
			return []cluster.Node{n}, nil, err
		}
		dmg.what = what
	}
	if err := damageArtifact(dir, r.rng, dmg); err != nil {
		return []cluster.Node{n}, nil, err
	}
	dmg.started = time.Now()
	if err := db.Start(ctx, n); err != nil {
		return []cluster.Node{n}, nil, err
	}
	return []cluster.Node{n}, func(ctx context.Context) error { return repairDisk(ctx, r, db, dmg) }, nil
}

// verifyCorruptDisk: the node logged the documented reaction to the damage:
// state.db moved aside and rebuilt; a torn Raft log tail cut, or the start
// refused because the damaged record was committed (undo repairs it).
func verifyCorruptDisk(ctx context.Context, r *run, targets []cluster.Node) (bool, string) {
	db, err := diskOf(r)
	dmg := r.disk.last
	if err != nil || dmg == nil {
		return false, "no damage recorded"
	}
	art := "no artifact yet"
	if dmg.artPath != "" {
		art = fmt.Sprintf("artifact %s: bit flipped at byte %d, now %d bytes (was %d)", filepath.Base(filepath.Dir(dmg.artPath)), dmg.artFlip, dmg.artTotal, len(dmg.artOrig))
	}
	deadline := time.Now().Add(15 * time.Second)
	var logs string
	for {
		logs, _ = db.Logs(ctx, dmg.node, dmg.started)
		exited, code, _ := db.Exited(ctx, dmg.node)
		switch {
		case dmg.kind == "state.db" && strings.Contains(logs, logStateRebuilt):
			return true, fmt.Sprintf("%s; moved aside and rebuilt; %s", dmg.what, art)
		case dmg.kind == "wal" && strings.Contains(logs, logWALTornCut):
			if dmg.expect != "cut" {
				return false, fmt.Sprintf("%s; cut as a torn tail although at or below the committed index", dmg.what)
			}
			return true, fmt.Sprintf("%s; above the committed index: cut as a torn tail; %s", dmg.what, art)
		case dmg.kind == "wal" && exited && strings.Contains(logs, logWALRefused) && strings.Contains(logs, logRepairHint):
			dmg.refused = true
			if dmg.expect != "refuse" {
				return false, fmt.Sprintf("%s; refused to start (exit %d) although above the committed index", dmg.what, code)
			}
			return true, fmt.Sprintf("%s; at a committed index: refused to start (exit %d), repaired with sessionstore repair; %s", dmg.what, code, art)
		case exited:
			return false, fmt.Sprintf("%s; the node exited (code %d) without the documented message: %s", dmg.what, code, lastLines(logs, 3))
		}
		if time.Now().After(deadline) {
			return false, fmt.Sprintf("%s; no documented reaction in the node's log: %s", dmg.what, lastLines(logs, 3))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// repairDisk runs the operator's repair when the node refused to start, then
// waits until the node serves and has rebuilt the damaged artifact.
func repairDisk(ctx context.Context, r *run, db diskBackend, dmg *diskDamage) error {
	n := dmg.node
	if exited, _, err := db.Exited(ctx, n); err != nil {
		return err
	} else if exited {
		if !dmg.refused {
			return fmt.Errorf("%s exited without the documented refusal", n)
		}
		out, err := db.Offline(ctx, n, "repair", "--data-dir", "/data")
		if err != nil {
			return fmt.Errorf("sessionstore repair: %w", err)
		}
		r.logf("sessionstore repair on %s: %s", n, strings.Join(strings.Fields(lastLines(out, 4)), " "))
		if err := db.Start(ctx, n); err != nil {
			return err
		}
	}
	if err := waitServing(ctx, r, n); err != nil {
		return err
	}
	return waitArtifactRebuilt(ctx, r, dmg)
}

// waitServing waits until n answers Status with a leader.
func waitServing(ctx context.Context, r *run, n cluster.Node) error {
	var last string
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := r.conns.get(n).Status(sctx)
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case st.LeaderId == "":
			last = "no leader known"
		default:
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("%s does not serve: %s", n, last)
}

// waitArtifactRebuilt downloads the damaged artifact from the node, as a
// client would, until what it serves holds the original text (the artifact
// may have grown since), and the file holds it too (rebuilt at start-up when
// its size was wrong, else after the download found the damage). Text, not
// bytes: a rebuild may cut its frames elsewhere than the passes that wrote
// the original.
func waitArtifactRebuilt(ctx context.Context, r *run, dmg *diskDamage) error {
	if dmg.artPath == "" {
		return nil
	}
	orig, _ := storage.DecodeArtifact(dmg.artOrig) // its complete frames
	want := orig.Text
	id := filepath.Base(filepath.Dir(dmg.artPath)) // the workload's ids are their own path segment
	last := "not checked"
	for ctx.Err() == nil {
		served, err := artifactBytes(ctx, r.b.HTTPAddr(dmg.node), id)
		var servedText, fileText []byte
		if err == nil {
			servedText, err = storage.ArtifactText(served)
		}
		file, ferr := os.ReadFile(dmg.artPath)
		if ferr == nil {
			fileText, ferr = storage.ArtifactText(file)
		}
		switch {
		case len(want) == 0:
			return fmt.Errorf("the damaged artifact %s: its original bytes hold no complete frame", dmg.artPath)
		case err != nil:
			last = "download: " + err.Error()
		case !bytes.HasPrefix(servedText, want):
			last = fmt.Sprintf("the node served %d bytes of text that do not start with the original %d", len(servedText), len(want))
		case ferr != nil || !bytes.HasPrefix(fileText, want):
			last = "served right, the file not rebuilt yet"
		default:
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the damaged artifact %s: %s", dmg.artPath, last)
}

func lastLines(s string, k int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	return strings.Join(lines, " | ")
}

var errNothingToFlip = errors.New("nothing to flip")

// flipLastWALRecord flips one bit in the payload of the Raft log's last
// record (so its CRC-32C fails), reading the documented segment format:
// records of u32 length, u32 CRC and a payload starting with a version byte
// and the uvarint index; wal.meta's first masks records below it.
func flipLastWALRecord(dir string, rng *rand.Rand) (what string, index uint64, err error) {
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		return "", 0, errNothingToFlip
	}
	slices.Sort(segs)
	path := segs[len(segs)-1] // names are zero-padded first indexes
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	last := -1
	for off := 0; off+8 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if n < 2 || off+8+n > len(b) {
			break
		}
		last, off = off, off+8+n
	}
	if last < 0 {
		return "", 0, errNothingToFlip
	}
	n := int(binary.BigEndian.Uint32(b[last:]))
	index, k := binary.Uvarint(b[last+9 : last+8+n])
	if k <= 0 {
		return "", 0, fmt.Errorf("%s: the last record at %d does not decode", path, last)
	}
	if meta, err := os.ReadFile(filepath.Join(dir, "wal.meta")); err == nil && len(meta) >= 20 {
		if first := binary.BigEndian.Uint64(meta[12:]); index < first {
			return "", 0, errNothingToFlip // every record is below the log's first index
		}
	}
	at := last + 8 + rng.Intn(n)
	bit := byte(1) << rng.Intn(8)
	if err := flipAt(path, int64(at), bit); err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("raft/wal/%s: last record (index %d) bit %#02x flipped at byte %d", filepath.Base(path), index, bit, at), index, nil
}

// committedEvidence is what a stopped node knows was committed, as its
// start-up reads it: the state database's applied index (bucket "meta", key
// "applied_index", big-endian) or the latest snapshot's index, the higher.
func committedEvidence(dir string) (uint64, error) {
	var applied uint64
	db, err := bbolt.Open(filepath.Join(dir, "state.db"), 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("reading the applied index: %w", err)
	}
	err = db.View(func(tx *bbolt.Tx) error {
		if m := tx.Bucket([]byte("meta")); m != nil {
			if v := m.Get([]byte("applied_index")); len(v) == 8 {
				applied = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	metas, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", "meta.json"))
	for _, p := range metas {
		var m struct{ Index uint64 }
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &m) == nil && m.Index > applied {
			applied = m.Index
		}
	}
	return applied, nil
}

// flipStatePages flips one bit of the page id in the header of the root
// page of the newest valid meta (the start-up check reads that page and
// finds it names another page) and two random bits elsewhere past the meta
// pages (bit rot), using bbolt's documented layout (native byte order).
func flipStatePages(path string, rng *rand.Rand) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	pageSize, root, err := newestBoltMeta(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	at := int64(root)*int64(pageSize) + int64(rng.Intn(8))
	if at+8 > int64(len(b)) {
		return "", fmt.Errorf("%s: root page %d is past the end", path, root)
	}
	bit := byte(1) << rng.Intn(8)
	if err := flipAt(path, at, bit); err != nil {
		return "", err
	}
	what := fmt.Sprintf("state.db: root page %d header bit %#02x flipped at byte %d", root, bit, at)
	if rest := len(b) - 2*pageSize; rest > 0 {
		for i := 0; i < 2; i++ {
			if err := flipAt(path, int64(2*pageSize+rng.Intn(rest)), byte(1)<<rng.Intn(8)); err != nil {
				return "", err
			}
		}
		what += " and 2 random bits past the meta pages"
	}
	return what, nil
}

// newestBoltMeta returns the page size and root page of the meta page bbolt
// would use: the valid one (magic, version 2, FNV-64a checksum) with the
// higher transaction id.
func newestBoltMeta(b []byte) (pageSize int, root uint64, err error) {
	ne := binary.NativeEndian
	var best uint64
	found := false
	for _, off := range []int{0, -1} {
		if off < 0 {
			if pageSize == 0 {
				// Page 0 did not validate: bbolt's default page size.
				pageSize = os.Getpagesize()
			}
			off = pageSize
		}
		if off+16+64 > len(b) {
			continue
		}
		m := b[off+16:]
		if ne.Uint32(m[0:]) != 0xED0CDAED || ne.Uint32(m[4:]) != 2 {
			continue
		}
		h := fnv.New64a()
		h.Write(m[:56])
		if h.Sum64() != ne.Uint64(m[56:]) {
			continue
		}
		if txid := ne.Uint64(m[48:]); !found || txid > best {
			best, found = txid, true
			pageSize, root = int(ne.Uint32(m[8:])), ne.Uint64(m[16:])
		}
	}
	if !found {
		return 0, 0, errors.New("no valid bbolt meta page")
	}
	return pageSize, root, nil
}

// damageArtifact flips one bit in the first half of one artifact and appends
// a few bytes of garbage (a torn frame), so its size disagrees with its
// watermark: the node rebuilds it from the state database at start-up.
func damageArtifact(dir string, rng *rand.Rand, dmg *diskDamage) error {
	var paths []string
	_ = filepath.WalkDir(filepath.Join(dir, "artifacts"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && e.Name() == "session.jsonl.zstd" {
			paths = append(paths, p)
		}
		return nil
	})
	slices.Sort(paths)
	for len(paths) > 0 {
		i := rng.Intn(len(paths))
		p := paths[i]
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if len(b) < 2 {
			paths = append(paths[:i], paths[i+1:]...)
			continue
		}
		dmg.artPath, dmg.artOrig = p, b
		dmg.artFlip = rng.Intn(len(b) / 2)
		damaged := append([]byte(nil), b...)
		damaged[dmg.artFlip] ^= byte(1) << rng.Intn(8)
		if !sameSizeArtifactFlips || rng.Intn(2) == 0 {
			tail := make([]byte, 1+rng.Intn(16))
			rng.Read(tail)
			damaged = append(damaged, tail...)
		}
		dmg.artTotal = len(damaged)
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, damaged, fi.Mode().Perm())
	}
	return nil
}

// flipAt XORs the byte at off with bit, in place.
func flipAt(path string, off int64, bit byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return err
	}
	b[0] ^= bit
	if _, err := f.WriteAt(b[:], off); err != nil {
		return err
	}
	return f.Sync()
}

// startForeign starts preparing foreign data directories in the background
// (a second deployment takes tens of seconds to come up and stop): the
// first foreign-volume waits for it.
func startForeign(ctx context.Context, r *run) {
	r.disk.prepared = make(chan struct{})
	go func() {
		defer close(r.disk.prepared)
		r.disk.foreignNote, r.disk.foreignErr = prepareForeign(ctx, r)
	}()
}

// foreignReady: foreign data directories are prepared (or will be made at
// the inject).
func foreignReady(r *run) bool {
	if r.disk.prepared == nil {
		return true
	}
	select {
	case <-r.disk.prepared:
		return true
	default:
		return false
	}
}

// waitForeign waits for a preparation still under way (its containers are
// gone before the run ends).
func (ds *diskState) waitForeign() {
	if ds.prepared != nil {
		<-ds.prepared
	}
}

// prepareForeign runs a short-lived second deployment of the compose files
// and keeps its nodes' data directories for foreign-volume; it returns a
// line for the progress log.
func prepareForeign(ctx context.Context, r *run) (string, error) {
	db, err := diskOf(r)
	if err != nil {
		return "", err
	}
	ds := &r.disk
	ds.foreignRuns++
	root := filepath.Join(filepath.Dir(r.b.DataDir(r.b.Nodes()[0])), fmt.Sprintf("foreign-%d", ds.foreignRuns))
	start := time.Now()
	id, err := db.ForeignDeployment(ctx, root)
	if err != nil {
		return "", fmt.Errorf("foreign deployment: %w", err)
	}
	ds.foreignID = id
	ds.foreign = map[cluster.Node]string{}
	for _, n := range r.b.Nodes() {
		ds.foreign[n] = filepath.Join(root, string(n))
	}
	return fmt.Sprintf("foreign deployment: cluster %s formed and stopped in %.1f s (%s)", id, time.Since(start).Seconds(), root), nil
}

// foreignVolume stops a random node and starts it on the data directory its
// namesake left in another deployment (same node id, same Raft address,
// another cluster id).
func foreignVolume(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
	db, err := diskOf(r)
	if err != nil {
		return nil, nil, err
	}
	ds := &r.disk
	if ds.prepared != nil {
		select {
		case <-ds.prepared:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		ds.prepared = nil
		if err := ds.foreignErr; err != nil {
			return nil, nil, err
		}
		r.logf("%s", ds.foreignNote)
	}
	n := r.target(ctx, false)
	if _, ok := ds.foreign[n]; !ok {
		note, err := prepareForeign(ctx, r)
		if err != nil {
			return []cluster.Node{n}, nil, err
		}
		r.logf("%s", note)
	}
	dir := ds.foreign[n]
	delete(ds.foreign, n)
	if err := stopped(ctx, db, n); err != nil {
		return []cluster.Node{n}, nil, err
	}
	sw := &foreignSwap{node: n, clusterID: ds.foreignID, own: fmt.Sprintf("%s.own-%d", r.b.DataDir(n), time.Now().UnixNano())}
	ds.swap = sw
	if err := db.ReplaceDataDir(n, sw.own, dir); err != nil {
		return []cluster.Node{n}, nil, err
	}
	sw.started = time.Now()
	if err := db.Start(ctx, n); err != nil {
		return []cluster.Node{n}, nil, err
	}
	return []cluster.Node{n}, func(ctx context.Context) error { return rejoinEmpty(ctx, r, db, sw) }, nil
}

// verifyForeign: the node runs on the foreign cluster's id, the others on
// theirs, and the Raft handshake refused the connection.
func verifyForeign(ctx context.Context, r *run, targets []cluster.Node) (bool, string) {
	db, err := diskOf(r)
	sw := r.disk.swap
	if err != nil || sw == nil {
		return false, "no swap recorded"
	}
	deadline := time.Now().Add(15 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := r.conns.get(sw.node).Status(sctx)
		cancel()
		if err != nil {
			last = fmt.Sprintf("%s does not answer: %v", sw.node, err)
			continue
		}
		if st.ClusterId != sw.clusterID {
			last = fmt.Sprintf("%s reports cluster %q, not the foreign %s", sw.node, st.ClusterId, sw.clusterID)
			continue
		}
		ours := ""
		for _, m := range r.others(sw.node) {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			if ost, err := r.conns.get(m).Status(sctx); err == nil && ost.ClusterId != "" {
				ours = ost.ClusterId
			}
			cancel()
		}
		if ours == "" || ours == sw.clusterID {
			last = fmt.Sprintf("the other nodes' cluster id %q", ours)
			continue
		}
		refused := 0
		for _, m := range r.b.Nodes() {
			if logs, err := db.Logs(ctx, m, sw.started); err == nil && strings.Contains(logs, logHandshake) {
				refused++
			}
		}
		if refused == 0 {
			last = "no handshake refusal logged yet"
			continue
		}
		return true, fmt.Sprintf("%s on a volume of cluster %s (this cluster: %s), %s, leader %q; %d node(s) logged the handshake refusal",
			sw.node, sw.clusterID, ours, st.State, st.LeaderId, refused)
	}
	return false, last
}

// rejoinEmpty is the documented repair of a node on a foreign volume: stop
// it, remove it from the Raft configuration through another node, move the
// foreign directory aside, start it on an empty one. The leader adds it as a
// non-voter, sends it a snapshot and promotes it; this waits for that.
func rejoinEmpty(ctx context.Context, r *run, db diskBackend, sw *foreignSwap) error {
	n := sw.node
	if err := stopped(ctx, db, n); err != nil {
		return err
	}
	removed := time.Now()
	if err := removeMember(ctx, r, n); err != nil {
		return err
	}
	if err := db.ReplaceDataDir(n, fmt.Sprintf("%s.foreign-%d", r.b.DataDir(n), time.Now().UnixNano()), ""); err != nil {
		return err
	}
	if err := db.Start(ctx, n); err != nil {
		return err
	}
	var last string
	for ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		leader := r.leader(ctx)
		if leader == "" || leader == n {
			last = "no leader"
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		members, err := r.conns.get(leader).Members(sctx)
		lst, lerr := r.conns.get(leader).Status(sctx)
		nst, nerr := r.conns.get(n).Status(sctx)
		cancel()
		if err := errors.Join(err, lerr, nerr); err != nil {
			last = err.Error()
			continue
		}
		voter := false
		for _, m := range members {
			voter = voter || (m.NodeId == string(n) && m.Suffrage == "Voter")
		}
		switch {
		case !voter:
			last = fmt.Sprintf("%s is not a voter yet", n)
		case nst.ClusterId != lst.ClusterId || nst.LeaderId != string(leader):
			last = fmt.Sprintf("%s follows %q in cluster %q", n, nst.LeaderId, nst.ClusterId)
		default:
			r.logf("%s rejoined empty: a voter again %.1f s after its removal, applied %d (leader commit %d)",
				n, time.Since(removed).Seconds(), nst.AppliedIndex, lst.CommitIndex)
			return nil
		}
	}
	return fmt.Errorf("%s did not rejoin: %s", n, last)
}

// removeMember removes n from the Raft configuration through another node,
// and checks the configuration (RemoveMember is sent once: an unknown
// outcome is settled by reading Members).
func removeMember(ctx context.Context, r *run, n cluster.Node) error {
	var last error
	for ctx.Err() == nil {
		for _, m := range r.others(n) {
			c := r.conns.get(m)
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			last = c.RemoveMember(sctx, string(n))
			members, err := c.Members(sctx)
			cancel()
			if err != nil {
				last = err
				continue
			}
			listed := false
			for _, mm := range members {
				listed = listed || mm.NodeId == string(n)
			}
			if !listed {
				r.logf("removed %s from the Raft configuration through %s", n, m)
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("removing %s from the configuration: %v", n, last)
}
