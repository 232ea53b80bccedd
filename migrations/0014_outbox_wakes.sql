-- A chime service's own outbox relay publishes what the service writes (it is woken in-process),
-- so its sessions say so (`chime.own_relay`, a startup option) and their outbox rows send no
-- NOTIFY: a notifying commit takes a cluster-wide lock, which halved the rate of small outbox
-- commits. Rows written by any other session (psql, a tool, or a process behind a PgBouncer that
-- drops startup options) still wake the schedulers' listening relays.
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('chime.own_relay', true) IS DISTINCT FROM 'on' THEN
        PERFORM pg_notify(current_schema() || '.outbox', '');
    END IF;
    RETURN NULL;
END;
$$;
