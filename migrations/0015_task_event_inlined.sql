-- task_event was declared IMMUTABLE, but jsonb_build_object of a timestamptz is STABLE (it
-- formats in the session's zone), and PostgreSQL inlines a SQL function only when its body is
-- no more volatile than declared. Not inlined, each statement that wrote events parsed and
-- planned the function's body once per execution and called it per row. As STABLE it is
-- inlined: the statement builds the JSON itself.
ALTER FUNCTION task_event(uuid, integer, text, text, bigint, timestamptz, text, timestamptz) STABLE;
