#!/usr/bin/env bash
# Runs chime's compose stack on this machine and checks it through the published API: ad-hoc
# tasks and a cron job succeed, workers scale to four and share tasks, a worker restarted
# mid-task loses nothing, and `down -v` removes everything.
#
# No image registry is needed: the base image is made with mmdebstrap from the Debian mirror apt
# uses, PostgreSQL and RabbitMQ images from Debian's packages (compose/images/), and chime's own
# Dockerfile is built with the binary built on the host (its Rust build stage is the only part
# replaced). Needs docker (with compose and buildx plugins) and mmdebstrap; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

project=chimetest
export CHIME_API_TOKEN=${CHIME_API_TOKEN:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
# README's `docker compose up` (the root compose.yaml), with images built here instead of pulled.
compose=(docker compose -p "$project" -f compose.yaml -f compose/local-images.yml)
api=http://127.0.0.1:8080
say() { echo "compose/test.sh: $*" >&2; }
trap 'say "FAILED at line $LINENO"' ERR
fail() { say "FAILED: $*"; "${compose[@]}" logs --tail 30 >&2 || true; exit 1; }
cleanup() { "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true; }
trap cleanup EXIT

mirror=$( (grep -hoE 'https?://[^ ]+debian/?' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true) | head -n 1)
if ! docker image inspect local/debian:bookworm >/dev/null 2>&1; then
  say "making the base image from ${mirror:-http://deb.debian.org/debian}"
  rootfs=$(mktemp --suffix=.tar)
  mmdebstrap --quiet --variant=minbase bookworm "$rootfs" "${mirror:-http://deb.debian.org/debian}"
  docker import "$rootfs" local/debian:bookworm >/dev/null
  rm -f "$rootfs"
fi
for image in postgres rabbitmq; do
  docker build -q --build-arg BASE_IMAGE=local/debian:bookworm -t "local/chime-$image" \
    "compose/images/$image" >/dev/null
done
# The test suite has built the debug binary already; CHIME_PROFILE=release tests the release one.
profile=${CHIME_PROFILE:-debug}
say "building chime's image (the host-built $profile binary)"
if [ "$profile" = release ]; then cargo build --release --locked --bin chime; else cargo build --locked --bin chime; fi
# Into the build context, wherever CARGO_TARGET_DIR put it.
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -E 's/.*"target_directory":"([^"]+)".*/\1/')
mkdir -p target/compose
cp "$target_dir/$profile/chime" target/compose/chime
started=$(date +%s.%N)
DOCKER_BUILDKIT=1 docker build -q -f compose/Dockerfile --build-arg BASE_IMAGE=local/debian:bookworm \
  --build-arg BINARY=prebuilt --build-arg PREBUILT=target/compose/chime -t chime:latest . >/dev/null

cleanup
say "starting the stack"
"${compose[@]}" up -d --no-build --wait --wait-timeout 180 || fail "the stack did not become healthy"

call() { curl -fsS -H "authorization: Bearer $CHIME_API_TOKEN" -H 'content-type: application/json' "$@"; }
submit() { call -X POST "$api/api/v1/tasks" -d "$1" | sed -E 's/.*"id":"([^"]+)".*/\1/'; }
status() { call "$api/api/v1/tasks/$1" | sed -E 's/.*"status":"([a-z]+)".*/\1/' | head -c 20; }
wait_status() {
  local id=$1 want=$2
  for _ in $(seq 1 120); do
    [ "$(status "$id")" = "$want" ] && return 0
    sleep 1
  done
  fail "task $id did not become $want (it is $(status "$id"))"
}

first=$(submit '{"kind":"shell","spec":{"command":["echo","hello from compose"]}}')
wait_status "$first" succeeded
say "first task succeeded $(echo "$(date +%s.%N) - $started" | bc) s after the image build began"

say "a cron job firing every second"
call -X POST "$api/api/v1/jobs" -d '{"name":"tick","kind":"noop","spec":{}}' >/dev/null
call -X POST "$api/api/v1/triggers" \
  -d '{"name":"every-second","job":"tick","schedule":{"kind":"cron","cron":"* * * * * ?"}}' >/dev/null
for _ in $(seq 1 60); do
  fired=$(call "$api/api/v1/tasks?job=default.tick&status=succeeded&limit=10" | { grep -o '"id"' || true; } | wc -l)
  [ "$fired" -ge 3 ] && break
  sleep 1
done
[ "${fired:-0}" -ge 3 ] || fail "the cron job did not run three times"
call -X POST "$api/api/v1/triggers/default/every-second/pause" >/dev/null

say "scaling workers to four"
"${compose[@]}" up -d --no-build --no-recreate --scale worker=4 --wait --wait-timeout 120 \
  || fail "four workers did not start"
for _ in $(seq 1 60); do
  online=$(call "$api/api/v1/workers" | { grep -o '"status":"online"' || true; } | wc -l)
  [ "$online" -ge 4 ] && break
  sleep 1
done
[ "${online:-0}" -ge 4 ] || fail "four workers are not online ($online)"
ids=()
for n in $(seq 1 40); do
  ids+=("$(submit '{"kind":"shell","spec":{"command":["sleep","1"]}}')")
done
for id in "${ids[@]}"; do wait_status "$id" succeeded; done
used=$(for id in "${ids[@]}"; do call "$api/api/v1/tasks/$id" | { grep -oE '"worker":"[^"]+"' || true; }; done | sort -u | wc -l)
[ "$used" -ge 4 ] || fail "40 tasks ran on $used workers, not all four"
say "40 tasks shared by $used workers"

say "restarting a worker mid-task"
long=()
for n in $(seq 1 8); do
  long+=("$(submit '{"kind":"shell","spec":{"command":["sleep","5"]},"requests_recovery":true}')")
done
sleep 2
"${compose[@]}" restart worker >/dev/null
for id in "${long[@]}"; do wait_status "$id" succeeded; done
say "8 tasks running through a worker restart all succeeded"

"${compose[@]}" down -v --remove-orphans >/dev/null
left=$(docker ps -aq --filter "label=com.docker.compose.project=$project" | wc -l)
volumes=$(docker volume ls -q --filter "label=com.docker.compose.project=$project" | wc -l)
[ "$left" -eq 0 ] && [ "$volumes" -eq 0 ] || fail "down -v left $left containers and $volumes volumes"
say "passed"
