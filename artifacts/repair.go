package artifacts

import (
	"bytes"
	"errors"
	"os"

	"github.com/sessionstore/sessionstore/storage"
)

// errNoArtifact: the session has no artifact on this node to repair from.
var errNoArtifact = errors.New("no artifact to repair from")

// RepairEvents rewrites, inside tx, each event of session id (incarnation inc,
// seqs below nextSeq) whose stored bytes fail their checksum or are missing,
// with the artifact's line for that seq when the line has exactly the stored
// checksum. The artifact's zstd frames carry their own checksums; the stored
// checksum decides.
func (a *Writer) RepairEvents(tx *storage.Tx, id string, inc uint64, nextSeq int64) (int, error) {
	ws := a.marks.Load()
	if ws == nil {
		return 0, errNoArtifact
	}
	w, ok := ws.get(id)
	if !ok || w.Path == "" {
		return 0, errNoArtifact
	}
	if _, err := storage.ArtifactRel(a.root, w.Path); err != nil {
		return 0, err
	}
	data, err := os.ReadFile(w.Path)
	if err != nil {
		return 0, err
	}
	d, err := storage.DecodeArtifact(data)
	if err != nil {
		return 0, err
	}
	lines := bytes.Split(d.Text, []byte{'\n'}) // line 0 is the header; line seq+1 is event seq
	fixed := 0
	for seq := int64(0); seq < nextSeq && int(seq)+1 < len(lines); seq++ {
		ok, err := tx.RepairEvent(id, inc, seq, lines[seq+1])
		if err != nil {
			return fixed, err
		}
		if ok {
			fixed++
		}
	}
	if fixed > 0 {
		a.logger.Warn("damaged events rewritten from the artifact", "session", id, "events", fixed)
	}
	return fixed, nil
}
