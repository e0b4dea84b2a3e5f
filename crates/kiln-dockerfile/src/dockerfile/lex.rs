//! Variable expansion and word splitting as BuildKit's Dockerfile shell lexer does them
//! (`frontend/dockerfile/shell/lex.go`), for the words the frontend itself expands: `FROM`,
//! `COPY`/`ADD` sources and flags, `ARG`/`ENV` values, `--mount` options, `WORKDIR`…
//!
//! What it does: `$VAR`, `${VAR}`, `${VAR:-w}`, `${VAR-w}`, `${VAR:+w}`, `${VAR+w}`,
//! `${VAR:?msg}`, `${VAR?msg}`, `${VAR#pat}`, `${VAR##pat}`, `${VAR%pat}`, `${VAR%%pat}`,
//! `${VAR/pat/repl}`, `${VAR//pat/repl}`; quote removal (`'…'` is literal, `"…"` expands);
//! the escape character (`\`, or `` ` `` under `# escape=`) makes the next character literal.
//! Every variable a word references is reported, set or not, so callers can tell which
//! build args a value depends on.
//!
//! It never runs a shell and never reads the environment: values come from the caller.

use std::collections::BTreeSet;

/// Why a word could not be expanded; the caller adds the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError(pub String);

impl std::fmt::Display for LexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of expanding one word.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expanded {
    /// The word after quote removal and expansion.
    pub value: String,
    /// Every variable name the word referenced (set or unset), in name order.
    pub used: BTreeSet<String>,
}

/// Expands `word` like BuildKit's `ProcessWord`: quotes removed, variables replaced by
/// `lookup(name)` (`None` = unset), the escape character honoured.
pub fn expand(
    word: &str,
    escape: char,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded, LexError> {
    let mut lx = Lexer {
        chars: word.chars().collect(),
        pos: 0,
        escape,
        lookup,
        used: BTreeSet::new(),
    };
    let value = lx.process(None)?;
    Ok(Expanded {
        value,
        used: lx.used,
    })
}

/// Splits the arguments of `ARG`/`ENV`/`LABEL` into words on unquoted, unescaped
/// whitespace, keeping quotes and escapes in the words (they are removed by [`expand`]),
/// as BuildKit's `parseWords` does.
#[must_use]
pub fn split_words(text: &str, escape: char) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            None if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                word.push(c);
            }
            Some(q) if c == q => {
                quote = None;
                word.push(c);
            }
            _ if c == escape && quote != Some('\'') => {
                word.push(c);
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            _ => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

struct Lexer<'a> {
    chars: Vec<char>,
    pos: usize,
    escape: char,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    used: BTreeSet<String>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    /// Processes until the end, or until `stop` (consumed) outside quotes.
    fn process(&mut self, stop: Option<char>) -> Result<String, LexError> {
        let mut out = String::new();
        loop {
            let Some(c) = self.next() else {
                return match stop {
                    Some(s) => Err(LexError(format!("missing '{s}' in variable expansion"))),
                    None => Ok(out),
                };
            };
            if Some(c) == stop {
                return Ok(out);
            }
            if c == self.escape {
                // An escape at the very end is kept literally, as BuildKit does.
                match self.next() {
                    Some(n) => out.push(n),
                    None => out.push(c),
                }
            } else if c == '\'' {
                out.push_str(&self.single_quoted()?);
            } else if c == '"' {
                out.push_str(&self.double_quoted()?);
            } else if c == '$' {
                out.push_str(&self.dollar()?);
            } else {
                out.push(c);
            }
        }
    }

    fn single_quoted(&mut self) -> Result<String, LexError> {
        let mut out = String::new();
        loop {
            match self.next() {
                None => {
                    return Err(LexError(
                        "unexpected end of statement while looking for matching single-quote"
                            .into(),
                    ));
                }
                Some('\'') => return Ok(out),
                Some(c) => out.push(c),
            }
        }
    }

    fn double_quoted(&mut self) -> Result<String, LexError> {
        let mut out = String::new();
        loop {
            match self.next() {
                None => {
                    return Err(LexError(
                        "unexpected end of statement while looking for matching double-quote"
                            .into(),
                    ));
                }
                Some('"') => return Ok(out),
                Some('$') => out.push_str(&self.dollar()?),
                Some(c) if c == self.escape => match self.peek() {
                    Some(n) if n == '"' || n == '$' || n == self.escape => {
                        self.pos += 1;
                        out.push(n);
                    }
                    _ => out.push(c),
                },
                Some(c) => out.push(c),
            }
        }
    }

    fn name(&mut self) -> String {
        let mut name = String::new();
        // A positional parameter is a single digit.
        if let Some(c) = self.peek()
            && c.is_ascii_digit()
        {
            self.pos += 1;
            name.push(c);
            return name;
        }
        while let Some(c) = self.peek() {
            if c.is_alphanumeric() || c == '_' {
                name.push(c);
                self.pos += 1;
            } else {
                break;
            }
        }
        name
    }

    fn get(&mut self, name: &str) -> Option<String> {
        self.used.insert(name.to_string());
        (self.lookup)(name)
    }

    fn dollar(&mut self) -> Result<String, LexError> {
        if self.peek() != Some('{') {
            let name = self.name();
            if name.is_empty() {
                return Ok("$".into());
            }
            return Ok(self.get(&name).unwrap_or_default());
        }
        self.pos += 1; // '{'
        let name = self.name();
        if name.is_empty() {
            return Err(LexError(
                "bad substitution: missing variable name in ${}".into(),
            ));
        }
        let value = self.get(&name);
        let Some(c) = self.next() else {
            return Err(LexError(format!("missing '}}' after ${{{name}")));
        };
        match c {
            '}' => Ok(value.unwrap_or_default()),
            ':' => {
                let Some(m) = self.next() else {
                    return Err(LexError(format!("missing '}}' after ${{{name}:")));
                };
                let word = self.process(Some('}'))?;
                let set = value.as_deref().is_some_and(|v| !v.is_empty());
                self.modifier(&name, m, value, set, word, true)
            }
            '-' | '+' | '?' => {
                let word = self.process(Some('}'))?;
                let set = value.is_some();
                self.modifier(&name, c, value, set, word, false)
            }
            '#' | '%' => {
                let longest = self.peek() == Some(c);
                if longest {
                    self.pos += 1;
                }
                let pat = self.process(Some('}'))?;
                let v = value.unwrap_or_default();
                Ok(if c == '#' {
                    trim_prefix(&v, &pat, longest)
                } else {
                    trim_suffix(&v, &pat, longest)
                })
            }
            '/' => {
                let all = self.peek() == Some('/');
                if all {
                    self.pos += 1;
                }
                let pat = self.pattern_until_slash()?;
                let repl = if self.chars.get(self.pos.wrapping_sub(1)) == Some(&'}') {
                    String::new()
                } else {
                    self.process(Some('}'))?
                };
                Ok(replace(&value.unwrap_or_default(), &pat, &repl, all))
            }
            other => Err(LexError(format!(
                "unsupported modifier ({other}) in substitution ${{{name}{other}…}}"
            ))),
        }
    }

    /// The pattern of `${VAR/pat/repl}`: up to an unescaped `/` (consumed) or `}` (consumed).
    fn pattern_until_slash(&mut self) -> Result<String, LexError> {
        let mut out = String::new();
        loop {
            match self.next() {
                None => return Err(LexError("missing '}' in variable expansion".into())),
                Some('/') | Some('}') => return Ok(out),
                Some(c) if c == self.escape => {
                    if let Some(n) = self.next() {
                        out.push(n);
                    }
                }
                Some('$') => out.push_str(&self.dollar()?),
                Some(c) => out.push(c),
            }
        }
    }

    fn modifier(
        &mut self,
        name: &str,
        m: char,
        value: Option<String>,
        set: bool,
        word: String,
        colon: bool,
    ) -> Result<String, LexError> {
        match m {
            '-' => Ok(if set { value.unwrap_or_default() } else { word }),
            '+' => Ok(if set { word } else { String::new() }),
            '?' => {
                if set {
                    Ok(value.unwrap_or_default())
                } else if word.is_empty() {
                    Err(LexError(format!("{name}: is not allowed to be unset")))
                } else {
                    Err(LexError(format!("{name}: {word}")))
                }
            }
            other => Err(LexError(format!(
                "unsupported modifier ({}{other}) in substitution",
                if colon { ":" } else { "" }
            ))),
        }
    }
}

/// Shell glob match of the whole `s` against `pat` (`*`, `?`, `\x`), iterative so that no
/// input can make it recurse deeply.
fn glob_match(pat: &[char], s: &[char]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let (mut star_p, mut star_i) = (usize::MAX, 0usize);
    while i < s.len() {
        if p < pat.len() && pat[p] == '\\' && p + 1 < pat.len() && pat[p + 1] == s[i] {
            p += 2;
            i += 1;
        } else if p < pat.len() && (pat[p] == '?' || (pat[p] == s[i] && pat[p] != '*')) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == '*' {
            star_p = p;
            star_i = i;
            p += 1;
        } else if star_p != usize::MAX {
            p = star_p + 1;
            star_i += 1;
            i = star_i;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == '*' {
        p += 1;
    }
    p == pat.len()
}

fn trim_prefix(v: &str, pat: &str, longest: bool) -> String {
    let (vc, pc): (Vec<char>, Vec<char>) = (v.chars().collect(), pat.chars().collect());
    let lens: Box<dyn Iterator<Item = usize>> = if longest {
        Box::new((0..=vc.len()).rev())
    } else {
        Box::new(0..=vc.len())
    };
    for n in lens {
        if glob_match(&pc, &vc[..n]) {
            return vc[n..].iter().collect();
        }
    }
    v.to_string()
}

fn trim_suffix(v: &str, pat: &str, longest: bool) -> String {
    let (vc, pc): (Vec<char>, Vec<char>) = (v.chars().collect(), pat.chars().collect());
    let starts: Box<dyn Iterator<Item = usize>> = if longest {
        Box::new(0..=vc.len())
    } else {
        Box::new((0..=vc.len()).rev())
    };
    for start in starts {
        if glob_match(&pc, &vc[start..]) {
            return vc[..start].iter().collect();
        }
    }
    v.to_string()
}

fn replace(v: &str, pat: &str, repl: &str, all: bool) -> String {
    let (vc, pc): (Vec<char>, Vec<char>) = (v.chars().collect(), pat.chars().collect());
    if pc.is_empty() {
        return v.to_string();
    }
    let mut out = String::new();
    let mut i = 0;
    let mut replaced = false;
    while i < vc.len() {
        if !replaced || all {
            // Longest match starting at i, as the shell does.
            if let Some(end) = (i + 1..=vc.len())
                .rev()
                .find(|&end| glob_match(&pc, &vc[i..end]))
            {
                out.push_str(repl);
                i = end;
                replaced = true;
                continue;
            }
        }
        out.push(vc[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env() -> BTreeMap<String, String> {
        [
            ("A", "a"),
            ("EMPTY", ""),
            ("V", "v1.2.3"),
            ("P", "/usr/lib/x.so"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn ex(word: &str) -> String {
        ex_esc(word, '\\')
    }

    fn ex_esc(word: &str, escape: char) -> String {
        let env = env();
        expand(word, escape, &|n| env.get(n).cloned())
            .map(|e| e.value)
            .unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn plain_forms() {
        assert_eq!(ex("$A"), "a");
        assert_eq!(ex("${A}"), "a");
        assert_eq!(ex("x${A}y"), "xay");
        assert_eq!(ex("$A-b"), "a-b");
        assert_eq!(ex("$UNSET"), "");
        assert_eq!(ex("$"), "$");
        assert_eq!(ex("a$ b"), "a$ b");
        assert_eq!(ex("$1"), "");
    }

    #[test]
    fn default_and_alternative() {
        assert_eq!(ex("${UNSET:-d}"), "d");
        assert_eq!(ex("${EMPTY:-d}"), "d");
        assert_eq!(ex("${A:-d}"), "a");
        assert_eq!(ex("${UNSET-d}"), "d");
        assert_eq!(ex("${EMPTY-d}"), "");
        assert_eq!(ex("${A:+alt}"), "alt");
        assert_eq!(ex("${EMPTY:+alt}"), "");
        assert_eq!(ex("${EMPTY+alt}"), "alt");
        assert_eq!(ex("${UNSET+alt}"), "");
        assert_eq!(ex("${UNSET:-${A}x}"), "ax");
        assert_eq!(ex("${UNSET:-\"q w\"}"), "q w");
    }

    #[test]
    fn required() {
        assert_eq!(ex("${A:?boom}"), "a");
        assert!(ex("${UNSET:?boom}").starts_with("ERR UNSET: boom"));
        assert!(ex("${UNSET?}").starts_with("ERR"));
        assert_eq!(ex("${EMPTY?x}"), "");
    }

    #[test]
    fn patterns() {
        assert_eq!(ex("${V#v}"), "1.2.3");
        assert_eq!(ex("${V#*.}"), "2.3");
        assert_eq!(ex("${V##*.}"), "3");
        assert_eq!(ex("${V%.*}"), "v1.2");
        assert_eq!(ex("${V%%.*}"), "v1");
        assert_eq!(ex("${P/lib/LIB}"), "/usr/LIB/x.so");
        assert_eq!(ex("${V//./_}"), "v1_2_3");
        assert_eq!(ex("${V/./}"), "v12.3");
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(ex("'$A'"), "$A");
        assert_eq!(ex("\"$A\""), "a");
        assert_eq!(ex("\\$A"), "$A");
        assert_eq!(ex("\"\\$A\""), "$A");
        assert_eq!(ex("\"a\\b\""), "a\\b");
        assert_eq!(ex("a\\ b"), "a b");
        assert_eq!(ex("end\\"), "end\\");
        assert_eq!(ex_esc("`$A", '`'), "$A");
        assert_eq!(ex_esc("c:\\dir\\$A", '`'), "c:\\dir\\a");
        assert!(ex("'open").starts_with("ERR"));
        assert!(ex("\"open").starts_with("ERR"));
    }

    #[test]
    fn bad_substitutions() {
        assert!(ex("${").starts_with("ERR"));
        assert!(ex("${A").starts_with("ERR"));
        assert!(ex("${}").starts_with("ERR"));
        assert!(ex("${A:-x").starts_with("ERR"));
        assert!(ex("${A^^}").starts_with("ERR"));
    }

    #[test]
    fn used_names_are_reported() {
        let env = env();
        let e = expand("${A}-${UNSET:-$V}", '\\', &|n| env.get(n).cloned()).unwrap();
        assert_eq!(
            e.used.into_iter().collect::<Vec<_>>(),
            ["A", "UNSET", "V"].map(String::from)
        );
        let e = expand("'$A'", '\\', &|n| env.get(n).cloned()).unwrap();
        assert!(e.used.is_empty());
    }

    #[test]
    fn words() {
        assert_eq!(split_words("A=1 B", '\\'), ["A=1", "B"]);
        assert_eq!(
            split_words("  A=\"x y\"   B='p q' ", '\\'),
            ["A=\"x y\"", "B='p q'"]
        );
        assert_eq!(split_words("A=x\\ y", '\\'), ["A=x\\ y"]);
        assert_eq!(split_words("A=x` y", '`'), ["A=x` y"]);
        assert!(split_words("", '\\').is_empty());
    }
}
