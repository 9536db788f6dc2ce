package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// metricValue returns the value of the first sample of name in a Prometheus
// text exposition (labels, if any, are ignored).
func metricValue(text, name string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		switch {
		case strings.HasPrefix(rest, "{"):
			i := strings.LastIndexByte(rest, '}')
			if i < 0 {
				continue
			}
			rest = rest[i+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name with this prefix
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		return v, true
	}
	return 0, false
}

// logAttr returns the value of key in a log/slog text line (key=value or
// key="quoted value").
func logAttr(line, key string) (string, bool) {
	for i := 0; i < len(line); {
		j := strings.Index(line[i:], key+"=")
		if j < 0 {
			return "", false
		}
		j += i
		if j > 0 && line[j-1] != ' ' {
			i = j + len(key) + 1
			continue
		}
		v := line[j+len(key)+1:]
		if strings.HasPrefix(v, `"`) {
			s, err := strconv.QuotedPrefix(v)
			if err != nil {
				return "", false
			}
			u, err := strconv.Unquote(s)
			return u, err == nil
		}
		if k := strings.IndexByte(v, ' '); k >= 0 {
			v = v[:k]
		}
		return v, true
	}
	return "", false
}

// snapshotLine is what one "snapshot persisted" log line reports.
type snapshotLine struct {
	bytes int64
	dur   time.Duration
}

// findSnapshotLine returns the first "snapshot persisted" line of a node's
// log (log/slog text format).
func findSnapshotLine(log string) (snapshotLine, bool, error) {
	for line := range strings.Lines(log) {
		if msg, _ := logAttr(line, "msg"); msg != "snapshot persisted" {
			continue
		}
		b, ok1 := logAttr(line, "bytes")
		d, ok2 := logAttr(line, "dur")
		if !ok1 || !ok2 {
			return snapshotLine{}, false, fmt.Errorf("snapshot line without bytes and dur: %q", line)
		}
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return snapshotLine{}, false, fmt.Errorf("snapshot line bytes: %w", err)
		}
		dur, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return snapshotLine{}, false, fmt.Errorf("snapshot line dur: %w", err)
		}
		return snapshotLine{bytes: n, dur: dur}, true, nil
	}
	return snapshotLine{}, false, nil
}
