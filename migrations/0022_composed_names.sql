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

    -- A paused group's mark is given its composed spelling before the triggers move to it,
    -- unless triggers already use that spelling (they are another group, not paused); the old
    -- mark goes once no trigger is left under its spelling (below).
    INSERT INTO paused_trigger_groups (group_name, paused_at)
    SELECT DISTINCT ON (normalize(p.group_name, NFC)) normalize(p.group_name, NFC), p.paused_at
    FROM paused_trigger_groups p
    WHERE p.group_name IS NOT NFC NORMALIZED
      AND NOT EXISTS (SELECT 1 FROM triggers t WHERE t.group_name = normalize(p.group_name, NFC))
    ORDER BY normalize(p.group_name, NFC), p.group_name
    ON CONFLICT (group_name) DO NOTHING;

    -- A trigger does not move into a group paused otherwise than its own.
    UPDATE triggers t SET group_name = normalize(t.group_name, NFC), name = normalize(t.name, NFC)
    WHERE (t.group_name IS NOT NFC NORMALIZED OR t.name IS NOT NFC NORMALIZED)
      AND EXISTS (SELECT 1 FROM paused_trigger_groups p WHERE p.group_name = t.group_name)
          = EXISTS (SELECT 1 FROM paused_trigger_groups p
                    WHERE p.group_name = normalize(t.group_name, NFC))
      AND NOT EXISTS (
          SELECT 1 FROM triggers u
          WHERE u.id <> t.id
            AND normalize(u.group_name, NFC) = normalize(t.group_name, NFC)
            AND normalize(u.name, NFC) = normalize(t.name, NFC)
            AND ((u.group_name IS NFC NORMALIZED AND u.name IS NFC NORMALIZED) OR u.id < t.id));

    DELETE FROM paused_trigger_groups p
    WHERE p.group_name IS NOT NFC NORMALIZED
      AND NOT EXISTS (SELECT 1 FROM triggers t WHERE t.group_name = p.group_name)
      AND EXISTS (SELECT 1 FROM paused_trigger_groups q
                  WHERE q.group_name = normalize(p.group_name, NFC));
END
$$;
