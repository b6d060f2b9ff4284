//! What a demo arm can fail with: setting up its files, listeners, nodes or controller.

/// A demo failure.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// Setting up files, listeners or nodes.
    #[error("{0}")]
    Setup(String),
}

/// An error's `what: error` as a [`DemoError::Setup`].
pub(crate) fn setup<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> DemoError + '_ {
    move |e| DemoError::Setup(format!("{what}: {e}"))
}
