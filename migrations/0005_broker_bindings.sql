-- Broker bindings (spec §6.3): one row per host key, and one row per secret granted to that
-- host's imp. Names, rules and states only: there is no column a credential value could go
-- in, and none may be added. Each step of a binder operation is written here before it is
-- taken, so start-up reconciliation knows what a dead daemon left half done.
CREATE TABLE broker_bindings (
    host_key            TEXT PRIMARY KEY NOT NULL,
    target              TEXT NOT NULL,
    target_identity     TEXT NOT NULL,
    imp_name            TEXT NOT NULL,
    -- impd's id for the imp; NULL until this attempt created or found it.
    imp_id              TEXT NULL,
    revision            INTEGER NOT NULL CHECK (revision >= 1),
    -- SHA-256 hex of the canonical {"secrets": [{name, kind, rules}]}.
    hash                TEXT NOT NULL,
    -- The bound secrets as a JSON array of {name, kind, rules}.
    binding_json        TEXT NOT NULL,
    state               TEXT NOT NULL
        CONSTRAINT binding_state CHECK (state IN ('provisioning', 'ready', 'revoked', 'revocation_pending', 'rollback_pending', 'rebind_failed')),
    attempt_id          TEXT NOT NULL,
    created_imp         INTEGER NOT NULL CHECK (created_imp IN (0, 1)),
    -- A rebind in flight: all four set, or none.
    pending_revision    INTEGER NULL,
    pending_hash        TEXT NULL,
    pending_json        TEXT NULL,
    pending_attempt_id  TEXT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    CHECK ((pending_revision IS NULL) = (pending_hash IS NULL)
       AND (pending_hash IS NULL) = (pending_json IS NULL)
       AND (pending_json IS NULL) = (pending_attempt_id IS NULL))
);

-- A grant cannot outlive its binding: dropping the binding drops its grant rows.
CREATE TABLE broker_grants (
    host_key    TEXT NOT NULL REFERENCES broker_bindings (host_key) ON DELETE CASCADE,
    secret      TEXT NOT NULL,
    state       TEXT NOT NULL
        CONSTRAINT grant_state CHECK (state IN ('granting', 'granted', 'uncertain', 'revoking', 'revoked', 'revocation_pending')),
    -- 1 when the grant existed before this binding asked for it (a take-back leaves it).
    preexisted  INTEGER NOT NULL CHECK (preexisted IN (0, 1)),
    -- The create or rebind attempt that recorded it.
    attempt_id  TEXT NOT NULL,
    PRIMARY KEY (host_key, secret)
);
