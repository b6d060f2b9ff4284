//! Durations in configuration files, written as humantime does (`"30s"`, `"1m 30s"`,
//! `"500ms"`, `"50us"`, `"0.5s"`), as scenario files write them; and the keys that once
//! held a plain number of seconds or microseconds, refused with the name of the key that
//! replaced them (a file written for an older version fails naming what to write, rather
//! than being read with a default). The controller's configuration uses the same.

use serde::Deserialize;
use std::time::Duration;

/// A text that is not a duration: it names the text and says what a duration looks like.
#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not a duration such as \"30s\" or \"2m\": {source}")]
pub struct DurationError {
    /// The text as written.
    pub text: String,
    /// What humantime found wrong with it.
    #[source]
    pub source: humantime::DurationError,
}

/// A key that was renamed, still used: it names the key and what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}.{}: this key is now `{}`, a duration (`{} = {}`)", .0.table, .0.old, .0.new, .0.new, .0.example)]
pub struct RenamedKey(pub Renamed);

/// `text` as a duration; the error says what a duration looks like.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    humantime::parse_duration(text).map_err(|source| DurationError {
        text: text.to_string(),
        source,
    })
}

/// How a configuration reference describes a duration key: a humantime string
/// (`format: duration`). Used as `#[schemars(with = "DurationText")]` on `Duration` fields.
pub struct DurationText;

impl schemars::JsonSchema for DurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "duration" })
    }
}

/// Deserializes a duration from its humantime string.
pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

/// A key of table `table` that was renamed: `old` is now `new`, e.g. `example`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renamed {
    /// The table (`node`, `controller`).
    pub table: &'static str,
    /// The old key.
    pub old: &'static str,
    /// The key that replaced it.
    pub new: &'static str,
    /// A value of the new key, as it is written.
    pub example: &'static str,
}

/// The first key of `renamed` that `text` (a TOML file) still uses, as an error naming
/// the key and what replaced it; `Ok` if none (or if `text` is not TOML at all: the real
/// parse says what is wrong with it).
pub fn refuse_renamed(text: &str, renamed: &[Renamed]) -> Result<(), RenamedKey> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Ok(());
    };
    for r in renamed {
        let used = doc
            .get(r.table)
            .and_then(|t| t.as_table())
            .is_some_and(|t| t.contains_key(r.old));
        if used {
            return Err(RenamedKey(*r));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_renamed_keys() {
        assert_eq!(parse("50us").unwrap(), Duration::from_micros(50));
        assert_eq!(parse("0.5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("1m 30s").unwrap(), Duration::from_secs(90));
        assert!(parse("soon").unwrap_err().to_string().contains("soon"));
        let r = [Renamed {
            table: "node",
            old: "heartbeat_secs",
            new: "heartbeat",
            example: "\"2s\"",
        }];
        let e = refuse_renamed("[node]\nheartbeat_secs = 2\n", &r).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node.heartbeat_secs: this key is now `heartbeat`, a duration (`heartbeat = \"2s\"`)"
        );
        assert!(refuse_renamed("[node]\nheartbeat = \"2s\"\n", &r).is_ok());
        assert!(refuse_renamed("[other]\nheartbeat_secs = 2\n", &r).is_ok());
    }
}
