package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// healthzOn sends GET /healthz on a keep-alive connection and reads the
// whole answer.
func healthzOn(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("healthz: %d %q (close %v), want a kept-alive 200", resp.StatusCode, body, resp.Close)
	}
}

func dialKeepAlive(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// An unauthenticated keep-alive connection that stays idle is closed by the
// node (it was held forever), and connections beyond --http-max-conns wait
// while gRPC keeps serving.
func TestHTTPIdleConnectionsAndCap(t *testing.T) {
	t.Run("idle connection closed", func(t *testing.T) {
		n := startTestNodeWith(t, "", func(c *serveConfig) { c.HTTP.IdleTimeout = 200 * time.Millisecond })
		n.waitReady(true)
		c, br := dialKeepAlive(t, n.srv.httpAddr)
		healthzOn(t, c, br)
		// Far longer than the idle timeout: the node must close first.
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := br.ReadByte()
		if !errors.Is(err, io.EOF) {
			t.Fatalf("idle keep-alive connection: read gave %v, want EOF (closed by the node)", err)
		}
	})
	t.Run("connection cap", func(t *testing.T) {
		n := startTestNodeWith(t, "", func(c *serveConfig) { c.HTTP.MaxConns = 2 })
		n.waitReady(true)
		var held []net.Conn
		for range 2 {
			c, br := dialKeepAlive(t, n.srv.httpAddr)
			healthzOn(t, c, br)
			held = append(held, c)
		}
		third, br := dialKeepAlive(t, n.srv.httpAddr) // the kernel completes it; the node does not accept it yet
		if _, err := io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := br.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection beyond the cap was served (read: %v)", err)
		}
		// gRPC has its own listener and file descriptors.
		if _, err := n.Client.List(n.ctx(), &sessionpb.ListRequest{}); err != nil {
			t.Fatalf("gRPC while the HTTP cap is reached: %v", err)
		}
		held[0].Close()
		third.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the waiting connection was not served after a slot freed: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("waiting connection: %d", resp.StatusCode)
		}
	})
}

// A client that stops reading a large response loses its connection after
// one write's deadline, while the handler is not stuck forever; there is no
// global write timeout (a slow but moving download is not cut).
func TestHTTPWriteDeadlinePerWrite(t *testing.T) {
	writeErr := make(chan error, 1)
	moving := make(chan error, 1)
	h := http.NewServeMux()
	h.HandleFunc("/stuck", func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 1<<20)
		for {
			if _, err := w.Write(buf); err != nil {
				writeErr <- err
				return
			}
		}
	})
	h.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// Ten writes spread over longer than the per-write deadline.
		for range 10 {
			if _, err := io.WriteString(w, strings.Repeat("x", 100)+"\n"); err != nil {
				moving <- err
				return
			}
			http.NewResponseController(w).Flush()
			time.Sleep(60 * time.Millisecond)
		}
		moving <- nil
	})
	cfg := defaultHTTPConfig()
	cfg.WriteTimeout = 200 * time.Millisecond
	srv := newHTTPServer(cfg, h, nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(limitConns(ln, cfg.MaxConns))
	defer srv.Close()

	c, _ := dialKeepAlive(t, ln.Addr().String())
	io.WriteString(c, "GET /stuck HTTP/1.1\r\nHost: node\r\n\r\n") // and never read
	select {
	case err := <-writeErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Logf("stuck write ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write to a client that does not read never ended")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/slow", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(body) != 10*101 {
		t.Fatalf("slow download: %d bytes, %v; want all 1010", len(body), err)
	}
	if err := <-moving; err != nil {
		t.Fatalf("slow download cut: %v", err)
	}
}
