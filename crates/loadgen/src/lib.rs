//! # loadgen
//!
//! Lachesis's load generators and the demonstration they drive. Nothing here is needed
//! by a node or the controller at run time; only the `lachesis` binary (`demo`, `bench
//! control`, `bench apps`) uses it.
//!
//! The generators are three parts, each written once:
//!
//! | module | owns |
//! |---|---|
//! | [`stream`] | what one connection sends: a Zipf set (`trace::synth`'s one Zipf generator), a scan, or a trace looped |
//! | [`trace_file`] | the one trace reader: a trace file (`trace::open`) as block requests on a volume |
//! | [`driver`] | the one driver: a closed-loop NBD client (`node::replay::send`), paced or not, logging each request's latency |
//! | [`demo`] | `lachesis demo`: modelled disks, nodes, a controller and four tenants on loopback, three arms compared |
//! | [`apps`] | `lachesis bench apps`: PostgreSQL (`pgbench`) on ext4 on a Lachesis volume beside a scanning neighbour, per scheme |
//! | [`verify`] | `lachesis bench verify`: every byte read back is the byte last acknowledged, on `apps`' cluster while the controller plans |

pub mod apps;
pub mod demo;
pub mod driver;
pub mod stream;
pub mod trace_file;
pub mod verify;

pub use driver::{drive, Log, Pace};
pub use stream::Stream;
