//! Go's `path` functions (Unix), ported once for every crate that must match
//! Go tools exactly (bake's `basename`/`dirname`/context cleaning, the
//! docker CLI's `.dockerignore` handling).

/// Go's `path.Clean`: the shortest lexically equivalent path. Repeated `/`
/// collapse, `.` elements go, `x/..` pairs cancel, `..` at the root of an
/// absolute path goes, and an empty result is `.`.
pub fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let rooted = path.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for elem in path.split('/') {
        match elem {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|last| *last != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    let joined = out.join("/");
    if rooted {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    }
}

/// Go's `path.Dir`: everything before the last `/`, cleaned (`.` when there
/// is none).
pub fn dir(path: &str) -> String {
    match path.rfind('/') {
        Some(i) => clean(&path[..=i]),
        None => ".".to_owned(),
    }
}

/// Go's `path.Base`: the last element, trailing slashes ignored; `.` for an
/// empty path and `/` for a path of slashes only.
pub fn base(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_owned();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_vectors() {
        for (p, want) in [
            ("", "."),
            ("abc", "abc"),
            ("a//b", "a/b"),
            ("a/./b", "a/b"),
            ("a/b/..", "a"),
            ("../../a", "../../a"),
            ("/../a", "/a"),
            ("/", "/"),
            ("./", "."),
            ("a/b/../../..", ".."),
        ] {
            assert_eq!(clean(p), want, "clean({p:?})");
        }
        for (p, want) in [
            ("a/b/c.hcl", "a/b"),
            ("c.hcl", "."),
            ("/c.hcl", "/"),
            ("a/b/", "a/b"),
            ("", "."),
        ] {
            assert_eq!(dir(p), want, "dir({p:?})");
        }
        for (p, want) in [
            ("", "."),
            ("/", "/"),
            ("///", "/"),
            ("a/b", "b"),
            ("a/b/", "b"),
            ("x", "x"),
        ] {
            assert_eq!(base(p), want, "base({p:?})");
        }
    }
}
