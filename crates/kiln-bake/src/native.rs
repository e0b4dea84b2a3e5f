//! The former HCL native syntax front end, kept as the baseline that
//! [`crate::syntax`] is measured and tested against: parses with `hcl-edit`
//! (which keeps byte spans) and lowers its tree into [`crate::ast`].
//!
//! Owns: nothing new. Must never: be used outside the benchmark and the
//! differential test (through [`crate::baseline`]).

use hcl_edit::Span as _;
use hcl_edit::expr::{self as he, Expression as E};
use hcl_edit::structure as hs;
use hcl_edit::template::{self as ht, Element, Strip};

use crate::ast::*;
use crate::diag::{Diag, Diags};
use crate::syntax::unterminated_string;

/// Parses a whole file body.
pub fn parse_body(text: &str, file: u32) -> Result<Body, Diags> {
    let body = hcl_edit::parser::parse_body(text).map_err(|e| {
        let d = parse_error(&e, text, file, 0);
        // A quoted string left open runs into the following lines, and the
        // parser only notices lines later; point at the string instead.
        match (unterminated_string(text), d.0.first().and_then(|d| d.span)) {
            (Some(start), Some(at)) if start <= at.start as usize => Diags::at(
                Span::new(file, start, start + 1),
                "Unterminated string",
                "This quoted string has no closing `\"` on its line, and quoted strings cannot span lines. \
                 Close it with `\"` on the same line; for text over several lines, write `\\n` or use a heredoc (`<<EOT` ... `EOT`).",
            ),
            _ => d,
        }
    })?;
    let mut lw = Lower { file, base: 0 };
    Ok(lw.body(&body, Span::new(file, 0, text.len())))
}

/// Parses a template (the contents of a JSON string), whose text starts at byte
/// `base` of file `file`.
pub fn parse_template(text: &str, file: u32, base: usize) -> Result<Expr, Diags> {
    let t =
        hcl_edit::parser::parse_template(text).map_err(|e| parse_error(&e, text, file, base))?;
    let mut lw = Lower { file, base };
    let span = Span::new(file, base, base + text.len());
    let parts = lw.template(&t);
    Ok(Expr::Template(parts.into_boxed_slice(), span))
}

/// Parses a standalone expression (a JSON syntax `type` or a `--set` value).
pub fn parse_expr(text: &str, file: u32, base: usize) -> Result<Expr, Diags> {
    let e = hcl_edit::parser::parse_expr(text).map_err(|e| parse_error(&e, text, file, base))?;
    let mut lw = Lower { file, base };
    Ok(lw.expr(&e))
}

fn parse_error(e: &hcl_edit::parser::Error, text: &str, file: u32, base: usize) -> Diags {
    let loc = e.location();
    // Translate the 1-based line/column back to a byte offset.
    let mut offset = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i + 1 == loc.line() {
            offset += line
                .char_indices()
                .nth(loc.column().saturating_sub(1))
                .map(|(b, _)| b)
                .unwrap_or(line.len());
            break;
        }
        offset += line.len();
    }
    let offset = offset.min(text.len());
    let end = (offset + 1).min(text.len()).max(offset);
    Diags::one(Diag::at(
        Span::new(file, base + offset, base + end),
        "Invalid HCL syntax",
        e.message().to_string(),
    ))
}

struct Lower {
    file: u32,
    base: usize,
}

impl Lower {
    fn span(&self, r: Option<std::ops::Range<usize>>) -> Span {
        let r = r.unwrap_or(0..0);
        Span::new(self.file, self.base + r.start, self.base + r.end)
    }

    fn body(&mut self, body: &hs::Body, span: Span) -> Body {
        let mut attrs = Vec::new();
        let mut blocks = Vec::new();
        for s in body.iter() {
            match s {
                hs::Structure::Attribute(a) => attrs.push(Attribute {
                    name: a.key.as_str().into(),
                    name_span: self.span(a.key.span()),
                    expr: self.expr(&a.value),
                }),
                hs::Structure::Block(b) => {
                    let labels = b
                        .labels
                        .iter()
                        .map(|l| (l.as_str().to_string(), self.span(l.span())))
                        .collect::<Vec<_>>();
                    let head_start = b.ident.span().map(|r| r.start).unwrap_or(0);
                    let head_end = labels
                        .last()
                        .map(|(_, s)| s.end as usize - self.base)
                        .or(b.ident.span().map(|r| r.end))
                        .unwrap_or(head_start);
                    let bspan = self.span(b.body.span().or(b.span()));
                    blocks.push(Block {
                        kind: b.ident.as_str().into(),
                        labels: labels.into_boxed_slice(),
                        body: self.body(&b.body, bspan),
                        span: self.span(Some(head_start..head_end)),
                    });
                }
            }
        }
        Body {
            attrs: attrs.into_boxed_slice(),
            blocks: blocks.into_boxed_slice(),
            span,
        }
    }

    fn expr(&mut self, e: &E) -> Expr {
        let span = self.span(e.span());
        match e {
            E::Null(_) => Expr::Null(span),
            E::Bool(b) => Expr::Bool(*b.value(), span),
            E::Number(n) => Expr::Number(n.value().as_f64().unwrap_or(f64::MAX), span),
            E::String(s) => Expr::Str(s.value().as_str().into(), span),
            E::Array(a) => Expr::Tuple(a.iter().map(|x| self.expr(x)).collect(), span),
            E::Object(o) => {
                let mut items = Vec::new();
                for (k, v) in o.iter() {
                    let key = match k {
                        he::ObjectKey::Ident(id) => {
                            ObjKey::Ident(id.as_str().into(), self.span(id.span()))
                        }
                        he::ObjectKey::Expression(x) => ObjKey::Expr(self.expr(x)),
                    };
                    items.push((key, self.expr(v.expr())));
                }
                Expr::Object(items.into_boxed_slice(), span)
            }
            E::StringTemplate(t) => Expr::Template(self.template(t).into_boxed_slice(), span),
            E::HeredocTemplate(h) => {
                Expr::Template(self.template(&h.template).into_boxed_slice(), span)
            }
            E::Parenthesis(p) => {
                let inner = self.expr(p.inner());
                // Keep the parenthesised span for messages.
                match inner {
                    Expr::Var(n, _) => Expr::Var(n, span),
                    other => other,
                }
            }
            E::Variable(v) => Expr::Var(v.as_str().into(), span),
            E::Conditional(c) => Expr::Cond(
                Box::new(Cond {
                    cond: self.expr(&c.cond_expr),
                    then: self.expr(&c.true_expr),
                    otherwise: self.expr(&c.false_expr),
                }),
                span,
            ),
            E::FuncCall(f) => {
                let mut name = String::new();
                for ns in &f.name.namespace {
                    name.push_str(ns.as_str());
                    name.push_str("::");
                }
                name.push_str(f.name.name.as_str());
                Expr::Call(
                    Box::new(Call {
                        name: name.into(),
                        args: f.args.iter().map(|a| self.expr(a)).collect(),
                        expand_final: f.args.expand_final(),
                    }),
                    span,
                )
            }
            E::Traversal(t) => {
                let root = self.expr(&t.expr);
                let steps = t
                    .operators
                    .iter()
                    .map(|op| {
                        let sp = self.span(op.span());
                        match op.value() {
                            he::TraversalOperator::AttrSplat(_) => Step::AttrSplat(sp),
                            he::TraversalOperator::FullSplat(_) => Step::FullSplat(sp),
                            he::TraversalOperator::GetAttr(id) => {
                                Step::Attr(id.as_str().into(), sp)
                            }
                            he::TraversalOperator::Index(x) => Step::Index(self.expr(x), sp),
                            he::TraversalOperator::LegacyIndex(n) => {
                                Step::Index(Expr::Number(*n.value() as f64, sp), sp)
                            }
                        }
                    })
                    .collect();
                Expr::Traversal(Box::new(Traversal { root, steps }), span)
            }
            E::UnaryOp(u) => Expr::Unary {
                op: match u.operator.value() {
                    he::UnaryOperator::Neg => UnaryOp::Neg,
                    he::UnaryOperator::Not => UnaryOp::Not,
                },
                expr: Box::new(self.expr(&u.expr)),
                span,
            },
            E::BinaryOp(b) => {
                use he::BinaryOperator as B;
                let op = match b.operator.value() {
                    B::Eq => BinOp::Eq,
                    B::NotEq => BinOp::NotEq,
                    B::LessEq => BinOp::LtEq,
                    B::GreaterEq => BinOp::GtEq,
                    B::Less => BinOp::Lt,
                    B::Greater => BinOp::Gt,
                    B::Plus => BinOp::Add,
                    B::Minus => BinOp::Sub,
                    B::Mul => BinOp::Mul,
                    B::Div => BinOp::Div,
                    B::Mod => BinOp::Mod,
                    B::And => BinOp::And,
                    B::Or => BinOp::Or,
                };
                Expr::Binary {
                    op,
                    lhs: Box::new(self.expr(&b.lhs_expr)),
                    rhs: Box::new(self.expr(&b.rhs_expr)),
                    span,
                }
            }
            E::ForExpr(f) => Expr::For(Box::new(ForExpr {
                key_var: f.intro.key_var.as_ref().map(|k| k.as_str().into()),
                val_var: f.intro.value_var.as_str().into(),
                coll: self.expr(&f.intro.collection_expr),
                key_expr: f.key_expr.as_ref().map(|k| self.expr(k)),
                val_expr: self.expr(&f.value_expr),
                cond: f.cond.as_ref().map(|c| self.expr(&c.expr)),
                grouping: f.grouping,
                span,
            })),
        }
    }

    /// Lowers a template, applying `~` whitespace strip markers to the
    /// neighbouring literals.
    fn template(&mut self, t: &ht::Template) -> Vec<TPart> {
        // First lower every element, remembering the strip flags around it.
        let elems: Vec<&Element> = t.iter().collect();
        let mut parts: Vec<(TPart, bool, bool)> = Vec::with_capacity(elems.len());
        for el in elems {
            match el {
                Element::Literal(s) => {
                    parts.push((TPart::Lit(s.value().as_str().into()), false, false))
                }
                Element::Interpolation(i) => {
                    let (s, e) = strip_flags(i.strip);
                    parts.push((TPart::Interp(self.expr(&i.expr)), s, e));
                }
                Element::Directive(d) => match &**d {
                    ht::Directive::If(ifd) => {
                        let span = self.span(ifd.span());
                        let (s, _) = strip_flags(ifd.if_expr.strip);
                        let (_, e) = strip_flags(ifd.endif_expr.strip);
                        let mut then = self.template(&ifd.if_expr.template);
                        let mut otherwise = ifd
                            .else_expr
                            .as_ref()
                            .map(|x| self.template(&x.template))
                            .unwrap_or_default();
                        // Strip markers inside the directive apply to its inner templates.
                        let (_, if_end) = strip_flags(ifd.if_expr.strip);
                        if if_end {
                            strip_leading(&mut then);
                        }
                        if let Some(x) = &ifd.else_expr {
                            let (else_start, else_end) = strip_flags(x.strip);
                            if else_start {
                                strip_trailing(&mut then);
                            }
                            if else_end {
                                strip_leading(&mut otherwise);
                            }
                        }
                        let (endif_start, _) = strip_flags(ifd.endif_expr.strip);
                        if endif_start {
                            if ifd.else_expr.is_some() {
                                strip_trailing(&mut otherwise);
                            } else {
                                strip_trailing(&mut then);
                            }
                        }
                        parts.push((
                            TPart::If(Box::new(TIf {
                                cond: self.expr(&ifd.if_expr.cond_expr),
                                then: then.into_boxed_slice(),
                                otherwise: otherwise.into_boxed_slice(),
                                span,
                            })),
                            s,
                            e,
                        ));
                    }
                    ht::Directive::For(fd) => {
                        let span = self.span(fd.span());
                        let (s, for_end) = strip_flags(fd.for_expr.strip);
                        let (endfor_start, e) = strip_flags(fd.endfor_expr.strip);
                        let mut body = self.template(&fd.for_expr.template);
                        if for_end {
                            strip_leading(&mut body);
                        }
                        if endfor_start {
                            strip_trailing(&mut body);
                        }
                        parts.push((
                            TPart::For(Box::new(TFor {
                                key_var: fd.for_expr.key_var.as_ref().map(|k| k.as_str().into()),
                                val_var: fd.for_expr.value_var.as_str().into(),
                                coll: self.expr(&fd.for_expr.collection_expr),
                                body: body.into_boxed_slice(),
                                span,
                            })),
                            s,
                            e,
                        ));
                    }
                },
            }
        }
        // Apply strip flags to adjacent literals.
        for i in 0..parts.len() {
            let (strip_before, strip_after) = (parts[i].1, parts[i].2);
            if strip_before
                && i > 0
                && let TPart::Lit(s) = &mut parts[i - 1].0
            {
                *s = s.trim_end().into();
            }
            if strip_after
                && i + 1 < parts.len()
                && let TPart::Lit(s) = &mut parts[i + 1].0
            {
                *s = s.trim_start().into();
            }
        }
        parts.into_iter().map(|(p, _, _)| p).collect()
    }
}

fn strip_flags(s: Strip) -> (bool, bool) {
    (s.strip_start(), s.strip_end())
}

fn strip_leading(parts: &mut [TPart]) {
    if let Some(TPart::Lit(s)) = parts.first_mut() {
        *s = s.trim_start().into();
    }
}

fn strip_trailing(parts: &mut [TPart]) {
    if let Some(TPart::Lit(s)) = parts.last_mut() {
        *s = s.trim_end().into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> String {
        let mut srcs = crate::diag::Sources::default();
        let id = srcs.add(crate::diag::Source::new("t.hcl", src));
        crate::diag::render(&parse_body(src, id).unwrap_err(), &srcs)
    }

    #[test]
    fn unterminated_string_points_at_its_start() {
        let e = err("target \"a\" {\n  tags = [\"a]\n  platforms = [\"linux/amd64\"]\n}\n");
        assert!(e.starts_with("Unterminated string"), "{e}");
        assert!(e.contains("--> t.hcl:2:11"), "{e}");
        assert!(e.contains("2 |   tags = [\"a]"), "{e}");
        assert!(e.contains("heredoc"), "says how to fix it: {e}");
        // Strings inside interpolations, escapes, comments and heredocs are
        // followed; a string opened inside an interpolation is found too.
        let e = err(
            "# \"not a string\n/* \" */\nx = <<EOT\n\"\nEOT\ny = \"a\\\"${ \"}\" } \\\\\"\nz = \"${ upper(\"b) }\n\n",
        );
        assert!(e.contains("--> t.hcl:7:15"), "{e}");
    }

    #[test]
    fn other_syntax_errors_are_unchanged() {
        let e = err("target \"a\" {\n  tags = [\"a\" \"b\"]\n}\n");
        assert!(e.starts_with("Invalid HCL syntax"), "{e}");
        assert_eq!(unterminated_string("a = \"x\"\nb = \"${\n  c\n}\"\n"), None);
    }
}
