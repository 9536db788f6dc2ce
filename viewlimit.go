package sessionstore

// ViewLimit bounds a view answered in one message: the unary Load, Inspect
// and Prepare. A view above it is refused with TOO_LARGE before any work
// that would be wasted on it: before a repair is committed or a lease
// granted, and, where the session record tells the size of its events,
// before any event is read. The zero value bounds nothing (the stream forms).
type ViewLimit struct {
	// MessageBytes is the message limit (the node's --max-message-bytes);
	// 0: no limit.
	MessageBytes int
	// Stream is the call that serves the view at any size; the refusal
	// names it.
	Stream string
}

// ViewMessageMargin is kept free in a view's message for all but its
// events: header, revision, lease and the message's own framing.
const ViewMessageMargin = 64 << 10

// EventFraming bounds the bytes around one event in a message (its field tag
// and length prefix).
const EventFraming = 8

// ViewBytes is what count events of bytes bytes in all take in a message.
func ViewBytes(count, bytes int64) int64 { return bytes + EventFraming*count }

// Bounded reports whether l bounds anything.
func (l ViewLimit) Bounded() bool { return l.MessageBytes > 0 }

// Fits reports whether events taking size bytes (ViewBytes) fit in one
// message under l.
func (l ViewLimit) Fits(size int64) bool {
	return !l.Bounded() || size <= int64(l.MessageBytes)-ViewMessageMargin
}

// Check refuses, with TOO_LARGE, a view of session id whose count events of
// bytes bytes in all do not fit in one message.
func (l ViewLimit) Check(id string, count, bytes int64) error {
	size := ViewBytes(count, bytes)
	if l.Fits(size) {
		return nil
	}
	return Errorf(ReasonTooLarge,
		"session %s view is %d bytes (%d events), above the %d-byte message limit; use the stream form %s, which serves a view of any size",
		Quote(id), size, count, l.MessageBytes, l.Stream)
}
