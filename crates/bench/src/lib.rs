//! # bench
//!
//! Every benchmark of Lachesis in one place, each printing its figures beside a real
//! peer's from the same run (or beside the plain algorithm it improves on). The `lachesis
//! bench` subcommands parse their flags and call these; the examples are profiling
//! harnesses for one hot loop each.
//!
//! | module | what it measures | against |
//! |---|---|---|
//! | [`sim`] | simulator throughput per policy, LRU bytes per cached object | libCacheSim's PyPI bindings |
//! | [`curves`] | curve methods' speed, error against the exact curve, memory | the exact curve |
//! | [`curve_methods`] | the same, on keys held in memory (the `bench_mrc` example) | the exact curve |
//! | [`allocation`] | the fast utility method; MLMS with its server LP | plain water-filling |
//! | [`nbd`] | the node's data path over NBD with fio | nbdkit, qemu-nbd |
//! | [`writeback`] | sustained writes through a write-back cache at 100 % dirty | the slow backend (nbdkit with its rate filter) alone |
//! | [`control`] | one control step at scale (100,000 tenants over 10,000 nodes by default), with and without the topology rebuilt; SLOs met and throughput on the demo | static fair share |
//! | [`control_live`] | one whole live interval (poll, step, reconcile) against many node APIs on loopback | the interval's length |
//!
//! Owns: timing, peers, printing reports. Does not own: anything the product runs.

pub mod allocation;
pub mod control;
pub mod control_live;
pub mod curve_methods;
pub mod curves;
pub mod error;
pub mod nbd;
pub mod sim;
mod workload;
pub mod writeback;

pub use error::{BenchError, Result};
