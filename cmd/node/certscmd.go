package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore/internal/tlsconf"
)

// certsConfig is `sessionstore certs` after flag parsing.
type certsConfig struct {
	out            string
	nodes, clients []string
	hosts          []string
	days, caDays   int
	force          bool
	keep           bool // keep existing node and client files (a deployment's start-up)
	keysOnly       bool // only gossip.key and cluster.key
	nodeDirs       bool // also <out>/<node>/ with only that node's files
}

// certsCmd is `sessionstore certs`: a private CA, node and client certificates and a
// gossip key, written as PEM files for --tls-* and --gossip-key-file.
func certsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseCertsFlags(args, stderr)
	if err != nil {
		return err
	}
	return writeCerts(cfg, stdout)
}

func parseCertsFlags(args []string, stderr io.Writer) (certsConfig, error) {
	var cfg certsConfig
	var nodes, clients, hosts string
	fs := flag.NewFlagSet("sessionstore certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.out, "out", "", "directory to write into (created if absent; required)")
	fs.StringVar(&nodes, "nodes", "", "comma-separated node names (their --node-id / advertised host): one node certificate each")
	fs.StringVar(&hosts, "hosts", "", "comma-separated extra SANs (host names or IP addresses) for every node certificate")
	fs.StringVar(&clients, "clients", "", "comma-separated principal names: one client certificate each")
	fs.IntVar(&cfg.days, "days", 365, "validity of the node and client certificates, in days")
	fs.IntVar(&cfg.caDays, "ca-days", 3650, "validity of a new CA, in days")
	fs.BoolVar(&cfg.force, "force", false, "overwrite existing node and client files (an existing CA, gossip key and cluster key are always kept)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep existing node and client files and issue only the missing ones (for a deployment that runs this on every start)")
	fs.BoolVar(&cfg.nodeDirs, "node-dirs", false, "also copy into <out>/<node>/ what that node needs and nothing else: node.pem, node-key.pem, ca.pem, gossip.key, cluster.key (one directory to mount per node)")
	fs.BoolVar(&cfg.keysOnly, "keys-only", false, "write only gossip.key and cluster.key (node-to-node authentication without TLS); no CA, no certificates")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore certs --out DIR --nodes node1,node2,node3 [--hosts H1,H2] [--clients admin,alice] [flags]

Writes what 'sessionstore serve --tls-cert/--tls-key/--tls-ca --gossip-key-file' and
the clients' --tls-* flags need, as PEM files (ECDSA P-256):

  ca.pem, ca-key.pem              a private CA (the key 0600: keep it off the
                                  nodes; it signs every node and client)
  <node>.pem, <node>-key.pem      a node certificate (OU sessionstore-node,
                                  server and client use) with SANs: the node's
                                  name, localhost, 127.0.0.1, ::1 and --hosts
  client-<name>.pem, ...-key.pem  a client certificate (OU sessionstore-client,
                                  CommonName = the principal's name)
  gossip.key                      a random 32-byte gossip key, base64 (0600)
  cluster.key                     a random 32-byte cluster key, base64 (0600):
                                  --cluster-key-file, proven in every Raft
                                  connection's handshake

A node's name must be the host the other nodes reach it at (its
--advertise-addr, or the host of its addresses), or be covered by --hosts: a
node checks the certificate of every peer it dials against that host.
When DIR already holds ca.pem and ca-key.pem they are used to issue the new
certificates (to add a node or a client later), and an existing gossip.key
and cluster.key are kept. Existing node and client files are not overwritten unless --force.
Every flag can also be set as SESSIONSTORE_<FLAG>; flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	usage := func(format string, a ...any) (certsConfig, error) {
		fmt.Fprintf(stderr, "sessionstore certs: "+format+"\n", a...)
		return cfg, errUsage
	}
	cfg.nodes, cfg.clients, cfg.hosts = splitList(nodes), splitList(clients), splitList(hosts)
	switch {
	case cfg.out == "":
		return usage("--out is required")
	case cfg.keysOnly && (len(cfg.nodes) > 0 || len(cfg.clients) > 0 || cfg.nodeDirs):
		return usage("--keys-only writes no certificates: drop --nodes and --clients")
	case cfg.force && cfg.keep:
		return usage("give --force or --keep, not both")
	case cfg.keysOnly:
	case len(cfg.nodes) == 0 && len(cfg.clients) == 0:
		return usage("give --nodes (and/or --clients): nothing to issue")
	case cfg.days < 1 || cfg.caDays < 1:
		return usage("--days and --ca-days must be ≥ 1")
	}
	seen := map[string]bool{}
	for _, n := range cfg.nodes {
		if err := tlsconf.ValidName(n); err != nil {
			return usage("--nodes: %v", err)
		}
		if seen["n:"+n] {
			return usage("--nodes: %s is listed twice", n)
		}
		seen["n:"+n] = true
	}
	for _, c := range cfg.clients {
		if err := tlsconf.ValidName(c); err != nil {
			return usage("--clients: %v", err)
		}
		if seen["c:"+c] {
			return usage("--clients: %s is listed twice", c)
		}
		seen["c:"+c] = true
	}
	for _, h := range cfg.hosts {
		if net.ParseIP(h) == nil && strings.ContainsAny(h, " /:@") {
			return usage("--hosts: %q is neither an IP address nor a host name", h)
		}
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// certFile is one file to write.
type certFile struct {
	name string
	data []byte
	mode fs.FileMode
	what string
}

// writeCerts issues everything cfg asks for and writes it into cfg.out:
// nothing is written when any file to be written exists (without --force).
func writeCerts(cfg certsConfig, stdout io.Writer) error {
	if err := os.MkdirAll(cfg.out, 0o700); err != nil {
		return err
	}
	path := func(name string) string { return filepath.Join(cfg.out, name) }
	exists := func(name string) (bool, error) {
		_, err := os.Lstat(path(name))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	validity := time.Duration(cfg.days) * 24 * time.Hour
	var files []certFile
	var notes []string
	if cfg.keysOnly {
		return writeKeys(cfg, path, exists, files, notes, stdout)
	}

	// The CA: the one in DIR, or a new one.
	caCert, err := exists("ca.pem")
	if err != nil {
		return err
	}
	caKey, err := exists("ca-key.pem")
	if err != nil {
		return err
	}
	var ca *tlsconf.Issued
	switch {
	case caCert && caKey:
		certPEM, err := os.ReadFile(path("ca.pem"))
		if err != nil {
			return err
		}
		keyPEM, err := os.ReadFile(path("ca-key.pem"))
		if err != nil {
			return err
		}
		if ca, err = tlsconf.ParseCA(certPEM, keyPEM); err != nil {
			return fmt.Errorf("the existing CA in %s: %w", cfg.out, err)
		}
		notes = append(notes, fmt.Sprintf("kept   %s (the existing CA %q, valid until %s, issued the certificates below)",
			path("ca.pem"), ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.DateOnly)))
	case caCert || caKey:
		return fmt.Errorf("%s holds only one of ca.pem and ca-key.pem: restore the other, or remove it to make a new CA", cfg.out)
	default:
		if ca, err = tlsconf.NewCA("sessionstore CA", time.Duration(cfg.caDays)*24*time.Hour); err != nil {
			return err
		}
		key, err := ca.KeyPEM()
		if err != nil {
			return err
		}
		until := ca.Cert.NotAfter.UTC().Format(time.DateOnly)
		files = append(files,
			certFile{"ca.pem", ca.CertPEM(), 0o644, "CA certificate, valid until " + until + " (--tls-ca of nodes and clients)"},
			certFile{"ca-key.pem", key, 0o600, "CA private key: keep it off the nodes, it signs every node and client"})
	}
	if ca.Cert.NotAfter.Before(time.Now().Add(validity)) {
		notes = append(notes, fmt.Sprintf("note   the CA expires on %s, before the certificates' --days", ca.Cert.NotAfter.UTC().Format(time.DateOnly)))
	}

	var conflicts []string
	issued := func(certName, keyName, what string, i *tlsconf.Issued) error {
		key, err := i.KeyPEM()
		if err != nil {
			return err
		}
		var present []string
		for _, f := range []string{certName, keyName} {
			if ok, err := exists(f); err != nil {
				return err
			} else if ok && !cfg.force {
				present = append(present, path(f))
			}
		}
		if cfg.keep && len(present) == 2 {
			notes = append(notes, fmt.Sprintf("kept   %s (existing, --keep)", path(certName)))
			return nil
		}
		conflicts = append(conflicts, present...)
		until := i.Cert.NotAfter.UTC().Format(time.DateOnly)
		files = append(files,
			certFile{certName, i.CertPEM(), 0o644, what + ", valid until " + until},
			certFile{keyName, key, 0o600, "private key of " + certName})
		return nil
	}
	for _, n := range cfg.nodes {
		i, err := ca.IssueNode(n, cfg.hosts, validity)
		if err != nil {
			return err
		}
		var sans []string
		sans = append(sans, i.Cert.DNSNames...)
		for _, ip := range i.Cert.IPAddresses {
			sans = append(sans, ip.String())
		}
		if err := issued(n+".pem", n+"-key.pem", "node certificate "+n+" (SANs "+strings.Join(sans, ", ")+")", i); err != nil {
			return err
		}
	}
	for _, c := range cfg.clients {
		i, err := ca.IssueClient(c, validity)
		if err != nil {
			return err
		}
		if err := issued("client-"+c+".pem", "client-"+c+"-key.pem", "client certificate of principal "+c, i); err != nil {
			return err
		}
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("not overwriting %s (use --force to replace them); nothing was written", strings.Join(conflicts, ", "))
	}

	return writeKeys(cfg, path, exists, files, notes, stdout)
}

// writeKeys adds the gossip and cluster keys to files (each kept when it
// exists: shared by the whole cluster, like the CA) and writes everything.
func writeKeys(cfg certsConfig, path func(string) string, exists func(string) (bool, error), files []certFile, notes []string, stdout io.Writer) error {
	for _, k := range []struct{ name, what string }{
		{"gossip.key", "gossip key, base64 of 32 random bytes (--gossip-key-file)"},
		{"cluster.key", "cluster key, base64 of 32 random bytes (--cluster-key-file: proven in every Raft connection)"},
	} {
		if ok, err := exists(k.name); err != nil {
			return err
		} else if ok {
			notes = append(notes, fmt.Sprintf("kept   %s (the existing %s)", path(k.name), strings.TrimSuffix(k.name, ".key")+" key"))
			continue
		}
		key, err := tlsconf.NewGossipKey()
		if err != nil {
			return err
		}
		files = append(files, certFile{k.name, []byte(tlsconf.EncodeGossipKey(key) + "\n"), 0o600, k.what})
	}

	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	width := 0
	for _, f := range files {
		width = max(width, len(path(f.name)))
	}
	for _, f := range files {
		if err := writeFileAtomic(path(f.name), f.data, f.mode); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote  %-*s  %04o  %s\n", width, path(f.name), f.mode, f.what)
	}
	if cfg.nodeDirs {
		return writeNodeDirs(cfg, path, stdout)
	}
	return nil
}

// writeNodeDirs copies what each node needs, and nothing else (no CA key, no
// other node's key), into <out>/<node>/ under fixed names, so that a
// deployment mounts one directory per node.
func writeNodeDirs(cfg certsConfig, path func(string) string, stdout io.Writer) error {
	for _, n := range cfg.nodes {
		if err := os.MkdirAll(path(n), 0o700); err != nil {
			return err
		}
		for _, c := range []struct {
			from, to string
			mode     fs.FileMode
		}{{n + ".pem", "node.pem", 0o644}, {n + "-key.pem", "node-key.pem", 0o600}, {"ca.pem", "ca.pem", 0o644},
			{"gossip.key", "gossip.key", 0o600}, {"cluster.key", "cluster.key", 0o600}} {
			b, err := os.ReadFile(path(c.from))
			if err != nil {
				return err
			}
			if err := writeFileAtomic(filepath.Join(path(n), c.to), b, c.mode); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "copied %s: node.pem, node-key.pem, ca.pem, gossip.key, cluster.key of node %s\n", path(n), n)
	}
	return nil
}

// writeFileAtomic writes data to path with mode (also when replacing a file
// with another mode) through a temporary file and a rename.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}
