//! [`BenchError`], the one error type of the benchmarks, and [`Context`], which adds what
//! was being done to any error (or to a `None`) as it goes up, so the command line prints
//! one line with the cause at its end.

use std::fmt::Display;

/// A benchmark failed: a peer is missing or failed, a file could not be written, or a
/// library call was refused.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A failure described in full.
    #[error("{0}")]
    Failed(String),
    /// What was being done, and why it failed.
    #[error("{context}: {source}")]
    Context {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading or writing a file, or starting a process.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A trace could not be read or written.
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    /// A curve could not be built.
    #[error(transparent)]
    Mrc(#[from] mrc::MrcError),
    /// A simulation failed.
    #[error(transparent)]
    Sim(#[from] policy::sim::SimError),
    /// The cache node refused to start.
    #[error(transparent)]
    Node(#[from] node::NodeError),
    /// A peer printed something that is not the JSON expected.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Results of the benchmarks.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Adds what was being done to an error or a `None`.
pub trait Context<T> {
    /// With a fixed description.
    fn context(self, context: impl Display) -> Result<T>;
    /// With a description built only on failure.
    fn with_context<D: Display>(self, f: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Display) -> Result<T> {
        self.map_err(|e| BenchError::Context {
            context: context.to_string(),
            source: Box::new(e),
        })
    }
    fn with_context<D: Display>(self, f: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| BenchError::Context {
            context: f().to_string(),
            source: Box::new(e),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl Display) -> Result<T> {
        self.ok_or_else(|| BenchError::Failed(context.to_string()))
    }
    fn with_context<D: Display>(self, f: impl FnOnce() -> D) -> Result<T> {
        self.ok_or_else(|| BenchError::Failed(f().to_string()))
    }
}

/// Returns a [`BenchError::Failed`] with a formatted message.
macro_rules! bail {
    ($($t:tt)*) => {
        return Err($crate::error::BenchError::Failed(format!($($t)*)))
    };
}
pub(crate) use bail;
