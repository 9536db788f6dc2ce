package main

import (
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/sessionlog"
)

func TestMetricValue(t *testing.T) {
	const text = `# HELP sessionstore_artifact_bytes Total size.
# TYPE sessionstore_artifact_bytes gauge
sessionstore_artifact_bytes_total 7
sessionstore_artifact_bytes 1.2345e+06
sessionstore_bbolt_file_bytes{db="raft"} 32768
sessionstore_bbolt_file_bytes{db="state"} 65536
`
	for _, tc := range []struct {
		name string
		want float64
		ok   bool
	}{
		{"sessionstore_artifact_bytes", 1234500, true}, // not the _total line above it
		{"sessionstore_bbolt_file_bytes", 32768, true}, // first sample, labels ignored
		{`sessionstore_bbolt_file_bytes{db="state"}`, 65536, true},
		{"sessionstore_artifact", 0, false},
		{"sessionstore_missing", 0, false},
	} {
		got, ok := metricValue(text, tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("metricValue(%s) = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFindSnapshotLine(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      snapshotLine
		ok, err   bool
	}{
		{name: "found", ok: true, want: snapshotLine{bytes: 1234, dur: 1500 * time.Millisecond},
			log: "2026-12-01T22:45:32Z [INFO]  raft: starting snapshot up to: index=9\n" +
				`time=2026-12-01T22:45:33Z level=INFO msg="snapshot persisted" component=fsm node_id=n1 bytes=1234 dur=1.5s` + "\n" +
				`time=2026-12-01T22:45:34Z level=INFO msg="snapshot persisted" component=fsm node_id=n1 bytes=99 dur=1ms` + "\n"},
		{name: "microseconds", ok: true, want: snapshotLine{bytes: 5, dur: 226112 * time.Nanosecond},
			log: `time=x level=INFO msg="snapshot persisted" bytes=5 dur=226.112µs`},
		{name: "another message naming it", log: `time=x level=INFO msg="waiting for snapshot persisted" bytes=5 dur=1s`},
		{name: "absent", log: "time=x level=INFO msg=serving\n"},
		{name: "no dur", log: `time=x level=INFO msg="snapshot persisted" bytes=5`, err: true},
		{name: "bad dur", log: `time=x level=INFO msg="snapshot persisted" bytes=5 dur=soon`, err: true},
		{name: "key suffix is not the key", log: `time=x msg="snapshot persisted" xbytes=1 bytes=2 dur=1s`, ok: true, want: snapshotLine{bytes: 2, dur: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := findSnapshotLine(tc.log)
			if got != tc.want || ok != tc.ok || (err != nil) != tc.err {
				t.Fatalf("findSnapshotLine = %+v, %v, %v; want %+v, %v, error %v", got, ok, err, tc.want, tc.ok, tc.err)
			}
		})
	}
}

func TestParseProcFiles(t *testing.T) {
	const status = "Name:\tnode\nVmPeak:\t  999 kB\nVmRSS:\t   2048 kB\nRssAnon:\t    1024 kB\nRssFile:\t 1000 kB\n"
	for key, want := range map[string]int64{"VmRSS": 2048 * 1024, "RssAnon": 1024 * 1024, "RssFile": 1000 * 1024} {
		if got, err := parseStatusKB(status, key); err != nil || got != want {
			t.Errorf("parseStatusKB(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	for _, bad := range []string{"Name:\tnode\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n", "VmRSSx:\t1 kB\n"} {
		if _, err := parseStatusKB(bad, "VmRSS"); err == nil {
			t.Errorf("parseStatusKB(%q): no error", bad)
		}
	}
	if got, err := parseSchedstat("848333995 4726833580 993\n"); err != nil || got != 848333995 {
		t.Errorf("parseSchedstat = %d, %v", got, err)
	}
	if _, err := parseSchedstat(""); err == nil {
		t.Error("parseSchedstat(\"\"): no error")
	}
}

func TestParseCounts(t *testing.T) {
	if got, err := parseCounts("10000, 100000"); err != nil || len(got) != 2 || got[0] != 10000 || got[1] != 100000 {
		t.Errorf("parseCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "10k", "0", "5,-1"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q): no error", bad)
		}
	}
}

// The generated turns must be sessions the store reads back: seq
// contiguous, shapes and surface rules as ValidateSession checks them.
func TestTurnsValidate(t *testing.T) {
	var events [][]byte
	total := 0
	for k := range 3 {
		for _, e := range turn(int64(k), int64(len(events)), int64(k+1), 5+k*50, 1784973851499) {
			events = append(events, []byte(e))
			total += len(e)
		}
	}
	if err := sessionlog.ValidateSession("s", events); err != nil {
		t.Fatal(err)
	}
	five := turn(42, 0, 1, 5, 1784973851499)
	n := 0
	for _, e := range five {
		n += len(e)
	}
	if mean := n / len(five); mean < 150 || mean > 250 {
		t.Errorf("a 5-event turn averages %d bytes per event; want about 200", mean)
	}
}
