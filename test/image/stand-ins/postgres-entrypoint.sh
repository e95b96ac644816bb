#!/bin/sh
# The postgres stand-in's entrypoint (postgres.Dockerfile). An empty data directory gets its cluster first,
# as the official image makes it: POSTGRES_USER (default postgres) its superuser with POSTGRES_PASSWORD,
# POSTGRES_DB (default the user's name) created, trust on the local socket, scram-sha-256 from anywhere
# else. A data directory with a cluster (PG_VERSION) goes straight to the server.
set -eu
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?is needed for a first start: the password of POSTGRES_USER}"
  user="${POSTGRES_USER:-postgres}"
  db="${POSTGRES_DB:-$user}"
  printf '%s\n' "$POSTGRES_PASSWORD" >/tmp/pwfile
  initdb --username="$user" --pwfile=/tmp/pwfile --auth-local=trust --auth-host=scram-sha-256
  rm /tmp/pwfile
  echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # A server for this alone, on a socket pg_isready does not ask (/tmp): the health check stays unready
    # and no client connects until the database is there and the real server listens.
    pg_ctl --wait --options="-c listen_addresses='' -c unix_socket_directories=/tmp" start
    psql --host=/tmp --username="$user" --dbname=postgres --set=ON_ERROR_STOP=1 --command="CREATE DATABASE \"$db\""
    pg_ctl --wait --mode=fast stop
  fi
fi
exec "$@"
