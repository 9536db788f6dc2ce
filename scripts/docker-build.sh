#!/bin/sh
# Builds the container image of the node: `scripts/docker-build.sh`.
#
# 1. compiles the static binary: CGO_ENABLED=0 go build -trimpath -o sessionstore ./cmd/node
# 2. runs `docker build` with the repository's Dockerfile on a temporary
#    context that holds only that binary and an empty data/ directory.
#
# The image is FROM scratch (the binary and /data, nothing else), so nothing is
# pulled: it builds without any container registry. Run it from anywhere; it
# is idempotent (an unchanged binary gives the same image id) and says what it
# did. Then: docker-compose up -d (see docker-compose.yml).
#
# Environment: IMAGE (default sessionstore:dev) names the image; GO (default
# go) is the Go command; TAGS (default none) are Go build tags (the jepsen
# harness builds a `jepsenbug` image this way; never deploy one).
set -eu

IMAGE=${IMAGE:-sessionstore:dev}
GO=${GO:-go}
TAGS=${TAGS:-}
root=$(cd "$(dirname "$0")/.." && pwd)

command -v "$GO" >/dev/null 2>&1 || { echo "docker-build: $GO not found (Go 1.26 is required)" >&2; exit 1; }
command -v docker >/dev/null 2>&1 || { echo "docker-build: docker not found" >&2; exit 1; }

ctx=$(mktemp -d "${TMPDIR:-/tmp}/sessionstore-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT INT TERM

echo "docker-build: compiling $root/cmd/node (CGO_ENABLED=0, -trimpath${TAGS:+, tags $TAGS})"
(cd "$root" && CGO_ENABLED=0 "$GO" build -trimpath -tags "$TAGS" -o "$ctx/sessionstore" ./cmd/node)
mkdir "$ctx/data" "$ctx/creds" "$ctx/creds/node1" "$ctx/creds/node2" "$ctx/creds/node3"
cp "$root/Dockerfile" "$ctx/Dockerfile"
echo "docker-build: binary $(wc -c <"$ctx/sessionstore" | tr -d ' ') bytes, sha256 $(sha256sum "$ctx/sessionstore" | cut -c1-16)"

before=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
echo "docker-build: docker build -t $IMAGE (context: the binary and an empty data/ only)"
# The legacy builder's output is noise when all goes well; show it on failure.
if ! out=$(docker build --quiet -t "$IMAGE" "$ctx" 2>&1); then
	printf '%s\n' "$out" >&2
	echo "docker-build: docker build failed" >&2
	exit 1
fi
after=$(docker image inspect --format '{{.Id}}' "$IMAGE")

if [ "$before" = "$after" ]; then
	echo "docker-build: $IMAGE unchanged ($after)"
else
	echo "docker-build: $IMAGE built ($after${before:+, was $before})"
	if [ -n "$before" ] && [ -z "$(docker ps -aq --filter "ancestor=$before")" ]; then
		# The old image is now untagged and unused: drop it (idempotent reruns
		# must not pile up dangling images).
		docker image rm "$before" >/dev/null 2>&1 || true
	fi
fi
echo "docker-build: done; next: docker-compose up -d"
