// Command jepsen runs the fault-injection harness against the cluster of the
// repository's docker-compose.yml: one scenario, or a soak that repeats
// scenarios with new seeds until its time is up.
//
//	go run ./jepsen/cmd/jepsen --scenario faults --time 90s --seed 42
//	go run ./jepsen/cmd/jepsen --soak 30m
//
// Each run writes history.jsonl, summary.json, final.json, report.html, node
// logs and data under --out/<scenario>/<time>-<seed>/ (a `latest` link
// points at the newest). A valid run's directory is removed unless --keep;
// a failing or unknown one is always kept. The exit status is 0 when every
// run was valid, 1 on an anomaly, 2 when a run proved nothing (unknown) or
// could not run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sessionstore/sessionstore/jepsen"
	"github.com/sessionstore/sessionstore/jepsen/checker"
	"github.com/sessionstore/sessionstore/jepsen/cluster"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("jepsen", flag.ExitOnError)
	scenario := fs.String("scenario", "faults", "scenario: "+strings.Join(jepsen.Scenarios(), ", "))
	seed := fs.Int64("seed", 0, "seed of the schedule and the workload (0: a new one, printed)")
	dur := fs.Duration("time", 90*time.Second, "traffic time of one run")
	soak := fs.Duration("soak", 0, "repeat runs (cycling through the scenarios, new seeds) until this much time has passed")
	faults := fs.String("faults", "", "comma-separated fault menu (default: the scenario's; \"none\": no faults): "+strings.Join(jepsen.FaultNames(), ", "))
	procs := fs.Int("processes", 3, "client processes per node (as many again use every node)")
	out := fs.String("out", "jepsen/store", "output directory")
	repo := fs.String("repo", ".", "repository root (docker-compose.yml)")
	keep := fs.Bool("keep", false, "keep the outputs of valid runs too")
	build := fs.Bool("build", true, "build the node image first (scripts/docker-build.sh)")
	image := fs.String("image", "sessionstore:dev", "the node image (its own tag keeps a run apart from others on a shared machine)")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := filepath.Abs(*repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *build {
		fmt.Println("building the node image (scripts/docker-build.sh)")
		if b, err := cluster.BuildImage(ctx, root, *image, ""); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n%s", err, b)
			return 2
		}
	}
	var menu []string
	switch *faults {
	case "":
	case "none":
		menu = []string{}
	default:
		menu = strings.Split(*faults, ",")
	}
	scenarios := []string{*scenario}
	if *soak > 0 && !flagSet(fs, "scenario") {
		scenarios = jepsen.Scenarios()
	}
	end := time.Now().Add(*soak)
	worst := 0
	var lines []string
	for i := 0; ; i++ {
		sc := scenarios[i%len(scenarios)]
		s := *seed
		if s == 0 || i > 0 {
			s = time.Now().UnixNano() % 1_000_000_000
		}
		code, line := once(ctx, root, *out, sc, s, *dur, menu, *procs, *keep, *image)
		lines = append(lines, line)
		if code > worst {
			worst = code
		}
		if *soak == 0 || time.Now().Add(*dur).After(end) || ctx.Err() != nil || code == 1 {
			break
		}
	}
	fmt.Println("\nruns:")
	for _, l := range lines {
		fmt.Println("  " + l)
	}
	return worst
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func once(ctx context.Context, root, outRoot, scenario string, seed int64, d time.Duration, menu []string, procs int, keep bool, image string) (int, string) {
	dir, err := filepath.Abs(filepath.Join(outRoot, scenario, fmt.Sprintf("%s-%d", time.Now().UTC().Format("20060102T150405Z"), seed)))
	if err != nil {
		return 2, err.Error()
	}
	b, err := cluster.NewDocker(cluster.DockerConfig{Repo: root, Project: "jepsen", DataDir: filepath.Join(dir, "data"), Net: "10.211.20", Image: image})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2, fmt.Sprintf("%s seed %d: %v", scenario, seed, err)
	}
	fmt.Printf("\n== %s, seed %d (replay: --scenario %s --seed %d --time %v)\n", scenario, seed, scenario, seed, d)
	res, err := jepsen.Run(ctx, jepsen.Config{Scenario: scenario, Seed: seed, Duration: d, Faults: menu,
		Processes: procs, Out: dir, Backend: b, Progress: os.Stdout})
	link := filepath.Join(outRoot, "latest")
	_ = os.Remove(link)
	_ = os.Symlink(dir, link)
	if err != nil {
		fmt.Fprintf(os.Stderr, "run failed: %v (outputs in %s)\n", err, dir)
		return 2, fmt.Sprintf("%s seed %d: could not run: %v", scenario, seed, err)
	}
	sum, _ := json.Marshal(res.Summary.Ops)
	line := fmt.Sprintf("%s seed %d: %s, %d operations %s, %d faults, %.0f s", scenario, seed, res.Report.Valid,
		res.Summary.Operations, sum, len(res.Summary.Nemesis), res.Summary.DurationS)
	switch res.Report.Valid {
	case checker.True:
		if !keep {
			_ = os.RemoveAll(dir)
			_ = os.Remove(link)
			return 0, line
		}
		return 0, line + " (kept in " + dir + ")"
	case checker.False:
		for _, r := range res.Report.Results {
			for i, w := range r.Witnesses {
				if i < 3 && r.Valid == checker.False {
					fmt.Printf("  %s: %s\n", r.Name, w.Text)
				}
			}
		}
		return 1, line + " — ANOMALY, see " + filepath.Join(dir, "report.html")
	default:
		return 2, line + " — proved nothing, see " + filepath.Join(dir, "report.html")
	}
}
