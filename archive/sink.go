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
	// Finish writes the manifest last and completes the export.
	Finish(manifest []byte) error
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

// dirSink writes a reference root directory.
type dirSink struct {
	root string
	made map[string]bool // directories known to exist
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
	return &dirSink{root: abs, made: map[string]bool{abs: true}}, nil
}

func (s *dirSink) Where() string { return s.root }

func (s *dirSink) Add(rel string, data []byte) error {
	p, err := s.path(rel)
	if err != nil {
		return err
	}
	if dir := filepath.Dir(p); !s.made[dir] {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		s.made[dir] = true
	}
	return writeNewFile(p, data)
}

func (s *dirSink) Finish(manifest []byte) error {
	return writeNewFile(filepath.Join(s.root, ManifestName), manifest)
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

// tarSink writes the root as tar entries, optionally through zstd.
type tarSink struct {
	final, tmp string
	f          *os.File
	buf        *bufio.Writer
	zw         *zstd.Encoder // nil without compression
	tw         *tar.Writer
	made       map[string]bool
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
	s := &tarSink{final: abs, tmp: f.Name(), f: f, made: map[string]bool{}, mtime: time.Now().Truncate(time.Second)}
	s.buf = bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = s.buf
	if compress {
		// One encoder goroutine: memory stays at one window and a few blocks.
		s.zw, err = zstd.NewWriter(s.buf, zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(true))
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
		for d := dir; d != "." && !s.made[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: parents[i] + "/", Mode: 0o700,
				ModTime: s.mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
			s.made[parents[i]] = true
		}
	}
	return s.file(rel, data)
}

func (s *tarSink) file(name string, data []byte) error {
	if err := s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(data)),
		ModTime: s.mtime, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := s.tw.Write(data)
	return err
}

func (s *tarSink) Finish(manifest []byte) error {
	err := s.file(ManifestName, manifest)
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
