//! The HCL JSON syntax front end: a small JSON parser that keeps byte spans,
//! and the schema-driven lowering of bake's JSON files into [`crate::ast`]
//! (string values are templates, as the HCL JSON spec says).

use crate::ast::*;
use crate::diag::{Diag, Diags};

#[derive(Clone, Debug)]
enum J {
    Null,
    Bool(bool),
    Number(f64),
    /// Decoded text and the byte offset of the raw content (after the quote).
    Str(String, usize),
    Array(Vec<Node>),
    Object(Vec<(String, Span, Node)>),
}

#[derive(Clone, Debug)]
struct Node {
    v: J,
    span: Span,
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    file: u32,
    depth: usize,
}

const MAX_DEPTH: usize = 256;

impl<'a> P<'a> {
    fn err(&self, msg: impl Into<String>) -> Diags {
        let end = (self.i + 1).min(self.s.len());
        Diags::one(Diag::at(
            Span::new(self.file, self.i, end),
            "Invalid JSON syntax",
            msg,
        ))
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn value(&mut self) -> Result<Node, Diags> {
        self.ws();
        let start = self.i;
        let Some(&c) = self.s.get(self.i) else {
            return Err(self.err("unexpected end of input; expected a value"));
        };
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        let v = match c {
            b'{' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        if self.s.get(self.i) != Some(&b'"') {
                            return Err(self.err("expected a string object key"));
                        }
                        let kstart = self.i;
                        let (k, _) = self.string()?;
                        let kspan = Span::new(self.file, kstart, self.i);
                        self.ws();
                        if self.s.get(self.i) != Some(&b':') {
                            return Err(self.err("expected ':' after object key"));
                        }
                        self.i += 1;
                        let v = self.value()?;
                        items.push((k, kspan, v));
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.err("expected ',' or '}' in object")),
                        }
                    }
                }
                J::Object(items)
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value()?);
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.err("expected ',' or ']' in array")),
                        }
                    }
                }
                J::Array(items)
            }
            b'"' => {
                let (s, at) = self.string()?;
                J::Str(s, at)
            }
            b't' if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                J::Bool(true)
            }
            b'f' if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                J::Bool(false)
            }
            b'n' if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                J::Null
            }
            b'-' | b'0'..=b'9' => {
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                match text.parse::<f64>() {
                    Ok(n) if n.is_finite() => J::Number(n),
                    _ => return Err(self.err(format!("invalid number {text:?}"))),
                }
            }
            _ => return Err(self.err("expected a JSON value")),
        };
        self.depth -= 1;
        Ok(Node {
            v,
            span: Span::new(self.file, start, self.i),
        })
    }

    fn string(&mut self) -> Result<(String, usize), Diags> {
        self.i += 1; // opening quote
        let content = self.i;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return Err(self.err("unterminated string"));
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.err("unterminated escape"));
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let cp = self.hex4()?;
                            let ch = if (0xD800..0xDC00).contains(&cp) {
                                if self.s.get(self.i) == Some(&b'\\')
                                    && self.s.get(self.i + 1) == Some(&b'u')
                                {
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    char::from_u32(
                                        0x10000
                                            + ((cp - 0xD800) << 10)
                                            + (lo.wrapping_sub(0xDC00) & 0x3FF),
                                    )
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(cp)
                            };
                            let ch = ch.unwrap_or('\u{FFFD}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.err("invalid escape in string")),
                    }
                }
                c if c < 0x20 => return Err(self.err("control character in string")),
                c => out.push(c),
            }
        }
        String::from_utf8(out)
            .map(|s| (s, content))
            .map_err(|_| self.err("string is not valid UTF-8"))
    }

    fn hex4(&mut self) -> Result<u32, Diags> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("short \\u escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("bad \\u escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }
}

/// Parses a bake JSON file into a body using bake's schema: `variable`,
/// `target`, `group` and `function` are one-label blocks, `validation` is a
/// block inside `variable`, everything else is an attribute.
pub fn parse_body(text: &str, file: u32) -> Result<Body, Diags> {
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
        file,
        depth: 0,
    };
    let root = p.value()?;
    p.ws();
    if p.i != text.len() {
        return Err(p.err("unexpected data after the JSON value"));
    }
    let J::Object(items) = root.v else {
        return Err(Diags::at(
            root.span,
            "Invalid JSON body",
            "The root of a bake JSON file must be an object.",
        ));
    };
    let mut names = Names::default();
    let mut attrs = Vec::new();
    let mut blocks = Vec::new();
    for (k, kspan, v) in items {
        match k.as_str() {
            "variable" | "target" | "group" | "function" => {
                let kind = names.get(&k);
                labeled_blocks(&kind, kspan, v, &mut blocks, &mut names)?;
            }
            _ => attrs.push(Attribute {
                name: names.get(&k),
                name_span: kspan,
                expr: lower(&v)?,
            }),
        }
    }
    Ok(Body {
        attrs: attrs.into_boxed_slice(),
        blocks: blocks.into_boxed_slice(),
        span: root.span,
    })
}

fn labeled_blocks(
    kind: &Name,
    kspan: Span,
    v: Node,
    out: &mut Vec<Block>,
    names: &mut Names,
) -> Result<(), Diags> {
    match v.v {
        J::Object(labels) => {
            for (label, lspan, content) in labels {
                for b in block_bodies(content)? {
                    out.push(Block {
                        kind: kind.clone(),
                        labels: Box::new([(label.clone(), lspan)]),
                        body: block_body(kind, b, names)?,
                        span: kspan.to(lspan),
                    });
                }
            }
            Ok(())
        }
        J::Array(items) => {
            for it in items {
                labeled_blocks(kind, kspan, it, out, names)?;
            }
            Ok(())
        }
        _ => Err(Diags::at(
            v.span,
            "Incorrect JSON value type",
            format!("A JSON object is required for {kind} blocks."),
        )),
    }
}

/// A block's content may be an object or an array of objects (repeated blocks).
fn block_bodies(n: Node) -> Result<Vec<Node>, Diags> {
    match n.v {
        J::Object(_) => Ok(vec![n]),
        J::Array(items) => Ok(items),
        _ => Err(Diags::at(
            n.span,
            "Incorrect JSON value type",
            "A JSON object is required here, to define a block.",
        )),
    }
}

fn block_body(kind: &str, n: Node, names: &mut Names) -> Result<Body, Diags> {
    let span = n.span;
    let J::Object(items) = n.v else {
        return Err(Diags::at(
            span,
            "Incorrect JSON value type",
            "A JSON object is required here, to define a block.",
        ));
    };
    let mut attrs = Vec::new();
    let mut blocks = Vec::new();
    for (k, kspan, v) in items {
        if kind == "variable" && k == "validation" {
            for b in block_bodies(v)? {
                let bspan = b.span;
                blocks.push(Block {
                    kind: names.get("validation"),
                    labels: Box::default(),
                    body: block_body("validation", b, names)?,
                    span: kspan.to(bspan),
                });
            }
            continue;
        }
        attrs.push(Attribute {
            name: names.get(&k),
            name_span: kspan,
            expr: lower(&v)?,
        });
    }
    Ok(Body {
        attrs: attrs.into_boxed_slice(),
        blocks: blocks.into_boxed_slice(),
        span,
    })
}

fn lower(n: &Node) -> Result<Expr, Diags> {
    Ok(match &n.v {
        J::Null => Expr::Null(n.span),
        J::Bool(b) => Expr::Bool(*b, n.span),
        J::Number(x) => Expr::Number(*x, n.span),
        J::Str(s, at) => string_expr(s, *at, n.span)?,
        J::Array(items) => Expr::Tuple(items.iter().map(lower).collect::<Result<_, _>>()?, n.span),
        J::Object(items) => {
            let mut out = Vec::new();
            for (k, kspan, v) in items {
                let key = if k.contains("${") || k.contains("%{") {
                    ObjKey::Expr(crate::syntax::parse_template(
                        k,
                        kspan.file,
                        kspan.start as usize + 1,
                    )?)
                } else {
                    ObjKey::Expr(Expr::Str(k.as_str().into(), *kspan))
                };
                out.push((key, lower(v)?));
            }
            Expr::Object(out.into_boxed_slice(), n.span)
        }
    })
}

fn string_expr(s: &str, at: usize, span: Span) -> Result<Expr, Diags> {
    if !s.contains("${") && !s.contains("%{") {
        return Ok(Expr::Str(s.into(), span));
    }
    // Offsets inside the template are exact when the JSON string has no
    // escapes; with escapes they point near the error.
    crate::syntax::parse_template(s, span.file, at).map(|e| match e {
        Expr::Template(parts, _) => Expr::Template(parts, span),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_blocks_and_attrs() {
        let t = r#"{"variable": {"A": {"default": "x"}}, "target": {"app": {"tags": ["${A}"]}}, "G": 1}"#;
        let b = parse_body(t, 0).unwrap();
        assert_eq!(b.blocks.len(), 2);
        assert_eq!(b.attrs.len(), 1);
        assert_eq!(b.blocks[1].labels[0].0, "app");
    }

    #[test]
    fn array_of_blocks() {
        let t = r#"{"target": [{"a": [{"x": "1"}, {"y": "2"}]}]}"#;
        let b = parse_body(t, 0).unwrap();
        assert_eq!(b.blocks.len(), 2);
    }

    #[test]
    fn errors_have_positions() {
        let e = parse_body("{\"a\": [1, }", 0).unwrap_err();
        assert_eq!(e.0[0].span.unwrap().start, 10);
        assert!(parse_body("[1]", 0).is_err());
        assert!(parse_body("{\"a\": \"\\uZZZZ\"}", 0).is_err());
        assert!(parse_body(&"[".repeat(10_000), 0).is_err());
    }
}
