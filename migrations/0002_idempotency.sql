-- The idempotency ledger (spec §7): one row per (principal, operation, key). A claim is
-- inserted in_progress before the effect runs, completed with its result once the effect is
-- durable, or left outcome_unknown when it may or may not have happened.
CREATE TABLE idempotency (
    principal              TEXT NOT NULL,
    operation              TEXT NOT NULL,
    key                    TEXT NOT NULL,
    payload_hash           TEXT NOT NULL,
    -- 'in_progress' | 'completed' | 'outcome_unknown'
    state                  TEXT NOT NULL,
    -- The effect's id (a session id for spawns), minted before the effect runs.
    effect_ref             TEXT NOT NULL,
    result                 TEXT NULL,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    effect_target          TEXT NULL,
    effect_target_identity TEXT NULL,
    PRIMARY KEY (principal, operation, key)
);
CREATE INDEX idempotency_state_updated ON idempotency (state, updated_at);
