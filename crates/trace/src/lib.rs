//! # trace
//!
//! The request model of Lachesis ([`Request`], [`Op`], [`KeyMode`]), streaming readers of
//! the block-trace formats storage people actually have, a writer for libCacheSim's
//! `oracleGeneral` binary format, seeded synthetic generators, and trace summaries.
//!
//! Owns: everything about requests and trace files. Does not own: any notion of a cache.
//!
//! Readers never load a whole trace: [`open`] gives an iterator of
//! `Result<Request, TraceError>` over a buffered file, which is also a [`RequestStream`]:
//! fast consumers take batches of plain requests ([`RequestStream::next_batch`]; the
//! oracle reader decodes a batch in one tight loop). A bad record is an error naming the
//! file and the line (text) or byte offset (binary); [`SkipBad`] turns such errors into a
//! count instead, one by one or in batches.
//!
//! Formats and detection are listed in [`formats`]; the generic CSV mapping grammar in
//! [`formats::csv`]; the synthetic workload grammar and builder in [`synth`]. Times are
//! microseconds in [`Request`]; the oracleGeneral and CloudPhysics readers take their
//! `time` field as seconds (see [`oracle`]). Measured on the 2-core dev machine (release):
//! the oracle reader decodes 215–300 M records/s from a page-cached plain file and ~50 M/s
//! from `.zst`; the Zipf generator draws 10 M requests in 0.3–0.7 s. Read in batches,
//! reading plus fixed-size SHARDS runs at 85–90 M requests/s end to end (was 45–60 one
//! request at a time through the iterator).

pub mod error;
pub mod formats;
pub mod info;
pub mod request;
pub mod shared;
pub mod skip;
pub mod stream;
pub mod synth;

pub use error::{Position, TraceError};
pub use formats::oracle;
pub use formats::{detect, open, Format, TraceReader};
pub use info::TraceInfo;
pub use request::{KeyMode, Op, Request, SECTOR};
pub use shared::find_shared_trace;
pub use skip::SkipBad;
pub use stream::{Limit, Plain, RequestStream, BATCH};
