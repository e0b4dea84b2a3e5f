//! The S3 backend: records as objects under a prefix of a bucket
//! (`s3://BUCKET[/PREFIX][?timeout=SECONDS]`), in the layout of
//! [`crate::objects`].
//!
//! Endpoint, region and credentials come from where S3 tools take them,
//! never from the location (which lands in logs):
//! - endpoint: `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's
//!   `endpoint_url` in the config file, else AWS
//!   (`https://s3.<region>.amazonaws.com`); a custom endpoint is spoken to
//!   in path style (`ENDPOINT/BUCKET/KEY`), AWS in virtual-host style;
//! - region: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`,
//!   else `us-east-1`;
//! - credentials: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (and
//!   `AWS_SESSION_TOKEN`), else the profile (`AWS_PROFILE`, else `default`)
//!   in the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
//!   `~/.aws/credentials`) or the config file (`AWS_CONFIG_FILE`, else
//!   `~/.aws/config`); none at all is anonymous access (a public bucket).
//!
//! Requests are signed with SigV4 in the `Authorization` header (AWS's
//! `aws-sigv4`), the conditional header and the payload's SHA-256 included. Create-if-absent is `PUT` with
//! `If-None-Match: *` (412: another writer was first; 409, a concurrent
//! conditional write, is asked again). A server that answers 501 to the
//! header gets a read then a plain `PUT`: two writers that race there both
//! write, and the later record stands, which is benign (both describe the
//! same key). A `PUT` replaces an object atomically on every S3 server.

use std::sync::Arc;
use std::time::Duration;

use crate::StoreError;
use crate::http::{Http, Remote, send, timeout_option, unexpected};
use crate::objects::{Objects, Read};

const EXPECTED: &str = "expected s3://BUCKET[/PREFIX][?timeout=SECONDS], e.g. s3://ci-cache/kiln (endpoint, region and credentials come from the AWS_* environment or ~/.aws)";
const CREDENTIALS: &str = "kiln reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the AWS_PROFILE profile of ~/.aws/credentials";

/// A parsed `s3://` location.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct S3Location {
    pub bucket: String,
    /// Empty, or ending in `/`.
    pub prefix: String,
    pub timeout: Duration,
}

impl S3Location {
    pub(crate) fn parse(s: &str) -> Result<S3Location, StoreError> {
        let bad = |why: String| {
            StoreError::Invalid(format!(
                "S3 location {:?}: {why}; {EXPECTED}",
                crate::redact(s)
            ))
        };
        let rest = s
            .get(..5)
            .filter(|p| p.eq_ignore_ascii_case("s3://"))
            .map(|_| &s[5..])
            .ok_or_else(|| bad("it does not start with s3://".into()))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket".into()));
        }
        // S3's bucket naming rules (3-63 of a-z 0-9 . -, starting and
        // ending with a letter or digit).
        let ok = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
            && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !ok {
            return Err(bad(format!(
                "{bucket:?} is not a valid bucket name (3 to 63 characters of a-z, 0-9, '.' and '-')"
            )));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|seg| seg == "." || seg == "..") || prefix.contains("//") {
            return Err(bad(format!(
                "the prefix {prefix:?} has an empty, . or .. segment"
            )));
        }
        let timeout = timeout_option(query, EXPECTED)
            .map_err(|e| StoreError::Invalid(format!("S3 location {s:?}: {e}")))?;
        Ok(S3Location {
            bucket: bucket.to_string(),
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
            timeout,
        })
    }

    fn display(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix.trim_end_matches('/'))
            .trim_end_matches('/')
            .to_string()
    }
}

/// Where the endpoint, region and credentials came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AwsSettings {
    pub endpoint: Option<String>,
    pub region: String,
    /// Access key id, secret key, session token.
    pub key: Option<(String, String, Option<String>)>,
}

/// `[section]` → key → value of an INI file as the AWS tools write them
/// (`#`/`;` comments; nested `s3 =` blocks are skipped).
fn ini(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            out.push((name.trim().to_string(), Vec::new()));
            continue;
        }
        // A nested setting (indented under `s3 =`) belongs to a service.
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        if let (Some((_, kv)), Some((k, v))) = (out.last_mut(), l.split_once('=')) {
            kv.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

fn section<'a>(
    file: &'a [(String, Vec<(String, String)>)],
    names: &[String],
) -> Option<&'a [(String, String)]> {
    names.iter().find_map(|n| {
        file.iter()
            .find(|(s, _)| s == n)
            .map(|(_, kv)| kv.as_slice())
    })
}

fn get<'a>(kv: Option<&'a [(String, String)]>, key: &str) -> Option<&'a str> {
    kv?.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

impl AwsSettings {
    /// From an environment lookup and the two files' contents.
    pub fn resolve(
        env: impl Fn(&str) -> Option<String>,
        credentials_file: Option<&str>,
        config_file: Option<&str>,
    ) -> AwsSettings {
        let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".into());
        let creds = ini(credentials_file.unwrap_or(""));
        let config = ini(config_file.unwrap_or(""));
        let creds_kv = section(&creds, std::slice::from_ref(&profile));
        let config_kv = section(&config, &[format!("profile {profile}"), profile.clone()]);
        let endpoint = env("AWS_ENDPOINT_URL_S3")
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .or_else(|| get(config_kv, "endpoint_url").map(str::to_string));
        let region = env("AWS_REGION")
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .or_else(|| get(config_kv, "region").map(str::to_string))
            .unwrap_or_else(|| "us-east-1".into());
        let from_kv = |kv: Option<&[(String, String)]>| {
            Some((
                get(kv, "aws_access_key_id")?.to_string(),
                get(kv, "aws_secret_access_key")?.to_string(),
                get(kv, "aws_session_token").map(str::to_string),
            ))
        };
        let key = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(k), Some(s)) => Some((k, s, env("AWS_SESSION_TOKEN"))),
            _ => from_kv(creds_kv).or_else(|| from_kv(config_kv)),
        };
        AwsSettings {
            endpoint,
            region,
            key,
        }
    }

    /// From this process's environment and files.
    pub fn from_env() -> AwsSettings {
        let env = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let home = env("HOME").unwrap_or_default();
        let read = |var: &str, default: &str| {
            let path = env(var).unwrap_or_else(|| format!("{home}/.aws/{default}"));
            std::fs::read_to_string(path).ok()
        };
        AwsSettings::resolve(
            env,
            read("AWS_SHARED_CREDENTIALS_FILE", "credentials").as_deref(),
            read("AWS_CONFIG_FILE", "config").as_deref(),
        )
    }
}

/// A record store in an S3 bucket.
pub struct S3Store {
    remote: Remote<Inner>,
}

struct Inner {
    client: reqwest::Client,
    /// `ENDPOINT/BUCKET` (path style) or `https://BUCKET.s3.REGION…`.
    base: url::Url,
    region: String,
    credentials: Option<aws_credential_types::Credentials>,
    prefix: String,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.remote.debug("S3Store", f)
    }
}

impl S3Store {
    /// Opens the store at `s3://BUCKET[/PREFIX]` with the endpoint, region
    /// and credentials of the environment. Nothing is contacted until the
    /// first operation.
    pub fn new(location: &str) -> Result<S3Store, StoreError> {
        S3Store::with_settings(location, AwsSettings::from_env())
    }

    /// Opens the store with explicit settings (not the environment's).
    pub fn with_settings(location: &str, aws: AwsSettings) -> Result<S3Store, StoreError> {
        let loc = S3Location::parse(location)?;
        let endpoint = aws
            .endpoint
            .clone()
            .unwrap_or_else(|| aws_endpoint(&loc.bucket, &aws.region));
        let invalid = |why: String| {
            StoreError::Invalid(format!(
                "S3 location {location:?}: the endpoint {endpoint:?} {why} (set AWS_ENDPOINT_URL to http(s)://HOST[:PORT])"
            ))
        };
        let mut base: url::Url = endpoint
            .parse()
            .map_err(|e| invalid(format!("is not a URL ({e})")))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(invalid("is not an http(s) URL with a host".into()));
        }
        if aws.endpoint.is_some() || loc.bucket.contains('.') {
            // A custom endpoint, or a bucket with a dot (AWS's certificate
            // for *.s3.REGION.amazonaws.com covers no dotted name): path
            // style, ENDPOINT/BUCKET/KEY.
            base.path_segments_mut()
                .map_err(|()| invalid("cannot take a path".into()))?
                .pop_if_empty()
                .push(&loc.bucket);
        }
        let credentials = aws
            .key
            .map(|(k, s, t)| aws_credential_types::Credentials::new(k, s, t, None, "kiln"));
        // Messages name the endpoint too when it is not AWS's: which server
        // did not answer matters as much as which bucket.
        let shown = match &aws.endpoint {
            Some(e) => format!("{} (endpoint {})", loc.display(), crate::redact(e)),
            None => loc.display(),
        };
        let http = Http::new(shown, loc.timeout)?;
        Ok(S3Store {
            remote: Remote {
                inner: Arc::new(Inner {
                    client: http.client.clone(),
                    base,
                    region: aws.region,
                    credentials,
                    prefix: loc.prefix,
                }),
                http,
            },
        })
    }
}

/// AWS's endpoint for `bucket`: virtual-host style
/// (`BUCKET.s3.REGION.amazonaws.com`), or the regional endpoint for path
/// style when the bucket name has a dot.
fn aws_endpoint(bucket: &str, region: &str) -> String {
    if bucket.contains('.') {
        format!("https://s3.{region}.amazonaws.com")
    } else {
        format!("https://{bucket}.s3.{region}.amazonaws.com")
    }
}

/// RFC 3986 percent-encoding of everything but the unreserved characters,
/// as SigV4's canonical URI has it.
fn sigv4_encode(seg: &str) -> String {
    let mut out = String::with_capacity(seg.len());
    for b in seg.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

enum Put {
    Created,
    Exists,
    /// The server does not take `If-None-Match` on PUT.
    Unsupported,
}

impl Inner {
    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The object's URL, each segment of its key percent-encoded as SigV4
    /// encodes it (everything but `A-Za-z0-9-._~`): the path the server
    /// sees is then the path that was signed, whatever characters the
    /// prefix has (a URL path may carry `+=@:!$&,;*()'` unencoded, and
    /// S3 would sign those encoded).
    fn url(&self, key: &str) -> url::Url {
        let mut u = self.base.clone();
        let mut path = u.path().trim_end_matches('/').to_string();
        for seg in key.split('/') {
            path.push('/');
            path.push_str(&sigv4_encode(seg));
        }
        u.set_path(&path);
        u
    }

    /// A request signed with SigV4 (anonymous without credentials).
    fn request(
        &self,
        method: reqwest::Method,
        url: &url::Url,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<reqwest::RequestBuilder, String> {
        let mut r = self.client.request(method.clone(), url.clone());
        if method == reqwest::Method::PUT {
            // Content-Length always, 0 too (an empty body sends none).
            r = r.header(reqwest::header::CONTENT_LENGTH, body.len());
        }
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        let Some(credentials) = &self.credentials else {
            return Ok(r.body(body.to_vec()));
        };
        let identity = credentials.clone().into();
        use aws_sigv4::http_request::{
            PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
            SigningSettings, UriPathNormalizationMode, sign,
        };
        let mut settings = SigningSettings::default();
        // S3's own rules: the path as sent, encoded once, and the
        // payload's SHA-256 in x-amz-content-sha256.
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(std::time::SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| format!("signing the request: {e}"))?
            .into();
        let signable = SignableRequest::new(
            method.as_str(),
            url.as_str(),
            headers.iter().copied(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| format!("signing the request: {e}"))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| format!("signing the request: {e}"))?
            .into_parts();
        for (k, v) in instructions.headers() {
            r = r.header(k, v);
        }
        Ok(r.body(body.to_vec()))
    }

    /// Sends a signed request (signed anew for each try: the signature
    /// carries the time).
    async fn send(
        &self,
        method: reqwest::Method,
        key: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        what: &str,
    ) -> Result<crate::http::Answer, String> {
        let url = self.url(key);
        send(|| self.request(method.clone(), &url, headers, body), what).await
    }

    async fn get(&self, name: &str) -> Result<Read, String> {
        let key = self.key(name);
        let what = format!("reading {key}");
        let a = self
            .send(reqwest::Method::GET, &key, &[], b"", &what)
            .await?;
        match a.status {
            200 => Ok(Read::Found(a.body)),
            // NoSuchKey is a miss; NoSuchBucket is a store that is not there.
            404 if a.says() != "NoSuchBucket" => Ok(Read::Missing),
            // S3 answers 403 instead of 404 for a key that is not there
            // when the credentials lack s3:ListBucket: a miss cannot be
            // told from a refusal, so say what to grant.
            403 => Err(format!(
                "{}; if they may read objects but not list the bucket, S3 answers 403 for every key that is not there: grant s3:ListBucket on the bucket so misses are told from refusals",
                unexpected(&a, &what, CREDENTIALS)
            )),
            _ => Err(unexpected(&a, &what, CREDENTIALS)),
        }
    }

    async fn head(&self, name: &str) -> Result<bool, String> {
        let key = self.key(name);
        let what = format!("looking for {key}");
        let a = self
            .send(reqwest::Method::HEAD, &key, &[], b"", &what)
            .await?;
        match a.status {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(unexpected(&a, &what, CREDENTIALS)),
        }
    }

    async fn put(&self, name: &str, bytes: &[u8], if_absent: bool) -> Result<Put, String> {
        let key = self.key(name);
        let headers: &[(&str, &str)] = if if_absent {
            &[("if-none-match", "*")]
        } else {
            &[]
        };
        let what = format!("writing {key}");
        let mut conflicts = [50u64, 200, 800].into_iter();
        loop {
            let a = self
                .send(reqwest::Method::PUT, &key, headers, bytes, &what)
                .await?;
            match a.status {
                200 | 201 | 204 => return Ok(Put::Created),
                412 if if_absent => return Ok(Put::Exists),
                // A concurrent conditional write to the same key: ask again.
                409 if if_absent => match conflicts.next() {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    None => return Err(unexpected(&a, &what, CREDENTIALS)),
                },
                501 if if_absent => return Ok(Put::Unsupported),
                _ => return Err(unexpected(&a, &what, CREDENTIALS)),
            }
        }
    }

    async fn create(&self, name: &str, bytes: &[u8]) -> Result<bool, String> {
        match self.put(name, bytes, true).await? {
            Put::Created => Ok(true),
            Put::Exists => Ok(false),
            Put::Unsupported => {
                if self.head(name).await? {
                    return Ok(false);
                }
                self.put(name, bytes, false).await.map(|_| true)
            }
        }
    }
}

impl Objects for S3Store {
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
            .run(|i| async move { i.create(&name, &bytes).await })
    }

    fn replace(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let (name, bytes) = (name.to_string(), bytes.to_vec());
        self.remote
            .run(|i| async move { i.put(&name, &bytes, false).await.map(|_| ()) })
    }

    fn exists(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_string();
        self.remote.run(|i| async move { i.head(&name).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(s: &str) -> String {
        match S3Location::parse(s) {
            Err(StoreError::Invalid(m)) => m,
            other => panic!("{s}: expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn locations_parse_and_bad_ones_say_the_form() {
        let l = S3Location::parse("s3://ci-cache/kiln/records?timeout=5").unwrap();
        assert_eq!(l.bucket, "ci-cache");
        assert_eq!(l.prefix, "kiln/records/");
        assert_eq!(l.timeout, Duration::from_secs(5));
        assert_eq!(l.display(), "s3://ci-cache/kiln/records");
        let l = S3Location::parse("S3://bucket").unwrap();
        assert_eq!((l.prefix.as_str(), l.display()), ("", "s3://bucket".into()));
        for (s, why) in [
            ("s3://", "no bucket"),
            ("s3:///x", "no bucket"),
            ("s3://ab/x", "not a valid bucket name"),
            ("s3://Bucket/x", "not a valid bucket name"),
            ("s3://bucket/a//b", "empty, . or .."),
            ("s3://bucket/a/../b", "empty, . or .."),
            ("s3://bucket/x?timeout=0", "timeout=0"),
            ("s3://bucket/x?region=eu", "unknown parameter"),
        ] {
            let m = invalid(s);
            assert!(m.contains(why), "{s}: {m}");
            assert!(m.contains("expected s3://BUCKET"), "{s}: {m}");
        }
    }

    #[test]
    fn settings_come_from_the_environment_then_the_files() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        let creds = "[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n\n[ro]\naws_access_key_id=RK\naws_secret_access_key=RS\naws_session_token=T\n";
        let config = "[default]\nregion = eu-west-1\n[profile ro]\nregion=us-west-2\nendpoint_url = http://127.0.0.1:9000\ns3 =\n  addressing_style = path\n";
        let s = AwsSettings::resolve(env(&[]), Some(creds), Some(config));
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(s.endpoint, None);
        assert_eq!(s.key, Some(("AK".into(), "SK".into(), None)));
        let s = AwsSettings::resolve(env(&[("AWS_PROFILE", "ro")]), Some(creds), Some(config));
        assert_eq!(s.region, "us-west-2");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s.key, Some(("RK".into(), "RS".into(), Some("T".into()))));
        let s = AwsSettings::resolve(
            env(&[
                ("AWS_ACCESS_KEY_ID", "EK"),
                ("AWS_SECRET_ACCESS_KEY", "ES"),
                ("AWS_REGION", "ap-south-1"),
                ("AWS_ENDPOINT_URL", "http://e:1"),
                ("AWS_ENDPOINT_URL_S3", "http://s3:2"),
            ]),
            Some(creds),
            Some(config),
        );
        assert_eq!(s.key, Some(("EK".into(), "ES".into(), None)));
        assert_eq!(s.region, "ap-south-1");
        assert_eq!(s.endpoint.as_deref(), Some("http://s3:2"));
        // Nothing anywhere: anonymous, us-east-1.
        let s = AwsSettings::resolve(env(&[]), None, None);
        assert_eq!((s.key, s.region.as_str()), (None, "us-east-1"));
    }

    #[test]
    fn object_urls_are_signed_as_sent() {
        let aws = |endpoint: Option<&str>| AwsSettings {
            endpoint: endpoint.map(String::from),
            region: "eu-west-1".into(),
            key: None,
        };
        let s = S3Store::with_settings("s3://ci-cache/a+b=c@d:e!(f)*,;'g~h", aws(None)).unwrap();
        let u = s
            .remote
            .inner
            .url(&s.remote.inner.key("records-v1/ab/k1_00.json"));
        assert_eq!(
            u.as_str(),
            "https://ci-cache.s3.eu-west-1.amazonaws.com/a%2Bb%3Dc%40d%3Ae%21%28f%29%2A%2C%3B%27g~h/records-v1/ab/k1_00.json"
        );
        // A dotted bucket: path style on the regional endpoint.
        let s = S3Store::with_settings("s3://ci.cache.example/p", aws(None)).unwrap();
        assert_eq!(
            s.remote.inner.url(&s.remote.inner.key("x")).as_str(),
            "https://s3.eu-west-1.amazonaws.com/ci.cache.example/p/x"
        );
        let s = S3Store::with_settings("s3://bkt/p", aws(Some("http://127.0.0.1:9000/"))).unwrap();
        assert_eq!(
            s.remote.inner.url(&s.remote.inner.key("x")).as_str(),
            "http://127.0.0.1:9000/bkt/p/x"
        );
    }

    #[test]
    fn a_bad_endpoint_is_invalid_input() {
        let aws = AwsSettings {
            endpoint: Some("ftp://x".into()),
            region: "us-east-1".into(),
            key: None,
        };
        match S3Store::with_settings("s3://bucket/p", aws) {
            Err(StoreError::Invalid(m)) => assert!(m.contains("AWS_ENDPOINT_URL"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
