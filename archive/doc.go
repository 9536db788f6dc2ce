// Package archive exports a cluster's sessions as a reference JSONL root and
// imports reference roots (and such exports) back through the API (issue 6).
//
// # The export format
//
// An export is a reference JSONL root (docs/events.md#layout) that the
// reference harness opens as it is:
//
//	<projectKey(cwd)>|_no-cwd/<encodeSegment(id)>/session.jsonl.zstd   --compression zstd (default)
//	<projectKey(cwd)>|_no-cwd/<encodeSegment(id)>/session.jsonl        --compression none
//	manifest.json                                                       written last
//
// written either as a directory or as the entries of a tar file (optionally
// compressed as a whole with zstd). A session file holds exactly the text
// ReadRaw returned: the header line, then one line per stored event, bytes
// verbatim. In zstd mode the first frame is the header line alone and the
// events follow in frames of at most about 1 MiB of text (one larger event
// gets a frame of its own), every frame with its content checksum, as the
// reference's zstd mode writes them (docs/events.md#zstd). The manifest (see Manifest)
// records where the export started (the applied Raft index), its filters, and
// per session the revision it was read at, its event count and the SHA-256 of
// its text.
//
// Every session is consistent at one revision: the one its ReadRaw returned
// (a linearizable read). The set of sessions is the one materialised at the
// start: the linearizable listing that follows the Status call whose applied
// index the manifest records; a session registered after that index is left
// out even where paging lets it into the listing. The listing is paged
// through as the export goes, so a session registered before that index but
// listed only later (sessions are listed from their first append) can still
// come in while its page is ahead.
//
// What is not exported: leases (ownership by an agent host, with their
// epochs) and pending plan-mode selections and approved plan exits. They are
// replicated state beside the log, not the log: the reference's own JSONL
// root has no place for them, and an imported session starts cold (no
// lease, epoch 0, nothing pending). Request-id deduplication records are not
// exported either.
//
// # Memory
//
// An export's memory does not grow with the number of sessions. It holds at
// most a few sessions at once (those being read ahead, see
// ExportOptions.Parallel) and writes each session file as soon as it is
// encoded: memory is bounded by the largest sessions, not by the size of the
// export. The listing is paged through as the export goes (one page in
// memory), after a first pass that only counts the sessions for progress.
// Each session's manifest entry is appended to a temporary file (JSON
// lines, beside the output for `sessionstore export`, removed however the export
// ends) and manifest.json is streamed from it at the end, so no manifest is
// ever held whole. What is kept per session is only what is rare or asked
// for: the failed sessions (the manifest's Failed list) and the ids given
// with ExportOptions.Sessions.
//
// An import holds one session per worker, and the manifest of the source
// whole (up to maxManifestBytes, 256 MiB: about 800,000 sessions).
//
// # Import
//
// Import reads a reference root (either encoding, packed chunk rows expanded,
// torn tails dropped as the reference drops them: storage.WalkRoot) or an
// archive written by Export, validates each session completely (header and
// every event, with the API's own checks) before writing anything for it,
// and then creates it and appends its events in batches. Import is idempotent:
// re-running an interrupted import completes it without duplicating
// anything, and a session that exists with different content is a conflict,
// reported and left untouched (see Import for the rules).
package archive
