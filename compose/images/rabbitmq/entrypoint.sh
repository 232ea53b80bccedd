#!/bin/sh
# Writes the default user into rabbitmq.conf, then runs the broker in the foreground.
set -eu
cat > /etc/rabbitmq/rabbitmq.conf <<CONF
default_user = ${RABBITMQ_DEFAULT_USER:-guest}
default_pass = ${RABBITMQ_DEFAULT_PASS:-guest}
loopback_users = none
CONF
exec rabbitmq-server
