# `compose/test.sh ha`: chime through a PostgreSQL failover and a switchover under Patroni
# (compose/ha.yaml). Sourced by compose/test.sh, whose helpers it uses (compose, sql, call,
# retry_for, fail, say, start_ticking, stop_ticking, metric_sum, $runs, $api).
#
#   flow of shell tasks (10/s, each appends its id to /runs/ran) + a cron job every second
#   ──15 s──▶ docker kill the primary ──▶ the standby is promoted ──20 s──▶ the old primary
#   started again: a standby ──▶ patronictl switchover back ──20 s──▶ flow stops ──▶ checks
#
# Checks: every task of the flow succeeded and its command ran once, the two running at the kill
# and the one running at the switchover at their first attempt; every second between the cron
# job's first and last fire has exactly one task, each succeeded at once; the old primary came
# back rewound, in recovery and streaming from the new one; every chime process logged the
# store's return on the promoted node. (Tasks with more than one attempt row are counted, not
# refused: a start whose commit's answer was lost is released as never run and run again, once.) Reports the write outages (the longest time between two task submissions' commits
# after the kill, and after the switchover) and writes the evidence to $CHIME_EVIDENCE_DIR when
# set.

evidence=${CHIME_EVIDENCE_DIR:-}

# patronictl on a node that runs (Patroni's view is the same from every node).
patroni() { "${compose[@]}" exec -T "$sql_node" patronictl "$@"; }
# One line per member: name, role (Leader, Sync_Standby, Replica), state, timeline.
members() {
  patroni list -f json | python3 -c '
import json, sys
for m in json.load(sys.stdin):
    print(m["Member"], m["Role"].replace(" ", "_"), m["State"], m.get("TL", "-"))'
}
leaders() { members | awk '$2 == "Leader" && $3 == "running" { print $1 }'; }
# A standby that follows the leader (Patroni 3.0.2 says "running"; later ones "streaming").
is_following() { members | awk -v n="$1" -v r="$2" '$1 == n && $2 == r && ($3 == "running" || $3 == "streaming") { f = 1 } END { exit !f }'; }
is_leader() { [ "$(leaders)" = "$1" ]; }
# Patroni promotes only the standby etcd's /sync key names (3.0.2 falls back to any healthy
# standby when the key is empty, which could lose commits): checked before every move.
sync_names() {
  "${compose[@]}" exec -T etcd etcdctl get --print-value-only /service/chime/sync \
    | grep -qE "\"leader\": *\"$1\".*\"sync_standby\": *\"$2\""
}
now_ms() { date +%s%3N; }
# How long no write committed around $1 (ms): the longest time between two task submissions'
# commits (their answers, as the flow saw them: one every ~0.15 s while writes go) from the
# last one before $1 to 30 s after it (the kill's outage ends before the old primary is started
# again). Fails while none committed after $1 yet.
outage_from() {
  awk -v t="$1" '$3 == 200 || $3 == 201 {
      if ($2 >= t && prev != "" && $2 - prev > gap) gap = $2 - prev
      if ($2 >= t) after = 1
      if ($2 > t + 30000) exit
      prev = $2
    } END { if (!after) exit 1; print gap + 0 }' "$runs/posts"
}

# The flow: ten shell tasks a second, each submitted with an id of its own and submitted again
# with the same id until the API answers 2xx (an answer lost in the failover may hide a commit;
# the id makes the retry harmless), each try's start, end and status in $runs/posts.
flow() {
  while [ ! -e "$runs/stop" ]; do
    local id body code started
    id=$(cat /proc/sys/kernel/random/uuid)
    body='{"id":"'"$id"'","kind":"shell","spec":{"command":["sh","-c","echo $CHIME_TASK_ID >> /runs/ran"]}}'
    while :; do
      started=$(now_ms)
      code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 60 -X POST "$api/api/v1/tasks" \
        -H "authorization: Bearer $CHIME_API_TOKEN" -H 'content-type: application/json' -d "$body" 2>/dev/null) || true
      echo "$started $(now_ms) ${code:-000}" >> "$runs/posts"
      case "$code" in 2??) echo "$id" >> "$runs/submitted"; break ;; esac
      # Told to stop while the API still refuses: this one may or may not exist; it is not
      # among the submitted tasks the checks follow.
      [ ! -e "$runs/stop" ] || break
      sleep 0.2
    done
    sleep 0.1
  done
}

ha_flow() {
  wait_cluster() { [ "$(leaders | wc -l)" -eq 1 ] && [ -n "$(members | awk '$2 == "Sync_Standby"')" ]; }
  retry_for 180 wait_cluster || fail "Patroni has no leader with a synchronous standby: $(members | tr '\n' ';')"
  local first standby
  first=$(leaders)
  standby=$(members | awk '$2 == "Sync_Standby" { print $1 }')
  sql_node=$standby
  say "Patroni: $first is primary, $standby its synchronous standby"

  start_ticking
  flow &
  submitter=$!
  sleep 15

  retry_for 30 sync_names "$first" "$standby" || fail "etcd's /sync does not name $standby the standby of $first"
  # Two tasks that run through the failover: their workers hold them while PostgreSQL (or
  # HAProxy, with no primary behind it) refuses them, and record their ends once it answers.
  local long=()
  for _ in 1 2; do
    long+=("$(submit '{"kind":"shell","spec":{"command":["sh","-c","sleep 12; echo $CHIME_TASK_ID >> /runs/ran"]}}')")
  done
  for id in "${long[@]}"; do
    wait_status "$id" running
    echo "$id" >> "$runs/submitted"
  done
  local kill_at
  kill_at=$(now_ms)
  say "killing the primary's container ($first) while tasks flow"
  docker kill "$("${compose[@]}" ps -q "$first")" >/dev/null
  retry_for 90 is_leader "$standby" || fail "$standby was not promoted: $(members | tr '\n' ';')"
  say "$standby is primary $(( ($(now_ms) - kill_at) / 1000 )) s after the kill"
  retry_for 60 outage_from "$kill_at" >/dev/null || fail "no task submission committed within 60 s of the kill"
  sleep 20

  say "starting $first again: it must come back as a standby"
  "${compose[@]}" start "$first" >/dev/null
  rejoined() {
    [ "$(leaders | wc -l)" -le 1 ] || fail "two primaries: $(members | tr '\n' ';')"
    is_following "$first" Sync_Standby || is_following "$first" Replica
  }
  retry_for 180 rejoined || fail "$first did not come back as a standby: $(members | tr '\n' ';')"
  # Patroni's roles come from etcd's leader key; the servers themselves say what they are: the
  # old primary in recovery and streaming from the new one, the new one not in recovery.
  on_server() { "${compose[@]}" exec -T "$1" psql -U postgres -d postgres -tAc "$2"; }
  streaming() {
    [ "$(on_server "$first" "SELECT pg_is_in_recovery()")" = t ] \
      && [ "$(on_server "$first" "SELECT status FROM pg_stat_wal_receiver")" = streaming ]
  }
  retry_for 60 streaming || fail "$first is not a standby streaming from the primary"
  [ "$(on_server "$standby" "SELECT pg_is_in_recovery()")" = f ] || fail "$standby is not a primary"
  has_sync() { members | awk '$2 == "Sync_Standby"' | grep -q .; }
  retry_for 60 has_sync || true  # the /sync check before the switchover says if not
  local rewound
  rewound=$("${compose[@]}" logs "$first" 2>&1 | grep -ciE 'pg_rewind|rewind' || true)
  say "$first follows $standby again, in recovery and streaming ($rewound log lines of Patroni's about rewinding): $(members | tr '\n' ';')"
  [ "$rewound" -gt 0 ] || fail "Patroni did not rewind $first"
  sleep 10

  retry_for 60 sync_names "$standby" "$first" || fail "etcd's /sync does not name $first the standby of $standby"
  # One task runs through the switchover too.
  local across
  across=$(submit '{"kind":"shell","spec":{"command":["sh","-c","sleep 8; echo $CHIME_TASK_ID >> /runs/ran"]}}')
  wait_status "$across" running
  echo "$across" >> "$runs/submitted"
  local switch_at
  switch_at=$(now_ms)
  say "switching over from $standby to $first while tasks flow"
  patroni switchover --leader "$standby" --candidate "$first" --force >/dev/null \
    || fail "patronictl switchover failed"
  retry_for 60 is_leader "$first" || fail "the switchover did not make $first primary"
  retry_for 60 outage_from "$switch_at" >/dev/null || fail "no task submission committed within 60 s of the switchover"
  sleep 20
  touch "$runs/stop"
  wait "$submitter"
  submitter=
  stop_ticking
  local kill_outage switch_outage
  kill_outage=$(outage_from "$kill_at")
  switch_outage=$(outage_from "$switch_at")
  say "writes stopped for $kill_outage ms at the kill and $switch_outage ms at the switchover (the longest time between two task submissions' commits)"

  local submitted ids
  submitted=$(sort -u "$runs/submitted" | wc -l)
  ids="'{$(sort -u "$runs/submitted" | paste -sd,)}'::uuid[]"
  all_ended() { [ "$(sql "SELECT count(*) FROM tasks WHERE status NOT IN ('succeeded', 'failed', 'killed')")" -eq 0 ]; }
  retry_for 120 all_ended || true  # the checks below say what did not end
  local succeeded ran twice missing extra_attempts
  succeeded=$(sql "SELECT count(*) FROM tasks WHERE id = ANY($ids) AND status = 'succeeded'")
  extra_attempts=$(sql "SELECT count(*) FROM tasks t WHERE id = ANY($ids) AND (SELECT count(*) FROM task_attempts a WHERE a.task_id = t.id) <> 1")
  ran=$(wc -l < "$runs/ran" 2>/dev/null || echo 0)
  twice=$(sort "$runs/ran" | uniq -d | wc -l)
  missing=$(comm -23 <(sort -u "$runs/submitted") <(sort -u "$runs/ran") | wc -l)
  local tries
  tries=$(wc -l < "$runs/posts")
  say "$submitted tasks submitted ($tries tries): $succeeded succeeded, $ran runs recorded, $missing never ran, $twice ran twice, $extra_attempts with other than one attempt row"

  local held
  held=$(sql "SELECT count(*) FROM tasks t WHERE id IN ('${long[0]}', '${long[1]}', '$across') AND status = 'succeeded'
    AND (SELECT count(*) FROM task_attempts a WHERE a.task_id = t.id) = 1")
  say "$held of the 3 tasks running at the kill and at the switchover succeeded at their first attempt"

  # Every second of the cron job between its first and last fire, and the tasks made for it.
  local fires gaps
  fires=$(sql "WITH tick AS (SELECT t.data_time FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.name = 'tick'),
      span AS (SELECT generate_series(min(data_time), max(data_time), interval '1 second') AS s FROM tick)
    SELECT to_char(s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') || ',' || (SELECT count(*) FROM tick WHERE data_time = s)
    FROM span ORDER BY s")
  gaps=$(awk -F, '$2 != 1' <<< "$fires" | wc -l)
  local ticks_bad
  ticks_bad=$(sql "SELECT count(*) FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.name = 'tick'
    AND (t.status <> 'succeeded' OR (SELECT count(*) FROM task_attempts a WHERE a.task_id = t.id) <> 1)")
  say "the cron job: $(wc -l <<< "$fires") seconds from its first fire to its last, $gaps of them without exactly one task; $ticks_bad of its tasks did not succeed at their first attempt"

  # Every chime process said where the store went.
  local told=0 processes=0 line
  for container in $("${compose[@]}" ps -q api scheduler dependency worker); do
    processes=$((processes + 1))
    # The first return after the kill names the promoted node.
    line=$(docker logs "$container" 2>&1 | grep 'PostgreSQL is back, on another server' | grep "\"server\":\"$standby " | head -n 1 || true)
    if [ -n "$line" ]; then
      told=$((told + 1))
      say "  $(docker inspect -f '{{.Name}}' "$container" | sed "s|^/${project}-||"): $(python3 -c '
import json, sys
f = json.loads(sys.argv[1]).get("fields", {})
print("back after %s ms on %s (was %s)" % (f.get("away_ms"), f.get("server"), f.get("was")))' "$line" 2>/dev/null || echo "$line")"
    fi
  done
  local changes
  changes=$(metric_sum chime_store_server_changes_total) || fail "metrics unreadable"
  say "$told of $processes chime processes logged the store's return on another node; chime_store_server_changes_total sums to $changes"

  if [ -n "$evidence" ]; then
    mkdir -p "$evidence"
    echo "$first" > "$evidence/primary_before"
    echo "$standby" > "$evidence/primary_after"
    { echo "id,status,attempts"
      sql "SELECT t.id || ',' || t.status || ',' || (SELECT count(*) FROM task_attempts a WHERE a.task_id = t.id)
           FROM tasks t WHERE t.id = ANY($ids) ORDER BY t.created_at"; } > "$evidence/tasks.csv"
    cp "$runs/ran" "$evidence/ran.log"
    { echo "scheduled_time,count"; echo "$fires"; } > "$evidence/fires.csv"
    echo "$kill_outage" > "$evidence/write_outage_ms"
    echo "$switch_outage" > "$evidence/switchover_write_outage_ms"
    "${compose[@]}" logs --no-color --timestamps > "$evidence/compose.log" 2>&1 || true
    say "evidence written to $evidence"
  fi

  [ "$first" != "$standby" ] || fail "the primary did not change"
  [ "$submitted" -ge 300 ] || fail "only $submitted tasks were submitted"
  [ "$succeeded" -eq "$submitted" ] && [ "$missing" -eq 0 ] && [ "$twice" -eq 0 ] && [ "$ran" -eq "$submitted" ] \
    || fail "a task was lost, failed or ran twice"
  [ "$held" -eq 3 ] || fail "a task running at the kill or the switchover did not run through it"
  [ "$(wc -l <<< "$fires")" -ge 60 ] && [ "$gaps" -eq 0 ] && [ "$ticks_bad" -eq 0 ] \
    || fail "the cron job missed or doubled a second, or a run of it did not succeed at once"
  [ "$told" -eq "$processes" ] || fail "only $told of $processes processes logged the store's return"
  say "writes stopped for $kill_outage ms at the kill, $switch_outage ms at the switchover"
  throughput "$burst"
}
