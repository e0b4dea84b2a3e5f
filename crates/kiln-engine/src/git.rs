//! Git refs resolved to commits, so a content key names the exact source a
//! git `ADD` (or context) reads: a branch that moves changes the key; a
//! commit is already pinned.
//!
//! Must never: fetch objects or write anything (only `git ls-remote`).

use std::process::Command;
use std::time::Duration;

/// How long `git ls-remote` may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Splits a BuildKit git source `URL[#REF[:SUBDIR]]` into URL and ref
/// (`HEAD` when none is given).
pub fn split_source(source: &str) -> (String, String) {
    match source.split_once('#') {
        Some((url, frag)) => {
            let r = frag.split(':').next().unwrap_or("");
            let r = if r.is_empty() { "HEAD" } else { r };
            (url.to_string(), r.to_string())
        }
        None => (source.to_string(), "HEAD".to_string()),
    }
}

fn is_commit(r: &str) -> bool {
    r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Picks the commit for `wanted` from `git ls-remote` output: an annotated
/// tag's peeled commit (`^{}`) wins over the tag object; an exact ref name
/// (`refs/heads/x`, `refs/tags/x`) or a short name matches.
pub fn pick(listing: &str, wanted: &str) -> Option<String> {
    let mut plain = None;
    for line in listing.lines() {
        let Some((hash, name)) = line.split_once('\t') else {
            continue;
        };
        let (name, peeled) = match name.strip_suffix("^{}") {
            Some(n) => (n, true),
            None => (name, false),
        };
        let matches = name == wanted
            || name == format!("refs/tags/{wanted}")
            || name == format!("refs/heads/{wanted}")
            || (wanted == "HEAD" && name == "HEAD");
        if !matches || !is_commit(hash) {
            continue;
        }
        if peeled {
            return Some(hash.to_string());
        }
        plain.get_or_insert_with(|| hash.to_string());
    }
    plain
}

/// The commit `source` names now: `git:<40 hex>`. A ref that is already a
/// commit is returned without a request.
pub fn resolve(source: &str) -> Result<String, String> {
    let (url, r) = split_source(source);
    if is_commit(&r) {
        return Ok(format!("git:{}", r.to_ascii_lowercase()));
    }
    // The listing of a large repository (thousands of tags, GitHub's
    // refs/pull/*) is megabytes: read while git runs (crate::proc).
    let out = crate::proc::output(
        Command::new("git")
            .args(["ls-remote", "--", &url])
            .env("GIT_TERMINAL_PROMPT", "0"),
        TIMEOUT,
        crate::proc::DEFAULT_MAX_OUTPUT,
    )
    .map_err(|e| format!("git ls-remote {url}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-remote {url} failed: {}",
            out.last_error_line()
        ));
    }
    let listing = String::from_utf8_lossy(&out.stdout);
    pick(&listing, &r)
        .map(|c| format!("git:{c}"))
        .ok_or_else(|| format!("{url} has no ref {r}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LS: &str = "1111111111111111111111111111111111111111\tHEAD\n\
2222222222222222222222222222222222222222\trefs/heads/main\n\
3333333333333333333333333333333333333333\trefs/tags/v1\n\
4444444444444444444444444444444444444444\trefs/tags/v1^{}\n\
5555555555555555555555555555555555555555\trefs/tags/light\n";

    #[test]
    fn picks_peeled_tags_branches_and_head() {
        assert_eq!(pick(LS, "v1").unwrap(), "4".repeat(40));
        assert_eq!(pick(LS, "light").unwrap(), "5".repeat(40));
        assert_eq!(pick(LS, "main").unwrap(), "2".repeat(40));
        assert_eq!(pick(LS, "refs/heads/main").unwrap(), "2".repeat(40));
        assert_eq!(pick(LS, "HEAD").unwrap(), "1".repeat(40));
        assert_eq!(pick(LS, "nope"), None);
    }

    #[test]
    fn sources_split_into_url_and_ref() {
        assert_eq!(
            split_source("https://x/y.git#v1:sub/dir"),
            ("https://x/y.git".into(), "v1".into())
        );
        assert_eq!(
            split_source("https://x/y.git"),
            ("https://x/y.git".into(), "HEAD".into())
        );
        assert_eq!(
            split_source("git@x:y.git#:sub"),
            ("git@x:y.git".into(), "HEAD".into())
        );
        let c = "a".repeat(40);
        assert_eq!(
            resolve(&format!("https://unreachable.invalid/y.git#{c}")).unwrap(),
            format!("git:{c}"),
            "a commit needs no request"
        );
    }

    fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let o = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// A real repository: a moving branch resolves to its new commit.
    #[test]
    fn a_moving_branch_resolves_to_its_current_commit() {
        let dir = std::env::temp_dir().join(format!("kiln-git-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("f"), "1").unwrap();
        git(&dir, &["add", "f"]);
        git(&dir, &["commit", "-q", "-m", "one"]);
        git(&dir, &["tag", "-a", "v1", "-m", "v1"]);
        let first = git(&dir, &["rev-parse", "HEAD"]);
        let url = format!("file://{}", dir.display());
        assert_eq!(
            resolve(&format!("{url}#main")).unwrap(),
            format!("git:{first}")
        );
        assert_eq!(
            resolve(&format!("{url}#v1")).unwrap(),
            format!("git:{first}")
        );
        std::fs::write(dir.join("f"), "2").unwrap();
        git(&dir, &["commit", "-q", "-am", "two"]);
        let second = git(&dir, &["rev-parse", "HEAD"]);
        assert_ne!(first, second);
        assert_eq!(
            resolve(&format!("{url}#main")).unwrap(),
            format!("git:{second}")
        );
        assert_eq!(
            resolve(&format!("{url}#v1")).unwrap(),
            format!("git:{first}"),
            "the tag did not move"
        );
        let e = resolve(&format!("{url}#nope")).unwrap_err();
        assert!(e.contains("has no ref nope"), "{e}");
        let e = resolve("file:///nonexistent/repo.git#main").unwrap_err();
        assert!(e.contains("failed"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A listing far larger than a pipe holds (5,000 tags, 2,000 pull
    /// request refs) is read while git runs, and an annotated tag among
    /// them resolves to its commit.
    #[test]
    fn a_repository_with_thousands_of_refs_resolves() {
        let dir = std::env::temp_dir().join(format!("kiln-git-big-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let first = git(&dir, &["rev-parse", "HEAD"]);
        git(&dir, &["tag", "-a", "v7", "-m", "v7"]);
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let mut refs = String::new();
        for i in 0..5000 {
            refs.push_str(&format!(
                "create refs/tags/v0.{}.{} HEAD\n",
                i / 100,
                i % 100
            ));
        }
        for i in 0..2000 {
            refs.push_str(&format!("create refs/pull/{i}/head HEAD\n"));
        }
        let mut child = Command::new("git")
            .args(["update-ref", "--stdin"])
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(refs.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        let url = format!("file://{}", dir.display());
        assert_eq!(
            resolve(&format!("{url}#v7")).unwrap(),
            format!("git:{first}")
        );
        let head = git(&dir, &["rev-parse", "HEAD"]);
        assert_eq!(
            resolve(&format!("{url}#v0.49.99")).unwrap(),
            format!("git:{head}")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
