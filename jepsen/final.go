package jepsen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/jepsen/history"
	"github.com/sessionstore/sessionstore/storage"
)

// finalState waits for the healed cluster, runs the workload's final writes,
// then reads every session linearizably through the leader and from each
// node's own applied state, with each node's artifact digest. It waits (up
// to a minute) for the nodes to converge before taking their copies; what
// still differs then is reported by the convergence checker.
func (r *run) finalState(ctx context.Context) (history.Final, error) {
	final := history.Final{Logs: map[string][]string{}, Revisions: map[string]string{}, Nodes: map[string]map[string]history.NodeCopy{}}
	if err := r.waitHealthy(ctx, 90*time.Second); err != nil {
		return final, fmt.Errorf("the cluster did not recover after the heal: %w", err)
	}
	r.logf("healed; final writes")
	if err := r.wl.final(ctx, r); err != nil {
		return final, err
	}
	leader := r.leader(ctx)
	if leader == "" {
		return final, fmt.Errorf("no leader for the final reads")
	}
	c := r.conns.patient(leader)
	for _, id := range r.wl.sessions() {
		res, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: id})
		if err != nil {
			continue // never materialised (NOT_FOUND): no log to check
		}
		final.Logs[id] = identities(res.GetEvents())
		final.Revisions[id] = res.GetRevision()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		copies := r.nodeCopies(ctx, final)
		final.Nodes = copies
		if converged(final) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.logf("final reads: %d sessions", len(final.Logs))
	return final, nil
}

func converged(f history.Final) bool {
	for _, copies := range f.Nodes {
		for id, want := range f.Logs {
			c, ok := copies[id]
			if !ok || !slices.Equal(c.Events, want) || c.Revision != f.Revisions[id] {
				return false
			}
		}
	}
	return true
}

func (r *run) nodeCopies(ctx context.Context, final history.Final) map[string]map[string]history.NodeCopy {
	out := map[string]map[string]history.NodeCopy{}
	for _, n := range r.b.Nodes() {
		copies := map[string]history.NodeCopy{}
		c := r.conns.patient(n)
		for id := range final.Logs {
			res, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: id, Consistency: sessionpb.Consistency_STALE})
			if t, reason, _ := Classify(err); t == history.Fail && reason == "NOT_FOUND" {
				copies[id] = history.NodeCopy{} // this node has no such session
				continue
			} else if err != nil {
				continue // not read: the convergence checker says unknown
			}
			nc := history.NodeCopy{Events: identities(res.GetEvents()), Revision: res.GetRevision()}
			nc.ArtifactSHA256, _ = artifactDigest(ctx, r.b.HTTPAddr(n), id)
			copies[id] = nc
		}
		out[string(n)] = copies
	}
	return out
}

// artifactDigest is the SHA-256 of the text of the node's compressed
// artifact of a session (the HTTP download serves the node's own copy). The
// text, not the bytes: where a node's writer cut its zstd frames depends on
// its own timing.
func artifactDigest(ctx context.Context, addr, id string) (string, error) {
	b, err := artifactBytes(ctx, addr, id)
	if err != nil {
		return "", err
	}
	text, err := storage.ArtifactText(b)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(text)
	return hex.EncodeToString(h[:]), nil
}

// artifactBytes downloads the node's compressed artifact of a session.
func artifactBytes(ctx context.Context, addr, id string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/sessions/"+url.PathEscape(id)+"/session.jsonl.zstd", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
