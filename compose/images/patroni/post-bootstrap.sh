#!/bin/sh
# Patroni runs this once, on the node that creates the cluster (initdb), with a connection
# string for the new server as its argument; the standbys get the result by replication.
# Patroni 3.0 no longer creates application users (bootstrap.users is gone), so chime's login
# role and database are made here. The password is passed as a psql variable, quoted by psql.
set -eu
: "${CHIME_PG_PASSWORD:?CHIME_PG_PASSWORD is required: the password of the chime role}"
psql "$1" -v ON_ERROR_STOP=1 -v password="$CHIME_PG_PASSWORD" <<'SQL'
CREATE ROLE chime LOGIN PASSWORD :'password';
CREATE DATABASE chime OWNER chime;
SQL
