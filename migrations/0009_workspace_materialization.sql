-- Each session's workspace and how far its materialization got (spec §10). A row is written
-- before the first phase starts and its phase before each next one, so a daemon that stops
-- mid-way finds at its next start what was half made: rows short of 'ready' become 'failed'
-- with 'workspace_interrupted', and their directories are removed. No column holds a
-- credential: repo_url is stored without one (a URL carrying one is refused before this).
CREATE TABLE workspace_materialization (
    session_id TEXT PRIMARY KEY NOT NULL,
    target TEXT NOT NULL,
    dir TEXT NOT NULL,
    source_kind TEXT NOT NULL CHECK (source_kind IN ('path', 'git')),
    phase TEXT NOT NULL CHECK (phase IN ('resolving', 'cloning', 'transferring', 'verifying', 'ready', 'failed')),
    repo_url TEXT NOT NULL,
    sha TEXT NULL,
    ref TEXT NULL,
    -- The worktree's branch in the user's repository (path sources only); it stays there
    -- when the workspace goes.
    branch TEXT NULL,
    -- The host the copy is on when that is not the daemon's machine (an imp's host key);
    -- NULL: on this machine, under the state dir's workspaces/.
    host_key TEXT NULL,
    error_code TEXT NULL,
    started_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    materialized_at INTEGER NULL,
    -- JSON array of the environment variable names kept from the workspace's commands.
    withheld_env TEXT NOT NULL DEFAULT '[]'
);
