//! The recursive-descent parser behind [`super`].
//!
//! Every function mirrors one production of `hcl-edit`'s parser (named in
//! its doc), including how a failure travels: a [`Fail`] is either a
//! backtrack, which an enclosing choice, option or repetition catches (and
//! then rewinds the position as `hcl-edit`'s combinators do), or a cut,
//! which ends the parse. The position where a failure leaves the parser is
//! where the error is reported, so functions only rewind where the
//! production they mirror rewinds.

use std::collections::HashSet;

use crate::fxhash::FxHashSet;

use crate::ast::*;

/// `hcl-edit`'s limit on nested expressions, templates and blocks.
const MAX_NESTING_DEPTH: usize = 64;
/// `hcl-edit`'s limit on binary operators on any path through an expression.
const MAX_OPERATOR_DEPTH: usize = 128;

/// What an error says it expected (`hcl-edit`'s error contexts).
#[derive(Clone, Copy, Debug)]
pub(super) enum Ctx {
    Label(&'static str),
    Char(char),
    Str(&'static str),
    Desc(&'static str),
}

/// A failed production: a backtrack (another branch may still match) or a
/// cut (the input is wrong here).
#[derive(Debug)]
pub(super) struct Fail {
    cut: bool,
    ctx: Vec<Ctx>,
}

impl Fail {
    fn back() -> Fail {
        Fail {
            cut: false,
            ctx: Vec::new(),
        }
    }

    fn cut(ctx: &[Ctx]) -> Fail {
        Fail {
            cut: true,
            ctx: ctx.to_vec(),
        }
    }

    /// The message, worded as `hcl-edit` words it.
    pub(super) fn message(&self) -> String {
        let mut buf = String::new();
        if let Some(label) = self.ctx.iter().find_map(|c| match c {
            Ctx::Label(l) => Some(*l),
            _ => None,
        }) {
            buf.push_str("invalid ");
            buf.push_str(label);
            buf.push_str("; ");
        }
        let expected: Vec<String> = self
            .ctx
            .iter()
            .filter_map(|c| match c {
                Ctx::Label(_) => None,
                Ctx::Char('\n') => Some("newline".to_string()),
                Ctx::Char(c) => Some(format!("`{c}`")),
                Ctx::Str(s) => Some(format!("`{s}`")),
                Ctx::Desc(d) => Some((*d).to_string()),
            })
            .collect();
        if expected.is_empty() {
            buf.push_str("unexpected token");
        } else {
            buf.push_str("expected ");
            let n = expected.len();
            for (i, e) in expected.iter().enumerate() {
                if n > 1 && i == n - 1 {
                    buf.push_str(" or ");
                } else if i > 0 {
                    buf.push_str(", ");
                }
                buf.push_str(e);
            }
        }
        buf
    }
}

type R<T> = Result<T, Fail>;

/// Catches a backtrack (for choices, options and repetitions); passes a cut on.
fn opt<T>(r: R<T>) -> R<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(f) if !f.cut => Ok(None),
        Err(f) => Err(f),
    }
}

fn is_id_start(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphabetic() || c == '_'
    } else {
        unicode_ident::is_xid_start(c)
    }
}

fn is_id_continue(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || c == '_' || c == '-'
    } else {
        unicode_ident::is_xid_continue(c)
    }
}

/// Which literal text a template holds.
#[derive(Clone, Copy)]
enum Lit<'a> {
    /// A quoted string: ends at `"`, knows backslash escapes.
    Quoted,
    /// A bare template (a JSON string, a directive's body): ends only at
    /// `${` and `%{`.
    Raw,
    /// A heredoc's body: also ends at a line holding the delimiter.
    Heredoc(&'a str),
}

/// A template part with the strip markers (`~`) on its two sides.
type Part = (TPart, bool, bool);

/// The names bound in one body, to refuse a second attribute of one name.
#[derive(Default)]
struct Keys<'a> {
    few: Vec<&'a str>,
    many: HashSet<&'a str>,
}

impl<'a> Keys<'a> {
    /// Whether `k` was already there (it is added either way).
    fn redefined(&mut self, k: &'a str) -> bool {
        if self.few.len() < 16 {
            if self.few.contains(&k) {
                return true;
            }
            self.few.push(k);
            false
        } else {
            if self.many.is_empty() {
                self.many.extend(self.few.iter().copied());
            }
            !self.many.insert(k)
        }
    }
}

pub(super) struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    file: u32,
    base: usize,
    depth: usize,
    /// Binary operators on the deepest path parsed in the current scope.
    opd: usize,
    /// The names met so far, shared by every use.
    names: Names,
}

impl<'a> Parser<'a> {
    pub(super) fn new(s: &'a str, file: u32, base: usize) -> Parser<'a> {
        Parser {
            s,
            b: s.as_bytes(),
            pos: 0,
            file,
            base,
            depth: 0,
            opd: 0,
            names: Names::default(),
        }
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// The whole input was consumed (`hcl-edit` reports "unexpected token"
    /// where it stopped otherwise).
    pub(super) fn expect_end(&mut self) -> R<()> {
        if self.pos == self.b.len() {
            Ok(())
        } else {
            Err(Fail::back())
        }
    }

    // ---- primitives -------------------------------------------------------

    fn sp_(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, self.base + start, self.base + end)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn peek_at(&self, i: usize) -> Option<u8> {
        self.b.get(self.pos + i).copied()
    }

    fn peek_char(&self) -> Option<char> {
        match self.b.get(self.pos) {
            Some(&c) if c.is_ascii() => Some(c as char),
            None => None,
            Some(_) => self.s.get(self.pos..).and_then(|r| r.chars().next()),
        }
    }

    fn starts(&self, lit: &str) -> bool {
        self.b
            .get(self.pos..)
            .is_some_and(|r| r.starts_with(lit.as_bytes()))
    }

    /// Whether two characters remain (`hcl-edit` peeks two before choosing
    /// between a traversal, an operator, a call and nothing).
    fn two(&self) -> bool {
        self.pos + 2 <= self.b.len()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn cut_char(&mut self, c: u8) -> R<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(Fail::cut(&[Ctx::Char(c as char)]))
        }
    }

    fn cut_tag(&mut self, t: &'static str) -> R<()> {
        if self.starts(t) {
            self.pos += t.len();
            Ok(())
        } else {
            Err(Fail::cut(&[Ctx::Str(t)]))
        }
    }

    fn line_ending(&mut self) -> bool {
        if self.eat(b'\n') {
            true
        } else if self.starts("\r\n") {
            self.pos += 2;
            true
        } else {
            false
        }
    }

    /// An identifier's byte range; does not move on failure.
    fn ident(&mut self) -> Option<(usize, usize)> {
        let start = self.pos;
        let b = self.b;
        // ASCII names (nearly all) without decoding characters.
        match b.get(start) {
            Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
            Some(c) if c.is_ascii() => return None,
            None => return None,
            Some(_) => return self.ident_unicode(),
        }
        let mut end = start + 1;
        while let Some(&c) = b.get(end) {
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' {
                end += 1;
            } else if c.is_ascii() {
                break;
            } else {
                // A non-ASCII character: finish the general way.
                self.pos = end;
                let rest = self.ident_rest(end);
                self.pos = rest;
                return Some((start, rest));
            }
        }
        self.pos = end;
        Some((start, end))
    }

    fn ident_unicode(&mut self) -> Option<(usize, usize)> {
        let start = self.pos;
        let c = self.s.get(start..)?.chars().next()?;
        if !is_id_start(c) {
            return None;
        }
        let end = self.ident_rest(start + c.len_utf8());
        self.pos = end;
        Some((start, end))
    }

    /// The end of the identifier characters from `from` on.
    fn ident_rest(&self, from: usize) -> usize {
        let mut end = from;
        for c in self.s[from..].chars() {
            if !is_id_continue(c) {
                break;
            }
            end += c.len_utf8();
        }
        end
    }

    fn cut_ident(&mut self) -> R<(usize, usize)> {
        self.ident()
            .ok_or_else(|| Fail::cut(&[Ctx::Desc("identifier")]))
    }

    fn text(&self, r: (usize, usize)) -> &'a str {
        &self.s[r.0..r.1]
    }

    /// The identifier at `r` as a shared name.
    fn name(&mut self, r: (usize, usize)) -> Name {
        let t = self.text(r);
        self.names.get(t)
    }

    // ---- trivia -----------------------------------------------------------

    fn space0(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn multispace0(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.pos += 1;
        }
    }

    /// `/* ... */`; does not move on failure.
    fn inline_comment(&mut self) -> bool {
        if !self.starts("/*") {
            return false;
        }
        match self.s[self.pos + 2..].find("*/") {
            Some(i) => {
                self.pos += 2 + i + 2;
                true
            }
            None => false,
        }
    }

    /// winnow's `till_line_ending`: stops before `\n` or `\r\n`; a lone `\r`
    /// fails (where it stands).
    fn till_line_ending(&mut self) -> bool {
        let rest = &self.b[self.pos..];
        match rest.iter().position(|&c| c == b'\n' || c == b'\r') {
            None => {
                self.pos = self.b.len();
                true
            }
            Some(i) => {
                self.pos += i;
                self.b[self.pos] == b'\n' || self.peek_at(1) == Some(b'\n')
            }
        }
    }

    /// `#...` or `//...` (without the line ending); may move on failure.
    fn line_comment(&mut self) -> bool {
        match self.peek() {
            Some(b'#') => {
                self.pos += 1;
                self.till_line_ending()
            }
            Some(b'/') if self.starts("//") => {
                self.pos += 2;
                self.till_line_ending()
            }
            _ => false,
        }
    }

    /// `sp`: blanks and inline comments on one line.
    fn sp(&mut self) {
        self.space0();
        while self.inline_comment() {
            self.space0();
        }
    }

    /// `ws`: blanks, newlines and comments.
    fn ws(&mut self) {
        self.multispace0();
        loop {
            let cp = self.pos;
            let ok = match self.peek() {
                Some(b'#') => self.line_comment(),
                Some(b'/') => {
                    if self.starts("//") {
                        self.line_comment()
                    } else {
                        self.inline_comment()
                    }
                }
                _ => false,
            };
            if !ok {
                self.pos = cp;
                return;
            }
            self.multispace0();
        }
    }

    fn ws_or_sp(&mut self, nl: bool) {
        if nl { self.ws() } else { self.sp() }
    }

    /// Enters one nesting level with its own operator-depth scope
    /// (`hcl-edit`'s `nested`); returns the enclosing scope's depth.
    fn enter(&mut self) -> R<usize> {
        if self.depth >= MAX_NESTING_DEPTH {
            return Err(Fail::cut(&[
                Ctx::Label("nesting depth"),
                Ctx::Desc("at most 64 nested levels"),
            ]));
        }
        self.depth += 1;
        Ok(std::mem::replace(&mut self.opd, 0))
    }

    fn leave(&mut self, saved: usize) {
        self.depth -= 1;
        self.opd = saved.max(self.opd);
    }

    // ---- structure --------------------------------------------------------

    /// `body`: structures, one a line, then trailing blanks. The span is
    /// left to the caller.
    pub(super) fn body(&mut self) -> R<Body> {
        let mut out = (Vec::new(), Vec::new());
        let mut keys = Keys::default();
        loop {
            let cp = self.pos;
            self.ws();
            match self.structure(&mut out, &mut keys) {
                Ok(()) => {}
                Err(f) if !f.cut => {
                    self.pos = cp;
                    break;
                }
                Err(f) => return Err(f),
            }
            self.sp();
            let c = self.pos;
            if !self.line_comment() {
                self.pos = c;
            }
            if !self.line_ending() && self.pos != self.b.len() {
                return Err(Fail::cut(&[Ctx::Desc("newline"), Ctx::Desc("eof")]));
            }
        }
        self.ws();
        // The tree lives through evaluation: no spare capacity in it.
        Ok(Body {
            attrs: out.0.into_boxed_slice(),
            blocks: out.1.into_boxed_slice(),
            span: Span::default(),
        })
    }

    /// One attribute or block, added to `out` (attributes, blocks).
    fn structure(&mut self, out: &mut (Vec<Attribute>, Vec<Block>), keys: &mut Keys<'a>) -> R<()> {
        let start = self.pos;
        let Some(id) = self.ident() else {
            return Err(Fail::back());
        };
        let name = self.text(id);
        self.sp();
        let Some(c) = self.peek_char() else {
            return Err(Fail::back());
        };
        match c {
            '=' => {
                if keys.redefined(name) {
                    self.pos = start;
                    return Err(Fail::cut(&[
                        Ctx::Label("attribute"),
                        Ctx::Desc("unique attribute key; found redefined attribute"),
                    ]));
                }
                let expr = self.attribute_expr()?;
                out.0.push(Attribute {
                    name: self.name(id),
                    name_span: self.sp_(id.0, id.1),
                    expr,
                });
            }
            '{' => {
                let block = self.block(start, id, Vec::new())?;
                out.1.push(block);
            }
            c if c == '"' || is_id_start(c) => {
                let labels = self.block_labels()?;
                let block = self.block(start, id, labels)?;
                out.1.push(block);
            }
            _ => {
                return Err(Fail::cut(&[
                    Ctx::Label("structure"),
                    Ctx::Char('{'),
                    Ctx::Char('='),
                    Ctx::Char('"'),
                    Ctx::Desc("identifier"),
                ]));
            }
        }
        Ok(())
    }

    /// `= expr` after an attribute's name.
    fn attribute_expr(&mut self) -> R<Expr> {
        if !self.eat(b'=') {
            return Err(Fail::cut(&[Ctx::Char('='), Ctx::Label("attribute")]));
        }
        self.sp();
        self.root_expr()
    }

    fn block_labels(&mut self) -> R<Vec<(String, Span)>> {
        let mut labels = Vec::new();
        loop {
            let cp = self.pos;
            let s = self.pos;
            let label = match opt(self.quoted_string())? {
                Some(v) => Some(v),
                None => {
                    self.pos = s;
                    self.ident().map(|r| self.text(r).to_string())
                }
            };
            match label {
                Some(l) => {
                    labels.push((l, self.sp_(s, self.pos)));
                    self.sp();
                }
                None => {
                    self.pos = cp;
                    return Ok(labels);
                }
            }
        }
    }

    fn block(&mut self, start: usize, id: (usize, usize), labels: Vec<(String, Span)>) -> R<Block> {
        let saved = self.enter()?;
        let r = self.block_body();
        self.leave(saved);
        let (mut body, body_span) = r?;
        let head_end = labels
            .last()
            .map(|(_, s)| s.end as usize - self.base)
            .unwrap_or(id.1);
        body.span = match body_span {
            Some((a, b)) => self.sp_(a, b),
            // A one-line block's body has no span of its own: the block's.
            None => self.sp_(start, self.pos),
        };
        Ok(Block {
            kind: self.name(id),
            labels: labels.into_boxed_slice(),
            body,
            span: self.sp_(id.0, head_end),
        })
    }

    /// `{ ... }`: a body over several lines, or at most one attribute on one.
    fn block_body(&mut self) -> R<(Body, Option<(usize, usize)>)> {
        self.cut_char(b'{')?;
        let after = self.pos;
        self.sp();
        let c = self.pos;
        if !self.line_comment() {
            self.pos = c;
        }
        let le = self.pos;
        let (body, span) = if self.line_ending() {
            let body = self.body()?;
            (body, Some((le, self.pos)))
        } else {
            self.pos = after;
            let cp = self.pos;
            self.sp();
            let mut body = Body::default();
            match opt(self.oneline_attribute())? {
                Some(a) => {
                    body.attrs = Box::new([a]);
                    self.sp();
                }
                None => self.pos = cp,
            }
            self.sp();
            (body, None)
        };
        if !self.eat(b'}') {
            return Err(Fail::cut(&[
                Ctx::Char('}'),
                Ctx::Label("block body"),
                Ctx::Char('\n'),
                Ctx::Desc("identifier"),
            ]));
        }
        Ok((body, span))
    }

    fn oneline_attribute(&mut self) -> R<Attribute> {
        let id = self.ident().ok_or_else(Fail::back)?;
        self.sp();
        let expr = self.attribute_expr()?;
        Ok(Attribute {
            name: self.name(id),
            name_span: self.sp_(id.0, id.1),
            expr,
        })
    }

    // ---- expressions ------------------------------------------------------

    /// An expression that is not nested in another (an attribute's value):
    /// it does not count towards the nesting depth.
    pub(super) fn root_expr(&mut self) -> R<Expr> {
        let saved = std::mem::replace(&mut self.opd, 0);
        let mut nl = false;
        let r = self.expr_inner(&mut nl);
        self.opd = saved.max(self.opd);
        r
    }

    /// `expr_with_state`: a nested expression that starts with the
    /// enclosing one's newline mode (`expr` is `false`, `multiline_expr`
    /// is `true`).
    fn nested_expr(&mut self, nl: bool) -> R<Expr> {
        let saved = self.enter()?;
        let mut nl = nl;
        let r = self.expr_inner(&mut nl);
        self.leave(saved);
        r
    }

    /// A term, then any binary operators and a conditional. `nl` says
    /// whether newlines may separate the pieces; a term that opens a
    /// bracket (a tuple, a call, an object `for`) turns it on for the rest
    /// of the expression, as in `hcl-edit`.
    fn expr_inner(&mut self, nl: &mut bool) -> R<Expr> {
        let start = self.pos;
        let mut e = self.term(nl)?;
        loop {
            let cp = self.pos;
            self.ws_or_sp(*nl);
            if !self.two() {
                self.pos = cp;
                return Ok(e);
            }
            let (c0, c1) = (self.b[self.pos], self.b[self.pos + 1]);
            if c0 == b'?' {
                self.pos += 1;
                self.ws_or_sp(*nl);
                let then = self.nested_expr(*nl)?;
                self.ws_or_sp(*nl);
                self.cut_char(b':')?;
                self.ws_or_sp(*nl);
                let otherwise = self.nested_expr(*nl)?;
                return Ok(Expr::Cond(
                    Box::new(Cond {
                        cond: e,
                        then,
                        otherwise,
                    }),
                    self.sp_(start, self.pos),
                ));
            }
            let comment = c0 == b'/' && (c1 == b'/' || c1 == b'*');
            let op = (c0 == b'=' && c1 == b'=')
                || matches!(
                    c0,
                    b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|'
                );
            if comment || !op {
                self.pos = cp;
                return Ok(e);
            }
            self.pos = cp;
            e = self.binary_ops(nl, e, start, cp)?;
        }
    }

    /// A chain of binary operators after `lhs` (which spans
    /// `start..lhs_end`), grouped by precedence, left to right.
    fn binary_ops(&mut self, nl: &mut bool, lhs: Expr, start: usize, lhs_end: usize) -> R<Expr> {
        let mut ops: Vec<(BinOp, Expr, usize, usize)> = Vec::new();
        loop {
            let cp = self.pos;
            match self.binary_op(*nl, ops.len() + 1) {
                Ok(op) => ops.push(op),
                Err(f) if !f.cut && !ops.is_empty() => {
                    self.pos = cp;
                    break;
                }
                Err(f) => return Err(f),
            }
        }
        self.opd += ops.len();
        let mut it = ops.into_iter().peekable();
        let (mut e, _, _) = self.climb((lhs, start, lhs_end), 0, &mut it);
        if let Expr::Binary { span, .. } = &mut e {
            *span = self.sp_(start, self.pos);
        }
        Ok(e)
    }

    /// Groups a chain of operators by precedence, left to right
    /// (precedence climbing; recursion only per precedence level).
    fn climb(
        &self,
        mut lhs: (Expr, usize, usize),
        min: u8,
        it: &mut std::iter::Peekable<std::vec::IntoIter<(BinOp, Expr, usize, usize)>>,
    ) -> (Expr, usize, usize) {
        while let Some(&(op, ..)) = it.peek() {
            if precedence(op) < min {
                break;
            }
            let Some((op, rhs, rs, re)) = it.next() else {
                break;
            };
            let mut rhs = (rhs, rs, re);
            while let Some(&(next, ..)) = it.peek() {
                if precedence(next) <= precedence(op) {
                    break;
                }
                rhs = self.climb(rhs, precedence(op) + 1, it);
            }
            let (l, ls, _) = lhs;
            let (r, _, re) = rhs;
            lhs = (
                Expr::Binary {
                    op,
                    lhs: Box::new(l),
                    rhs: Box::new(r),
                    span: self.sp_(ls, re),
                },
                ls,
                re,
            );
        }
        lhs
    }

    fn binary_op(&mut self, nl: bool, nth: usize) -> R<(BinOp, Expr, usize, usize)> {
        self.ws_or_sp(nl);
        let op_start = self.pos;
        let op = self.binary_operator()?;
        self.ws_or_sp(nl);
        let rs = self.pos;
        let mut child = nl;
        let rhs = self.term(&mut child)?;
        let re = self.pos;
        if self.opd + nth > MAX_OPERATOR_DEPTH {
            self.pos = op_start;
            return Err(Fail::cut(&[
                Ctx::Label("binary operation"),
                Ctx::Desc("at most 128 chained binary operators"),
            ]));
        }
        Ok((op, rhs, rs, re))
    }

    fn binary_operator(&mut self) -> R<BinOp> {
        let c = self.peek_char().ok_or_else(Fail::back)?;
        self.pos += c.len_utf8();
        let next = self.peek();
        let (op, extra) = match c {
            '=' if next == Some(b'=') => (BinOp::Eq, 1),
            '!' if next == Some(b'=') => (BinOp::NotEq, 1),
            '<' if next == Some(b'=') => (BinOp::LtEq, 1),
            '<' => (BinOp::Lt, 0),
            '>' if next == Some(b'=') => (BinOp::GtEq, 1),
            '>' => (BinOp::Gt, 0),
            '+' => (BinOp::Add, 0),
            '-' => (BinOp::Sub, 0),
            '*' => (BinOp::Mul, 0),
            '/' if !matches!(next, Some(b'/' | b'*')) => (BinOp::Div, 0),
            '%' => (BinOp::Mod, 0),
            '&' if next == Some(b'&') => (BinOp::And, 1),
            '|' if next == Some(b'|') => (BinOp::Or, 1),
            _ => return Err(Fail::back()),
        };
        self.pos += extra;
        Ok(op)
    }

    /// An expression term and the traversal after it.
    fn term(&mut self, nl: &mut bool) -> R<Expr> {
        let start = self.pos;
        let c = self.peek_char().ok_or_else(Fail::back)?;
        let e = match c {
            '"' => self.stringlike()?,
            '[' => self.tuple(nl)?,
            '{' => self.object(nl)?,
            '0'..='9' => {
                let v = self.number()?;
                Expr::Number(v, self.sp_(start, self.pos))
            }
            '<' => self.heredoc()?,
            '-' => match opt(self.neg_number())? {
                Some(e) => e,
                None => {
                    self.pos = start;
                    self.unary(nl)?
                }
            },
            '!' => self.unary(nl)?,
            '(' => self.parenthesis()?,
            c if is_id_start(c) => self.identlike(nl)?,
            _ => {
                return Err(Fail::cut(&[
                    Ctx::Label("expression"),
                    Ctx::Char('"'),
                    Ctx::Char('['),
                    Ctx::Char('{'),
                    Ctx::Char('-'),
                    Ctx::Char('!'),
                    Ctx::Char('('),
                    Ctx::Char('_'),
                    Ctx::Char('<'),
                    Ctx::Desc("letter"),
                    Ctx::Desc("digit"),
                ]));
            }
        };
        let cp = self.pos;
        self.ws_or_sp(*nl);
        let traversal = self.two() && !self.starts("..") && matches!(self.b[self.pos], b'.' | b'[');
        if !traversal {
            self.pos = cp;
            return Ok(e);
        }
        let steps = self.traversal(*nl)?;
        Ok(Expr::Traversal(
            Box::new(Traversal {
                root: e,
                steps: steps.into_boxed_slice(),
            }),
            self.sp_(start, self.pos),
        ))
    }

    fn traversal(&mut self, nl: bool) -> R<Vec<Step>> {
        let mut steps = Vec::new();
        loop {
            let cp = self.pos;
            self.ws_or_sp(nl);
            let r = if self.starts("..") {
                Err(Fail::back())
            } else {
                self.traversal_operator()
            };
            match r {
                Ok(s) => steps.push(s),
                Err(f) if !f.cut && !steps.is_empty() => {
                    self.pos = cp;
                    return Ok(steps);
                }
                Err(f) => return Err(f),
            }
        }
    }

    fn traversal_operator(&mut self) -> R<Step> {
        let s = self.pos;
        let c = self.peek_char().ok_or_else(Fail::back)?;
        self.pos += c.len_utf8();
        match c {
            '.' => {
                self.ws();
                match self.peek_char() {
                    None => Err(Fail::back()),
                    Some('*') => {
                        self.pos += 1;
                        Ok(Step::AttrSplat(self.sp_(s, self.pos)))
                    }
                    Some('0'..='9') => {
                        let ds = self.pos;
                        let de = if self.b[ds] == b'0' {
                            ds + 1
                        } else {
                            ds + self.b[ds..]
                                .iter()
                                .take_while(|c| c.is_ascii_digit())
                                .count()
                        };
                        let n: u64 = self.s[ds..de].parse().map_err(|_| Fail::back())?;
                        self.pos = de;
                        let sp = self.sp_(s, self.pos);
                        Ok(Step::Index(Expr::Number(n as f64, sp), sp))
                    }
                    Some(c) if is_id_start(c) => {
                        let id = self.ident().ok_or_else(Fail::back)?;
                        Ok(Step::Attr(self.name(id), self.sp_(s, self.pos)))
                    }
                    Some(_) => Err(Fail::cut(&[
                        Ctx::Label("traversal operator"),
                        Ctx::Char('*'),
                        Ctx::Desc("identifier"),
                        Ctx::Desc("unsigned integer"),
                    ])),
                }
            }
            '[' => {
                self.ws();
                let step = match self.peek() {
                    None => return Err(Fail::back()),
                    Some(b'*') => {
                        self.pos += 1;
                        None
                    }
                    Some(_) => Some(self.nested_expr(true)?),
                };
                self.ws();
                self.cut_char(b']')?;
                let sp = self.sp_(s, self.pos);
                Ok(match step {
                    None => Step::FullSplat(sp),
                    Some(e) => Step::Index(e, sp),
                })
            }
            _ => Err(Fail::back()),
        }
    }

    /// A number (`hcl-edit`'s `number`): a float if it has a fraction or an
    /// exponent and is finite, else an integer.
    fn number(&mut self) -> R<f64> {
        let s = self.pos;
        let digits = |p: usize| {
            self.b[p..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count()
        };
        let d = digits(s);
        if d == 0 {
            return Err(Fail::back());
        }
        let d_end = s + d;
        // The exponent after `at`: Ok(None) when there is none; a cut when
        // `e` is not followed by digits.
        let exponent = |p: &mut Parser, at: usize| -> R<Option<usize>> {
            if !matches!(p.b.get(at), Some(b'e' | b'E')) {
                return Ok(None);
            }
            let mut q = at + 1;
            if matches!(p.b.get(q), Some(b'+' | b'-')) {
                q += 1;
            }
            let n = p.b[q..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                p.pos = q;
                return Err(Fail::cut(&[Ctx::Desc("digit")]));
            }
            Ok(Some(q + n))
        };
        let float_end = if self.b.get(d_end) == Some(&b'.')
            && self.b.get(d_end + 1).is_some_and(u8::is_ascii_digit)
        {
            let f_end = d_end + 1 + digits(d_end + 1);
            Some(exponent(self, f_end)?.unwrap_or(f_end))
        } else {
            exponent(self, d_end)?
        };
        if let Some(fe) = float_end
            && let Ok(v) = self.s[s..fe].parse::<f64>()
            && v.is_finite()
        {
            self.pos = fe;
            return Ok(v);
        }
        let text = &self.s[s..d_end];
        let v = match text.parse::<u64>() {
            Ok(n) => n as f64,
            Err(_) => match text.parse::<f64>() {
                Ok(v) if v.is_finite() => v,
                _ => {
                    self.pos = s;
                    return Err(Fail::back());
                }
            },
        };
        self.pos = d_end;
        Ok(v)
    }

    /// `-` and a number: one negative literal.
    fn neg_number(&mut self) -> R<Expr> {
        let start = self.pos;
        if !self.eat(b'-') {
            return Err(Fail::back());
        }
        self.sp();
        let v = self.number()?;
        // hcl-edit negates its integer form: -0 stays 0.
        let v = if v == 0.0 { 0.0 } else { -v };
        Ok(Expr::Number(v, self.sp_(start, self.pos)))
    }

    fn unary(&mut self, nl: &mut bool) -> R<Expr> {
        let start = self.pos;
        let op = match self.peek() {
            Some(b'-') => UnaryOp::Neg,
            Some(b'!') => UnaryOp::Not,
            _ => return Err(Fail::back()),
        };
        self.pos += 1;
        self.sp();
        let saved = self.enter()?;
        let mut child = *nl;
        let r = self.term(&mut child);
        self.leave(saved);
        Ok(Expr::Unary {
            op,
            expr: Box::new(r?),
            span: self.sp_(start, self.pos),
        })
    }

    fn parenthesis(&mut self) -> R<Expr> {
        let start = self.pos;
        self.cut_char(b'(')?;
        self.ws();
        let e = self.nested_expr(true)?;
        self.ws();
        self.cut_char(b')')?;
        // A parenthesised variable keeps the parentheses' span for messages.
        Ok(match e {
            Expr::Var(n, _) => Expr::Var(n, self.sp_(start, self.pos)),
            other => other,
        })
    }

    /// A variable, `null`/`true`/`false`, or a function call.
    fn identlike(&mut self, nl: &mut bool) -> R<Expr> {
        let start = self.pos;
        let id = self.ident().ok_or_else(Fail::back)?;
        let cp = self.pos;
        self.ws_or_sp(*nl);
        let call = self.two() && (self.starts("::") || self.b[self.pos] == b'(');
        if !call {
            self.pos = cp;
            let sp = self.sp_(start, cp);
            return Ok(match self.text(id) {
                "null" => Expr::Null(sp),
                "true" => Expr::Bool(true, sp),
                "false" => Expr::Bool(false, sp),
                _ => Expr::Var(self.name(id), sp),
            });
        }
        let mut name = self.text(id).to_string();
        while self.starts("::") {
            self.pos += 2;
            self.ws_or_sp(*nl);
            let part = self.cut_ident()?;
            self.ws_or_sp(*nl);
            name.push_str("::");
            name.push_str(self.text(part));
        }
        *nl = true;
        self.cut_char(b'(')?;
        let mut args = Vec::new();
        let mut expand_final = false;
        let cp = self.pos;
        match opt(self.func_arg())? {
            None => self.pos = cp,
            Some(a) => {
                args.push(a);
                loop {
                    let c = self.pos;
                    if !self.eat(b',') {
                        break;
                    }
                    match opt(self.func_arg())? {
                        Some(a) => args.push(a),
                        None => {
                            self.pos = c;
                            break;
                        }
                    }
                }
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'.') => {
                        self.pos += 1;
                        self.cut_tag("..")?;
                        expand_final = true;
                    }
                    _ => {}
                }
            }
        }
        self.ws();
        if !self.eat(b')') {
            return Err(Fail::cut(&[Ctx::Char(')'), Ctx::Desc("expression")]));
        }
        Ok(Expr::Call(
            Box::new(Call {
                name: self.names.get(&name),
                args: args.into_boxed_slice(),
                expand_final,
            }),
            self.sp_(start, self.pos),
        ))
    }

    fn func_arg(&mut self) -> R<Expr> {
        self.ws();
        if matches!(self.peek(), None | Some(b',' | b'.' | b')')) {
            return Err(Fail::back());
        }
        let e = self.nested_expr(true)?;
        self.ws();
        Ok(e)
    }

    /// `for` next (after blanks), followed by a blank or a comment.
    fn peek_for(&mut self) -> bool {
        let cp = self.pos;
        self.ws();
        let r = self.starts("for")
            && matches!(self.peek_at(3), Some(b' ' | b'\t' | b'#' | b'/' | b'\n'));
        self.pos = cp;
        r
    }

    fn tuple(&mut self, nl: &mut bool) -> R<Expr> {
        *nl = true;
        let start = self.pos;
        self.pos += 1;
        if self.peek_for() {
            let (key_var, val_var, coll) = self.for_intro()?;
            self.ws();
            let val_expr = self.nested_expr(*nl)?;
            self.ws();
            let cond = self.for_cond(*nl)?;
            self.cut_char(b']')?;
            return Ok(Expr::For(Box::new(ForExpr {
                key_var,
                val_var,
                coll,
                key_expr: None,
                val_expr,
                cond,
                grouping: false,
                span: self.sp_(start, self.pos),
            })));
        }
        let mut items = Vec::new();
        let c0 = self.pos;
        match opt(self.tuple_item(*nl))? {
            None => self.pos = c0,
            Some(e) => {
                items.push(e);
                loop {
                    let c = self.pos;
                    if !self.eat(b',') {
                        break;
                    }
                    match opt(self.tuple_item(*nl))? {
                        Some(e) => items.push(e),
                        None => {
                            self.pos = c;
                            break;
                        }
                    }
                }
            }
        }
        self.eat(b',');
        self.ws();
        self.cut_char(b']')?;
        Ok(Expr::Tuple(
            items.into_boxed_slice(),
            self.sp_(start, self.pos),
        ))
    }

    fn tuple_item(&mut self, nl: bool) -> R<Expr> {
        self.ws();
        if self.peek() == Some(b']') {
            return Err(Fail::back());
        }
        let e = self.nested_expr(nl)?;
        self.ws();
        Ok(e)
    }

    /// `for k, v in coll :` → (key variable, value variable, collection).
    fn for_intro(&mut self) -> R<(Option<Name>, Name, Expr)> {
        self.ws();
        if !self.starts("for") {
            return Err(Fail::back());
        }
        self.pos += 3;
        self.ws();
        let vars = self.for_vars_in()?;
        self.cut_char(b':')?;
        Ok(vars)
    }

    /// After `for` (of an expression or a `%{for}` directive): `k, v in
    /// coll` or `v in coll`, and the blanks after it → (key variable, value
    /// variable, collection).
    fn for_vars_in(&mut self) -> R<(Option<Name>, Name, Expr)> {
        let first = self.cut_ident()?;
        self.ws();
        let second = if self.eat(b',') {
            self.ws();
            let id = self.cut_ident()?;
            self.ws();
            Some(id)
        } else {
            None
        };
        self.cut_tag("in")?;
        self.ws();
        let coll = self.nested_expr(false)?;
        self.ws();
        let first = self.name(first);
        Ok(match second {
            Some(v) => (Some(first), self.name(v), coll),
            None => (None, first, coll),
        })
    }

    fn for_cond(&mut self, nl: bool) -> R<Option<Expr>> {
        let cp = self.pos;
        self.ws();
        if !self.starts("if") {
            self.pos = cp;
            return Ok(None);
        }
        self.pos += 2;
        self.ws();
        match opt(self.nested_expr(nl))? {
            Some(e) => {
                self.ws();
                Ok(Some(e))
            }
            None => {
                self.pos = cp;
                Ok(None)
            }
        }
    }

    fn object(&mut self, nl: &mut bool) -> R<Expr> {
        let start = self.pos;
        self.pos += 1;
        if self.peek_for() {
            *nl = true;
            let (key_var, val_var, coll) = self.for_intro()?;
            self.ws();
            let key_expr = self.nested_expr(false)?;
            self.ws();
            self.cut_tag("=>")?;
            self.ws();
            let val_expr = self.nested_expr(false)?;
            self.ws();
            let grouping = self.starts("...");
            if grouping {
                self.pos += 3;
                self.ws();
            }
            let cond = self.for_cond(*nl)?;
            self.cut_char(b'}')?;
            return Ok(Expr::For(Box::new(ForExpr {
                key_var,
                val_var,
                coll,
                key_expr: Some(key_expr),
                val_expr,
                cond,
                grouping,
                span: self.sp_(start, self.pos),
            })));
        }
        let mut items: Vec<(ObjKey, Expr)> = Vec::new();
        let mut signatures: Option<FxHashSet<String>> = None;
        loop {
            self.ws();
            match self.peek() {
                None => return Err(Fail::back()),
                Some(b'}') => break,
                Some(_) => {}
            }
            let cp = self.pos;
            let key = self.object_key()?;
            // Small objects compare keys pairwise; a large one switches to
            // a set of key signatures, so that it stays linear.
            let repeated = match &mut signatures {
                Some(set) => !set.insert(key_signature(&key, self)),
                None => {
                    let repeated = items.iter().any(|(k, _)| same_key(k, &key, self));
                    if !repeated && items.len() >= 32 {
                        let mut set: FxHashSet<String> =
                            items.iter().map(|(k, _)| key_signature(k, self)).collect();
                        set.insert(key_signature(&key, self));
                        signatures = Some(set);
                    }
                    repeated
                }
            };
            if repeated {
                self.pos = cp;
                return Err(Fail::cut(&[
                    Ctx::Label("object item"),
                    Ctx::Desc("unique object key; found redefined object key"),
                ]));
            }
            let value = self.object_value()?;
            items.push((key, value));
            match self.peek() {
                None => return Err(Fail::back()),
                Some(b'}') => break,
                Some(b'\r') => {
                    if !self.starts("\r\n") {
                        return Err(Fail::back());
                    }
                    self.pos += 2;
                }
                Some(b'\n' | b',') => self.pos += 1,
                Some(b'#' | b'/') => {
                    if !self.line_comment() || !self.line_ending() {
                        return Err(Fail::back());
                    }
                }
                Some(_) => {
                    return Err(Fail::cut(&[
                        Ctx::Label("object item"),
                        Ctx::Char('}'),
                        Ctx::Char(','),
                        Ctx::Char('\n'),
                    ]));
                }
            }
        }
        self.cut_char(b'}')?;
        Ok(Expr::Object(
            items.into_boxed_slice(),
            self.sp_(start, self.pos),
        ))
    }

    fn object_key(&mut self) -> R<ObjKey> {
        let e = self.nested_expr(false)?;
        self.sp();
        Ok(match e {
            // A bare name; a parenthesised one stays an expression.
            Expr::Var(n, sp) if self.b.get(sp.start as usize - self.base) != Some(&b'(') => {
                ObjKey::Ident(n, sp)
            }
            e => ObjKey::Expr(e),
        })
    }

    fn object_value(&mut self) -> R<Expr> {
        let c = self.peek_char().ok_or_else(Fail::back)?;
        self.pos += c.len_utf8();
        if c != '=' && c != ':' {
            return Err(Fail::cut(&[
                Ctx::Label("object value assignment"),
                Ctx::Char('='),
                Ctx::Char(':'),
            ]));
        }
        self.sp();
        let e = self.nested_expr(false)?;
        self.sp();
        Ok(e)
    }

    // ---- strings and templates --------------------------------------------

    /// A quoted string: a literal if it holds no interpolation or
    /// directive, else a template.
    fn stringlike(&mut self) -> R<Expr> {
        let start = self.pos;
        if let Some(s) = opt(self.quoted_string())? {
            return Ok(Expr::Str(s.into_boxed_str(), self.sp_(start, self.pos)));
        }
        self.pos = start;
        self.cut_free_char(b'"')?;
        let parts = self.elements(Lit::Quoted)?;
        if !self.eat(b'"') {
            return Err(Fail::back());
        }
        Ok(Expr::Template(finish(parts), self.sp_(start, self.pos)))
    }

    /// A character that must be there, else a backtrack.
    fn cut_free_char(&mut self, c: u8) -> R<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(Fail::back())
        }
    }

    /// `"..."` without interpolations or directives: its value.
    fn quoted_string(&mut self) -> R<String> {
        self.cut_free_char(b'"')?;
        let cp = self.pos;
        let s = match self.literal(Lit::Quoted)? {
            Some(s) => s,
            None => {
                self.pos = cp;
                String::new()
            }
        };
        self.cut_free_char(b'"')?;
        Ok(s)
    }

    /// Literal text up to the next interpolation, directive or end
    /// (`hcl-edit`'s `build_string`): `None` when there is none here.
    fn literal(&mut self, kind: Lit) -> R<Option<String>> {
        let mut out: Option<String> = None;
        loop {
            // An escaped `${` / `%{`.
            if self.starts("$${") || self.starts("%%{") {
                let m = if self.b[self.pos] == b'$' { "${" } else { "%{" };
                self.pos += 3;
                out.get_or_insert_with(String::new).push_str(m);
                continue;
            }
            let end = self.literal_end(kind);
            if end > self.pos {
                out.get_or_insert_with(String::new)
                    .push_str(&self.s[self.pos..end]);
                self.pos = end;
                continue;
            }
            if matches!(kind, Lit::Quoted) && self.peek() == Some(b'\\') {
                self.pos += 1;
                match self.escape()? {
                    Some(c) => {
                        out.get_or_insert_with(String::new).push(c);
                        continue;
                    }
                    // `\` at the very end: stops here, past the backslash.
                    None => return Ok(out),
                }
            }
            return Ok(out);
        }
    }

    /// Where plain literal text starting here ends.
    fn literal_end(&self, kind: Lit) -> usize {
        let b = self.b;
        let mut i = self.pos;
        while i < b.len() {
            match b[i] {
                b'$' | b'%' if b.get(i + 1) == Some(&b'{') => return i,
                // `$${`: an escaped marker, its own fragment.
                b'$' | b'%' if b.get(i + 1) == Some(&b[i]) && b.get(i + 2) == Some(&b'{') => {
                    return i;
                }
                b'"' | b'\\' if matches!(kind, Lit::Quoted) => return i,
                b'\n' | b'\r' => {
                    if let Lit::Heredoc(delim) = kind
                        && heredoc_end_at(self.s, i, delim)
                    {
                        return i;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        b.len()
    }

    /// The character after a backslash; `Ok(None)` at the end of the input.
    fn escape(&mut self) -> R<Option<char>> {
        let Some(c) = self.peek_char() else {
            return Ok(None);
        };
        self.pos += c.len_utf8();
        let ch = match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '\\' => '\\',
            '"' => '"',
            'u' => self.hex_escape(4, "unicode 4-digit hex code")?,
            'U' => self.hex_escape(8, "unicode 8-digit hex code")?,
            _ => {
                return Err(Fail::cut(&[
                    Ctx::Label("escape sequence"),
                    Ctx::Char('n'),
                    Ctx::Char('r'),
                    Ctx::Char('t'),
                    Ctx::Char('u'),
                    Ctx::Char('U'),
                    Ctx::Char('\\'),
                    Ctx::Char('"'),
                ]));
            }
        };
        Ok(Some(ch))
    }

    fn hex_escape(&mut self, n: usize, label: &'static str) -> R<char> {
        let hex = self.b[self.pos..]
            .iter()
            .take(n)
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
        let c = (hex == n)
            .then(|| u32::from_str_radix(&self.s[self.pos..self.pos + n], 16).ok())
            .flatten()
            .and_then(char::from_u32);
        match c {
            Some(c) => {
                self.pos += n;
                Ok(c)
            }
            None => Err(Fail::cut(&[Ctx::Label(label)])),
        }
    }

    /// Template elements until none follows (`hcl-edit`'s `elements`).
    fn elements(&mut self, kind: Lit) -> R<Vec<Part>> {
        let mut parts = Vec::new();
        loop {
            let cp = self.pos;
            if let Some(s) = self.literal(kind)? {
                parts.push((TPart::Lit(s.into_boxed_str()), false, false));
                continue;
            }
            self.pos = cp;
            match opt(self.interpolation())? {
                Some(p) => {
                    parts.push(p);
                    continue;
                }
                None => self.pos = cp,
            }
            match opt(self.directive())? {
                Some(p) => parts.push(p),
                None => {
                    self.pos = cp;
                    return Ok(parts);
                }
            }
        }
    }

    /// A whole template (a JSON string's contents).
    pub(super) fn template_root(&mut self) -> R<Box<[TPart]>> {
        Ok(finish(self.elements(Lit::Raw)?))
    }

    /// A directive's body: a nested template.
    fn inner_template(&mut self) -> R<Box<[TPart]>> {
        let saved = self.enter()?;
        let r = self.elements(Lit::Raw);
        self.leave(saved);
        Ok(finish(r?))
    }

    /// `${` or `%{` (with `~`), the inside, `~` and `}`: the strip markers.
    fn open(&mut self, intro: &str) -> R<bool> {
        if !self.starts(intro) {
            return Err(Fail::back());
        }
        self.pos += 2;
        Ok(self.eat(b'~'))
    }

    fn close(&mut self) -> R<bool> {
        let strip = self.eat(b'~');
        self.cut_char(b'}')?;
        Ok(strip)
    }

    fn interpolation(&mut self) -> R<Part> {
        let s = self.open("${")?;
        self.ws();
        let e = self.nested_expr(true)?;
        self.ws();
        let e_strip = self.close()?;
        Ok((TPart::Interp(e), s, e_strip))
    }

    fn keyword(&mut self, kw: &str) -> R<()> {
        if self.starts(kw) {
            self.pos += kw.len();
            Ok(())
        } else {
            Err(Fail::back())
        }
    }

    fn directive(&mut self) -> R<Part> {
        let cp = self.pos;
        match opt(self.if_directive())? {
            Some(p) => Ok(p),
            None => {
                self.pos = cp;
                self.for_directive()
            }
        }
    }

    fn if_directive(&mut self) -> R<Part> {
        let start = self.pos;
        let if_start = self.open("%{")?;
        self.ws();
        self.keyword("if")?;
        self.ws();
        let cond = self.nested_expr(false)?;
        self.ws();
        let if_end = self.close()?;
        let mut then = self.inner_template()?;
        let cp = self.pos;
        let otherwise = match opt(self.else_branch())? {
            Some(x) => Some(x),
            None => {
                self.pos = cp;
                None
            }
        };
        let endif_start = self.open("%{")?;
        self.ws();
        self.cut_tag("endif")?;
        self.ws();
        let endif_end = self.close()?;
        // Strip markers inside the directive apply to its inner templates.
        if if_end {
            strip_leading(&mut then);
        }
        let has_else = otherwise.is_some();
        let mut otherwise = match otherwise {
            Some((else_start, else_end, mut parts)) => {
                if else_start {
                    strip_trailing(&mut then);
                }
                if else_end {
                    strip_leading(&mut parts);
                }
                parts
            }
            None => Box::default(),
        };
        if endif_start {
            if has_else {
                strip_trailing(&mut otherwise);
            } else {
                strip_trailing(&mut then);
            }
        }
        Ok((
            TPart::If(Box::new(TIf {
                cond,
                then,
                otherwise,
                span: self.sp_(start, self.pos),
            })),
            if_start,
            endif_end,
        ))
    }

    fn else_branch(&mut self) -> R<(bool, bool, Box<[TPart]>)> {
        let s = self.open("%{")?;
        self.ws();
        self.keyword("else")?;
        self.ws();
        let e = self.close()?;
        let parts = self.inner_template()?;
        Ok((s, e, parts))
    }

    fn for_directive(&mut self) -> R<Part> {
        let start = self.pos;
        let for_start = self.open("%{")?;
        self.ws();
        self.keyword("for")?;
        self.ws();
        let (key_var, val_var, coll) = self.for_vars_in()?;
        let for_end = self.close()?;
        let mut body = self.inner_template()?;
        let endfor_start = self.open("%{")?;
        self.ws();
        self.cut_tag("endfor")?;
        self.ws();
        let endfor_end = self.close()?;
        if for_end {
            strip_leading(&mut body);
        }
        if endfor_start {
            strip_trailing(&mut body);
        }
        Ok((
            TPart::For(Box::new(TFor {
                key_var,
                val_var,
                coll,
                body,
                span: self.sp_(start, self.pos),
            })),
            for_start,
            endfor_end,
        ))
    }

    /// `<<EOT` / `<<-EOT`, the body and the closing delimiter.
    fn heredoc(&mut self) -> R<Expr> {
        let start = self.pos;
        if !self.starts("<<") {
            return Err(Fail::back());
        }
        self.pos += 2;
        let indented = self.eat(b'-');
        let id = self.cut_ident()?;
        if !self.line_ending() {
            return Err(Fail::cut(&[Ctx::Char('\n')]));
        }
        let delim = self.text(id);
        let cp = self.pos;
        let mut parts = self.elements(Lit::Heredoc(delim))?;
        let le = self.pos;
        if self.line_ending() {
            // The line ending before the delimiter belongs to the last literal.
            let nl = &self.s[le..self.pos];
            match parts.last_mut() {
                Some((TPart::Lit(s), _, _)) => *s = [&**s, nl].concat().into_boxed_str(),
                _ => parts.push((TPart::Lit(nl.into()), false, false)),
            }
        } else {
            self.pos = cp;
            parts.clear();
        }
        self.space0();
        if !self.starts(delim) {
            return Err(Fail::cut(&[Ctx::Desc("heredoc end delimiter")]));
        }
        self.pos += delim.len();
        if self.peek_char().is_some_and(is_id_continue) {
            return Err(Fail::cut(&[Ctx::Desc("heredoc end delimiter")]));
        }
        if indented {
            dedent(&mut parts);
        }
        Ok(Expr::Template(finish(parts), self.sp_(start, self.pos)))
    }
}

/// Whether a heredoc's closing line (a line ending, blanks, `delim` and no
/// identifier character after it) starts at byte `i` of `s`.
fn heredoc_end_at(s: &str, i: usize, delim: &str) -> bool {
    let b = s.as_bytes();
    let mut j = match b.get(i..) {
        Some([b'\n', ..]) => i + 1,
        Some([b'\r', b'\n', ..]) => i + 2,
        _ => return false,
    };
    while matches!(b.get(j), Some(b' ' | b'\t')) {
        j += 1;
    }
    if !b[j..].starts_with(delim.as_bytes()) {
        return false;
    }
    !s[j + delim.len()..]
        .chars()
        .next()
        .is_some_and(is_id_continue)
}

fn precedence(op: BinOp) -> u8 {
    match op {
        BinOp::Mul | BinOp::Div | BinOp::Mod => 6,
        BinOp::Add | BinOp::Sub => 5,
        BinOp::LtEq | BinOp::GtEq | BinOp::Lt | BinOp::Gt => 4,
        BinOp::Eq | BinOp::NotEq => 3,
        BinOp::And => 2,
        BinOp::Or => 1,
    }
}

/// Applies the strip markers of each part to the literals beside it.
fn finish(mut parts: Vec<Part>) -> Box<[TPart]> {
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

/// `<<-` heredocs: removes the indentation common to the literal lines
/// (`hcl-edit`'s `Template::dedent`, which looks at the top-level literals
/// only and gives up when an interpolation or directive starts a line).
fn dedent(parts: &mut [Part]) {
    let mut indent: Option<usize> = None;
    let mut skip_first_line = false;
    for (p, _, _) in parts.iter() {
        if let TPart::Lit(literal) = p {
            if let Some(leading_ws) = min_leading_whitespace(literal, skip_first_line) {
                indent = Some(indent.map_or(leading_ws, |i| i.min(leading_ws)));
            }
            skip_first_line = !literal.ends_with('\n');
        } else if !skip_first_line {
            return;
        }
    }
    let Some(indent) = indent else {
        return;
    };
    skip_first_line = false;
    for (p, _, _) in parts.iter_mut() {
        if let TPart::Lit(literal) = p {
            *literal = dedent_by(literal, indent, skip_first_line).into_boxed_str();
            skip_first_line = !literal.ends_with('\n');
        } else if !skip_first_line {
            skip_first_line = true;
        }
    }
}

fn dedent_by(s: &str, n: usize, skip_first: bool) -> String {
    let mut dedented = String::with_capacity(s.len());
    for (i, line) in s.lines().enumerate() {
        if i == 0 && skip_first {
            dedented.push_str(line);
        } else if !line.is_empty() {
            dedented.extend(line.chars().skip(n));
        }
        dedented.push('\n');
    }
    if dedented.ends_with('\n') && !s.ends_with('\n') {
        dedented.pop();
    }
    dedented
}

fn min_leading_whitespace(s: &str, skip_first: bool) -> Option<usize> {
    if s.is_empty() {
        return None;
    }
    let mut leading_ws: Option<usize> = None;
    for (i, line) in s.lines().enumerate() {
        if (i == 0 && skip_first) || line.is_empty() {
            continue;
        }
        let n = line.chars().take_while(|ch| ch.is_whitespace()).count();
        if n == 0 {
            return None;
        }
        leading_ws = Some(leading_ws.map_or(n, |l| l.min(n)));
    }
    leading_ws
}

/// Whether two object keys are the same key (`hcl-edit` refuses an object
/// that repeats one): names by name, expressions by structure, spans aside.
fn same_key(a: &ObjKey, b: &ObjKey, p: &Parser) -> bool {
    match (a, b) {
        (ObjKey::Ident(x, _), ObjKey::Ident(y, _)) => x == y,
        (ObjKey::Expr(x), ObjKey::Expr(y)) => {
            let paren = |e: &Expr| p.b.get(e.span().start as usize - p.base) == Some(&b'(');
            if paren(x) != paren(y) {
                return false;
            }
            match (x, y) {
                (Expr::Str(s, _), Expr::Str(t, _)) => s == t,
                (lit, Expr::Template(..)) | (Expr::Template(..), lit) if lit.is_literal() => false,
                _ => without_spans(x) == without_spans(y),
            }
        }
        _ => false,
    }
}

/// A string that two keys share exactly when [`same_key`] holds for them.
fn key_signature(k: &ObjKey, p: &Parser) -> String {
    match k {
        ObjKey::Ident(n, _) => format!("i{n}"),
        ObjKey::Expr(e) => {
            let paren = p.b.get(e.span().start as usize - p.base) == Some(&b'(');
            let paren = if paren { "(" } else { "-" };
            match e {
                Expr::Str(s, _) => format!("s{paren}{s}"),
                _ => format!("e{paren}{}", without_spans(e)),
            }
        }
    }
}

/// An expression's debug form with every span left out.
fn without_spans(e: &Expr) -> String {
    let d = format!("{e:?}");
    let mut out = String::with_capacity(d.len());
    let mut rest = d.as_str();
    while let Some(i) = rest.find("Span {") {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        match rest.find('}') {
            Some(j) => rest = &rest[j + 1..],
            None => break,
        }
    }
    out.push_str(rest);
    out
}
