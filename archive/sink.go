package archive

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Output kinds of an export, chosen by the name given to CreateSink.
const (
	OutputDir    = "dir"
	OutputTar    = "tar"
	OutputTarZst = "tar.zst"
)

// OutputKind says how CreateSink writes to out: a name ending in ".tar" is a
// tar file, ".tar.zst" or ".tar.zstd" a zstd-compressed tar file, anything
// else a directory.
func OutputKind(out string) string {
	switch {
	case strings.HasSuffix(out, ".tar"):
		return OutputTar
	case strings.HasSuffix(out, ".tar.zst"), strings.HasSuffix(out, ".tar.zstd"):
		return OutputTarZst
	}
	return OutputDir
}

// Sink receives an export's files in order: every session file as it is
// produced, then the manifest, which completes the export.
type Sink interface {
	// Add writes one file at rel (slash-separated, relative to the root).
	Add(rel string, data []byte) error
	// Finish writes the manifest last, size bytes read from manifest (the
	// manifest of a large export is streamed, never held whole; a tar
	// header needs its size first), and completes the export. A manifest
	// that is not exactly size bytes long is an error.
	Finish(manifest io.Reader, size int64) error
	// Abort gives up: a tar file being written is removed; a directory keeps
	// the files written so far and has no manifest.
	Abort()
	// Where names the output for messages.
	Where() string
}

// CreateSink opens the export's output (see OutputKind). A directory must be
// absent or empty; a tar file must not exist. Tar files are written under a
// temporary name in the same directory and renamed by Finish.
func CreateSink(out string) (Sink, error) {
	if out == "" {
		return nil, errors.New("no output given")
	}
	switch OutputKind(out) {
	case OutputTar:
		return newTarSink(out, false)
	case OutputTarZst:
		return newTarSink(out, true)
	}
	return newDirSink(out)
}

// dirSet remembers the directory entries a tar sink has written without
// growing with the export: every session has a directory of its own, so
// the directory of the last file added is kept apart and forgotten with the
// next one, and only the directories above (project directories) are
// remembered, up to maxDirSet of them, past which the set starts over.
// Forgetting is harmless: a directory entry may be written again, with the
// same mode, which extraction and import take as the same directory.
type dirSet struct {
	last  string // the last file's directory
	above map[string]bool
}

const maxDirSet = 4096

func (d *dirSet) has(dir string) bool { return dir == d.last || d.above[dir] }

// add records dir; leaf says it is the directory of the file being added.
func (d *dirSet) add(dir string, leaf bool) {
	if leaf {
		d.last = dir
		return
	}
	if d.above == nil || len(d.above) >= maxDirSet {
		d.above = map[string]bool{}
	}
	d.above[dir] = true
}

// dirSink writes a reference root directory.
type dirSink struct {
	root    string
	lastDir string // the directory of the last file, known to exist
}

func newDirSink(dir string) (*dirSink, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(abs); err == nil {
		if len(entries) > 0 {
			return nil, fmt.Errorf("output directory %s is not empty", abs)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	return &dirSink{root: abs, lastDir: abs}, nil
}

func (s *dirSink) Where() string { return s.root }

func (s *dirSink) Add(rel string, data []byte) error {
	p, err := s.path(rel)
	if err != nil {
		return err
	}
	// Every session has a directory of its own: remembering the ones made
	// would grow with the export, and MkdirAll of an existing one is cheap.
	if dir := filepath.Dir(p); dir != s.lastDir {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		s.lastDir = dir
	}
	return writeNewFile(p, data)
}

// Finish writes manifest.json; a manifest that cannot be written whole is
// removed (an export directory without one is incomplete).
func (s *dirSink) Finish(manifest io.Reader, size int64) error {
	p := filepath.Join(s.root, ManifestName)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	n, err := io.Copy(bw, manifest)
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes, want %d", ManifestName, n, size)
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
	}
	return err
}

func (s *dirSink) Abort() {}

// path maps a relative slash path into the root, refusing anything that
// would leave it (session paths are encoded segments and never do).
func (s *dirSink) path(rel string) (string, error) {
	if !validRel(rel) {
		return "", fmt.Errorf("refusing to write %q outside the output root", rel)
	}
	return filepath.Join(s.root, filepath.FromSlash(rel)), nil
}

// validRel reports whether rel is a clean relative slash path inside a root.
func validRel(rel string) bool {
	return rel != "" && !path.IsAbs(rel) && path.Clean(rel) == rel && rel != ".." && !strings.HasPrefix(rel, "../")
}

// writeNewFile writes a file that must not exist yet (mode 0600, as the
// reference writes artifacts).
func writeNewFile(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tarZstWindow is the zstd window of a .tar.zst export. The encoder keeps
// twice the window as history, touched as the stream grows: with the
// default 8 MiB window an export's memory grew by up to 16 MiB over its
// first 16 MiB of tar. 2 MiB costs nothing with zstd session files (already
// compressed; the tar headers compress as well) and about 3% in size with
// --compression none, for 12 MiB less memory.
const tarZstWindow = 2 << 20

// tarSink writes the root as tar entries, optionally through zstd.
type tarSink struct {
	final, tmp string
	f          *os.File
	buf        *bufio.Writer
	zw         *zstd.Encoder // nil without compression
	tw         *tar.Writer
	made       dirSet
	mtime      time.Time
	done       bool
}

func newTarSink(out string, compress bool) (*tarSink, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(abs); err == nil {
		return nil, fmt.Errorf("output file %s already exists", abs)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("output file: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".*.partial")
	if err != nil {
		return nil, fmt.Errorf("output file: %w", err)
	}
	s := &tarSink{final: abs, tmp: f.Name(), f: f, mtime: time.Now().Truncate(time.Second)}
	s.buf = bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = s.buf
	if compress {
		// One encoder goroutine: memory stays at one window and a few blocks.
		s.zw, err = zstd.NewWriter(s.buf, zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(true), zstd.WithWindowSize(tarZstWindow))
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
		w = s.zw
	}
	s.tw = tar.NewWriter(w)
	return s, nil
}

func (s *tarSink) Where() string { return s.final }

func (s *tarSink) Add(rel string, data []byte) error {
	if !validRel(rel) {
		return fmt.Errorf("refusing to write %q outside the output root", rel)
	}
	// Directory entries first (mode 0700, as the reference creates them), so
	// that extracting the tar gives the reference's permissions.
	if dir := path.Dir(rel); dir != "." {
		var parents []string
		for d := dir; d != "." && !s.made.has(d); d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: parents[i] + "/", Mode: 0o700,
				ModTime: s.mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
			s.made.add(parents[i], i == 0)
		}
	}
	if err := s.header(rel, int64(len(data))); err != nil {
		return err
	}
	_, err := s.tw.Write(data)
	return err
}

// header starts a regular file entry of size bytes.
func (s *tarSink) header(name string, size int64) error {
	return s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: size,
		ModTime: s.mtime, Format: tar.FormatPAX})
}

func (s *tarSink) Finish(manifest io.Reader, size int64) error {
	err := s.header(ManifestName, size)
	if err == nil {
		var n int64
		n, err = io.Copy(s.tw, manifest)
		if err == nil && n != size {
			err = fmt.Errorf("%s: %d bytes, want %d", ManifestName, n, size)
		}
	}
	if err == nil {
		err = s.tw.Close()
	}
	if err == nil && s.zw != nil {
		err = s.zw.Close()
	}
	if err == nil {
		err = s.buf.Flush()
	}
	if err == nil {
		err = s.f.Sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Never replace a file that appeared meanwhile.
		if err = os.Link(s.tmp, s.final); err == nil {
			os.Remove(s.tmp)
			s.done = true
			return nil
		}
	}
	os.Remove(s.tmp)
	s.done = true
	return err
}

func (s *tarSink) Abort() {
	if s.done {
		return
	}
	s.done = true
	if s.zw != nil {
		s.zw.Close()
	}
	s.f.Close()
	os.Remove(s.tmp)
}
