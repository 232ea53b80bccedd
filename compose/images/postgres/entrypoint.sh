#!/bin/sh
# Initialises the cluster on first start (the user, password and database from the environment),
# then runs the server in the foreground on every interface.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-postgres}" > "$pwfile"
  "$bin/initdb" -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --pwfile="$pwfile" --auth-host=scram-sha-256 --auth-local=trust >/dev/null
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "host all all ::/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ -n "${POSTGRES_DB:-}" ] && [ "${POSTGRES_DB}" != "${POSTGRES_USER:-postgres}" ]; then
    "$bin/postgres" --single -D "$PGDATA" postgres <<SQL >/dev/null
CREATE DATABASE "${POSTGRES_DB}" OWNER "${POSTGRES_USER:-postgres}";
SQL
  fi
fi
exec "$bin/postgres" -D "$PGDATA" -c listen_addresses='*'
