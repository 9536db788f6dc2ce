package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
)

// parseFlags parses args; every flag not given on the command line falls back
// to the environment variable SESSIONSTORE_<FLAG> (dashes as underscores).
// Flags win over the environment. An --addr without a port gets the API's
// default port (defaultAddrPort).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %v", env, v, e)
			}
		}
	})
	if err == nil {
		defaultAddrPort(fs)
	}
	return err
}

// givenFlags names the flags set on the command line or by their
// SESSIONSTORE_ variable (after parseFlags), as against left at defaults.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := os.LookupEnv(envName(f.Name)); ok {
			set[f.Name] = true
		}
	})
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// envPrefix starts every environment variable a flag falls back to.
const envPrefix = "SESSIONSTORE_"

// envName is the environment variable flag name falls back to.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// envNotFlags are SESSIONSTORE_ variables that are no flag and are meant so:
// the compose files' published ports and the test suite's knobs.
var envNotFlags = regexp.MustCompile(`^SESSIONSTORE_(NODE[0-9]+_(GRPC|HTTP)_PORT|CRASH_SEED|PMC_SEED|TEST_LOG)$`)

// warnUnknownEnv warns about each SESSIONSTORE_ variable in environ that no
// flag of fs reads: a misspelled one would otherwise be ignored silently.
// The connection flags of the client subcommands are known too, as the same
// environment often serves both.
func warnUnknownEnv(logger *slog.Logger, fs *flag.FlagSet, environ []string) {
	known := map[string]string{} // variable -> flag
	add := func(f *flag.Flag) { known[envName(f.Name)] = f.Name }
	fs.VisitAll(add)
	client := flag.NewFlagSet("", flag.ContinueOnError)
	addClientFlags(client)
	client.String("addr", "", "")
	client.VisitAll(add)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || envNotFlags.MatchString(name) {
			continue
		}
		if _, ok := known[name]; ok {
			continue
		}
		args := []any{"variable", name}
		if near := closestFlag(name, fs); near != "" {
			args = append(args, "did_you_mean", envName(near)+" (--"+near+")")
		}
		logger.Warn("unknown environment variable ignored: no flag of '"+fs.Name()+"' reads it", args...)
	}
}

// closestFlag is the flag of fs whose variable is nearest to env by edit
// distance, if near enough to be a likely misspelling; "" otherwise.
func closestFlag(env string, fs *flag.FlagSet) string {
	best, bestD := "", 0
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(env, envName(f.Name))
		if best == "" || d < bestD {
			best, bestD = f.Name, d
		}
	})
	if best == "" || bestD > 3 || bestD*3 > len(env)-len(envPrefix) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
