package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Recorder numbers and timestamps records against one start time, keeps
// them in memory for the checkers and streams each one to a JSONL file as
// it happens, so a run that dies still leaves its history.
type Recorder struct {
	start time.Time

	mu     sync.Mutex
	ops    []Op
	nextID int
	w      *bufio.Writer
	f      *os.File
	err    error
}

// NewRecorder returns a recorder that also writes to path ("" = memory only).
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		r.f, r.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	return r, nil
}

// Since is the run clock: nanoseconds since the recorder was made.
func (r *Recorder) Since() int64 { return int64(time.Since(r.start)) }

// Start is the wall-clock time the run began.
func (r *Recorder) Start() time.Time { return r.start }

// Invoke records the start of an operation and returns it with its ID set.
func (r *Recorder) Invoke(o Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	o.ID = r.nextID
	o.Type = Invoke
	o.Time = r.Since()
	r.add(o)
	return o
}

// Complete records the completion c (Type OK, Fail or Info) of inv; the
// process, function, node and session are copied from inv when unset.
func (r *Recorder) Complete(inv Op, c Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.ID, c.Process, c.F = inv.ID, inv.Process, inv.F
	if c.Node == "" {
		c.Node = inv.Node
	}
	if c.Session == "" {
		c.Session = inv.Session
	}
	c.Time = r.Since()
	r.add(c)
	return c
}

// Note records a nemesis or status record (Type Info, process NemesisProcess).
func (r *Recorder) Note(f F, node string, value any) {
	raw, err := json.Marshal(value)
	if err != nil {
		raw, _ = json.Marshal(fmt.Sprint(value))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	r.add(Op{ID: r.nextID, Time: r.Since(), Type: Info, Process: NemesisProcess, F: f, Node: node, Value: raw})
}

func (r *Recorder) add(o Op) {
	o.Index = len(r.ops)
	r.ops = append(r.ops, o)
	if r.w == nil || r.err != nil {
		return
	}
	b, err := json.Marshal(o)
	if err == nil {
		b = append(b, '\n')
		_, err = r.w.Write(b)
	}
	r.err = err
}

// Ops returns a copy of the records so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Close flushes and closes the file, returning the first write error.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return r.err
	}
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	r.w = nil
	return r.err
}

// Read parses a history.jsonl stream.
func Read(rd io.Reader) ([]Op, error) {
	dec := json.NewDecoder(rd)
	var ops []Op
	for {
		var o Op
		if err := dec.Decode(&o); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return ops, fmt.Errorf("history record %d: %w", len(ops), err)
		}
		ops = append(ops, o)
	}
}
