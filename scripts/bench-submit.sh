#!/usr/bin/env bash
# 1,000 (or N) noop tasks submitted with `chime submit` (one CLI process each, P at a time) against
# a fresh `chime up`; prints tasks/s from the first submit until every task has succeeded in
# PostgreSQL, and the peak RSS of the `chime up` process.
#   scripts/bench-submit.sh [N] [P]
set -euo pipefail
N=${1:-1000}
P=${2:-8}
BIN=${CHIME_BIN:-target/release/chime}
DB=chime_bench_submit
PG=postgres://postgres@127.0.0.1:5432
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
export CHIME_DATABASE_URL=$PG/$DB CHIME_PREFIX=bench-submit CHIME_API_ADDR=127.0.0.1:18181 \
       CHIME_API_URL=http://127.0.0.1:18181 RUST_LOG=warn
"$BIN" up --concurrency 32 & UP=$!
trap 'kill $UP 2>/dev/null; wait $UP 2>/dev/null' EXIT
until curl -sf "$CHIME_API_URL/readyz" >/dev/null; do sleep 0.1; done
start=$(date +%s.%N)
seq "$N" | xargs -P "$P" -I{} "$BIN" submit --kind noop >/dev/null
submitted=$(date +%s.%N)
until [ "$(psql -tA "$PG/$DB" -c "SELECT count(*) FROM tasks WHERE status = 'succeeded'")" -ge "$N" ]; do sleep 0.02; done
done_at=$(date +%s.%N)
rss=$(awk '/VmHWM/ {print $2}' /proc/$UP/status)
python3 - "$N" "$start" "$submitted" "$done_at" "$rss" <<'PY'
import sys
n, start, sub, done, rss = int(sys.argv[1]), *map(float, sys.argv[2:5]), int(sys.argv[5])
print(f"bench submit-cli tasks={n} submit_s={sub-start:.2f} total_s={done-start:.2f} "
      f"tasks_per_s={n/(done-start):.0f} up_peak_rss_mib={rss/1024:.1f}")
PY
kill $UP; wait $UP || true
trap - EXIT
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
for q in bench-submit.group.default bench-submit.inline.default bench-submit.submit bench-submit.dead; do
  rabbitmqctl -q delete_queue "$q" >/dev/null 2>&1 || true
done
