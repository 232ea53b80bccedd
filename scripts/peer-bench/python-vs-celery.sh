#!/usr/bin/env bash
# The Python client's round trips against Celery 5's delay() + get() (rpc:// backend), one
# sitting: a `chime up` of a release build on a database and prefix of its own, then a Celery
# worker on the same RabbitMQ. Needs the servers (scripts/ensure-services) and cargo.
#   scripts/peer-bench/python-vs-celery.sh [N] [MANY]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/credentials CHIME_TEST_DATABASE_URL CHIME_TEST_AMQP_URL
db_server=${CHIME_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432}
amqp=${CHIME_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
n=${1:-200} many=${2:-1000}
cargo build --release --bin chime
python3 -m venv target/bench-venv
target/bench-venv/bin/pip install --quiet ./clients/python 'celery>=5.3,<6'
name=pybench$$
psql "$db_server/postgres" -qc "CREATE DATABASE $name"
port=18$(( RANDOM % 900 + 100 ))
CHIME_DATABASE_URL="$db_server/$name" CHIME_AMQP_URL="$amqp" CHIME_PREFIX="$name" \
  CHIME_CONFIG=/nonexistent CHIME_WORKER__ALLOW_OPEN_STORE=true \
  target/release/chime up --api-addr "127.0.0.1:$port" > "target/$name.log" 2>&1 &
up=$!
celery_worker=
cleanup() {
  kill "$up" ${celery_worker:+"$celery_worker"} 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$db_server/postgres" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" || true
}
trap cleanup EXIT
for _ in $(seq 1 120); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.5; done
CHIME_API_URL="http://127.0.0.1:$port" target/bench-venv/bin/python scripts/peer-bench/roundtrip.py chime --n "$n" --many "$many"
kill "$up"; wait "$up" 2>/dev/null || true
# Celery's broker URL names the vhost as a path ('%2f' is '/').
export CELERY_BROKER_URL="$amqp"
(cd scripts/peer-bench && exec ../../target/bench-venv/bin/python roundtrip.py worker) > "target/$name-celery.log" 2>&1 &
celery_worker=$!
sleep 5
(cd scripts/peer-bench && ../../target/bench-venv/bin/python roundtrip.py celery --n "$n" --many "$many")
