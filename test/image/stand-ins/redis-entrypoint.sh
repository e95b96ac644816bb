#!/bin/sh
# The redis stand-in's entrypoint (redis.Dockerfile). As the official image's: redis-server started without
# a configuration file gets --protected-mode no, or it would answer only clients on its loopback and
# refuse the service's replicas. It has no password: the Compose network is its boundary.
set -eu
if [ "${1:-}" = redis-server ] && [ ! -f "${2:-}" ]; then
  set -- "$@" --protected-mode no
fi
exec "$@"
