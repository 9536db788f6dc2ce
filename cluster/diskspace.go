package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/internal/units"
)

// Disk-full protection (issue 8). The Raft log, the state database, the
// snapshots and the artifacts share the data directory's filesystem. When that
// filesystem really fills, the node fails hard: the FSM panics when bbolt
// cannot commit (docs/design.md "State machine": replicas must not diverge), hashicorp/raft
// panics when it cannot save a new term, a leader whose log write fails steps
// down. So the node refuses writes well before that: once the space available
// on the data directory's filesystem drops below Config.MinFreeBytes, commands
// that grow the store are refused before they are enqueued (a definite
// RESOURCE_EXHAUSTED / QUOTA_EXCEEDED), /readyz fails with the reason and
// sessionstore_disk_low is 1. Reads keep working. What can still grow the disk
// is small: KeepAlive/Release entries, the cluster id, configuration changes,
// and snapshots (which let the log be truncated).

const (
	// diskPollInterval is how often the monitor samples the filesystem.
	diskPollInterval = time.Second
	// diskRecheckAfter bounds how stale the sample a write is judged by may
	// be: between two polls a fast writer could otherwise use up the margin.
	// statfs is cheap; this only keeps it off the path of every single write.
	diskRecheckAfter = 100 * time.Millisecond
)

// diskMonitor samples the free space of the data directory's filesystem.
type diskMonitor struct {
	dir      string
	minFree  int64 // 0: disabled
	logger   *slog.Logger
	free     prometheus.Gauge
	lowGauge prometheus.Gauge

	mu      sync.Mutex
	sampled time.Time
	avail   int64 // bytes available to the node (statfs f_bavail × f_bsize)
	low     bool
	err     error // last statfs failure (nil: the sample is current)
	// onChange, when set, runs after every transition (gossip publishes the
	// current verdict; each call reads it, so late calls cannot undo news).
	onChange func()
}

func newDiskMonitor(dir string, minFree int64, logger *slog.Logger, reg prometheus.Registerer) *diskMonitor {
	d := &diskMonitor{dir: dir, minFree: minFree, logger: logger,
		free: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessionstore_disk_free_bytes",
			Help: "Bytes available on the filesystem of the data directory (statfs f_bavail), sampled every second."}),
		lowGauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessionstore_disk_low",
			Help: "1 while the free space of the data directory is below --min-free-bytes: /readyz fails and the leader refuses growth writes for the whole cluster (RESOURCE_EXHAUSTED / QUOTA_EXCEEDED)."}),
	}
	if reg != nil {
		reg.MustRegister(d.free, d.lowGauge)
	}
	d.sample()
	return d
}

// run samples every diskPollInterval until ctx ends.
func (d *diskMonitor) run(ctx context.Context) {
	t := time.NewTicker(diskPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.sample()
		}
	}
}

// sample reads the filesystem now and updates the state, the gauges and the
// log (once per transition).
func (d *diskMonitor) sample() {
	var st unix.Statfs_t
	err := unix.Statfs(d.dir, &st)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sampled = time.Now()
	if err != nil {
		// Keep the last verdict: a failing statfs says nothing about space.
		if d.err == nil {
			d.logger.Warn("cannot read the free space of the data directory; keeping the last verdict", "dir", d.dir, "err", err)
		}
		d.err = err
		return
	}
	d.err = nil
	d.avail = int64(st.Bavail) * int64(st.Bsize)
	low := d.minFree > 0 && d.avail < d.minFree
	if low != d.low {
		if low {
			d.logger.Error("disk nearly full: refusing writes until space is freed", "dir", d.dir,
				"free_bytes", d.avail, "min_free_bytes", d.minFree)
		} else {
			d.logger.Info("disk space recovered: accepting writes again", "dir", d.dir,
				"free_bytes", d.avail, "min_free_bytes", d.minFree)
		}
	}
	if low != d.low && d.onChange != nil {
		go d.onChange() // gossip may block; never under d.mu
	}
	d.low = low
	d.free.Set(float64(d.avail))
	if low {
		d.lowGauge.Set(1)
	} else {
		d.lowGauge.Set(0)
	}
}

// check returns the reason writes are refused ("" when they are not),
// resampling first when the last sample is older than maxAge.
func (d *diskMonitor) check(maxAge time.Duration) string {
	if d.minFree <= 0 {
		return ""
	}
	d.mu.Lock()
	stale := time.Since(d.sampled) > maxAge
	d.mu.Unlock()
	if stale {
		d.sample()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.low {
		return ""
	}
	return fmt.Sprintf("%s free on %s, below --min-free-bytes %s", units.Bytes(d.avail), d.dir, units.Bytes(d.minFree))
}

// DiskOK reports whether the data directory's filesystem has at least
// Config.MinFreeBytes available. Otherwise it returns a QUOTA_EXCEEDED error
// (RESOURCE_EXHAUSTED on the wire) saying how much is free and the threshold.
// The sample is at most diskRecheckAfter old.
func (ss *Sessions) DiskOK() error {
	if why := ss.disk.check(diskRecheckAfter); why != "" {
		return sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
			"disk nearly full: %s; writes are refused until space is freed (the command was not applied)", why)
	}
	// Every voter appends what the leader commits: one whose disk is low
	// (as it gossips) would fill up, so the whole cluster refuses.
	if v := ss.members.voterView(); v != nil && v.diskLow != "" {
		return sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
			"disk nearly full on voter %s (below its --min-free-bytes); writes are refused until space is freed there (the command was not applied)", v.diskLow)
	}
	return nil
}

// freeBytes returns the bytes available as last sampled, false when the last
// statfs failed (the space is not known now).
func (d *diskMonitor) freeBytes() (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.avail, d.err == nil
}

// isLow reports the last verdict.
func (d *diskMonitor) isLow() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.low
}

// growsStore reports whether cmd adds data to the store, and so is refused
// while the disk is nearly full. KeepAlive and Release are tiny and keep
// owners in possession of their sessions (refusing them would let leases lapse
// and fence agents that did nothing wrong); SetClusterId is written once.
// Commands that remove data (and any command not listed) are allowed: they
// are how an operator frees space.
func growsStore(cmd *fsmpb.Command) bool {
	switch cmd.GetCmd().(type) {
	case *fsmpb.Command_Create, *fsmpb.Command_Append, *fsmpb.Command_Repair,
		*fsmpb.Command_PlanSet, *fsmpb.Command_PlanPreStep, *fsmpb.Command_PlanCommand, *fsmpb.Command_PlanExit:
		return true
	}
	return false
}
