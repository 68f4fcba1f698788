-- A session's working directory enters the spawn history when its fleet row is first
-- inserted, inside that same statement, rather than by a statement of its own. Every
-- statement is a round trip to sqlx's worker thread, and in a spawn storm the separate
-- history write was one of the two each spawn made (README, "Spawns, 2026-12-04": the
-- daemon's context switches per 1,000 spawns fell by about 15 %).
--
-- AFTER INSERT fires only when the row is new: an upsert that updates an existing row (a
-- session's later writes) runs the UPDATE triggers instead, of which there are none.
CREATE TRIGGER fleet_insert_records_spawn_dir AFTER INSERT ON fleet
BEGIN
    INSERT INTO spawn_history (cwd, last_spawn) VALUES (NEW.cwd, NEW.created_at)
    ON CONFLICT (cwd) DO UPDATE SET last_spawn = excluded.last_spawn;
END;
