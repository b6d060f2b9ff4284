//! Parsing of cache sizes given on the command line: a share of the trace's footprint
//! (`5%`), an absolute count of cache entries (`1000`), or bytes with a unit (`64MiB`,
//! `1GB`) converted with the block size.

use anyhow::{bail, Context};

/// One requested cache size, before the footprint is known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeSpec {
    /// A fraction of the footprint (unique objects or blocks), in `(0, 1]` or larger.
    Share(f64),
    /// A number of cache entries (objects or blocks).
    Entries(u64),
    /// A number of bytes, divided by the entry size.
    Bytes(u64),
}

impl SizeSpec {
    /// The size in entries given the footprint in entries and the bytes per entry.
    pub fn resolve(self, footprint: u64, entry_bytes: u64) -> u64 {
        match self {
            SizeSpec::Share(f) => ((footprint as f64) * f).round().max(1.0) as u64,
            SizeSpec::Entries(n) => n,
            SizeSpec::Bytes(b) => (b / entry_bytes.max(1)).max(1),
        }
    }

    /// Whether resolving needs the footprint.
    pub fn needs_footprint(self) -> bool {
        matches!(self, SizeSpec::Share(_))
    }
}

/// Parses a byte count with an optional unit (`4096`, `4KiB`, `1M`, `2GB`, `1TiB`); the
/// node's configuration reads sizes with the same function.
pub fn parse_bytes(s: &str) -> anyhow::Result<u64> {
    units::parse_bytes(s).map_err(anyhow::Error::msg)
}

/// Parses a comma-separated list of sizes.
pub fn parse_sizes(list: &str) -> anyhow::Result<Vec<SizeSpec>> {
    let mut v = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let spec = if let Some(p) = item.strip_suffix('%') {
            let f: f64 = p
                .trim()
                .parse()
                .with_context(|| format!("size `{item}`: `{p}` is not a percentage"))?;
            if !(f.is_finite() && f > 0.0) {
                bail!("size `{item}`: the share must be positive");
            }
            SizeSpec::Share(f / 100.0)
        } else if item.chars().all(|c| c.is_ascii_digit()) {
            SizeSpec::Entries(
                item.parse()
                    .with_context(|| format!("size `{item}` is too large"))?,
            )
        } else {
            SizeSpec::Bytes(parse_bytes(item).with_context(|| format!("size `{item}`"))?)
        };
        v.push(spec);
    }
    if v.is_empty() {
        bail!("no cache size given");
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_forms() {
        let v = parse_sizes("1%, 1000,64MiB").unwrap();
        assert_eq!(v[0], SizeSpec::Share(0.01));
        assert_eq!(v[1], SizeSpec::Entries(1000));
        assert_eq!(v[2], SizeSpec::Bytes(64 << 20));
        assert_eq!(v[2].resolve(0, 4096), 16384);
        assert_eq!(v[0].resolve(250, 4096), 3);
    }

    #[test]
    fn rejects_nonsense() {
        assert!(parse_sizes("-5%").is_err());
        assert!(parse_sizes("abc").is_err());
        assert!(parse_sizes("").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
    }
}
