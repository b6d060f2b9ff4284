//! Shared test helpers for policy modules: miss counts on small key sequences, and a
//! model-based property test of the cache contract that every policy must pass.

use crate::sanity::Checked;
use crate::{build, Access, BlockCache};

/// Misses of policy `spec` with `capacity` blocks over `keys`, checked by [`Checked`].
pub fn miss_count(spec: &str, capacity: usize, keys: &[u64]) -> u64 {
    let mut c = BlockCache::new(capacity, Checked::new(build(spec).unwrap()));
    keys.iter()
        .filter(|&&k| !c.access(k, |_, _| {}).is_hit())
        .count() as u64
}

/// Property tests every policy must pass.
pub mod pinned {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    use std::collections::HashSet;

    #[derive(Clone, Debug)]
    enum Step {
        Access(u64),
        Remove(u64),
        Resize(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            20 => (0u64..64).prop_map(Step::Access),
            1 => (0u64..64).prop_map(Step::Remove),
            1 => (0usize..40).prop_map(Step::Resize),
        ]
    }

    /// Random accesses, removals and resizes: the policy keeps the contract, the cache
    /// never holds more than its capacity, a hit happens exactly when the key is resident,
    /// and switching to LRU by reconstruction keeps every resident block.
    pub fn contract(spec: &str) {
        let mut runner = TestRunner::new(Config {
            cases: 200,
            ..Config::default()
        });
        runner
            .run(
                &(1usize..32, prop::collection::vec(step(), 1..400)),
                |(cap, steps)| {
                    let mut c =
                        BlockCache::new(cap, Checked::new(build(spec).unwrap())).with_history();
                    let mut model: HashSet<u64> = HashSet::new();
                    for s in steps {
                        match s {
                            Step::Access(k) => {
                                let was = model.contains(&k);
                                let mut evicted = Vec::new();
                                let a = c.access(k, |ek, _| evicted.push(ek));
                                prop_assert_eq!(a.is_hit(), was);
                                for e in evicted {
                                    prop_assert!(model.remove(&e));
                                }
                                if let Access::Inserted(_) = a {
                                    model.insert(k);
                                }
                            }
                            Step::Remove(k) => {
                                prop_assert_eq!(c.remove(k).is_some(), model.remove(&k));
                            }
                            Step::Resize(n) => {
                                c.resize(n, |ek, _| {
                                    model.remove(&ek);
                                });
                            }
                        }
                        prop_assert!(c.len() <= c.capacity());
                        prop_assert_eq!(c.len(), model.len());
                    }
                    let before: HashSet<u64> = c.resident().map(|(k, _)| k).collect();
                    let mut boxed =
                        BlockCache::new(c.capacity(), build(spec).unwrap()).with_history();
                    for (_, k) in c.history() {
                        boxed.access(k, |_, _| {});
                    }
                    boxed.switch_policy(build("lru").unwrap());
                    let after: HashSet<u64> = boxed.resident().map(|(k, _)| k).collect();
                    prop_assert_eq!(before, after);
                    Ok(())
                },
            )
            .unwrap();
    }
}

/// An empty cache directory, for tests that drive a policy's hooks by hand (policies other
/// than ARC never look into it).
#[derive(Default)]
pub struct NoDir(crate::dirmap::DirMap);

impl NoDir {
    /// The directory to pass to `set_capacity` and `evict`.
    pub fn dir(&mut self) -> crate::policy::Directory<'_> {
        crate::policy::Directory::new(&mut self.0, &[])
    }
}
