-- An ad-hoc task may carry a label (`chime submit --name nightly-export`): shown in lists and
-- found by the list's text search, so a person need not remember its id.
ALTER TABLE tasks ADD COLUMN name text;
