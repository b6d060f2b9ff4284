//! The service's error: what an API call or an interval can fail with, each variant
//! mapped to one HTTP status by [`crate::api`].

use crate::store::StoreError;
use api::client::CallError;

/// An error of the service, mapped to an HTTP status by the API.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed or its values are invalid (400).
    #[error("{0}")]
    BadRequest(String),
    /// Unknown tenant or node (404).
    #[error("{0}")]
    NotFound(String),
    /// The change conflicts with the state (409).
    #[error("{0}")]
    Conflict(String),
    /// The store failed (500).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The control step failed (500).
    #[error("control: {0}")]
    Control(String),
    /// A part of the service itself stopped (its history writer) (500).
    #[error("{0}")]
    Internal(String),
}

impl From<CallError> for ServiceError {
    fn from(e: CallError) -> Self {
        ServiceError::Conflict(e.to_string())
    }
}
