package storage

import (
	"path/filepath"
	"strings"
	"testing"
)

// bruteRequestBytes sums the q/k entries the slow way.
func bruteRequestBytes(t *testing.T, tx *Tx, id string) int64 {
	t.Helper()
	b, _ := tx.sub(id, bucketReqs, false)
	if b == nil {
		return 0
	}
	var n int64
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if k[0] == 'k' {
			n += int64(len(k) - 1 + len(v) - 16)
		}
	}
	return n
}

// RequestBytes follows every change of a session's kept results (new ids,
// a replaced id, pruning by count and by age) and recomputes a sum that a
// build not keeping it left stale.
func TestRequestBytesFollowsKeptResults(t *testing.T) {
	s, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	steps := []struct {
		name string
		do   func(tx *Tx) error
	}{
		{"first", func(tx *Tx) error { return tx.PutRequestResult("s", "a", 1, []byte("result-a"), true) }},
		{"second", func(tx *Tx) error { return tx.PutRequestResult("s", "bb", 2, []byte(strings.Repeat("r", 100)), true) }},
		{"replaced", func(tx *Tx) error { return tx.PutRequestResult("s", "a", 3, []byte("x"), true) }},
		{"pruned by count", func(tx *Tx) error {
			for i := range MaxRequestIDs + 5 {
				if err := tx.PutRequestResult("s", strings.Repeat("i", i%7+1)+string(rune('0'+i%10))+strings.Repeat("z", i/10), 4, []byte("r"), true); err != nil {
					return err
				}
			}
			return nil
		}},
		{"pruned by age", func(tx *Tx) error {
			return tx.PutRequestResult("s", "late", RequestIDLifetime+10, []byte("late"), true)
		}},
		{"stored without keeping the sum (a version-4 command)", func(tx *Tx) error {
			return tx.PutRequestResult("s", "v4", RequestIDLifetime+15, []byte("v4-result"), false)
		}},
		{"stale sum (an older build stored a result)", func(tx *Tx) error {
			b, _ := tx.sub("s", bucketReqs, false)
			order := getU64(b.Get(keyReqNext))
			val := append(append(u64(order), u64(RequestIDLifetime+20)...), []byte("old-build")...)
			if err := b.Put([]byte("kold"), val); err != nil {
				return err
			}
			if err := b.Put(append([]byte("o"), u64(order)...), []byte("old")); err != nil {
				return err
			}
			return b.Put(keyReqNext, u64(order+1))
		}},
		{"after the stale sum", func(tx *Tx) error { return tx.PutRequestResult("s", "next", RequestIDLifetime+30, []byte("n"), true) }},
	}
	if err := s.Update(func(tx *Tx) error { return tx.PutRecord("s", []byte("rec"), nil) }); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if err := s.Update(st.do); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		_ = s.View(func(tx *Tx) error {
			if got, want := tx.RequestBytes("s"), bruteRequestBytes(t, tx, "s"); got != want || want == 0 {
				t.Fatalf("%s: RequestBytes %d, the entries hold %d", st.name, got, want)
			}
			return nil
		})
	}
}
