-- The limits a local session's processes run under (issue 35): memory in MiB, processes, and
-- CPU in percent of one core. NULL is no limit. Kept so a restore puts a revived session back
-- under the limits it was spawned with, whatever config says since.
ALTER TABLE fleet ADD COLUMN limit_memory_mib INTEGER NULL;
ALTER TABLE fleet ADD COLUMN limit_pids INTEGER NULL;
ALTER TABLE fleet ADD COLUMN limit_cpu_percent INTEGER NULL;
