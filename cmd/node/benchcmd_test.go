package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

func TestBenchParseWriters(t *testing.T) {
	for in, want := range map[string][]int{
		"1,16,64":    {1, 16, 64},
		"8":          {8},
		" 2 , 4 ":    {2, 4},
		"64,1,64":    {64, 1, 64},
		"1000,1,256": {1000, 1, 256},
	} {
		got, err := parseWriters(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseWriters(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "0", "-1", "a", "1,,2", "1,", "1;2", "1.5", "16,x"} {
		got, err := parseWriters(in)
		if !errors.Is(err, errUsage) {
			t.Errorf("parseWriters(%q) = %v, %v; want errUsage", in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--writers") {
			t.Errorf("parseWriters(%q) error %q does not name the flag", in, err)
		}
	}
}

func TestBenchSummarize(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var lat []time.Duration
	for i := 1000; i >= 1; i-- { // 1..1000 ms, unsorted
		lat = append(lat, ms(i))
	}
	st := summarize(lat, 2*time.Second, map[string]int{"NO_LEADER": 2, "Unavailable": 1})
	if st.Ops != 1000 || st.OpsPerSec != 500 || st.Errors != 3 {
		t.Errorf("ops %d, ops/s %v, errors %d; want 1000, 500, 3", st.Ops, st.OpsPerSec, st.Errors)
	}
	if st.P50 != 500 || st.P99 != 990 || st.P999 != 999 || st.Max != 1000 {
		t.Errorf("p50 %v p99 %v p99.9 %v max %v; want 500 990 999 1000", st.P50, st.P99, st.P999, st.Max)
	}
	if !slices.IsSorted(lat) {
		t.Error("summarize did not sort the latencies")
	}
	if got := summarize(nil, 0, nil); got.Ops != 0 || got.OpsPerSec != 0 || got.P99 != 0 {
		t.Errorf("empty summary = %+v", got)
	}
}

func TestBenchParseAddrs(t *testing.T) {
	for in, want := range map[string][]string{
		"127.0.0.1:7400":   {"127.0.0.1:7400"},
		" 127.0.0.1:7400 ": {"127.0.0.1:7400"},
		"127.0.0.1:7400,127.0.0.1:7410,127.0.0.1:7420":   {"127.0.0.1:7400", "127.0.0.1:7410", "127.0.0.1:7420"},
		"127.0.0.1:7400, 127.0.0.1:7410 ,127.0.0.1:7420": {"127.0.0.1:7400", "127.0.0.1:7410", "127.0.0.1:7420"},
		"127.0.0.1:7420,127.0.0.1:7400":                  {"127.0.0.1:7420", "127.0.0.1:7400"}, // order kept: the first is the set-up address
		"dns:///node1:7400,[::1]:7400":                   {"dns:///node1:7400", "[::1]:7400"},
	} {
		got, err := parseAddrs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseAddrs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", ",", "127.0.0.1:7400,", ",127.0.0.1:7400", "a,,b", "a, ,b", "a,b,a", "a, a"} {
		got, err := parseAddrs(in)
		if !errors.Is(err, errUsage) {
			t.Errorf("parseAddrs(%q) = %v, %v; want errUsage", in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--addr") {
			t.Errorf("parseAddrs(%q) error %q does not name the flag", in, err)
		}
	}
	// Writer i uses address i mod n.
	b := &bencher{clients: []*client.Client{new(client.Client), new(client.Client), new(client.Client)}}
	for i, want := range []int{0, 1, 2, 0, 1, 2, 0, 1} {
		if b.writerClient(i) != b.clients[want] {
			t.Errorf("writer %d does not use address %d", i, want)
		}
	}
	b.clients = b.clients[:1]
	for i := range 5 {
		if b.writerClient(i) != b.clients[0] {
			t.Errorf("single address: writer %d does not use it", i)
		}
	}
}

// bench deletes the sessions it created unless --keep, and says so.
func TestBenchDeletesItsSessions(t *testing.T) {
	n := startTestNode(t, "")
	listed := func(prefix string) []string {
		var ids []string
		r, err := n.Client.ListSnapshots(n.ctx(), &sessionpb.ListSnapshotsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.GetSnapshots() {
			if strings.HasPrefix(s.GetHeader().GetId(), prefix+"-") {
				ids = append(ids, s.GetHeader().GetId())
			}
		}
		return ids
	}
	for _, c := range []struct {
		prefix string
		keep   bool
	}{{"gone", false}, {"kept", true}} {
		var out, errb bytes.Buffer
		args := []string{"--addr", n.srv.grpcAddr, "--writers", "2", "--duration", "200ms", "--warmup", "0s",
			"--fsync-duration", "0s", "--keepalive=false", "--session-prefix", c.prefix}
		if c.keep {
			args = append(args, "--keep")
		}
		if err := benchMain(context.Background(), args, &out, &errb); err != nil {
			t.Fatalf("bench %v: %v\n%s", args, err, errb.String())
		}
		ids := listed(c.prefix)
		said := regexp.MustCompile(`(?m)^deleted (\d+) bench sessions \(--keep keeps them\)$`).FindStringSubmatch(out.String())
		switch {
		case c.keep && (said != nil || len(ids) < 3):
			t.Errorf("--keep: output %q, %d sessions listed; want no deletion, the set-up and both writers' sessions kept", out.String(), len(ids))
		case !c.keep && (said == nil || said[1] == "0" || len(ids) != 0):
			t.Errorf("output %q, sessions left %v; want them deleted and counted", out.String(), ids)
		}
	}
}

// --client http runs the append levels and KeepAlive over the HTTP port
// (Connect, JSON) with the token, and cleans up as over gRPC.
func TestBenchOverHTTP(t *testing.T) {
	n, _ := auNode(t, nil)
	var out, errb bytes.Buffer
	args := []string{"--client", "http", "--addr", n.srv.httpAddr, "--token", auAdmin, "--writers", "2", "--duration", "300ms",
		"--warmup", "0s", "--fsync-duration", "0s", "--json", "--session-prefix", "over-http"}
	if err := benchMain(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, errb.String())
	}
	var got struct {
		Client string       `json:"client"`
		Levels []benchStats `json:"levels"`
		Keep   *benchStats  `json:"keepalive"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if got.Client != "http" || len(got.Levels) != 1 || got.Levels[0].Ops == 0 || got.Levels[0].Errors != 0 ||
		got.Keep == nil || got.Keep.Ops == 0 || got.Keep.Errors != 0 {
		t.Fatalf("bench over HTTP: %s", out.String())
	}
	if !strings.Contains(errb.String(), "deleted ") {
		t.Errorf("no clean-up reported: %s", errb.String())
	}
	r, err := auAs(t, n, auAdmin).List(n.ctx(), &sessionpb.ListRequest{})
	if err != nil || len(r.Headers) != 0 {
		t.Fatalf("sessions left: %v %v", r, err)
	}
	// Without the token the node refuses, and bench says why.
	out.Reset()
	errb.Reset()
	err = benchMain(context.Background(), []string{"--client", "http", "--addr", n.srv.httpAddr, "--writers", "1",
		"--duration", "100ms", "--fsync-duration", "0s"}, &out, &errb)
	if !errors.Is(err, sessionstore.ErrUnauthenticated) {
		t.Fatalf("bench over HTTP without a token: %v", err)
	}
	for _, bad := range [][]string{{"--client", "grpcweb"}, {"--client", "http", "--replay", "testdata"}} {
		if err := benchMain(context.Background(), bad, &out, &errb); !errors.Is(err, errUsage) {
			t.Errorf("bench %v: %v, want a usage error", bad, err)
		}
	}
}
