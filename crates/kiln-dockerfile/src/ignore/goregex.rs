//! Translation of Go regular-expression text into `regex` crate syntax with the same
//! meaning.
//!
//! Docker's matcher turns a glob into Go `regexp` syntax and compiles it with Go's RE2
//! parser (Perl flags). The glob's own `[`, `]`, `\x` and `^` pass through untouched, so
//! the text Go parses can hold constructs that mean something else to the `regex` crate:
//! `[` inside a class (a literal to Go, a nested class to Rust), Go-only escapes (`\Q…\E`,
//! octal `\12`, `\C`), ASCII-only `\d \s \w \b` (Unicode-aware in Rust), `\<` (a literal
//! to Go, a word boundary to Rust) and the single-letter Unicode class `\pC`. Feeding
//! moby's text straight to `regex` would therefore disagree with Docker on some valid
//! patterns (`[*]`, `[?]`, `foo\d`). This module parses the text the way Go's
//! `regexp/syntax` does and re-emits it with every literal and class member spelled as
//! `\x{…}`, so the compiled program means what Go's would.
//!
//! Only the constructs Docker's translation can produce are handled with care (literals,
//! escapes, classes, `.`, `^`, `$`, groups, `*`, `?`); the rest of the syntax (`|`, `+`,
//! `{n,m}`, `(?flags)`) is passed through, since Go and Rust agree on it.

use std::fmt::Write as _;

/// The text is not a valid Go regular expression (Go would fail to compile it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GoSyntaxError;

type Result<T> = std::result::Result<T, GoSyntaxError>;

/// Translate Go `regexp` text (compiled by Go with `regexp.Compile`, i.e. Perl flags) into
/// equivalent `regex` crate text.
pub(crate) fn translate(go: &str) -> Result<String> {
    let mut p = Parser {
        s: go.chars().collect(),
        i: 0,
        out: String::with_capacity(go.len() * 2),
    };
    p.top()?;
    Ok(p.out)
}

struct Parser {
    s: Vec<char>,
    i: usize,
    out: String,
}

impl Parser {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.s.get(self.i + ahead).copied()
    }

    fn top(&mut self) -> Result<()> {
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => self.top_escape()?,
                '[' => {
                    let class = self.class()?;
                    self.out.push_str(&class);
                }
                '.' | '^' | '$' | '(' | ')' | '|' | '*' | '+' | '?' => {
                    self.out.push(c);
                    self.i += 1;
                }
                '{' => {
                    // Go: `{` that does not start a valid `{n}`, `{n,}` or `{n,m}` is a
                    // literal.
                    match self.repeat_len() {
                        Some(len) => {
                            for _ in 0..len {
                                self.out.push(self.s[self.i]);
                                self.i += 1;
                            }
                        }
                        None => {
                            push_literal(&mut self.out, '{');
                            self.i += 1;
                        }
                    }
                }
                _ => {
                    push_literal(&mut self.out, c);
                    self.i += 1;
                }
            }
        }
        Ok(())
    }

    /// The length of a `{n}`, `{n,}` or `{n,m}` repeat at the cursor (Go's `parseRepeat`).
    fn repeat_len(&self) -> Option<usize> {
        let rest = &self.s[self.i..];
        let close = rest.iter().position(|&c| c == '}')?;
        let inner: String = rest[1..close].iter().collect();
        let (min, max) = match inner.split_once(',') {
            Some((min, max)) => (min, (!max.is_empty()).then_some(max)),
            None => (inner.as_str(), Some(inner.as_str())),
        };
        let num = |s: &str| -> Option<u32> {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        let min = num(min)?;
        let max = match max {
            Some(m) => Some(num(m)?),
            None => None,
        };
        (min <= 1000 && max.is_none_or(|m| m <= 1000 && m >= min)).then_some(close + 1)
    }

    /// An escape outside a class: Go's Perl extensions first, then Unicode and Perl
    /// classes, then an ordinary single-character escape.
    fn top_escape(&mut self) -> Result<()> {
        let Some(next) = self.peek(1) else {
            return Err(GoSyntaxError); // trailing backslash
        };
        match next {
            'A' => self.emit_raw(2, "\\A"),
            'z' => self.emit_raw(2, "\\z"),
            // Go's word boundary is ASCII-only.
            'b' => self.emit_raw(2, "(?-u:\\b)"),
            'B' => self.emit_raw(2, "(?-u:\\B)"),
            'C' => return Err(GoSyntaxError),
            'Q' => {
                // `\Q…\E`: everything up to `\E` (or the end) is literal.
                self.i += 2;
                while let Some(c) = self.peek(0) {
                    if c == '\\' && self.peek(1) == Some('E') {
                        self.i += 2;
                        break;
                    }
                    push_literal(&mut self.out, c);
                    self.i += 1;
                }
            }
            'p' | 'P' => {
                let class = self.unicode_class()?;
                self.out.push_str(&class);
            }
            _ => {
                if let Some(class) = self.perl_class() {
                    self.out.push_str(&class);
                } else {
                    let c = self.escape()?;
                    push_literal(&mut self.out, c);
                }
            }
        }
        Ok(())
    }

    fn emit_raw(&mut self, consumed: usize, text: &str) {
        self.i += consumed;
        self.out.push_str(text);
    }

    /// Go's `parseEscape` at a `\`: one escaped code point (possibly a surrogate, which Go
    /// accepts as a rune but no string holds).
    fn escape(&mut self) -> Result<u32> {
        self.i += 1; // the backslash
        let Some(c) = self.peek(0) else {
            return Err(GoSyntaxError);
        };
        self.i += 1;
        let value: u32 = match c {
            '1'..='7' | '0' => {
                // A single non-zero digit would be a backreference, which Go rejects.
                if c != '0' && !self.peek(0).is_some_and(is_octal) {
                    return Err(GoSyntaxError);
                }
                let mut r = c as u32 - '0' as u32;
                for _ in 1..3 {
                    match self.peek(0) {
                        Some(d) if is_octal(d) => {
                            r = r * 8 + (d as u32 - '0' as u32);
                            self.i += 1;
                        }
                        _ => break,
                    }
                }
                r
            }
            'x' => {
                let Some(first) = self.peek(0) else {
                    return Err(GoSyntaxError);
                };
                self.i += 1;
                if first == '{' {
                    let mut r: u32 = 0;
                    let mut digits = 0;
                    loop {
                        let Some(d) = self.peek(0) else {
                            return Err(GoSyntaxError);
                        };
                        self.i += 1;
                        if d == '}' {
                            break;
                        }
                        let v = d.to_digit(16).ok_or(GoSyntaxError)?;
                        r = r * 16 + v;
                        if r > 0x10_FFFF {
                            return Err(GoSyntaxError);
                        }
                        digits += 1;
                    }
                    if digits == 0 {
                        return Err(GoSyntaxError);
                    }
                    r
                } else {
                    let second = self.peek(0);
                    self.i += 1;
                    let hi = first.to_digit(16).ok_or(GoSyntaxError)?;
                    let lo = second.and_then(|d| d.to_digit(16)).ok_or(GoSyntaxError)?;
                    hi * 16 + lo
                }
            }
            'a' => 7,
            'f' => 12,
            'n' => 10,
            'r' => 13,
            't' => 9,
            'v' => 11,
            // Escaped ASCII punctuation (and `_`, space, controls) is itself.
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => c as u32,
            _ => return Err(GoSyntaxError),
        };
        Ok(value)
    }

    /// `\d \D \s \S \w \W` (ASCII in Go) as an explicit class, or `None`.
    fn perl_class(&mut self) -> Option<String> {
        if self.peek(0) != Some('\\') {
            return None;
        }
        let (ranges, negated): (&[(u32, u32)], bool) = match self.peek(1)? {
            'd' => (DIGIT, false),
            'D' => (DIGIT, true),
            's' => (PERL_SPACE, false),
            'S' => (PERL_SPACE, true),
            'w' => (WORD, false),
            'W' => (WORD, true),
            _ => return None,
        };
        self.i += 2;
        Some(class_text(ranges, negated))
    }

    /// Go's `parseUnicodeClass` at `\p` or `\P`, as a Rust class expression.
    fn unicode_class(&mut self) -> Result<String> {
        let mut positive = self.peek(1) == Some('p');
        self.i += 2;
        let braced = self.peek(0) == Some('{');
        let name: String = match self.peek(0) {
            None => return Err(GoSyntaxError),
            Some('{') => {
                let close = self.s[self.i..]
                    .iter()
                    .position(|&c| c == '}')
                    .ok_or(GoSyntaxError)?;
                let name = self.s[self.i + 1..self.i + close].iter().collect();
                self.i += close + 1;
                name
            }
            Some(c) => {
                self.i += 1;
                c.to_string()
            }
        };
        let name = match name.strip_prefix('^') {
            Some(rest) => {
                positive = !positive;
                rest.to_owned()
            }
            None => name,
        };
        let neg = if positive { "" } else { "^" };
        let body = match name.as_str() {
            "" => return Err(GoSyntaxError),
            "Any" => "\\x{0}-\\x{10FFFF}".to_owned(),
            // Go's `C` is Cc|Cf|Co|Cs; Rust's also holds the unassigned code points (Cn).
            "C" => "\\p{Cc}\\p{Cf}\\p{Co}\\p{Cs}".to_owned(),
            // The single-letter names Go knows are the seven major categories.
            "L" | "M" | "N" | "P" | "S" | "Z" => format!("\\p{{{name}}}"),
            // Braced names (categories and scripts) cannot come out of Docker's glob
            // translation, which escapes `{`; leave them to the regex crate.
            n if braced && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                format!("\\p{{{n}}}")
            }
            _ => return Err(GoSyntaxError),
        };
        Ok(format!("[{neg}{body}]"))
    }

    /// Go's `parseClass` at `[`: the whole class as a Rust class expression.
    fn class(&mut self) -> Result<String> {
        self.i += 1;
        let mut out = String::from("[");
        if self.peek(0) == Some('^') {
            out.push('^');
            self.i += 1;
        }
        let mut first = true; // `]` is a member when it comes first
        loop {
            match self.peek(0) {
                None => return Err(GoSyntaxError), // missing `]`
                Some(']') if !first => {
                    self.i += 1;
                    break;
                }
                _ => {}
            }
            first = false;
            if let Some(posix) = self.posix_class()? {
                out.push_str(&posix);
                continue;
            }
            if self.peek(0) == Some('\\') && matches!(self.peek(1), Some('p' | 'P')) {
                let class = self.unicode_class()?;
                out.push_str(&class);
                continue;
            }
            if let Some(class) = self.perl_class() {
                out.push_str(&class);
                continue;
            }
            let lo = self.class_char()?;
            let mut hi = lo;
            if self.peek(0) == Some('-') && self.peek(1).is_some_and(|c| c != ']') {
                self.i += 1;
                hi = self.class_char()?;
                if hi < lo {
                    return Err(GoSyntaxError);
                }
            }
            push_range(&mut out, lo, hi);
        }
        if out == "[" || out == "[^" {
            // Every member was a trimmed surrogate: an empty class, or its complement.
            let negated = out == "[^";
            return Ok(if negated {
                "[\\x{0}-\\x{10FFFF}]"
            } else {
                "[^\\x{0}-\\x{10FFFF}]"
            }
            .to_owned());
        }
        out.push(']');
        Ok(out)
    }

    /// Go's `parseClassChar`: a literal or an escape inside a class.
    fn class_char(&mut self) -> Result<u32> {
        match self.peek(0) {
            None => Err(GoSyntaxError),
            Some('\\') => self.escape(),
            Some(c) => {
                self.i += 1;
                Ok(c as u32)
            }
        }
    }

    /// Go's `parseNamedClass`: `[:name:]` or `[:^name:]` at the cursor. `Ok(None)` when
    /// the text is not of that shape (then `[` is an ordinary member); an error for an
    /// unknown name.
    fn posix_class(&mut self) -> Result<Option<String>> {
        if self.peek(0) != Some('[') || self.peek(1) != Some(':') || self.peek(2).is_none() {
            return Ok(None);
        }
        // Go searches for `:]` anywhere after `[:`, even past the class's own `]`.
        let rest = &self.s[self.i + 2..];
        let Some(end) = rest.windows(2).position(|w| w == [':', ']']) else {
            return Ok(None);
        };
        let name: String = rest[..end].iter().collect();
        let (name, negated) = match name.strip_prefix('^') {
            Some(n) => (n.to_owned(), true),
            None => (name, false),
        };
        let ranges = posix_ranges(&name).ok_or(GoSyntaxError)?;
        self.i += 2 + end + 2;
        Ok(Some(class_text(ranges, negated)))
    }
}

fn is_octal(c: char) -> bool {
    ('0'..='7').contains(&c)
}

/// Emit one literal code point. A surrogate (only reachable through `\x{D800}`) matches
/// nothing in a string, in Go as here.
fn push_literal(out: &mut String, c: impl Into<u32>) {
    let c: u32 = c.into();
    match char::from_u32(c) {
        Some(ch) if ch.is_ascii_alphanumeric() => out.push(ch),
        Some(_) => {
            let _ = write!(out, "\\x{{{c:X}}}");
        }
        None => out.push_str("[^\\x{0}-\\x{10FFFF}]"),
    }
}

/// Emit a class member `lo..=hi`, trimming surrogate end points (which the regex crate
/// rejects and no string holds).
fn push_range(out: &mut String, lo: u32, hi: u32) {
    let lo = if (0xD800..=0xDFFF).contains(&lo) {
        0xE000
    } else {
        lo
    };
    let hi = if (0xD800..=0xDFFF).contains(&hi) {
        0xD7FF
    } else {
        hi
    };
    if lo > hi {
        return;
    }
    if lo == hi {
        let _ = write!(out, "\\x{{{lo:X}}}");
    } else {
        let _ = write!(out, "\\x{{{lo:X}}}-\\x{{{hi:X}}}");
    }
}

/// A nested class over ASCII ranges, negated (complemented over all of Unicode) or not.
fn class_text(ranges: &[(u32, u32)], negated: bool) -> String {
    let mut out = String::from(if negated { "[^" } else { "[" });
    for &(lo, hi) in ranges {
        push_range(&mut out, lo, hi);
    }
    out.push(']');
    out
}

const DIGIT: &[(u32, u32)] = &[(0x30, 0x39)];
const PERL_SPACE: &[(u32, u32)] = &[(0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)];
const WORD: &[(u32, u32)] = &[(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)];

/// Go's `posixGroup` table.
fn posix_ranges(name: &str) -> Option<&'static [(u32, u32)]> {
    Some(match name {
        "alnum" => &[(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
        "alpha" => &[(0x41, 0x5A), (0x61, 0x7A)],
        "ascii" => &[(0x00, 0x7F)],
        "blank" => &[(0x09, 0x09), (0x20, 0x20)],
        "cntrl" => &[(0x00, 0x1F), (0x7F, 0x7F)],
        "digit" => DIGIT,
        "graph" => &[(0x21, 0x7E)],
        "lower" => &[(0x61, 0x7A)],
        "print" => &[(0x20, 0x7E)],
        "punct" => &[(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
        "space" => &[(0x09, 0x0D), (0x20, 0x20)],
        "upper" => &[(0x41, 0x5A)],
        "word" => WORD,
        "xdigit" => &[(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go_match(go: &str, text: &str) -> Option<bool> {
        let rust = translate(go).ok()?;
        Some(
            regex::Regex::new(&rust)
                .unwrap_or_else(|e| panic!("{go:?} -> {rust:?}: {e}"))
                .is_match(text),
        )
    }

    #[test]
    fn brackets_are_literal_inside_go_classes() {
        // Go: the class {'[', '^', '/'} repeated, then a literal `]`.
        assert_eq!(go_match("^[[^/]*]$", "[^/]"), Some(true));
        assert_eq!(go_match("^[[^/]*]$", "x]"), Some(false));
        assert_eq!(go_match("^[[^/]]$", "/]"), Some(true));
        assert_eq!(go_match("^[[^/]]$", "a"), Some(false));
    }

    #[test]
    fn go_escapes() {
        assert_eq!(go_match("^a\\ b$", "a b"), Some(true));
        assert_eq!(go_match("^a\\<b$", "a<b"), Some(true));
        assert_eq!(go_match("^a\\d$", "a5"), Some(true));
        assert_eq!(go_match("^a\\d$", "a٣"), Some(false)); // ASCII digits only
        assert_eq!(go_match("^a\\w$", "aé"), Some(false));
        assert_eq!(go_match("^\\x41$", "A"), Some(true));
        assert_eq!(go_match("^\\101$", "A"), Some(true));
        assert_eq!(go_match("^\\Qa[^/]*$", "a[^/]*$"), Some(true));
        assert_eq!(go_match("^\\Qa.\\Eb$", "a.b"), Some(true));
        assert_eq!(go_match("^\\pL$", "é"), Some(true));
        assert_eq!(go_match("^\\PL$", "é"), Some(false));
        assert_eq!(go_match("^a\\_$", "a_"), Some(true));
        assert_eq!(go_match("^[[:alpha:]]$", "q"), Some(true));
        assert_eq!(go_match("^[[:^alpha:]]$", "q"), Some(false));
        assert_eq!(go_match("^[a\\d]$", "7"), Some(true));
        assert_eq!(go_match("^a\\bb$", "ab"), Some(false));
        assert_eq!(go_match("^[\\d-z]$", "-"), Some(true)); // Perl flags: `-` anywhere
    }

    #[test]
    fn go_errors() {
        for bad in [
            "^a\\1$",
            "^a\\g$",
            "^a\\C$",
            "^[z-a]$",
            "^[a$",
            "^a\\",
            "^\\x4$",
            "^\\x{}$",
            "^[[:nope:]]$",
            "^\\p\\{Greek\\}$",
            "^\\pX$",
        ] {
            assert_eq!(translate(bad), Err(GoSyntaxError), "{bad:?}");
        }
    }
}
