# The sessionstore node image: the static binary and nothing else.
#
# Build it with scripts/docker-build.sh, which compiles the binary
# (CGO_ENABLED=0) and runs `docker build` on a context holding only that
# binary and an empty data/ directory. FROM scratch needs no pull, so this
# builds without any registry.
#
# The node runs as uid/gid 65532 (numeric: scratch has no /etc/passwd). /data
# is created in the image owned by that uid, so a named volume mounted there
# starts out writable (Docker copies the ownership of the image's directory
# into an empty named volume). A bind mount must be writable by uid 65532,
# or run the container with --user 0.
#
# /creds (and its node1..node3) likewise, for the credentials that
# docker-compose's one-shot `credentials` service writes into named volumes
# there (`sessionstore certs`).
FROM scratch
COPY --chown=65532:65532 data /data
COPY --chown=65532:65532 creds /creds
COPY sessionstore /sessionstore
USER 65532:65532
# The node reads SESSIONSTORE_<FLAG> for any flag not given.
ENV SESSIONSTORE_DATA_DIR=/data
VOLUME /data
# gRPC API, Raft, gossip (TCP and UDP), HTTP (health, metrics, downloads).
EXPOSE 7400/tcp 7401/tcp 7402/tcp 7402/udp 7480/tcp
ENTRYPOINT ["/sessionstore"]
