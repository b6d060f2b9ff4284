//! # units
//!
//! Byte sizes written by people: `4096`, `4KiB`, `64MiB`, `1GB`, `1TiB`. Shared by the node's
//! configuration, its API and the command line, so every place reads sizes alike. A crate
//! of its own, below `node` and `cli`, so the command line reads sizes without the node.

use serde::{Deserialize, Deserializer};

/// Why a text is not a byte size; its message names the text (and the unit, if that is
/// what is wrong).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a non-negative number followed by an optional unit.
    #[error("`{0}` is not a size")]
    NotASize(String),
    /// A number with a unit this crate does not know.
    #[error("`{text}`: unknown unit `{unit}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit as written (lower case).
        unit: String,
    },
}

/// Parses a byte count with an optional unit (decimal `KB`/`MB`/`GB`/`TB` or binary
/// `KiB`/`MiB`/`GiB`/`TiB`; `K`, `M`, `G`, `T` are decimal). The error says what was wrong.
pub fn parse_bytes(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let not_a_size = || SizeError::NotASize(s.to_string());
    let x: f64 = num.parse().map_err(|_| not_a_size())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        u => {
            return Err(SizeError::UnknownUnit {
                text: s.to_string(),
                unit: u.to_string(),
            })
        }
    };
    if !(x.is_finite() && x >= 0.0) {
        return Err(not_a_size());
    }
    Ok((x * mult as f64).round() as u64)
}

/// A byte size in configuration and API bodies: a number of bytes or a string with a unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) if n >= 0 => Ok(ByteSize(n as u64)),
            Raw::Int(n) => Err(serde::de::Error::custom(format!("size {n} is negative"))),
            Raw::Text(s) => parse_bytes(&s)
                .map(ByteSize)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// How a configuration reference describes a size: a number of bytes, or a string with a
/// unit. Its `format` is `byte-size`, so a generated reference can print defaults (which
/// serialise as a number of bytes) with a unit.
impl schemars::JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["integer", "string"],
            "format": "byte-size",
            "minimum": 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("1 GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5MB"), Ok(1_500_000));
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("12 parsecs")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert_eq!(parse_bytes("many"), Err(SizeError::NotASize("many".into())));
    }

    #[test]
    fn serde_forms() {
        let v: ByteSize = serde_json::from_str("\"64MiB\"").unwrap();
        assert_eq!(v.0, 64 << 20);
        let v: ByteSize = serde_json::from_str("512").unwrap();
        assert_eq!(v.0, 512);
        let e = serde_json::from_str::<ByteSize>("-5")
            .unwrap_err()
            .to_string();
        assert!(e.contains("negative"), "{e}");
    }
}
