package storage

import (
	"bytes"
	"fmt"
	"testing"
)

// Sessions are numbered in the order their records are first stored; a
// session deleted and created again gets a new number, and nothing of its
// first life (request results, counters) is found under the new one.
func TestSessionNumbers(t *testing.T) {
	s := openLayout(t, 4)
	err := s.Update(func(tx *Tx) error {
		for _, id := range []string{"b", "a", "c"} {
			if err := tx.PutRecord(id, []byte("cold-"+id), []byte("hot")); err != nil {
				return err
			}
		}
		if err := tx.PutRequestResult("a", "req-1", 1, []byte("first life"), true); err != nil {
			return err
		}
		return tx.PutRecord("a", []byte("cold-a2"), []byte("hot2")) // an update keeps the number
	})
	if err != nil {
		t.Fatal(err)
	}
	nums := func() string {
		var out []string
		_ = s.View(func(tx *Tx) error {
			for _, id := range []string{"a", "b", "c"} {
				n, found, err := tx.sessionNum(id)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%s=%d/%v", id, n, found))
			}
			return nil
		})
		return fmt.Sprint(out)
	}
	if got := nums(); got != "[a=2/true b=1/true c=3/true]" {
		t.Fatalf("numbers %s, want b, a, c numbered 1, 2, 3 in the order stored", got)
	}
	err = s.Update(func(tx *Tx) error {
		if got := tx.RequestResult("a", "req-1"); string(got) != "first life" {
			return fmt.Errorf("result before the delete: %q", got)
		}
		if err := tx.DeleteSession("a", 1); err != nil {
			return err
		}
		if tx.HasSession("a") || tx.RequestResult("a", "req-1") != nil {
			return fmt.Errorf("session a after its delete: record %v, result %q", tx.HasSession("a"), tx.RequestResult("a", "req-1"))
		}
		return tx.PutRecord("a", []byte("cold-a3"), []byte("hot3"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := nums(); got != "[a=4/true b=1/true c=3/true]" {
		t.Fatalf("numbers after a delete and create %s, want a renumbered 4", got)
	}
	err = s.View(func(tx *Tx) error {
		if got := tx.RequestResult("a", "req-1"); got != nil || tx.RequestBytes("a") != 0 {
			return fmt.Errorf("the new session a holds its first life's result %q (%d bytes)", got, tx.RequestBytes("a"))
		}
		rec, err := tx.Record("a")
		if err != nil || string(rec) != "cold-a3hot3" {
			return fmt.Errorf("record %q, %v", rec, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A request table keeps its size and next order in one key (n) in format 4,
// and prunes past MaxRequestIDs as the other formats do.
func TestRequestTableFormat4(t *testing.T) {
	for _, format := range []int{2, 4} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			s := openLayout(t, format)
			var want int64
			err := s.Update(func(tx *Tx) error {
				for _, id := range []string{"s", "t"} {
					if err := tx.PutRecord(id, []byte("cold"), []byte("hot")); err != nil {
						return err
					}
				}
				for i := range MaxRequestIDs + 5 {
					rid := fmt.Sprintf("r%04d", i)
					res := bytes.Repeat([]byte{'x'}, i%7)
					if err := tx.PutRequestResult("s", rid, int64(i), res, false); err != nil {
						return err
					}
					if i >= 5 {
						want += int64(len(rid) + len(res))
					}
				}
				return tx.PutRequestResult("t", "r0000", 1, []byte("other"), true)
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.View(func(tx *Tx) error {
				if got := tx.RequestBytes("s"); got != want {
					return fmt.Errorf("kept bytes %d, want %d", got, want)
				}
				if tx.RequestResult("s", "r0004") != nil || tx.RequestResult("s", "r0005") == nil {
					return fmt.Errorf("the oldest 5 of %d results were not the ones pruned", MaxRequestIDs+5)
				}
				if got := tx.RequestResult("t", "r0000"); string(got) != "other" {
					return fmt.Errorf("another session's result under the same id: %q", got)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzRecord4Decode: a records/ value that decodes encodes back to the same
// bytes, and nothing panics.
func FuzzRecord4Decode(f *testing.F) {
	f.Add("s", encodeRecord4("s", 7, []byte("cold record")))
	f.Add("", []byte{})
	f.Add("id\x00", encodeRecord4("id\x00", 1<<40, nil))
	f.Fuzz(func(t *testing.T, id string, v []byte) {
		num, cold, ok := decodeRecord4(id, v)
		if !ok {
			return
		}
		if got := encodeRecord4(id, num, cold); !bytes.Equal(got, v) {
			t.Fatalf("decoded %d, %q from %x; encodes to %x", num, cold, v, got)
		}
	})
}
