-- The event trail (spec §10): every hook report but statusline pings, in arrival order.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    ts         TEXT NOT NULL,
    atc_id     TEXT NOT NULL,
    event      TEXT NOT NULL,
    -- Hook message / report label.
    message    TEXT NULL,
    -- The agent's own session id.
    session_id TEXT NULL,
    -- Normalized kind (started, prompt-submitted, needs-input, turn-done, ended, heartbeat).
    kind       TEXT NULL,
    detail     TEXT NULL
);
CREATE INDEX events_atc_ts ON events (atc_id, ts);
CREATE INDEX events_session_ts ON events (session_id, ts);
CREATE INDEX events_kinds ON events (id) WHERE kind IS NOT NULL AND kind != 'heartbeat';
