-- Where a remote (imp) session's process was when its harness last let go of it: the guest
-- boot, the execution generation and the byte offset after the last output atc has. A revive
-- resumes from it; a daemon restart re-attaches and compares the generation to tell "still
-- the same process" from "replaced". NULL for local sessions.
ALTER TABLE fleet ADD COLUMN remote_boot_id TEXT NULL;
ALTER TABLE fleet ADD COLUMN remote_generation TEXT NULL;
ALTER TABLE fleet ADD COLUMN remote_offset INTEGER NULL;
