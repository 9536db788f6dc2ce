package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/sessionlog"
)

const sessionsUsage = `Usage: sessionstore sessions <command> [flags] [ID...]

Looks at the sessions of a running cluster from the shell:

  ls    [--cwd PREFIX] [--limit N] [--brief] [--json]  list sessions (paged)
  show  ID [--json]                                    a readable turn-by-turn view
  cat   ID                                             the stored JSONL, byte for byte
  tail  ID [-n N] [-f]                                 the last events; -f follows new ones
  rm    ID [ID...] [--yes]                             delete sessions

Every command takes --addr and the connection flags (--tls-*, --token); run
'sessionstore sessions <command> --help' for its flags.
`

// sessionsIO is where the sessions commands read and write: rm asks on in
// when tty is set.
type sessionsIO struct {
	out, err io.Writer
	in       io.Reader
	tty      bool
}

// sessionsCmd is `sessions`: ls, show, cat, tail and rm over the API.
func sessionsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSessions(ctx, args, sessionsIO{out: stdout, err: stderr, in: os.Stdin, tty: stdinIsTerminal()})
}

// stdinIsTerminal reports whether the process's stdin is a terminal, where
// asking for a confirmation makes sense (a character device such as
// /dev/null is not: it has no terminal attributes).
func stdinIsTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}

func runSessions(ctx context.Context, args []string, sio sessionsIO) error {
	if len(args) == 0 {
		fmt.Fprint(sio.err, sessionsUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "ls", "list":
		return sessionsLs(ctx, rest, sio)
	case "show":
		return sessionsShow(ctx, rest, sio)
	case "cat":
		return sessionsCat(ctx, rest, sio)
	case "tail":
		return sessionsTail(ctx, rest, sio)
	case "rm", "delete":
		return sessionsRm(ctx, rest, sio)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(sio.err, sessionsUsage)
		return flag.ErrHelp
	default:
		fmt.Fprintf(sio.err, "sessionstore sessions: unknown command %q\n\n%s", sub, sessionsUsage)
		return errUsage
	}
}

// sessionsConn holds the flags every sessions command shares.
type sessionsConn struct {
	addr    string
	timeout time.Duration
	conn    *clientFlags
}

// sessionsFlagSet is the flag set of one sessions command, with --addr,
// --timeout and the connection flags, and usage text as its help.
func sessionsFlagSet(name, usage string, sio sessionsIO) (*flag.FlagSet, *sessionsConn) {
	fs := flag.NewFlagSet("sessionstore sessions "+name, flag.ContinueOnError)
	fs.SetOutput(sio.err)
	sc := &sessionsConn{}
	fs.StringVar(&sc.addr, "addr", defaultGRPCAddr, "gRPC address of a node of the cluster")
	fs.DurationVar(&sc.timeout, "timeout", 30*time.Second, "give up after this long (retries of an unreachable node included)")
	sc.conn = addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage+`
Every flag can also be set as SESSIONSTORE_<FLAG> (e.g. SESSIONSTORE_ADDR);
flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, sc
}

// parse parses args (flags anywhere among the positional arguments) and
// checks the count of positional arguments against min and max (max < 0: no
// limit).
func (sc *sessionsConn) parse(fs *flag.FlagSet, args []string, what string, min, max int) ([]string, error) {
	pos, err := parseWithPositional(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(pos) < min || (max >= 0 && len(pos) > max):
		if max == 0 {
			fmt.Fprintf(fs.Output(), "%s: unexpected arguments: %v\n", fs.Name(), pos)
		} else {
			fmt.Fprintf(fs.Output(), "%s: want %s, got %d arguments\n", fs.Name(), what, len(pos))
		}
		return nil, errUsage
	case sc.timeout <= 0:
		fmt.Fprintf(fs.Output(), "%s: --timeout must be > 0\n", fs.Name())
		return nil, errUsage
	}
	return pos, nil
}

// dial connects to --addr with the connection flags.
func (sc *sessionsConn) dial(ctx context.Context) (*client.Client, error) {
	opts, err := sc.conn.dialOptions()
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, sc.addr, opts...)
}

// connect dials --addr for one command bounded by --timeout; done closes
// the connection and releases the deadline.
func (sc *sessionsConn) connect(ctx context.Context) (context.Context, *client.Client, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, sc.timeout)
	c, err := sc.dial(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, c, func() { c.Close(); cancel() }, nil
}

// sessionErr words the error of a call about session id: "no session ID" for
// NOT_FOUND, otherwise the client's error with the address asked.
func (sc *sessionsConn) sessionErr(id string, err error) error {
	if errors.Is(err, sessionstore.ErrNotFound) {
		return fmt.Errorf("no session %s", id)
	}
	return fmt.Errorf("%s (asked %s): %w", id, sc.addr, err)
}

// ---------------------------------------------------------------------------
// ls

// lsRow is one listed session; the details (events, updated, title) come
// from reading it and are absent with --brief or when that read failed.
type lsRow struct {
	ID        string `json:"id"`
	Cwd       string `json:"cwd,omitempty"`
	CreatedAt int64  `json:"created_at"`
	Revision  string `json:"revision"`
	Events    *int64 `json:"events,omitempty"`
	UpdatedAt *int64 `json:"updated_at,omitempty"`
	Title     string `json:"title,omitempty"`
	Error     string `json:"error,omitempty"`
}

func sessionsLs(ctx context.Context, args []string, sio sessionsIO) error {
	fs, sc := sessionsFlagSet("ls", `Usage: sessionstore sessions ls [--cwd PREFIX] [--limit N] [--brief] [--json] [flags]

Lists the sessions (those with at least one event), in the store's order,
paging through the List rpc. The columns: ID, CWD, EVENTS (the next seq),
UPDATED (the time of the last event, UTC), REVISION and TITLE (the last
session/title event). EVENTS, UPDATED and TITLE read each listed session;
--brief skips that read and prints CREATED instead. With --json, one JSON
object per line (times in Unix milliseconds).
`, sio)
	cwd := fs.String("cwd", "", "only sessions whose cwd starts with this prefix")
	limit := fs.Int("limit", 0, "list at most this many sessions (0: all)")
	brief := fs.Bool("brief", false, "skip reading each session: no events, updated or title")
	asJSON := fs.Bool("json", false, "one JSON object per line instead of the table")
	pageSize := fs.Int("page-size", 100, "sessions asked for per List call")
	if _, err := sc.parse(fs, args, "", 0, 0); err != nil {
		return err
	}
	if *limit < 0 || *pageSize < 1 {
		fmt.Fprintln(sio.err, "sessionstore sessions ls: --limit must be ≥ 0 and --page-size ≥ 1")
		return errUsage
	}
	ctx, c, done, err := sc.connect(ctx)
	if err != nil {
		return err
	}
	defer done()

	var rows []lsRow
	token, more := "", false
	for {
		size := min(*pageSize, math.MaxInt32)
		if *limit > 0 {
			size = min(size, *limit-len(rows))
		}
		page, err := c.ListSnapshots(ctx, &sessionpb.ListSnapshotsRequest{PageSize: int32(size), PageToken: token, CwdPrefix: *cwd})
		if err != nil {
			return fmt.Errorf("list sessions (asked %s): %w", sc.addr, err)
		}
		for _, s := range page.GetSnapshots() {
			if *limit > 0 && len(rows) == *limit {
				more = true
				break
			}
			h := s.GetHeader()
			rows = append(rows, lsRow{ID: h.GetId(), Cwd: h.GetCwd(), CreatedAt: h.GetCreatedAt(), Revision: s.GetRevision()})
		}
		token = page.GetNextPageToken()
		if token == "" || more {
			break
		}
		if *limit > 0 && len(rows) == *limit {
			more = true // a next page exists, though it may turn out empty
			break
		}
	}
	if !*brief {
		for i := range rows {
			if err := lsDetails(ctx, c, &rows[i]); err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("read %s (asked %s): %w", rows[i].ID, sc.addr, err)
				}
				rows[i].Error = err.Error()
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(sio.out)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	} else if len(rows) > 0 {
		renderLs(sio.out, rows, *brief)
	}
	switch {
	case len(rows) == 0 && *cwd != "":
		fmt.Fprintf(sio.err, "no sessions under cwd %q\n", *cwd)
	case len(rows) == 0:
		fmt.Fprintln(sio.err, "no sessions")
	case more:
		fmt.Fprintf(sio.err, "(listed the first %d; there may be more: raise --limit)\n", len(rows))
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(sio.err, "%s: %s\n", r.ID, r.Error)
		}
	}
	return nil
}

// lsDetails reads row's session: its next seq, the time of its last event
// and its last title.
func lsDetails(ctx context.Context, c *client.Client, row *lsRow) error {
	r, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: row.ID})
	if err != nil {
		return err
	}
	n, updated := r.GetNextSeq(), row.CreatedAt
	row.Events, row.UpdatedAt = &n, &updated
	for _, ev := range r.GetEvents() {
		var e struct {
			Type string          `json:"type"`
			Time float64         `json:"time"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal([]byte(ev), &e) != nil {
			continue
		}
		if e.Time > 0 {
			updated = int64(e.Time)
		}
		var d struct {
			Title string `json:"title"`
		}
		if e.Type == "session/title" && json.Unmarshal(e.Data, &d) == nil && d.Title != "" {
			row.Title = d.Title
		}
	}
	return nil
}

func renderLs(w io.Writer, rows []lsRow, brief bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if brief {
		fmt.Fprintln(tw, "ID\tCWD\tCREATED\tREVISION")
	} else {
		fmt.Fprintln(tw, "ID\tCWD\tEVENTS\tUPDATED\tREVISION\tTITLE")
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, r := range rows {
		if brief {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, dash(r.Cwd), msTime(r.CreatedAt), r.Revision)
			continue
		}
		events, updated := "?", "?"
		if r.Events != nil {
			events = fmt.Sprint(*r.Events)
		}
		if r.UpdatedAt != nil {
			updated = msTime(*r.UpdatedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, dash(r.Cwd), events, updated, r.Revision, dash(oneLine(r.Title, 50)))
	}
	_ = tw.Flush() // errors of w surface on the next write, if any
}

// msTime renders Unix milliseconds as a UTC time to the second.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05")
}

// oneLine folds s onto one line (runs of white space become one space) and
// cuts it to max runes, marking the cut with "…".
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// ---------------------------------------------------------------------------
// show

func sessionsShow(ctx context.Context, args []string, sio sessionsIO) error {
	fs, sc := sessionsFlagSet("show", `Usage: sessionstore sessions show ID [--json] [flags]

Prints a readable view of the session, turn by turn: a summary, then per
turn the user's messages, the assistant's text (its reasoning and tool
results abbreviated), the tool calls, and the plan-mode switches and slash
commands around them. It reads the balanced view with Inspect, which commits
nothing: an open turn is shown closed as a Load would close it, but nothing
is repaired and no lease is fenced. With --json: {"header", "revision",
"next_seq", "events"}: the header line and the view's events as JSON (legacy
shapes normalised, closers included; 'sessions cat' prints the stored text).
`, sio)
	asJSON := fs.Bool("json", false, "print the view as one JSON object")
	pos, err := sc.parse(fs, args, "exactly one session ID", 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	ctx, c, done, err := sc.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	v, err := c.Inspect(ctx, &sessionpb.InspectRequest{SessionId: id})
	if err != nil {
		return sc.sessionErr(id, err)
	}
	if *asJSON {
		evs := make([]json.RawMessage, len(v.GetEvents()))
		for i, e := range v.GetEvents() {
			evs[i] = json.RawMessage(e)
		}
		out := struct {
			Header   json.RawMessage   `json:"header"`
			Revision string            `json:"revision"`
			NextSeq  int64             `json:"next_seq"`
			Events   []json.RawMessage `json:"events"`
		}{json.RawMessage(strings.TrimSpace(string(sessionlog.HeaderLine(v.GetHeader().Domain())))), v.GetRevision(), v.GetNextSeq(), evs}
		return json.NewEncoder(sio.out).Encode(out)
	}
	_, err = io.WriteString(sio.out, renderShow(v))
	return err
}

// showPart is one content part of a message (text, reasoning, tool-call,
// tool-result), with the fields the view prints.
type showPart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	IsError   bool            `json:"isError"`
	Content   []showPart      `json:"content"`
}

// showData is the union of the data fields the view prints; decoding is
// lenient (a field of another shape is left empty).
type showData struct {
	Content []showPart `json:"content"`
	Message *showData  `json:"message"`
	Source  *struct {
		Kind   string `json:"kind"`
		Plugin string `json:"plugin"`
		CallID string `json:"callId"`
	} `json:"source"`
	Turn      int64           `json:"turn"`
	CallID    string          `json:"callId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	IsError   bool            `json:"isError"`
	Active    *bool           `json:"active"`
	Reason    *struct {
		Kind string `json:"kind"`
	} `json:"reason"`
	Title string `json:"title"`
	Args  string `json:"args"`
	Kind  string `json:"kind"`
	Text  string `json:"text"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// parts is the message content of d: its own, or that of its message.
func (d *showData) parts() []showPart {
	if len(d.Content) == 0 && d.Message != nil {
		return d.Message.Content
	}
	return d.Content
}

// abbreviated texts are cut to this many runes on one line.
const showAbbrev = 120

// renderShow is the text of `sessions show`: a summary, a blank line, then
// one line (or a block) per shown event, seq first.
func renderShow(v *sessionpb.SessionView) string {
	type event struct {
		Type string   `json:"type"`
		Seq  *int64   `json:"seq"`
		Data showData `json:"data"`
	}
	evs := make([]event, 0, len(v.GetEvents()))
	called := map[string]bool{}  // the call ids of tool/call events
	names := map[string]string{} // call id → tool name, from calls and tool-call parts
	var title string
	var turns, users, tools, flips, hidden int
	for _, raw := range v.GetEvents() {
		var e event
		_ = json.Unmarshal([]byte(raw), &e) // lenient: what decodes is shown
		evs = append(evs, e)
		switch e.Type {
		case "tool/call":
			called[e.Data.CallID], names[e.Data.CallID] = true, e.Data.Name
			tools++
		case "assistant/message":
			for _, p := range e.Data.parts() {
				if p.Type == "tool-call" && names[p.ID] == "" {
					names[p.ID] = p.Name
				}
			}
		case "session/title":
			title = e.Data.Title
		case "turn/start":
			turns++
		case "user/message":
			users++
		case "plan/mode":
			flips++
		}
	}

	var b strings.Builder
	h := v.GetHeader()
	row := func(k, v string) { fmt.Fprintf(&b, "%-9s %s\n", k, v) }
	row("session", h.GetId())
	if h.Cwd != nil {
		row("cwd", h.GetCwd())
	}
	row("created", msTime(h.GetCreatedAt())+" UTC")
	if h.ParentSession != nil {
		row("parent", h.GetParentSession())
	}
	if title != "" {
		row("title", title)
	}
	if closers := int64(len(v.GetEvents())) - v.GetNextSeq(); closers > 0 {
		row("events", fmt.Sprintf("%d stored + %d closers of the open turn (a Load would store them), revision %s",
			v.GetNextSeq(), closers, v.GetRevision()))
	} else {
		row("events", fmt.Sprintf("%d (next seq %d), revision %s", len(v.GetEvents()), v.GetNextSeq(), v.GetRevision()))
	}
	row("turns", fmt.Sprintf("%d, user messages %d, tool calls %d, plan-mode switches %d", turns, users, tools, flips))
	b.WriteString("\n")

	indent := ""
	line := func(seq *int64, label, text string) {
		s := ""
		if seq != nil {
			s = fmt.Sprint(*seq)
			if *seq >= v.GetNextSeq() {
				text += " (closer, not stored)"
			}
		}
		for i, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if i > 0 {
				s, label = "", ""
			}
			b.WriteString(strings.TrimRight(fmt.Sprintf("%5s  %s%-10s %s", s, indent, label, l), " ") + "\n")
		}
	}
	for _, e := range evs {
		d := &e.Data
		switch e.Type {
		case "turn/start":
			indent = ""
			if d.Turn > 1 {
				b.WriteString("\n")
			}
			line(e.Seq, fmt.Sprintf("turn %d", d.Turn), "")
			indent = "  "
		case "turn/end":
			reason := ""
			if d.Reason != nil {
				reason = d.Reason.Kind
			}
			line(e.Seq, "end", reason)
			indent = ""
		case "user/message":
			text := partsText(d.parts(), "text")
			label := "user"
			if src := d.Source; src != nil && src.Kind != "" && src.Kind != "user" {
				who := src.Kind
				if src.Plugin != "" {
					who += " " + src.Plugin
				}
				text = "[" + who + "] " + oneLine(text, showAbbrev)
			}
			line(e.Seq, label, text)
		case "assistant/message":
			for _, p := range d.parts() {
				switch p.Type {
				case "reasoning":
					line(e.Seq, "thinking", oneLine(p.Text, showAbbrev))
				case "text":
					line(e.Seq, "assistant", p.Text)
				case "tool-call":
					if !called[p.ID] { // else its tool/call line shows it
						line(e.Seq, "tool", p.Name+" "+oneLine(argsText(p.Arguments), showAbbrev)+" (not started)")
					}
				}
			}
		case "tool/call":
			line(e.Seq, "tool", d.Name+" "+oneLine(argsText(d.Arguments), showAbbrev))
		case "tool/result":
			text, isErr := partsText(d.parts(), "text"), d.IsError
			for _, p := range d.parts() { // the closers' shape: tool-result parts
				if p.Type == "tool-result" {
					text += partsText(p.Content, "text")
					isErr = isErr || p.IsError
				}
			}
			label := "result"
			if isErr {
				label = "error"
			}
			id := d.CallID
			if id == "" && d.Message != nil && d.Message.Source != nil {
				id = d.Message.Source.CallID // the closers' shape
			}
			if name := names[id]; name != "" {
				text = name + ": " + text
			} else if id != "" {
				text = id + ": " + text
			}
			line(e.Seq, label, oneLine(text, showAbbrev))
		case "plan/mode":
			state := "off"
			if d.Active != nil && *d.Active {
				state = "on"
			}
			line(e.Seq, "plan mode", state)
		case "command/run":
			line(e.Seq, "command", oneLine("/"+d.Name+" "+strings.TrimSpace(d.Args), showAbbrev))
		case "command/done":
			line(e.Seq, "done", oneLine(d.Kind+": "+d.Text, showAbbrev))
		case "session/title":
			line(e.Seq, "title", d.Title)
		default:
			hidden++
		}
	}
	if hidden > 0 {
		fmt.Fprintf(&b, "\n(%d other events not shown: chunks, steps, requests, settings; 'sessions cat' prints them all)\n", hidden)
	}
	return b.String()
}

// partsText joins the text of the parts of type typ.
func partsText(parts []showPart, typ string) string {
	var out []string
	for _, p := range parts {
		if p.Type == typ {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// argsText is a tool call's arguments: a JSON string's content, or the JSON
// value itself.
func argsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// ---------------------------------------------------------------------------
// cat

func sessionsCat(ctx context.Context, args []string, sio sessionsIO) error {
	fs, sc := sessionsFlagSet("cat", `Usage: sessionstore sessions cat ID [flags]

Prints the session's JSONL exactly as stored (ReadRaw): the header line, then
one line per stored event, packed rows included. Also works for a log that a
read refuses.
`, sio)
	pos, err := sc.parse(fs, args, "exactly one session ID", 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	ctx, c, done, err := sc.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	r, err := c.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil {
		return sc.sessionErr(id, err)
	}
	_, err = sio.out.Write(r.GetContent())
	return err
}

// ---------------------------------------------------------------------------
// tail

// tailRetryPause is the wait before a follow resumes after its stream broke
// (the node lost its leader, say).
const tailRetryPause = time.Second

func sessionsTail(ctx context.Context, args []string, sio sessionsIO) error {
	fs, sc := sessionsFlagSet("tail", `Usage: sessionstore sessions tail ID [-n N] [-f] [flags]

Prints the session's last N events, one JSON line each. With -f it then
follows the session (the Watch rpc) and prints every new event as it is
stored, until interrupted (Ctrl-C) or the session is deleted; a broken
stream is resumed from the next seq. --timeout bounds the first read only.
`, sio)
	n := fs.Int("n", 10, "print the last N events")
	follow := fs.Bool("f", false, "follow: print new events as they are stored")
	pos, err := sc.parse(fs, args, "exactly one session ID", 1, 1)
	if err != nil {
		return err
	}
	if *n < 0 {
		fmt.Fprintln(sio.err, "sessionstore sessions tail: -n must be ≥ 0")
		return errUsage
	}
	id := pos[0]
	c, err := sc.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	rctx, cancel := context.WithTimeout(ctx, sc.timeout)
	next, err := tailLast(rctx, c, id, int64(*n), sio.out)
	cancel()
	if err != nil {
		return sc.sessionErr(id, err)
	}
	if !*follow {
		return nil
	}
	for {
		next, err = tailFollow(ctx, c, id, next, sio.out)
		switch {
		case ctx.Err() != nil:
			return nil // interrupted: the normal end of -f
		case errors.Is(err, sessionstore.ErrNotFound):
			fmt.Fprintln(sio.err, err) // deleted (or re-created) under the watch: the followed log has ended
			return nil
		case retryableWatch(err):
			fmt.Fprintf(sio.err, "watch of %s broke (%v); resuming from seq %d\n", id, err, next)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(tailRetryPause):
			}
		default:
			return sc.sessionErr(id, err)
		}
	}
}

// tailLast prints the last n events of id and returns the seq that follows
// them. Two reads: the first only learns the next seq.
func tailLast(ctx context.Context, c *client.Client, id string, n int64, w io.Writer) (int64, error) {
	head, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: id, FromSeq: sessionstore.MaxSafeInteger})
	if err != nil {
		return 0, err
	}
	from := max(head.GetNextSeq()-n, 0)
	if n == 0 {
		return head.GetNextSeq(), nil
	}
	r, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: id, FromSeq: from})
	if err != nil {
		return 0, err
	}
	for _, e := range r.GetEvents() {
		if _, err := fmt.Fprintln(w, e); err != nil {
			return 0, err
		}
	}
	return r.GetNextSeq(), nil
}

// tailFollow prints the events of id from seq next on as the Watch stream
// brings them, and returns the seq after the last one printed with the error
// that ended the stream.
func tailFollow(ctx context.Context, c *client.Client, id string, next int64, w io.Writer) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recv, err := c.Watch(ctx, &sessionpb.WatchRequest{SessionId: id, FromSeq: next})
	if err != nil {
		return next, err
	}
	for {
		m, err := recv()
		if err != nil {
			return next, err
		}
		for _, e := range m.GetEvents() {
			if _, err := fmt.Fprintln(w, e); err != nil {
				return next, err
			}
			next++
		}
	}
}

// retryableWatch reports whether a broken Watch may resume elsewhere or later:
// the server ended the stream, or it is unavailable or has no leader.
func retryableWatch(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, sessionstore.ErrNoLeader) || errors.Is(err, sessionstore.ErrShuttingDown) {
		return true
	}
	var se *sessionstore.Error
	if errors.As(err, &se) {
		return false
	}
	return status.Code(err) == codes.Unavailable
}

// ---------------------------------------------------------------------------
// rm

func sessionsRm(ctx context.Context, args []string, sio sessionsIO) error {
	fs, sc := sessionsFlagSet("rm", `Usage: sessionstore sessions rm ID [ID...] [--yes] [flags]

Deletes the sessions (the Delete rpc: the log, its lease and its plan-mode
state, on every node). On a terminal it asks first unless --yes; when stdin
is not a terminal, --yes is required. Every ID is tried; the exit status is 1
if any was not deleted.
`, sio)
	yes := fs.Bool("yes", false, "delete without asking")
	ids, err := sc.parse(fs, args, "at least one session ID", 1, -1)
	if err != nil {
		return err
	}
	if !*yes {
		if !sio.tty {
			fmt.Fprintln(sio.err, "sessionstore sessions rm: stdin is not a terminal: pass --yes to delete without confirmation")
			return errUsage
		}
		fmt.Fprintf(sio.err, "delete %d session(s): %s? [y/N] ", len(ids), strings.Join(ids, ", "))
		answer, _ := bufio.NewReader(sio.in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(sio.err, "nothing deleted")
			return nil
		}
	}
	ctx, c, done, err := sc.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	for _, id := range ids {
		rev, err := c.Delete(ctx, &sessionpb.DeleteRequest{SessionId: id})
		if err != nil {
			errs = append(errs, sc.sessionErr(id, err))
			continue
		}
		fmt.Fprintf(sio.out, "deleted %s (revision %s)\n", id, rev)
	}
	return errors.Join(errs...)
}
