//go:build bigstate

package fsm

// Times the conversion of a large layout-1 state database to layout 2
// (issue 14). Not in CI. BIGSTATE_FILE is a layout-1 state.db it may rewrite
// (a copy), e.g. the one cmd/node's TestBigStateGenerate writes with an
// older build:
//
//	BIGSTATE_FILE=/tmp/copy/state.db go test -tags bigstate -run TestBigStateConvert -count=1 -v ./fsm

import (
	"os"
	"testing"
	"time"

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
		n, err = ConvertLayout(tx, applied+1)
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
