//! [`EvictionSpec`]: an eviction-policy spec parsed once, where it enters the system (a
//! configuration file, an API call), and carried typed from there to the cache that
//! builds the policy.
//!
//! The text form is the one [`crate::build`] takes, `name` or `name:key=value,...`.
//! Parsing checks everything [`crate::build`] would (the name against the registry, every
//! parameter's key and range), so a spec that parsed always builds. The name is kept in
//! its canonical form whatever was typed (`LRU`, ` lru`, `lru:` are all `lru`; aliases
//! such as `twoq` become `2q`), parameter keys lower-cased and trimmed, so
//! [`EvictionSpec::name`] and the [`Display`](std::fmt::Display) form are what stats and
//! logs report.

use crate::{build, canonical, EvictionPolicy, Params, PolicyError, POLICY_NAMES};
use std::fmt;
use std::str::FromStr;

/// A checked eviction-policy spec: a canonical policy name and its parameters.
/// Serialised as its text form (see [`Display`](std::fmt::Display)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionSpec {
    name: &'static str,
    params: Vec<(String, String)>,
}

impl EvictionSpec {
    /// The canonical policy name (one of [`POLICY_NAMES`]).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The parameters, `(key, value)` in the order given, keys lower-case.
    pub fn params(&self) -> &[(String, String)] {
        &self.params
    }

    /// Builds the policy. Cannot fail for a spec that parsed; the `Result` only keeps
    /// a caller from having to panic if the registry ever disagreed with the parse.
    pub fn build(&self) -> Result<Box<dyn EvictionPolicy>, PolicyError> {
        build(&self.to_string())
    }
}

impl Default for EvictionSpec {
    /// LRU without parameters.
    fn default() -> Self {
        EvictionSpec {
            name: "lru",
            params: Vec::new(),
        }
    }
}

impl FromStr for EvictionSpec {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, PolicyError> {
        let (name, params) = text.split_once(':').unwrap_or((text, ""));
        let name = canonical(name.trim()).ok_or_else(|| PolicyError::UnknownPolicy {
            name: name.trim().into(),
            known: POLICY_NAMES.join(", "),
        })?;
        // Malformed pairs are reported as `build` reports them.
        Params::parse(name, params)?;
        let params = params
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let spec = EvictionSpec { name, params };
        // Unknown keys and out-of-range values: the policy's own checks.
        spec.build()?;
        Ok(spec)
    }
}

impl serde::Serialize for EvictionSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for EvictionSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for EvictionSpec {
    /// The canonical text form: `name`, or `name:key=value,...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)?;
        for (i, (k, v)) in self.params.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { ':' } else { ',' })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_canonical_whatever_was_typed() {
        for typed in ["LRU", " lru", "lru:", "lru: ", "Lru"] {
            let spec: EvictionSpec = typed.parse().unwrap();
            assert_eq!(spec.name(), "lru", "{typed:?}");
            assert_eq!(spec.to_string(), "lru", "{typed:?}");
        }
        assert_eq!("arc:".parse::<EvictionSpec>().unwrap().name(), "arc");
        assert_eq!("twoq".parse::<EvictionSpec>().unwrap().name(), "2q");
        let s: EvictionSpec = "LIRS: HIR = 0.01 ".parse().unwrap();
        assert_eq!(s.to_string(), "lirs:hir=0.01");
        assert_eq!(s.to_string().parse::<EvictionSpec>().unwrap(), s);
    }

    #[test]
    fn bad_specs_fail_to_parse_as_build_fails() {
        for bad in [
            "belady",
            "",
            "lirs:hir",
            "lirs:hir=2",
            "lru:k=3",
            "2q:kin=x",
        ] {
            let parsed = bad.parse::<EvictionSpec>().unwrap_err().to_string();
            let built = build(bad).map(|_| ()).unwrap_err().to_string();
            assert_eq!(parsed, built, "{bad:?}");
        }
    }

    #[test]
    fn every_registered_policy_parses_and_builds() {
        for name in POLICY_NAMES {
            let spec: EvictionSpec = name.parse().unwrap();
            assert_eq!(spec.name(), *name);
            spec.build().unwrap();
        }
    }

    #[test]
    fn serialises_as_its_text() {
        let spec: EvictionSpec = serde_json::from_str("\"ARC\"").unwrap();
        assert_eq!(spec.name(), "arc");
        assert_eq!(serde_json::to_string(&spec).unwrap(), "\"arc\"");
        let e = serde_json::from_str::<EvictionSpec>("\"belady\"").unwrap_err();
        assert!(e.to_string().contains("unknown policy `belady`"), "{e}");
    }
}
