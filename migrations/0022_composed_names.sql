-- Names are taken in their composed form (NFC) since migration 0022: `café` typed as `e` and a
-- combining accent is stored as `é`. Names stored before in another form are rewritten here,
-- unless their composed spelling already names another object (two jobs that differed only in
-- how an accent was typed): then the composed one keeps the name, and the other keeps its old
-- spelling (reachable by id) for an operator to rename or delete. Of several such spellings of
-- one name and no composed one, the lowest id (or the first in order) takes it.
-- normalize() needs a UTF8 database; any other encoding took names as given, and keeps them.
DO $$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RETURN;
    END IF;

    -- A calendar's triggers follow its new name (ON UPDATE CASCADE).
    UPDATE calendars c SET name = normalize(c.name, NFC)
    WHERE c.name IS NOT NFC NORMALIZED
      AND NOT EXISTS (
          SELECT 1 FROM calendars d
          WHERE d.name <> c.name AND normalize(d.name, NFC) = normalize(c.name, NFC)
            AND (d.name IS NFC NORMALIZED OR d.name < c.name));

    UPDATE jobs j SET group_name = normalize(j.group_name, NFC), name = normalize(j.name, NFC)
    WHERE (j.group_name IS NOT NFC NORMALIZED OR j.name IS NOT NFC NORMALIZED)
      AND NOT EXISTS (
          SELECT 1 FROM jobs k
          WHERE k.id <> j.id
            AND normalize(k.group_name, NFC) = normalize(j.group_name, NFC)
            AND normalize(k.name, NFC) = normalize(j.name, NFC)
            AND ((k.group_name IS NFC NORMALIZED AND k.name IS NFC NORMALIZED) OR k.id < j.id));

    UPDATE triggers t SET group_name = normalize(t.group_name, NFC), name = normalize(t.name, NFC)
    WHERE (t.group_name IS NOT NFC NORMALIZED OR t.name IS NOT NFC NORMALIZED)
      AND NOT EXISTS (
          SELECT 1 FROM triggers u
          WHERE u.id <> t.id
            AND normalize(u.group_name, NFC) = normalize(t.group_name, NFC)
            AND normalize(u.name, NFC) = normalize(t.name, NFC)
            AND ((u.group_name IS NFC NORMALIZED AND u.name IS NFC NORMALIZED) OR u.id < t.id));

    UPDATE paused_trigger_groups p SET group_name = normalize(p.group_name, NFC)
    WHERE p.group_name IS NOT NFC NORMALIZED
      AND NOT EXISTS (
          SELECT 1 FROM paused_trigger_groups q
          WHERE q.group_name <> p.group_name
            AND normalize(q.group_name, NFC) = normalize(p.group_name, NFC)
            AND (q.group_name IS NFC NORMALIZED OR q.group_name < p.group_name));
END
$$;
