//! `--log-format json`: one JSON object per line, flat, the way `jq` users expect:
//! `timestamp` (RFC 3339, UTC), `level`, `target`, `message`, then `span` (the innermost span's
//! name) and the fields of every span the event happened in, outermost first, so a request's
//! `request_id` or a session's `session` sits at the top level, then the event's own fields.
//!
//! A nearer value wins a name clash (an event field over a span field, an inner span over an
//! outer one). A field named like one of the fixed keys is written as `field.<name>` rather
//! than overwrite it. What reaches a field is what the code logs: tokens never are (the
//! request span carries the path, never the query, where `access_token=` travels).
//!
//! Span fields are kept by tracing-subscriber's [`JsonFields`] (as a JSON object per span),
//! which is why this formatter only runs with it.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The keys every line has, in this order, ahead of any field.
const FIXED: [&str; 5] = ["timestamp", "level", "target", "message", "span"];

/// The event formatter for `--log-format json`; use it with [`JsonFields`].
pub struct JsonLines;

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let meta = event.metadata();
        let mut line = Line::default();
        line.push("timestamp", Value::String(timestamp));
        line.push("level", Value::String(meta.level().to_string()));
        line.push("target", Value::String(meta.target().to_string()));

        let mut own = FieldMap::default();
        event.record(&mut own);
        let message = own
            .0
            .remove("message")
            .unwrap_or(Value::String(String::new()));
        line.push("message", message);

        let mut span_fields = Map::new();
        let mut innermost = None;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                innermost = Some(span.name());
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<JsonFields>>() else {
                    continue;
                };
                // JsonFields writes an object, or nothing for a span without fields.
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(fields.as_str()) {
                    span_fields.extend(map);
                }
            }
        }
        if let Some(name) = innermost {
            line.push("span", Value::String(name.to_string()));
        }
        for (name, value) in span_fields {
            if !own.0.contains_key(&name) {
                line.push_field(name, value);
            }
        }
        for (name, value) in own.0 {
            line.push_field(name, value);
        }
        writeln!(writer, "{}", line.render())
    }
}

/// A line's keys and values in the order they are written.
#[derive(Default)]
struct Line(Vec<(String, Value)>);

impl Line {
    fn push(&mut self, key: &str, value: Value) {
        self.0.push((key.to_string(), value));
    }

    /// A field, renamed when it would shadow a fixed key.
    fn push_field(&mut self, name: String, value: Value) {
        let key = if FIXED.contains(&name.as_str()) {
            format!("field.{name}")
        } else {
            name
        };
        self.0.push((key, value));
    }

    fn render(&self) -> String {
        let mut out = String::from("{");
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            // Serializing a string or a JSON value cannot fail.
            out.push_str(&Value::String(key.clone()).to_string());
            out.push(':');
            out.push_str(&value.to_string());
        }
        out.push('}');
        out
    }
}

/// An event's fields as JSON values, by name.
#[derive(Default)]
struct FieldMap(std::collections::BTreeMap<String, Value>);

impl Visit for FieldMap {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().into(), Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::String(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What `log` writes, as raw text.
    fn text_of(log: impl FnOnce()) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text
    }

    /// What `log` writes, each line parsed.
    fn lines_of(log: impl FnOnce()) -> Vec<Map<String, Value>> {
        text_of(log)
            .lines()
            .map(|l| match serde_json::from_str(l) {
                Ok(Value::Object(m)) => m,
                other => panic!("not a JSON object: {l:?} ({other:?})"),
            })
            .collect()
    }

    #[test]
    fn an_event_is_one_flat_object_with_the_fixed_keys_first() {
        let log = || tracing::info!(sessions = 3, ok = true, "fleet loaded");
        let text = text_of(log);
        let at: Vec<usize> = ["timestamp", "level", "target", "message", "ok", "sessions"]
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap_or(usize::MAX))
            .collect();
        assert!(at.is_sorted() && at[5] < usize::MAX, "{text}");
        assert!(
            text.starts_with("{\"timestamp\":") && text.ends_with("}\n"),
            "{text}"
        );
        let lines = lines_of(log);
        assert_eq!(lines.len(), 1);
        let l = &lines[0];
        assert_eq!(l["level"], "INFO");
        assert_eq!(l["message"], "fleet loaded");
        assert_eq!(l["target"], module_path!());
        assert_eq!(l["sessions"], 3);
        assert_eq!(l["ok"], true);
        assert!(l["timestamp"].as_str().unwrap().ends_with('Z'), "{l:?}");
        assert!(!l.contains_key("span"));
    }

    #[test]
    fn span_fields_are_top_level_and_the_nearest_wins() {
        let lines = lines_of(|| {
            let request = tracing::info_span!("request", request_id = "r7", path = "/v1/x");
            let _r = request.enter();
            let session = tracing::info_span!("session", session = "s1", path = "/inner");
            let _s = session.enter();
            tracing::warn!(session = "s2", "spawn refused");
        });
        let l = &lines[0];
        assert_eq!(l["span"], "session");
        assert_eq!(l["request_id"], "r7");
        assert_eq!(l["path"], "/inner");
        assert_eq!(l["session"], "s2");
        assert_eq!(l["message"], "spawn refused");
        assert_eq!(l["level"], "WARN");
    }

    #[test]
    fn a_field_named_like_a_fixed_key_does_not_overwrite_it() {
        let lines = lines_of(|| tracing::info!(level = "custom", target = 5, "x"));
        let l = &lines[0];
        assert_eq!(l["level"], "INFO");
        assert_eq!(l["field.level"], "custom");
        assert_eq!(l["field.target"], 5);
    }

    #[test]
    fn display_and_debug_fields_are_strings() {
        let lines = lines_of(|| {
            let e = std::io::Error::other("boom");
            tracing::error!(error = %e, code = ?Some(3), "failed");
        });
        let l = &lines[0];
        assert_eq!(l["error"], "boom");
        assert_eq!(l["code"], "Some(3)");
    }
}
