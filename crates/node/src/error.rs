//! The node's error: configuration, requests naming what does not exist or is invalid or
//! conflicts, the cache's refusals, I/O, and listeners; the API maps each to one status.

/// An error of the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The configuration file is wrong.
    #[error("{file}: {msg}")]
    Config {
        /// The file.
        file: String,
        /// What is wrong, naming the field.
        msg: String,
    },
    /// A request names something that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A request is malformed or its values are invalid.
    #[error("{0}")]
    Invalid(String),
    /// A request conflicts with the node's state.
    #[error("{0}")]
    Conflict(String),
    /// The cache refused.
    #[error(transparent)]
    Cache(#[from] cache::CacheError),
    /// I/O failed (a backend).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A listener could not be opened.
    #[error("{what} listener {addr}: {reason}")]
    Listen {
        /// `NBD` or `API`.
        what: &'static str,
        /// The address asked for.
        addr: String,
        /// Why, and what to do.
        reason: String,
    },
}
