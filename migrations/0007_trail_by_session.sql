-- The trail is kept per session (each append deletes what its session has beyond its share,
-- newest rows kept) and forgetting a session deletes its rows: both walk a session's rows in
-- id order, which (atc_id, ts) does not give.
CREATE INDEX events_atc_id ON events (atc_id, id);
