//! kiln's own syntax tree for bake files, shared by the HCL native and HCL JSON
//! front ends, with byte spans into the source files for diagnostics.
//!
//! Owns: the tree types. Must never: evaluate anything.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::fxhash::FxHashSet;
use crate::value::Value;

/// A byte range in one source file (`file` indexes [`crate::source::Sources`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: u32,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: u32, start: usize, end: usize) -> Span {
        Span {
            file,
            start: start as u32,
            end: end as u32,
        }
    }
    /// A span covering both `self` and `other` (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
}

/// An identifier: an attribute, block type, variable, function, object
/// key, traversal step or `for` variable name. Shared rather than copied:
/// the parser hands out one allocation per distinct name in a file, so the
/// names every target repeats (`tags`, `args`, `labels`, ...) cost nothing
/// per use beyond the pointer. One pointer wide (the text sits behind the
/// shared box), so that a name and a span fit beside an expression's tag.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<Box<str>>);

impl Name {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(Arc::new(s.into()))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(Arc::new(s.into_boxed_str()))
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, o: &str) -> bool {
        **self.0 == *o
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, o: &&str) -> bool {
        **self.0 == **o
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, o: &String) -> bool {
        **self.0 == **o
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Hands out one shared [`Name`] per distinct text (a parser's table).
#[derive(Default)]
pub struct Names(FxHashSet<Name>);

impl Names {
    pub fn get(&mut self, s: &str) -> Name {
        if let Some(n) = self.0.get(s) {
            return n.clone();
        }
        let n = Name::from(s);
        self.0.insert(n.clone());
        n
    }
}

/// One step of a traversal after the root expression.
#[derive(Clone, Debug)]
pub enum Step {
    Attr(Name, Span),
    Index(Expr, Span),
    /// `.*`: applies the following attribute steps to each element.
    AttrSplat(Span),
    /// `[*]`: applies all following steps to each element.
    FullSplat(Span),
}

#[derive(Clone, Debug)]
pub enum ObjKey {
    /// A bare identifier used as a key (`{ foo = 1 }`): the literal name.
    Ident(Name, Span),
    Expr(Expr),
}

impl ObjKey {
    /// The key's name when it is written literally (a bare identifier, a
    /// quoted string without interpolations, or a JSON key), `None` when it
    /// has to be evaluated.
    pub fn literal_name(&self) -> Option<String> {
        match self {
            ObjKey::Ident(name, _) => Some(name.to_string()),
            ObjKey::Expr(Expr::Str(s, _)) => Some(s.to_string()),
            ObjKey::Expr(e) => e.template_text(),
        }
    }
}

impl Expr {
    /// The text of a template made of literal parts only (no `${}` or
    /// `%{}`), `None` for anything else.
    pub fn template_text(&self) -> Option<String> {
        let Expr::Template(parts, _) = self else {
            return None;
        };
        let mut s = String::new();
        for p in parts {
            match p {
                TPart::Lit(t) => s.push_str(t),
                _ => return None,
            }
        }
        Some(s)
    }
}

/// One part of a template. The directives are boxed so that a part is no
/// larger than an interpolation (templates are mostly literals and
/// interpolations).
#[derive(Clone, Debug)]
pub enum TPart {
    Lit(Box<str>),
    Interp(Expr),
    If(Box<TIf>),
    For(Box<TFor>),
}

/// `%{ if cond }then%{ else }otherwise%{ endif }`.
#[derive(Clone, Debug)]
pub struct TIf {
    pub cond: Expr,
    pub then: Box<[TPart]>,
    pub otherwise: Box<[TPart]>,
    pub span: Span,
}

/// `%{ for key_var, val_var in coll }body%{ endfor }`.
#[derive(Clone, Debug)]
pub struct TFor {
    pub key_var: Option<Name>,
    pub val_var: Name,
    pub coll: Expr,
    pub body: Box<[TPart]>,
    pub span: Span,
}

/// An expression. Kept at 32 bytes (checked by a test): the tree of a
/// large bake file is mostly expressions, and it lives through the whole
/// evaluation. Variants whose fields would not fit are boxed; the common
/// ones (strings, names, lists, operators) are not.
#[derive(Clone, Debug)]
pub enum Expr {
    Null(Span),
    Bool(bool, Span),
    Number(f64, Span),
    /// A quoted string without interpolations or directives (or a JSON
    /// string that is not evaluated as a template, like a JSON object key).
    Str(Box<str>, Span),
    /// A quoted template or heredoc. A template of exactly one interpolation
    /// yields that value unconverted.
    Template(Box<[TPart]>, Span),
    Tuple(Box<[Expr]>, Span),
    Object(Box<[(ObjKey, Expr)]>, Span),
    Var(Name, Span),
    Call(Box<Call>, Span),
    Traversal(Box<Traversal>, Span),
    Cond(Box<Cond>, Span),
    Unary {
        op: UnaryOp,
        expr: Box<Expr>,
        span: Span,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        span: Span,
    },
    For(Box<ForExpr>),
}

/// A function call `name(args)`, `name(args...)` with `expand_final`.
#[derive(Clone, Debug)]
pub struct Call {
    pub name: Name,
    pub args: Box<[Expr]>,
    pub expand_final: bool,
}

/// `root.attr[index]...`.
#[derive(Clone, Debug)]
pub struct Traversal {
    pub root: Expr,
    pub steps: Box<[Step]>,
}

/// `cond ? then : otherwise`.
#[derive(Clone, Debug)]
pub struct Cond {
    pub cond: Expr,
    pub then: Expr,
    pub otherwise: Expr,
}

#[derive(Clone, Debug)]
pub struct ForExpr {
    pub key_var: Option<Name>,
    pub val_var: Name,
    pub coll: Expr,
    /// `Some` for an object `for` (`{for k, v in x : k => v}`).
    pub key_expr: Option<Expr>,
    pub val_expr: Expr,
    pub cond: Option<Expr>,
    pub grouping: bool,
    pub span: Span,
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Null(s)
            | Expr::Bool(_, s)
            | Expr::Number(_, s)
            | Expr::Str(_, s)
            | Expr::Template(_, s)
            | Expr::Tuple(_, s)
            | Expr::Object(_, s)
            | Expr::Var(_, s)
            | Expr::Call(_, s)
            | Expr::Traversal(_, s)
            | Expr::Cond(_, s)
            | Expr::Unary { span: s, .. }
            | Expr::Binary { span: s, .. } => *s,
            Expr::For(f) => f.span,
        }
    }

    /// A literal's value (`null`, a bool, a number or a string without
    /// interpolations), `None` for anything else.
    pub fn literal(&self) -> Option<Value> {
        match self {
            Expr::Null(_) => Some(Value::null()),
            Expr::Bool(b, _) => Some(Value::Bool(*b)),
            Expr::Number(n, _) => Some(Value::Number(*n)),
            Expr::Str(s, _) => Some(Value::String(s.to_string())),
            _ => None,
        }
    }

    /// Whether this is a literal (see [`Expr::literal`]).
    pub fn is_literal(&self) -> bool {
        matches!(
            self,
            Expr::Null(_) | Expr::Bool(..) | Expr::Number(..) | Expr::Str(..)
        )
    }

    /// Calls `f` for every variable root referenced by this expression, with
    /// the steps that follow it (used to find dependencies). Names bound by
    /// `for` expressions inside are still reported; callers filter them.
    pub fn walk_vars<'a>(&'a self, f: &mut dyn FnMut(&'a str, &'a [Step], Span)) {
        match self {
            Expr::Null(_) | Expr::Bool(..) | Expr::Number(..) | Expr::Str(..) => {}
            Expr::Template(parts, _) => walk_parts(parts, f),
            Expr::Tuple(items, _) => items.iter().for_each(|e| e.walk_vars(f)),
            Expr::Object(items, _) => {
                for (k, v) in items {
                    if let ObjKey::Expr(e) = k {
                        e.walk_vars(f);
                    }
                    v.walk_vars(f);
                }
            }
            Expr::Var(name, span) => f(name, &[], *span),
            Expr::Call(c, _) => c.args.iter().for_each(|e| e.walk_vars(f)),
            Expr::Traversal(t, _) => {
                if let Expr::Var(name, span) = &t.root {
                    f(name, &t.steps, *span);
                } else {
                    t.root.walk_vars(f);
                }
                for s in &t.steps {
                    if let Step::Index(e, _) = s {
                        e.walk_vars(f);
                    }
                }
            }
            Expr::Cond(c, _) => {
                c.cond.walk_vars(f);
                c.then.walk_vars(f);
                c.otherwise.walk_vars(f);
            }
            Expr::Unary { expr, .. } => expr.walk_vars(f),
            Expr::Binary { lhs, rhs, .. } => {
                lhs.walk_vars(f);
                rhs.walk_vars(f);
            }
            Expr::For(fe) => {
                fe.coll.walk_vars(f);
                if let Some(k) = &fe.key_expr {
                    k.walk_vars(f);
                }
                fe.val_expr.walk_vars(f);
                if let Some(c) = &fe.cond {
                    c.walk_vars(f);
                }
            }
        }
    }

    /// Calls `f` with the name of every function called in this expression.
    pub fn walk_calls<'a>(&'a self, f: &mut dyn FnMut(&'a str, Span)) {
        match self {
            Expr::Null(_) | Expr::Bool(..) | Expr::Number(..) | Expr::Str(..) | Expr::Var(..) => {}
            Expr::Template(parts, _) => walk_parts_calls(parts, f),
            Expr::Tuple(items, _) => items.iter().for_each(|e| e.walk_calls(f)),
            Expr::Object(items, _) => {
                for (k, v) in items {
                    if let ObjKey::Expr(e) = k {
                        e.walk_calls(f);
                    }
                    v.walk_calls(f);
                }
            }
            Expr::Call(c, span) => {
                f(&c.name, *span);
                c.args.iter().for_each(|e| e.walk_calls(f));
            }
            Expr::Traversal(t, _) => {
                t.root.walk_calls(f);
                for s in &t.steps {
                    if let Step::Index(e, _) = s {
                        e.walk_calls(f);
                    }
                }
            }
            Expr::Cond(c, _) => {
                c.cond.walk_calls(f);
                c.then.walk_calls(f);
                c.otherwise.walk_calls(f);
            }
            Expr::Unary { expr, .. } => expr.walk_calls(f),
            Expr::Binary { lhs, rhs, .. } => {
                lhs.walk_calls(f);
                rhs.walk_calls(f);
            }
            Expr::For(fe) => {
                fe.coll.walk_calls(f);
                if let Some(k) = &fe.key_expr {
                    k.walk_calls(f);
                }
                fe.val_expr.walk_calls(f);
                if let Some(c) = &fe.cond {
                    c.walk_calls(f);
                }
            }
        }
    }
}

fn walk_parts<'a>(parts: &'a [TPart], f: &mut dyn FnMut(&'a str, &'a [Step], Span)) {
    for p in parts {
        match p {
            TPart::Lit(_) => {}
            TPart::Interp(e) => e.walk_vars(f),
            TPart::If(d) => {
                d.cond.walk_vars(f);
                walk_parts(&d.then, f);
                walk_parts(&d.otherwise, f);
            }
            TPart::For(d) => {
                d.coll.walk_vars(f);
                walk_parts(&d.body, f);
            }
        }
    }
}

fn walk_parts_calls<'a>(parts: &'a [TPart], f: &mut dyn FnMut(&'a str, Span)) {
    for p in parts {
        match p {
            TPart::Lit(_) => {}
            TPart::Interp(e) => e.walk_calls(f),
            TPart::If(d) => {
                d.cond.walk_calls(f);
                walk_parts_calls(&d.then, f);
                walk_parts_calls(&d.otherwise, f);
            }
            TPart::For(d) => {
                d.coll.walk_calls(f);
                walk_parts_calls(&d.body, f);
            }
        }
    }
}

/// An attribute `name = expr`.
#[derive(Clone, Debug)]
pub struct Attribute {
    pub name: Name,
    pub name_span: Span,
    pub expr: Expr,
}

/// A block `kind "label" { ... }`.
#[derive(Clone, Debug)]
pub struct Block {
    pub kind: Name,
    pub labels: Box<[(String, Span)]>,
    pub body: Body,
    /// The block header (type and labels), for diagnostics.
    pub span: Span,
}

/// A body: attributes and nested blocks in source order.
#[derive(Clone, Debug, Default)]
pub struct Body {
    pub attrs: Box<[Attribute]>,
    pub blocks: Box<[Block]>,
    /// Where the body is (for "missing attribute" diagnostics).
    pub span: Span,
}

impl Body {
    pub fn attr(&self, name: &str) -> Option<&Attribute> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// The tree of a large file is mostly these nodes and lives through the
    /// whole evaluation: their sizes are part of the memory budget.
    #[test]
    fn node_sizes_stay_small() {
        assert_eq!(size_of::<Span>(), 12);
        assert_eq!(size_of::<Name>(), 8);
        assert_eq!(size_of::<Expr>(), 32);
        assert_eq!(size_of::<TPart>(), 32);
        assert_eq!(size_of::<ObjKey>(), 32);
        assert_eq!(size_of::<Step>(), 48);
        assert_eq!(size_of::<Call>(), 32);
        assert_eq!(size_of::<Attribute>(), 56);
        assert_eq!(size_of::<Body>(), 48);
        assert_eq!(size_of::<Block>(), 88);
    }
}
