//! # policy
//!
//! Every eviction and admission policy of Lachesis behind one interface
//! ([`EvictionPolicy`], [`AdmissionPolicy`]), the block cache's lookup loop
//! ([`BlockCache`]) with online resize and policy switching by reconstruction (SOPA), and
//! single-cache trace simulation ([`sim`]).
//!
//! Owns: which block leaves, which block enters, and replaying a trace through one cache.
//! Does not own: latency, time, servers, or how large a cache is (the caller decides).
//!
//! Policies are named by a spec string, `name` or `name:key=value,...`; [`build`] makes a
//! boxed policy and [`with_policy`] hands a concrete one to generic code, so the simulator
//! runs monomorphized while the live cache switches boxed policies at run time.

pub mod admission;
pub mod cache;
pub mod dirmap;
pub mod eviction;
pub mod ghost;
pub mod heap;
pub mod keymap;
pub mod list;
pub mod params;
pub mod policy;
pub mod prefetch;
pub mod sanity;
pub mod sim;
pub mod spec;
#[cfg(test)]
pub(crate) mod testkit;

pub use admission::AdmissionPolicy;
pub use cache::{Access, BlockCache};
pub use params::Params;
pub use policy::{BlockHistory, EvictionPolicy, Key, Slot};
pub use spec::EvictionSpec;

/// Errors of policy construction.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The policy name is not known.
    #[error("unknown policy `{name}` (known: {known})")]
    UnknownPolicy {
        /// The name given.
        name: String,
        /// The names that are known.
        known: String,
    },
    /// A parameter is malformed, unknown or out of range.
    #[error("policy `{policy}`: parameter `{key}`: {message}")]
    BadParam {
        /// The policy.
        policy: String,
        /// The parameter.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// Receives a concrete policy type from [`with_policy`], so generic code (the simulator's
/// hot loop) is compiled once per policy instead of calling through a vtable.
pub trait PolicyVisitor {
    /// What the visit produces.
    type Output;
    /// Called with the constructed policy.
    fn visit<P: EvictionPolicy + 'static>(self, policy: P) -> Self::Output;
}

macro_rules! registry {
    ($( $name:literal $(| $alias:literal)* => $ty:ty ),* $(,)?) => {
        /// The canonical names of all eviction policies.
        pub const POLICY_NAMES: &[&str] = &[$($name),*];

        fn canonical(name: &str) -> Option<&'static str> {
            let n = name.to_ascii_lowercase();
            $( if n == $name $(|| n == $alias)* { return Some($name); } )*
            None
        }

        /// Constructs the policy named by `spec` (`name` or `name:key=value,...`) and
        /// hands it to `visitor`.
        pub fn with_policy<V: PolicyVisitor>(spec: &str, visitor: V) -> Result<V::Output, PolicyError> {
            let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
            let canon = canonical(name.trim()).ok_or_else(|| PolicyError::UnknownPolicy {
                name: name.trim().into(),
                known: POLICY_NAMES.join(", "),
            })?;
            let params = Params::parse(canon, params)?;
            match canon {
                $( $name => Ok(visitor.visit(<$ty>::from_params(&params)?)), )*
                _ => unreachable!("canonical() returned a registered name"),
            }
        }
    };
}

registry! {
    "lru" => eviction::lru::Lru,
    "mru" => eviction::mru::Mru,
    "fifo" => eviction::fifo::Fifo,
    "clock" => eviction::clock::Clock,
    "lfu" => eviction::lfu::Lfu,
    "lrfu" => eviction::lrfu::Lrfu,
    "lruk" | "lru-k" | "lru_k" => eviction::lruk::LruK,
    "arc" => eviction::arc::Arc,
    "lirs" => eviction::lirs::Lirs,
    "2q" | "twoq" => eviction::twoq::TwoQ,
    "mq" => eviction::mq::Mq,
    "s3fifo" | "s3-fifo" => eviction::s3fifo::S3Fifo,
    "sieve" => eviction::sieve::Sieve,
}

/// Constructs the policy named by `spec` as a boxed trait object.
pub fn build(spec: &str) -> Result<Box<dyn EvictionPolicy>, PolicyError> {
    struct Boxer;
    impl PolicyVisitor for Boxer {
        type Output = Box<dyn EvictionPolicy>;
        fn visit<P: EvictionPolicy + 'static>(self, p: P) -> Self::Output {
            Box::new(p)
        }
    }
    with_policy(spec, Boxer)
}
