-- The restorable fleet: one row per session, written by that session's actor only.
-- Columns follow spec §10 where they apply to local sessions; later issues add their own
-- columns in new migrations (this file is never edited once merged).
CREATE TABLE fleet (
    session_id        TEXT PRIMARY KEY NOT NULL,
    agent_session_id  TEXT NULL,
    name              TEXT NOT NULL,
    named_by          TEXT NOT NULL DEFAULT 'auto',
    cwd               TEXT NOT NULL,
    pinned            INTEGER NOT NULL DEFAULT 0,
    last_attached     INTEGER NULL,
    agent             TEXT NOT NULL DEFAULT 'claude',
    -- The argv after the program, as the session was spawned; revive reuses it.
    args              TEXT NOT NULL DEFAULT '[]',
    exited            INTEGER NOT NULL DEFAULT 0,
    exit_code         INTEGER NULL,
    exit_signal       INTEGER NULL,
    exit_reason       TEXT NULL,
    parent_session_id TEXT NULL,
    prompt            TEXT NOT NULL DEFAULT '',
    result            TEXT NULL,
    transcript_path   TEXT NULL,
    model             TEXT NULL,
    effort            TEXT NULL,
    target            TEXT NULL,
    target_identity   TEXT NULL,
    -- 'sleep' / 'stop'; NULL means run.
    desired           TEXT NULL,
    host_key          TEXT NULL,
    cols              INTEGER NOT NULL DEFAULT 80,
    rows              INTEGER NOT NULL DEFAULT 24,
    created_at        INTEGER NOT NULL
);

-- Daemon-wide settings: daemon_id (minted once), last_used_agent.
CREATE TABLE prefs (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);

-- Recent spawn directories for GET /v1/dirs.
CREATE TABLE spawn_history (
    cwd             TEXT PRIMARY KEY NOT NULL,
    last_spawn      INTEGER NOT NULL,
    target          TEXT NULL,
    target_identity TEXT NULL
);
CREATE INDEX spawn_history_recent ON spawn_history (last_spawn DESC);
