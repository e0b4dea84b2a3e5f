//! Registry credentials where the docker CLI keeps them, so kiln reads a
//! private registry (preflight, identities of pushed images, skips by
//! digest) with the same login as `docker pull` and buildx.
//!
//! `$DOCKER_CONFIG/config.json` (else `~/.docker/config.json`), for a
//! registry host, first found wins:
//! 1. `credHelpers[host]`: runs `docker-credential-<name> get` with the
//!    server on stdin (the credential-helper protocol);
//! 2. `auths[host]` (keys may carry a scheme and a path): `auth` (base64
//!    `user:password`), or `username` and `password`;
//! 3. `credsStore`: that helper for every host;
//! 4. none: anonymous.
//!
//! Docker Hub is `https://index.docker.io/v1/` in that file, as `docker
//! login` writes it. Secrets are never printed or recorded.

use std::path::{Path, PathBuf};

use base64::Engine as _;

/// A user name and a password (or token).
pub type Login = (String, String);

/// Where the docker CLI's configuration is: `$DOCKER_CONFIG`, else
/// `~/.docker`.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker"))
}

/// The name `config.json` files key a registry by.
fn server_name(registry: &str) -> String {
    match registry {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => {
            "https://index.docker.io/v1/".into()
        }
        r => r.to_string(),
    }
}

/// The host of a key of `auths` (`https://ghcr.io`, `ghcr.io/v2/`, …).
fn key_host(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

/// The login for `registry` from a `config.json` text, asking `helper`
/// (name, server) for helper-kept ones.
pub fn from_config(
    text: &str,
    registry: &str,
    helper: impl Fn(&str, &str) -> Option<Login>,
) -> Option<Login> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let server = server_name(registry);
    let hub = server.starts_with("https://index.docker.io");
    let same = |key: &str| {
        key == server
            || (!hub && key_host(key) == registry)
            || (hub && key_host(key) == "index.docker.io")
    };
    if let Some(helpers) = v.get("credHelpers").and_then(|h| h.as_object())
        && let Some(name) = helpers
            .iter()
            .find(|(k, _)| same(k))
            .and_then(|(_, n)| n.as_str())
    {
        return helper(name, &server);
    }
    if let Some(auths) = v.get("auths").and_then(|a| a.as_object())
        && let Some((_, entry)) = auths.iter().find(|(k, _)| same(k))
    {
        if let Some(encoded) = entry
            .get("auth")
            .and_then(|a| a.as_str())
            .filter(|a| !a.is_empty())
        {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (u, p) = text.split_once(':')?;
            return Some((u.to_string(), p.to_string()));
        }
        if let (Some(u), Some(p)) = (
            entry.get("username").and_then(|u| u.as_str()),
            entry.get("password").and_then(|p| p.as_str()),
        ) {
            return Some((u.to_string(), p.to_string()));
        }
    }
    if let Some(store) = v
        .get("credsStore")
        .and_then(|s| s.as_str())
        .filter(|s| !s.is_empty())
    {
        return helper(store, &server);
    }
    None
}

/// How long a credential helper may take: one that waits for a desktop
/// prompt or a locked keyring must not hang the run.
const HELPER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Asks `docker-credential-<name>` for `server`'s login (the helper
/// protocol: the server on stdin, `{"Username", "Secret"}` on stdout). A
/// helper that is missing, fails, knows nothing or does not answer within
/// [`HELPER_TIMEOUT`] (it is killed) is no login.
pub fn run_helper(name: &str, server: &str) -> Option<Login> {
    run_helper_bounded(&format!("docker-credential-{name}"), server, HELPER_TIMEOUT)
}

fn run_helper_bounded(program: &str, server: &str, bound: std::time::Duration) -> Option<Login> {
    use std::io::{Read, Write};
    let mut child = std::process::Command::new(program)
        .arg("get")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let _ = child
        .stdin
        .take()
        .map(|mut i| i.write_all(server.as_bytes()));
    // Its answer is small (far below a pipe's buffer): wait for the exit,
    // then read it.
    let until = std::time::Instant::now() + bound;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    if !status.success() {
        return None;
    }
    let mut stdout = Vec::new();
    child.stdout.take()?.read_to_end(&mut stdout).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&stdout).ok()?;
    Some((
        v.get("Username")?.as_str()?.to_string(),
        v.get("Secret")?.as_str()?.to_string(),
    ))
}

/// The login for `registry` from the docker CLI's configuration, if any.
pub fn login_for(registry: &str) -> Option<Login> {
    let text = std::fs::read_to_string(config_dir()?.join("config.json")).ok()?;
    from_config(&text, registry, run_helper)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn logins_come_from_auths_helpers_and_the_store() {
        let none = |_: &str, _: &str| None;
        let cfg = format!(
            r#"{{"auths": {{
                "https://index.docker.io/v1/": {{"auth": "{}"}},
                "ghcr.io": {{"auth": "{}"}},
                "https://registry.example.com/v2/": {{"username": "u", "password": "p"}},
                "127.0.0.1:5000": {{}}
            }}}}"#,
            b64("hubuser:hubpass"),
            b64("gh:token:with:colons")
        );
        assert_eq!(
            from_config(&cfg, "docker.io", none),
            Some(("hubuser".into(), "hubpass".into()))
        );
        assert_eq!(
            from_config(&cfg, "ghcr.io", none),
            Some(("gh".into(), "token:with:colons".into()))
        );
        assert_eq!(
            from_config(&cfg, "registry.example.com", none),
            Some(("u".into(), "p".into()))
        );
        assert_eq!(from_config(&cfg, "127.0.0.1:5000", none), None);
        assert_eq!(from_config(&cfg, "quay.io", none), None);
        // A helper for one host wins over auths; credsStore covers the rest.
        let cfg = r#"{"auths": {"ghcr.io": {"auth": "eDp5"}},
                      "credHelpers": {"ghcr.io": "gh-helper"},
                      "credsStore": "desktop"}"#;
        let helper = |name: &str, server: &str| Some((name.to_string(), server.to_string()));
        assert_eq!(
            from_config(cfg, "ghcr.io", helper),
            Some(("gh-helper".into(), "ghcr.io".into()))
        );
        assert_eq!(
            from_config(cfg, "docker.io", helper),
            Some(("desktop".into(), "https://index.docker.io/v1/".into()))
        );
        assert_eq!(from_config("not json", "ghcr.io", helper), None);
    }

    #[test]
    fn a_helper_that_does_not_answer_is_killed_and_no_login() {
        let dir = std::env::temp_dir().join(format!("kiln-cred-helper-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let slow = dir.join("docker-credential-slow");
        std::fs::write(&slow, "#!/bin/sh\nexec sleep 30\n").unwrap();
        let ok = dir.join("docker-credential-ok");
        std::fs::write(
            &ok,
            "#!/bin/sh\nread server\necho \"{\\\"Username\\\": \\\"u\\\", \\\"Secret\\\": \\\"$server\\\"}\"\n",
        )
        .unwrap();
        for f in [&slow, &ok] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let bound = std::time::Duration::from_millis(300);
        let t0 = std::time::Instant::now();
        assert_eq!(
            run_helper_bounded(slow.to_str().unwrap(), "r.example", bound),
            None
        );
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(
            run_helper_bounded(ok.to_str().unwrap(), "r.example\n", bound),
            Some(("u".into(), "r.example".into()))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_helper_is_no_login() {
        assert_eq!(run_helper("kiln-does-not-exist", "ghcr.io"), None);
    }
}
