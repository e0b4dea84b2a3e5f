//! The one error type of the Dockerfile analysis.

/// Why a Dockerfile could not be analysed. Every variant that comes from the text carries
/// the 1-based line it was found on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerfileError {
    /// The text is not a Dockerfile: unknown instruction, no `FROM`, unterminated heredoc
    /// or quote, duplicate stage name… (reported by the parser).
    #[error("line {line}:{column}: {message}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The text parses but BuildKit would reject it: an unknown or malformed flag, a bad
    /// `--mount`, `--from` naming a later stage or itself, a failing `${VAR:?}`.
    #[error("line {line}: {message}")]
    Invalid {
        /// 1-based line of the instruction.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The requested target is not a stage name of this Dockerfile.
    #[error(
        "target stage \"{target}\" not found in the Dockerfile{}",
        match suggestion {
            Some(s) => format!("\nhint: did you mean \"{s}\"?"),
            None if stages.is_empty() => "\nhint: no stage is named (`FROM image AS name`)".to_string(),
            None => format!("\nhint: the named stages are: {}", stages.join(", ")),
        }
    )]
    UnknownTarget {
        /// The target asked for.
        target: String,
        /// The closest stage name, if one is close.
        suggestion: Option<String>,
        /// Every named stage, in file order.
        stages: Vec<String>,
    },
    /// The Dockerfile could not be read (only from [`super::analyze_file`]).
    #[error("cannot read {path}: {message}")]
    Io {
        /// The path given.
        path: String,
        /// The OS error.
        message: String,
    },
}

impl DockerfileError {
    /// The 1-based line the error is about, when it is about one.
    #[must_use]
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Parse { line, .. } | Self::Invalid { line, .. } => Some(*line),
            Self::UnknownTarget { .. } | Self::Io { .. } => None,
        }
    }

    pub(crate) fn invalid(line: usize, message: impl Into<String>) -> Self {
        Self::Invalid {
            line,
            message: message.into(),
        }
    }
}
