//! The CLI's one error type and the mapping to documented exit codes, in one
//! place.
//!
//! Must never: print an error (`kiln::run` writes it to stderr, once), or
//! map a kind to a code outside the documented ones in `exit`.

use std::fmt;
use std::process::ExitCode;

/// Documented exit codes.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// A build or check failed.
    pub const FAILED: u8 = 1;
    /// Bad input or usage: bake files, flags, unknown targets, cycles.
    pub const USAGE: u8 = 2;
    /// Infrastructure: daemon, registry or store unreachable, I/O failures.
    pub const INFRA: u8 = 3;
    /// Stopped by SIGINT (Ctrl-C): 128 + 2, as shells report it.
    pub const SIGINT: u8 = 130;
    /// Stopped by SIGTERM: 128 + 15.
    pub const SIGTERM: u8 = 143;
}

/// How an error is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The user's input is wrong (exit 2).
    User,
    /// The environment failed (exit 3).
    Environment,
    /// A build or check failed (exit 1).
    Failed,
    /// Stopped by a signal (exit 130 for SIGINT, 143 for SIGTERM).
    Interrupted(u8),
}

#[derive(Debug)]
pub struct CliError {
    pub kind: Kind,
    pub message: String,
    pub hint: Option<String>,
}

impl CliError {
    pub fn usage(m: impl Into<String>) -> Self {
        CliError {
            kind: Kind::User,
            message: m.into(),
            hint: None,
        }
    }
    pub fn env(m: impl Into<String>) -> Self {
        CliError {
            kind: Kind::Environment,
            message: m.into(),
            hint: None,
        }
    }
    pub fn with_hint(mut self, h: impl Into<String>) -> Self {
        self.hint = Some(h.into());
        self
    }
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self.kind {
            Kind::User => exit::USAGE,
            Kind::Environment => exit::INFRA,
            Kind::Failed => exit::FAILED,
            Kind::Interrupted(code) => code,
        })
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

impl From<kiln_bake::Error> for CliError {
    fn from(e: kiln_bake::Error) -> Self {
        use kiln_bake::Error as E;
        let kind = match &e {
            E::Read { source, .. } if source.kind() != std::io::ErrorKind::NotFound => {
                Kind::Environment
            }
            _ => Kind::User,
        };
        let hint = match &e {
            E::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Some("check the path given with -f; without -f kiln looks for docker-bake.hcl in the current directory".to_string())
            }
            _ => None,
        };
        CliError {
            kind,
            message: e.to_string(),
            hint,
        }
    }
}
