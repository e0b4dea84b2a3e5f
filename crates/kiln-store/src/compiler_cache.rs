//! A compiler cache kiln understands: sccache's WebDAV or S3 back end at a
//! location written as a record store's (`webdav(s)://HOST[:PORT]/PATH`,
//! `s3://BUCKET[/PREFIX]`, endpoint and credentials from the same places).
//!
//! kiln probes it before a run, for reads **and** writes (a store that
//! grants reads only caches nothing, silently), and hands builds its
//! settings as one BuildKit secret ([`SECRET_ID`]): `KEY='value'` lines a
//! RUN step sources, with sccache's variable names. Never a build arg, so
//! neither the endpoint nor the credentials enter a cache key, an image or
//! its history. docs/compiler-cache.md.

use crate::StoreError;
use crate::objects::{Objects, Read};
use crate::s3::{AwsSettings, S3Location, S3Store};
use crate::webdav::{Auth, DavLocation, DavStore};

/// The id of the secret that carries the settings.
pub const SECRET_ID: &str = "kiln-sccache";

/// What the write probe writes (the same object every time).
pub const PROBE_NAME: &str = "kiln-probe/write";

/// An opened compiler-cache store.
pub struct CompilerCache {
    objects: Box<dyn Objects>,
    /// sccache's variables, credentials included: never printed.
    env: Vec<(String, String)>,
}

/// What the probe found.
#[derive(Debug, PartialEq, Eq)]
pub struct Probe {
    /// Writing failed: why (the server's answer).
    pub write: Option<String>,
    /// Reading back what was written failed: why.
    pub read: Option<String>,
    /// A key that is not there is not answered with a miss (typically 403
    /// from S3 without `s3:ListBucket`): what came back. sccache then sees
    /// an error, not a miss, for every new object.
    pub missing: Option<String>,
}

impl Probe {
    /// Reads and writes work.
    pub fn ok(&self) -> bool {
        self.write.is_none() && self.read.is_none()
    }
}

impl CompilerCache {
    /// Opens `location` with the environment's endpoint and credentials.
    pub fn open(location: &str) -> Result<CompilerCache, StoreError> {
        CompilerCache::open_with(location, None, None)
    }

    /// Opens `location` with the given WebDAV login or AWS settings in
    /// place of the environment's (tests, tools).
    pub fn open_with(
        location: &str,
        dav_auth: Option<Auth>,
        aws: Option<AwsSettings>,
    ) -> Result<CompilerCache, StoreError> {
        let scheme = location
            .split_once("://")
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default();
        match scheme.as_str() {
            "webdav" | "webdavs" => {
                let loc = DavLocation::parse(location)?;
                let auth = dav_auth.unwrap_or_else(|| Auth::from_env(&loc.host));
                let env = webdav_env(&loc.base, &auth);
                Ok(CompilerCache {
                    objects: Box::new(DavStore::with_auth(location, auth)?),
                    env,
                })
            }
            "s3" => {
                let loc = S3Location::parse(location)?;
                let aws = aws.unwrap_or_else(AwsSettings::from_env);
                let env = s3_env(&loc.bucket, &loc.prefix, &aws);
                Ok(CompilerCache {
                    objects: Box::new(S3Store::with_settings(location, aws)?),
                    env,
                })
            }
            _ => Err(StoreError::Invalid(format!(
                "compiler cache location {location:?}: expected webdav(s)://HOST[:PORT]/PATH or s3://BUCKET[/PREFIX]"
            ))),
        }
    }

    /// Where it is, for messages (no credentials).
    pub fn shown(&self) -> String {
        self.objects.shown()
    }

    /// Writes the probe object, reads it back, and reads a name that is
    /// not there.
    pub fn probe(&self) -> Probe {
        let body = b"kiln compiler cache probe\n";
        let mut p = Probe {
            write: None,
            read: None,
            missing: None,
        };
        if let Err(e) = self.objects.replace(PROBE_NAME, body) {
            p.write = Some(detail(e));
        } else {
            match self.objects.read(PROBE_NAME) {
                Ok(Read::Found(b)) if b == body => {}
                Ok(Read::Found(_)) => {
                    p.read = Some("what was read back differs from what was written".into())
                }
                Ok(Read::Missing) => p.read = Some("what was written is not there".into()),
                Ok(Read::Unreadable(why)) => p.read = Some(why),
                Err(e) => p.read = Some(detail(e)),
            }
        }
        let absent = format!(
            "kiln-probe/absent-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        match self.objects.read(&absent) {
            Ok(Read::Missing) => {}
            Ok(Read::Found(_)) => {}
            Ok(Read::Unreadable(why)) => p.missing = Some(why),
            Err(e) => p.missing = Some(detail(e)),
        }
        p
    }

    /// The secret's text: one `NAME='value'` line per sccache variable
    /// (`SCCACHE_RECACHE=1` with `force_recache`), for `set -a; .
    /// /run/secrets/kiln-sccache; set +a` in a RUN step.
    pub fn secret_text(&self, force_recache: bool) -> String {
        let mut out = String::new();
        for (k, v) in &self.env {
            out.push_str(&format!("{k}={}\n", quoted(v)));
        }
        if force_recache {
            out.push_str("SCCACHE_RECACHE='1'\n");
        }
        out
    }
}

fn detail(e: StoreError) -> String {
    match e {
        StoreError::Unavailable { detail, .. } => detail,
        StoreError::Invalid(m) => m,
    }
}

/// A value in single quotes for a POSIX shell (`'` written `'\''`).
fn quoted(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// sccache's WebDAV variables for `base` (`http://HOST[:PORT]/PATH/`):
/// the server as the endpoint, the path as the key prefix.
fn webdav_env(base: &str, auth: &Auth) -> Vec<(String, String)> {
    let (endpoint, prefix) = match base.find("://").map(|i| i + 3) {
        Some(i) => match base[i..].find('/') {
            Some(j) => (&base[..i + j], base[i + j..].trim_matches('/')),
            None => (base.trim_end_matches('/'), ""),
        },
        None => (base, ""),
    };
    let mut env = vec![("SCCACHE_WEBDAV_ENDPOINT".to_string(), endpoint.to_string())];
    if !prefix.is_empty() {
        env.push(("SCCACHE_WEBDAV_KEY_PREFIX".into(), prefix.to_string()));
    }
    match auth {
        Auth::None => {}
        Auth::Basic(u, p) => {
            env.push(("SCCACHE_WEBDAV_USERNAME".into(), u.clone()));
            env.push(("SCCACHE_WEBDAV_PASSWORD".into(), p.clone()));
        }
        Auth::Bearer(t) => env.push(("SCCACHE_WEBDAV_TOKEN".into(), t.clone())),
    }
    env
}

/// sccache's S3 variables.
fn s3_env(bucket: &str, prefix: &str, aws: &AwsSettings) -> Vec<(String, String)> {
    let mut env = vec![
        ("SCCACHE_BUCKET".to_string(), bucket.to_string()),
        ("SCCACHE_REGION".to_string(), aws.region.clone()),
    ];
    let prefix = prefix.trim_matches('/');
    if !prefix.is_empty() {
        env.push(("SCCACHE_S3_KEY_PREFIX".into(), prefix.to_string()));
    }
    if let Some(e) = &aws.endpoint {
        env.push(("SCCACHE_ENDPOINT".into(), e.clone()));
        env.push((
            "SCCACHE_S3_USE_SSL".into(),
            e.starts_with("https://").to_string(),
        ));
    }
    if let Some((id, secret, token)) = &aws.key {
        env.push(("AWS_ACCESS_KEY_ID".into(), id.clone()));
        env.push(("AWS_SECRET_ACCESS_KEY".into(), secret.clone()));
        if let Some(t) = token {
            env.push(("AWS_SESSION_TOKEN".into(), t.clone()));
        }
    } else {
        env.push(("SCCACHE_S3_NO_CREDENTIALS".into(), "true".into()));
    }
    env
}

/// sccache's counters, from the lines of `sccache --show-stats` in a
/// build's log. Every block a build prints is added (one server per RUN
/// step prints its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    /// Read and write errors, other cache errors and timeouts: a store
    /// that fails here caches nothing, whatever the probe found.
    pub errors: u64,
}

impl Stats {
    /// Counts one log line; `true` when it was a counter.
    pub fn line(&mut self, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        // The counter's name then its value, and nothing else: "Cache hits
        // (C/C++)" and "Cache hits rate" are per-language or derived.
        let Some((value, name)) = words.split_last() else {
            return false;
        };
        let Ok(n) = value.parse::<u64>() else {
            return false;
        };
        let slot = match name {
            ["Compile", "requests"] => &mut self.requests,
            ["Cache", "hits"] => &mut self.hits,
            ["Cache", "misses"] => &mut self.misses,
            ["Cache", "read", "errors"]
            | ["Cache", "write", "errors"]
            | ["Cache", "errors"]
            | ["Cache", "timeouts"] => &mut self.errors,
            _ => return false,
        };
        *slot += n;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webdav_settings_name_the_server_the_prefix_and_the_login() {
        let env = webdav_env(
            "http://127.0.0.1:8480/cache/rocm/",
            &Auth::Basic("writer".into(), "it's".into()),
        );
        assert_eq!(
            env,
            [
                (
                    "SCCACHE_WEBDAV_ENDPOINT".to_string(),
                    "http://127.0.0.1:8480".to_string()
                ),
                ("SCCACHE_WEBDAV_KEY_PREFIX".into(), "cache/rocm".into()),
                ("SCCACHE_WEBDAV_USERNAME".into(), "writer".into()),
                ("SCCACHE_WEBDAV_PASSWORD".into(), "it's".into()),
            ]
        );
        assert_eq!(quoted("it's"), "'it'\\''s'");
    }

    #[test]
    fn s3_settings_name_the_bucket_region_endpoint_and_keys() {
        let aws = AwsSettings {
            endpoint: Some("http://127.0.0.1:9480".into()),
            region: "eu-west-1".into(),
            key: Some(("AKIA".into(), "secret".into(), None)),
        };
        let env = s3_env("b", "ccache/", &aws);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SCCACHE_BUCKET"), Some("b"));
        assert_eq!(get("SCCACHE_REGION"), Some("eu-west-1"));
        assert_eq!(get("SCCACHE_S3_KEY_PREFIX"), Some("ccache"));
        assert_eq!(get("SCCACHE_ENDPOINT"), Some("http://127.0.0.1:9480"));
        assert_eq!(get("SCCACHE_S3_USE_SSL"), Some("false"));
        assert_eq!(get("AWS_SECRET_ACCESS_KEY"), Some("secret"));
        assert_eq!(get("SCCACHE_S3_NO_CREDENTIALS"), None);
    }

    #[test]
    fn stats_count_the_three_counters_of_every_block() {
        let mut s = Stats::default();
        let log = "Compile requests                      3\nCompile requests executed             3\nCache hits                            2\nCache hits (C/C++)                    2\nCache misses                          1\nCache hits rate                  66.67 %\nCache timeouts 0\nCache read errors 0\nCache write errors 1\nCache errors 0\nCompile requests 1\nCache hits 1\nCache misses 0\nnot a counter 5\n";
        for l in log.lines() {
            s.line(l);
        }
        assert_eq!(
            s,
            Stats {
                requests: 4,
                hits: 3,
                misses: 1,
                errors: 1
            }
        );
    }
}
