-- The leader of a local session's process group while its process runs: pid, start time
-- (clock ticks since boot, /proc/<pid>/stat field 22) and boot id. A daemon killed with
-- SIGKILL cannot end a process that ignores the PTY's hangup; the next one ends the group
-- before any restore, but only while all three still name the same process. NULL while no
-- local process runs (and for remote sessions).
ALTER TABLE fleet ADD COLUMN leader_pid INTEGER NULL;
ALTER TABLE fleet ADD COLUMN leader_start_ticks INTEGER NULL;
ALTER TABLE fleet ADD COLUMN leader_boot_id TEXT NULL;
