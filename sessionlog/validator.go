package sessionlog

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
	"strconv"
)

// Validator is Closers then ValidateSession over the normalised log plus its
// closers (what a view checks before it is served) for a log fed a chunk at a
// time: Add each chunk of normalised events in order, then Finish. It keeps
// only what the rules refer back to (the open turn and step, the calls still
// pending, the surface as seqs, a digest per tool/result on it, the last
// event), not the events, and gives the same closers and the same first
// error as the whole-log functions.
type Validator struct {
	sessionID string
	n         int          // events added
	last      *storedEvent // the last event added
	parseErr  error        // Closers': the first unparsable event outranks everything
	scanErr   error        // Closers': the first failed step of the repair scan
	invalid   error        // ValidateSession's first failure
	scan      repairScan
	sf        surface
}

// NewValidator returns a Validator for a session's normalised log.
func NewValidator(sessionID string) *Validator {
	return &Validator{sessionID: sessionID, sf: surface{originals: digests{}}}
}

// Add checks the next chunk of normalised events.
func (v *Validator) Add(normalized [][]byte) {
	for _, raw := range normalized {
		if v.parseErr != nil {
			return
		}
		v.addOne(raw, nil)
	}
}

// addOne checks one normalised event; e is raw parsed, or nil to parse it.
func (v *Validator) addOne(raw []byte, e *storedEvent) {
	i := v.n
	v.n++
	if e == nil {
		var err error
		if e, err = parseStored(raw); err != nil {
			v.parseErr = parseLogErr(i, err)
			return
		}
	}
	v.last = e
	if v.scanErr == nil {
		v.scanErr = v.scan.add(e)
	}
	if v.invalid == nil {
		v.invalid = v.sf.check(v.sessionID, e, i)
	}
}

// Finish returns the closers an open turn needs (nil for a balanced or empty
// log) once every chunk is added, or the error a view of this log fails with:
// Closers' error as corruption, else ValidateSession's over the log and the
// closers.
func (v *Validator) Finish() ([][]byte, error) { return v.check(true) }

// check is Finish; with keep false it leaves the Validator as it was (the
// closers are checked on trial), so more events may be added afterwards.
func (v *Validator) check(keep bool) ([][]byte, error) {
	if err := v.parseErr; err != nil {
		return nil, WrapCorruption(v.sessionID, err)
	}
	if err := v.scanErr; err != nil {
		return nil, WrapCorruption(v.sessionID, err)
	}
	var closers [][]byte
	if v.last != nil {
		open, err := v.scan.open(v.last)
		if err != nil {
			return nil, WrapCorruption(v.sessionID, err)
		}
		if open {
			closers = v.scan.closers(v.last)
		}
	}
	if v.invalid != nil {
		return nil, v.invalid
	}
	// Closers only join the surface at its end (surfaceOp "append"), so a
	// trial is undone by cutting the surface back and forgetting their digests.
	surfaceLen, n := len(v.sf.nodes), v.n
	var invalid error
	for _, raw := range closers {
		e, _ := parseStored(raw)
		if invalid = v.sf.check(v.sessionID, e, n); invalid != nil {
			break
		}
		n++
	}
	if keep {
		v.invalid, v.n = invalid, n
	} else {
		v.sf.nodes = v.sf.nodes[:surfaceLen]
		if d, ok := v.sf.originals.(digests); ok {
			for seq := int64(v.n); seq < int64(n)+1; seq++ {
				delete(d, seq)
			}
		}
	}
	if invalid != nil {
		return nil, invalid
	}
	return closers, nil
}

// digests holds, for each tool/result on the surface, a digest of its data
// outside the inner result content: equal digests mean deepEqual values.
type digests map[int64][sha256.Size]byte

func (d digests) onSurface(seq int64, e *storedEvent, shadowed []int64) {
	for _, s := range shadowed {
		delete(d, s)
	}
	if e.get("type").strEq("tool/result") {
		d[seq] = digest(withoutResultContent(e.get("data")))
	}
}

func (d digests) toolResult(seq int64, stripped *value) (bool, bool) {
	sum, ok := d[seq]
	if !ok {
		return false, false
	}
	return true, sum == digest(stripped)
}

// digest hashes a canonical form of v under deepEqual: object members
// sorted by key (keys are unique), numbers by value, every length written.
func digest(v *value) [sha256.Size]byte {
	h := sha256.New()
	writeCanonical(h, v)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

func writeCanonical(h hash.Hash, v *value) {
	var buf [binary.MaxVarintLen64]byte
	writeLen := func(tag byte, n int) {
		h.Write([]byte{tag})
		h.Write(buf[:binary.PutUvarint(buf[:], uint64(n))])
	}
	writeStr := func(tag byte, s string) {
		writeLen(tag, len(s))
		h.Write([]byte(s))
	}
	if v == nil {
		h.Write([]byte{'u'})
		return
	}
	switch v.k {
	case kNumber:
		n := v.n
		if n == 0 {
			n = 0 // -0 == 0
		}
		writeStr('#', strconv.FormatFloat(n, 'g', -1, 64))
	case kString:
		writeStr('s', v.s)
	case kArray:
		writeLen('[', len(v.arr))
		for _, el := range v.arr {
			writeCanonical(h, el)
		}
	case kObject:
		writeLen('{', len(v.obj))
		ms := slices.Clone(v.obj)
		slices.SortFunc(ms, func(a, b member) int {
			switch {
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
		for _, mb := range ms {
			writeStr('k', mb.key)
			writeCanonical(h, mb.val)
		}
	default: // null, true, false: equal by kind
		h.Write([]byte{'c', byte(v.k)})
	}
}
