-- When a paused trigger was resumed: a fire time that passed while it was paused is a misfire,
-- however short the pause, and follows the trigger's misfire policy (smart: fire once now),
-- rather than every missed time being fired back to back. Cleared by the trigger's next firing.
ALTER TABLE triggers ADD COLUMN resumed_at timestamptz;
