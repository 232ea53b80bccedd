-- The audit trail names what a change was made to (`job default.export`, `trigger
-- default.nightly`: a creation's path names only the collection) and, for an update, each
-- setting before and after (`[{"field", "before", "after"}]`).
ALTER TABLE audit_events ADD COLUMN object text, ADD COLUMN changes jsonb;
CREATE INDEX audit_events_by_object ON audit_events (object, id);
