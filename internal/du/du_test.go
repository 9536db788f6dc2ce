package du

import (
	"os"
	"path/filepath"
	"testing"
)

// tree is a directory to measure and what Usage should find in it.
type tree struct {
	name         string
	files        map[string]int // path under the root → bytes written
	sparse       int64          // a file extended to this size without writing
	wantApparent int64
	minAllocated int64 // at least this much is allocated
	maxAllocated int64 // at most this much (0: no bound)
}

func TestUsage(t *testing.T) {
	for _, tc := range []tree{
		{name: "empty directory"},
		{name: "one empty file", files: map[string]int{"a": 0}},
		{name: "files in subdirectories", files: map[string]int{"a": 100, "x/b": 64 << 10, "x/y/c": 1}, wantApparent: 100 + 64<<10 + 1, minAllocated: 64 << 10},
		{name: "sparse file: its size is apparent, not allocated", sparse: 1 << 20, wantApparent: 1 << 20, maxAllocated: 1<<20 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, n := range tc.files {
				p = filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.sparse > 0 {
				f, err := os.Create(filepath.Join(root, "sparse"))
				if err != nil {
					t.Fatal(err)
				}
				err = f.Truncate(tc.sparse)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			alloc, apparent, err := Usage(root)
			if err != nil {
				t.Fatal(err)
			}
			if apparent != tc.wantApparent {
				t.Errorf("apparent %d; want %d", apparent, tc.wantApparent)
			}
			if alloc < tc.minAllocated || tc.maxAllocated > 0 && alloc > tc.maxAllocated {
				t.Errorf("allocated %d; want %d to %d", alloc, tc.minAllocated, tc.maxAllocated)
			}
			if a, err := Allocated(root); err != nil || a != alloc {
				t.Errorf("Allocated = %d, %v; want %d as Usage", a, err, alloc)
			}
		})
	}
	if _, err := Allocated(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Allocated of a missing path: no error")
	}
}
