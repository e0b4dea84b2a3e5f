//! Target selection and resolution (buildx `ReadTargets`): `--set`
//! overrides, group expansion and glob patterns, `inherits`, defaults,
//! normalisation, `target:` links, and the synthesised `default` group.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::Value as J;

use crate::model::{
    Entry, EntryKind, Group, Target, TargetDecl, merge_cache, merge_entries, parse_entries,
    parse_go_bool,
};
use crate::parse::{Config, Options};

/// A resolution error. `link` says which `target:` link caused it, so
/// callers can point at the `contexts` attribute of the linking target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveError {
    pub message: String,
    pub link: Option<LinkProblem>,
}

/// What is wrong with a `target:` link from target `from`; `key` is the
/// `contexts` entry that makes the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkProblem {
    /// `target:<missing>` names no target.
    Unknown {
        from: String,
        missing: String,
        key: String,
    },
    /// Following links from `from` comes back to it (through `to`).
    Loop {
        from: String,
        to: String,
        key: String,
    },
    /// Any other problem with the link from `from` to `to` (self link,
    /// platforms, `to` failing to resolve).
    Other {
        from: String,
        to: String,
        key: String,
    },
}

impl LinkProblem {
    /// Where the link is written: the `contexts` entry when the linking
    /// target's own blocks wrote it in an object literal, else its
    /// `contexts` attribute (see [`Config::entry_span`]).
    pub fn span(&self, cfg: &Config) -> Option<crate::ast::Span> {
        let (from, to, key) = match self {
            LinkProblem::Unknown { from, missing, key } => (from, missing, key),
            LinkProblem::Loop { from, to, key } | LinkProblem::Other { from, to, key } => {
                (from, to, key)
            }
        };
        cfg.entry_span(from, "contexts", key, &format!("target:{to}"))
    }
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for ResolveError {
    fn from(message: String) -> Self {
        ResolveError {
            message,
            link: None,
        }
    }
}

fn link_error(message: String, link: LinkProblem) -> ResolveError {
    ResolveError {
        message,
        link: Some(link),
    }
}

/// One `--set` key for one target, accumulated over all `--set` flags.
#[derive(Clone, Debug, Default)]
struct Override {
    value: Option<String>,
    arr: Vec<String>,
    append: bool,
}

/// Per target name: key (`args.X`, `tags`, ...) → override, in first-seen order.
type Overrides = HashMap<String, Vec<(String, Override)>>;

/// Bound on `inherits` nesting (resolution recurses once per level; 64
/// levels fit a 2 MiB thread stack in debug builds).
const MAX_INHERITS_DEPTH: usize = 64;

const LIST_KEYS: &[&str] = &[
    "output",
    "cache-to",
    "cache-from",
    "tags",
    "platform",
    "secrets",
    "ssh",
    "attest",
    "entitlements",
    "annotations",
    "policy",
    "no-cache-filter",
    "ulimits",
];

/// One element of a compiled glob pattern.
enum Tok {
    Star,
    Any,
    Lit(char),
    /// `[...]`: ranges (inclusive) and whether the class is negated.
    Class(Vec<(char, char)>, bool),
}

/// Compiles a Go `path.Match` pattern; `None` for a malformed one (an
/// unclosed `[` or a trailing `\`), which matches nothing.
fn compile_glob(pattern: &str) -> Option<Vec<Tok>> {
    let p: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '*' => {
                if !matches!(out.last(), Some(Tok::Star)) {
                    out.push(Tok::Star);
                }
                i += 1;
            }
            '?' => {
                out.push(Tok::Any);
                i += 1;
            }
            '\\' => {
                out.push(Tok::Lit(*p.get(i + 1)?));
                i += 2;
            }
            '[' => {
                i += 1;
                let negate = p.get(i) == Some(&'^');
                if negate {
                    i += 1;
                }
                let mut ranges = Vec::new();
                let mut first = true;
                loop {
                    let c = *p.get(i)?;
                    if c == ']' && !first {
                        i += 1;
                        break;
                    }
                    first = false;
                    let lo = if c == '\\' {
                        i += 1;
                        *p.get(i)?
                    } else {
                        c
                    };
                    i += 1;
                    let mut hi = lo;
                    if p.get(i) == Some(&'-') && p.get(i + 1).is_some_and(|x| *x != ']') {
                        hi = if p[i + 1] == '\\' {
                            i += 1;
                            *p.get(i + 1)?
                        } else {
                            p[i + 1]
                        };
                        i += 2;
                    }
                    ranges.push((lo, hi));
                }
                out.push(Tok::Class(ranges, negate));
            }
            c => {
                out.push(Tok::Lit(c));
                i += 1;
            }
        }
    }
    Some(out)
}

fn tok_matches(t: &Tok, c: char) -> bool {
    match t {
        Tok::Star => true,
        Tok::Any => c != '/',
        Tok::Lit(l) => *l == c,
        Tok::Class(ranges, negate) => ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negate,
    }
}

/// Go `path.Match` for target name patterns (`*`, `?`, `[...]`, `\`).
/// Linear-time matching: a star only ever backtracks to its own last
/// position, so patterns like `*a*a*a*b` cannot blow up.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let Some(toks) = compile_glob(pattern) else {
        return false;
    };
    let s: Vec<char> = name.chars().collect();
    let (mut ti, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match toks.get(ti) {
            Some(Tok::Star) => {
                star = Some((ti, si));
                ti += 1;
            }
            Some(t) if tok_matches(t, s[si]) => {
                ti += 1;
                si += 1;
            }
            _ => match star {
                // `*` does not cross `/` in path.Match.
                Some((st, ss)) if s[ss] != '/' => {
                    ti = st + 1;
                    si = ss + 1;
                    star = Some((st, ss + 1));
                }
                _ => return false,
            },
        }
    }
    toks[ti..].iter().all(|t| matches!(t, Tok::Star))
}

fn is_pattern(s: &str) -> bool {
    s.contains(['*', '?', '[', ']'])
}

fn parse_overrides(cfg: &Config, sets: &[String], opts: &Options) -> Result<Overrides, String> {
    let mut out: Overrides = HashMap::new();
    for v in sets {
        let (lhs, rhs) = match v.split_once('=') {
            Some((l, r)) => (l, Some(r)),
            None => (v.as_str(), None),
        };
        let skey = lhs.strip_suffix('+').unwrap_or(lhs);
        let append = skey.len() != lhs.len();
        let keys: Vec<&str> = skey.splitn(3, '.').collect();
        if keys.len() < 2 {
            return Err(format!("invalid override key {skey}, expected target.name"));
        }
        let pattern = keys[0];
        if rhs.is_none() && keys[1] != "args" {
            return Err(format!("invalid override {v}, expected target.name=value"));
        }
        let names: Vec<String> = cfg
            .targets
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| glob_match(pattern, n))
            .collect();
        if names.is_empty() {
            return Err(format!("could not find any target matching '{pattern}'"));
        }
        let key = keys[1..].join(".");
        for name in names {
            let entry = out.entry(name).or_default();
            let pos = entry.iter().position(|(k, _)| *k == key);
            let o = match pos {
                Some(p) => &mut entry[p].1,
                None => {
                    entry.push((key.clone(), Override::default()));
                    let n = entry.len() - 1;
                    &mut entry[n].1
                }
            };
            let k1 = keys[1];
            if LIST_KEYS.contains(&k1) {
                if let Some(r) = rhs {
                    o.append = append;
                    o.arr.push(r.to_string());
                }
                continue;
            }
            match k1 {
                "args" => {
                    if keys.len() != 3 {
                        return Err(format!("invalid key {skey}, args requires name"));
                    }
                    match rhs {
                        Some(r) => o.value = Some(r.to_string()),
                        None => match opts.lookup(keys[2]) {
                            Some(env) => o.value = Some(env.to_string()),
                            None => {
                                if pos.is_none() {
                                    entry.pop();
                                }
                                continue;
                            }
                        },
                    }
                }
                "contexts" | "labels" | "extra-hosts" | "secret" | "resources" => {
                    if keys.len() != 3 {
                        return Err(format!("invalid key {skey}, {k1} requires name"));
                    }
                    o.value = rhs.map(String::from);
                }
                _ => o.value = rhs.map(String::from),
            }
        }
    }
    Ok(out)
}

fn entries(vals: &[String], kind: EntryKind) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for v in vals {
        if v.is_empty() {
            continue;
        }
        out.extend(parse_entries(v, kind)?);
    }
    Ok(out)
}

fn set_list<T>(field: &mut Option<Vec<T>>, vals: Vec<T>, append: bool) {
    if append {
        field.get_or_insert_with(Vec::new).extend(vals);
    } else {
        *field = Some(vals);
    }
}

fn apply_overrides(t: &mut Target, ovs: &[(String, Override)]) -> Result<(), String> {
    // Apply in a fixed order: everything but push/load first, so `output`
    // lands before `push`/`load` look at it.
    let mut ordered: Vec<&(String, Override)> = ovs
        .iter()
        .filter(|(k, _)| k != "push" && k != "load")
        .collect();
    ordered.extend(ovs.iter().filter(|(k, _)| k == "load"));
    ordered.extend(ovs.iter().filter(|(k, _)| k == "push"));
    for (key, o) in ordered {
        let (name, sub) = match key.split_once('.') {
            Some((n, s)) => (n, Some(s)),
            None => (key.as_str(), None),
        };
        let value = o.value.clone().unwrap_or_default();
        match name {
            "context" => t.context = Some(value),
            "dockerfile" => t.dockerfile = Some(value),
            "args" => {
                let sub = sub.ok_or("args require name")?;
                t.args
                    .get_or_insert_with(BTreeMap::new)
                    .insert(sub.to_string(), Some(value));
            }
            "contexts" => {
                let sub = sub.ok_or("contexts require name")?;
                t.contexts
                    .get_or_insert_with(BTreeMap::new)
                    .insert(sub.to_string(), value);
            }
            "labels" => {
                let sub = sub.ok_or("labels require name")?;
                t.labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(sub.to_string(), Some(value));
            }
            "extra-hosts" => {
                let sub = sub.ok_or("extra-hosts require name")?;
                t.extra_hosts
                    .get_or_insert_with(BTreeMap::new)
                    .insert(sub.to_string(), Some(value));
            }
            "tags" => set_list(&mut t.tags, o.arr.clone(), o.append),
            // `+=` on structured lists is the list type's `Merge`, which
            // dedupes with buildx's order-changing `removeDupes`.
            "cache-from" => {
                let new = entries(&o.arr, EntryKind::Cache)?;
                t.cache_from = if o.append {
                    merge_cache(t.cache_from.take(), new)
                } else {
                    Some(new)
                };
            }
            "cache-to" => {
                let new = entries(&o.arr, EntryKind::Cache)?;
                t.cache_to = if o.append {
                    merge_cache(t.cache_to.take(), new)
                } else {
                    Some(new)
                };
            }
            "target" => t.target = Some(value),
            "call" => t.call = Some(value),
            "secrets" => {
                let new = entries(&o.arr, EntryKind::Secret)?;
                t.secret = if o.append {
                    merge_entries(t.secret.take(), new)
                } else {
                    Some(new)
                };
            }
            "secret" => {
                let id = sub.ok_or("secret requires an id")?;
                let list = t.secret.get_or_insert_with(Vec::new);
                let Some(pos) = list
                    .iter()
                    .position(|e| e.get("id").and_then(J::as_str) == Some(id))
                else {
                    return Err(format!(
                        "secret {id:?} must be declared before it can be overridden"
                    ));
                };
                let mut parsed = parse_entries(&value, EntryKind::Secret)?;
                let Some(mut ne) = parsed.pop() else {
                    return Err(format!("invalid secret override {value:?}"));
                };
                let nid = ne.get("id").and_then(J::as_str).unwrap_or("").to_string();
                let explicit_id = value.split(',').any(|f| f.trim_start().starts_with("id="));
                if explicit_id && nid != id {
                    return Err(format!(
                        "secret override id {nid:?} does not match declared secret {id:?}"
                    ));
                }
                ne.insert("id".into(), J::String(id.to_string()));
                let e = &mut list[pos];
                e.remove("src");
                e.remove("env");
                for k in ["src", "env"] {
                    if let Some(v) = ne.remove(k) {
                        e.insert(k.into(), v);
                    }
                }
            }
            "ssh" => {
                let new = entries(&o.arr, EntryKind::Ssh)?;
                t.ssh = if o.append {
                    merge_entries(t.ssh.take(), new)
                } else {
                    Some(new)
                };
            }
            "platform" => set_list(&mut t.platforms, o.arr.clone(), o.append),
            "output" => {
                let new = entries(&o.arr, EntryKind::Output)?;
                t.output = if o.append {
                    merge_entries(t.output.take(), new)
                } else {
                    Some(new)
                };
            }
            "entitlements" => set_list(&mut t.entitlements, o.arr.clone(), true),
            "annotations" => set_list(&mut t.annotations, o.arr.clone(), true),
            "attest" => {
                let new = entries(&o.arr, EntryKind::Attest)?;
                let list = t.attest.get_or_insert_with(Vec::new);
                for e in new {
                    let ty = e.get("type").cloned();
                    if let Some(p) = list.iter().position(|x| x.get("type") == ty.as_ref()) {
                        list[p] = e;
                    } else {
                        list.push(e);
                    }
                }
            }
            "no-cache" => {
                t.no_cache = Some(
                    parse_go_bool(&value)
                        .ok_or_else(|| format!("invalid value {value} for boolean key no-cache"))?,
                )
            }
            "pull" => {
                t.pull = Some(
                    parse_go_bool(&value)
                        .ok_or_else(|| format!("invalid value {value} for boolean key pull"))?,
                )
            }
            "no-cache-filter" => set_list(&mut t.no_cache_filter, o.arr.clone(), o.append),
            "shm-size" => t.shm_size = Some(value),
            "ulimits" => set_list(&mut t.ulimits, o.arr.clone(), o.append),
            "network" => t.network = Some(value),
            "policy" => set_list(&mut t.policy, entries(&o.arr, EntryKind::Policy)?, o.append),
            "resources" => {
                let sub = sub.ok_or("resources requires a field name")?;
                t.resources
                    .get_or_insert_with(Default::default)
                    .set(sub, &value)?;
            }
            "push" => {
                let b = parse_go_bool(&value)
                    .ok_or_else(|| format!("invalid value {value} for boolean key push"))?;
                set_push(t, b);
            }
            "load" => {
                let b = parse_go_bool(&value)
                    .ok_or_else(|| format!("invalid value {value} for boolean key load"))?;
                if b {
                    set_load(t);
                }
            }
            other => return Err(format!("unknown key: {other}")),
        }
    }
    Ok(())
}

fn ty(e: &Entry) -> &str {
    e.get("type").and_then(J::as_str).unwrap_or("")
}

fn set_push(t: &mut Target, push: bool) {
    let outs = t.output.get_or_insert_with(Vec::new);
    if push {
        let mut has_image = false;
        for e in outs.iter_mut() {
            if ty(e) == "image" {
                e.insert("push".into(), J::String("true".into()));
                has_image = true;
            } else if ty(e) == "registry" {
                has_image = true;
            }
        }
        if !has_image && outs.iter().all(|e| ty(e) == "docker") {
            let mut e = Entry::new();
            e.insert("type".into(), J::String("image".into()));
            e.insert("push".into(), J::String("true".into()));
            outs.push(e);
        }
    } else {
        // buildx removes a registry output by swapping the last output into
        // its place, so the order changes.
        let mut i = 0;
        while i < outs.len() {
            match ty(&outs[i]) {
                "registry" => {
                    outs.swap_remove(i);
                    continue;
                }
                "image" => {
                    outs[i].insert("push".into(), J::String("false".into()));
                }
                _ => {}
            }
            i += 1;
        }
    }
}

fn set_load(t: &mut Target) {
    let outs = t.output.get_or_insert_with(Vec::new);
    if outs
        .iter()
        .any(|e| ty(e) == "docker" && !e.contains_key("dest"))
    {
        return;
    }
    if outs
        .iter()
        .any(|e| !matches!(ty(e), "image" | "registry" | "oci" | "docker"))
    {
        return;
    }
    let mut e = Entry::new();
    e.insert("type".into(), J::String("docker".into()));
    outs.push(e);
}

/// The result of `ReadTargets`: the returned targets and groups.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    pub targets: BTreeMap<String, Target>,
    pub groups: BTreeMap<String, Group>,
    /// The order targets were first reached (requested order, then links).
    pub order: Vec<String>,
}

struct Resolver<'c> {
    cfg: &'c Config,
    file_relative: bool,
    overrides: Overrides,
    by_name: HashMap<&'c str, &'c TargetDecl>,
    groups: HashMap<&'c str, &'c Group>,
    /// Names some target inherits from: their resolutions are memoised,
    /// since every child would otherwise resolve the whole chain again.
    parents: HashSet<&'c str>,
    memo: std::cell::RefCell<HashMap<String, std::rc::Rc<Target>>>,
    /// Cycles met so far (a resolution that met one is not memoised).
    cycles: std::cell::Cell<usize>,
}

impl<'c> Resolver<'c> {
    fn target(
        &self,
        name: &str,
        visited: &mut HashMap<String, Option<Target>>,
        depth: usize,
    ) -> Result<Option<Target>, String> {
        if let Some(t) = visited.get(name) {
            if t.is_none() {
                self.cycles.set(self.cycles.get() + 1);
            }
            return Ok(t.clone());
        }
        if let Some(t) = self.memo.borrow().get(name) {
            return Ok(Some((**t).clone()));
        }
        let cycles_before = self.cycles.get();
        if depth >= MAX_INHERITS_DEPTH {
            return Err(format!(
                "target {name}: inherits chain is deeper than {MAX_INHERITS_DEPTH} targets"
            ));
        }
        visited.insert(name.to_string(), None);
        let Some(base) = self.by_name.get(name) else {
            return Err(format!("failed to find target {name}"));
        };
        let mut tt = Target::default();
        for parent in base.inherits.iter().flatten() {
            if let Some(p) = self.target(parent, visited, depth + 1)? {
                tt.merge_owned(p);
            }
        }
        let mut m = Target::default();
        m.merge_owned(tt);
        m.merge_owned(base.to_target());
        m.name = name.to_string();
        if let Some(ovs) = self.overrides.get(name) {
            apply_overrides(&mut m, ovs)?;
        }
        m.normalize();
        if self.parents.contains(name) && self.cycles.get() == cycles_before {
            self.memo
                .borrow_mut()
                .insert(name.to_string(), std::rc::Rc::new(m.clone()));
        }
        visited.insert(name.to_string(), Some(m.clone()));
        Ok(Some(m))
    }

    fn resolve_target(&self, name: &str) -> Result<Target, String> {
        let mut visited = HashMap::new();
        let mut t = self
            .target(name, &mut visited, 0)?
            .ok_or_else(|| format!("failed to find target {name}"))?;
        t.inherits = None;
        if t.context.is_none() {
            let dir = if self.file_relative {
                self.cfg.target_dirs.get(name).map(String::from)
            } else {
                None
            };
            t.context = Some(dir.unwrap_or_else(|| ".".into()));
        }
        if t.dockerfile.as_deref().is_none_or(str::is_empty) {
            t.dockerfile = Some("Dockerfile".into());
        }
        Ok(t)
    }

    /// Expands a name: a group (recursively) or a target. Returns the
    /// targets and the groups traversed.
    fn expand(
        &self,
        name: &str,
        seen: &mut BTreeSet<String>,
        targets: &mut Vec<String>,
        have: &mut HashSet<String>,
        groups: &mut Vec<String>,
    ) {
        if let Some(g) = self.groups.get(name) {
            if !seen.insert(name.to_string()) {
                return;
            }
            groups.push(name.to_string());
            for t in &g.targets {
                if t == name {
                    if have.insert(t.clone()) {
                        targets.push(t.clone());
                    }
                    continue;
                }
                self.expand(t, seen, targets, have, groups);
            }
        } else if have.insert(name.to_string()) {
            targets.push(name.to_string());
        }
    }
}

/// Resolves the requested names (targets, groups or glob patterns) with
/// `--set` overrides, as `docker buildx bake --print` does.
pub fn read_targets(
    cfg: &Config,
    requested: &[String],
    sets: &[String],
    opts: &Options,
) -> Result<Resolved, ResolveError> {
    let overrides = parse_overrides(cfg, sets, opts)?;
    let r = Resolver {
        cfg,
        file_relative: opts.file_relative_paths,
        overrides,
        by_name: cfg.targets.iter().map(|t| (t.name.as_str(), t)).collect(),
        groups: cfg.groups.iter().map(|g| (g.name.as_str(), g)).collect(),
        parents: cfg
            .targets
            .iter()
            .flat_map(|t| t.inherits.iter().flatten())
            .map(String::as_str)
            .collect(),
        memo: Default::default(),
        cycles: Default::default(),
    };
    let requested: Vec<String> = if requested.is_empty() {
        vec!["default".into()]
    } else {
        requested.to_vec()
    };
    let mut names: Vec<String> = Vec::new();
    for raw in &requested {
        let n = raw.replace('.', "_");
        if is_pattern(&n) {
            let mut matched: Vec<String> = Vec::new();
            let mut seen_names: HashSet<&str> = HashSet::new();
            let all = cfg
                .groups
                .iter()
                .map(|g| &g.name)
                .chain(cfg.targets.iter().map(|t| &t.name));
            for name in all {
                if glob_match(&n, name) && seen_names.insert(name) {
                    matched.push(name.clone());
                }
            }
            if matched.is_empty() {
                return Err(format!("could not find any target matching {n:?}").into());
            }
            names.extend(matched);
        } else {
            names.push(n);
        }
    }
    // `dedupSlice`: first occurrence wins.
    let mut uniq = HashSet::new();
    names.retain(|n| uniq.insert(n.clone()));
    let mut out = Resolved::default();
    let mut seen = BTreeSet::new();
    for n in &names {
        let mut ts = Vec::new();
        let mut gs = Vec::new();
        let mut have = HashSet::new();
        r.expand(n, &mut seen, &mut ts, &mut have, &mut gs);
        for t in ts {
            if !out.targets.contains_key(&t) {
                let rt = r.resolve_target(&t)?;
                out.order.push(t.clone());
                out.targets.insert(t, rt);
            }
        }
        for g in gs {
            if let Some(decl) = r.groups.get(g.as_str()) {
                out.groups.insert(g.clone(), (*decl).clone());
            }
        }
    }
    // The `default` group, as buildx builds it: the requested names are
    // appended to the `default` group already in the result (the declared
    // one, with its description, when it was reached) or to a new one, and
    // `default` itself is skipped whenever that group exists by then, so a
    // `default` *target* requested after another name is left out. Then
    // the members are deduplicated and sorted.
    for n in &names {
        let have = out.groups.contains_key("default");
        if have && n == "default" {
            continue;
        }
        out.groups
            .entry("default".into())
            .or_insert_with(|| Group {
                name: "default".into(),
                description: None,
                targets: Vec::new(),
            })
            .targets
            .push(n.clone());
    }
    if let Some(g) = out.groups.get_mut("default") {
        let mut uniq = HashSet::new();
        g.targets.retain(|t| uniq.insert(t.clone()));
        g.targets.sort();
    }

    link_all(&r, &mut out)?;
    Ok(out)
}

/// The `target:` dependencies named by a target's contexts, each with the
/// context's key.
fn linked_names(t: &Target) -> Vec<(String, String)> {
    t.contexts
        .iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.strip_prefix("target:")?.to_string())))
        .collect()
}

/// Pulls in every target reached through `target:` contexts (iterative
/// depth-first search: linear in targets and links, no recursion, cycles
/// reported as bake does).
fn link_all(r: &Resolver, out: &mut Resolved) -> Result<(), ResolveError> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Active,
        Done,
    }
    let mut state: HashMap<String, State> = HashMap::new();
    let roots = out.order.clone();
    for root in roots {
        if state.contains_key(&root) {
            continue;
        }
        let deps = out.targets.get(&root).map(linked_names).unwrap_or_default();
        state.insert(root.clone(), State::Active);
        let mut stack = vec![(root, deps, 0usize)];
        while let Some(frame) = stack.last_mut() {
            if frame.2 < frame.1.len() {
                let (key, dep) = frame.1[frame.2].clone();
                frame.2 += 1;
                let name = frame.0.clone();
                if dep == name {
                    return Err(link_error(
                        format!("target {name} cannot link to itself"),
                        LinkProblem::Other {
                            from: name,
                            to: dep,
                            key,
                        },
                    ));
                }
                match state.get(&dep) {
                    Some(State::Active) => {
                        return Err(link_error(
                            format!("infinite loop from {name} to {dep}"),
                            LinkProblem::Loop {
                                from: name,
                                to: dep,
                                key,
                            },
                        ));
                    }
                    Some(State::Done) => link_edge(out, &name, &dep).map_err(|m| {
                        link_error(
                            m,
                            LinkProblem::Other {
                                from: name.clone(),
                                to: dep.clone(),
                                key: key.clone(),
                            },
                        )
                    })?,
                    None => {
                        if !out.targets.contains_key(&dep) {
                            let mut lt = r.resolve_target(&dep).map_err(|m| {
                                let link = if r.by_name.contains_key(dep.as_str()) {
                                    LinkProblem::Other {
                                        from: name.clone(),
                                        to: dep.clone(),
                                        key: key.clone(),
                                    }
                                } else {
                                    LinkProblem::Unknown {
                                        from: name.clone(),
                                        missing: dep.clone(),
                                        key: key.clone(),
                                    }
                                };
                                link_error(m, link)
                            })?;
                            let mut e = Entry::new();
                            e.insert("type".into(), J::String("cacheonly".into()));
                            lt.output = Some(vec![e]);
                            lt.linked = true;
                            out.order.push(dep.clone());
                            out.targets.insert(dep.clone(), lt);
                        }
                        let deps = out.targets.get(&dep).map(linked_names).unwrap_or_default();
                        state.insert(dep.clone(), State::Active);
                        stack.push((dep, deps, 0));
                    }
                }
            } else {
                let (done, _, _) = stack.pop().unwrap_or_default();
                state.insert(done.clone(), State::Done);
                if let Some((parent, links, next)) = stack.last() {
                    // The parent's link being followed is the one before `next`.
                    let key = links
                        .get(next.wrapping_sub(1))
                        .map(|(k, _)| k.clone())
                        .unwrap_or_default();
                    link_edge(out, parent, &done).map_err(|m| {
                        link_error(
                            m,
                            LinkProblem::Other {
                                from: parent.clone(),
                                to: done.clone(),
                                key,
                            },
                        )
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Applies one finished link: the linked target's entitlements join the
/// linking target's, and multi-platform targets must be subsets.
fn link_edge(out: &mut Resolved, name: &str, dep: &str) -> Result<(), String> {
    let (dp, dents) = match out.targets.get(dep) {
        Some(d) => (
            d.platforms.clone().unwrap_or_default(),
            d.entitlements.clone().unwrap_or_default(),
        ),
        None => return Ok(()),
    };
    let Some(me) = out.targets.get_mut(name) else {
        return Ok(());
    };
    if !dents.is_empty() {
        let list = me.entitlements.get_or_insert_with(Vec::new);
        for e in dents {
            if !list.contains(&e) {
                list.push(e);
            }
        }
    }
    let tp = me.platforms.clone().unwrap_or_default();
    if tp.len() > 1 && dp.len() > 1 && !tp.iter().all(|p| dp.contains(p)) {
        return Err(format!(
            "target {name} platforms {tp:?} are not a subset of {dep} platforms {dp:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(src: &str, sets: &[&str], req: &[&str]) -> Result<Resolved, String> {
        let opts = crate::Options::default();
        let bake =
            crate::load(vec![("t.hcl".into(), src.into())], &opts).map_err(|e| e.to_string())?;
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let req: Vec<String> = req.iter().map(|s| s.to_string()).collect();
        read_targets(&bake.config, &req, &sets, &opts).map_err(|e| e.message)
    }

    #[test]
    fn documented_set_keys_work_where_buildx_is_broken() {
        let src = "target \"a\" {\n  no-cache-filter = [\"x\"]\n  ulimits = [\"nofile=1:1\"]\n}\n";
        let r = resolve(
            src,
            &[
                "a.network=host",
                "a.no-cache-filter+=y",
                "a.ulimits=nproc=2:2",
            ],
            &["a"],
        )
        .unwrap();
        let t = &r.targets["a"];
        assert_eq!(t.network.as_deref(), Some("host"), "network is a scalar");
        assert_eq!(
            t.entitlements.as_deref(),
            Some(&["network.host".to_string()][..])
        );
        assert_eq!(
            t.no_cache_filter.as_deref(),
            Some(&["x".to_string(), "y".to_string()][..])
        );
        assert_eq!(t.ulimits.as_deref(), Some(&["nproc=2:2".to_string()][..]));
    }

    #[test]
    fn set_errors() {
        let src = "target \"a\" {}\n";
        assert!(
            resolve(src, &["nope.tags=x"], &["a"])
                .unwrap_err()
                .contains("could not find any target matching 'nope'")
        );
        assert!(
            resolve(src, &["a.bogus=x"], &["a"])
                .unwrap_err()
                .contains("unknown key: bogus")
        );
        assert!(
            resolve(src, &["a.context"], &["a"])
                .unwrap_err()
                .contains("expected target.name=value")
        );
        assert!(
            resolve(src, &["a.no-cache=maybe"], &["a"])
                .unwrap_err()
                .contains("no-cache")
        );
    }

    #[test]
    fn inherits_cycles_are_tolerated_like_buildx() {
        let src = "target \"a\" {\n  inherits = [\"b\"]\n  tags = [\"a\"]\n}\ntarget \"b\" {\n  inherits = [\"a\"]\n}\n";
        let r = resolve(src, &[], &["a"]).unwrap();
        assert_eq!(r.targets["a"].tags.as_deref(), Some(&["a".to_string()][..]));
    }

    #[test]
    fn deep_inherits_are_refused_not_overflowing() {
        let mut src = String::from("target \"t0\" {}\n");
        for i in 1..200 {
            src.push_str(&format!(
                "target \"t{i}\" {{\n  inherits = [\"t{}\"]\n}}\n",
                i - 1
            ));
        }
        let e = resolve(&src, &[], &["t199"]).unwrap_err();
        assert!(e.contains("inherits chain is deeper than"), "{e}");
    }

    fn refs(entries: &Option<Vec<Entry>>, key: &str) -> Vec<String> {
        entries
            .iter()
            .flatten()
            .map(|e| e[key].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn merged_cache_from_dedupes_in_buildx_order() {
        // Parent [a, b] + child [a, c, d] merge to [a, b, a, c, d]; buildx's
        // removeDupes swaps the last entry into the duplicate's place.
        let src = "target \"p\" {\n  cache-from = [\"a\", \"b\"]\n}\ntarget \"c\" {\n  inherits = [\"p\"]\n  cache-from = [\"a\", \"c\", \"d\"]\n}\n";
        let r = resolve(src, &[], &["c"]).unwrap();
        assert_eq!(
            refs(&r.targets["c"].cache_from, "ref"),
            ["a", "b", "d", "c"]
        );
        // The same through `--set ...cache-from+=`, and for outputs.
        let src = "target \"t\" {\n  cache-from = [\"a\", \"b\"]\n  output = [\"type=local,dest=a\", \"type=local,dest=b\"]\n}\n";
        let r = resolve(
            src,
            &[
                "t.cache-from+=a",
                "t.cache-from+=c",
                "t.cache-from+=d",
                "t.output+=type=local,dest=a",
                "t.output+=type=local,dest=c",
                "t.output+=type=local,dest=d",
            ],
            &["t"],
        )
        .unwrap();
        assert_eq!(
            refs(&r.targets["t"].cache_from, "ref"),
            ["a", "b", "d", "c"]
        );
        assert_eq!(refs(&r.targets["t"].output, "dest"), ["a", "b", "d", "c"]);
        // Within one list, too.
        let src = "target \"t\" {\n  cache-to = [\"a\", \"b\", \"a\", \"c\", \"d\"]\n  secret = [\"id=a,env=A\", \"id=b,env=B\", \"id=a,env=A\", \"id=c,env=C\"]\n}\n";
        let r = resolve(src, &[], &["t"]).unwrap();
        assert_eq!(refs(&r.targets["t"].cache_to, "ref"), ["a", "b", "d", "c"]);
        assert_eq!(refs(&r.targets["t"].secret, "id"), ["a", "b", "c"]);
    }

    #[test]
    fn push_false_swaps_the_last_output_into_a_removed_registry() {
        let src = "target \"t\" {\n  output = [\"type=registry\", \"type=image,name=x\", \"type=local,dest=out\"]\n}\n";
        let r = resolve(src, &["t.push=false"], &["t"]).unwrap();
        let out = r.targets["t"].output.clone().unwrap();
        let types: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["local", "image"]);
        assert_eq!(out[1]["push"], "false");
    }

    #[test]
    fn default_group_follows_buildx() {
        let src = "target \"default\" {}\ntarget \"a\" {}\n";
        let members = |req: &[&str]| {
            resolve(src, &[], req).unwrap().groups["default"]
                .targets
                .clone()
        };
        // A `default` target requested after another name is left out of the
        // default group; requested first, it stays.
        assert_eq!(members(&["a", "default"]), ["a"]);
        assert_eq!(members(&["default", "a"]), ["a", "default"]);
        // Both targets are still built.
        assert_eq!(
            resolve(src, &[], &["a", "default"]).unwrap().targets.len(),
            2
        );

        // A declared default group keeps its description; its members are
        // sorted, and other requested names join it.
        let src = "group \"default\" {\n  description = \"Everything\"\n  targets = [\"b\", \"a\"]\n}\ngroup \"all\" {\n  targets = [\"default\", \"c\"]\n}\ntarget \"a\" {}\ntarget \"b\" {}\ntarget \"c\" {}\n";
        let r = resolve(src, &[], &[]).unwrap();
        let g = &r.groups["default"];
        assert_eq!(g.description.as_deref(), Some("Everything"));
        assert_eq!(g.targets, ["a", "b"]);
        assert_eq!(
            crate::print_json(&r)["group"]["default"],
            serde_json::json!({"description": "Everything", "targets": ["a", "b"]})
        );
        let r = resolve(src, &[], &["all"]).unwrap();
        assert_eq!(r.groups["default"].targets, ["a", "all", "b"]);
        assert_eq!(
            r.groups["default"].description.as_deref(),
            Some("Everything")
        );
    }

    /// The link problem of resolving `req`, and the `line:col` (and end)
    /// it points at.
    fn link_at(
        files: &[(&str, &str)],
        sets: &[&str],
        req: &[&str],
    ) -> (LinkProblem, Option<String>) {
        let opts = crate::Options::default();
        let files = files
            .iter()
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .collect();
        let bake = crate::load(files, &opts).unwrap();
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let req: Vec<String> = req.iter().map(|s| s.to_string()).collect();
        let e = read_targets(&bake.config, &req, &sets, &opts).unwrap_err();
        let link = e.link.expect("a link problem");
        let at = link.span(&bake.config).map(|s| {
            let p = bake.sources.pos(s).unwrap();
            format!(
                "{}:{}:{}-{}:{}",
                p.file, p.line, p.col, p.end_line, p.end_col
            )
        });
        (link, at)
    }

    #[test]
    fn link_problems_point_at_the_contexts_entry() {
        let src =
            "target \"base\" {}\ntarget \"a\" {\n  contexts = {\n    b = \"target:bse\"\n  }\n}\n";
        let (link, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert_eq!(
            link,
            LinkProblem::Unknown {
                from: "a".into(),
                missing: "bse".into(),
                key: "b".into()
            }
        );
        assert_eq!(at.as_deref(), Some("t.hcl:4:9-4:21"), "the entry's value");

        // Several entries on one line, quoted keys, and a later duplicate
        // block whose entry replaces the first one's.
        let src = "target \"base\" {}\ntarget \"a\" {\n  contexts = { x = \"docker-image://x\", \"b\" = \"target:base\" }\n}\ntarget \"a\" {\n  contexts = { b = \"target:bsae\" }\n}\n";
        let (_, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert_eq!(at.as_deref(), Some("t.hcl:6:20-6:33"));

        // JSON files too.
        let src = r#"{"target": {"base": {}, "a": {"contexts": {"b": "target:bse"}}}}"#;
        let (_, at) = link_at(&[("t.json", src)], &[], &["a"]);
        assert_eq!(at.as_deref(), Some("t.json:1:49-1:61"));

        // Loops point at the entry that closes them.
        let src = "target \"a\" {\n  contexts = { up = \"target:b\" }\n}\ntarget \"b\" {\n  contexts = {\n    x = \"docker-image://x\"\n    down = \"target:a\"\n  }\n}\n";
        let (link, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert!(matches!(link, LinkProblem::Loop { .. }), "{link:?}");
        assert_eq!(at.as_deref(), Some("t.hcl:7:12-7:22"));
    }

    #[test]
    fn link_problems_not_written_as_an_entry_point_at_the_attribute() {
        let whole = Some("t.hcl:3:14-5:4");
        let src =
            "target \"base\" {}\ntarget \"a\" {\n  contexts = {\n    b = \"target:base\"\n  }\n}\n";
        // `--set` replaced the entry's value.
        let (_, at) = link_at(&[("t.hcl", src)], &["a.contexts.b=target:bse"], &["a"]);
        assert_eq!(at.as_deref(), whole);
        // `--set` added the entry.
        let (_, at) = link_at(&[("t.hcl", src)], &["a.contexts.c=target:bse"], &["a"]);
        assert_eq!(at.as_deref(), whole);

        // An expression, not an object literal.
        let src = "target \"a\" {\n  contexts = merge({}, { b = \"target:bse\" })\n}\n";
        let (_, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert_eq!(at.as_deref(), Some("t.hcl:2:14-2:45"));
        // A computed key.
        let src = "variable \"K\" { default = \"b\" }\ntarget \"a\" {\n  contexts = { \"${K}\" = \"target:bse\" }\n}\n";
        let (_, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert_eq!(at.as_deref(), Some("t.hcl:3:14-3:39"));
        // A later block's expression replaced the literal entry.
        let src = "target \"a\" {\n  contexts = { b = \"target:base\" }\n}\ntarget \"a\" {\n  contexts = merge({ b = \"target:bse\" })\n}\n";
        let (_, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert_eq!(
            at.as_deref(),
            Some("t.hcl:2:14-2:35"),
            "the first block's attribute"
        );

        // Inherited: the child has no `contexts` of its own...
        let src = "target \"p\" {\n  contexts = { b = \"target:bse\" }\n}\ntarget \"a\" {\n  inherits = [\"p\"]\n}\n";
        let (_, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert_eq!(at, None);
        // ...or one without that entry.
        let src = "target \"p\" {\n  contexts = { b = \"target:bse\" }\n}\ntarget \"a\" {\n  inherits = [\"p\"]\n  contexts = { c = \"docker-image://x\" }\n}\n";
        let (_, at) = link_at(&[("t.hcl", src)], &[], &["a"]);
        assert_eq!(at.as_deref(), Some("t.hcl:6:14-6:40"));
    }

    #[test]
    fn entry_spans_cover_every_map_attribute() {
        let src = "target \"a\" {\n  args = { A = \"1\", B = \"2\" }\n  labels = { \"l\" = \"x\" }\n  extra-hosts = { h = \"1.2.3.4\" }\n}\ntarget \"a\" {\n  args = { A = null, B = \"3\" }\n}\n";
        let bake = crate::load(vec![("t.hcl".into(), src.into())], &Default::default()).unwrap();
        let at = |attr: &str, key: &str, value: &str| {
            let s = bake.config.entry_span("a", attr, key, value)?;
            let p = bake.sources.pos(s)?;
            Some((p.line, p.col))
        };
        // A null value does not replace an earlier block's entry.
        assert_eq!(at("args", "A", "1"), Some((2, 16)));
        assert_eq!(at("args", "B", "3"), Some((7, 26)));
        // A stale value falls back to the attribute (first declaration).
        assert_eq!(at("args", "B", "2"), Some((2, 10)));
        assert_eq!(at("labels", "l", "x"), Some((3, 20)));
        assert_eq!(at("extra-hosts", "h", "1.2.3.4"), Some((4, 23)));
        assert_eq!(at("contexts", "c", "x"), None);
    }

    #[test]
    fn glob() {
        assert!(glob_match("*", "abc"));
        assert!(glob_match("a*", "abc"));
        assert!(!glob_match("b*", "abc"));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("[ab]bc", "bbc"));
        assert!(glob_match("[^a]bc", "bbc"));
        assert!(!glob_match("[a-c]x", "dx"));
        assert!(!glob_match("[", "a"));
    }
}
