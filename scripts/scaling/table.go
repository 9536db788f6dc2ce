package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// printTable prints one row per figure and one column per session count.
func printTable(w io.Writer, cfg config, rs []result) {
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "scaling: %s, %s, host %s, load %s", filepath.Base(cfg.nodeBin), time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		host, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(w, "\nfill: one turn of %d events per session in %d Appends, %d writers, ids %s; long session: %d events in Appends of %d\n",
		cfg.events, cfg.appends, cfg.writers, cfg.ids, cfg.longEvents, cfg.longBatch)
	if len(cfg.nodeFlags) > 0 {
		fmt.Fprintf(w, "serve flags: %q\n", cfg.nodeFlags)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(r result) string) {
		fmt.Fprint(tw, name+"\t")
		for _, r := range rs {
			fmt.Fprint(tw, f(r)+"\t")
		}
		fmt.Fprintln(tw)
	}
	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
	ratio := func(a, b int64) string { return fmt.Sprintf("%.2f", float64(a)/float64(max(b, 1))) }
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	row("sessions", func(r result) string { return fmt.Sprint(r.sessions) })
	row("state format", func(r result) string { return fmt.Sprint(r.layout) })
	row("events stored (fill)", func(r result) string { return fmt.Sprint(r.events) })
	row("event text (JSONL)", func(r result) string { return mb(r.eventBytes) })
	row("mean event bytes", func(r result) string { return fmt.Sprintf("%.0f", float64(r.eventBytes)/float64(max(r.events, 1))) })
	row("fill time, errors", func(r result) string { return fmt.Sprintf("%s, %d", sec(r.fillDur), r.fillErrors) })
	row("fill server CPU/event", func(r result) string { return fmt.Sprintf("%.0f µs", r.fillCPU) })
	row("after fill (no snapshot yet):", func(result) string { return "" })
	row("  state.db (du)", func(r result) string { return mb(r.afterFill.stateDB) })
	row("  state.db / event text", func(r result) string { return ratio(r.afterFill.stateDB, r.eventBytes) })
	row("  state.db free pages", func(r result) string { return free(r.afterFill.stateFree) })
	row("  raft/ (log)", func(r result) string { return mb(r.afterFill.raft) })
	row("  artifacts/ (du)", func(r result) string { return mb(r.afterFill.artifacts) })
	row("  artifacts/ (file bytes)", func(r result) string { return mb(r.afterFill.artifactsApparent) })
	row("  data dir (du)", func(r result) string { return mb(r.afterFill.total) })
	row("  data dir / event text", func(r result) string { return ratio(r.afterFill.total, r.eventBytes) })
	row("  data dir file bytes / event text", func(r result) string { return ratio(r.afterFill.totalApparent, r.eventBytes) })
	row("  RSS (anon + file)", func(r result) string { return mem(r.rss) })
	row("restart:", func(result) string { return "" })
	row("  SIGTERM to exit", func(r result) string { return sec(r.stopDur) })
	row("  start to ready + read", func(r result) string { return sec(r.restartDur) })
	row("  RSS when ready (anon + file)", func(r result) string { return mem(r.rssRestart) })
	row(fmt.Sprintf("append cost, 1 session to %d events:", cfg.longEvents), func(result) string { return "" })
	row("  first window: ms/Append", func(r result) string { return ms(r.long.first.latency) })
	row("  last window: ms/Append", func(r result) string { return ms(r.long.last.latency) })
	row("  first window: CPU µs/event", func(r result) string { return fmt.Sprintf("%.1f", r.long.first.cpu) })
	row("  last window: CPU µs/event", func(r result) string { return fmt.Sprintf("%.1f", r.long.last.cpu) })
	row("  first 10 windows: ms/Append", func(r result) string { return ms(r.long.first10.latency) })
	row("  last 10 windows: ms/Append", func(r result) string { return ms(r.long.last10.latency) })
	row("  first 10 windows: CPU µs/event", func(r result) string { return fmt.Sprintf("%.1f", r.long.first10.cpu) })
	row("  last 10 windows: CPU µs/event", func(r result) string { return fmt.Sprintf("%.1f", r.long.last10.cpu) })
	row("snapshot (fill + long session; then trailing log 1024 entries):", func(result) string { return "" })
	row("  snapshot persisted dur", func(r result) string { return sec(r.snap.dur) })
	row("  snapshot bytes (zstd)", func(r result) string { return mb(r.snap.bytes) })
	row("  data dir after (du)", func(r result) string { return mb(r.afterSnap.total) })
	row("  state.db after (du)", func(r result) string { return mb(r.afterSnap.stateDB) })
	row("  state.db free pages after", func(r result) string { return free(r.afterSnap.stateFree) })
	row("  raft/ after (log, snapshot)", func(r result) string { return mb(r.afterSnap.raft) })
	row("  artifacts/ after (du)", func(r result) string { return mb(r.afterSnap.artifacts) })
	row("  data dir / event text", func(r result) string { return ratio(r.afterSnap.total, r.eventBytes+r.longBytes()) })
	row("  data dir file bytes / event text", func(r result) string { return ratio(r.afterSnap.totalApparent, r.eventBytes+r.longBytes()) })
	row("  restart: start to ready + read", func(r result) string { return sec(r.restartDur2) })
	row("catch-up of an empty joining node:", func(result) string { return "" })
	row("  to leader's applied index", func(r result) string { return sec(r.catchApplied) })
	row("  snapshot restore dur", func(r result) string {
		if r.catchRestore == 0 {
			return "(log)"
		}
		return sec(r.catchRestore)
	})
	row("  to artifacts written", func(r result) string {
		if r.catchArtifact == 0 {
			return "(artifacts off)"
		}
		return sec(r.catchArtifact)
	})
	row("  artifact files joiner/leader", func(r result) string { return fmt.Sprintf("%d/%d", r.joinFiles, r.leaderFiles) })
	row("  joiner data dir (du)", func(r result) string { return mb(r.joinSizes.total) })
	row("  joiner RSS (anon + file)", func(r result) string { return mem(r.joinRSS) })
	tw.Flush()
}

func mem(m memory) string {
	return fmt.Sprintf("%.0f MB (%.0f + %.0f)", float64(m.rss)/1e6, float64(m.anon)/1e6, float64(m.file)/1e6)
}

func free(b int64) string {
	if b < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f MB", float64(b)/1e6)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
