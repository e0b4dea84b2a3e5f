//! `.dockerignore` semantics, exactly as the docker CLI applies them.
//!
//! dockerd 20.10's embedded BuildKit does not apply `.dockerignore` to a build context
//! uploaded as a tar, so kiln filters the context itself and must agree with
//! `docker build` file for file. No published crate does (gitignore engines add an
//! implicit `**/`, keep `./`, negate `[!…]`), so this module ports the Go code:
//!
//! - [`read_dockerignore`]: moby's `ignorefile.ReadAll` (comments, trimming, BOM,
//!   cleaning, leading `/`);
//! - [`PatternMatcher`]: `github.com/moby/patternmatcher` (Go `filepath.Clean`, the
//!   `filepath.Match` syntax check, the glob → regular-expression translation and the
//!   last-match-wins evaluation), with Go's regular-expression syntax re-expressed for the
//!   `regex` crate so that odd patterns (`[*]`, `\d`, `[!a]`) mean what they mean to Go;
//! - [`walk_context`]: the docker CLI's context walk (`archive.TarWithOptions` plus
//!   `TrimBuildFilesFromExcludes`), including its pruning of excluded directories.
//!
//! It owns matching and listing only: it never reads file contents (beyond checking that
//! a file opens), never follows a symlink, and never writes. What is sent, and how it is
//! hashed or archived, belongs to the caller. The oracle the port is held to is
//! `tests/data/dockerignore-oracle.json`, recorded from the docker CLI itself.

mod error;
mod file;
mod gopath;
mod goregex;
mod matcher;
mod walk;

pub use error::IgnoreError;
pub use file::read_dockerignore;
pub use matcher::{
    MatchInfo, MatchType, Pattern, PatternMatcher, matches, matches_or_parent_matches,
};
pub use walk::{
    ContextEntry, EntryKind, WalkOptions, excluded_dockerfile, excluded_dockerfile_by,
    trim_build_files_from_excludes, walk_context, walk_context_with,
};
