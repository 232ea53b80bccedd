#!/usr/bin/env bash
# How long `chime import quartz` takes on a store of N triggers (default 10,000) and its peak
# RSS: a Quartz store made from Quartz 2.3.2's own PostgreSQL script (Debian's libquartz2-java),
# filled with N/10 jobs carrying Java-serialized job data, N triggers (half cron in a zone, half
# simple, every fifth with a calendar) and ten calendars (the importer's test blobs); then a dry
# run, the import, and a second import (which finds everything present).
#   scripts/bench-quartz-import.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
BIN=${CHIME_BIN:-target/release/chime}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
export PGOPTIONS="-c client_min_messages=warning"
SRC=qz_bench_source DST=qz_bench_chime
FIX=services/quartz-import/fixtures
JAR=/usr/share/java/quartz2.jar
[ -f "$JAR" ] || { echo "error: $JAR is missing: apt-get install libquartz2-java" >&2; exit 1; }
for db in $SRC $DST; do psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"; done
psql -q "$PG/postgres" -c "CREATE DATABASE $SRC"
python3 -c "import zipfile,sys; sys.stdout.write(zipfile.ZipFile('$JAR').read('org/quartz/impl/jdbcjobstore/tables_postgres.sql').decode())" \
  | PGOPTIONS="-c client_min_messages=error" psql -q "$PG/$SRC" >/dev/null # it ends in a bare COMMIT
hex() { od -An -v -tx1 "$1" | tr -d ' \n'; }
{
  i=0
  for f in "$FIX"/cal_*.ser; do
    case "$f" in *cycle*|*subclass*) continue ;; esac
    i=$((i + 1))
    echo "INSERT INTO qrtz_calendars VALUES ('bench', 'cal$i', '\\x$(hex "$f")');"
  done
  echo "INSERT INTO qrtz_job_details SELECT 'bench', 'job' || g, 'jobs', NULL, 'com.acme.Job', true, false, false, g % 2 = 0, '\\x$(hex "$FIX/jobdata_types.ser")' FROM generate_series(1, $N / 10) g;"
} | psql -q "$PG/$SRC"
psql -q "$PG/$SRC" <<SQL
INSERT INTO qrtz_triggers
SELECT 'bench', 't' || g, 'grp' || (g % 50), 'job' || (1 + g % ($N / 10)), 'jobs', NULL,
       1893456000000 + g * 1000, -1, 5, 'WAITING', CASE WHEN g % 2 = 0 THEN 'CRON' ELSE 'SIMPLE' END,
       1893456000000 + g * 1000, 0, CASE WHEN g % 5 = 0 THEN 'cal' || (1 + g % 5) END, 0, ''::bytea
FROM generate_series(1, $N) g;
INSERT INTO qrtz_cron_triggers SELECT 'bench', 't' || g, 'grp' || (g % 50), (g % 60) || ' 0 3 * * ?', 'America/New_York'
FROM generate_series(2, $N, 2) g;
INSERT INTO qrtz_simple_triggers SELECT 'bench', 't' || g, 'grp' || (g % 50), -1, 3600000, 0
FROM generate_series(1, $N, 2) g;
SQL
export CHIME_DATABASE_URL=$PG/$DST
"$BIN" migrate >/dev/null 2>&1
run() {
  /usr/bin/time -f "%e %M" -o /tmp/bench-quartz-import.time \
    "$BIN" import quartz --from "$PG/$SRC" --jvm-time-zone Europe/Berlin \
      --job-class com.acme.Job=shell:true --json "$@" >/dev/null
  read -r secs kb < /tmp/bench-quartz-import.time
  echo "$secs s, peak RSS $((kb / 1024)) MiB"
}
echo "bench quartz-import triggers=$N dry_run: $(run --dry-run)"
echo "bench quartz-import triggers=$N import: $(run)"
echo "bench quartz-import triggers=$N again: $(run)"
echo "bench quartz-import triggers=$N imported: $(psql -tA "$PG/$DST" -c "SELECT count(*) FROM triggers") triggers"
