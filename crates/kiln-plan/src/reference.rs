//! Container image references, normalised the way Docker does it.
//!
//! This module owns the comparison "do these two strings name the same image tag?". It
//! follows the grammar of `distribution/reference` (`ParseNormalizedNamed`): `busybox` is
//! `docker.io/library/busybox:latest`, `index.docker.io` is `docker.io`, a first path
//! component is a registry only if it contains `.` or `:`, is `localhost`, or has an
//! uppercase letter, and repository paths are lowercase. It never resolves anything: a
//! reference pinned by digest is kept as written and matches no tag.

use std::fmt;

/// Docker Hub's canonical registry name.
const DEFAULT_DOMAIN: &str = "docker.io";
/// The legacy name Docker rewrites to [`DEFAULT_DOMAIN`].
const LEGACY_DEFAULT_DOMAIN: &str = "index.docker.io";
/// Namespace of Docker Hub's official images (`busybox` is `library/busybox`).
const OFFICIAL_REPO_PREFIX: &str = "library/";
/// The tag a reference without tag or digest means.
const DEFAULT_TAG: &str = "latest";
/// `distribution/reference` refuses longer names (domain and path).
const NAME_TOTAL_LENGTH_MAX: usize = 255;
/// `distribution/reference` refuses longer tags.
const TAG_LENGTH_MAX: usize = 128;

/// A parsed, normalised image reference: `domain/path[:tag][@digest]`.
///
/// A reference written without tag or digest gets the tag `latest`; one written with a
/// digest keeps whatever tag it was written with (possibly none), because the digest
/// is what a pull resolves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageRef {
    domain: String,
    path: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl ImageRef {
    /// Parses and normalises `reference`; `None` when it is not a valid image reference
    /// (a context name, a number, a 64-hex image id, a repository with uppercase letters…).
    #[must_use]
    pub fn parse(reference: &str) -> Option<Self> {
        if reference.is_empty() || is_image_id(reference) {
            return None;
        }
        let (name_and_tag, digest) = match reference.split_once('@') {
            Some((name, digest)) => {
                if !is_digest(digest) {
                    return None;
                }
                (name, Some(digest.to_owned()))
            }
            None => (reference, None),
        };
        // A tag is a `:` after the last `/`; a `:` before it belongs to a registry port.
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                let tag = &name_and_tag[at + 1..];
                if !is_tag(tag) {
                    return None;
                }
                (&name_and_tag[..at], Some(tag.to_owned()))
            }
            None => (name_and_tag, None),
        };
        let (domain, path) = split_domain(name);
        if !is_domain(domain) || !is_path(path) {
            return None;
        }
        let domain = if domain == LEGACY_DEFAULT_DOMAIN {
            DEFAULT_DOMAIN
        } else {
            domain
        };
        let path = if domain == DEFAULT_DOMAIN && !path.contains('/') {
            format!("{OFFICIAL_REPO_PREFIX}{path}")
        } else {
            path.to_owned()
        };
        if domain.len() + 1 + path.len() > NAME_TOTAL_LENGTH_MAX {
            return None;
        }
        let tag = match (tag, &digest) {
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            (tag, _) => tag,
        };
        Some(Self {
            domain: domain.to_owned(),
            path,
            tag,
            digest,
        })
    }

    /// The registry host (and port), e.g. `docker.io` or `registry:5000`.
    #[must_use]
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The repository path inside the registry, e.g. `library/busybox`.
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The tag, `latest` when none was written (and no digest was).
    #[must_use]
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest (`sha256:…`) the reference is pinned to, if any.
    #[must_use]
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// `domain/path:tag` when this reference names an image by tag alone, `None` when it is
    /// pinned by digest: a digest never names "whatever a target last pushed to this tag".
    #[must_use]
    pub fn tag_key(&self) -> Option<String> {
        if self.digest.is_some() {
            return None;
        }
        let tag = self.tag.as_deref()?;
        Some(format!("{}/{}:{tag}", self.domain, self.path))
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// The repository part of `reference` as written — without tag or digest,
/// a registry port kept (`reg:5000/team/app:1@sha256:…` → `reg:5000/team/app`).
#[must_use]
pub fn repository_name(reference: &str) -> &str {
    let name = reference.split('@').next().unwrap_or(reference);
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    match name[last_slash..].rfind(':') {
        Some(i) => &name[..last_slash + i],
        None => name,
    }
}

/// The fully normalised form of `reference` (`busybox` → `docker.io/library/busybox:latest`),
/// or `None` when it is not a valid image reference.
#[must_use]
pub fn normalize_reference(reference: &str) -> Option<String> {
    ImageRef::parse(reference).map(|r| r.to_string())
}

/// Splits `name` into registry and repository path like Docker's `splitDockerDomain`.
fn split_domain(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            (first, rest)
        }
        _ => (DEFAULT_DOMAIN, name),
    }
}

/// `host[:port]` where host is a dotted DNS-ish name or a bracketed IPv6 address.
fn is_domain(domain: &str) -> bool {
    let (host_ok, port) = if let Some(rest) = domain.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return false;
        };
        let v6_ok = !v6.is_empty() && v6.chars().all(|c| c.is_ascii_hexdigit() || c == ':');
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => return false,
            },
        };
        (v6_ok, port)
    } else {
        let (host, port) = match domain.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (domain, None),
        };
        (
            !host.is_empty() && host.split('.').all(is_domain_component),
            port,
        )
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`.
fn is_domain_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    }
}

/// One or more `/`-separated path components.
fn is_path(path: &str) -> bool {
    path.split('/').all(is_path_component)
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let mut i = 0;
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let sep_start = i;
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < bytes.len() && bytes[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < bytes.len() && bytes[i] == b'-' {
                    i += 1;
                }
            }
            _ => return false,
        }
        debug_assert!(i > sep_start);
    }
}

/// `[\w][\w.-]{0,127}`.
fn is_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    match bytes.first() {
        Some(&first) if word(first) => {
            bytes.len() <= TAG_LENGTH_MAX
                && bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-')
        }
        _ => false,
    }
}

/// `algorithm:hex` with an algorithm of `[A-Za-z][A-Za-z0-9]*` parts joined by `+.-_` and
/// at least 32 hex digits.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['+', '.', '-', '_']).all(|part| {
        let mut bytes = part.bytes();
        bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
            && bytes.all(|b| b.is_ascii_alphanumeric())
    });
    algorithm_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A bare 64-hex string is an image id, which Docker refuses as a repository name.
fn is_image_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_keep_the_spelling_and_drop_tag_and_digest() {
        assert_eq!(repository_name("reg:5000/team/app:1"), "reg:5000/team/app");
        assert_eq!(repository_name("reg:5000/team/app"), "reg:5000/team/app");
        assert_eq!(repository_name("reg:5000/app:1@sha256:abc"), "reg:5000/app");
        assert_eq!(repository_name("busybox"), "busybox");
        assert_eq!(repository_name("busybox:1.36"), "busybox");
    }

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn normalisation_table() {
        let digest_ref = format!("busybox@{DIGEST}");
        let digest_norm = format!("docker.io/library/busybox@{DIGEST}");
        let tagged_digest = format!("registry:5000/x/pytorch:2.15@{DIGEST}");
        let tagged_digest_norm = format!("registry:5000/x/pytorch:2.15@{DIGEST}");
        let table: &[(&str, Option<&str>)] = &[
            ("busybox", Some("docker.io/library/busybox:latest")),
            ("busybox:latest", Some("docker.io/library/busybox:latest")),
            ("busybox:1.36", Some("docker.io/library/busybox:1.36")),
            ("library/busybox", Some("docker.io/library/busybox:latest")),
            (
                "docker.io/busybox",
                Some("docker.io/library/busybox:latest"),
            ),
            (
                "docker.io/library/busybox:latest",
                Some("docker.io/library/busybox:latest"),
            ),
            (
                "index.docker.io/busybox",
                Some("docker.io/library/busybox:latest"),
            ),
            ("index.docker.io/user/app:v1", Some("docker.io/user/app:v1")),
            ("user/app", Some("docker.io/user/app:latest")),
            ("user/app:v1.2-rc_3", Some("docker.io/user/app:v1.2-rc_3")),
            (
                "registry:5000/x/pytorch:2.15",
                Some("registry:5000/x/pytorch:2.15"),
            ),
            (
                "registry:5000/x/pytorch",
                Some("registry:5000/x/pytorch:latest"),
            ),
            ("localhost/app", Some("localhost/app:latest")),
            ("localhost:5000/app:dev", Some("localhost:5000/app:dev")),
            (
                "127.0.0.1:5000/rocm/pytorch:2.15",
                Some("127.0.0.1:5000/rocm/pytorch:2.15"),
            ),
            ("ghcr.io/org/repo/sub:tag", Some("ghcr.io/org/repo/sub:tag")),
            ("[::1]:5000/app:v1", Some("[::1]:5000/app:v1")),
            ("Registry/app", Some("Registry/app:latest")),
            (
                "a__b-c---e/f_g.h:T_1",
                Some("docker.io/a__b-c---e/f_g.h:T_1"),
            ),
            ("under_score.example/app", None),
            (digest_ref.as_str(), Some(digest_norm.as_str())),
            (tagged_digest.as_str(), Some(tagged_digest_norm.as_str())),
            // Not references: these must never match a tag.
            ("", None),
            ("base-img", Some("docker.io/library/base-img:latest")),
            ("Busybox", None),
            ("user/App", None),
            ("busybox:", None),
            ("busybox:-x", None),
            ("busybox@sha256:short", None),
            ("gfx942;gfx1100", None),
            ("two words", None),
            ("a/b/", None),
            ("/a", None),
            ("a..b", None),
            ("a___b", None),
            ("-a", None),
            ("host:notaport/app", None),
            ("https://example.com/x", None),
            (
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                None,
            ),
        ];
        for (input, expected) in table {
            assert_eq!(
                normalize_reference(input).as_deref(),
                *expected,
                "normalising {input:?}"
            );
        }
    }

    #[test]
    fn tag_key_is_none_for_digests() {
        assert_eq!(
            ImageRef::parse("busybox")
                .and_then(|r| r.tag_key())
                .as_deref(),
            Some("docker.io/library/busybox:latest")
        );
        let pinned = ImageRef::parse(&format!("busybox:latest@{DIGEST}")).unwrap();
        assert_eq!(pinned.tag(), Some("latest"));
        assert_eq!(pinned.digest(), Some(DIGEST));
        assert_eq!(pinned.tag_key(), None);
        assert_eq!(
            ImageRef::parse(&format!("busybox@{DIGEST}")).unwrap().tag(),
            None
        );
    }

    #[test]
    fn accessors() {
        let r = ImageRef::parse("registry:5000/x/pytorch:2.15").unwrap();
        assert_eq!(r.domain(), "registry:5000");
        assert_eq!(r.path(), "x/pytorch");
        assert_eq!(r.tag(), Some("2.15"));
        assert_eq!(r.digest(), None);
    }

    #[test]
    fn overlong_names_and_tags_are_rejected() {
        let long_path = "a".repeat(250);
        assert_eq!(
            normalize_reference(&format!("registry.example/{long_path}")),
            None
        );
        let long_tag = "t".repeat(129);
        assert_eq!(normalize_reference(&format!("busybox:{long_tag}")), None);
        let max_tag = "t".repeat(128);
        assert!(normalize_reference(&format!("busybox:{max_tag}")).is_some());
    }
}
