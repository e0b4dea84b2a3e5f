//! kiln's own syntax tree for bake files, shared by the HCL native and HCL JSON
//! front ends, with byte spans into the source files for diagnostics.
//!
//! Owns: the tree types. Must never: evaluate anything.

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

/// One step of a traversal after the root expression.
#[derive(Clone, Debug)]
pub enum Step {
    Attr(String, Span),
    Index(Expr, Span),
    /// `.*`: applies the following attribute steps to each element.
    AttrSplat(Span),
    /// `[*]`: applies all following steps to each element.
    FullSplat(Span),
}

#[derive(Clone, Debug)]
pub enum ObjKey {
    /// A bare identifier used as a key (`{ foo = 1 }`): the literal name.
    Ident(String, Span),
    Expr(Expr),
}

impl ObjKey {
    /// The key's name when it is written literally (a bare identifier, a
    /// quoted string without interpolations, or a JSON key), `None` when it
    /// has to be evaluated.
    pub fn literal_name(&self) -> Option<String> {
        match self {
            ObjKey::Ident(name, _) => Some(name.clone()),
            ObjKey::Expr(Expr::Literal(Value::String(s), _)) => Some(s.clone()),
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

/// One part of a template. The directives box their expression and keep
/// names as `Box<str>` so that a part is no larger than an interpolation
/// (templates are mostly literals and interpolations).
#[derive(Clone, Debug)]
pub enum TPart {
    Lit(String),
    Interp(Expr),
    If {
        cond: Box<Expr>,
        then: Vec<TPart>,
        otherwise: Vec<TPart>,
        span: Span,
    },
    For {
        key_var: Option<Box<str>>,
        val_var: Box<str>,
        coll: Box<Expr>,
        body: Vec<TPart>,
        span: Span,
    },
}

#[derive(Clone, Debug)]
pub enum Expr {
    Literal(Value, Span),
    /// A quoted template or heredoc. A template of exactly one interpolation
    /// yields that value unconverted.
    Template(Vec<TPart>, Span),
    Tuple(Vec<Expr>, Span),
    Object(Vec<(ObjKey, Expr)>, Span),
    Var(String, Span),
    Call {
        name: String,
        args: Vec<Expr>,
        expand_final: bool,
        span: Span,
    },
    Traversal {
        root: Box<Expr>,
        steps: Vec<Step>,
        span: Span,
    },
    Cond {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
        span: Span,
    },
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

#[derive(Clone, Debug)]
pub struct ForExpr {
    pub key_var: Option<String>,
    pub val_var: String,
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
            Expr::Literal(_, s)
            | Expr::Template(_, s)
            | Expr::Tuple(_, s)
            | Expr::Object(_, s)
            | Expr::Var(_, s)
            | Expr::Call { span: s, .. }
            | Expr::Traversal { span: s, .. }
            | Expr::Cond { span: s, .. }
            | Expr::Unary { span: s, .. }
            | Expr::Binary { span: s, .. } => *s,
            Expr::For(f) => f.span,
        }
    }

    /// Calls `f` for every variable root referenced by this expression, with
    /// the steps that follow it (used to find dependencies). Names bound by
    /// `for` expressions inside are still reported; callers filter them.
    pub fn walk_vars<'a>(&'a self, f: &mut dyn FnMut(&'a str, &'a [Step], Span)) {
        match self {
            Expr::Literal(..) => {}
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
            Expr::Call { args, .. } => args.iter().for_each(|e| e.walk_vars(f)),
            Expr::Traversal { root, steps, .. } => {
                if let Expr::Var(name, span) = &**root {
                    f(name, steps, *span);
                } else {
                    root.walk_vars(f);
                }
                for s in steps {
                    if let Step::Index(e, _) = s {
                        e.walk_vars(f);
                    }
                }
            }
            Expr::Cond {
                cond,
                then,
                otherwise,
                ..
            } => {
                cond.walk_vars(f);
                then.walk_vars(f);
                otherwise.walk_vars(f);
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
            Expr::Literal(..) | Expr::Var(..) => {}
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
            Expr::Call {
                name, args, span, ..
            } => {
                f(name, *span);
                args.iter().for_each(|e| e.walk_calls(f));
            }
            Expr::Traversal { root, steps, .. } => {
                root.walk_calls(f);
                for s in steps {
                    if let Step::Index(e, _) = s {
                        e.walk_calls(f);
                    }
                }
            }
            Expr::Cond {
                cond,
                then,
                otherwise,
                ..
            } => {
                cond.walk_calls(f);
                then.walk_calls(f);
                otherwise.walk_calls(f);
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
            TPart::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                cond.walk_vars(f);
                walk_parts(then, f);
                walk_parts(otherwise, f);
            }
            TPart::For { coll, body, .. } => {
                coll.walk_vars(f);
                walk_parts(body, f);
            }
        }
    }
}

fn walk_parts_calls<'a>(parts: &'a [TPart], f: &mut dyn FnMut(&'a str, Span)) {
    for p in parts {
        match p {
            TPart::Lit(_) => {}
            TPart::Interp(e) => e.walk_calls(f),
            TPart::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                cond.walk_calls(f);
                walk_parts_calls(then, f);
                walk_parts_calls(otherwise, f);
            }
            TPart::For { coll, body, .. } => {
                coll.walk_calls(f);
                walk_parts_calls(body, f);
            }
        }
    }
}

/// An attribute `name = expr`.
#[derive(Clone, Debug)]
pub struct Attribute {
    pub name: String,
    pub name_span: Span,
    pub expr: Expr,
}

/// A block `kind "label" { ... }`.
#[derive(Clone, Debug)]
pub struct Block {
    pub kind: String,
    pub labels: Vec<(String, Span)>,
    pub body: Body,
    /// The block header (type and labels), for diagnostics.
    pub span: Span,
}

/// A body: attributes and nested blocks in source order.
#[derive(Clone, Debug, Default)]
pub struct Body {
    pub attrs: Vec<Attribute>,
    pub blocks: Vec<Block>,
    /// Where the body is (for "missing attribute" diagnostics).
    pub span: Span,
}

impl Body {
    pub fn attr(&self, name: &str) -> Option<&Attribute> {
        self.attrs.iter().find(|a| a.name == name)
    }
}
