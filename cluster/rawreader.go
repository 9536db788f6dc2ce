package cluster

import (
	"context"
	"errors"
	"io"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// readChunkBytes is how much a streaming read copies out of the state
// database per read transaction: the memory a stream holds between sends.
const readChunkBytes = 256 << 10

// rawReader reads a session's artifact text (the header line, then one line
// per event) from the state database in chunks of at most readChunkBytes, each
// in its own short read transaction, so a reader that is slow or gone holds
// one chunk, not the session.
//
// It reads the text at the revision current when it was opened: a log only
// grows within an incarnation, so later chunks read exactly that prefix; a
// deletion or re-creation under it ends the read with NOT_FOUND instead of
// mixing two logs.
type rawReader struct {
	ss          *Sessions
	id          string
	header      sessionstore.Header
	revision    string
	incarnation uint64
	end         int64 // the session's next seq when opened
	size        int64
	line        []byte // the header line with its "\n"

	pos  int64  // offset of buf[0] in the text
	buf  []byte // bytes read ahead, starting at pos
	seq  int64  // where the next fill starts: event seq (-1: the header line)
	off  int    // and the offset inside that line
	scan []byte // the reusable chunk buffer
}

// OpenRaw opens a session's artifact text for reading: its header, the
// revision of the text, a reader of its size bytes (see rawReader). c is as
// for every read: Linearizable checks leadership once, here.
func (ss *Sessions) OpenRaw(ctx context.Context, id string, c sessionstore.Consistency) (h sessionstore.Header, revision string, text io.ReadSeeker, size int64, err error) {
	r, err := ss.openRaw(ctx, id, c)
	if err != nil {
		return h, "", nil, 0, err
	}
	return r.header, r.revision, r, r.size, nil
}

func (ss *Sessions) openRaw(ctx context.Context, id string, c sessionstore.Consistency) (*rawReader, error) {
	if err := ss.readBarrier(ctx, c); err != nil {
		return nil, err
	}
	r := &rawReader{ss: ss, id: id, seq: -1}
	err := ss.state.View(func(tx *storage.Tx) error {
		s, err := fsm.ReadSession(tx, id)
		if err != nil {
			return err
		}
		if !s.Visible() {
			return sessionstore.NotFound(id)
		}
		r.header, r.revision = s.Header, s.Revision
		r.incarnation, r.end = s.Record.Incarnation, s.Record.NextSeq
		r.line = append(sessionlog.HeaderLine(r.header), '\n')
		r.size = int64(len(r.line))
		// One pass over the keys for the size (Content-Length, Range): bbolt
		// hands out slices of its map, nothing is copied.
		return tx.ForEachEvent(id, r.incarnation, 0, r.end, func(_ int64, ev []byte) error {
			r.size += int64(len(ev)) + 1
			return nil
		})
	})
	if err != nil {
		ss.repairAfter(err)
		return nil, storageErr(err)
	}
	return r, nil
}

// Read implements io.Reader.
func (r *rawReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.pos >= r.size {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.pos += int64(n)
	return n, nil
}

// Seek implements io.Seeker (http.ServeContent finds the size and serves
// ranges with it). A seek elsewhere than the current offset walks the keys
// once to find the event it lands in.
func (r *rawReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return 0, errors.New("raw reader: negative position")
	}
	if offset == r.pos {
		return offset, nil
	}
	r.pos, r.buf = offset, nil
	if offset < int64(len(r.line)) {
		r.seq, r.off = -1, int(offset)
		return offset, nil
	}
	if offset >= r.size {
		r.seq, r.off = r.end, 0
		return offset, nil
	}
	at := int64(len(r.line))
	err := r.view(func(tx *storage.Tx) error {
		return tx.ForEachEvent(r.id, r.incarnation, 0, r.end, func(seq int64, ev []byte) error {
			if l := int64(len(ev)) + 1; offset < at+l {
				r.seq, r.off = seq, int(offset-at)
				return storage.ErrStop
			}
			at += int64(len(ev)) + 1
			return nil
		})
	})
	return offset, err
}

// view runs fn in a read transaction after checking that the session is
// still the incarnation being read.
func (r *rawReader) view(fn func(tx *storage.Tx) error) error {
	err := r.ss.state.View(func(tx *storage.Tx) error {
		if _, err := fsm.ReadIncarnation(tx, r.id, r.incarnation, r.revision); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil {
		r.ss.repairAfter(err)
		return storageErr(err)
	}
	return nil
}

// fill reads the next chunk into buf.
func (r *rawReader) fill() error {
	if r.scan == nil {
		r.scan = make([]byte, 0, readChunkBytes)
	}
	b := r.scan[:0]
	take := func(line []byte, nl bool) bool {
		n := copy(b[len(b):cap(b)], line[r.off:])
		b = b[:len(b)+n]
		r.off += n
		if r.off < len(line) {
			return false // chunk full inside this line
		}
		if nl {
			if len(b) == cap(b) {
				return false
			}
			b = append(b, '\n')
		}
		r.seq, r.off = r.seq+1, 0
		return len(b) < cap(b)
	}
	if r.seq < 0 && !take(r.line, false) {
		r.buf = b
		return nil
	}
	err := r.view(func(tx *storage.Tx) error {
		return tx.ForEachEvent(r.id, r.incarnation, r.seq, r.end, func(seq int64, ev []byte) error {
			if seq != r.seq {
				return sessionstore.Errorf(sessionstore.ReasonCorruption, "session %s: event %d is missing from the state database", sessionstore.Quote(r.id), r.seq)
			}
			if r.off == len(ev) { // only its "\n" was left
				b = append(b, '\n')
				r.seq, r.off = r.seq+1, 0
			} else if !take(ev, true) {
				return storage.ErrStop
			}
			if len(b) == cap(b) {
				return storage.ErrStop
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return sessionstore.Errorf(sessionstore.ReasonCorruption, "session %s: events below %d are missing from the state database", sessionstore.Quote(r.id), r.end)
	}
	r.buf = b
	return nil
}
