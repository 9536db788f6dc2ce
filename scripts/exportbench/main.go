// Command exportbench measures `sessionstore export` at two sizes on this machine:
// it starts a fresh node, fills it with sessions of 50 events each, then runs
// the export as a separate process under /usr/bin/time and reports wall time,
// peak resident memory and output size. Memory is flat when the larger export
// peaks no higher than the smaller one (within noise).
//
//	go run ./scripts/exportbench --sizes 1000,10000 --events 50
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

func main() {
	sizes := flag.String("sizes", "1000,10000", "comma-separated session counts; each is exported after the store holds that many")
	events := flag.Int("events", 50, "events per session")
	eventBytes := flag.Int("event-bytes", 200, "approximate bytes per event")
	writers := flag.Int("writers", 32, "concurrent writers while filling")
	flag.Parse()
	if err := run(*sizes, *events, *eventBytes, *writers); err != nil {
		fmt.Fprintln(os.Stderr, "exportbench:", err)
		os.Exit(1)
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func run(sizesFlag string, events, eventBytes, writers int) error {
	work, err := os.MkdirTemp("", "exportbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "sessionstore")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/node").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	node := exec.Command(bin, "serve", "--data-dir", filepath.Join(work, "data"), "--grpc-addr", grpcAddr,
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", freePort()), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort()),
		"--gossip-addr", fmt.Sprintf("127.0.0.1:%d", freePort()))
	var nodeLog bytes.Buffer
	node.Stdout, node.Stderr = &nodeLog, &nodeLog
	if err := node.Start(); err != nil {
		return err
	}
	defer func() { _ = node.Process.Kill(); _ = node.Wait() }()
	ctx := context.Background()
	c, err := client.Dial(ctx, grpcAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 0; ; i++ {
		if _, err := c.Status(ctx); err == nil {
			break
		}
		if i == 100 {
			return fmt.Errorf("node did not start:\n%s", nodeLog.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("| sessions | events | export text MiB | .tar.zst MiB | wall s | sessions/s | peak RSS MiB |\n|---|---|---|---|---|---|---|\n")
	filled := 0
	for _, s := range strings.Split(sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		if err := fill(ctx, c, filled, n, events, eventBytes, writers); err != nil {
			return err
		}
		filled = n
		out := filepath.Join(work, fmt.Sprintf("export-%d.tar.zst", n))
		cmd := exec.Command("/usr/bin/time", "-v", bin, "export", "--addr", grpcAddr, "--out", out)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("export of %d sessions: %v\n%s", n, err, stderr.String())
		}
		wall := time.Since(start)
		rss := regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`).FindStringSubmatch(stderr.String())
		if rss == nil {
			return fmt.Errorf("no peak RSS in /usr/bin/time output:\n%s", stderr.String())
		}
		kb, _ := strconv.Atoi(rss[1])
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		text := float64(n) * float64(events) * float64(eventBytes+60) / (1 << 20)
		fmt.Printf("| %d | %d | ~%.0f | %.1f | %.1f | %.0f | %.0f |\n", n, n*events, text,
			float64(st.Size())/(1<<20), wall.Seconds(), float64(n)/wall.Seconds(), float64(kb)/1024)
		_ = os.Remove(out)
	}
	return nil
}

// fill creates sessions [from, to) with one Append of `events` events each.
func fill(ctx context.Context, c *client.Client, from, to, events, eventBytes, writers int) error {
	var next atomic.Int64
	next.Store(int64(from))
	pad := strings.Repeat("x", eventBytes)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				id := fmt.Sprintf("bench-%06d", i)
				cwd := fmt.Sprintf("/work/project-%d", i%20)
				_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Id: id, CreatedAt: 1, Cwd: &cwd}})
				if err == nil {
					evs := make([]string, events)
					for k := range evs {
						evs[k] = fmt.Sprintf(`{"type":"bench/event","seq":%d,"time":%d,"data":{"id":"%s-%d","pad":"%s"},"ignorable":true}`, k, 1_700_000_000_000+k, id, k, pad)
					}
					_, err = c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: evs})
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("fill %s: %w", id, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
