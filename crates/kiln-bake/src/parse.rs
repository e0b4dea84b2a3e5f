//! Program-level evaluation of merged bake files (buildx `hclparser.Parse`):
//! variables with overrides and validation, user functions, global
//! attributes, `target`/`group` blocks with `matrix` and `name`, lazy
//! `target.<name>.<attr>` references, and duplicate-block merging.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

use crate::ast::*;
use crate::diag::{Diag, Diags};
use crate::eval::{Env, Evaluator, UserFunc, type_expr};
use crate::fxhash::{FxHashMap, FxHashSet, FxIndexMap};
use crate::model::{Group, TARGET_ATTRS, Target, TargetDecl, parse_go_bool};
use crate::value::{Type, Value, convert, from_json_typed, parse_number};

/// Inputs to evaluation besides the files.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Built-in variables (`BAKE_CMD_CONTEXT`, `BAKE_LOCAL_PLATFORM`).
    pub builtins: BTreeMap<String, String>,
    /// The process environment used for variable overrides.
    pub env: BTreeMap<String, String>,
    /// `--var NAME=value` overrides (win over the environment).
    pub vars: BTreeMap<String, String>,
    /// `BUILDX_BAKE_DISABLE_VARS_ENV_LOOKUP`.
    pub disable_env_lookup: bool,
    /// `BUILDX_BAKE_FILE_RELATIVE_PATHS=1`: local contexts are relative to
    /// the directory of the file that set them.
    pub file_relative_paths: bool,
}

impl Options {
    /// The override for a variable: `--var` first, then the environment.
    pub fn lookup(&self, name: &str) -> Option<&str> {
        if let Some(v) = self.vars.get(name) {
            return Some(v);
        }
        if self.disable_env_lookup {
            return None;
        }
        self.env.get(name).map(String::as_str)
    }
}

/// A variable as `kiln vars` / `--list=variables` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct VariableInfo {
    pub name: String,
    pub ty: Option<Type>,
    pub value: Value,
    pub description: Option<String>,
    /// `default`, `env`, `env-json` (`NAME_JSON` in the environment),
    /// `var` (from `--var`), `var-json` (`--var NAME_JSON=...`),
    /// `attribute` or `builtin`.
    pub source: &'static str,
    pub span: Option<Span>,
}

/// Where each target of a [`Config`] was declared, by the target's index
/// in [`Config::targets`]: the header of its first block, where each of its
/// attributes was first written and where the entries of its map
/// attributes were written, with the name → index table to find them.
/// Shared by [`Config::target_spans`], [`Config::target_dirs`] and
/// [`Config::attr_spans`].
#[derive(Debug, Default)]
struct TargetSites {
    index: FxHashMap<Box<str>, u32>,
    heads: Vec<Span>,
    /// (attribute, span of its value), the attribute as an [`AttrId`].
    attrs: Vec<Box<[(AttrId, Span)]>>,
    entries: Vec<Box<[EntrySite]>>,
    /// The names of the attributes whose [`AttrId`] is past [`KNOWN_ATTRS`].
    other_attrs: Vec<Box<str>>,
    /// The directory of each file.
    dirs: Vec<String>,
}

/// An attribute name: an index into [`KNOWN_ATTRS`], or past its end, into
/// [`TargetSites::other_attrs`].
type AttrId = u16;

/// The attribute names of target blocks: [`TARGET_ATTRS`], `matrix`, `name`.
fn known_attr(name: &str) -> Option<AttrId> {
    TARGET_ATTRS
        .iter()
        .chain(["matrix", "name"].iter())
        .position(|k| *k == name)
        .map(|i| i as AttrId)
}

const KNOWN_ATTRS: usize = TARGET_ATTRS.len() + 2;

/// One entry of a map attribute written in an object literal: its key and
/// the span of its value. The value it was written with is the target's
/// (a later block that changes it replaces the site).
#[derive(Clone, Debug)]
struct EntrySite {
    attr: MapAttr,
    key: Name,
    span: Span,
}

/// The map attributes of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MapAttr {
    Contexts,
    Args,
    Labels,
    ExtraHosts,
}

impl MapAttr {
    fn of(attr: &str) -> Option<MapAttr> {
        Some(match attr {
            "contexts" => MapAttr::Contexts,
            "args" => MapAttr::Args,
            "labels" => MapAttr::Labels,
            "extra-hosts" => MapAttr::ExtraHosts,
            _ => return None,
        })
    }
}

impl TargetSites {
    fn find(&self, target: &str) -> Option<usize> {
        self.index.get(target).map(|&i| i as usize)
    }

    fn attr_id(&mut self, name: &str) -> AttrId {
        if let Some(id) = known_attr(name) {
            return id;
        }
        let i = match self.other_attrs.iter().position(|n| **n == *name) {
            Some(i) => i,
            None => {
                self.other_attrs.push(name.into());
                self.other_attrs.len() - 1
            }
        };
        (KNOWN_ATTRS + i) as AttrId
    }

    fn attr_span(&self, target: &str, attr: &str) -> Option<&Span> {
        let id = match known_attr(attr) {
            Some(id) => id,
            None => {
                let i = self.other_attrs.iter().position(|n| **n == *attr)?;
                (KNOWN_ATTRS + i) as AttrId
            }
        };
        self.attrs[self.find(target)?]
            .iter()
            .find(|(a, _)| *a == id)
            .map(|(_, s)| s)
    }

    /// Records the attributes of one block of target `ti`; an attribute
    /// already recorded keeps its first span.
    fn record_attrs(&mut self, ti: usize, attrs: &[Attribute]) {
        let mut list = std::mem::take(&mut self.attrs[ti]).into_vec();
        list.reserve_exact(attrs.len());
        for a in attrs {
            let id = self.attr_id(&a.name);
            if !list.iter().any(|(n, _)| *n == id) {
                list.push((id, a.expr.span()));
            }
        }
        self.attrs[ti] = list.into_boxed_slice();
    }

    /// Records where the entries of map attribute `a` of one block of
    /// target `ti` (decoded as `t`) were written; see [`Config::entry_span`].
    fn record_entries(&mut self, ti: usize, a: &Attribute, t: &Target, keys: &mut Names) {
        let Some((attr, map)) = map_view(t, &a.name) else {
            return;
        };
        let mut list = std::mem::take(&mut self.entries[ti]).into_vec();
        // This block's values replace earlier blocks' when the targets merge.
        list.retain(|e| {
            e.attr != attr
                || !matches!(
                    map.binary_search_by(|(k, _)| (*k).cmp(e.key.as_str())),
                    Ok(i) if map[i].1.is_some()
                )
        });
        if let Expr::Object(items, _) = &a.expr {
            // Later entries win; an entry before a computed key may be
            // replaced by it, so only the entries after the last computed
            // key are recorded.
            let mut seen: Vec<Cow<'_, str>> = Vec::new();
            for (k, e) in items.iter().rev() {
                let Some(key) = literal_key(k) else {
                    break;
                };
                if seen.contains(&key) {
                    continue;
                }
                if let Ok(i) = map.binary_search_by(|(k, _)| (*k).cmp(&key))
                    && map[i].1.is_some()
                {
                    list.retain(|x| x.attr != attr || *x.key != *key);
                    list.push(EntrySite {
                        attr,
                        key: keys.get(&key),
                        span: e.span(),
                    });
                }
                seen.push(key);
            }
        }
        self.entries[ti] = list.into_boxed_slice();
    }
}

/// Where each target was first declared (its block header): read like a
/// map from target names to spans.
#[derive(Clone, Debug, Default)]
pub struct TargetSpans(Arc<TargetSites>);

impl TargetSpans {
    /// The header of the first block declaring `target`.
    pub fn get(&self, target: &str) -> Option<&Span> {
        self.0.heads.get(self.0.find(target)?)
    }

    pub fn contains_key(&self, target: &str) -> bool {
        self.0.find(target).is_some()
    }

    pub fn len(&self) -> usize {
        self.0.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.heads.is_empty()
    }
}

/// The directory of the file that first declared each target: read like
/// a map from target names to directories.
#[derive(Clone, Debug, Default)]
pub struct TargetDirs(Arc<TargetSites>);

impl TargetDirs {
    /// The directory of the file that first declared `target`.
    pub fn get(&self, target: &str) -> Option<&str> {
        let sites = &self.0;
        let head = sites.heads.get(sites.find(target)?)?;
        Some(
            sites
                .dirs
                .get(head.file as usize)
                .map_or(".", String::as_str),
        )
    }
}

/// Where each target's attributes were first declared, kept per target (a
/// short list each) rather than one entry per (target, attribute) pair.
#[derive(Clone, Debug, Default)]
pub struct AttrSpans(Arc<TargetSites>);

impl AttrSpans {
    /// The span of attribute `attr` of `target`.
    pub fn span(&self, target: &str, attr: &str) -> Option<Span> {
        self.0.attr_span(target, attr).copied()
    }

    /// [`AttrSpans::span`] keyed by a (target, attribute) pair, as a map
    /// of such pairs would be.
    pub fn get(&self, key: &(String, String)) -> Option<&Span> {
        self.0.attr_span(&key.0, &key.1)
    }
}

/// How many targets a block will make, as far as can be told before
/// evaluating it: the product of the list lengths of a literal `matrix`
/// (1 when there is none or it is computed).
fn estimated_instances(b: &Block) -> usize {
    let Some(Expr::Object(items, _)) = b.body.attr("matrix").map(|a| &a.expr) else {
        return 1;
    };
    items
        .iter()
        .map(|(_, v)| match v {
            Expr::Tuple(vals, _) => vals.len().max(1),
            _ => 1,
        })
        .fold(1usize, |n, k| n.saturating_mul(k))
        .min(100_000)
}

/// The result of parsing: every target and group, in declaration order.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Every target as its blocks declare it (blocks of one name merged).
    pub targets: Vec<TargetDecl>,
    pub groups: Vec<Group>,
    pub variables: Vec<VariableInfo>,
    /// Where each target was first declared (block header).
    pub target_spans: TargetSpans,
    /// Where each target's attributes were declared (first occurrence).
    /// It also knows where the entries of each target's map attributes
    /// were written: see [`Config::entry_span`].
    pub attr_spans: AttrSpans,
    pub group_spans: HashMap<String, Span>,
    /// The directory of the file that first declared each target.
    pub target_dirs: TargetDirs,
    /// Things buildx silently ignores (attributes and blocks it does not
    /// know), in source order, each at most once. Not errors: the CLI prints
    /// them on stderr (render with [`crate::Bake::render_warnings`]).
    pub warnings: Vec<Diag>,
}

struct VarDecl<'b> {
    default: Option<&'b Expr>,
    ty: Option<&'b Expr>,
    description: Option<&'b Expr>,
    validations: Vec<&'b Block>,
    span: Span,
}

struct FuncDecl<'b> {
    params: Option<&'b Expr>,
    variadic: Option<&'b Expr>,
    result: Option<&'b Expr>,
    span: Span,
}

struct Instance {
    name: String,
    locals: Vec<(String, Value)>,
}

/// (block kind, final name) → (block, instance) positions.
type InstanceIndex = FxHashMap<(String, String), Vec<(usize, usize)>>;

/// The evaluation of one set of bodies, which it reads in place (`'b`).
struct Program<'o, 'b> {
    opts: &'o Options,
    file_dirs: Vec<String>,
    vars: FxIndexMap<String, VarDecl<'b>>,
    attrs: FxIndexMap<String, &'b Attribute>,
    funcs: FxIndexMap<String, FuncDecl<'b>>,
    blocks: Vec<&'b Block>,
    values: FxHashMap<String, Value>,
    sources: FxHashMap<String, &'static str>,
    progress: FxHashSet<String>,
    user_funcs: FxHashMap<String, Rc<UserFunc>>,
    func_progress: FxHashSet<String>,
    instances: Vec<Option<Rc<Vec<Instance>>>>,
    inst_progress: FxHashSet<usize>,
    /// (block, instance, attribute index) → value, for attributes read
    /// through `target.x.y` references.
    attr_cache: FxHashMap<(usize, usize, usize), Value>,
    /// The attributes being evaluated, innermost last (at most
    /// [`MAX_NESTING`] deep, so a scan beats hashing).
    attr_progress: Vec<(usize, usize, usize)>,
    /// How many lazy resolutions (variable → variable, attribute → target
    /// reference, ...) are in progress; bounded so chains cannot exhaust
    /// the stack.
    nesting: usize,
    /// (kind, final name) → instances, built on the first block reference.
    index: Option<InstanceIndex>,
    indexing: bool,
    /// Warnings for ignored attributes and blocks, deduplicated by span on
    /// insert (blocks are decoded once per matrix instance and per
    /// reference).
    warnings: Vec<Diag>,
    warned: FxHashSet<Span>,
}

const RESERVED_KINDS: &[&str] = &["target", "group"];

/// Evaluates merged bodies (one per file, in order) into a [`Config`].
pub fn parse(bodies: &[Body], file_names: &[String], opts: &Options) -> Result<Config, Diags> {
    let mut p = Program {
        opts,
        file_dirs: file_names
            .iter()
            .map(|n| kiln_util::gopath::dir(n))
            .collect(),
        vars: Default::default(),
        attrs: Default::default(),
        funcs: Default::default(),
        blocks: Vec::new(),
        values: Default::default(),
        sources: Default::default(),
        progress: Default::default(),
        user_funcs: Default::default(),
        func_progress: Default::default(),
        instances: Vec::new(),
        inst_progress: Default::default(),
        attr_cache: Default::default(),
        attr_progress: Vec::new(),
        index: None,
        indexing: false,
        nesting: 0,
        warnings: Vec::new(),
        warned: Default::default(),
    };
    let reserved = |n: &str| RESERVED_KINDS.contains(&n) || opts.builtins.contains_key(n);
    for body in bodies {
        for a in &body.attrs {
            if reserved(&a.name) || a.name == "function" {
                continue;
            }
            // The last file wins.
            p.attrs.shift_remove(a.name.as_str());
            p.attrs.insert(a.name.to_string(), a);
        }
        for b in &body.blocks {
            match b.kind.as_str() {
                "variable" | "function" => {
                    let Some((name, _)) = b.labels.first() else {
                        return Err(Diags::at(
                            b.span,
                            "Missing name for block",
                            format!("A {} block needs a name label.", b.kind),
                        ));
                    };
                    if b.labels.len() != 1 {
                        return Err(Diags::at(
                            b.span,
                            "Extraneous label for block",
                            format!("A {} block has exactly one label.", b.kind),
                        ));
                    }
                    if reserved(name) {
                        continue;
                    }
                    if b.kind == "variable" {
                        // buildx decodes variable blocks with a `remain`
                        // body: anything else in them is ignored.
                        for a in &b.body.attrs {
                            if !VARIABLE_ATTRS.contains(&a.name.as_str()) {
                                p.warn(ignored_attribute(a, "variable", VARIABLE_ATTRS));
                            }
                        }
                        for vb in &b.body.blocks {
                            if vb.kind != "validation" {
                                p.warn(ignored_block(vb, "variable", VARIABLE_ATTRS));
                            }
                        }
                        let decl = VarDecl {
                            default: b.body.attr("default").map(|a| &a.expr),
                            ty: b.body.attr("type").map(|a| &a.expr),
                            description: b.body.attr("description").map(|a| &a.expr),
                            validations: b
                                .body
                                .blocks
                                .iter()
                                .filter(|vb| vb.kind == "validation")
                                .collect(),
                            span: b.labels[0].1,
                        };
                        p.vars.shift_remove(name);
                        p.vars.insert(name.clone(), decl);
                    } else {
                        let decl = FuncDecl {
                            params: b.body.attr("params").map(|a| &a.expr),
                            variadic: b.body.attr("variadic_params").map(|a| &a.expr),
                            result: b.body.attr("result").map(|a| &a.expr),
                            span: b.labels[0].1,
                        };
                        p.funcs.insert(name.clone(), decl);
                    }
                }
                "target" | "group" => {
                    if b.labels.len() != 1 {
                        let span = b.labels.get(1).map(|l| l.1).unwrap_or(b.span);
                        return Err(Diags::at(
                            span,
                            "Invalid block",
                            format!(
                                "invalid block label: {:?}",
                                b.labels.iter().map(|l| &l.0).collect::<Vec<_>>()
                            ),
                        ));
                    }
                    p.blocks.push(b);
                }
                // buildx reads the top level with partial schemas and drops
                // the "Blocks are not allowed here" diagnostic of what
                // remains, so unknown blocks are ignored.
                _ => p.warn(ignored_block(b, "top-level", &[])),
            }
        }
    }
    p.instances = (0..p.blocks.len()).map(|_| None).collect();

    // Resolve every global attribute, variable and function eagerly, so
    // errors surface even where nothing references them (as buildx does).
    let attr_names: Vec<String> = p.attrs.keys().cloned().collect();
    for n in attr_names {
        let span = p.attrs[&n].name_span;
        p.resolve(&n, span)?;
    }
    let var_names: Vec<String> = p.vars.keys().cloned().collect();
    for n in &var_names {
        let span = p.vars[n].span;
        p.resolve(n, span)?;
    }
    let func_names: Vec<String> = p.funcs.keys().cloned().collect();
    for n in func_names {
        let span = p.funcs[&n].span;
        Env::function(&mut p, &n, span)?;
    }
    p.validate()?;

    let mut cfg = Config::default();
    for n in &var_names {
        let (dty, ddesc) = (p.vars[n].ty, p.vars[n].description);
        let ty = match dty {
            Some(t) => Some(type_expr(t)?),
            None => None,
        };
        let description = match ddesc {
            Some(e) => Evaluator::new(&mut p).eval(e)?.as_str().map(String::from),
            None => None,
        };
        cfg.variables.push(VariableInfo {
            name: n.clone(),
            ty,
            value: p.values.get(n).cloned().unwrap_or_else(Value::null),
            description,
            source: p.sources.get(n).copied().unwrap_or("default"),
            span: Some(p.vars[n].span),
        });
    }

    // Decode blocks in order. The targets and the span tables get one
    // entry per target: sized up front rather than grown by doubling (which
    // briefly holds the old and the new copy, and leaves spare room).
    let targets: usize = p
        .blocks
        .iter()
        .filter(|b| b.kind == "target")
        .map(|b| estimated_instances(b))
        .sum();
    cfg.targets.reserve(targets);
    let mut sites = TargetSites {
        dirs: p.file_dirs.clone(),
        ..TargetSites::default()
    };
    sites.index.reserve(targets);
    sites.heads.reserve(targets);
    sites.attrs.reserve(targets);
    sites.entries.reserve(targets);
    // Map keys, shared by the targets (most repeat the same few).
    let mut keys = Names::default();
    let mut group_index: FxHashMap<String, usize> = FxHashMap::default();
    let mut implicit: Vec<Group> = Vec::new();
    for bi in 0..p.blocks.len() {
        let insts = p.instances(bi)?;
        let (kind, label, lspan, hspan) = {
            let b = &p.blocks[bi];
            (b.kind.clone(), b.labels[0].0.clone(), b.labels[0].1, b.span)
        };
        if kind == "group" {
            let g = p.decode_group(bi, false)?;
            cfg.group_spans.entry(label.clone()).or_insert(lspan);
            if let Some(&i) = group_index.get(&label) {
                // A later group block with the same name replaces the earlier one.
                cfg.groups[i] = g;
            } else {
                group_index.insert(label.clone(), cfg.groups.len());
                cfg.groups.push(g);
            }
            continue;
        }
        let mut names = Vec::new();
        for (ii, inst) in insts.iter().enumerate() {
            let t = p.decode_target(bi, ii, &inst.name)?;
            names.push(inst.name.clone());
            let ti = match sites.find(&inst.name) {
                Some(ti) => ti,
                None => {
                    let ti = sites.heads.len();
                    sites.index.insert(inst.name.as_str().into(), ti as u32);
                    sites.heads.push(lspan.to(hspan));
                    sites.attrs.push(Box::default());
                    sites.entries.push(Box::default());
                    ti
                }
            };
            let attrs = &p.blocks[bi].body.attrs;
            sites.record_attrs(ti, attrs);
            for a in attrs {
                sites.record_entries(ti, a, &t, &mut keys);
            }
            if ti < cfg.targets.len() {
                // A later block of the same name merges into the first.
                let mut merged = cfg.targets[ti].to_target();
                merged.merge_owned(t);
                cfg.targets[ti] = TargetDecl::from_target(merged, &mut keys);
            } else {
                cfg.targets.push(TargetDecl::from_target(t, &mut keys));
            }
        }
        // The block is decoded: its instances are not kept for the rest of
        // the evaluation (a later reference to them computes them again).
        drop(insts);
        p.instances[bi] = None;
        if names.len() != 1 || names[0] != label {
            if let Some(g) = implicit.iter_mut().find(|g| g.name == label) {
                for n in names {
                    if !g.targets.contains(&n) {
                        g.targets.push(n);
                    }
                }
            } else {
                implicit.push(Group {
                    name: label,
                    description: None,
                    targets: names,
                });
            }
        }
    }
    for g in implicit {
        if !group_index.contains_key(&g.name) {
            group_index.insert(g.name.clone(), cfg.groups.len());
            cfg.groups.push(g);
        }
    }
    let sites = Arc::new(sites);
    cfg.target_spans = TargetSpans(sites.clone());
    cfg.target_dirs = TargetDirs(sites.clone());
    cfg.attr_spans = AttrSpans(sites);
    cfg.warnings = std::mem::take(&mut p.warnings);
    cfg.warnings
        .sort_by_key(|d| d.span.map(|s| (s.file, s.start)).unwrap_or_default());
    Ok(cfg)
}

impl Config {
    /// The span to point at for entry `key` of map attribute `attr`
    /// (`args`, `contexts`, `labels`, `extra-hosts`) of `target`, whose
    /// resolved value is `value`: the entry's value when the target's own
    /// blocks wrote it in an object literal with a literal key and it
    /// evaluated to `value`; otherwise (the map came from an expression,
    /// `inherits` or `--set`) the attribute, when the target's blocks set
    /// it. As in merging, a later block's entry replaces an earlier one (a
    /// null value does not).
    pub fn entry_span(&self, target: &str, attr: &str, key: &str, value: &str) -> Option<Span> {
        let sites = &self.attr_spans.0;
        sites
            .find(target)
            .and_then(|ti| {
                let a = MapAttr::of(attr)?;
                let site = sites.entries[ti]
                    .iter()
                    .find(|e| e.attr == a && *e.key == *key)?;
                // The site holds where the value the target has was written.
                let t = self.targets.get(ti)?;
                (t.map_value(attr, key) == Some(Some(value))).then_some(site.span)
            })
            .or_else(|| self.attr_spans.span(target, attr))
    }

    /// The declaration of `target`.
    pub fn target(&self, name: &str) -> Option<&TargetDecl> {
        self.targets.get(self.attr_spans.0.find(name)?)
    }
}

/// The entries of map attribute `attr` of a decoded target, sorted by key:
/// (the attribute, [(key, value)]); `None` for other attributes or when it
/// is unset.
type MapView<'t> = (MapAttr, Vec<(&'t str, Option<&'t str>)>);

fn map_view<'t>(t: &'t Target, attr: &str) -> Option<MapView<'t>> {
    let opt = |m: &'t BTreeMap<String, Option<String>>| {
        m.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect()
    };
    let a = MapAttr::of(attr)?;
    match a {
        MapAttr::Contexts => t.contexts.as_ref().map(|m| {
            (
                a,
                m.iter()
                    .map(|(k, v)| (k.as_str(), Some(v.as_str())))
                    .collect(),
            )
        }),
        MapAttr::Args => t.args.as_ref().map(|m| (a, opt(m))),
        MapAttr::Labels => t.labels.as_ref().map(|m| (a, opt(m))),
        MapAttr::ExtraHosts => t.extra_hosts.as_ref().map(|m| (a, opt(m))),
    }
}

/// An object key's name when it is written literally (see
/// [`ObjKey::literal_name`]), borrowed where it can be.
fn literal_key(k: &ObjKey) -> Option<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    match k {
        ObjKey::Ident(name, _) => Some(Cow::Borrowed(name)),
        ObjKey::Expr(Expr::Str(s, _)) => Some(Cow::Borrowed(s)),
        ObjKey::Expr(e) => e.template_text().map(Cow::Owned),
    }
}

/// The attributes a `variable` block reads.
const VARIABLE_ATTRS: &[&str] = &["default", "type", "description"];

/// The attributes a `group` block reads.
const GROUP_ATTRS: &[&str] = &["targets", "description"];

/// The warning for an attribute buildx does not know and ignores.
fn ignored_attribute(a: &Attribute, block: &str, known: &[&str]) -> Diag {
    let hint = crate::suggest::suggest(&a.name, known.iter().copied())
        .map(|s| format!(" Did you mean {s:?}?"))
        .unwrap_or_default();
    Diag::at(
        a.name_span,
        format!("Ignored unknown attribute {:?}", a.name),
        format!(
            "{block} blocks have no attribute named {:?}; docker buildx bake ignores it, and so does kiln.{hint}",
            a.name
        ),
    )
}

/// The warning for a nested block buildx does not know and ignores.
fn ignored_block(b: &Block, within: &str, attrs: &[&str]) -> Diag {
    let hint = if attrs.contains(&b.kind.as_str()) {
        format!(
            " {:?} is an attribute: write `{} = {{ ... }}` (with `=`) to set it.",
            b.kind, b.kind
        )
    } else {
        String::new()
    };
    let place = if within == "top-level" {
        "at the top level".to_string()
    } else {
        format!("in {within} blocks")
    };
    Diag::at(
        b.span,
        format!("Ignored unknown block {:?}", b.kind),
        format!(
            "Blocks of type {:?} are not expected {place}; docker buildx bake ignores the whole block, and so does kiln.{hint}",
            b.kind
        ),
    )
}

fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The error for names outside `[a-zA-Z0-9_-]`.
pub fn name_error(name: &str) -> String {
    format!("invalid target name {name:?}: only \"[a-zA-Z0-9_-]+\" is allowed")
}

impl<'b> Program<'_, 'b> {
    fn warn(&mut self, d: Diag) {
        if d.span.is_none_or(|s| self.warned.insert(s)) {
            self.warnings.push(d);
        }
    }

    fn var_type(&self, name: &str) -> Result<Option<Type>, Diags> {
        match self.vars.get(name).and_then(|v| v.ty) {
            Some(t) => type_expr(t).map(Some).map_err(|mut e| {
                for d in &mut e.0 {
                    d.detail = format!("{} (variable {name}): not a valid type", d.detail);
                }
                e
            }),
            None => Ok(None),
        }
    }

    /// Resolves a top-level name; `Ok(None)` when it does not exist.
    fn resolve(&mut self, name: &str, span: Span) -> Result<Option<Value>, Diags> {
        if let Some(v) = self.values.get(name) {
            return Ok(Some(v.clone()));
        }
        if let Some(b) = self.opts.builtins.get(name) {
            let v = Value::string(b.clone());
            self.values.insert(name.to_string(), v.clone());
            self.sources.insert(name.to_string(), "builtin");
            return Ok(Some(v));
        }
        let attr = self.attrs.get(name).map(|a| -> &'b Expr { &a.expr });
        let is_var = self.vars.contains_key(name);
        if attr.is_none() && !is_var {
            return Ok(None);
        }
        if self.progress.contains(name) {
            return Err(Diags::at(
                span,
                "Invalid expression",
                format!("variable cycle not allowed for {name}"),
            ));
        }
        self.progress.insert(name.to_string());
        let r = self.nested(span, |p| p.resolve_inner(name, attr, is_var));
        self.progress.remove(name);
        let v = r?;
        self.values.insert(name.to_string(), v.clone());
        Ok(Some(v))
    }

    fn resolve_inner(
        &mut self,
        name: &str,
        attr: Option<&'b Expr>,
        is_var: bool,
    ) -> Result<Value, Diags> {
        let decl_span = self
            .vars
            .get(name)
            .map(|v| v.span)
            .or(self.attrs.get(name).map(|a| a.name_span));
        let invalid = |msg: String| Diags::one(Diag::new("Invalid value", msg, decl_span));
        let ty = self.var_type(name)?;
        let from_attr = attr.is_some();
        let def_expr = attr.or_else(|| self.vars.get(name).and_then(|v| v.default));
        self.sources.insert(
            name.to_string(),
            if from_attr { "attribute" } else { "default" },
        );

        if is_var {
            // Overrides apply only to names declared by a `variable` block.
            let json_name = format!("{name}_JSON");
            let json_override = if self.vars.contains_key(&json_name)
                || self.opts.builtins.contains_key(&json_name)
            {
                None
            } else {
                self.opts.lookup(&json_name).map(String::from)
            };
            let plain = self.opts.lookup(name).map(String::from);
            let source = if self.opts.vars.contains_key(name) {
                "var"
            } else {
                "env"
            };
            if let (Some(t), Some(j)) = (&ty, &json_override) {
                let parsed: serde_json::Value = serde_json::from_str(j).map_err(|e| {
                    invalid(format!("failed to convert variable {name} from JSON: {e}"))
                })?;
                let v = from_json_typed(&parsed, t).map_err(|e| {
                    invalid(format!("failed to convert variable {name} from JSON: {e}"))
                })?;
                let json_source = if self.opts.vars.contains_key(&json_name) {
                    "var-json"
                } else {
                    "env-json"
                };
                self.sources.insert(name.to_string(), json_source);
                return Ok(v);
            }
            if let Some(t) = &ty
                && let Some(s) = &plain
            {
                let v = parse_typed_override(name, s, t).map_err(invalid)?;
                self.sources.insert(name.to_string(), source);
                return Ok(v);
            }
            if ty.is_none() {
                let raw = plain.clone().or(json_override.clone());
                if let Some(s) = raw {
                    // The override's type follows the default's type.
                    let dv = match def_expr {
                        Some(e) => Evaluator::new(self).eval(e)?,
                        None => Value::null(),
                    };
                    let v = match dv.ty() {
                        Type::Bool => Value::Bool(parse_go_bool(&s).ok_or_else(|| {
                            invalid(format!("failed to parse {name} as bool: strconv.ParseBool: parsing {s:?}: invalid syntax"))
                        })?),
                        Type::Number => Value::Number(go_parse_float(&s).ok_or_else(|| {
                            invalid(format!("failed to parse {name} as number: strconv.ParseFloat: parsing {s:?}: invalid syntax"))
                        })?),
                        Type::String | Type::Dynamic => Value::String(s),
                        other => return Err(invalid(format!("unsupported type {} for variable {name}", other.friendly_name()))),
                    };
                    self.sources.insert(name.to_string(), source);
                    return Ok(v);
                }
            }
        }

        let v = match def_expr {
            Some(e) => Evaluator::new(self).eval(e)?,
            None => match &ty {
                Some(t) => Value::Null(t.clone()),
                None => Value::string(""),
            },
        };
        match &ty {
            Some(t) => convert(v, t).map_err(|e| {
                let span = def_expr.map(Expr::span).or(decl_span);
                Diags::one(Diag::new(
                    "Invalid value",
                    format!(
                        "invalid type {} for variable {name} default value: {e}",
                        t.type_expr()
                    ),
                    span,
                ))
            }),
            None => Ok(v),
        }
    }

    fn validate(&mut self) -> Result<(), Diags> {
        let mut out = Vec::new();
        let names: Vec<String> = self.vars.keys().cloned().collect();
        for n in names {
            let vals = self.vars[&n].validations.clone();
            for vb in vals {
                let Some(cond) = vb.body.attr("condition") else {
                    out.push(Diag::at(
                        vb.span,
                        "Invalid condition result",
                        "Condition expression must return either true or false, not null.",
                    ));
                    continue;
                };
                let c = match Evaluator::new(self).eval(&cond.expr) {
                    Ok(v) => v,
                    Err(e) => {
                        out.extend(e.0);
                        continue;
                    }
                };
                let ok = match c {
                    Value::Null(_) => {
                        out.push(Diag::at(
                            cond.expr.span(),
                            "Invalid condition result",
                            "Condition expression must return either true or false, not null.",
                        ));
                        continue;
                    }
                    other => match convert(other, &Type::Bool) {
                        Ok(Value::Bool(b)) => b,
                        _ => {
                            out.push(Diag::at(
                                cond.expr.span(),
                                "Invalid condition result",
                                "Invalid condition result value: a bool is required.",
                            ));
                            continue;
                        }
                    },
                };
                if ok {
                    continue;
                }
                let msg = match vb.body.attr("error_message") {
                    Some(a) => match Evaluator::new(self).eval(&a.expr) {
                        Ok(Value::String(s)) => Some(s),
                        Ok(v) => match convert(v, &Type::String) {
                            Ok(Value::String(s)) => Some(s),
                            _ => None,
                        },
                        Err(e) => {
                            out.extend(e.0);
                            continue;
                        }
                    },
                    None => None,
                };
                out.push(Diag::at(
                    cond.expr.span(),
                    "Validation failed",
                    msg.unwrap_or_else(|| {
                        "This check failed, but has an invalid error message.".into()
                    }),
                ));
            }
        }
        if out.is_empty() {
            Ok(())
        } else {
            Err(Diags(out))
        }
    }

    /// The instances (final names and matrix values) of block `bi`.
    fn instances(&mut self, bi: usize) -> Result<Rc<Vec<Instance>>, Diags> {
        if let Some(Some(i)) = self.instances.get(bi) {
            return Ok(i.clone());
        }
        if !self.inst_progress.insert(bi) {
            let b = &self.blocks[bi];
            return Err(Diags::at(
                b.span,
                "Invalid expression",
                format!(
                    "reference cycle not allowed for {}.{}.name",
                    b.kind, b.labels[0].0
                ),
            ));
        }
        let span = self.blocks[bi].span;
        let r = self.nested(span, |p| p.compute_instances(bi));
        self.inst_progress.remove(&bi);
        let insts = Rc::new(r?);
        self.instances[bi] = Some(insts.clone());
        Ok(insts)
    }

    fn compute_instances(&mut self, bi: usize) -> Result<Vec<Instance>, Diags> {
        let b = self.blocks[bi];
        let label = b.labels[0].0.clone();
        let lspan = b.labels[0].1;
        if !is_valid_name(&label) {
            return Err(Diags::at(lspan, "Invalid name", name_error(&label)));
        }
        let matrix = b.body.attr("matrix");
        let name_attr = b.body.attr("name");
        if b.kind == "group" {
            if let Some(a) = matrix {
                return Err(Diags::at(
                    a.name_span,
                    "Invalid attribute",
                    "matrix is not supported for groups",
                ));
            }
            if let Some(a) = name_attr {
                return Err(Diags::at(
                    a.name_span,
                    "Invalid attribute",
                    "name is not supported for groups",
                ));
            }
            return Ok(vec![Instance {
                name: label,
                locals: vec![],
            }]);
        }
        let combos: Vec<Vec<(String, Value)>> = match matrix {
            None => {
                if let Some(a) = name_attr {
                    return Err(Diags::at(
                        a.name_span,
                        "Invalid attribute",
                        "name requires matrix",
                    ));
                }
                return Ok(vec![Instance {
                    name: label,
                    locals: vec![],
                }]);
            }
            Some(a) => {
                let mv = Evaluator::new(self).eval(&a.expr)?;
                let Some(entries) = mv.as_entries() else {
                    return Err(Diags::at(
                        a.expr.span(),
                        "Invalid matrix",
                        "matrix must be a map",
                    ));
                };
                // Declaration order of the keys when the matrix is written literally.
                let mut keys: Vec<String> = Vec::new();
                if let Expr::Object(items, _) = &a.expr {
                    for (k, _) in items {
                        if let ObjKey::Ident(n, _) = k {
                            if entries.contains_key(n.as_str()) && !keys.iter().any(|k| n == k) {
                                keys.push(n.to_string());
                            }
                        } else if let ObjKey::Expr(Expr::Str(n, _)) = k
                            && entries.contains_key(&**n)
                            && !keys.iter().any(|k| **k == **n)
                        {
                            keys.push(n.to_string());
                        }
                    }
                }
                for k in entries.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
                let mut combos: Vec<Vec<(String, Value)>> = vec![vec![]];
                for k in &keys {
                    let Some(vals) = entries[k].as_seq() else {
                        return Err(Diags::at(
                            a.expr.span(),
                            "Invalid matrix",
                            "matrix values must be a list",
                        ));
                    };
                    let mut next = Vec::new();
                    for c in &combos {
                        for v in vals {
                            let mut c2 = c.clone();
                            c2.push((k.clone(), v.clone()));
                            next.push(c2);
                        }
                    }
                    if next.len() > 100_000 {
                        return Err(Diags::at(
                            a.expr.span(),
                            "Invalid matrix",
                            "matrix expands to more than 100000 targets",
                        ));
                    }
                    combos = next;
                }
                combos
            }
        };
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for c in combos {
            let name = match name_attr {
                None => label.clone(),
                Some(a) => {
                    let v = Evaluator::with_locals(self, c.clone()).eval(&a.expr)?;
                    match convert(v, &Type::String) {
                        Ok(Value::String(s)) => s,
                        _ => {
                            return Err(Diags::at(
                                a.expr.span(),
                                "Invalid name",
                                "name must be a string",
                            ));
                        }
                    }
                }
            };
            if !is_valid_name(&name) {
                let span = name_attr.map(|a| a.expr.span()).unwrap_or(lspan);
                return Err(Diags::at(span, "Invalid name", name_error(&name)));
            }
            if !seen.insert(name.clone()) {
                let span = name_attr.map(|a| a.expr.span()).unwrap_or(lspan);
                return Err(Diags::at(
                    span,
                    "Invalid name",
                    format!("duplicate name {name:?}"),
                ));
            }
            out.push(Instance { name, locals: c });
        }
        Ok(out)
    }

    /// Evaluates one attribute of one instance; cycles are errors. With
    /// `store`, the value is cached for later references (the decode pass
    /// reads each attribute once and does not need to keep it).
    fn instance_attr(
        &mut self,
        bi: usize,
        ii: usize,
        attr: &str,
        store: bool,
    ) -> Result<Option<Value>, Diags> {
        let block = self.blocks[bi];
        let Some(ai) = block.body.attrs.iter().position(|a| a.name == attr) else {
            return Ok(None);
        };
        let key = (bi, ii, ai);
        if !self.attr_cache.is_empty()
            && let Some(v) = self.attr_cache.get(&key)
        {
            return Ok(Some(v.clone()));
        }
        let a = &block.body.attrs[ai];
        let insts = self.instances(bi)?;
        let inst = &insts[ii];
        if self.attr_progress.contains(&key) {
            return Err(Diags::at(
                a.expr.span(),
                "Invalid expression",
                format!(
                    "reference cycle not allowed for {}.{}.{attr}",
                    block.kind, inst.name
                ),
            ));
        }
        self.attr_progress.push(key);
        let locals = inst.locals.clone();
        let span = a.expr.span();
        let r = self.nested(span, |p| Evaluator::with_locals(p, locals).eval(&a.expr));
        self.attr_progress.pop();
        let v = r?;
        if store {
            self.attr_cache.insert(key, v.clone());
        }
        Ok(Some(v))
    }

    fn decode_target(&mut self, bi: usize, ii: usize, name: &str) -> Result<Target, Diags> {
        let mut t = Target {
            name: name.to_string(),
            ..Target::default()
        };
        let block = self.blocks[bi];
        let body = &block.body;
        // buildx decodes target bodies through a filtering body whose
        // `Content` is HCL's `PartialContent`: unknown attributes and all
        // nested blocks are ignored without being evaluated.
        for b in &body.blocks {
            self.warn(ignored_block(b, "target", TARGET_ATTRS));
        }
        let mut errs = Vec::new();
        for a in &body.attrs {
            if a.name == "matrix" || a.name == "name" {
                continue;
            }
            if !TARGET_ATTRS.contains(&a.name.as_str()) {
                self.warn(ignored_attribute(a, "target", TARGET_ATTRS));
                continue;
            }
            let v = match self.instance_attr(bi, ii, &a.name, false) {
                Ok(v) => v.unwrap_or_else(Value::null),
                Err(e) => {
                    // Keep going so every unknown name in the block is reported.
                    errs.extend(e.0);
                    continue;
                }
            };
            let v = self.rebase(bi, a, v);
            if let Err(m) = t.set_attr(&a.name, v) {
                errs.push(Diag::at(
                    a.expr.span(),
                    "Unsuitable value type",
                    format!("Unsuitable value: {m}"),
                ));
            }
        }
        if errs.is_empty() {
            Ok(t)
        } else {
            Err(Diags(errs))
        }
    }

    /// Decodes group block `bi`; with `store`, its attribute values are
    /// cached for later references (see [`Program::instance_attr`]).
    fn decode_group(&mut self, bi: usize, store: bool) -> Result<Group, Diags> {
        let b = self.blocks[bi];
        let mut g = Group {
            name: b.labels[0].0.clone(),
            ..Group::default()
        };
        for nb in &b.body.blocks {
            self.warn(ignored_block(nb, "group", GROUP_ATTRS));
        }
        for a in &b.body.attrs {
            if !GROUP_ATTRS.contains(&a.name.as_str()) {
                // Ignored (and never evaluated) by buildx, as in targets.
                self.warn(ignored_attribute(a, "group", GROUP_ATTRS));
                continue;
            }
            let v = self
                .instance_attr(bi, 0, &a.name, store)?
                .unwrap_or_else(Value::null);
            match a.name.as_str() {
                "targets" => {
                    let Some(items) = v.as_seq() else {
                        if v.is_null() {
                            continue;
                        }
                        return Err(Diags::at(
                            a.expr.span(),
                            "Unsuitable value type",
                            "Unsuitable value: list of string required",
                        ));
                    };
                    for it in items {
                        match convert(it.clone(), &Type::String) {
                            Ok(Value::String(s)) => g.targets.push(s),
                            _ => {
                                return Err(Diags::at(
                                    a.expr.span(),
                                    "Unsuitable value type",
                                    "Unsuitable value: list of string required",
                                ));
                            }
                        }
                    }
                }
                "description" => {
                    g.description = match convert(v, &Type::String) {
                        Ok(Value::String(s)) => Some(s),
                        Ok(_) => None,
                        Err(_) => {
                            return Err(Diags::at(
                                a.expr.span(),
                                "Unsuitable value type",
                                "Unsuitable value: string required",
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(g)
    }
}

/// Bound on nested lazy resolutions (a variable whose default reads a
/// variable whose default reads ...). Each level costs stack; 64 keeps the
/// worst case well inside a 2 MiB thread stack in debug builds.
pub const MAX_NESTING: usize = 64;

impl Program<'_, '_> {
    fn nested<T>(
        &mut self,
        span: Span,
        f: impl FnOnce(&mut Self) -> Result<T, Diags>,
    ) -> Result<T, Diags> {
        if self.nesting >= MAX_NESTING {
            return Err(Diags::at(
                span,
                "Invalid expression",
                format!(
                    "references nest more than {MAX_NESTING} levels deep (a variable, attribute or target referring to another, and so on); flatten the chain"
                ),
            ));
        }
        self.nesting += 1;
        let r = f(self);
        self.nesting -= 1;
        r
    }

    /// Every instance named `name` among blocks of `kind`. The first lookup
    /// builds an index over all blocks (so references cost O(1) after it);
    /// lookups made while that index is being built scan linearly.
    fn find_instances(&mut self, kind: &str, name: &str) -> Result<Vec<(usize, usize)>, Diags> {
        if self.index.is_none() && !self.indexing {
            self.indexing = true;
            let mut idx = InstanceIndex::default();
            let mut r = Ok(());
            for bi in 0..self.blocks.len() {
                match self.instances(bi) {
                    Ok(insts) => {
                        for (ii, inst) in insts.iter().enumerate() {
                            idx.entry((self.blocks[bi].kind.to_string(), inst.name.clone()))
                                .or_default()
                                .push((bi, ii));
                        }
                    }
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            self.indexing = false;
            r?;
            self.index = Some(idx);
        }
        if let Some(idx) = &self.index {
            return Ok(idx
                .get(&(kind.to_string(), name.to_string()))
                .cloned()
                .unwrap_or_default());
        }
        let mut found = Vec::new();
        for bi in 0..self.blocks.len() {
            if self.blocks[bi].kind != kind {
                continue;
            }
            let insts = self.instances(bi)?;
            for (ii, inst) in insts.iter().enumerate() {
                if inst.name == name {
                    found.push((bi, ii));
                }
            }
        }
        Ok(found)
    }
}

/// Whether a context value is a local path that file-relative mode rebases.
fn rebasable(v: &str) -> bool {
    !(v.starts_with("cwd://")
        || v.starts_with("target:")
        || v.starts_with("docker-image://")
        || v.starts_with("oci-layout://")
        || v.starts_with('/')
        || crate::is_remote(v)
        || v.contains("://"))
}

impl Program<'_, '_> {
    /// Rebases `context`/`contexts` values against the block's file directory
    /// in file-relative mode. Values read from another target
    /// (`target.x.context`) were rebased against that target's file already.
    fn rebase(&self, bi: usize, a: &Attribute, v: Value) -> Value {
        if !self.opts.file_relative_paths || !matches!(a.name.as_str(), "context" | "contexts") {
            return v;
        }
        let mut refs_target = false;
        a.expr
            .walk_vars(&mut |n, _, _| refs_target |= n == "target");
        if refs_target {
            return v;
        }
        let dir = self
            .file_dirs
            .get(self.blocks[bi].span.file as usize)
            .cloned()
            .unwrap_or_else(|| ".".into());
        let join = |s: &str| {
            if rebasable(s) {
                crate::clean_path(&format!("{dir}/{s}"))
            } else {
                s.to_string()
            }
        };
        match v {
            Value::String(s) => Value::String(join(&s)),
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, x)| {
                        (
                            k,
                            match x {
                                Value::String(s) => Value::String(join(&s)),
                                o => o,
                            },
                        )
                    })
                    .collect(),
            ),
            Value::Map(t, m) => Value::Map(
                t,
                m.into_iter()
                    .map(|(k, x)| {
                        (
                            k,
                            match x {
                                Value::String(s) => Value::String(join(&s)),
                                o => o,
                            },
                        )
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

impl Env for Program<'_, '_> {
    fn var(&mut self, name: &str, span: Span) -> Result<Option<Value>, Diags> {
        self.resolve(name, span)
    }

    fn var_names(&self) -> Vec<String> {
        self.vars.keys().chain(self.attrs.keys()).cloned().collect()
    }

    fn function_names(&self) -> Vec<String> {
        self.funcs.keys().cloned().collect()
    }

    fn is_block_kind(&self, kind: &str) -> bool {
        RESERVED_KINDS.contains(&kind)
    }

    fn block(
        &mut self,
        kind: &str,
        name: &str,
        attr: Option<&str>,
        span: Span,
    ) -> Result<Option<Value>, Diags> {
        let found = self.find_instances(kind, name)?;
        if found.is_empty() {
            return Ok(None);
        }
        if kind == "group" {
            let (bi, _) = *found.last().unwrap_or(&(0, 0));
            let g = self.decode_group(bi, true)?;
            let obj = Value::Object(
                [
                    ("name".to_string(), Value::string(g.name)),
                    (
                        "targets".to_string(),
                        Value::list_of(
                            Type::String,
                            g.targets.into_iter().map(Value::String).collect(),
                        ),
                    ),
                    (
                        "description".to_string(),
                        g.description
                            .map(Value::String)
                            .unwrap_or(Value::Null(Type::String)),
                    ),
                ]
                .into(),
            );
            return Ok(Some(match attr {
                Some(a) => crate::eval::get_attr(obj, a, span)?,
                None => obj,
            }));
        }
        let attrs: Vec<&str> = match attr {
            Some("name") => return Ok(Some(Value::string(name))),
            Some(a) => {
                if !TARGET_ATTRS.contains(&a) {
                    return Err(Diags::at(
                        span,
                        "Unsupported attribute",
                        format!("This object does not have an attribute named {a:?}."),
                    ));
                }
                vec![a]
            }
            None => TARGET_ATTRS.to_vec(),
        };
        let mut t = Target {
            name: name.to_string(),
            ..Target::default()
        };
        let single = found.len() == 1;
        for (bi, ii) in found {
            let mut part = Target {
                name: name.to_string(),
                ..Target::default()
            };
            for a in &attrs {
                if let Some(v) = self.instance_attr(bi, ii, a, true)? {
                    let v = match self.blocks[bi].body.attr(a) {
                        Some(at) => self.rebase(bi, at, v),
                        None => v,
                    };
                    part.set_attr(a, v).map_err(|m| {
                        Diags::at(
                            span,
                            "Unsuitable value type",
                            format!("Unsuitable value: {m}"),
                        )
                    })?;
                }
            }
            if single {
                // One block: its decoded fields as they are (merging would
                // turn an empty `cache-from = []` into an unset one).
                t = part;
            } else {
                t.merge_owned(part);
            }
        }
        match attr {
            Some(a) => Ok(Some(t.attr_value(a))),
            None => {
                let mut m = BTreeMap::new();
                m.insert("name".to_string(), Value::string(name));
                for a in TARGET_ATTRS {
                    m.insert((*a).to_string(), t.attr_value(a));
                }
                Ok(Some(Value::Object(m)))
            }
        }
    }

    fn function(&mut self, name: &str, span: Span) -> Result<Option<Rc<UserFunc>>, Diags> {
        if let Some(f) = self.user_funcs.get(name) {
            return Ok(Some(f.clone()));
        }
        let Some(decl) = self.funcs.get(name) else {
            return Ok(None);
        };
        if !self.func_progress.insert(name.to_string()) {
            return Err(Diags::at(
                span,
                "Invalid expression",
                format!("function cycle not allowed for {name}"),
            ));
        }
        let dspan = decl.span;
        let Some(result) = decl.result else {
            return Err(Diags::at(
                dspan,
                "Invalid function",
                format!("empty result not allowed for {name}"),
            ));
        };
        let Some(params) = decl.params else {
            return Err(Diags::at(
                dspan,
                "Invalid function",
                format!("empty params not allowed for {name}"),
            ));
        };
        let keyword = |e: &Expr| -> Option<String> {
            match e {
                Expr::Var(n, _) => Some(n.to_string()),
                Expr::Str(s, _) if is_valid_ident(s) => Some(s.to_string()),
                _ => None,
            }
        };
        let Expr::Tuple(items, _) = params else {
            return Err(Diags::at(
                params.span(),
                "Invalid params",
                "The params must be a list of parameter names.",
            ));
        };
        let mut names = Vec::new();
        for it in items {
            match keyword(it) {
                Some(n) => names.push(n),
                None => {
                    return Err(Diags::at(
                        it.span(),
                        "Invalid param element",
                        "Each parameter name must be an identifier.",
                    ));
                }
            }
        }
        let variadic = match &decl.variadic {
            Some(e) => match keyword(e) {
                Some(n) => Some(n),
                None => {
                    return Err(Diags::at(
                        e.span(),
                        "Invalid param element",
                        "Each parameter name must be an identifier.",
                    ));
                }
            },
            None => None,
        };
        // Detect cycles through other user functions before the body runs.
        let mut called = Vec::new();
        result.walk_calls(&mut |n, s| called.push((n.to_string(), s)));
        for (c, s) in called {
            if self.funcs.contains_key(&c) {
                self.function(&c, s)?;
            }
        }
        let f = Rc::new(UserFunc {
            name: name.to_string(),
            params: names,
            variadic,
            result: result.clone(),
        });
        self.func_progress.remove(name);
        self.user_funcs.insert(name.to_string(), f.clone());
        Ok(Some(f))
    }
}

fn is_valid_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '-')
}

/// Go `strconv.ParseFloat(s, 64)` restricted to finite values.
fn go_parse_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    if lower.contains("inf") || lower.contains("nan") {
        return None;
    }
    parse_number(s).filter(|_| s.trim() == s)
}

/// Parses an environment override for a typed variable: primitives directly,
/// collections of primitives from CSV (`k:v` fields for maps).
fn parse_typed_override(name: &str, s: &str, ty: &Type) -> Result<Value, String> {
    let prim = |t: &Type, text: &str| -> Result<Value, String> {
        match t {
            Type::String => Ok(Value::string(text)),
            Type::Number => go_parse_float(text)
                .map(Value::Number)
                .ok_or_else(|| format!("failed to parse {name} as number: strconv.ParseFloat: parsing {text:?}: invalid syntax")),
            Type::Bool => parse_go_bool(text)
                .map(Value::Bool)
                .ok_or_else(|| format!("failed to parse {name} as bool: strconv.ParseBool: parsing {text:?}: invalid syntax")),
            Type::Dynamic => Ok(Value::string(text)),
            other => Err(format!("unsupported type {} for variable {name}", other.friendly_name())),
        }
    };
    let csv_err = |e: String| format!("failed to convert variable {name} from CSV: {e}");
    match ty {
        t if t.is_primitive() || *t == Type::Dynamic => prim(t, s),
        Type::List(et) | Type::Set(et) => {
            if !et.is_primitive() {
                return Err(format!(
                    "unsupported type {} for variable {name}",
                    ty.friendly_name()
                ));
            }
            let fields = crate::model::csv_fields(s)
                .map_err(|e| csv_err(format!("invalid CSV value: {e}")))?;
            let mut out = Vec::new();
            for f in fields {
                out.push(prim(et, &f).map_err(|e| {
                    csv_err(format!(
                        "failed to parse element of type {}: {e}",
                        ty.friendly_name()
                    ))
                })?);
            }
            Ok(if matches!(ty, Type::List(_)) {
                Value::list_of((**et).clone(), out)
            } else {
                Value::set_of((**et).clone(), out)
            })
        }
        Type::Tuple(ts) => {
            if !ts.iter().all(Type::is_primitive) {
                return Err(format!(
                    "unsupported type {} for variable {name}",
                    ty.friendly_name()
                ));
            }
            let fields = crate::model::csv_fields(s)
                .map_err(|e| csv_err(format!("invalid CSV value: {e}")))?;
            if fields.len() != ts.len() {
                return Err(csv_err(format!(
                    "tuple requires {} elements, got {}",
                    ts.len(),
                    fields.len()
                )));
            }
            let mut out = Vec::new();
            for (f, t) in fields.iter().zip(ts) {
                out.push(prim(t, f).map_err(|e| {
                    csv_err(format!(
                        "failed to parse element of type {}: {e}",
                        ty.friendly_name()
                    ))
                })?);
            }
            Ok(Value::Tuple(out))
        }
        Type::Map(et) => {
            if !et.is_primitive() {
                return Err(format!(
                    "unsupported type {} for variable {name}",
                    ty.friendly_name()
                ));
            }
            let fields = crate::model::csv_fields(s)
                .map_err(|e| csv_err(format!("failed to parse {s:?} as CSV: {e}")))?;
            let mut out = BTreeMap::new();
            for f in fields {
                let kv = crate::model::csv_record(&f, ':')
                    .map_err(|e| csv_err(format!("failed to parse map entry {f:?} as CSV: {e}")))?;
                if kv.len() != 2 {
                    return Err(csv_err(format!("expected one k/v pair in {f:?}")));
                }
                let v = prim(et, &kv[1]).map_err(|e| {
                    csv_err(format!(
                        "failed to parse element of type {}: {e}",
                        ty.friendly_name()
                    ))
                })?;
                out.insert(kv[0].clone(), v);
            }
            Ok(Value::Map((**et).clone(), out))
        }
        _ => Err(format!(
            "unsupported type {} for variable {name}",
            ty.friendly_name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(src: &str, opts: &Options) -> Result<Config, String> {
        crate::load(vec![("t.hcl".into(), src.into())], opts)
            .map(|b| b.config)
            .map_err(|e| e.to_string())
    }

    /// A chain V{n-1} → ... → V0, declared from the top so that resolving
    /// the first declaration recurses through the whole chain.
    fn chain(n: usize) -> String {
        let mut s = String::new();
        for i in (1..n).rev() {
            s.push_str(&format!(
                "variable \"V{i}\" {{ default = \"${{V{}}}y\" }}\n",
                i - 1
            ));
        }
        s.push_str("variable \"V0\" { default = \"x\" }\n");
        s.push_str(&format!("target \"t\" {{ args = {{ A = V{} }} }}\n", n - 1));
        s
    }

    #[test]
    fn variable_chains_are_bounded_not_overflowing() {
        assert!(eval(&chain(30), &Options::default()).is_ok());
        let Err(e) = eval(&chain(500), &Options::default()) else {
            panic!("a 500-deep chain must be refused");
        };
        assert!(
            e.contains("nest more than 64 levels"),
            "{}",
            &e[..e.len().min(400)]
        );
    }

    #[test]
    fn override_sources_are_recorded() {
        let src = "variable \"A\" { default = \"d\" }\nvariable \"B\" { default = \"d\" }\nvariable \"C\" { default = \"d\" }\ntarget \"t\" {}\n";
        let mut opts = Options::default();
        opts.env.insert("A".into(), "from-env".into());
        opts.vars.insert("B".into(), "from-var".into());
        opts.env.insert("B".into(), "loses".into());
        let cfg = eval(src, &opts).unwrap();
        let get = |n: &str| cfg.variables.iter().find(|v| v.name == n).unwrap().clone();
        assert_eq!(
            (
                get("A").source,
                get("A").value.as_str().unwrap().to_string()
            ),
            ("env", "from-env".into())
        );
        assert_eq!(
            (
                get("B").source,
                get("B").value.as_str().unwrap().to_string()
            ),
            ("var", "from-var".into())
        );
        assert_eq!(get("C").source, "default");
        // A typed variable from NAME_JSON says so.
        let src = "variable \"L\" {\n  type = list(string)\n  default = []\n}\ntarget \"t\" {}\n";
        let mut opts = Options::default();
        opts.env.insert("L_JSON".into(), "[\"a\"]".into());
        let cfg = eval(src, &opts).unwrap();
        assert_eq!(cfg.variables[0].source, "env-json");
    }

    #[test]
    fn env_lookup_can_be_disabled() {
        let src = "variable \"A\" { default = \"d\" }\ntarget \"t\" { args = { A = A } }\n";
        let mut opts = Options {
            disable_env_lookup: true,
            ..Options::default()
        };
        opts.env.insert("A".into(), "env".into());
        let cfg = eval(src, &opts).unwrap();
        assert_eq!(cfg.targets[0].args.as_ref().unwrap()["A"], Some("d".into()));
    }

    #[test]
    fn typed_override_errors_name_the_variable() {
        let src = "variable \"N\" { type = number }\ntarget \"t\" {}\n";
        let mut opts = Options::default();
        opts.env.insert("N".into(), "twelve".into());
        let e = eval(src, &opts).unwrap_err();
        assert!(e.contains("failed to parse N as number"), "{e}");
        assert!(e.contains("t.hcl:1:"), "points at the declaration: {e}");
    }

    fn load(src: &str) -> crate::Bake {
        crate::load(vec![("t.hcl".into(), src.into())], &Options::default())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_mistyped_variable_or_function_gets_a_did_you_mean() {
        let src = "\
variable \"VERSION\" { default = \"1\" }
REGISTRY = \"r\"
function \"tag\" {
  params = [n]
  result = \"${REGISTRY}/${n}:${VERSION}\"
}
target \"a\" { tags = [\"x:${VERSON}\"] }
";
        let e = eval(src, &Options::default()).unwrap_err();
        assert!(
            e.contains("There is no variable named \"VERSON\". Did you mean \"VERSION\"?"),
            "{e}"
        );
        let e = eval(&src.replace("${VERSON}", "${REGISTY}"), &Options::default()).unwrap_err();
        assert!(e.contains("Did you mean \"REGISTRY\"?"), "{e}");
        let e = eval(
            &src.replace("\"x:${VERSON}\"", "tg(\"x\")"),
            &Options::default(),
        )
        .unwrap_err();
        assert!(
            e.contains("There is no function named \"tg\". Did you mean \"tag\"?"),
            "{e}"
        );
        let e = eval(&src.replace("${VERSON}", "${ZZZZZZ}"), &Options::default()).unwrap_err();
        assert!(!e.contains("Did you mean"), "nothing close: no guess: {e}");
    }

    #[test]
    fn unknown_attributes_and_blocks_are_ignored_with_warnings() {
        // buildx decodes these bodies with HCL's PartialContent: what it does
        // not know is dropped without being evaluated. kiln accepts the same
        // and says so.
        let src = "\
variable \"V\" {
  default = \"v\"
  sensitive = true
}
target \"t\" {
  provenance = false
  platform = [\"linux/amd64\"]
  sbom = undefined_name
  args {
    A = \"1\"
  }
  tags = [\"x\"]
}
group \"g\" {
  targets = [\"t\"]
  comment = \"x\"
}
unknown \"u\" {
  a = 1
}
";
        let bake = load(src);
        let t = &bake.config.targets[0];
        assert_eq!(t.tags.as_deref(), Some(&["x".to_string()][..]));
        assert_eq!(t.args, None, "an `args` block is ignored, as in buildx");
        assert_eq!(t.platforms, None);
        let w = bake.render_warnings();
        assert_eq!(w.len(), 7, "{w:#?}");
        let find = |needle: &str| {
            w.iter()
                .find(|x| x.contains(needle))
                .unwrap_or_else(|| panic!("no warning about {needle}: {w:#?}"))
        };
        assert!(find("\"sensitive\"").contains("t.hcl:3:3"));
        assert!(find("\"provenance\"").contains("t.hcl:6:3"));
        let p = find("\"platform\"");
        assert!(
            p.contains("t.hcl:7:3") && p.contains("Did you mean \"platforms\"?"),
            "{p}"
        );
        assert!(find("\"sbom\"").contains("t.hcl:8:3"));
        let a = find("block \"args\"");
        assert!(
            a.contains("t.hcl:9:3") && a.contains("`args = { ... }`"),
            "{a}"
        );
        let c = find("\"comment\"");
        assert!(c.contains("t.hcl:16:3"), "{c}");
        assert!(find("block \"unknown\"").contains("t.hcl:18:1"));
        // Warnings come in source order.
        let lines: Vec<usize> = bake
            .config
            .warnings
            .iter()
            .map(|d| bake.sources.pos(d.span.unwrap()).unwrap().line)
            .collect();
        assert_eq!(lines, vec![3, 6, 7, 8, 9, 16, 18]);
    }

    #[test]
    fn matrix_targets_warn_once_and_references_to_unknown_attrs_still_fail() {
        let src = "target \"t\" {\n  matrix = { v = [\"a\", \"b\"] }\n  name = \"t-${v}\"\n  provenance = false\n}\n";
        assert_eq!(load(src).config.warnings.len(), 1);
        let e = eval(
            "target \"a\" {\n  provenance = false\n}\ntarget \"b\" {\n  tags = [target.a.provenance]\n}\n",
            &Options::default(),
        )
        .unwrap_err();
        assert!(
            e.contains("does not have an attribute named \"provenance\""),
            "{e}"
        );
    }

    /// The span tables are read by other crates the way a map of
    /// (target, attribute) pairs is read; they must keep reading the same.
    #[test]
    fn attribute_spans_read_like_a_map_of_pairs() {
        let bake = load(
            "target \"a\" {\n  context = \".\"\n  contexts = { x = \"target:b\" }\n}\ntarget \"b\" {}\n",
        );
        let cfg = &bake.config;
        let n = "a".to_string();
        let own = cfg.attr_spans.get(&(n.clone(), "contexts".into()));
        assert!(own.is_some());
        let s = own.or(cfg.target_spans.get(&n)).copied();
        assert_eq!(s, cfg.attr_spans.span("a", "contexts"));
        let mut out = Vec::new();
        if let Some(s) = cfg.attr_spans.get(&(n.to_string(), "context".to_string())) {
            out.push(*s);
        }
        assert_eq!(out.len(), 1);
        assert!(
            cfg.attr_spans
                .get(&("b".into(), "context".into()))
                .is_none()
        );
        assert!(
            cfg.attr_spans
                .get(&("b".into(), "tags".into()))
                .or_else(|| cfg.target_spans.get("b"))
                .is_some()
        );
    }

    #[test]
    fn target_references_are_typed_like_buildx() {
        // Unset list attributes are null lists, `[]` is an empty list: both
        // are lists to functions like coalescelist.
        let src = "\
target \"unset\" {}
target \"empty\" {
  tags = []
  output = [\"type=docker\"]
  secret = [\"id=s,env=S\"]
  ssh = [\"default\"]
}
target \"a\" {
  tags = coalescelist(target.unset.tags, target.empty.tags, [\"a\"])
  args = {
    unset_tags = target.unset.tags == null ? \"null\" : \"set\"
    empty_tags = length(target.empty.tags)
    description = \"<${target.unset.description}>\"
    dest = \"<${target.empty.output[0].dest}>\"
    src = \"<${target.empty.secret[0].src}>\"
    paths = length(target.empty.ssh[0].paths)
    context = target.unset.context == null
    cache = target.unset.cache-from == null
  }
}
";
        let cfg = eval(src, &Options::default()).unwrap();
        let a = cfg.targets.iter().find(|t| t.name == "a").unwrap();
        assert_eq!(a.tags.as_deref(), Some(&["a".to_string()][..]));
        let args = a.args.as_ref().unwrap();
        let arg = |k: &str| args[k].clone().unwrap();
        assert_eq!(arg("unset_tags"), "null");
        assert_eq!(arg("empty_tags"), "0");
        assert_eq!(arg("description"), "<>");
        assert_eq!(arg("dest"), "<>");
        assert_eq!(arg("src"), "<>");
        assert_eq!(arg("paths"), "0");
        assert_eq!(arg("context"), "true");
        assert_eq!(arg("cache"), "true");
    }

    /// A block's instances are dropped once it is decoded; references made
    /// after that compute them again, with the same names and values.
    #[test]
    fn decoded_blocks_are_still_referenced_by_later_targets() {
        let src = "\
target \"m\" {
  matrix = { v = [\"a\", \"b\"] }
  name = \"m-${v}\"
  tags = [\"img:${v}\"]
}
target \"p\" {
  context = \"ctx\"
}
target \"x\" {
  tags = concat(target.m-b.tags, [target.p.context, target.m-a.name])
}
group \"g\" {
  targets = [\"x\", target.m-a.name]
}
target \"y\" {
  tags = group.g.targets
}
";
        let cfg = eval(src, &Options::default()).unwrap();
        let tags = |n: &str| {
            let t = cfg.target(n).unwrap();
            t.tags.as_deref().unwrap().to_vec()
        };
        assert_eq!(tags("x"), ["img:b", "ctx", "m-a"]);
        assert_eq!(tags("y"), ["x", "m-a"]);
        assert_eq!(
            cfg.groups.iter().find(|g| g.name == "m").unwrap().targets,
            ["m-a", "m-b"]
        );
    }
}
