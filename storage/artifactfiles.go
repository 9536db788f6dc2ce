package storage

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// MaxOpenArtifacts bounds the artifact files an ArtifactFiles keeps open. It
// covers the sessions a busy node appends to at once (hundreds of concurrent
// writers) with room to spare, while leaving most of a 1024-descriptor soft
// limit (where the hard limit keeps Go from raising it) to connections and
// the databases. Past it the least recently used file is closed: a session
// written again after that costs one open and one fstat, as every append did
// before the cache.
const MaxOpenArtifacts = 512

// ArtifactFiles writes artifact files and keeps the most recently written
// ones open, so that an append is one pwrite: no open, fstat or close. It
// uses bare descriptors: an os.File costs four fcntl and an epoll_ctl per
// open (it tries the poller, which refuses regular files). The
// size of a file is checked (fstat) when it is opened; after that the size
// this process wrote is trusted, as is the caller's watermark: artifacts are
// written only through it, and damage done behind its back is found by
// VerifyArtifact before anything is served. Safe for concurrent use; each path
// must be written by one goroutine at a time.
type ArtifactFiles struct {
	mu    sync.Mutex
	max   int
	files map[string]*list.Element // of *openArtifact
	lru   list.List                // front: most recently used
}

type openArtifact struct {
	path string
	fd   int
	size int64 // what this process wrote: the file's length
}

// NewArtifactFiles returns a cache of at most n open files (at least 1).
func NewArtifactFiles(n int) *ArtifactFiles {
	return &ArtifactFiles{max: max(n, 1), files: map[string]*list.Element{}}
}

// errArtifactSize reports a file whose length is not its watermark's.
var errArtifactSize = errors.New("artifact length is not its watermark's")

// Append appends data to the artifact at path, which must currently be
// exactly size bytes long (the caller's watermark), and returns the new size.
// A file of a different size (checked when it is opened, or a cached file
// whose size differs) is an error: the file and the watermark disagree and the
// caller must rebuild. A failed write is cut back to size, so no partial frame
// is left for the next append to build on, and the file is closed: the next
// append opens it again and checks its size. No fsync: artifacts are a view
// rebuilt from the state database.
func (c *ArtifactFiles) Append(path string, size int64, data []byte) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.files[path]
	if e != nil && e.Value.(*openArtifact).size != size {
		c.dropLocked(e)
		e = nil
	}
	if e == nil {
		fd, err := openForAppend(path, size)
		if err != nil {
			return 0, err
		}
		e = c.insertLocked(&openArtifact{path: path, fd: fd, size: size})
	} else {
		c.lru.MoveToFront(e)
	}
	o := e.Value.(*openArtifact)
	if err := pwriteAll(o.fd, data, size); err != nil {
		_ = unix.Ftruncate(o.fd, size)
		c.dropLocked(e)
		return 0, &fs.PathError{Op: "write", Path: path, Err: err}
	}
	o.size = size + int64(len(data))
	return o.size, nil
}

// openForAppend opens the artifact at path for an append at size: a new file
// (size 0) is created, exclusively (anything already there is not the
// watermark's), and its directory with it; an existing one must be size bytes.
func openForAppend(path string, size int64) (int, error) {
	if size == 0 {
		if err := ensureDir(filepath.Dir(path)); err != nil {
			return -1, err
		}
		return openFile(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
	}
	fd, err := openFile(path, unix.O_WRONLY)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Size != size {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: %s is %d bytes, watermark says %d", errArtifactSize, path, st.Size, size)
	}
	return fd, nil
}

func openFile(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o600)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

func fstat(fd int, st *unix.Stat_t) error {
	for {
		if err := unix.Fstat(fd, st); err != unix.EINTR {
			return err
		}
	}
}

// pwriteAll writes all of data at off.
func pwriteAll(fd int, data []byte, off int64) error {
	for len(data) > 0 {
		n, err := unix.Pwrite(fd, data, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		data, off = data[n:], off+int64(n)
	}
	return nil
}

// Write replaces the artifact at path with data: a temporary file in the same
// directory, renamed over it, so a reader never sees a half-written file. A
// descriptor of the file it replaces is closed first; the new file stays open
// for the appends that follow.
func (c *ArtifactFiles) Write(path string, data []byte) error {
	c.Drop(path)
	dir := filepath.Dir(path)
	if err := ensureDir(dir); err != nil {
		return err
	}
	fd, tmp, err := createTemp(dir)
	if err != nil {
		return err
	}
	err = pwriteAll(fd, data, 0)
	if err == nil {
		err = unix.Rename(tmp, path)
	}
	if err != nil {
		unix.Close(fd)
		os.Remove(tmp)
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.files[path]; e != nil { // not expected: one writer per path
		c.dropLocked(e)
	}
	c.insertLocked(&openArtifact{path: path, fd: fd, size: int64(len(data))})
	return nil
}

// createTemp creates a new temporary file in dir, as os.CreateTemp with the
// pattern ArtifactName+".*.tmp" does, and returns its descriptor and path.
func createTemp(dir string) (int, string, error) {
	for try := 0; ; try++ {
		tmp := filepath.Join(dir, ArtifactName+"."+strconv.FormatUint(uint64(rand.Uint32()), 10)+".tmp")
		fd, err := openFile(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 100 {
			return fd, tmp, err
		}
	}
}

// Remove removes the artifact at path (closing its descriptor first) and its
// directory when that is left empty; a missing file is fine.
func (c *ArtifactFiles) Remove(path string) error {
	c.Drop(path)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	_ = os.Remove(filepath.Dir(path)) // fails harmlessly when not empty
	return nil
}

// Drop closes the descriptor of path, if it is open.
func (c *ArtifactFiles) Drop(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.files[path]; e != nil {
		c.dropLocked(e)
	}
}

// Close closes every open descriptor. The cache stays usable.
func (c *ArtifactFiles) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = c.lru.Front() {
		c.dropLocked(e)
	}
}

// Open is how many descriptors are open.
func (c *ArtifactFiles) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

func (c *ArtifactFiles) insertLocked(o *openArtifact) *list.Element {
	for c.lru.Len() >= c.max {
		c.dropLocked(c.lru.Back())
	}
	e := c.lru.PushFront(o)
	c.files[o.path] = e
	return e
}

func (c *ArtifactFiles) dropLocked(e *list.Element) {
	o := c.lru.Remove(e).(*openArtifact)
	delete(c.files, o.path)
	// Nothing is lost on a failed close: no fsync is promised, and the next
	// append opens the file again and checks its size.
	_ = unix.Close(o.fd)
}

// ensureDir creates dir if it does not exist: one mkdir when its parent
// exists (the common case), the whole path otherwise.
func ensureDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil || errors.Is(err, fs.ErrExist):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o700)
	}
	return err
}
