//! Engine errors, classified so the CLI can map them to exit codes.
//!
//! Must never: choose an exit code or print: the CLI maps each class to
//! its code and says the message.

/// Why a build (or the engine) failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The daemon could not be reached.
    #[error("cannot reach the Docker engine at {endpoint}: {detail}")]
    Unreachable { endpoint: String, detail: String },
    /// The build's inputs are wrong (Dockerfile, contexts, platforms...).
    #[error("{0}")]
    Input(String),
    /// The build ran and failed.
    #[error("{0}")]
    Build(String),
    /// A tool kiln drives is missing or unusable (buildx, the docker CLI):
    /// an environment failure (exit code 3); the message says what to do.
    #[error("{0}")]
    Tool(String),
    /// The record store could not be read (exit code 3).
    #[error("{0}")]
    Store(String),
    /// Local I/O failed (reading the context, temp files).
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl EngineError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        EngineError::Io {
            context: context.into(),
            source,
        }
    }
}
