package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// statusCmd is `sessionstore status`: the node's view of the cluster, then the members.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultGRPCAddr, "gRPC address of the node to ask; a host without a port means port 7400")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long (retries of an unreachable node included)")
	conn := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore status [flags]

Prints a running node's view of the cluster (its id and Raft state, the leader
it knows, the cluster id, term, commit and applied indexes), then the members:
the Raft configuration joined with gossip health. Any node answers from its own
view; ask several to compare. With --json, one object
{"node": {...}, "members": [...]} with the proto's field names.
Every flag can also be set as SESSIONSTORE_<FLAG> (e.g. SESSIONSTORE_ADDR);
flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "sessionstore status: --timeout must be > 0")
		return errUsage
	}
	dial, err := conn.dialOptions()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := client.Dial(ctx, *addr, dial...)
	if err != nil {
		return err
	}
	defer c.Close()

	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	members, merr := c.Members(ctx)
	if merr != nil {
		merr = fmt.Errorf("members from %s: %w", *addr, merr)
	}
	if *asJSON {
		if merr != nil {
			return merr
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(statusJSON(st, members))
	}
	if merr != nil {
		// The node's own view is still worth printing.
		_, _ = io.WriteString(stdout, renderStatus(st, nil))
		return merr
	}
	_, err = io.WriteString(stdout, renderStatus(st, members))
	return err
}

// leaveCmd is `sessionstore leave`: the node at --addr leaves the cluster.
func leaveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore leave", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultGRPCAddr, "gRPC address of the node that leaves; a host without a port means port 7400")
	timeout := fs.Duration("timeout", 60*time.Second, "give up waiting after this long")
	conn := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore leave [flags]

Makes the node at --addr leave the cluster: it hands leadership over if it is
the leader, is removed from the Raft configuration and leaves gossip. Run it
before shutting a node down for good; the other nodes go on without it. The
call is sent once and never retried: if its outcome is unknown, check with
'sessionstore status' against another node before trying again.
Every flag can also be set as SESSIONSTORE_<FLAG> (e.g. SESSIONSTORE_ADDR);
flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "sessionstore leave: --timeout must be > 0")
		return errUsage
	}
	dial, err := conn.dialOptions()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := client.Dial(ctx, *addr, dial...)
	if err != nil {
		return err
	}
	defer c.Close()

	// Who is leaving, for the message; an unreachable node fails here,
	// before anything is attempted.
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	who := st.GetNodeId()
	if who == "" {
		who = "the node at " + *addr
	}
	if err := c.Leave(ctx); err != nil {
		if outcomeUnknown(err) {
			fmt.Fprintf(stderr, "sessionstore leave: the outcome is unknown: %s may or may not have left; check with 'sessionstore status --addr <another node>'\n", who)
		}
		return fmt.Errorf("%s did not confirm leaving: %w", who, err)
	}
	if st.GetState() == "Leader" {
		fmt.Fprintf(stdout, "%s left the cluster (it was the leader: leadership was handed over)\n", who)
	} else {
		fmt.Fprintf(stdout, "%s left the cluster\n", who)
	}
	return nil
}

// outcomeUnknown reports whether err leaves open whether a call took effect:
// OUTCOME_UNKNOWN, or an error without the store's reason (a transport
// failure, a deadline, a cancellation).
func outcomeUnknown(err error) bool {
	var se *sessionstore.Error
	if errors.As(err, &se) {
		return se.Reason == sessionstore.ReasonOutcomeUnknown
	}
	return true
}

// renderStatus is the text of `sessionstore status`: the node's view, a blank line,
// then one table row per member sorted by id (members nil: the view only).
func renderStatus(st *sessionpb.StatusResponse, members []*sessionpb.Member) string {
	var b strings.Builder
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	state := dash(st.GetState())
	fmt.Fprintf(&b, "%-10s%s (%s)\n", "node", dash(st.GetNodeId()), state)
	switch {
	case st.GetLeaderId() == "" && st.GetLeaderAddress() == "":
		fmt.Fprintf(&b, "%-10s%s\n", "leader", "none known")
	case st.GetLeaderAddress() == "":
		fmt.Fprintf(&b, "%-10s%s (address unknown)\n", "leader", st.GetLeaderId())
	default:
		fmt.Fprintf(&b, "%-10s%s at %s\n", "leader", dash(st.GetLeaderId()), st.GetLeaderAddress())
	}
	fmt.Fprintf(&b, "%-10s%s   term %d   commit %d   applied %d\n", "cluster", dash(st.GetClusterId()),
		st.GetTerm(), st.GetCommitIndex(), st.GetAppliedIndex())
	if members == nil {
		return b.String()
	}
	b.WriteString("\n")
	if len(members) == 0 {
		b.WriteString("no members: the node is in no cluster configuration yet\n")
		return b.String()
	}
	sorted := slices.Clone(members)
	slices.SortStableFunc(sorted, func(x, y *sessionpb.Member) int { return cmp.Compare(x.GetNodeId(), y.GetNodeId()) })
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSUFFRAGE\tHEALTH\tRAFT\tAPI")
	for _, m := range sorted {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", dash(m.GetNodeId()), dash(m.GetSuffrage()), dash(m.GetHealth()),
			dash(m.GetRaftAddress()), dash(m.GetApiAddress()))
	}
	_ = tw.Flush() // a strings.Builder never fails
	return b.String()
}

// statusJSON is the --json form of `sessionstore status`, with the proto's field names
// (numbers stay JSON numbers).
func statusJSON(st *sessionpb.StatusResponse, members []*sessionpb.Member) any {
	type node struct {
		NodeID        string `json:"node_id"`
		State         string `json:"state"`
		LeaderID      string `json:"leader_id"`
		LeaderAddress string `json:"leader_address"`
		Term          uint64 `json:"term"`
		CommitIndex   uint64 `json:"commit_index"`
		AppliedIndex  uint64 `json:"applied_index"`
		ClusterID     string `json:"cluster_id"`
	}
	type member struct {
		NodeID      string `json:"node_id"`
		RaftAddress string `json:"raft_address"`
		APIAddress  string `json:"api_address"`
		Suffrage    string `json:"suffrage"`
		Health      string `json:"health"`
	}
	out := struct {
		Node    node     `json:"node"`
		Members []member `json:"members"`
	}{Node: node{NodeID: st.GetNodeId(), State: st.GetState(), LeaderID: st.GetLeaderId(), LeaderAddress: st.GetLeaderAddress(),
		Term: st.GetTerm(), CommitIndex: st.GetCommitIndex(), AppliedIndex: st.GetAppliedIndex(), ClusterID: st.GetClusterId()},
		Members: []member{}}
	for _, m := range members {
		out.Members = append(out.Members, member{NodeID: m.GetNodeId(), RaftAddress: m.GetRaftAddress(),
			APIAddress: m.GetApiAddress(), Suffrage: m.GetSuffrage(), Health: m.GetHealth()})
	}
	return out
}
