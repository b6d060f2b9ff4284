//! Policy parameter strings, as libCacheSim takes them: `name:key=value,key=value`
//! (libCacheSim's own form `name` plus `--eviction-params "key=value,..."` maps onto it).
//! Every policy parses its parameters from a [`Params`], so the command line and the
//! library accept the same text; unknown keys and bad values are errors that name the key.

use crate::PolicyError;
use std::cell::RefCell;

/// Parsed `key=value` pairs of one policy spec; remembers which keys were read so unknown
/// ones can be reported by [`Params::finish`].
#[derive(Debug)]
pub struct Params {
    policy: String,
    pairs: Vec<(String, String)>,
    used: RefCell<Vec<bool>>,
}

impl Params {
    /// Parses `key=value,key=value` (empty for none) for `policy`.
    pub fn parse(policy: &str, text: &str) -> Result<Self, PolicyError> {
        let mut pairs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| PolicyError::BadParam {
                policy: policy.into(),
                key: part.into(),
                message: "expected key=value".into(),
            })?;
            pairs.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        let n = pairs.len();
        Ok(Params {
            policy: policy.into(),
            pairs,
            used: RefCell::new(vec![false; n]),
        })
    }

    /// No parameters.
    pub fn empty(policy: &str) -> Self {
        Params {
            policy: policy.into(),
            pairs: Vec::new(),
            used: RefCell::new(Vec::new()),
        }
    }

    fn raw(&self, key: &str) -> Option<&str> {
        let i = self.pairs.iter().position(|(k, _)| k == key)?;
        self.used.borrow_mut()[i] = true;
        Some(&self.pairs[i].1)
    }

    fn bad(&self, key: &str, message: String) -> PolicyError {
        PolicyError::BadParam {
            policy: self.policy.clone(),
            key: key.into(),
            message,
        }
    }

    /// A floating-point parameter with a default, checked to lie in `[lo, hi]`.
    pub fn f64_in(&self, key: &str, default: f64, lo: f64, hi: f64) -> Result<f64, PolicyError> {
        let Some(v) = self.raw(key) else {
            return Ok(default);
        };
        let x: f64 = v
            .parse()
            .map_err(|_| self.bad(key, format!("`{v}` is not a number")))?;
        if !(lo..=hi).contains(&x) || x.is_nan() {
            return Err(self.bad(key, format!("{x} is outside [{lo}, {hi}]")));
        }
        Ok(x)
    }

    /// A floating-point parameter that has several spellings (ours and libCacheSim's):
    /// the value of the first of `keys` given, else `default`, checked to lie in
    /// `[lo, hi]`. Giving two spellings at once leaves the second unread, so
    /// [`Params::finish`] reports it.
    pub fn f64_first(
        &self,
        keys: &[&str],
        default: f64,
        lo: f64,
        hi: f64,
    ) -> Result<f64, PolicyError> {
        match keys
            .iter()
            .find(|k| self.pairs.iter().any(|(p, _)| p == *k))
        {
            Some(k) => self.f64_in(k, default, lo, hi),
            None => Ok(default),
        }
    }

    /// An integer parameter with a default, checked to lie in `[lo, hi]`.
    pub fn usize_in(
        &self,
        key: &str,
        default: usize,
        lo: usize,
        hi: usize,
    ) -> Result<usize, PolicyError> {
        let Some(v) = self.raw(key) else {
            return Ok(default);
        };
        let x: usize = v
            .parse()
            .map_err(|_| self.bad(key, format!("`{v}` is not a non-negative integer")))?;
        if !(lo..=hi).contains(&x) {
            return Err(self.bad(key, format!("{x} is outside [{lo}, {hi}]")));
        }
        Ok(x)
    }

    /// Whether `key` was given (without marking it read).
    pub fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }

    /// Errors on any key no one asked for.
    pub fn finish(&self) -> Result<(), PolicyError> {
        let used = self.used.borrow();
        if let Some(i) = used.iter().position(|u| !u) {
            let k = &self.pairs[i].0;
            return Err(self.bad(k, "unknown parameter".into()));
        }
        Ok(())
    }
}
