//! The errors `.dockerignore` handling can raise.

use std::path::PathBuf;

/// Why patterns could not be compiled or matched, or why a build context could not be
/// listed. Every message says what is wrong and, on a `hint:` line, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum IgnoreError {
    /// A pattern consisting of `!` alone (Docker: `illegal exclusion pattern: "!"`).
    #[error(
        "illegal exclusion pattern: \"!\"\nhint: a lone `!` re-includes nothing; remove the line or write `!PATH`"
    )]
    IllegalExclusion,
    /// A pattern Go's `filepath.Match` rejects, or whose translated regular expression does
    /// not compile (Docker: `syntax error in pattern`).
    #[error(
        "syntax error in .dockerignore pattern `{pattern}`\nhint: check `[...]` classes (closed, non-empty, no `-` at an edge) and escapes (`\\` needs a following character)"
    )]
    BadPattern {
        /// The pattern as cleaned by the matcher (without a leading `!`).
        pattern: String,
    },
    /// A [`MatchInfo`](super::MatchInfo) from a matcher with a different number of patterns
    /// was passed in (Docker: `wrong number of values in parentMatched`).
    #[error(
        "wrong number of values in parent match info: expected {expected}, got {got}\nhint: pass the MatchInfo the same matcher returned for the parent directory"
    )]
    MatchInfoMismatch {
        /// The matcher's pattern count.
        expected: usize,
        /// The length of the info passed in.
        got: usize,
    },
    /// A file or directory of the build context could not be read.
    #[error("cannot read `{}` in the build context: {source}\nhint: make it readable, or exclude it in .dockerignore", path.display())]
    Io {
        /// The path that failed, as given to or found by the walker.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A name in the build context (or a symlink target) is not valid UTF-8.
    #[error("`{}` in the build context is not valid UTF-8\nhint: rename it, or exclude its directory in .dockerignore", path.display())]
    NonUtf8Path {
        /// The offending path.
        path: PathBuf,
    },
    /// The build context root is not a directory.
    #[error("build context `{}` is not a directory\nhint: pass the directory that holds the Dockerfile's sources", path.display())]
    NotADirectory {
        /// The path given as the context.
        path: PathBuf,
    },
}
