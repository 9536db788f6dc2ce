package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// The code between the README markers is shown verbatim in README.md
// ("Using the Go client"); TestReadmeShowsExample keeps the two equal.

// README:begin

// exampleTurn is one complete turn, seqs from 0 (docs/events.md has a longer
// worked example with a tool call).
var exampleTurn = []string{
	`{"type":"turn/start","seq":0,"time":1767225600010,"data":{"turn":1}}`,
	`{"type":"user/message","seq":1,"time":1767225600011,"data":{"id":"msg-user-1","role":"user","content":[{"type":"text","text":"Answer DONE."}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
	`{"type":"step/start","seq":2,"time":1767225600020,"data":{"turn":1,"step":1}}`,
	`{"type":"assistant/message","seq":3,"time":1767225600900,"data":{"turn":1,"step":1,"message":{"id":"msg-assistant-1","role":"assistant","content":[{"type":"text","text":"DONE"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-v4-flash"}}},"surfaceOp":"append"}`,
	`{"type":"step/end","seq":4,"time":1767225600901,"data":{"turn":1,"step":1}}`,
	`{"type":"turn/end","seq":5,"time":1767225600902,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
}

// outcomeUnknown reports whether a failed write may have been applied: the
// server answered OUTCOME_UNKNOWN, or the call failed without the store's
// ErrorInfo (connection lost, deadline exceeded). Any other error is
// definite: nothing was applied.
func outcomeUnknown(err error) bool {
	var se *sessionstore.Error
	return errors.Is(err, sessionstore.ErrOutcomeUnknown) || !errors.As(err, &se)
}

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The nodes of "A three-node cluster" (a lone node: list just it). The
	// client sends writes to the leader, moves to another node when one
	// fails, and learns the leader from every answer; these addresses win
	// over the ones the nodes hand out. With authentication add
	// DialOptions: grpc.WithPerRPCCredentials(client.BearerToken(token)).
	c, err := client.Open(ctx, client.Config{
		Endpoints: []string{"127.0.0.1:7400", "127.0.0.1:7410", "127.0.0.1:7420"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Register the session; it is listed once it has an event. Writes are
	// checked strictly by default: a header or batch a read would refuse is
	// refused (INVALID_HEADER, INVALID_EVENT, FORMAT_UNSUPPORTED).
	cwd, depth := "/home/dev/project", int32(0)
	_, err = c.Create(ctx, &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{
		Version: 0, Id: "example-1", CreatedAt: 1767225600000, Cwd: &cwd, DelegationDepth: &depth,
	}})
	if err != nil {
		log.Fatal(err)
	}

	// Append the turn. The client already retries NO_LEADER, OUTCOME_UNKNOWN
	// and lost connections with the same bytes, on another node if need be;
	// if the outcome is still unknown when it gives up, resending the
	// identical batch is safe: a batch already stored is answered with
	// Duplicate = true, not stored twice.
	batch := &sessionpb.AppendRequest{SessionId: "example-1", Events: exampleTurn}
	resp, err := c.Append(ctx, batch)
	for tries := 0; err != nil && outcomeUnknown(err) && ctx.Err() == nil && tries < 3; tries++ {
		resp, err = c.Append(ctx, batch)
	}
	switch {
	case errors.Is(err, sessionstore.ErrSeqMismatch):
		log.Fatal("another writer appended first: Load the session and rebase: ", err)
	case err != nil && outcomeUnknown(err):
		log.Fatal("outcome unknown; resend the same batch later: ", err)
	case err != nil:
		log.Fatal("refused, nothing stored: ", err)
	}
	fmt.Println("next seq", resp.NextSeq, "duplicate", resp.Duplicate)

	// Load returns the balanced view (an open turn would be closed and the
	// closers committed); its NextSeq is where the next Append starts.
	view, err := c.Load(ctx, &sessionpb.LoadRequest{SessionId: "example-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(view.Events), "events, revision", view.Revision, "next seq", view.NextSeq)
}

// README:end

// The example's turn is accepted on append and read back as it is: no
// normalisation, nothing refused, nothing to repair.
func TestExampleTurnIsValid(t *testing.T) {
	const id = "example-1"
	events := make([][]byte, len(exampleTurn))
	for i, e := range exampleTurn {
		events[i] = []byte(e)
		if _, err := sessionlog.CheckEvent(id, events[i]); err != nil {
			t.Fatalf("event %d refused on append: %v", i, err)
		}
	}
	check := sessionlog.NewReadCheck(id, sessionstore.Header{ID: id, CreatedAt: 1767225600000}, "")
	check.Add(events)
	if refusal := check.WriteRefusal(); refusal != nil {
		t.Fatalf("a strict append refuses the turn: %v", refusal)
	}
	norm, err := sessionlog.Normalize(id, events, "")
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	for i := range events {
		if !bytes.Equal(norm[i], events[i]) {
			t.Errorf("event %d rewritten by a read: %s", i, norm[i])
		}
	}
	if err := sessionlog.ValidateSession(id, norm); err != nil {
		t.Fatalf("ValidateSession: %v", err)
	}
	if cl, err := sessionlog.Closers(norm); err != nil || cl != nil {
		t.Fatalf("Closers: got %d, %v; want none", len(cl), err)
	}
}

// README.md shows the code between this file's README markers verbatim, in
// the fenced block after "<!-- go-client-example -->".
func TestReadmeShowsExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, ok := strings.Cut(string(src), "// README:begin\n")
	if !ok {
		t.Fatal("example_test.go: no README:begin marker")
	}
	code, _, ok = strings.Cut(code, "// README:end\n")
	if !ok {
		t.Fatal("example_test.go: no README:end marker")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- go-client-example -->\n```go\n")
	if !ok {
		t.Fatal("README.md: no <!-- go-client-example --> followed by a go block")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("README.md: the go client example's block is not closed")
	}
	if strings.TrimSpace(block) != strings.TrimSpace(code) {
		t.Errorf("README.md's Go client example differs from api/client/example_test.go's; copy the code between the README markers into README.md:\n%s", code)
	}
}
