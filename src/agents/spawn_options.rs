//! Spawn options (spec §9.2): `model` and `effort`, what each agent kind takes, how a value is
//! checked before anything starts, and how it becomes argv. Overrides never pass through a
//! shell: each flag and value is its own argv element.

use crate::config::agent_kind::AgentKind;
use atc_protocol::responses::{
    BackendEffect, SpawnOptionExample, SpawnOptionListing, SpawnOptions,
};

use super::AgentError;

/// Claude's closed set of efforts.
const CLAUDE_EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// Model examples Claude's listing offers.
const CLAUDE_MODELS: &[&str] = &[
    "best",
    "fable",
    "opus",
    "sonnet",
    "haiku",
    "opus[1m]",
    "sonnet[1m]",
    "opusplan",
];

/// Longest option value.
const MAX_VALUE: usize = 200;

/// The two spawn options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnOption {
    /// `model`.
    Model,
    /// `effort`.
    Effort,
}

impl SpawnOption {
    fn name(self) -> &'static str {
        match self {
            SpawnOption::Model => "model",
            SpawnOption::Effort => "effort",
        }
    }
}

/// How an agent kind takes an option: its flags (the first is the one atc appends) and the
/// closed set of values, if any.
struct Shape {
    flags: &'static [&'static str],
    values: Option<&'static [&'static str]>,
}

fn shape(kind: Option<AgentKind>, option: SpawnOption) -> Option<Shape> {
    match (kind, option) {
        (Some(AgentKind::Claude), SpawnOption::Model) => Some(Shape {
            flags: &["--model"],
            values: None,
        }),
        (Some(AgentKind::Claude), SpawnOption::Effort) => Some(Shape {
            flags: &["--effort"],
            values: Some(CLAUDE_EFFORTS),
        }),
        (Some(AgentKind::Codex), SpawnOption::Model) => Some(Shape {
            flags: &["-m", "--model"],
            values: None,
        }),
        _ => None,
    }
}

/// Checks one override in the spec's order. `installed` is whether the agent can be spawned.
pub fn validate(
    kind: Option<AgentKind>,
    agent: &str,
    installed: bool,
    option: SpawnOption,
    value: &str,
) -> Result<(), AgentError> {
    let name = option.name();
    let Some(shape) = shape(kind, option) else {
        return Err(AgentError::NoSuchOption {
            agent: agent.to_string(),
            option: name,
        });
    };
    if !installed {
        return Err(AgentError::OptionForUninstalled {
            agent: agent.to_string(),
            option: name,
        });
    }
    if value.is_empty() || value.chars().count() > MAX_VALUE {
        return Err(AgentError::OptionLength { option: name });
    }
    if value.starts_with('-') || value.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}') {
        return Err(AgentError::OptionUnsafe { option: name });
    }
    if let Some(values) = shape.values {
        if !values.contains(&value) {
            return Err(AgentError::OptionNotOneOf {
                option: name,
                values,
            });
        }
    }
    Ok(())
}

/// The configured args with every occurrence of the option's flags (and their values) removed
/// and the override appended as two argv elements.
pub fn apply(
    kind: Option<AgentKind>,
    args: &[String],
    option: SpawnOption,
    value: &str,
) -> Vec<String> {
    let Some(shape) = shape(kind, option) else {
        return args.to_vec();
    };
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut skip_next = false;
    for a in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        if shape.flags.contains(&a.as_str()) {
            skip_next = true;
            continue;
        }
        if shape
            .flags
            .iter()
            .any(|f| f.starts_with("--") && a.starts_with(&format!("{f}=")))
        {
            continue;
        }
        out.push(a.clone());
    }
    out.push(shape.flags[0].to_string());
    out.push(value.to_string());
    out
}

/// The value the configured args pass for an option, if any.
fn configured(kind: Option<AgentKind>, args: &[String], option: SpawnOption) -> Option<String> {
    let shape = shape(kind, option)?;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if shape.flags.contains(&a.as_str()) {
            return it.next().cloned();
        }
        for f in shape.flags.iter().filter(|f| f.starts_with("--")) {
            if let Some(v) = a.strip_prefix(&format!("{f}=")) {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// `spawnOptions` for the agents listing (spec §9.2). A Claude gateway offers the model tiers
/// its environment maps, defaults to `ANTHROPIC_MODEL` when its args name no model, and cannot
/// vouch that the backend honours an effort (`backendEffect: unverified`).
pub fn listing(agent: &super::Agent, spawnable: bool) -> SpawnOptions {
    let kind = agent.kind;
    let args = &agent.args;
    let gateway = agent
        .is_gateway()
        .then(|| agent.models().unwrap_or_default());
    let entry = |option: SpawnOption| match shape(kind, option) {
        None => SpawnOptionListing {
            supported: false,
            available: false,
            values: None,
            examples: Vec::new(),
            default: None,
            backend_effect: None,
            note: Some(format!("takes no {}", option.name())),
        },
        Some(s) => {
            let examples: Vec<SpawnOptionExample> = match (kind, option, &gateway) {
                (Some(AgentKind::Claude), SpawnOption::Model, Some(tiers)) => tiers
                    .iter()
                    .filter(|(tier, _)| tier.as_str() != "default")
                    .map(|(tier, model)| SpawnOptionExample {
                        value: tier.clone(),
                        resolves_to: Some(model.clone()),
                    })
                    .collect(),
                (Some(AgentKind::Claude), SpawnOption::Model, None) => CLAUDE_MODELS
                    .iter()
                    .map(|m| SpawnOptionExample {
                        value: m.to_string(),
                        resolves_to: None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let mut default = configured(kind, args, option);
            if let (None, SpawnOption::Model, Some(tiers)) = (&default, option, &gateway) {
                default = tiers.get("default").cloned();
            }
            let effect = match (option, &gateway) {
                (SpawnOption::Effort, Some(_)) => BackendEffect::Unverified,
                _ => BackendEffect::Applied,
            };
            SpawnOptionListing {
                supported: true,
                available: spawnable,
                values: s
                    .values
                    .map(|values| values.iter().map(|v| v.to_string()).collect()),
                examples,
                default,
                backend_effect: Some(effect),
                note: None,
            }
        }
    };
    SpawnOptions {
        model: entry(SpawnOption::Model),
        effort: entry(SpawnOption::Effort),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// kind, installed, option, value, expected error code.
    type Case<'a> = (
        Option<AgentKind>,
        bool,
        SpawnOption,
        &'a str,
        Option<&'a str>,
    );

    #[test]
    fn validation_follows_the_spec_order() {
        let cases: &[Case] = &[
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Model,
                "opus",
                None,
            ),
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Effort,
                "high",
                None,
            ),
            (
                Some(AgentKind::Codex),
                true,
                SpawnOption::Model,
                "gpt-5",
                None,
            ),
            (
                Some(AgentKind::Codex),
                true,
                SpawnOption::Effort,
                "high",
                Some("unsupported"),
            ),
            (
                Some(AgentKind::Grok),
                true,
                SpawnOption::Model,
                "x",
                Some("unsupported"),
            ),
            (None, true, SpawnOption::Model, "x", Some("unsupported")),
            (
                Some(AgentKind::Claude),
                false,
                SpawnOption::Model,
                "opus",
                Some("unsupported"),
            ),
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Model,
                "",
                Some("bad_args"),
            ),
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Model,
                &"m".repeat(201),
                Some("bad_args"),
            ),
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Model,
                "--dangerous",
                Some("bad_args"),
            ),
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Model,
                "op\nus",
                Some("bad_args"),
            ),
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Model,
                "op\u{7f}us",
                Some("bad_args"),
            ),
            (
                Some(AgentKind::Claude),
                true,
                SpawnOption::Effort,
                "extreme",
                Some("bad_args"),
            ),
            // An unsupported option is refused before its value is looked at.
            (
                Some(AgentKind::Grok),
                true,
                SpawnOption::Effort,
                "",
                Some("unsupported"),
            ),
        ];
        for (kind, installed, option, value, want) in cases {
            let got = validate(*kind, "a", *installed, *option, value)
                .err()
                .map(|e| crate::server::error::Error::from(e).code().as_str());
            assert_eq!(got, *want, "{kind:?} {option:?} {value:?}");
        }
        let e = validate(Some(AgentKind::Claude), "a", true, SpawnOption::Effort, "x").unwrap_err();
        assert_eq!(
            crate::server::error::Error::from(e).wire().data["field"],
            "effort"
        );
    }

    #[test]
    fn overrides_replace_every_configured_occurrence() {
        let given = args(&["--model", "a", "--verbose", "--model=b", "--effort", "low"]);
        assert_eq!(
            apply(Some(AgentKind::Claude), &given, SpawnOption::Model, "opus"),
            args(&["--verbose", "--effort", "low", "--model", "opus"])
        );
        assert_eq!(
            apply(
                Some(AgentKind::Codex),
                &args(&["-m", "o3", "--model", "x", "exec"]),
                SpawnOption::Model,
                "gpt-5"
            ),
            args(&["exec", "-m", "gpt-5"])
        );
        // A value with spaces stays one argv element.
        assert_eq!(
            apply(Some(AgentKind::Claude), &[], SpawnOption::Model, "my model"),
            args(&["--model", "my model"])
        );
        assert_eq!(
            configured(Some(AgentKind::Claude), &given, SpawnOption::Model).as_deref(),
            Some("a")
        );
    }
}
