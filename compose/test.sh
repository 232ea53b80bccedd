#!/usr/bin/env bash
# Runs chime's compose stack on this machine and checks it through the published API.
#
#   compose/test.sh          `docker compose up` as docs/src/getting-started/docker-compose.md
#                            gives it: ad-hoc tasks and a cron job succeed, workers scale to
#                            four and share tasks, a worker restarted mid-task loses nothing,
#                            and `down -v` removes everything.
#   compose/test.sh cluster  the three-node RabbitMQ cluster (compose/cluster.yaml): tasks flow at
#                            a steady rate while the busiest node is stopped and started again;
#                            every task runs exactly once and the outage shows in the metrics.
#   compose/test.sh ha       PostgreSQL under Patroni (compose/ha.yaml): tasks flow at a steady
#                            rate while the primary's container is killed, the old primary comes
#                            back as a standby, and a planned switchover follows; every task runs
#                            exactly once, the per-second cron fires every second once, and the
#                            write outages are measured. Evidence goes to $CHIME_EVIDENCE_DIR.
# Both print the tasks/s the stack sustains for a burst of noop tasks submitted through the API.
#
# No image registry is needed: the base image is made with mmdebstrap from the Debian mirror apt
# uses, PostgreSQL and RabbitMQ images from Debian's packages (compose/images/), and chime's own
# Dockerfile is built with the binary built on the host (its Rust build stage is the only part
# replaced). Needs docker (with compose and buildx plugins) and mmdebstrap; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-single}
case "$mode" in
  single) project=chimetest; files=(-f compose.yaml -f compose/local-images.yml) ;;
  # The cluster's files as docs/src/how-to/rabbitmq-cluster.md gives them, with images built
  # here instead of pulled.
  cluster) project=chimecluster
    files=(-f compose.yaml -f compose/cluster.yaml -f compose/local-images.yml -f compose/local-images.cluster.yml)
    export CHIME_ERLANG_COOKIE=${CHIME_ERLANG_COOKIE:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')} ;;
  # PostgreSQL under Patroni, as docs/src/how-to/postgresql-failover.md gives it.
  ha) project=chimeha
    files=(-f compose.yaml -f compose/ha.yaml -f compose/local-images.yml -f compose/local-images.ha.yml)
    export CHIME_PG_PASSWORD=${CHIME_PG_PASSWORD:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
    export CHIME_PATRONI_PASSWORD=${CHIME_PATRONI_PASSWORD:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')} ;;
  *) echo "usage: compose/test.sh [cluster|ha]" >&2; exit 2 ;;
esac
export CHIME_API_TOKEN=${CHIME_API_TOKEN:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
# Where the cluster test's tasks record that they ran (a directory every worker mounts).
runs=$(mktemp -d)
chown 10001:10001 "$runs"  # the chime image's user
chmod 0770 "$runs"
export CHIME_TEST_RUNS=$runs
[ "$mode" != single ] && files+=(-f compose/test-runs.yml)
# `docker compose up` as docs/src/getting-started/docker-compose.md gives it (the root
# compose.yaml), with images built here instead of pulled.
compose=(docker compose -p "$project" "${files[@]}")
api=http://127.0.0.1:8080
say() { echo "compose/test.sh $mode: $*" >&2; }
trap 'say "FAILED at line $LINENO"' ERR
fail() { say "FAILED: $*"; "${compose[@]}" logs --tail 30 >&2 || true; exit 1; }
# `down -v`, bounded: Debian's Docker engine (20.10) once stopped answering in the middle of a
# `down` after its containers had exited, and the run waited on it for good. A `down` that does
# not end within 3 minutes while the engine no longer answers restarts the engine, then goes
# again; what is left is judged after it, as always.
down() {
  timeout 180 "${compose[@]}" down -v --remove-orphans >/dev/null && return 0
  if ! timeout 10 docker info >/dev/null 2>&1; then
    say "the Docker engine stopped answering; restarting it"
    pkill -x dockerd || true
    for _ in $(seq 1 30); do pgrep -x dockerd >/dev/null || break; sleep 1; done
    pkill -9 -x dockerd || true
    sleep 1
    # a killed engine leaves its pid file, and a new one refuses to start beside it
    rm -f /var/run/docker.pid
    scripts/ensure-docker >/dev/null
  fi
  sleep 2
  timeout 180 "${compose[@]}" down -v --remove-orphans >/dev/null
}
cleanup() { down >/dev/null 2>&1 || true; }
submitter=
trap '[ -z "$submitter" ] || kill "$submitter" 2>/dev/null || true; cleanup; rm -rf "$runs"' EXIT

if ! docker image inspect local/debian:bookworm >/dev/null 2>&1; then
  mirror=$(scripts/debian-mirror)
  say "making the base image from $mirror"
  rootfs=$(mktemp --suffix=.tar)
  mmdebstrap --quiet --variant=minbase bookworm "$rootfs" "$mirror"
  docker import "$rootfs" local/debian:bookworm >/dev/null
  rm -f "$rootfs"
fi
images=(postgres rabbitmq)
[ "$mode" = ha ] && images+=(patroni etcd haproxy)
for image in "${images[@]}"; do
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
# Without debug info, as the Dockerfile's build stage makes it.
objcopy --strip-debug "$target_dir/$profile/chime" target/compose/chime 2>/dev/null \
  || cp "$target_dir/$profile/chime" target/compose/chime
started=$(date +%s.%N)
DOCKER_BUILDKIT=1 docker build -q -f compose/Dockerfile --build-arg BASE_IMAGE=local/debian:bookworm \
  --build-arg BINARY=prebuilt --build-arg PREBUILT=target/compose/chime -t chime:latest . >/dev/null

cleanup
say "starting the stack"
up_started=$(date +%s.%N)
"${compose[@]}" up -d --no-build --wait --wait-timeout 300 || fail "the stack did not become healthy"

call() { curl -fsS -H "authorization: Bearer $CHIME_API_TOKEN" -H 'content-type: application/json' "$@"; }
submit() { call -X POST "$api/api/v1/tasks" -d "$1" | sed -E 's/.*"id":"([^"]+)".*/\1/'; }
status() { call "$api/api/v1/tasks/$1" | sed -E 's/.*"status":"([a-z]+)".*/\1/' | head -c 20; }
# SQL as chime's role; under Patroni through HAProxy (to the primary), from a node that runs.
sql_node=pg1
if [ "$mode" = ha ]; then
  sql() { "${compose[@]}" exec -T -e PGPASSWORD="$CHIME_PG_PASSWORD" "$sql_node" psql -h haproxy -U chime -d chime -tAc "$1"; }
else
  sql() { "${compose[@]}" exec -T postgres psql -U chime -d chime -tAc "$1"; }
fi
# Runs "$@" once a second until it succeeds, for at most $1 seconds; fails as its last try did.
retry_for() {
  local seconds=$1
  shift
  for _ in $(seq 2 "$seconds"); do
    "$@" && return 0
    sleep 1
  done
  "$@"
}
has_status() { [ "$(status "$1")" = "$2" ]; }
wait_status() {
  retry_for 120 has_status "$1" "$2" || fail "task $1 did not become $2 (it is $(status "$1"))"
}
# The cron job both modes run: job `tick`, trigger `every-second`.
start_ticking() {
  call -X POST "$api/api/v1/jobs" -d '{"name":"tick","kind":"noop","spec":{}}' >/dev/null
  call -X POST "$api/api/v1/triggers" \
    -d '{"name":"every-second","job":"tick","schedule":{"kind":"cron","cron":"* * * * * ?"}}' >/dev/null
}
stop_ticking() { call -X POST "$api/api/v1/triggers/default/every-second/pause" >/dev/null; }
# Tasks/s for a burst of $1 noop tasks: submitted through the API over 16 connections at once
# (one curl), from the first task's creation to the last one's success on the database's clock
# (nothing else runs meanwhile).
throughput() {
  local count=$1 since urls created figures where
  since=$(sql "SELECT now()")
  urls=$(mktemp)
  for _ in $(seq 1 "$count"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$api/api/v1/tasks"; done > "$urls"
  created=$(curl -sS --parallel --parallel-max 16 -K "$urls" -X POST -w '%{http_code}\n' \
    -H "authorization: Bearer $CHIME_API_TOKEN" -H 'content-type: application/json' -d '{"kind":"noop"}' \
    | { grep -c '^201$' || true; })
  rm -f "$urls"
  [ "$created" -eq "$count" ] || fail "$((count - created)) of $count submissions failed"
  where="created_at >= '$since' AND kind = 'noop' AND job_id IS NULL"
  burst_done() { [ "$(sql "SELECT count(*) FROM tasks WHERE $where AND status = 'succeeded'")" -ge "$count" ]; }
  retry_for 300 burst_done || fail "the burst of $count tasks did not all succeed"
  figures=$(sql "SELECT round(count(*) / extract(epoch FROM max(finished_at) - min(created_at)), 1) || ' tasks/s: '
    || count(*) || ' noop tasks through the API, submitted in '
    || round(extract(epoch FROM max(created_at) - min(created_at))::numeric, 1) || ' s, all succeeded in '
    || round(extract(epoch FROM max(finished_at) - min(created_at))::numeric, 1) || ' s' FROM tasks WHERE $where")
  say "$figures"
}

first=$(submit '{"kind":"shell","spec":{"command":["echo","hello from compose"]}}')
wait_status "$first" succeeded
now=$(date +%s.%N)
say "first task succeeded $(echo "scale=1; ($now - $up_started) / 1" | bc) s after \`up\` began ($(echo "scale=1; ($now - $started) / 1" | bc) s after chime's image build began)"

# Runs $2... in a RabbitMQ node's container ($1).
on_node() { local node=$1; shift; "${compose[@]}" exec -T "$node" "$@"; }
running_nodes() {
  on_node "$1" rabbitmqctl -q cluster_status --formatter json \
    | grep -oE '"running_nodes":\[[^]]*\]' | grep -oE 'rabbit@[a-z0-9]+' | sort -u | wc -l
}
# The sum of one metric over every chime container, read from each one's metrics port.
metric_sum() {
  local pattern=$1 total=0 metrics value
  for container in $("${compose[@]}" ps -q api scheduler dependency worker); do
    metrics=$(docker exec "$container" curl -fsS http://127.0.0.1:9100/metrics) \
      || { say "cannot read the metrics of $container"; return 1; }
    value=$(grep -E "^$pattern" <<< "$metrics" | awk '{ s += $NF } END { printf "%d", s }')
    total=$((total + ${value:-0}))
  done
  echo "$total"
}
cluster_flow() {
  [ "$(running_nodes rabbitmq)" -eq 3 ] || fail "the RabbitMQ cluster does not run three nodes"
  replicas=$(on_node rabbitmq rabbitmq-queues -q quorum_status chime.group.default | grep -c 'rabbit@' || true)
  [ "$replicas" -eq 3 ] || fail "the task queue has $replicas replicas, not 3"
  say "three RabbitMQ nodes in one cluster; the task queue has a replica on each"

  start_ticking
  # The steady flow: ten shell tasks a second, each recording its run in the shared directory.
  (
    while [ ! -e "$runs/stop" ]; do
      if id=$(submit '{"kind":"shell","spec":{"command":["sh","-c","echo $CHIME_TASK_ID >> /runs/ran"]}}'); then
        echo "$id" >> "$runs/submitted"
      else
        echo failed >> "$runs/submit-failures"
      fi
      sleep 0.1
    done
  ) &
  submitter=$!
  sleep 15

  # Stop the node most workers are on (then most connections): one node and the process name of
  # each connection to it.
  connections=$(on_node rabbitmq rabbitmqctl -q list_connections --no-table-headers pid client_properties \
    | sed -nE 's/.*rabbit@([a-z0-9]+)\..*"connection_name","chime ([a-z]+) on.*/\1 \2/p')
  node=$(awk '{ score[$1] += ($2 == "worker") ? 100 : 1 } END { for (n in score) print score[n], n }' <<< "$connections" \
    | sort -rn | awk 'NR == 1 { print $2 }')
  [ -n "$node" ] || fail "no chime connection to any node"
  on_it=$(awk -v n="$node" '$1 == n' <<< "$connections" | wc -l)
  workers_on_it=$(awk -v n="$node" '$1 == n && $2 == "worker"' <<< "$connections" | wc -l)
  live=rabbitmq; [ "$node" = rabbitmq ] && live=rabbitmq2
  say "stopping $node ($on_it of chime's $(wc -l <<< "$connections") connections, $workers_on_it of them workers') while tasks flow"
  lost_before=$(metric_sum "chime_broker_connections_lost_total\\{node=\"$node:5672\"\\}")
  outage_from=$(sql "SELECT now()")
  "${compose[@]}" stop "$node" >/dev/null
  sleep 20
  curl -fsS "$api/readyz" >/dev/null || fail "the API is not ready with $node stopped"
  lost=$(metric_sum "chime_broker_connections_lost_total\\{node=\"$node:5672\"\\}") || fail "metrics unreadable"
  lost=$((lost - lost_before))
  [ "$lost" -ge "$on_it" ] || fail "$on_it processes were on $node but only $lost counted a lost connection"
  connected=$(metric_sum "chime_broker_connected\\{node=\"$node:5672\"\\}") || fail "metrics unreadable"
  [ "$connected" -eq 0 ] || fail "$connected services still report a connection to $node"
  say "the outage is in the metrics: chime_broker_connections_lost_total{node=\"$node:5672\"} rose by $lost, chime_broker_connected for it is 0 everywhere"

  say "starting $node again"
  outage_to=$(sql "SELECT now()")
  "${compose[@]}" start "$node" >/dev/null
  healthy() { [ "$(docker inspect -f '{{.State.Health.Status}}' "$("${compose[@]}" ps -q "$1")")" = healthy ]; }
  retry_for 180 healthy "$node" || true
  [ "$(running_nodes "$live")" -eq 3 ] || fail "$node did not rejoin the cluster"
  sleep 10
  touch "$runs/stop"
  wait "$submitter"
  stop_ticking

  [ ! -e "$runs/submit-failures" ] || fail "$(wc -l < "$runs/submit-failures") submissions failed"
  submitted=$(sort -u "$runs/submitted" | wc -l)
  ids="'{$(paste -sd, "$runs/submitted")}'::uuid[]"
  all_ended() { [ "$(sql "SELECT count(*) FROM tasks WHERE status NOT IN ('succeeded', 'failed', 'killed')")" -eq 0 ]; }
  retry_for 120 all_ended || true  # the checks below say what did not end
  succeeded=$(sql "SELECT count(*) FROM tasks WHERE id = ANY($ids) AND status = 'succeeded'")
  attempts=$(sql "SELECT count(*) FROM task_attempts WHERE task_id = ANY($ids)")
  ran=$(wc -l < "$runs/ran" 2>/dev/null || echo 0)
  twice=$(sort "$runs/ran" | uniq -d | wc -l)
  missing=$(comm -23 <(sort -u "$runs/submitted") <(sort -u "$runs/ran") | wc -l)
  during=$(sql "SELECT count(*) FROM tasks WHERE id = ANY($ids) AND created_at >= '$outage_from' AND finished_at < '$outage_to'")
  say "$submitted tasks submitted: $succeeded succeeded, $attempts attempts, $ran runs recorded, $missing never ran, $twice ran twice; $during were submitted and succeeded while $node was down"
  [ "$submitted" -ge 200 ] || fail "only $submitted tasks were submitted"
  [ "$succeeded" -eq "$submitted" ] && [ "$missing" -eq 0 ] && [ "$twice" -eq 0 ] && [ "$ran" -eq "$submitted" ] \
    && [ "$attempts" -eq "$submitted" ] || fail "a task was lost or ran twice"
  [ "$during" -ge 20 ] || fail "tasks stopped flowing while $node was down ($during succeeded)"
  latency=$(sql "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::int || ' ms median, '
    || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::int || ' ms p99, ' || round(max(ms))::int || ' ms at most'
    FROM (SELECT extract(epoch FROM finished_at - created_at) * 1000 AS ms FROM tasks WHERE id = ANY($ids)) t")
  say "submitted to succeeded through the outage: $latency"
  ticks=$(sql "SELECT count(*) FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.name = 'tick'")
  ticks_ok=$(sql "SELECT count(*) FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.name = 'tick' AND t.status = 'succeeded'
    AND (SELECT count(*) FROM task_attempts a WHERE a.task_id = t.id) = 1")
  [ "$ticks" -ge 40 ] && [ "$ticks_ok" -eq "$ticks" ] || fail "the cron job ran $ticks times, $ticks_ok of them once and successfully"
  say "the cron job fired $ticks times through the outage, each run once and succeeded"
  throughput "$burst"
}

# Each chime container's peak resident memory (VmHWM of its chime process), for the figures.
peak_rss() {
  local line=""
  for container in $("${compose[@]}" ps -q api scheduler dependency worker); do
    line+=" $(docker inspect -f '{{.Name}}' "$container" | sed "s|^/${project}-||")=$(docker exec "$container" sh -c \
      'for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = chime ] && sed -n "s/^VmHWM: *//p" "$p/status"; done; true' \
      | head -n 1 | tr -d ' \t')"
  done
  say "peak RSS:$line"
}
burst=${CHIME_BURST:-2000}
if [ "$mode" = ha ]; then
  . compose/test-ha.sh
  ha_flow
elif [ "$mode" = single ]; then
  say "a cron job firing every second"
  start_ticking
  ticked_thrice() {
    [ "$(call "$api/api/v1/tasks?job=default.tick&status=succeeded&limit=10" | { grep -o '"id"' || true; } | wc -l)" -ge 3 ]
  }
  retry_for 60 ticked_thrice || fail "the cron job did not run three times"
  stop_ticking
  throughput "$burst"

  say "scaling workers to four"
  "${compose[@]}" up -d --no-build --no-recreate --scale worker=4 --wait --wait-timeout 120 \
    || fail "four workers did not start"
  four_online() {
    online=$(call "$api/api/v1/workers" | { grep -o '"status":"online"' || true; } | wc -l)
    [ "$online" -ge 4 ]
  }
  retry_for 60 four_online || fail "four workers are not online ($online)"
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

else
  cluster_flow
fi
peak_rss

# Docker can refuse a network's removal while a just-stopped container's endpoint is being
# released ("has active endpoints"); a second `down` removes what is left.
down
left=$(docker ps -aq --filter "label=com.docker.compose.project=$project" | wc -l)
volumes=$(docker volume ls -q --filter "label=com.docker.compose.project=$project" | wc -l)
[ "$left" -eq 0 ] && [ "$volumes" -eq 0 ] || fail "down -v left $left containers and $volumes volumes"
say "passed"
