// Package sessionlog is the pure logic of the session log format: it decides
// what an event text must look like to be appended, how stored events are
// read back, and which bytes the server itself writes, so that every replica
// and every reader agrees with the TypeScript reference harness byte for byte
// (docs/events.md).
//
// Events are kept as their verbatim JSON text and are never round-tripped
// through map[string]any: key order matters to raw-artifact readers. The
// package therefore carries its own small JSON layer: a single-pass scanner
// for the append hot path (CheckEvent), an order-preserving value tree for
// the read side, and a serialiser that writes exactly what JavaScript's
// JSON.stringify writes.
//
// CheckEvent is the reference's own append check (docs/design.md
// "Validation"). Message shapes, surface rules, unknown types and format
// versions are judged on read by Normalize, CheckStoredHeader and
// ValidateSession, whose texts are the reference's; ReadCheck puts them
// together, and a strict write (the default) refuses what it refuses, so
// the write rule is the read rule.
//
// The package imports only the standard library and the root package; it
// does no I/O and keeps no state.
package sessionlog
