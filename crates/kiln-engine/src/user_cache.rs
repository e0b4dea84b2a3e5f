//! kiln's cache for what is true of a user's machine rather than of one
//! project: `$XDG_CACHE_HOME/kiln/` (else `~/.cache/kiln/`), one JSON
//! file per kind (what buildx said of a builder, images' identities by
//! their engine id). Everything in it can be asked again; it only spares
//! the asking.
//!
//! Must never: fail a run: a file that cannot be read is empty, one that
//! cannot be written is not written.

use std::path::{Path, PathBuf};

/// The cache directory.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("kiln"))
}

/// The object in the cache file `name`; empty when there is none.
pub fn read(name: &str) -> serde_json::Map<String, serde_json::Value> {
    dir()
        .and_then(|d| std::fs::read(d.join(name)).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| match v {
            serde_json::Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

/// Replaces the cache file `name` with `map` ([`replace`]).
pub fn write(name: &str, map: serde_json::Map<String, serde_json::Value>) {
    let (Some(dir), Ok(text)) = (dir(), serde_json::to_vec(&serde_json::Value::Object(map))) else {
        return;
    };
    replace(&dir.join(name), &text);
}

/// Replaces `file` with `bytes`, best effort: written to a temporary file
/// beside it and renamed, so a reader sees the old file or the new one;
/// nothing happens when that cannot be done. For caches (this one, the
/// checkout's `.kiln/git-stamps.json`), which can always be asked again.
pub fn replace(file: &Path, bytes: &[u8]) {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return;
    };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".{}.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
