package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Appends reuse the open file; a size that is not the file's is refused when
// the file is opened (or the cached size differs), so the caller rebuilds.
func TestArtifactFilesAppend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prep   func(c *ArtifactFiles, path string) // before the append under test
		size   int64
		wantOK bool
		want   string // the file's content afterwards
	}{
		{"new file, directory created", nil, 0, true, "new"},
		{"continues a cached file", func(c *ArtifactFiles, path string) { mustAppend(t, c, path, 0, "abc") }, 3, true, "abcnew"},
		{"continues a file it opens", func(c *ArtifactFiles, path string) { mustAppend(t, c, path, 0, "abc"); c.Close() }, 3, true, "abcnew"},
		{"size 0 but a file exists", func(c *ArtifactFiles, path string) { mustAppend(t, c, path, 0, "abc"); c.Close() }, 0, false, "abc"},
		{"shorter file than the watermark", func(c *ArtifactFiles, path string) { mustAppend(t, c, path, 0, "abc"); c.Close() }, 5, false, "abc"},
		{"cached size is not the watermark's", func(c *ArtifactFiles, path string) { mustAppend(t, c, path, 0, "abc") }, 2, false, "abc"},
		{"missing file with a watermark", nil, 3, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewArtifactFiles(4)
			defer c.Close()
			path := filepath.Join(t.TempDir(), "p", "s", ArtifactName)
			if tc.prep != nil {
				tc.prep(c, path)
			}
			n, err := c.Append(path, tc.size, []byte("new"))
			if (err == nil) != tc.wantOK {
				t.Fatalf("Append at %d = %d, %v; want ok %v", tc.size, n, err, tc.wantOK)
			}
			if err == nil && n != int64(len(tc.want)) {
				t.Errorf("new size %d, want %d", n, len(tc.want))
			}
			got, err := os.ReadFile(path)
			if tc.want == "" {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("file = %q, %v; want none", got, err)
				}
				return
			}
			if string(got) != tc.want {
				t.Errorf("file = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func mustAppend(t *testing.T, c *ArtifactFiles, path string, size int64, data string) int64 {
	t.Helper()
	n, err := c.Append(path, size, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// At most max files are open; an evicted file is opened again (and its size
// checked) by its next append.
func TestArtifactFilesBounded(t *testing.T) {
	c := NewArtifactFiles(2)
	defer c.Close()
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "a", ArtifactName), filepath.Join(dir, "b", ArtifactName), filepath.Join(dir, "c", ArtifactName)}
	for _, p := range paths {
		mustAppend(t, c, p, 0, "1")
	}
	if n := c.Open(); n != 2 {
		t.Fatalf("%d files open, want 2", n)
	}
	mustAppend(t, c, paths[0], 1, "2") // evicted first, opened again
	if got, _ := os.ReadFile(paths[0]); string(got) != "12" {
		t.Errorf("evicted file reopened: %q, want %q", got, "12")
	}
	if n := c.Open(); n != 2 {
		t.Errorf("%d files open, want 2", n)
	}
	c.Close()
	if n := c.Open(); n != 0 {
		t.Errorf("%d files open after Close", n)
	}
}

// A rebuild replaces the file: its old descriptor is dropped, so the next
// append goes to the new file, not to the one renamed over (of the same
// size here, so no size check could catch a stale descriptor). A removal
// closes the descriptor and removes the file and its directory.
func TestArtifactFilesWriteAndRemove(t *testing.T) {
	c := NewArtifactFiles(4)
	defer c.Close()
	path := filepath.Join(t.TempDir(), "p", "s", ArtifactName)
	mustAppend(t, c, path, 0, "old")
	if err := c.Write(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, c, path, 3, "+more")
	if got, err := os.ReadFile(path); err != nil || string(got) != "new+more" {
		t.Fatalf("after rebuild and append: %q, %v", got, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := c.Remove(path); err != nil {
		t.Fatal(err)
	}
	if n := c.Open(); n != 0 {
		t.Errorf("%d files open after Remove", n)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory after Remove: %v", err)
	}
	if err := c.Remove(path); err != nil {
		t.Errorf("removing a missing artifact: %v", err)
	}
	mustAppend(t, c, path, 0, "again") // a new incarnation
	if got, _ := os.ReadFile(path); !bytes.Equal(got, []byte("again")) {
		t.Errorf("new file after Remove: %q", got)
	}
}
