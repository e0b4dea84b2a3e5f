//! `RUN --mount=<csv>` options, split and checked as BuildKit's `instructions/parse.go`
//! (`runmount.go`) does. Values are expanded by the caller before they get here.

use serde::Serialize;
use std::collections::BTreeMap;

/// The kind of a `RUN --mount`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MountKind {
    /// `type=bind` (the default): a read-only view of the context, a stage or an image.
    Bind,
    /// `type=cache`: a persistent cache directory (never a key input: its content is not
    /// part of the result by definition).
    Cache,
    /// `type=tmpfs`.
    Tmpfs,
    /// `type=secret`: its id is a key input, its value never is.
    Secret,
    /// `type=ssh`: an SSH agent socket; its id is a key input.
    Ssh,
}

/// One parsed `RUN --mount`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    /// The stage of the `RUN`.
    pub stage: usize,
    /// 1-based line of the `RUN`.
    pub line: usize,
    /// `type=`.
    pub kind: MountKind,
    /// `from=`: a stage name/index or an image (bind and cache only).
    pub from: Option<String>,
    /// `source=`/`src=`; for a bind mount without `from` this is a context path.
    pub source: Option<String>,
    /// `target=`/`dst=`/`destination=`.
    pub target: Option<String>,
    /// `id=`, or BuildKit's default: the target for a cache mount, the target's base name
    /// for a secret, `default` for ssh.
    pub id: Option<String>,
    /// `required` / `required=true` (secret and ssh).
    pub required: bool,
    /// Every other option as written (`mode`, `uid`, `sharing`, `rw`, `env`…).
    pub options: BTreeMap<String, String>,
}

/// Splits a CSV record as Go's `encoding/csv` does for one line: fields separated by `,`,
/// a field that starts with `"` runs to the closing `"` (`""` is a literal quote).
pub(crate) fn split_csv(s: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("unterminated quote in {s:?}")),
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => {}
                Some(c) => return Err(format!("unexpected {c:?} after a quoted field in {s:?}")),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => break,
                    Some(c) => field.push(c),
                }
            }
        }
        fields.push(field);
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "" | "1" | "t" | "true" => Ok(true),
        "0" | "f" | "false" => Ok(false),
        _ => Err(format!("invalid value for {key}: {v:?}")),
    }
}

/// Parses the (already expanded) fields of one `--mount`.
pub(crate) fn parse_mount(fields: &[String], stage: usize, line: usize) -> Result<Mount, String> {
    let mut kind = MountKind::Bind;
    let mut m = Mount {
        stage,
        line,
        kind,
        from: None,
        source: None,
        target: None,
        id: None,
        required: false,
        options: BTreeMap::new(),
    };
    for field in fields {
        let (key, value) = match field.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), Some(v.to_string())),
            None => (field.trim().to_ascii_lowercase(), None),
        };
        let v = value.clone().unwrap_or_default();
        match key.as_str() {
            "type" => {
                kind = match v.to_ascii_lowercase().as_str() {
                    "bind" => MountKind::Bind,
                    "cache" => MountKind::Cache,
                    "tmpfs" => MountKind::Tmpfs,
                    "secret" => MountKind::Secret,
                    "ssh" => MountKind::Ssh,
                    other => return Err(format!("unsupported mount type {other:?}")),
                };
            }
            "from" => m.from = Some(v),
            "source" | "src" => m.source = Some(v),
            "target" | "dst" | "destination" => m.target = Some(v),
            "id" => m.id = Some(v),
            "required" => m.required = parse_bool("required", &v)?,
            "" if value.is_none() => {}
            "" => return Err(format!("invalid mount field {field:?}")),
            _ => {
                m.options.insert(key, v);
            }
        }
    }
    m.kind = kind;
    if m.id.is_none() {
        m.id = match kind {
            MountKind::Cache => m.target.clone(),
            MountKind::Secret => m.target.as_deref().map(|t| {
                t.trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            }),
            MountKind::Ssh => Some("default".to_string()),
            MountKind::Bind | MountKind::Tmpfs => None,
        };
    }
    match kind {
        MountKind::Bind | MountKind::Cache | MountKind::Tmpfs if m.target.is_none() => {
            Err("mount target is required".into())
        }
        MountKind::Secret if m.id.as_deref().is_none_or(str::is_empty) => {
            Err("secret mount needs an id or a target".into())
        }
        MountKind::Tmpfs | MountKind::Secret | MountKind::Ssh if m.from.is_some() => {
            Err(format!("from= is not allowed on a {kind:?} mount").to_ascii_lowercase())
        }
        _ => Ok(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(s: &str) -> Result<Mount, String> {
        parse_mount(&split_csv(s)?, 0, 1)
    }

    #[test]
    fn csv() {
        assert_eq!(split_csv("a=1,b").unwrap(), ["a=1", "b"]);
        assert_eq!(split_csv("\"a=1,2\",b").unwrap(), ["a=1,2", "b"]);
        assert_eq!(split_csv("\"a\"\"b\"").unwrap(), ["a\"b"]);
        assert!(split_csv("\"open").is_err());
        assert_eq!(split_csv("").unwrap(), [""]);
    }

    #[test]
    fn kinds_and_defaults() {
        let m = mount("type=cache,target=/root/.cache").unwrap();
        assert_eq!(m.kind, MountKind::Cache);
        assert_eq!(m.id.as_deref(), Some("/root/.cache"));
        let m = mount("type=secret,target=/run/secrets/tok").unwrap();
        assert_eq!(m.id.as_deref(), Some("tok"));
        let m = mount("type=secret,id=pip_token,required").unwrap();
        assert_eq!(m.id.as_deref(), Some("pip_token"));
        assert!(m.required);
        let m = mount("type=ssh").unwrap();
        assert_eq!(m.id.as_deref(), Some("default"));
        let m = mount("target=/x,src=a,ro").unwrap();
        assert_eq!(m.kind, MountKind::Bind);
        assert_eq!(m.source.as_deref(), Some("a"));
        assert!(m.options.contains_key("ro"));
    }

    #[test]
    fn rejects() {
        assert!(mount("type=nfs,target=/x").is_err());
        assert!(mount("type=bind").is_err());
        assert!(mount("type=secret").is_err());
        assert!(mount("type=tmpfs,target=/x,from=a").is_err());
        assert!(mount("type=secret,id=a,required=maybe").is_err());
    }
}
