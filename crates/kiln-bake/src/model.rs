//! bake's `Target` and `Group` model: decoding attribute values into fields,
//! the structured list entries (output, cache, secret, ssh, attest, policy)
//! with buildx's CSV grammar, `Merge` rules, normalisation and the `--print`
//! JSON form.

use std::collections::BTreeMap;

use serde_json::{Map, Value as J};

use crate::ast::{Name, Names};
use crate::value::{Type, Value, convert};

/// A structured list entry, kept as its `--print` object (`{"type": "local", "dest": "out"}`).
pub type Entry = BTreeMap<String, J>;

/// Which structured grammar an entry field uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Output,
    Cache,
    Secret,
    Ssh,
    Attest,
    Policy,
}

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Resources {
    pub memory: Option<String>,
    pub memory_swap: Option<String>,
    pub cpu_shares: Option<i64>,
    pub cpu_period: Option<i64>,
    pub cpu_quota: Option<i64>,
    pub cpuset_cpus: Option<String>,
    pub cpuset_mems: Option<String>,
}

impl Resources {
    fn merge(&mut self, o: &Resources) {
        macro_rules! m {
            ($($f:ident),*) => {$( if o.$f.is_some() { self.$f = o.$f.clone(); } )*};
        }
        m!(
            memory,
            memory_swap,
            cpu_shares,
            cpu_period,
            cpu_quota,
            cpuset_cpus,
            cpuset_mems
        );
    }
    fn is_empty(&self) -> bool {
        *self == Resources::default()
    }
    fn to_json(&self) -> J {
        let mut m = Map::new();
        let mut s = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                m.insert(k.into(), J::String(v.clone()));
            }
        };
        s("memory", &self.memory);
        s("memory-swap", &self.memory_swap);
        let mut m2 = m;
        for (k, v) in [
            ("cpu-shares", self.cpu_shares),
            ("cpu-period", self.cpu_period),
            ("cpu-quota", self.cpu_quota),
        ] {
            if let Some(v) = v {
                m2.insert(k.into(), J::from(v));
            }
        }
        if let Some(v) = &self.cpuset_cpus {
            m2.insert("cpuset-cpus".into(), J::String(v.clone()));
        }
        if let Some(v) = &self.cpuset_mems {
            m2.insert("cpuset-mems".into(), J::String(v.clone()));
        }
        J::Object(m2)
    }

    /// buildx's cty type of `resources` (every attribute optional).
    fn cty_type() -> Type {
        Type::Object(
            [
                ("memory", Type::String),
                ("memory-swap", Type::String),
                ("cpu-shares", Type::Number),
                ("cpu-period", Type::Number),
                ("cpu-quota", Type::Number),
                ("cpuset-cpus", Type::String),
                ("cpuset-mems", Type::String),
            ]
            .into_iter()
            .map(|(k, t)| (k.to_string(), t))
            .collect(),
        )
    }

    /// The object `target.<name>.resources` reads: unset fields are nulls.
    fn cty_value(&self) -> Value {
        let s = |v: &Option<String>| match v {
            Some(s) => Value::String(s.clone()),
            None => Value::Null(Type::String),
        };
        let n = |v: Option<i64>| match v {
            Some(n) => Value::Number(n as f64),
            None => Value::Null(Type::Number),
        };
        Value::Object(
            [
                ("memory", s(&self.memory)),
                ("memory-swap", s(&self.memory_swap)),
                ("cpu-shares", n(self.cpu_shares)),
                ("cpu-period", n(self.cpu_period)),
                ("cpu-quota", n(self.cpu_quota)),
                ("cpuset-cpus", s(&self.cpuset_cpus)),
                ("cpuset-mems", s(&self.cpuset_mems)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        )
    }

    /// Sets one field from its `--set` / HCL key; integers are parsed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let int = |v: &str| {
            v.trim().parse::<i64>().map_err(|_| {
                format!("invalid value {v:?} for resources.{key}: an integer is required")
            })
        };
        match key {
            "memory" => self.memory = Some(value.into()),
            "memory-swap" => self.memory_swap = Some(value.into()),
            "cpu-shares" => self.cpu_shares = Some(int(value)?),
            "cpu-period" => self.cpu_period = Some(int(value)?),
            "cpu-quota" => self.cpu_quota = Some(int(value)?),
            "cpuset-cpus" => self.cpuset_cpus = Some(value.into()),
            "cpuset-mems" => self.cpuset_mems = Some(value.into()),
            _ => return Err(format!("unknown resources key: {key}")),
        }
        Ok(())
    }
}

/// A bake target. `Option` marks "not set" where bake's merge rules care.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Target {
    pub name: String,
    pub description: Option<String>,
    pub inherits: Option<Vec<String>>,
    pub annotations: Option<Vec<String>>,
    pub attest: Option<Vec<Entry>>,
    pub context: Option<String>,
    pub contexts: Option<BTreeMap<String, String>>,
    pub dockerfile: Option<String>,
    pub dockerfile_inline: Option<String>,
    pub args: Option<BTreeMap<String, Option<String>>>,
    pub labels: Option<BTreeMap<String, Option<String>>>,
    pub tags: Option<Vec<String>>,
    pub cache_from: Option<Vec<Entry>>,
    pub cache_to: Option<Vec<Entry>>,
    pub target: Option<String>,
    pub secret: Option<Vec<Entry>>,
    pub ssh: Option<Vec<Entry>>,
    pub platforms: Option<Vec<String>>,
    pub output: Option<Vec<Entry>>,
    pub pull: Option<bool>,
    pub no_cache: Option<bool>,
    pub network: Option<String>,
    pub no_cache_filter: Option<Vec<String>>,
    pub shm_size: Option<String>,
    pub ulimits: Option<Vec<String>>,
    pub resources: Option<Resources>,
    pub call: Option<String>,
    pub entitlements: Option<Vec<String>>,
    pub extra_hosts: Option<BTreeMap<String, Option<String>>>,
    pub policy: Option<Vec<Entry>>,
    /// Set when the target was pulled in by a `target:` link rather than requested.
    pub linked: bool,
}

/// A small map from names to values, sorted by key, without spare room:
/// how [`TargetDecl`] keeps `args`, `labels`, `contexts` and `extra-hosts`.
/// The keys are shared [`Name`]s (the same few keys repeat across the
/// targets of a file); reads go by `&str`.
#[derive(Clone, PartialEq)]
pub struct StrMap<V>(Box<[(Name, V)]>);

impl<V> StrMap<V> {
    /// The map of `entries`, which must be sorted by key and unique (as a
    /// `BTreeMap`'s are).
    fn from_sorted(entries: Vec<(Name, V)>) -> StrMap<V> {
        debug_assert!(entries.windows(2).all(|w| *w[0].0 < *w[1].0));
        StrMap(entries.into_boxed_slice())
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &V)> + ExactSizeIterator {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V> Default for StrMap<V> {
    fn default() -> Self {
        StrMap(Box::default())
    }
}

impl<V> std::ops::Index<&str> for StrMap<V> {
    type Output = V;
    fn index(&self, key: &str) -> &V {
        self.get(key).expect("no entry found for key")
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for StrMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A target as its blocks declare it, before `inherits`, `--set` and
/// normalisation: what [`crate::Config`] keeps for every target of the
/// files. [`TargetDecl::to_target`] gives the full [`Target`].
///
/// Built to be small, since a file may declare tens of thousands of them:
/// texts and lists without spare room, maps as sorted [`StrMap`]s, and the
/// attributes few targets set kept apart, behind one pointer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetDecl {
    pub name: String,
    pub description: Option<Box<str>>,
    pub inherits: Option<Box<[String]>>,
    pub context: Option<Box<str>>,
    pub contexts: Option<StrMap<String>>,
    pub dockerfile: Option<Box<str>>,
    pub args: Option<StrMap<Option<String>>>,
    pub labels: Option<StrMap<Option<String>>>,
    pub tags: Option<Box<[String]>>,
    pub target: Option<Box<str>>,
    pub platforms: Option<Box<[String]>>,
    pub cache_from: Option<Box<[Entry]>>,
    pub cache_to: Option<Box<[Entry]>>,
    pub output: Option<Box<[Entry]>>,
    /// The other attributes, when any of them is set.
    pub rare: Option<Box<RareAttrs>>,
}

/// The attributes of a [`TargetDecl`] that few targets set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RareAttrs {
    pub annotations: Option<Box<[String]>>,
    pub attest: Option<Box<[Entry]>>,
    pub dockerfile_inline: Option<Box<str>>,
    pub secret: Option<Box<[Entry]>>,
    pub ssh: Option<Box<[Entry]>>,
    pub pull: Option<bool>,
    pub no_cache: Option<bool>,
    pub network: Option<Box<str>>,
    pub no_cache_filter: Option<Box<[String]>>,
    pub shm_size: Option<Box<str>>,
    pub ulimits: Option<Box<[String]>>,
    pub resources: Option<Resources>,
    pub call: Option<Box<str>>,
    pub entitlements: Option<Box<[String]>>,
    pub extra_hosts: Option<StrMap<Option<String>>>,
    pub policy: Option<Box<[Entry]>>,
}

impl TargetDecl {
    /// The declaration of a decoded target, `keys` sharing map keys.
    pub fn from_target(t: Target, keys: &mut Names) -> TargetDecl {
        fn text(s: Option<String>) -> Option<Box<str>> {
            s.map(String::into_boxed_str)
        }
        fn list(l: Option<Vec<String>>) -> Option<Box<[String]>> {
            l.map(|l| {
                l.into_iter()
                    .map(|mut s| {
                        s.shrink_to_fit();
                        s
                    })
                    .collect()
            })
        }
        fn entries(l: Option<Vec<Entry>>) -> Option<Box<[Entry]>> {
            l.map(Vec::into_boxed_slice)
        }
        fn map<V>(
            m: Option<BTreeMap<String, V>>,
            keys: &mut Names,
            mut value: impl FnMut(V) -> V,
        ) -> Option<StrMap<V>> {
            m.map(|m| {
                StrMap::from_sorted(
                    m.into_iter()
                        .map(|(k, v)| (keys.get(&k), value(v)))
                        .collect(),
                )
            })
        }
        let shrink = |mut s: String| {
            s.shrink_to_fit();
            s
        };
        let shrink_opt = |v: Option<String>| v.map(shrink);
        let rare = RareAttrs {
            annotations: list(t.annotations),
            attest: entries(t.attest),
            dockerfile_inline: text(t.dockerfile_inline),
            secret: entries(t.secret),
            ssh: entries(t.ssh),
            pull: t.pull,
            no_cache: t.no_cache,
            network: text(t.network),
            no_cache_filter: list(t.no_cache_filter),
            shm_size: text(t.shm_size),
            ulimits: list(t.ulimits),
            resources: t.resources,
            call: text(t.call),
            entitlements: list(t.entitlements),
            extra_hosts: map(t.extra_hosts, keys, shrink_opt),
            policy: entries(t.policy),
        };
        TargetDecl {
            name: shrink(t.name),
            description: text(t.description),
            inherits: list(t.inherits),
            context: text(t.context),
            contexts: map(t.contexts, keys, shrink),
            dockerfile: text(t.dockerfile),
            args: map(t.args, keys, shrink_opt),
            labels: map(t.labels, keys, shrink_opt),
            tags: list(t.tags),
            target: text(t.target),
            platforms: list(t.platforms),
            cache_from: entries(t.cache_from),
            cache_to: entries(t.cache_to),
            output: entries(t.output),
            rare: (rare != RareAttrs::default()).then(|| Box::new(rare)),
        }
    }

    /// The full [`Target`] (as decoded from its blocks and merged).
    pub fn to_target(&self) -> Target {
        fn text(s: &Option<Box<str>>) -> Option<String> {
            s.as_deref().map(String::from)
        }
        fn list(l: &Option<Box<[String]>>) -> Option<Vec<String>> {
            l.as_deref().map(<[String]>::to_vec)
        }
        fn entries(l: &Option<Box<[Entry]>>) -> Option<Vec<Entry>> {
            l.as_deref().map(<[Entry]>::to_vec)
        }
        fn map<V: Clone>(m: &Option<StrMap<V>>) -> Option<BTreeMap<String, V>> {
            m.as_ref()
                .map(|m| m.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
        }
        let none = RareAttrs::default();
        let r = self.rare.as_deref().unwrap_or(&none);
        Target {
            name: self.name.clone(),
            description: text(&self.description),
            inherits: list(&self.inherits),
            annotations: list(&r.annotations),
            attest: entries(&r.attest),
            context: text(&self.context),
            contexts: map(&self.contexts),
            dockerfile: text(&self.dockerfile),
            dockerfile_inline: text(&r.dockerfile_inline),
            args: map(&self.args),
            labels: map(&self.labels),
            tags: list(&self.tags),
            cache_from: entries(&self.cache_from),
            cache_to: entries(&self.cache_to),
            target: text(&self.target),
            secret: entries(&r.secret),
            ssh: entries(&r.ssh),
            platforms: list(&self.platforms),
            output: entries(&self.output),
            pull: r.pull,
            no_cache: r.no_cache,
            network: text(&r.network),
            no_cache_filter: list(&r.no_cache_filter),
            shm_size: text(&r.shm_size),
            ulimits: list(&r.ulimits),
            resources: r.resources.clone(),
            call: text(&r.call),
            entitlements: list(&r.entitlements),
            extra_hosts: map(&r.extra_hosts),
            policy: entries(&r.policy),
            linked: false,
        }
    }

    /// The value of a map attribute (`args`, `contexts`, `labels`,
    /// `extra-hosts`) at `key`: `Some(None)` for a null value, `None` when
    /// the attribute or the key is not there.
    pub fn map_value(&self, attr: &str, key: &str) -> Option<Option<&str>> {
        fn opt<'m>(m: &'m Option<StrMap<Option<String>>>, key: &str) -> Option<Option<&'m str>> {
            m.as_ref()?.get(key).map(|v| v.as_deref())
        }
        match attr {
            "contexts" => self.contexts.as_ref()?.get(key).map(|v| Some(v.as_str())),
            "args" => opt(&self.args, key),
            "labels" => opt(&self.labels, key),
            "extra-hosts" => opt(&self.rare.as_ref()?.extra_hosts, key),
            _ => None,
        }
    }
}

/// A bake group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    pub name: String,
    pub description: Option<String>,
    pub targets: Vec<String>,
}

/// The attribute names a `target` block accepts (besides `matrix` and `name`).
pub const TARGET_ATTRS: &[&str] = &[
    "description",
    "inherits",
    "annotations",
    "attest",
    "context",
    "contexts",
    "dockerfile",
    "dockerfile-inline",
    "args",
    "labels",
    "tags",
    "cache-from",
    "cache-to",
    "target",
    "secret",
    "ssh",
    "platforms",
    "output",
    "pull",
    "no-cache",
    "network",
    "no-cache-filter",
    "shm-size",
    "ulimits",
    "resources",
    "call",
    "entitlements",
    "extra-hosts",
    "policy",
];

// ------------------------------------------------------------------ decoding

fn want_string(v: Value, attr: &str) -> Result<Option<String>, String> {
    if v.is_null() {
        return Ok(None);
    }
    match convert(v, &Type::String) {
        Ok(Value::String(s)) => Ok(Some(s)),
        _ => Err(format!(
            "Inappropriate value for attribute {attr:?}: string required."
        )),
    }
}

fn want_bool(v: Value, attr: &str) -> Result<Option<bool>, String> {
    if v.is_null() {
        return Ok(None);
    }
    match convert(v, &Type::Bool) {
        Ok(Value::Bool(b)) => Ok(Some(b)),
        _ => Err(format!(
            "Inappropriate value for attribute {attr:?}: bool required."
        )),
    }
}

fn want_strings(v: Value, attr: &str) -> Result<Option<Vec<String>>, String> {
    let items = match v {
        v if v.is_null() => return Ok(None),
        Value::List(_, items) | Value::Set(_, items) | Value::Tuple(items) => items,
        _ => {
            return Err(format!(
                "Inappropriate value for attribute {attr:?}: list of string required."
            ));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        if it.is_null() {
            return Err(format!(
                "Inappropriate value for attribute {attr:?}: element must not be null."
            ));
        }
        match convert(it, &Type::String) {
            Ok(Value::String(s)) => out.push(s),
            _ => {
                return Err(format!(
                    "Inappropriate value for attribute {attr:?}: list of string required."
                ));
            }
        }
    }
    Ok(Some(out))
}

fn want_map(v: Value, attr: &str) -> Result<Option<BTreeMap<String, Option<String>>>, String> {
    let entries = match v {
        v if v.is_null() => return Ok(None),
        Value::Map(_, m) | Value::Object(m) => m,
        _ => {
            return Err(format!(
                "Inappropriate value for attribute {attr:?}: map of string required."
            ));
        }
    };
    let mut out = BTreeMap::new();
    for (k, e) in entries {
        if e.is_null() {
            out.insert(k, None);
            continue;
        }
        match convert(e, &Type::String) {
            Ok(Value::String(s)) => {
                out.insert(k, Some(s));
            }
            _ => {
                return Err(format!(
                    "Inappropriate value for attribute {attr:?}: map of string required."
                ));
            }
        }
    }
    Ok(Some(out))
}

fn want_entries(v: Value, attr: &str, kind: EntryKind) -> Result<Option<Vec<Entry>>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let Some(items) = v.as_seq() else {
        return Err(format!(
            "Inappropriate value for attribute {attr:?}: list required."
        ));
    };
    let mut out = Vec::new();
    for it in items {
        match it {
            Value::Null(_) => {}
            Value::String(s) if s.is_empty() => {}
            Value::String(s) => out.extend(parse_entries(s, kind)?),
            Value::Object(m) | Value::Map(_, m) => out.push(entry_from_object(m, kind)?),
            other => {
                return Err(format!(
                    "Inappropriate value for attribute {attr:?}: string or object required, got {}.",
                    other.type_name()
                ));
            }
        }
    }
    Ok(Some(out))
}

fn entry_from_object(m: &BTreeMap<String, Value>, kind: EntryKind) -> Result<Entry, String> {
    let mut e = Entry::new();
    for (k, v) in m {
        if v.is_null() {
            continue;
        }
        if kind == EntryKind::Ssh && k == "paths" {
            let paths = want_strings(v.clone(), "paths")?.unwrap_or_default();
            e.insert(
                "paths".into(),
                J::Array(paths.into_iter().map(J::String).collect()),
            );
            continue;
        }
        let s = match convert(v.clone(), &Type::String) {
            Ok(Value::String(s)) => s,
            _ => return Err(format!("invalid value for {k:?}: string required")),
        };
        insert_attr(&mut e, kind, k, s)?;
    }
    finish_entry(e, kind)
}

fn insert_attr(e: &mut Entry, kind: EntryKind, key: &str, value: String) -> Result<(), String> {
    let key_l = key.trim().to_ascii_lowercase();
    match kind {
        EntryKind::Secret => {
            let k = match key_l.as_str() {
                "source" => "src".to_string(),
                other => other.to_string(),
            };
            match k.as_str() {
                "id" | "src" | "env" | "type" => {
                    e.insert(k, J::String(value));
                }
                other => return Err(format!("unexpected key '{other}' in secret")),
            }
        }
        EntryKind::Attest if key_l == "disabled" => {
            let b = parse_go_bool(&value)
                .ok_or_else(|| format!("invalid value {value} for disabled"))?;
            e.insert("disabled".into(), J::Bool(b));
        }
        EntryKind::Output | EntryKind::Attest | EntryKind::Cache | EntryKind::Policy => {
            e.insert(
                if kind == EntryKind::Output || kind == EntryKind::Cache {
                    key_l
                } else {
                    key.to_string()
                },
                J::String(value),
            );
        }
        EntryKind::Ssh => {
            e.insert(key.to_string(), J::String(value));
        }
    }
    Ok(())
}

fn finish_entry(mut e: Entry, kind: EntryKind) -> Result<Entry, String> {
    match kind {
        EntryKind::Secret => {
            let ty = e.remove("type").and_then(|v| v.as_str().map(String::from));
            if ty.as_deref() == Some("env")
                && !e.contains_key("env")
                && let Some(src) = e.remove("src")
            {
                e.insert("env".into(), src);
            }
            if let Some(t) = ty.as_deref()
                && t != "env"
                && t != "file"
            {
                return Err(format!("unsupported secret type {t:?}"));
            }
            if !e.contains_key("id") {
                // buildx derives the id from the env name or the file's base name.
                let id = e
                    .get("env")
                    .or_else(|| e.get("src"))
                    .and_then(|v| v.as_str())
                    .map(|s| {
                        if e.contains_key("env") {
                            s.to_string()
                        } else {
                            kiln_util::gopath::base(s)
                        }
                    })
                    .unwrap_or_default();
                e.insert("id".into(), J::String(id));
            }
        }
        EntryKind::Output | EntryKind::Cache => {
            if !e.contains_key("type") {
                return Err(format!(
                    "type is required for {}",
                    if kind == EntryKind::Output {
                        "output"
                    } else {
                        "cache"
                    }
                ));
            }
        }
        EntryKind::Attest => {
            if !e.contains_key("type") {
                return Err("attestation type not specified".into());
            }
        }
        EntryKind::Ssh | EntryKind::Policy => {}
    }
    Ok(e)
}

/// Parses one CSV-form entry string; a cache string without `=` is a CSV list
/// of registry refs and yields several entries.
pub fn parse_entries(s: &str, kind: EntryKind) -> Result<Vec<Entry>, String> {
    let fields = csv_fields(s)?;
    match kind {
        EntryKind::Output if fields.len() == 1 && fields[0] == s && !s.starts_with("type=") => {
            let mut e = Entry::new();
            if s == "-" {
                e.insert("type".into(), J::String("tar".into()));
            } else {
                e.insert("type".into(), J::String("local".into()));
            }
            e.insert("dest".into(), J::String(s.into()));
            return Ok(vec![e]);
        }
        EntryKind::Cache if !s.contains('=') => {
            return Ok(fields
                .into_iter()
                .filter(|f| !f.is_empty())
                .map(|f| {
                    let mut e = Entry::new();
                    e.insert("type".into(), J::String("registry".into()));
                    e.insert("ref".into(), J::String(f));
                    e
                })
                .collect());
        }
        EntryKind::Ssh => {
            let mut e = Entry::new();
            let (id, paths) = match s.split_once('=') {
                Some((id, p)) => (
                    id.to_string(),
                    p.split(',').map(String::from).collect::<Vec<_>>(),
                ),
                None => (s.to_string(), Vec::new()),
            };
            e.insert("id".into(), J::String(id));
            if !paths.is_empty() {
                e.insert(
                    "paths".into(),
                    J::Array(paths.into_iter().map(J::String).collect()),
                );
            }
            return Ok(vec![e]);
        }
        _ => {}
    }
    let mut e = Entry::new();
    for f in fields {
        let Some((k, v)) = f.split_once('=') else {
            if kind == EntryKind::Secret || kind == EntryKind::Attest || kind == EntryKind::Policy {
                return Err(format!("invalid field '{f}' must be a key=value pair"));
            }
            return Err(format!("invalid value {f}"));
        };
        insert_attr(&mut e, kind, k, v.to_string())?;
    }
    Ok(vec![finish_entry(e, kind)?])
}

/// Splits a CSV record the way Go's encoding/csv (via go-csvvalue) does for one line.
pub fn csv_fields(s: &str) -> Result<Vec<String>, String> {
    csv_record(s, ',')
}

/// [`csv_fields`] with another field separator (bake parses `k:v` map
/// entries of typed variable overrides with `:`).
pub fn csv_record(s: &str, sep: char) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    let mut at_start = true;
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                    match chars.peek() {
                        None => {}
                        Some(&c) if c == sep => {}
                        Some(_) => {
                            return Err(format!(
                                "parse error: extraneous or missing \" in quoted-field in {s:?}"
                            ));
                        }
                    }
                }
            } else {
                cur.push(c);
            }
            continue;
        }
        match c {
            '"' if at_start => {
                quoted = true;
                at_start = false;
            }
            c if c == sep => {
                out.push(std::mem::take(&mut cur));
                at_start = true;
            }
            '"' => return Err(format!("parse error: bare \" in non-quoted-field in {s:?}")),
            c => {
                cur.push(c);
                at_start = false;
            }
        }
    }
    if quoted {
        return Err(format!(
            "parse error: extraneous or missing \" in quoted-field in {s:?}"
        ));
    }
    out.push(cur);
    Ok(out)
}

/// Go `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn want_resources(v: Value) -> Result<Option<Resources>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let Some(m) = v.as_entries() else {
        return Err("Inappropriate value for attribute \"resources\": object required.".into());
    };
    let mut r = Resources::default();
    for (k, e) in m {
        if e.is_null() {
            continue;
        }
        let s = match convert(e.clone(), &Type::String) {
            Ok(Value::String(s)) => s,
            _ => {
                return Err(format!(
                    "Inappropriate value for resources.{k}: string or number required."
                ));
            }
        };
        r.set(k, &s)
            .map_err(|e| format!("Unsupported argument; {e}"))?;
    }
    Ok(Some(r))
}

/// The element type buildx's `ToCtyValue` gives a structured entry.
fn entry_cty_type(kind: EntryKind) -> Type {
    match kind {
        EntryKind::Secret => Type::Object(
            ["id", "src", "env"]
                .into_iter()
                .map(|k| (k.to_string(), Type::String))
                .collect(),
        ),
        EntryKind::Ssh => Type::Object(
            [
                ("id".to_string(), Type::String),
                ("paths".to_string(), Type::list(Type::String)),
            ]
            .into(),
        ),
        EntryKind::Output | EntryKind::Cache | EntryKind::Attest | EntryKind::Policy => {
            Type::map(Type::String)
        }
    }
}

/// One entry as buildx's `ToCtyValue` builds it.
fn entry_cty_value(e: &Entry, kind: EntryKind) -> Value {
    let text = |v: &J| match v {
        J::String(s) => s.clone(),
        other => other.to_string(),
    };
    let get = |k: &str| e.get(k).map(text).unwrap_or_default();
    match kind {
        EntryKind::Secret => Value::Object(
            ["id", "src", "env"]
                .into_iter()
                .map(|k| (k.to_string(), Value::String(get(k))))
                .collect(),
        ),
        EntryKind::Ssh => {
            let paths: Vec<Value> = match e.get("paths") {
                Some(J::Array(a)) => a.iter().map(|p| Value::String(text(p))).collect(),
                _ => Vec::new(),
            };
            Value::Object(
                [
                    ("id".to_string(), Value::String(get("id"))),
                    ("paths".to_string(), Value::list_of(Type::String, paths)),
                ]
                .into(),
            )
        }
        _ => {
            let mut m: BTreeMap<String, Value> = BTreeMap::new();
            for (k, v) in e {
                if kind == EntryKind::Attest && k == "disabled" {
                    // Only a disabled attestation carries the key, as "true".
                    if v == &J::Bool(true) {
                        m.insert(k.clone(), Value::string("true"));
                    }
                    continue;
                }
                m.insert(k.clone(), Value::String(text(v)));
            }
            if matches!(
                kind,
                EntryKind::Output | EntryKind::Cache | EntryKind::Attest
            ) {
                m.entry("type".into()).or_insert_with(|| Value::string(""));
            }
            if kind == EntryKind::Output {
                m.entry("dest".into()).or_insert_with(|| Value::string(""));
            }
            Value::Map(Type::String, m)
        }
    }
}

impl Target {
    /// The entries of a map attribute (`args`, `contexts`, `labels`,
    /// `extra-hosts`) with their values (`None` for a null `args`, `labels`
    /// or `extra-hosts` value); `None` when `attr` is not a map attribute
    /// or is unset.
    pub fn map_attr(&self, attr: &str) -> Option<BTreeMap<String, Option<String>>> {
        match attr {
            "contexts" => self.contexts.as_ref().map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), Some(v.clone())))
                    .collect()
            }),
            "args" => self.args.clone(),
            "labels" => self.labels.clone(),
            "extra-hosts" => self.extra_hosts.clone(),
            _ => None,
        }
    }

    /// Sets one attribute from an evaluated value (what gohcl's decode does).
    pub fn set_attr(&mut self, attr: &str, v: Value) -> Result<(), String> {
        match attr {
            "description" => self.description = want_string(v, attr)?,
            "inherits" => self.inherits = want_strings(v, attr)?,
            "annotations" => self.annotations = want_strings(v, attr)?,
            "attest" => self.attest = want_entries(v, attr, EntryKind::Attest)?,
            "context" => self.context = want_string(v, attr)?,
            "contexts" => {
                self.contexts = want_map(v, attr)?.map(|m| {
                    m.into_iter()
                        .map(|(k, v)| (k, v.unwrap_or_default()))
                        .collect()
                })
            }
            "dockerfile" => self.dockerfile = want_string(v, attr)?,
            "dockerfile-inline" => self.dockerfile_inline = want_string(v, attr)?,
            "args" => self.args = want_map(v, attr)?,
            "labels" => self.labels = want_map(v, attr)?,
            "tags" => self.tags = want_strings(v, attr)?,
            "cache-from" => self.cache_from = want_entries(v, attr, EntryKind::Cache)?,
            "cache-to" => self.cache_to = want_entries(v, attr, EntryKind::Cache)?,
            "target" => self.target = want_string(v, attr)?,
            "secret" => self.secret = want_entries(v, attr, EntryKind::Secret)?,
            "ssh" => self.ssh = want_entries(v, attr, EntryKind::Ssh)?,
            "platforms" => self.platforms = want_strings(v, attr)?,
            "output" => self.output = want_entries(v, attr, EntryKind::Output)?,
            "pull" => self.pull = want_bool(v, attr)?,
            "no-cache" => self.no_cache = want_bool(v, attr)?,
            "network" => self.network = want_string(v, attr)?,
            "no-cache-filter" => self.no_cache_filter = want_strings(v, attr)?,
            "shm-size" => self.shm_size = want_string(v, attr)?,
            "ulimits" => self.ulimits = want_strings(v, attr)?,
            "resources" => self.resources = want_resources(v)?,
            "call" => self.call = want_string(v, attr)?,
            "entitlements" => self.entitlements = want_strings(v, attr)?,
            "extra-hosts" => self.extra_hosts = want_map(v, attr)?,
            "policy" => self.policy = want_entries(v, attr, EntryKind::Policy)?,
            other => return Err(format!("An argument named {other:?} is not expected here.")),
        }
        Ok(())
    }

    /// The value `target.<name>.<attr>` reads, typed as buildx's cty view of
    /// its `Target` struct (gocty over the Go field types): unset
    /// `[]string` fields are null lists of string and `[]` is an empty list,
    /// unset `*string`/`*bool`/maps are typed nulls, `description` is the Go
    /// string (`""` when unset), and structured entries read back as
    /// buildx's `ToCtyValue` shapes (cache, output, attest and policy
    /// entries as maps of string, secrets and SSH keys as objects).
    pub fn attr_value(&self, attr: &str) -> Value {
        let string = |v: &Option<String>| match v {
            Some(s) => Value::String(s.clone()),
            None => Value::Null(Type::String),
        };
        let strings = |v: &Option<Vec<String>>| match v {
            Some(l) => Value::list_of(Type::String, l.iter().cloned().map(Value::String).collect()),
            None => Value::Null(Type::list(Type::String)),
        };
        let boolean = |v: Option<bool>| match v {
            Some(b) => Value::Bool(b),
            None => Value::Null(Type::Bool),
        };
        let smap = |m: &Option<BTreeMap<String, Option<String>>>| match m {
            Some(m) => Value::Map(
                Type::String,
                m.iter().map(|(k, v)| (k.clone(), string(v))).collect(),
            ),
            None => Value::Null(Type::map(Type::String)),
        };
        let entries = |v: &Option<Vec<Entry>>, kind: EntryKind| {
            let ety = entry_cty_type(kind);
            match v {
                Some(l) => {
                    Value::list_of(ety, l.iter().map(|e| entry_cty_value(e, kind)).collect())
                }
                None => Value::Null(Type::list(ety)),
            }
        };
        match attr {
            "name" => Value::string(self.name.clone()),
            "description" => Value::string(self.description.clone().unwrap_or_default()),
            "inherits" => strings(&self.inherits),
            "annotations" => strings(&self.annotations),
            "attest" => entries(&self.attest, EntryKind::Attest),
            "context" => string(&self.context),
            "contexts" => match &self.contexts {
                Some(m) => Value::Map(
                    Type::String,
                    m.iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect(),
                ),
                None => Value::Null(Type::map(Type::String)),
            },
            "dockerfile" => string(&self.dockerfile),
            "dockerfile-inline" => string(&self.dockerfile_inline),
            "args" => smap(&self.args),
            "labels" => smap(&self.labels),
            "tags" => strings(&self.tags),
            "cache-from" => entries(&self.cache_from, EntryKind::Cache),
            "cache-to" => entries(&self.cache_to, EntryKind::Cache),
            "target" => string(&self.target),
            "secret" => entries(&self.secret, EntryKind::Secret),
            "ssh" => entries(&self.ssh, EntryKind::Ssh),
            "platforms" => strings(&self.platforms),
            "output" => entries(&self.output, EntryKind::Output),
            "pull" => boolean(self.pull),
            "no-cache" => boolean(self.no_cache),
            "network" => string(&self.network),
            "no-cache-filter" => strings(&self.no_cache_filter),
            "shm-size" => string(&self.shm_size),
            "ulimits" => strings(&self.ulimits),
            "resources" => match &self.resources {
                Some(r) => r.cty_value(),
                None => Value::Null(Resources::cty_type()),
            },
            "call" => string(&self.call),
            "entitlements" => strings(&self.entitlements),
            "extra-hosts" => smap(&self.extra_hosts),
            "policy" => entries(&self.policy, EntryKind::Policy),
            _ => Value::null(),
        }
    }

    /// `Target.Merge`: fold `o` (a later block, or the child over its parents) into `self`.
    pub fn merge(&mut self, o: &Target) {
        self.merge_owned(o.clone());
    }

    /// [`Target::merge`] taking the other target's fields instead of
    /// copying them.
    pub fn merge_owned(&mut self, o: Target) {
        fn over<T>(a: &mut Option<T>, b: Option<T>) {
            if b.is_some() {
                *a = b;
            }
        }
        fn append<T>(a: &mut Option<Vec<T>>, b: Option<Vec<T>>) {
            if let Some(b) = b {
                match a {
                    Some(a) => a.extend(b),
                    None => *a = Some(b),
                }
            }
        }
        fn keywise(
            a: &mut Option<BTreeMap<String, Option<String>>>,
            b: Option<BTreeMap<String, Option<String>>>,
        ) {
            if let Some(b) = b {
                let m = a.get_or_insert_with(BTreeMap::new);
                for (k, v) in b {
                    if v.is_some() {
                        m.insert(k, v);
                    }
                }
            }
        }
        if o.description.as_deref().is_some_and(|d| !d.is_empty()) {
            self.description = o.description;
        }
        append(&mut self.inherits, o.inherits);
        over(&mut self.context, o.context);
        if let Some(b) = o.contexts {
            let m = self.contexts.get_or_insert_with(BTreeMap::new);
            for (k, v) in b {
                m.insert(k, v);
            }
        }
        over(&mut self.dockerfile, o.dockerfile);
        over(&mut self.dockerfile_inline, o.dockerfile_inline);
        keywise(&mut self.args, o.args);
        keywise(&mut self.labels, o.labels);
        over(&mut self.tags, o.tags);
        if let Some(b) = o.cache_from {
            self.cache_from = merge_cache(self.cache_from.take(), b);
        }
        over(&mut self.cache_to, o.cache_to);
        over(&mut self.target, o.target);
        if let Some(b) = o.secret {
            self.secret = merge_entries(self.secret.take(), b);
        }
        if let Some(b) = o.ssh {
            self.ssh = merge_entries(self.ssh.take(), b);
        }
        over(&mut self.platforms, o.platforms);
        over(&mut self.output, o.output);
        over(&mut self.pull, o.pull);
        over(&mut self.no_cache, o.no_cache);
        over(&mut self.network, o.network);
        append(&mut self.no_cache_filter, o.no_cache_filter);
        over(&mut self.shm_size, o.shm_size);
        append(&mut self.ulimits, o.ulimits);
        if let Some(r) = &o.resources {
            self.resources
                .get_or_insert_with(Resources::default)
                .merge(r);
        }
        over(&mut self.call, o.call);
        append(&mut self.entitlements, o.entitlements);
        keywise(&mut self.extra_hosts, o.extra_hosts);
        append(&mut self.annotations, o.annotations);
        if let Some(b) = &o.attest {
            merge_by_key(self.attest.get_or_insert_with(Vec::new), b, "type");
        }
        append(&mut self.policy, o.policy);
    }

    /// `normalize()`: dedupe lists, drop empty strings and empty contexts,
    /// `network = host` adds the `network.host` entitlement.
    pub fn normalize(&mut self) {
        fn dedupe(v: &mut Option<Vec<String>>) {
            if let Some(list) = v {
                let mut seen = std::collections::HashSet::new();
                list.retain(|s| !s.is_empty() && seen.insert(s.clone()));
            }
        }
        dedupe(&mut self.annotations);
        dedupe(&mut self.tags);
        dedupe(&mut self.platforms);
        dedupe(&mut self.no_cache_filter);
        dedupe(&mut self.ulimits);
        if self.network.as_deref() == Some("host") {
            let e = self.entitlements.get_or_insert_with(Vec::new);
            e.push("network.host".into());
        }
        dedupe(&mut self.entitlements);
        // Cache, output, secret and SSH lists go through buildx's
        // `removeDupes`, which does not keep the order (see there).
        for l in [
            &mut self.cache_from,
            &mut self.cache_to,
            &mut self.output,
            &mut self.secret,
            &mut self.ssh,
        ] {
            *l = normalize_entries(l.take());
        }
        if let Some(a) = &mut self.attest {
            let mut out: Vec<Entry> = Vec::new();
            merge_by_key(&mut out, a, "type");
            *a = out;
        }
        if let Some(c) = &mut self.contexts {
            c.retain(|_, v| !v.is_empty());
        }
    }

    /// The JSON of one field in `--print` form, `None` when the field is
    /// unset or empty (Go's `omitempty`). With `escape`, `${`/`%{` in
    /// args, labels, annotations, dockerfile-inline and extra-hosts are
    /// escaped as `--print` does.
    pub fn field_json(&self, attr: &str, escape: bool) -> Option<J> {
        let esc = |s: &str| {
            if escape {
                escape_template(s)
            } else {
                s.to_string()
            }
        };
        let strs = |v: &Option<Vec<String>>, e: bool| {
            v.as_ref().filter(|l| !l.is_empty()).map(|l| {
                J::Array(
                    l.iter()
                        .map(|s| J::String(if e { esc(s) } else { s.clone() }))
                        .collect(),
                )
            })
        };
        let entries = |v: &Option<Vec<Entry>>| {
            v.as_ref().filter(|l| !l.is_empty()).map(|l| {
                J::Array(
                    l.iter()
                        .map(|e| J::Object(e.clone().into_iter().collect()))
                        .collect(),
                )
            })
        };
        let smap = |m: &Option<BTreeMap<String, Option<String>>>, e: bool| {
            m.as_ref().filter(|m| !m.is_empty()).map(|m| {
                J::Object(
                    m.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                v.as_ref()
                                    .map(|s| J::String(if e { esc(s) } else { s.clone() }))
                                    .unwrap_or(J::Null),
                            )
                        })
                        .collect(),
                )
            })
        };
        let s = |v: &Option<String>| {
            v.as_ref()
                .filter(|s| !s.is_empty())
                .map(|s| J::String(s.clone()))
        };
        match attr {
            "description" => s(&self.description),
            "inherits" => strs(&self.inherits, false),
            "annotations" => strs(&self.annotations, true),
            "attest" => entries(&self.attest),
            "context" => self.context.as_ref().map(|s| J::String(s.clone())),
            "contexts" => self.contexts.as_ref().filter(|m| !m.is_empty()).map(|m| {
                J::Object(
                    m.iter()
                        .map(|(k, v)| (k.clone(), J::String(v.clone())))
                        .collect(),
                )
            }),
            "dockerfile" => self.dockerfile.as_ref().map(|s| J::String(s.clone())),
            "dockerfile-inline" => self
                .dockerfile_inline
                .as_ref()
                .filter(|s| !s.is_empty())
                .map(|s| J::String(esc(s))),
            "args" => smap(&self.args, true),
            "labels" => smap(&self.labels, true),
            "tags" => strs(&self.tags, false),
            "cache-from" => entries(&self.cache_from),
            "cache-to" => entries(&self.cache_to),
            "target" => s(&self.target),
            // Secrets and SSH entries are Go structs: fields print in
            // declaration order, not sorted.
            "secret" => ordered_entries(&self.secret, &["id", "src", "env"]),
            "ssh" => ordered_entries(&self.ssh, &["id", "paths"]),
            "platforms" => strs(&self.platforms, false),
            "output" => entries(&self.output),
            "pull" => self.pull.map(J::Bool),
            "no-cache" => self.no_cache.map(J::Bool),
            "network" => s(&self.network),
            "no-cache-filter" => strs(&self.no_cache_filter, false),
            "shm-size" => s(&self.shm_size),
            "ulimits" => strs(&self.ulimits, false),
            "resources" => self
                .resources
                .as_ref()
                .filter(|r| !r.is_empty())
                .map(Resources::to_json),
            "call" => s(&self.call),
            "entitlements" => strs(&self.entitlements, false),
            "extra-hosts" => smap(&self.extra_hosts, true),
            "policy" => entries(&self.policy),
            _ => None,
        }
    }

    /// The target as `--print` prints it (fields in buildx's struct order).
    pub fn to_json(&self, escape: bool) -> J {
        let mut m = Map::new();
        for attr in TARGET_ATTRS {
            if let Some(v) = self.field_json(attr, escape) {
                m.insert((*attr).to_string(), v);
            }
        }
        J::Object(m)
    }
}

/// Entries as JSON objects with `first` keys in that order, the rest sorted.
fn ordered_entries(v: &Option<Vec<Entry>>, first: &[&str]) -> Option<J> {
    let l = v.as_ref().filter(|l| !l.is_empty())?;
    Some(J::Array(
        l.iter()
            .map(|e| {
                let mut m = Map::new();
                for k in first {
                    if let Some(v) = e.get(*k) {
                        m.insert((*k).to_string(), v.clone());
                    }
                }
                for (k, v) in e {
                    if !first.contains(&k.as_str()) {
                        m.insert(k.clone(), v.clone());
                    }
                }
                J::Object(m)
            })
            .collect(),
    ))
}

/// buildx's `removeDupes` (util/buildflags): walks backwards from the
/// second-to-last element; when an element has an equal one after it, that
/// later duplicate is swapped with the current last element and the slice is
/// shortened by one. So `[a, b, a, c, d]` becomes `[a, b, d, c]`, not
/// `[a, b, c, d]`. Works in place on the whole vector, like Go on the
/// backing array, and returns the new length (the removed duplicates are
/// left after it).
pub fn remove_dupes<T: PartialEq>(s: &mut [T]) -> usize {
    let mut len = s.len();
    let mut i = len.saturating_sub(1);
    while i > 0 {
        i -= 1;
        if let Some(j) = (i + 1..len).find(|&j| s[i] == s[j]) {
            s.swap(j, len - 1);
            len -= 1;
        }
    }
    len
}

/// `CacheOptions.Normalize` / `Exports.Normalize` / ...: `nil` when empty,
/// else the list without duplicates ([`remove_dupes`]).
pub fn normalize_entries(v: Option<Vec<Entry>>) -> Option<Vec<Entry>> {
    let mut v = v.filter(|v| !v.is_empty())?;
    let n = remove_dupes(&mut v);
    v.truncate(n);
    Some(v)
}

/// `CacheOptions.Merge`: the concatenation, normalised.
pub fn merge_cache(a: Option<Vec<Entry>>, b: Vec<Entry>) -> Option<Vec<Entry>> {
    match a {
        None => normalize_entries(Some(b)),
        Some(mut a) => {
            a.extend(b);
            normalize_entries(Some(a))
        }
    }
}

/// `Exports.Merge` / `Secrets.Merge` / `SSHKeys.Merge`: like
/// [`merge_cache`], except that merging into an unset list returns the other
/// list at its full length after `removeDupes` has reordered it in place
/// (Go discards the shortened slice there), so its duplicates survive until
/// the target is normalised.
pub fn merge_entries(a: Option<Vec<Entry>>, mut b: Vec<Entry>) -> Option<Vec<Entry>> {
    match a {
        None => {
            remove_dupes(&mut b);
            Some(b)
        }
        Some(mut a) => {
            a.extend(b);
            normalize_entries(Some(a))
        }
    }
}

fn merge_by_key(a: &mut Vec<Entry>, b: &[Entry], key: &str) {
    for e in b {
        let k = e.get(key);
        if let Some(pos) = a.iter().position(|x| x.get(key) == k) {
            a[pos] = e.clone();
        } else {
            a.push(e.clone());
        }
    }
}

/// `${` → `$${` and `%{` → `%%{`, so printed output is again valid bake input.
pub fn escape_template(s: &str) -> String {
    s.replace("${", "$${").replace("%{", "%%{")
}

impl Group {
    pub fn to_json(&self) -> J {
        let mut m = Map::new();
        if let Some(d) = self.description.as_ref().filter(|d| !d.is_empty()) {
            m.insert("description".into(), J::String(d.clone()));
        }
        m.insert(
            "targets".into(),
            J::Array(self.targets.iter().map(|t| J::String(t.clone())).collect()),
        );
        J::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_shorthand() {
        let e = parse_entries("out", EntryKind::Output).unwrap();
        assert_eq!(
            J::Object(e[0].clone().into_iter().collect()),
            serde_json::json!({"type":"local","dest":"out"})
        );
        let e = parse_entries("-", EntryKind::Output).unwrap();
        assert_eq!(e[0]["type"], "tar");
        assert!(
            parse_entries("dest=x,mode=y", EntryKind::Output).is_err(),
            "type is required"
        );
    }

    #[test]
    fn cache_ref_list() {
        let e = parse_entries("ref1,ref2", EntryKind::Cache).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[1]["ref"], "ref2");
    }

    #[test]
    fn attest_disabled_is_bool_and_csv_quotes() {
        let e = parse_entries(
            "type=sbom,disabled=true,\"ENV1=bar,baz\"",
            EntryKind::Attest,
        )
        .unwrap();
        assert_eq!(e[0]["disabled"], J::Bool(true));
        assert_eq!(e[0]["ENV1"], "bar,baz");
    }

    #[test]
    fn secret_env_type_moves_src() {
        let e = parse_entries("id=x,type=env,src=TOKEN", EntryKind::Secret).unwrap();
        assert_eq!(e[0]["env"], "TOKEN");
        assert!(!e[0].contains_key("src"));
    }

    #[test]
    fn csv_errors() {
        assert!(csv_fields("a\"b").is_err());
        assert!(csv_fields("\"abc").is_err());
        assert_eq!(csv_fields("a,\"b,c\"").unwrap(), vec!["a", "b,c"]);
        assert_eq!(csv_record("k:\"v:w\"", ':').unwrap(), vec!["k", "v:w"]);
        assert_eq!(csv_record("a,b:c", ':').unwrap(), vec!["a,b", "c"]);
    }

    #[test]
    fn remove_dupes_is_buildx_order() {
        fn run(v: &[&'static str]) -> Vec<&'static str> {
            let mut v = v.to_vec();
            let n = remove_dupes(&mut v);
            v.truncate(n);
            v
        }
        assert_eq!(run(&["a", "b", "a", "c", "d"]), ["a", "b", "d", "c"]);
        assert_eq!(run(&["a", "a", "a"]), ["a"]);
        assert_eq!(run(&["a", "b", "b", "a", "c"]), ["a", "b", "c"]);
        assert_eq!(run(&["x", "a", "y", "a", "z"]), ["x", "a", "y", "z"]);
        assert_eq!(run(&[]), Vec::<&str>::new());
        // Merging into an unset list keeps the other list's full length
        // (Go discards the shortened slice), reordered.
        let e = |r: &str| parse_entries(r, EntryKind::Output).unwrap().remove(0);
        let merged = merge_entries(None, vec![e("a"), e("b"), e("a"), e("c")]).unwrap();
        let dests: Vec<&str> = merged.iter().map(|x| x["dest"].as_str().unwrap()).collect();
        assert_eq!(dests, ["a", "b", "c", "a"]);
    }

    #[test]
    fn merge_rules() {
        let mut a = Target::default();
        a.set_attr("tags", Value::Tuple(vec![Value::string("a")]))
            .unwrap();
        a.set_attr(
            "args",
            Value::Object([("X".to_string(), Value::string("1"))].into()),
        )
        .unwrap();
        let mut b = Target::default();
        b.set_attr("tags", Value::Tuple(vec![])).unwrap();
        b.set_attr(
            "args",
            Value::Object([("X".to_string(), Value::null())].into()),
        )
        .unwrap();
        a.merge(&b);
        assert_eq!(a.tags, Some(vec![]));
        assert_eq!(a.args.unwrap()["X"], Some("1".into()));
    }

    /// Every target of the files is kept as a declaration until the end:
    /// its size is part of the memory budget per target.
    #[test]
    fn declarations_stay_small() {
        use std::mem::size_of;
        assert_eq!(size_of::<StrMap<Option<String>>>(), 16);
        assert_eq!(size_of::<Option<StrMap<Option<String>>>>(), 16);
        assert_eq!(size_of::<TargetDecl>(), 240);
    }

    /// A declaration gives back the target it was made from, every field
    /// (set, empty or unset) included.
    #[test]
    fn declarations_give_back_their_target() {
        let strs = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let smap = |v: &[(&str, Option<&str>)]| {
            Some(
                v.iter()
                    .map(|(k, v)| (k.to_string(), v.map(String::from)))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let entries = |s: &str, kind| Some(parse_entries(s, kind).unwrap());
        let full = Target {
            name: "t".into(),
            description: Some("d".into()),
            inherits: strs(&["a", "b"]),
            annotations: strs(&["x=1"]),
            attest: entries("type=provenance,mode=max", EntryKind::Attest),
            context: Some(".".into()),
            contexts: Some([("c".to_string(), "target:u".to_string())].into()),
            dockerfile: Some("Dockerfile".into()),
            dockerfile_inline: Some("FROM x".into()),
            args: smap(&[("A", Some("1")), ("B", None)]),
            labels: smap(&[("l", Some("v"))]),
            tags: strs(&[]),
            cache_from: entries("type=registry,ref=r", EntryKind::Cache),
            cache_to: Some(vec![]),
            target: Some("final".into()),
            secret: entries("id=s,env=S", EntryKind::Secret),
            ssh: entries("default", EntryKind::Ssh),
            platforms: strs(&["linux/amd64"]),
            output: entries("type=docker", EntryKind::Output),
            pull: Some(true),
            no_cache: Some(false),
            network: Some("host".into()),
            no_cache_filter: strs(&["s"]),
            shm_size: Some("1g".into()),
            ulimits: strs(&["nofile=1024"]),
            resources: Some(Resources {
                memory: Some("1g".into()),
                ..Resources::default()
            }),
            call: Some("check".into()),
            entitlements: strs(&["network.host"]),
            extra_hosts: smap(&[("h", Some("1.2.3.4"))]),
            policy: entries("type=p", EntryKind::Policy),
            linked: false,
        };
        let mut keys = Names::default();
        for t in [full, Target::default()] {
            let d = TargetDecl::from_target(t.clone(), &mut keys);
            assert_eq!(d.to_target(), t);
        }
        let only_common = Target {
            name: "c".into(),
            tags: strs(&["a"]),
            args: smap(&[("A", None)]),
            ..Target::default()
        };
        let d = TargetDecl::from_target(only_common.clone(), &mut keys);
        assert!(d.rare.is_none(), "nothing rare is set: {d:?}");
        assert_eq!(d.to_target(), only_common);
        assert_eq!(d.map_value("args", "A"), Some(None));
        assert_eq!(d.map_value("args", "B"), None);
    }
}
