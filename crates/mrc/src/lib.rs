//! # mrc
//!
//! Hit-ratio curves (miss-ratio curves, MRCs): the curve type and its operations, and the
//! ways to build one (exact LRU stack distances, SHARDS, scaled-down simulation, online
//! per-tenant profilers).
//!
//! Owns: measuring how a tenant's miss ratio falls with cache size. Does not own: choosing
//! sizes (that is `alloc`).

pub mod curve;

pub use curve::{CurveError, CurvePoint, HitRatioCurve};
