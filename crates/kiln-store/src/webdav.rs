//! The WebDAV backend: records as files under a collection of a WebDAV
//! server (`webdav://HOST[:PORT]/PATH` over HTTP, `webdavs://` over HTTPS,
//! `?timeout=SECONDS`), in the layout of [`crate::objects`].
//!
//! Credentials never come from the location: `KILN_WEBDAV_TOKEN` (a bearer
//! token), else `KILN_WEBDAV_USERNAME` + `KILN_WEBDAV_PASSWORD` (basic
//! auth), else the `machine HOST` entry of `~/.netrc` (`NETRC` names
//! another file), else none.
//!
//! Every write uploads to a temporary name in the target's collection
//! (`.tmp-<pid>-<n>-<nanos>`) and then `MOVE`s it into place: with
//! `Overwrite: F` for create-if-absent (412: another writer was first) and
//! `Overwrite: T` to replace. A reader never sees a half-written file, on
//! servers that write a `PUT` in place too. Collections that do not exist
//! are made with `MKCOL` when a `PUT` answers 409. A temporary file left by
//! an interrupted writer is never read (no record is named like it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::StoreError;
use crate::http::{Http, Remote, send, timeout_option, unexpected};
use crate::objects::{Objects, Read};

const EXPECTED: &str = "expected webdav://HOST[:PORT]/PATH or webdavs://HOST[:PORT]/PATH[?timeout=SECONDS], e.g. webdav://cache.internal:8080/kiln (credentials come from KILN_WEBDAV_* or ~/.netrc)";
const CREDENTIALS: &str =
    "kiln reads KILN_WEBDAV_TOKEN, or KILN_WEBDAV_USERNAME / KILN_WEBDAV_PASSWORD, or ~/.netrc";

/// A parsed `webdav(s)://` location.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DavLocation {
    /// `http://HOST[:PORT]/PATH/` (always ending in `/`).
    pub base: String,
    pub host: String,
    pub timeout: std::time::Duration,
    shown: String,
}

impl DavLocation {
    pub(crate) fn parse(s: &str) -> Result<DavLocation, StoreError> {
        let bad = |why: String| {
            StoreError::Invalid(format!(
                "WebDAV location {:?}: {why}; {EXPECTED}",
                crate::redact(s)
            ))
        };
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| bad("it does not start with webdav:// or webdavs://".into()))?;
        let http = match scheme.to_ascii_lowercase().as_str() {
            "webdav" => "http",
            "webdavs" => "https",
            _ => return Err(bad("it does not start with webdav:// or webdavs://".into())),
        };
        if rest.contains('#') {
            return Err(bad(
                "it has a '#': a URL fragment is never sent to the server, so the store would be another path; percent-encode it as %23 if the path has one".into(),
            ));
        }
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.contains('@') {
            return Err(bad(
                "credentials do not belong in the location (it is printed in logs); use KILN_WEBDAV_USERNAME / KILN_WEBDAV_PASSWORD or ~/.netrc".into(),
            ));
        }
        if authority.is_empty() {
            return Err(bad("no host".into()));
        }
        let path = path.trim_matches('/');
        if path.split('/').any(|seg| seg == "." || seg == "..") || path.contains("//") {
            return Err(bad(format!(
                "the path {path:?} has an empty, . or .. segment"
            )));
        }
        let base = if path.is_empty() {
            format!("{http}://{authority}/")
        } else {
            format!("{http}://{authority}/{path}/")
        };
        let parsed: url::Url = base
            .parse()
            .map_err(|e| bad(format!("not a valid URL ({e})")))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| bad("no host".into()))?
            .to_string();
        let timeout = timeout_option(query, EXPECTED).map_err(|e| {
            StoreError::Invalid(format!("WebDAV location {:?}: {e}", crate::redact(s)))
        })?;
        Ok(DavLocation {
            base,
            host,
            timeout,
            shown: format!("{}://{authority}/{path}", scheme.to_ascii_lowercase())
                .trim_end_matches('/')
                .to_string(),
        })
    }
}

/// How requests authenticate.
#[derive(Clone, Debug, PartialEq)]
pub enum Auth {
    None,
    Basic(String, String),
    Bearer(String),
}

impl Auth {
    /// From an environment lookup and a `.netrc` text, for `host`.
    pub fn resolve(env: impl Fn(&str) -> Option<String>, netrc: Option<&str>, host: &str) -> Auth {
        if let Some(t) = env("KILN_WEBDAV_TOKEN") {
            return Auth::Bearer(t);
        }
        if let Some(u) = env("KILN_WEBDAV_USERNAME") {
            return Auth::Basic(u, env("KILN_WEBDAV_PASSWORD").unwrap_or_default());
        }
        // netrc: tokens separated by whitespace; `machine NAME` (or
        // `default`) starts an entry with `login` and `password`. The first
        // entry for the host wins, `default` only when none names it.
        let words: Vec<&str> = netrc.unwrap_or("").split_whitespace().collect();
        // (applies to host, is default, login, password)
        let mut entries: Vec<(bool, bool, Option<&str>, Option<&str>)> = Vec::new();
        let mut i = 0;
        while i < words.len() {
            match words[i] {
                "machine" => {
                    entries.push((words.get(i + 1) == Some(&host), false, None, None));
                    i += 1;
                }
                "default" => entries.push((false, true, None, None)),
                "login" => {
                    if let Some(e) = entries.last_mut() {
                        e.2 = words.get(i + 1).copied();
                    }
                    i += 1;
                }
                "password" => {
                    if let Some(e) = entries.last_mut() {
                        e.3 = words.get(i + 1).copied();
                    }
                    i += 1;
                }
                _ => {}
            }
            i += 1;
        }
        let entry = entries
            .iter()
            .find(|e| e.0)
            .or_else(|| entries.iter().find(|e| e.1));
        match entry {
            Some((_, _, Some(l), p)) => Auth::Basic(l.to_string(), p.unwrap_or("").to_string()),
            _ => Auth::None,
        }
    }

    pub fn from_env(host: &str) -> Auth {
        let env = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let path =
            env("NETRC").unwrap_or_else(|| format!("{}/.netrc", env("HOME").unwrap_or_default()));
        let netrc = std::fs::read_to_string(path).ok();
        Auth::resolve(env, netrc.as_deref(), host)
    }
}

/// A record store on a WebDAV server.
pub struct DavStore {
    remote: Remote<Inner>,
}

struct Inner {
    client: reqwest::Client,
    base: String,
    auth: Auth,
}

impl std::fmt::Debug for DavStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.remote.debug("DavStore", f)
    }
}

impl DavStore {
    /// Opens the store at `webdav(s)://HOST[:PORT]/PATH` with the
    /// credentials of the environment. Nothing is contacted until the
    /// first operation.
    pub fn new(location: &str) -> Result<DavStore, StoreError> {
        let loc = DavLocation::parse(location)?;
        let auth = Auth::from_env(&loc.host);
        DavStore::open(loc, auth)
    }

    /// Opens the store with explicit credentials (not the environment's).
    pub fn with_auth(location: &str, auth: Auth) -> Result<DavStore, StoreError> {
        DavStore::open(DavLocation::parse(location)?, auth)
    }

    fn open(loc: DavLocation, auth: Auth) -> Result<DavStore, StoreError> {
        let http = Http::new(loc.shown.clone(), loc.timeout)?;
        Ok(DavStore {
            remote: Remote {
                inner: Arc::new(Inner {
                    client: http.client.clone(),
                    base: loc.base,
                    auth,
                }),
                http,
            },
        })
    }
}

fn method(m: &'static str) -> reqwest::Method {
    reqwest::Method::from_bytes(m.as_bytes()).unwrap_or(reqwest::Method::GET)
}

impl Inner {
    fn url(&self, name: &str) -> String {
        format!("{}{name}", self.base)
    }

    fn request(&self, m: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(m, url);
        match &self.auth {
            Auth::None => r,
            Auth::Basic(u, p) => r.basic_auth(u, Some(p)),
            Auth::Bearer(t) => r.bearer_auth(t),
        }
    }

    async fn get(&self, name: &str) -> Result<Read, String> {
        let url = self.url(name);
        let what = format!("reading {name}");
        let a = send(|| Ok(self.request(reqwest::Method::GET, &url)), &what).await?;
        match a.status {
            200 => Ok(Read::Found(a.body)),
            404 | 410 => Ok(Read::Missing),
            _ => Err(unexpected(&a, &what, CREDENTIALS)),
        }
    }

    async fn head(&self, name: &str) -> Result<bool, String> {
        let url = self.url(name);
        let what = format!("looking for {name}");
        let a = send(|| Ok(self.request(reqwest::Method::HEAD, &url)), &what).await?;
        match a.status {
            200 => Ok(true),
            404 | 410 => Ok(false),
            _ => Err(unexpected(&a, &what, CREDENTIALS)),
        }
    }

    /// Makes every collection above `name` (each `MKCOL` that finds one
    /// there already answers 405, which is fine).
    async fn mkcols(&self, name: &str) -> Result<(), String> {
        let mut path = String::new();
        let dirs: Vec<&str> = name.split('/').collect();
        for d in &dirs[..dirs.len().saturating_sub(1)] {
            path.push_str(d);
            path.push('/');
            let url = self.url(&path);
            let what = format!("making the collection {path}");
            let a = send(|| Ok(self.request(method("MKCOL"), &url)), &what).await?;
            if !matches!(a.status, 200 | 201 | 204 | 405) {
                return Err(unexpected(&a, &what, CREDENTIALS));
            }
        }
        Ok(())
    }

    /// Uploads `bytes` to a fresh temporary name beside `name`.
    async fn upload(&self, name: &str, bytes: &[u8]) -> Result<String, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
        let tmp = format!(
            "{dir}{}.tmp-{}-{}-{nanos}",
            if dir.is_empty() { "" } else { "/" },
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let url = self.url(&tmp);
        let what = format!("writing {name}");
        // Content-Length always, 0 too: nginx answers 500 to a PUT without it.
        let put = || {
            Ok(self
                .request(reqwest::Method::PUT, &url)
                .header(reqwest::header::CONTENT_LENGTH, bytes.len())
                .body(bytes.to_vec()))
        };
        let mut a = send(put, &what).await?;
        if a.status == 409 {
            // A collection above it does not exist (a server without
            // nginx's create_full_put_path): make them, then again.
            self.mkcols(&tmp).await?;
            a = send(put, &what).await?;
        }
        match a.status {
            200 | 201 | 204 => Ok(tmp),
            _ => Err(unexpected(&a, &what, CREDENTIALS)),
        }
    }

    /// Moves the temporary file into place: `Ok(false)` when
    /// `overwrite` is off and `name` exists.
    async fn publish(
        &self,
        tmp: &str,
        name: &str,
        overwrite: bool,
        bytes: &[u8],
    ) -> Result<bool, String> {
        let (from, to) = (self.url(tmp), self.url(name));
        let what = format!("publishing {name}");
        let a = send(
            || {
                Ok(self
                    .request(method("MOVE"), &from)
                    .header("Destination", &to)
                    .header("Overwrite", if overwrite { "T" } else { "F" }))
            },
            &what,
        )
        .await;
        let moved = match a {
            Ok(a) => match a.status {
                200 | 201 | 204 => Ok(true),
                412 if !overwrite => Ok(false),
                // The temporary file is gone: a MOVE that was made, whose
                // answer was lost and which was sent again. What is at the
                // name tells (this writer's bytes: published).
                404 if matches!(self.get(name).await, Ok(Read::Found(b)) if b == bytes) => Ok(true),
                _ => Err(unexpected(&a, &what, CREDENTIALS)),
            },
            Err(e) => Err(e),
        };
        if !matches!(moved, Ok(true)) {
            // Best effort: the temporary file is never read either way.
            let url = self.url(tmp);
            let _ = self.request(reqwest::Method::DELETE, &url).send().await;
        }
        moved
    }

    async fn write(&self, name: &str, bytes: &[u8], overwrite: bool) -> Result<bool, String> {
        let tmp = self.upload(name, bytes).await?;
        self.publish(&tmp, name, overwrite, bytes).await
    }
}

impl Objects for DavStore {
    fn shown(&self) -> String {
        self.remote.http.location.clone()
    }

    fn read(&self, name: &str) -> Result<Read, StoreError> {
        let name = name.to_string();
        self.remote.run(|i| async move { i.get(&name).await })
    }

    fn create(&self, name: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        let (name, bytes) = (name.to_string(), bytes.to_vec());
        self.remote
            .run(|i| async move { i.write(&name, &bytes, false).await })
    }

    fn replace(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let (name, bytes) = (name.to_string(), bytes.to_vec());
        self.remote
            .run(|i| async move { i.write(&name, &bytes, true).await.map(|_| ()) })
    }

    fn exists(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_string();
        self.remote.run(|i| async move { i.head(&name).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_bad_ones_say_the_form() {
        let l = DavLocation::parse("webdav://127.0.0.1:8080/kiln/records?timeout=9").unwrap();
        assert_eq!(l.base, "http://127.0.0.1:8080/kiln/records/");
        assert_eq!(l.host, "127.0.0.1");
        assert_eq!(l.timeout, std::time::Duration::from_secs(9));
        assert_eq!(l.shown, "webdav://127.0.0.1:8080/kiln/records");
        let l = DavLocation::parse("WEBDAVS://cache.example.com").unwrap();
        assert_eq!(l.base, "https://cache.example.com/");
        for (s, why) in [
            ("webdav://", "no host"),
            ("webdav:///x", "no host"),
            ("webdav://u:p@h/x", "credentials do not belong"),
            ("webdav://h/a//b", "empty, . or .."),
            ("webdav://h/x?timeout=abc", "timeout=abc"),
            ("webdav://h/x?user=a", "unknown parameter"),
            ("webdav://h/x#frag", "fragment is never sent"),
        ] {
            match DavLocation::parse(s) {
                Err(StoreError::Invalid(m)) => {
                    assert!(m.contains(why), "{s}: {m}");
                    assert!(m.contains("expected webdav://"), "{s}: {m}");
                }
                other => panic!("{s}: {other:?}"),
            }
        }
    }

    #[test]
    fn credentials_come_from_the_environment_then_netrc() {
        let none = |_: &str| None;
        let netrc = "machine other login o password op\nmachine cache.internal\n  login kiln\n  password s3cret\ndefault login d password dp\n";
        assert_eq!(
            Auth::resolve(none, Some(netrc), "cache.internal"),
            Auth::Basic("kiln".into(), "s3cret".into())
        );
        assert_eq!(
            Auth::resolve(none, Some(netrc), "elsewhere"),
            Auth::Basic("d".into(), "dp".into())
        );
        assert_eq!(Auth::resolve(none, None, "h"), Auth::None);
        let env = |n: &str| match n {
            "KILN_WEBDAV_USERNAME" => Some("u".to_string()),
            "KILN_WEBDAV_PASSWORD" => Some("p".to_string()),
            _ => None,
        };
        assert_eq!(
            Auth::resolve(env, Some(netrc), "cache.internal"),
            Auth::Basic("u".into(), "p".into())
        );
        let token = |n: &str| (n == "KILN_WEBDAV_TOKEN").then(|| "t".to_string());
        assert_eq!(Auth::resolve(token, None, "h"), Auth::Bearer("t".into()));
    }
}
