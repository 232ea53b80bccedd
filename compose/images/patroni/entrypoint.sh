#!/bin/sh
# Runs Patroni for this node. Everything per node comes from the environment, which Patroni reads
# itself (PATRONI_NAME, PATRONI_*_CONNECT_ADDRESS, the users' passwords, the REST API's
# password); the addresses default to the node's name, its hostname on the compose network.
set -eu
: "${PATRONI_NAME:=$(hostname)}"
: "${PATRONI_RESTAPI_CONNECT_ADDRESS:=$PATRONI_NAME:8008}"
: "${PATRONI_POSTGRESQL_CONNECT_ADDRESS:=$PATRONI_NAME:5432}"
export PATRONI_NAME PATRONI_RESTAPI_CONNECT_ADDRESS PATRONI_POSTGRESQL_CONNECT_ADDRESS
# Each server names its node in the custom setting chime.node (SELECT
# current_setting('chime.node')), so a client can tell which node it reached. cluster_name cannot
# carry it: Patroni 3.0.2 always sets that to the scope, `chime`. There is no environment
# variable for a server parameter, hence this file beside patroni.yml.
cat > /etc/patroni/zz-node.yml <<YAML
# Written by entrypoint.sh on every start.
postgresql:
  parameters:
    chime.node: '$PATRONI_NAME'
YAML
# Patroni runs as PID 1 on purpose: it then reaps the processes PostgreSQL leaves behind and
# passes signals on (patroni/__main__.py), and `docker stop` makes it stop PostgreSQL cleanly.
exec patroni /etc/patroni
