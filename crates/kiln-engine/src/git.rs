//! Git refs resolved to commits, so a content key names the exact source a
//! git `ADD` (or context) reads: a branch that moves changes the key; a
//! commit is already pinned.
//!
//! Must never: fetch objects or write anything (only `git ls-remote`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let mut child = Command::new("git")
        .args(["ls-remote", "--", &url])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if t0.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "git ls-remote {url} did not answer in {}s",
                    TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("git ls-remote {url}: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("git ls-remote {url}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "git ls-remote {url} failed: {}",
            err.lines().last().unwrap_or("").trim()
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
}
