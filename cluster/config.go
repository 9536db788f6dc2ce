package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/memberlist"
)

// Config configures one node.
type Config struct {
	NodeID   string
	DataDir  string
	RaftAddr string // bind address of the Raft transport
	// RaftAdvertise is the address other nodes reach this node's Raft transport at
	// (defaults to RaftAddr).
	RaftAdvertise string
	// APIAdvertise is the gRPC address other nodes and clients reach this
	// node at (published in gossip; followers forward to the leader's).
	APIAdvertise string
	// ClientAdvertise is the gRPC address clients reach this node at,
	// published in gossip and handed to clients in every answer's hints
	// (ClientHints); empty: APIAdvertise.
	ClientAdvertise string
	// GossipAddr is the memberlist bind address; GossipAdvertise the address
	// peers reach it at (defaults to GossipAddr).
	GossipAddr      string
	GossipAdvertise string
	// Join lists gossip seeds (host:port). Empty: a lone node.
	Join []string
	// BootstrapExpect is how many servers must see each other before exactly
	// one cluster is bootstrapped; 0 means: 1 for a lone node (no Join),
	// otherwise never bootstrap (only join a formed cluster). A node with Raft
	// state never bootstraps again.
	BootstrapExpect int
	// ReconcileInterval is how often the leader folds gossip into the Raft
	// configuration (also on every membership event).
	ReconcileInterval time.Duration
	// ReapDeadAfter, when set, lets the leader remove a server that gossip has
	// reported dead for that long — never below BootstrapExpect voters, and
	// never a server that left gracefully (a SIGTERM'd node stays a voter).
	ReapDeadAfter time.Duration
	// RegistrationTTL is how long a Create registration may stay without an
	// event before the leader deletes it (0: forever); ExpirySweep how often
	// the leader looks.
	RegistrationTTL time.Duration
	ExpirySweep     time.Duration
	// Retention lists the retention policies; RetentionSweep is how often
	// the leader applies them.
	Retention      []RetentionPolicy
	RetentionSweep time.Duration
	// CommandVersion is the newest command version this node applies and
	// advertises in gossip (0: this build's). Tests lower it to run a node
	// as a build of the previous release would.
	CommandVersion uint32
	// AuthHash identifies the node's token file ("" without one); gossiped so
	// that nodes whose files differ warn.
	AuthHash string
	// HTTPBase is the base URL of this node's HTTP server (for Locate's url).
	HTTPBase string
	// ArtifactsOff: keep no artifact files (artifacts.Off); raw reads,
	// downloads and exports render from the state database.
	ArtifactsOff bool

	// SnapshotThreshold is how many entries since the last snapshot trigger the
	// next one; snapshots copy the whole state, so they are rare.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs are kept after a snapshot so a lagging follower can catch up
	// from the log rather than by snapshot transfer.
	TrailingLogs uint64

	// ApplyTimeout bounds a proposal whose caller set no deadline.
	ApplyTimeout time.Duration
	// MaxGroupBytes and MaxGroupCommands bound one Raft entry of grouped commands.
	MaxGroupBytes    int
	MaxGroupCommands int
	// InFlight is how many grouped entries may be in flight at once.
	InFlight int
	// MaxGroupWait bounds how long a group may be held for more commands
	// while other entries are in flight (propose.go; 0: never held).
	MaxGroupWait time.Duration

	// Limits of docs/api.md.
	MaxEventBytes int
	MaxBatchBytes int
	MaxBatchCount int
	// Quotas, decided by the FSM from the values the leader stamps into each
	// Create and Append (0: unlimited).
	MaxSessionEvents        int64
	MaxSessionBytes         int64
	MaxSessionsPerPrincipal int64
	// MaxPendingBytes bounds the commands waiting for Raft on this node; a
	// proposal that finds it full waits up to PendingWait, then is refused
	// with QUOTA_EXCEEDED (definitely not applied).
	MaxPendingBytes int64
	PendingWait     time.Duration
	// MinFreeBytes: while the filesystem of DataDir has fewer bytes available
	// (statfs f_bavail), writes that grow the store are refused with
	// QUOTA_EXCEEDED and Ready fails (0: never refuse). See diskspace.go.
	MinFreeBytes int64

	// RaftLogOutput receives hashicorp/raft's own log lines (nil: discarded),
	// as JSON when RaftLogJSON is set.
	RaftLogOutput io.Writer
	RaftLogJSON   bool

	// RaftTLS, when set, makes the Raft transport mutual TLS: Server for the
	// connections it accepts (it must require and verify the peer's
	// certificate), Client for those it dials (its ServerName is set per dial
	// from the dialled host). Nil: plaintext.
	RaftTLS *TLSPair
	// GossipKey, when set, encrypts and authenticates gossip (memberlist's
	// SecretKey, AES-GCM; 16, 24 or 32 bytes) and refuses unencrypted gossip.
	GossipKey []byte
	// ClusterKey, when set, is the secret every Raft connection proves
	// knowledge of in its handshake (HMAC-SHA256 challenge-response, both
	// ways): a peer without it gets no RPC through. At least 16 bytes.
	ClusterKey []byte
	// ClusterKeyOptional admits peers without the key while a running
	// cluster turns it on (README "Turning on node-to-node authentication");
	// a peer that does prove a key must prove this one.
	ClusterKeyOptional bool
	// GossipPlaintextIn and GossipPlaintextOut relax GossipKey while a
	// running cluster turns it on: accept unencrypted gossip, send it
	// unencrypted (memberlist's GossipVerifyIncoming/Outgoing turned off).
	GossipPlaintextIn  bool
	GossipPlaintextOut bool
	// ClosedMembership keeps every server learnt of through gossip out of the
	// Raft configuration: set for a node with client authentication whose
	// peers are not authenticated, which must hand data to no one.
	ClosedMembership bool
}

// TLSPair is the server and client side of a mutual TLS link between nodes.
type TLSPair struct {
	Server *tls.Config
	Client *tls.Config
}

// DefaultConfig returns the shipped defaults.
func DefaultConfig() Config {
	return Config{
		NodeID:            "node1",
		DataDir:           "data",
		RaftAddr:          "127.0.0.1:7401",
		GossipAddr:        "127.0.0.1:7402",
		ReconcileInterval: time.Second,
		SnapshotThreshold: 65536,
		SnapshotInterval:  2 * time.Minute,
		TrailingLogs:      65536,
		ApplyTimeout:      10 * time.Second,
		MaxGroupBytes:     1 << 20,
		MaxGroupCommands:  512,
		InFlight:          4,
		MaxGroupWait:      time.Millisecond,
		MaxEventBytes:     2 << 20,
		MaxBatchBytes:     4 << 20,
		MaxBatchCount:     1000,
		MaxSessionEvents:  1_000_000,
		MaxSessionBytes:   1 << 30,
		MaxPendingBytes:   64 << 20,
		PendingWait:       2 * time.Second,
		RegistrationTTL:   24 * time.Hour,
		RetentionSweep:    time.Hour,
		ExpirySweep:       5 * time.Minute,
		MinFreeBytes:      256 << 20,
	}
}

// Validate checks the configuration, naming the field and bound.
func (c Config) Validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id must not be empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir must not be empty"))
	}
	if c.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("bootstrap-expect must be >= 0, got %d", c.BootstrapExpect))
	}
	if c.ReapDeadAfter < 0 {
		errs = append(errs, fmt.Errorf("reap-dead-after must be >= 0, got %v", c.ReapDeadAfter))
	}
	if c.InFlight < 1 {
		errs = append(errs, fmt.Errorf("in-flight entries must be >= 1, got %d", c.InFlight))
	}
	if c.MaxGroupWait < 0 {
		errs = append(errs, fmt.Errorf("group wait must be >= 0 (0: never hold), got %v", c.MaxGroupWait))
	}
	if c.MaxGroupCommands < 1 || c.MaxGroupBytes < 1 {
		errs = append(errs, errors.New("group bounds must be >= 1"))
	}
	if len(c.Retention) > 0 && c.RetentionSweep <= 0 {
		errs = append(errs, fmt.Errorf("retention sweep interval must be > 0 with retention policies, got %v", c.RetentionSweep))
	}
	if c.RegistrationTTL < 0 || (c.RegistrationTTL > 0 && c.ExpirySweep <= 0) {
		errs = append(errs, fmt.Errorf("registration ttl %v must be >= 0, with a positive sweep interval (got %v)", c.RegistrationTTL, c.ExpirySweep))
	}
	if c.MaxSessionEvents < 0 || c.MaxSessionBytes < 0 || c.MaxSessionsPerPrincipal < 0 {
		errs = append(errs, errors.New("quotas must be >= 0 (0: unlimited)"))
	}
	if c.MinFreeBytes < 0 {
		errs = append(errs, fmt.Errorf("min-free-bytes must be >= 0 (0: never refuse writes), got %d", c.MinFreeBytes))
	}
	if c.MaxPendingBytes < int64(c.MaxBatchBytes) {
		errs = append(errs, fmt.Errorf("max pending bytes %d must hold at least one batch (%d bytes)", c.MaxPendingBytes, c.MaxBatchBytes))
	}
	if c.MaxEventBytes < 1 || c.MaxBatchBytes < c.MaxEventBytes || c.MaxBatchCount < 1 {
		errs = append(errs, fmt.Errorf("limits: event %d, batch %d bytes, %d events are inconsistent", c.MaxEventBytes, c.MaxBatchBytes, c.MaxBatchCount))
	}
	if t := c.RaftTLS; t != nil {
		switch {
		case t.Server == nil || t.Client == nil:
			errs = append(errs, errors.New("raft TLS needs both a server and a client config"))
		case t.Server.ClientAuth != tls.RequireAndVerifyClientCert:
			errs = append(errs, fmt.Errorf("raft TLS server must require and verify client certificates (mutual TLS), got %v", t.Server.ClientAuth))
		case len(t.Server.Certificates) == 0 && t.Server.GetCertificate == nil,
			len(t.Client.Certificates) == 0 && t.Client.GetClientCertificate == nil:
			errs = append(errs, errors.New("raft TLS needs the node's certificate on both sides"))
		}
	}
	if c.ClusterKey != nil && len(c.ClusterKey) < 16 {
		errs = append(errs, fmt.Errorf("cluster key: %d bytes, want at least 16 random bytes", len(c.ClusterKey)))
	}
	if c.ClusterKeyOptional && c.ClusterKey == nil {
		errs = append(errs, errors.New("an optional cluster key needs a cluster key"))
	}
	if (c.GossipPlaintextIn || c.GossipPlaintextOut) && c.GossipKey == nil {
		errs = append(errs, errors.New("relaxing gossip verification needs a gossip key"))
	}
	if c.GossipKey != nil {
		if err := memberlist.ValidateKey(c.GossipKey); err != nil {
			errs = append(errs, fmt.Errorf("gossip key: %d bytes: %v", len(c.GossipKey), err))
		}
	}
	return errors.Join(errs...)
}

// bootstrapExpect applies the default of docs/design.md "Cluster": a lone node bootstraps itself;
// a node given seeds only joins unless told the cluster size.
func (c Config) bootstrapExpect() int {
	if c.BootstrapExpect == 0 && len(c.Join) == 0 {
		return 1
	}
	return c.BootstrapExpect
}
