package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/sessionstore/sessionstore/api/rpc"
)

// streamConfig bounds the long-lived responses of a node: how many may be open
// at once and how long one may wait for a client that stopped reading.
type streamConfig struct {
	Read, Watch  rpc.StreamLimit
	WriteTimeout time.Duration
}

func defaultStreamConfig() streamConfig {
	return streamConfig{
		Read:         rpc.StreamLimit{Node: 64, PerPrincipal: 32},
		Watch:        rpc.StreamLimit{Node: 4096, PerPrincipal: 2048},
		WriteTimeout: 30 * time.Second,
	}
}

func streamFlags(cfg *streamConfig, fs *flag.FlagSet) {
	fs.IntVar(&cfg.Read.Node, "max-read-streams", cfg.Read.Node, "concurrent session reads this node serves (ReadRaw, ReadFrom, the views Load, Inspect, Prepare and their stream forms, HTTP downloads; 0: unlimited); more get RESOURCE_EXHAUSTED / QUOTA_EXCEEDED (HTTP 429)")
	fs.IntVar(&cfg.Read.PerPrincipal, "max-read-streams-per-principal", cfg.Read.PerPrincipal, "concurrent session reads one principal may have open on this node (0: unlimited)")
	fs.IntVar(&cfg.Watch.Node, "max-watch-streams", cfg.Watch.Node, "concurrent Watch streams on this node (0: unlimited)")
	fs.IntVar(&cfg.Watch.PerPrincipal, "max-watch-streams-per-principal", cfg.Watch.PerPrincipal, "concurrent Watch streams one principal may have open on this node (0: unlimited)")
	fs.DurationVar(&cfg.WriteTimeout, "stream-write-timeout", cfg.WriteTimeout, "end a gRPC stream whose client has not taken a message for this long (0: never; HTTP downloads have --http-write-timeout)")
}

func (c streamConfig) validate() error {
	for _, v := range []int{c.Read.Node, c.Read.PerPrincipal, c.Watch.Node, c.Watch.PerPrincipal} {
		if v < 0 {
			return fmt.Errorf("stream limits must not be negative (0 means unlimited), got %d", v)
		}
	}
	if c.WriteTimeout < 0 {
		return fmt.Errorf("--stream-write-timeout must not be negative, got %v", c.WriteTimeout)
	}
	return nil
}
