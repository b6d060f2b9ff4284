//! `--policy` as `sim` and `mrc` take it: repeatable, and each value a comma-separated
//! list of policy specs (`name` or `name:key=value,...`).
//!
//! A spec's own parameters are separated by commas too, so a comma-separated item is a new
//! policy unless it is a bare `key=value` (no `:`, has `=`): then it continues the previous
//! policy's parameters. Policy names never contain `=`, so `lru,2q:kin=0.3,kout=0.6,arc`
//! is three policies, LRU, 2Q with both parameters, and ARC. Every spec is checked with
//! [`policy::build`] before anything runs; an error names the spec.

use anyhow::{bail, Context};

/// The policy specs in `values` (one per `--policy`), in order, each checked.
pub fn policy_specs(values: &[String]) -> anyhow::Result<Vec<String>> {
    let mut specs: Vec<String> = Vec::new();
    for value in values {
        let mut in_value: Vec<String> = Vec::new();
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let continues = !item.contains(':') && item.contains('=');
            match in_value.last_mut() {
                Some(prev) if continues => {
                    prev.push(if prev.contains(':') { ',' } else { ':' });
                    prev.push_str(item);
                }
                None if continues => {
                    bail!("--policy {value}: `{item}` is a parameter with no policy before it")
                }
                _ => in_value.push(item.to_string()),
            }
        }
        specs.extend(in_value);
    }
    if specs.is_empty() {
        bail!("--policy: no policy given");
    }
    for s in &specs {
        policy::build(s).with_context(|| format!("--policy {s}"))?;
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(v: &[&str]) -> anyhow::Result<Vec<String>> {
        policy_specs(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn parameters_stay_with_their_policy() {
        assert_eq!(
            specs(&["lru,2q:kin=0.3,kout=0.6,arc"]).unwrap(),
            ["lru", "2q:kin=0.3,kout=0.6", "arc"]
        );
        assert_eq!(
            specs(&[
                "2q:kin=0.3,kout=0.6",
                "s3fifo:small-size-ratio=0.2",
                "lru,clock"
            ])
            .unwrap(),
            [
                "2q:kin=0.3,kout=0.6",
                "s3fifo:small-size-ratio=0.2",
                "lru",
                "clock"
            ]
        );
    }

    #[test]
    fn bad_specs_are_named() {
        let e = specs(&["kin=0.3"]).unwrap_err().to_string();
        assert!(
            e.contains("`kin=0.3` is a parameter with no policy before it"),
            "{e}"
        );
        let e = format!("{:#}", specs(&["2q:kin=0.3,kot=0.6"]).unwrap_err());
        assert!(
            e.contains("--policy 2q:kin=0.3,kot=0.6") && e.contains("`kot`"),
            "{e}"
        );
        let e = format!("{:#}", specs(&["lru,nosuch"]).unwrap_err());
        assert!(e.contains("unknown policy `nosuch`"), "{e}");
    }
}
