//go:build bigstate

package fsm

// Times the conversion of a large layout-1 state database to layout 2
// (issue 14), and of a format-4 one to format 5 (titles). Not in CI.
// BIGSTATE_FILE is a layout-1 state.db TestBigStateConvert may rewrite
// (a copy), e.g. the one cmd/node's TestBigStateGenerate writes with an
// older build:
//
//	BIGSTATE_FILE=/tmp/copy/state.db go test -tags bigstate -run TestBigStateConvert -count=1 -v ./fsm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

func TestBigStateConvert(t *testing.T) {
	path := os.Getenv("BIGSTATE_FILE")
	if path == "" {
		t.Skip("BIGSTATE_FILE not set")
	}
	db, err := storage.OpenState(path, storage.DefaultStateOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := db.Size()
	applied, _, _ := db.AppliedIndex()
	start := time.Now()
	var n int
	err = db.Update(func(tx *storage.Tx) error {
		if tx.Layout() != 1 {
			t.Skipf("the file is layout %d already", tx.Layout())
		}
		n, err = ConvertLayout(tx, applied+1, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("converted %d sessions in %v: state.db %d → %d bytes (%.1f s per GiB)", n, took.Round(time.Millisecond),
		before, db.Size(), took.Seconds()/(float64(before)/(1<<30)))
	start = time.Now()
	if err := db.View(VerifyAll); err != nil {
		t.Fatalf("verify after the conversion: %v", err)
	}
	t.Logf("every record and event verified in %v", time.Since(start).Round(time.Millisecond))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	res, err := storage.CompactState(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted in %v: %+v", time.Since(start).Round(time.Millisecond), res)
}

// TestBigStateTitles times ConvertLayout to format 5 (every log read once
// for its titles) on a format-4 state it writes through the FSM: sessions
// of events of about 600 bytes, recorded-session text with a title near the
// start. BIGSTATE_SESSIONS and BIGSTATE_EVENTS size it (10,000 × 50).
//
//	go test -tags bigstate -run TestBigStateTitles -count=1 -v ./fsm
func TestBigStateTitles(t *testing.T) {
	sessions, events := envInt("BIGSTATE_SESSIONS", 10_000), envInt("BIGSTATE_EVENTS", 50)
	f, db := newTestFSMLayout(t, 4)
	text := strings.Repeat("Read the file and summarise what the tests cover. ", 11)
	index := uint64(1)
	start := time.Now()
	for s := 0; s < sessions; s += 100 {
		var cmds []*fsmpb.Command
		for k := s; k < min(s+100, sessions); k++ {
			cmds = append(cmds, createCmd(fmt.Sprintf("s-%06d", k)))
		}
		f.ApplyBatch([]*raft.Log{entry(t, index, 1000, cmds...)})
		index++
		for e := 0; e < events; e += 10 {
			cmds = cmds[:0]
			for k := s; k < min(s+100, sessions); k++ {
				var evs []string
				for q := e; q < min(e+10, events); q++ {
					ev := fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"text":%q}}`, q, 1000+q, text)
					if q == 2 {
						ev = fmt.Sprintf(`{"type":"session/title","seq":%d,"time":%d,"data":{"title":"session %d"}}`, q, 1000+q, k)
					}
					evs = append(evs, ev)
				}
				cmds = append(cmds, appendCmd(fmt.Sprintf("s-%06d", k), int64(e), evs...))
			}
			f.ApplyBatch([]*raft.Log{entry(t, index, 1000, cmds...)})
			index++
		}
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d sessions × %d events in %v: state.db %d bytes", sessions, events, time.Since(start).Round(time.Millisecond), db.Size())
	start = time.Now()
	conv := &fsmpb.Command{Cmd: &fsmpb.Command_ConvertLayout{ConvertLayout: &fsmpb.ConvertLayout{Layout: 5}}}
	f.ApplyBatch([]*raft.Log{entry(t, index, 1000, conv)})
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ConvertLayout to 5 in %v", time.Since(start).Round(time.Millisecond))
	err := db.View(func(tx *storage.Tx) error {
		rec, err := ReadRecord(tx, fmt.Sprintf("s-%06d", sessions-1))
		if err == nil && (tx.Layout() != 5 || rec.Title != fmt.Sprintf("session %d", sessions-1)) {
			t.Errorf("format %d, last session's title %q", tx.Layout(), rec.Title)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
