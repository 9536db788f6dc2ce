package planmode

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// The /plan command (docs/planmode.md#plan-handler).
const (
	CommandName        = "plan"
	CommandDescription = "Enter or leave plan mode"
	CommandHint        = "[off|message]"

	TextPlanOn          = "Plan mode on. Use /plan off to leave."
	TextEntering        = "Entering plan mode (applies from the next step). Use /plan off to leave."
	TextPlanOff         = "Plan mode off."
	TextLeaving         = "Leaving plan mode (applies from the next step)."
	TextEntryCancelled  = "Plan mode entry cancelled."
	TextAlreadyInactive = "Plan mode is already inactive."
	TextOffWithImages   = "Image attachments cannot accompany /plan off."

	KindSuccess = "success"
	KindError   = "error"
)

// ParseCommandLine is the commands registry's parser (docs/planmode.md#command-line): a line is a
// command iff it matches ^/([a-z][a-z0-9_-]*) followed by the end or one of
// space, tab, CR, LF; rawInput is everything after the name, unchanged.
func ParseCommandLine(line string) (name, rawInput string, ok bool) {
	if len(line) < 2 || line[0] != '/' || line[1] < 'a' || line[1] > 'z' {
		return "", "", false
	}
	i := 2
	for i < len(line) {
		c := line[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' {
			i++
			continue
		}
		break
	}
	if i < len(line) {
		switch line[i] {
		case ' ', '\t', '\r', '\n':
		default:
			return "", "", false
		}
	}
	return line[1:i], line[i:], true
}

// CheckRawInput refuses a raw_input that would not make "/plan" + rawInput a
// /plan command line under ParseCommandLine's rule: after the name comes the
// end or a space, tab, CR or LF. "off" would be the line "/planoff", another
// (unknown) command for the reference, which logs nothing for it; a NBSP or a
// form feed is not a separator either.
func CheckRawInput(rawInput string) error {
	if name, _, ok := ParseCommandLine("/" + CommandName + rawInput); ok && name == CommandName {
		return nil
	}
	return sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
		"raw_input %s is not what follows /plan on a command line: it must be empty or start with a space, tab, CR or LF (e.g. \" off\")",
		strconv.Quote(truncateForError(rawInput)))
}

// truncateForError keeps an error text short when it quotes caller input.
func truncateForError(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// CommandInput is one /plan execution.
type CommandInput struct {
	// CommandID is the id the server minted for command/run and command/done.
	CommandID string
	// RawInput is everything after "/plan" (separator whitespace included),
	// recorded verbatim as command/run args.
	RawInput string
	// Images are admitted image content blocks (JSON text each), in order.
	Images [][]byte
	// ImageCount stands for Images where the blocks themselves are not at
	// hand (the FSM decides without them; the caller renders the steer
	// content with SteerContent). The larger of len(Images) and ImageCount
	// counts.
	ImageCount int
	// Deferred is passed to Set (see SetOptions).
	Deferred bool
}

// CommandResult is the settled command.
type CommandResult struct {
	Kind string // KindSuccess or KindError
	Text string
	// Outcome is Set's outcome; 0 when set did not run (the images error).
	Outcome Outcome
	// Steers: the command steers the agent with a user message (source
	// {kind:"user"}) whose content is SteerContent(images, SteerText).
	// SteerText is nil when the message is empty (images only).
	Steers    bool
	SteerText *string
	// Steer is that content (JSON text), when the image blocks were given.
	Steer []byte
	// Appended: command/run, [plan/mode on an idle commit], command/done.
	Appended [][]byte
	State    State
}

// SteerContent is the content array of the steering user message: the image
// blocks in order, then {"type":"text","text":message} when there is one.
func SteerContent(images [][]byte, message *string) []byte {
	b := []byte{'['}
	for i, img := range images {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, img...)
	}
	if message != nil {
		if len(images) > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = sessionlog.AppendJSString(b, *message)
		b = append(b, '}')
	}
	return append(b, ']')
}

// Command is the /plan [off|message] handler of docs/planmode.md#plan-handler wrapped in the
// command/run … command/done pair of docs/planmode.md#command-line, numbered from `at`.
func Command(events [][]byte, st State, in CommandInput, at Stamp) (CommandResult, error) {
	for _, img := range in.Images {
		if !json.Valid(img) {
			return CommandResult{}, sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "image block is not JSON")
		}
	}
	s, err := Summarize(events)
	if err != nil {
		return CommandResult{}, err
	}
	return s.Command(st, in, at), nil
}

// Command is Command over a log's Summary (the image blocks are not checked).
func (s Summary) Command(st State, in CommandInput, at Stamp) CommandResult {
	images := len(in.Images)
	if in.ImageCount > images {
		images = in.ImageCount
	}
	res := CommandResult{State: st}
	res.Appended = append(res.Appended, CommandRunEvent(in.CommandID, CommandName, in.RawInput, at.Seq, at.Time))
	next := Stamp{Seq: at.Seq + 1, Time: at.Time}
	message := jsTrim(in.RawInput)

	switch {
	case message == "off" && images > 0:
		res.Kind, res.Text = KindError, TextOffWithImages
	case message == "off":
		sr := s.Set(st, false, next, SetOptions{Deferred: in.Deferred})
		res.Outcome, res.State = sr.Outcome, sr.State
		res.Appended = append(res.Appended, sr.Appended...)
		res.Kind = KindSuccess
		switch sr.Outcome {
		case Committed:
			res.Text = TextPlanOff
		case Queued:
			res.Text = TextLeaving
		case Cancelled:
			res.Text = TextEntryCancelled
		default:
			if s.Fold {
				res.Text = TextLeaving
			} else {
				res.Text = TextAlreadyInactive
			}
		}
	default:
		sr := s.Set(st, true, next, SetOptions{Deferred: in.Deferred})
		res.Outcome, res.State = sr.Outcome, sr.State
		res.Appended = append(res.Appended, sr.Appended...)
		res.Kind = KindSuccess
		if sr.Outcome == Committed {
			res.Text = TextPlanOn
		} else {
			res.Text = TextEntering
		}
		if message != "" {
			m := message
			res.SteerText = &m
		}
		if message != "" || images > 0 {
			res.Steers = true
			if len(in.Images) == images {
				res.Steer = SteerContent(in.Images, res.SteerText)
			}
		}
	}
	done := at.Seq + int64(len(res.Appended))
	res.Appended = append(res.Appended, CommandDoneEvent(in.CommandID, res.Kind, res.Text, done, at.Time))
	return res
}
