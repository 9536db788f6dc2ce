#!/usr/bin/env bash
# Regenerates the committed Go code of every proto of the module (run through
# `go generate ./api/...`). Needs Debian's protoc (protobuf-compiler, 3.21); the
# plugins are the Go `tool` dependencies pinned in go.mod, so no global install.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

command -v protoc >/dev/null || { echo "gen.sh: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }

plugin_go="$(go tool -n protoc-gen-go)"
plugin_grpc="$(go tool -n protoc-gen-go-grpc)"

protoc -I . \
  --plugin=protoc-gen-go="$plugin_go" \
  --plugin=protoc-gen-go-grpc="$plugin_grpc" \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  api/sessionpb/session.proto api/forwardpb/forward.proto

protoc -I . \
  --plugin=protoc-gen-go="$plugin_go" \
  --go_out=. --go_opt=paths=source_relative \
  fsm/fsmpb/command.proto
