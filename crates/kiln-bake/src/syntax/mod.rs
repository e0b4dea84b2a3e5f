//! The HCL native syntax front end: a hand-written parser that builds
//! [`crate::ast`] directly from the text, with byte spans.
//!
//! It accepts exactly what the `hcl-edit` based front end (`native.rs`,
//! kept as the baseline) accepts and produces the same tree, spans included,
//! and reports a syntax error at the same place with the same message. To
//! get there it follows `hcl-edit`'s grammar decision for decision (where
//! newlines may appear, which lookahead picks a branch, where an error
//! backtracks and where it is final), without building a format-preserving
//! tree first. `tests/syntax_differential.rs` holds the two to each other.
//!
//! Owns: HCL native syntax text → [`Body`]/[`Expr`], syntax diagnostics.
//! Must never: evaluate anything, panic on any input, recurse without bound
//! (nesting is capped as `hcl-edit` caps it, with the same error).

mod parse;

use crate::ast::{Body, Expr, Span};
use crate::diag::{Diag, Diags};

use parse::{Fail, Parser};

/// Parses a whole file body.
pub fn parse_body(text: &str, file: u32) -> Result<Body, Diags> {
    let mut p = Parser::new(text, file, 0);
    let r = p.body().and_then(|b| p.expect_end().map(|()| b));
    match r {
        Ok(attrs_blocks) => Ok(Body {
            span: Span::new(file, 0, text.len()),
            ..attrs_blocks
        }),
        Err(f) => {
            let d = syntax_error(&f, p.pos(), text, file, 0);
            // A quoted string left open runs into the following lines, and the
            // parser only notices lines later; point at the string instead.
            Err(
                match (unterminated_string(text), d.0.first().and_then(|d| d.span)) {
                    (Some(start), Some(at)) if start <= at.start as usize => Diags::at(
                        Span::new(file, start, start + 1),
                        "Unterminated string",
                        "This quoted string has no closing `\"` on its line, and quoted strings cannot span lines. \
                         Close it with `\"` on the same line; for text over several lines, write `\\n` or use a heredoc (`<<EOT` ... `EOT`).",
                    ),
                    _ => d,
                },
            )
        }
    }
}

/// Parses a template (the contents of a JSON string), whose text starts at byte
/// `base` of file `file`.
pub fn parse_template(text: &str, file: u32, base: usize) -> Result<Expr, Diags> {
    let mut p = Parser::new(text, file, base);
    let r = p.template_root().and_then(|t| p.expect_end().map(|()| t));
    r.map(|parts| Expr::Template(parts, Span::new(file, base, base + text.len())))
        .map_err(|f| syntax_error(&f, p.pos(), text, file, base))
}

/// Parses a standalone expression (a JSON syntax `type` or a `--set` value).
pub fn parse_expr(text: &str, file: u32, base: usize) -> Result<Expr, Diags> {
    let mut p = Parser::new(text, file, base);
    let r = p.root_expr().and_then(|e| p.expect_end().map(|()| e));
    r.map_err(|f| syntax_error(&f, p.pos(), text, file, base))
}

/// The diagnostic for a syntax error found at byte `at` of `text`.
///
/// The offset goes through the same line/column round trip the baseline
/// makes (`hcl-edit` reports a line and column, which it counts in bytes when
/// the error sits on the first byte of a multi-byte character), so both
/// front ends point at the same byte.
fn syntax_error(f: &Fail, at: usize, text: &str, file: u32, base: usize) -> Diags {
    let offset = round_trip(text, at);
    let end = (offset + 1).min(text.len()).max(offset);
    Diags::one(Diag::at(
        Span::new(file, base + offset, base + end),
        "Invalid HCL syntax",
        f.message(),
    ))
}

fn round_trip(text: &str, at: usize) -> usize {
    let input = text.as_bytes();
    if input.is_empty() {
        return 0;
    }
    // hcl-edit's `locate_error`.
    let offset = at.min(input.len() - 1);
    let column_offset = at - offset;
    let line_begin = input[..offset]
        .iter()
        .rev()
        .position(|&b| b == b'\n')
        .map_or(0, |pos| offset - pos);
    let line = input[..line_begin].iter().filter(|&&b| b == b'\n').count() + 1;
    let column = std::str::from_utf8(&input[line_begin..=offset])
        .map_or_else(|_| offset - line_begin + 1, |s| s.chars().count())
        + column_offset;
    // And back to a byte offset, as the baseline does.
    let mut back = 0usize;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            back += l
                .char_indices()
                .nth(column.saturating_sub(1))
                .map(|(b, _)| b)
                .unwrap_or(l.len());
            break;
        }
        back += l.len();
    }
    back.min(text.len())
}

/// The byte offset of the first quoted string that is still open at the end
/// of its line, if any. A lexical scan only: comments, `${`/`%{`
/// interpolations (which may span lines and hold strings of their own),
/// escapes and heredocs are followed; anything else is skipped byte by byte.
pub(crate) fn unterminated_string(text: &str) -> Option<usize> {
    #[derive(Clone, Copy)]
    enum Ctx {
        /// Expression code; `depth` counts braces opened inside it, so the
        /// `}` closing an interpolation can be told from an object's.
        Code { depth: usize },
        /// Inside a quoted string that started at this offset.
        Str(usize),
    }
    let b = text.as_bytes();
    let mut stack = vec![Ctx::Code { depth: 0 }];
    let mut i = 0;
    while i < b.len() {
        match stack.last_mut()? {
            Ctx::Str(start) => {
                let start = *start;
                match b[i] {
                    b'\\' => i += 2,
                    b'\n' => return Some(start),
                    b'"' => {
                        stack.pop();
                        i += 1;
                    }
                    b'$' | b'%' if b.get(i + 1) == Some(&b[i]) && b.get(i + 2) == Some(&b'{') => {
                        // `$${` / `%%{`: a literal `${` / `%{`.
                        i += 3;
                    }
                    b'$' | b'%' if b.get(i + 1) == Some(&b'{') => {
                        stack.push(Ctx::Code { depth: 0 });
                        i += 2;
                    }
                    _ => i += 1,
                }
            }
            Ctx::Code { depth } => match b[i] {
                b'"' => {
                    stack.push(Ctx::Str(i));
                    i += 1;
                }
                b'{' => {
                    *depth += 1;
                    i += 1;
                }
                b'}' => {
                    if *depth == 0 {
                        // Closes an interpolation (or is a stray brace at
                        // the top level, which the parser reports).
                        if stack.len() > 1 {
                            stack.pop();
                        }
                    } else {
                        *depth -= 1;
                    }
                    i += 1;
                }
                b'#' => i = line_end(b, i),
                b'/' if b.get(i + 1) == Some(&b'/') => i = line_end(b, i),
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                }
                b'<' if b.get(i + 1) == Some(&b'<') => i = skip_heredoc(text, i),
                _ => i += 1,
            },
        }
    }
    None
}

fn line_end(b: &[u8], from: usize) -> usize {
    b[from..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| from + p)
}

/// Skips a heredoc starting at `<<` (or `<<-`) at `i`: to the end of the
/// line holding only its marker. Not a heredoc: skips the `<<`.
fn skip_heredoc(text: &str, i: usize) -> usize {
    let rest = &text[i + 2..];
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let marker: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    let after = &rest[marker.len()..];
    let after = after.strip_prefix('\r').unwrap_or(after);
    if marker.is_empty() || !after.starts_with('\n') {
        return i + 2;
    }
    let body_start = text.len() - after.len() + 1;
    let mut at = body_start;
    for line in text[body_start..].split_inclusive('\n') {
        at += line.len();
        if line.trim() == marker {
            return at;
        }
    }
    text.len()
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
    fn other_syntax_errors_say_what_was_expected() {
        let e = err("target \"a\" {\n  tags = [\"a\" \"b\"]\n}\n");
        assert!(e.starts_with("Invalid HCL syntax"), "{e}");
        assert!(e.contains("expected `]`"), "{e}");
        assert!(e.contains("--> t.hcl:2:15"), "{e}");
        assert_eq!(unterminated_string("a = \"x\"\nb = \"${\n  c\n}\"\n"), None);
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("a = {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let e = err(&deep);
        assert!(e.contains("at most 64 nested levels"), "{e}");
        let long = format!("a = 1{}\n", " + 1".repeat(200));
        let e = err(&long);
        assert!(e.contains("at most 128 chained binary operators"), "{e}");
    }
}
