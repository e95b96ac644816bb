#!/usr/bin/env bash
# Create's CPU on the request path, with one webhook endpoint against none: a `serve --role api` process
# (it delivers nothing, so a delivery's own CPU is not counted in a create's) pinned to CPU 0, wrk on CPU
# 1, 2 s of warm-up then 4 s measured from /proc, three rounds taking turns.
#   bench/create-request-path.sh sqlite|postgres      (after npm run build; PostgreSQL at 127.0.0.1:5432)
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-sqlite}
KEY=create-cost-key-0123456789abcdef
lua=$(mktemp --suffix=.lua)
cat > "$lua" <<LUA
wrk.method = "POST"
wrk.body   = '{"name":"x","categoryId":1}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
LUA
pid=
# A round cut short (wrk missing, a failed start) leaves no server behind on the port.
trap 'rm -f "$lua"; [ -n "$pid" ] && kill $pid 2>/dev/null' EXIT
for round in 1 2 3; do
for endpoints in 0 1; do
  if [ "$backend" = postgres ]; then db=cc_$RANDOM; psql -q -h 127.0.0.1 -U postgres -c "create database $db" postgres; URL=postgres://postgres@127.0.0.1:5432/$db; else rm -rf /tmp/cc; mkdir /tmp/cc; URL=sqlite:/tmp/cc/db.sqlite; fi
  PORT=3555 PETSTORE_API_KEYS=$KEY DATABASE_URL=$URL RATE_LIMIT_PER_SECOND=0 WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 LOG_REQUESTS=true taskset -c 0 node dist/cli/main.js serve --role api > /dev/null 2>&1 &
  pid=$!
  for i in $(seq 100); do curl -s localhost:3555/readyz >/dev/null && break; sleep 0.1; done
  if [ $endpoints = 1 ]; then curl -s -o /dev/null -X POST localhost:3555/v1/webhook-endpoints -H "authorization: Bearer $KEY" -H 'content-type: application/json' -d '{"url":"http://127.0.0.1:9/hook"}'; fi
  taskset -c 1 wrk -t1 -c32 -d2s -s "$lua" http://127.0.0.1:3555/v1/pets > /dev/null # warm-up
  c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$(taskset -c 1 wrk -t1 -c32 -d4s -s "$lua" http://127.0.0.1:3555/v1/pets)
  c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  reqs=$(echo "$out" | awk '/requests in/{print $1}')
  echo "$backend round $round endpoints=$endpoints: $(echo "($c1-$c0)*10000/$reqs" | bc) µs CPU per create, $reqs creates"
  kill $pid; wait $pid 2>/dev/null || true
  if [ "$backend" = postgres ]; then psql -q -h 127.0.0.1 -U postgres -c "drop database $db with (force)" postgres; fi
done; done
