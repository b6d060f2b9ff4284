//! The one rule for names that reach a node or a controller from outside: tenants,
//! volumes, caches, exports and nodes.
//!
//! A name is 1 to [`MAX_LEN`] bytes of ASCII letters, digits, `-`, `_` and `.`, and does
//! not start with `.` (so `.`, `..` and hidden files are never names). Names become URL
//! path segments (`/v1/caches/NAME`), file names (`cache-NAME.log`) and metric labels, and
//! none of those may be able to escape where it is put.
//!
//! Every place that takes a name from the API or a configuration file calls [`check`]
//! with the field it came from, so the error names the field:
//!
//! ```
//! assert!(api::names::check("volume.name", "db-1").is_ok());
//! let e = api::names::check("volume.name", "..").unwrap_err();
//! assert!(e.to_string().starts_with("volume.name: "));
//! ```

/// The longest name, in bytes.
pub const MAX_LEN: usize = 64;

/// The rule in words, as error messages give it.
pub const RULE: &str = "use 1 to 64 letters, digits, `-`, `_` and `.`, not starting with `.`";

/// A name that breaks the rule, with the field it was given in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: `{shown}` is not a valid name: {RULE}")]
pub struct InvalidName {
    /// The field (`tenant "db".volume "x".name`).
    pub field: String,
    /// The name as given (cut to 80 characters, control characters escaped).
    pub shown: String,
}

/// Whether `name` follows the rule.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LEN
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `Ok` if `name` follows the rule, else an error naming `field`.
pub fn check(field: &str, name: &str) -> Result<(), InvalidName> {
    if is_valid(name) {
        return Ok(());
    }
    let shown: String = name.chars().take(80).flat_map(char::escape_debug).collect();
    Err(InvalidName {
        field: field.to_string(),
        shown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        for good in [
            "a",
            "db",
            "db-1",
            "v_2",
            "a.b",
            "a..b",
            "x.",
            "A9",
            &"x".repeat(64),
        ] {
            assert!(is_valid(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "../etc",
            "a/b",
            "a b",
            "a\0",
            "é",
            "a%2e",
            &"x".repeat(65),
        ] {
            assert!(!is_valid(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_error_names_the_field_and_the_rule() {
        let e = check("tenant \"t\".volume \"..\".name", "..").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("tenant \"t\".volume \"..\".name: `..`"),
            "{text}"
        );
        assert!(text.contains("not starting with `.`"), "{text}");
        let e = check("name", "a\nb").unwrap_err();
        assert_eq!(e.shown, "a\\nb");
        let long = check("name", &"y".repeat(500)).unwrap_err();
        assert_eq!(long.shown.len(), 80);
    }
}
