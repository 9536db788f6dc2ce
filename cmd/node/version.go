package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/sessionstore/sessionstore/fsm"
)

// version is the release this binary is; set at build time with
// -ldflags "-X main.version=v1.2.3". Empty: the module version Go recorded
// (a tagged `go install`), else "devel".
var version = ""

// buildVersion is what --version prints, from the build information Go
// embeds (ok false when there is none).
type buildVersion struct {
	Version, Commit, Time, Go string
	Commands                  int
}

func readBuildVersion(info *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: version, Commit: "unknown", Go: runtime.Version(), Commands: fsm.CommandVersion}
	if !ok || info == nil {
		if v.Version == "" {
			v.Version = "devel"
		}
		return v
	}
	if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.Version = info.Main.Version
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		v.Commit += "+dirty"
	}
	return v
}

func (v buildVersion) write(w io.Writer) {
	fmt.Fprintf(w, "sessionstore %s\n", v.Version)
	commit := v.Commit
	if v.Time != "" {
		commit += " (" + v.Time + ")"
	}
	fmt.Fprintf(w, "commit:          %s\n", commit)
	fmt.Fprintf(w, "go:              %s %s/%s\n", v.Go, runtime.GOOS, runtime.GOARCH)
	// The newest Raft command encoding this build applies and advertises to
	// its peers: a cluster only writes a version every voter supports.
	fmt.Fprintf(w, "command version: %d\n", v.Commands)
}

func writeVersion(w io.Writer) {
	readBuildVersion(debug.ReadBuildInfo()).write(w)
}
