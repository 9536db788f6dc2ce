package cluster

import (
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// Listing (List and ListSnapshots of the API): the materialised sessions a
// query selects, a page at a time, in id order or by last append. Pages
// are keyset pages: a page token holds the order key of the last row
// listed, and the next page starts strictly after it, so rows created or
// changed between pages are neither repeated nor skipped by the paging
// itself (a session whose last append moves is listed where it stands when
// each page is read).

const (
	defaultPageSize = 1000
	maxPageSize     = 10000
)

// List returns a page of the materialised sessions q selects, in q's order,
// with the token of the next page ("" after the last page).
func (ss *Sessions) List(ctx context.Context, q sessionstore.ListQuery) ([]sessionstore.Snapshot, string, error) {
	if q.Order != sessionstore.ListByID && q.Order != sessionstore.ListByLastAppend {
		return nil, "", sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "unknown list order %d", q.Order)
	}
	after, err := decodePageToken(q.PageToken, q.Order)
	if err != nil {
		return nil, "", err
	}
	if err := ss.readBarrier(ctx, q.Consistency); err != nil {
		return nil, "", err
	}
	size := q.PageSize
	if size <= 0 {
		size = defaultPageSize
	}
	size = min(size, maxPageSize)
	var page []*fsm.Session
	var more bool
	var now int64
	err = ss.state.View(func(tx *storage.Tx) error {
		now = fsm.Now(tx, time.Now().UnixMilli())
		sc := listScan{tx: tx, cwd: q.CwdPrefix, id: q.IDPrefix}
		var err error
		if q.Order == sessionstore.ListByLastAppend {
			page, more, err = sc.byLastAppend(after, size)
		} else {
			page, more, err = sc.byID(after.id, size)
		}
		return err
	})
	if err != nil {
		return nil, "", storageErr(err)
	}
	out := make([]sessionstore.Snapshot, len(page))
	for i, s := range page {
		out[i] = s.Snapshot(now)
	}
	next := ""
	if more {
		next = tokenAfter(q.Order, page[len(page)-1]).encode()
	}
	return out, next, nil
}

// listScan walks the sessions a query selects in one read transaction.
type listScan struct {
	tx  *storage.Tx
	cwd string // cwd prefix ("": any)
	id  string // id prefix ("": any)
}

// byID returns the first size selected sessions with an id after after
// ("": from the first) and whether more follow.
func (sc listScan) byID(after string, size int) ([]*fsm.Session, bool, error) {
	var page []*fsm.Session
	more := false
	err := sc.each(after, func(s *fsm.Session) error {
		if len(page) == size {
			more = true
			return storage.ErrStop
		}
		page = append(page, s)
		return nil
	})
	return page, more, err
}

// byLastAppend returns the first size selected sessions after the token's
// row in last-append order, newest first, and whether more follow. Every
// selected record is read; only the page (and one more, which tells that a
// next page exists) is held, in a heap, so a page costs a scan but never a
// sort of everything.
func (sc listScan) byLastAppend(after pageToken, size int) ([]*fsm.Session, bool, error) {
	keep := size + 1
	var rows latestRows
	bound := after.row()
	err := sc.each("", func(s *fsm.Session) error {
		r := lastAppendRow{at: fsm.LastAppend(s.Record), s: s}
		if after.id != "" && !bound.before(r) {
			return nil // on an earlier page
		}
		if len(rows) < keep {
			heap.Push(&rows, r)
		} else if r.before(rows[0]) {
			rows[0] = r
			heap.Fix(&rows, 0)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	slices.SortFunc(rows, func(a, b lastAppendRow) int {
		if a.before(b) {
			return -1
		}
		return 1 // ids are unique: no two rows are equal
	})
	page := make([]*fsm.Session, 0, min(len(rows), size))
	for _, r := range rows[:min(len(rows), size)] {
		page = append(page, r.s)
	}
	return page, len(rows) > size, nil
}

// each calls fn with every selected session whose id is after after ("":
// from the first), in id order, until fn returns storage.ErrStop. Only the
// ids from the id prefix on are read, up to the first past it.
func (sc listScan) each(after string, fn func(*fsm.Session) error) error {
	from, exclusive := after, true
	if sc.id > after {
		from, exclusive = sc.id, false
	}
	if sc.cwd != "" && sc.tx.CwdIndexed() {
		// From the cwd index: only the matching sessions' records are read.
		ids := sc.tx.SessionsUnderCwd(sc.cwd)
		i, found := slices.BinarySearch(ids, from)
		if found && exclusive {
			i++
		}
		for _, id := range ids[i:] {
			if !strings.HasPrefix(id, sc.id) {
				return nil
			}
			s, err := fsm.ReadSession(sc.tx, id)
			if err == nil {
				err = sc.visit(s, fn)
			}
			if errors.Is(err, storage.ErrStop) {
				return nil
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	cid := sc.tx.ClusterID()
	return sc.tx.ForEachSession(from, exclusive, func(id string, raw []byte) error {
		if !strings.HasPrefix(id, sc.id) {
			return storage.ErrStop
		}
		s, err := fsm.DecodeSession(cid, raw)
		if err != nil {
			return err
		}
		return sc.visit(s, fn)
	})
}

// visit calls fn with s if the query selects it.
func (sc listScan) visit(s *fsm.Session, fn func(*fsm.Session) error) error {
	if !s.Visible() {
		return nil
	}
	if sc.cwd != "" && (s.Header.Cwd == nil || !strings.HasPrefix(*s.Header.Cwd, sc.cwd)) {
		return nil // the cwd index and the record disagree: the record decides
	}
	return fn(s)
}

// lastAppendRow is a session with the time it is listed by.
type lastAppendRow struct {
	at int64
	s  *fsm.Session
}

// before reports whether a is listed before b: newer first, ties by id.
func (a lastAppendRow) before(b lastAppendRow) bool {
	return a.at > b.at || (a.at == b.at && a.s.Header.ID < b.s.Header.ID)
}

// latestRows is a heap whose root is the row listed last: the one dropped
// when a newer row comes and the heap holds all it keeps.
type latestRows []lastAppendRow

func (h latestRows) Len() int           { return len(h) }
func (h latestRows) Less(i, j int) bool { return h[j].before(h[i]) }
func (h latestRows) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *latestRows) Push(x any)        { *h = append(*h, x.(lastAppendRow)) }
func (h *latestRows) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pageToken is where the next page of a listing starts: after the row with
// id (and, by last append, lastAppend). An empty id starts at the first row.
type pageToken struct {
	order      sessionstore.ListOrder
	lastAppend int64
	id         string
}

// tokenPrefix starts every page token: its version, and a '%' that is no
// URL escape, so that a node of an older build (which reads a token as an
// escaped session id) refuses the token instead of listing from the wrong
// place during a rolling upgrade.
const tokenPrefix = "%v1."

func tokenAfter(order sessionstore.ListOrder, s *fsm.Session) pageToken {
	return pageToken{order: order, lastAppend: fsm.LastAppend(s.Record), id: s.Header.ID}
}

// row is the token's position as a row of the last-append order.
func (t pageToken) row() lastAppendRow {
	return lastAppendRow{at: t.lastAppend, s: &fsm.Session{Header: sessionstore.Header{ID: t.id}}}
}

// encode is the token as clients see it: tokenPrefix, then base64url of the
// order, the last append (big-endian, by last append only) and the id.
func (t pageToken) encode() string {
	b := []byte{byte(t.order)}
	if t.order == sessionstore.ListByLastAppend {
		b = binary.BigEndian.AppendUint64(b, uint64(t.lastAppend))
	}
	b = append(b, t.id...)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodePageToken reads a token for a listing in order ("": the first page).
func decodePageToken(s string, order sessionstore.ListOrder) (pageToken, error) {
	if s == "" {
		return pageToken{order: order}, nil
	}
	invalid := sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
		"invalid page token: pass back a next_page_token unchanged, or none to list from the first page")
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		// A token from a node of an older build, read during a rolling
		// upgrade: the escaped id of the last row, in id order.
		id, err := url.QueryUnescape(s)
		if err != nil || order != sessionstore.ListByID {
			return pageToken{}, invalid
		}
		return pageToken{order: order, id: id}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) < 2 {
		return pageToken{}, invalid
	}
	t := pageToken{order: sessionstore.ListOrder(b[0])}
	b = b[1:]
	switch t.order {
	case sessionstore.ListByID:
	case sessionstore.ListByLastAppend:
		if len(b) < 9 {
			return pageToken{}, invalid
		}
		t.lastAppend, b = int64(binary.BigEndian.Uint64(b)), b[8:]
	default:
		return pageToken{}, invalid
	}
	if t.order != order {
		return pageToken{}, sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"page token belongs to a listing in %s, not %s: list from the first page", orderName(t.order), orderName(order))
	}
	t.id = string(b)
	return t, nil
}

func orderName(o sessionstore.ListOrder) string {
	if o == sessionstore.ListByLastAppend {
		return "last-append order"
	}
	return "id order"
}
