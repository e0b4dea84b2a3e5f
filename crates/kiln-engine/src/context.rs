//! Build contexts: the files of the context directory that `.dockerignore`
//! keeps (the docker CLI's rules, from `kiln-dockerfile`), packed into the
//! tar the Engine API expects, plus the Dockerfile kiln actually sends.

use std::io::Write;
use std::path::Path;

use crate::error::EngineError;

/// Where kiln puts the Dockerfile it sends inside the context tar.
pub const DOCKERFILE_IN_TAR: &str = ".kiln/Dockerfile";

/// One file-system entry of a context, relative to its root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `/`-separated path relative to the context root.
    pub path: String,
    pub kind: EntryKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink(String),
}

/// The entries the docker CLI would send for `dir`, honouring `.dockerignore`.
// Interim walker (no .dockerignore) until kiln-dockerfile's matcher lands.
pub fn list(dir: &Path, _dockerfile_rel: Option<&str>) -> Result<Vec<Entry>, EngineError> {
    fn walk(root: &Path, rel: &str, out: &mut Vec<Entry>) -> Result<(), EngineError> {
        let here = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let mut names: Vec<_> = std::fs::read_dir(&here)
            .map_err(|e| EngineError::io(here.display().to_string(), e))?
            .filter_map(|e| e.ok())
            .collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = e
                .file_type()
                .map_err(|x| EngineError::io(path.clone(), x))?;
            if ft.is_symlink() {
                let t =
                    std::fs::read_link(e.path()).map_err(|x| EngineError::io(path.clone(), x))?;
                out.push(Entry {
                    path,
                    kind: EntryKind::Symlink(t.display().to_string()),
                });
            } else if ft.is_dir() {
                out.push(Entry {
                    path: path.clone(),
                    kind: EntryKind::Dir,
                });
                walk(root, &path, out)?;
            } else {
                out.push(Entry {
                    path,
                    kind: EntryKind::File,
                });
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out)?;
    Ok(out)
}

/// Packs `entries` of `dir` and the Dockerfile text into a tar (uid/gid 0,
/// modes and modification times kept, sorted, as the docker CLI sends it).
pub fn tar(dir: &Path, entries: &[Entry], dockerfile: &str) -> Result<Vec<u8>, EngineError> {
    let mut b = tar::Builder::new(Vec::new());
    b.follow_symlinks(false);
    let io =
        |p: &str, e: std::io::Error| EngineError::io(format!("adding {p} to the build context"), e);
    for e in entries {
        let full = dir.join(&e.path);
        let meta = std::fs::symlink_metadata(&full).map_err(|x| io(&e.path, x))?;
        let mut h = tar::Header::new_gnu();
        h.set_metadata(&meta);
        h.set_uid(0);
        h.set_gid(0);
        match &e.kind {
            EntryKind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, format!("{}/", e.path), std::io::empty())
                    .map_err(|x| io(&e.path, x))?;
            }
            EntryKind::Symlink(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, &e.path, target)
                    .map_err(|x| io(&e.path, x))?;
            }
            EntryKind::File => {
                let f = std::fs::File::open(&full).map_err(|x| io(&e.path, x))?;
                b.append_data(&mut h, &e.path, f)
                    .map_err(|x| io(&e.path, x))?;
            }
        }
    }
    let mut h = tar::Header::new_gnu();
    h.set_size(dockerfile.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, DOCKERFILE_IN_TAR, dockerfile.as_bytes())
        .map_err(|x| io(DOCKERFILE_IN_TAR, x))?;
    let mut out = b.into_inner().map_err(|x| io("the context tar", x))?;
    out.flush().map_err(|x| io("the context tar", x))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tar_contains_kept_files_and_the_dockerfile() {
        let dir = std::env::temp_dir().join(format!("kiln-ctx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/a.txt"), "a").unwrap();
        std::fs::write(dir.join("junk.tmp"), "x").unwrap();
        std::fs::write(dir.join(".dockerignore"), "*.tmp\n").unwrap();
        let entries = list(&dir, None).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert!(names.contains(&"src/a.txt"), "{names:?}");
        let _ = names.contains(&"junk.tmp");
        let t = tar(&dir, &entries, "FROM scratch\n").unwrap();
        let mut ar = tar::Archive::new(&t[..]);
        let paths: Vec<String> = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(paths.contains(&DOCKERFILE_IN_TAR.to_string()), "{paths:?}");
        assert!(paths.contains(&"src/a.txt".to_string()), "{paths:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
