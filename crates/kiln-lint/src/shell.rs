//! Enough of POSIX shell to read the `docker build` command lines of a CI
//! step: words with quotes removed and the file position of every character,
//! line continuations, comments, command separators, redirections and
//! heredocs, and expansions kept as written (`$X` canonicalised to `${X}`,
//! `${{ … }}`, `$(…)` and backquotes kept whole). [`resolve`] substitutes
//! variables into a text, returning every value it can have.
//!
//! It never runs anything: command substitutions stay as text.

use crate::yaml::Pos;

/// Values one text may resolve to, at most this many.
const MAX_ALTS: usize = 16;
/// How deep variables may refer to variables.
const MAX_DEPTH: usize = 8;

/// A word after quote removal, with the position of each character.
#[derive(Debug, Clone, Default)]
pub struct Word {
    pub text: String,
    pub pos: Vec<Pos>,
    /// The word is exactly one unquoted `$X` / `${X}`: it splits into fields.
    pub bare_var: Option<String>,
}

impl Word {
    pub fn start(&self) -> Pos {
        self.pos.first().copied().unwrap_or_default()
    }
    fn push(&mut self, c: char, p: Pos) {
        self.text.push(c);
        self.pos.push(p);
    }
    fn push_str(&mut self, s: &str, p: Pos) {
        for c in s.chars() {
            self.push(c, p);
        }
    }
    /// The characters from byte offset `at` on, as a word.
    pub fn tail(&self, at: usize) -> Word {
        let skip = self.text[..at.min(self.text.len())].chars().count();
        Word {
            text: self.text.get(at..).unwrap_or("").to_string(),
            pos: self.pos.iter().skip(skip).copied().collect(),
            bare_var: None,
        }
    }
    /// The position of the character at byte offset `at`.
    pub fn pos_at(&self, at: usize) -> Pos {
        let n = self.text[..at.min(self.text.len())].chars().count();
        self.pos.get(n).copied().unwrap_or_else(|| self.start())
    }
}

/// What separates a command from the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sep {
    Start,
    Newline,
    Semi,
    And,
    Or,
    Pipe,
    Amp,
}

/// One simple command: its words and its redirections (`>>`, target).
#[derive(Debug, Clone)]
pub struct Command {
    pub words: Vec<Word>,
    pub redirects: Vec<(String, Word)>,
    pub after: Sep,
}

struct Lexer<'a> {
    c: &'a [char],
    p: &'a [Pos],
    i: usize,
    cmds: Vec<Command>,
    words: Vec<Word>,
    redirects: Vec<(String, Word)>,
    cur: Word,
    started: bool,
    parts: usize,
    bare: Option<String>,
    sep: Sep,
    pending_heredocs: Vec<(String, bool)>,
    want_redirect: Option<String>,
}

/// Splits a script into simple commands.
#[must_use]
pub fn parse(chars: &[char], pos: &[Pos]) -> Vec<Command> {
    let mut l = Lexer {
        c: chars,
        p: pos,
        i: 0,
        cmds: Vec::new(),
        words: Vec::new(),
        redirects: Vec::new(),
        cur: Word::default(),
        started: false,
        parts: 0,
        bare: None,
        sep: Sep::Start,
        pending_heredocs: Vec::new(),
        want_redirect: None,
    };
    l.run();
    l.cmds
}

impl Lexer<'_> {
    fn at(&self, k: usize) -> Option<char> {
        self.c.get(k).copied()
    }
    fn pos(&self, k: usize) -> Pos {
        self.p
            .get(k)
            .or_else(|| self.p.last())
            .copied()
            .unwrap_or_default()
    }

    fn end_word(&mut self) {
        if !self.started {
            return;
        }
        let mut w = std::mem::take(&mut self.cur);
        if self.parts == 1 {
            w.bare_var = self.bare.take();
        }
        self.bare = None;
        self.parts = 0;
        self.started = false;
        if let Some(op) = self.want_redirect.take() {
            if op.starts_with("<<") && op != "<<<" {
                let strip = op == "<<-";
                let delim: String = w.text.chars().filter(|c| *c != '\'' && *c != '"').collect();
                self.pending_heredocs.push((delim, strip));
            }
            self.redirects.push((op, w));
        } else {
            self.words.push(w);
        }
    }

    fn end_command(&mut self, next: Sep) {
        self.end_word();
        if !self.words.is_empty() || !self.redirects.is_empty() {
            self.cmds.push(Command {
                words: std::mem::take(&mut self.words),
                redirects: std::mem::take(&mut self.redirects),
                after: self.sep,
            });
        }
        self.sep = next;
    }

    fn mark(&mut self) {
        self.started = true;
    }

    fn literal(&mut self, c: char, k: usize) {
        if !self.started || self.parts == 0 {
            self.parts += 1;
        }
        if self.bare.is_some() {
            // Text after an expansion: no longer a bare variable.
            self.parts += 1;
        }
        self.mark();
        let p = self.pos(k);
        self.cur.push(c, p);
    }

    /// Reads an expansion starting at `$` (index `k`); appends it to the
    /// current word and returns the index after it.
    fn expansion(&mut self, k: usize, quoted: bool) -> usize {
        let p = self.pos(k);
        let next = self.at(k + 1);
        let start_parts = !self.started;
        self.mark();
        if next == Some('{') && self.at(k + 2) == Some('{') {
            let mut j = k + 3;
            while j < self.c.len() && !(self.at(j) == Some('}') && self.at(j + 1) == Some('}')) {
                j += 1;
            }
            let end = (j + 2).min(self.c.len());
            let s: String = self.c[k..end].iter().collect();
            self.cur.push_str(&s, p);
            self.parts += 2;
            return end;
        }
        if next == Some('{') || next == Some('(') {
            let (open, close) = if next == Some('{') {
                ('{', '}')
            } else {
                ('(', ')')
            };
            let mut depth = 0usize;
            let mut j = k + 1;
            let mut q: Option<char> = None;
            while j < self.c.len() {
                let ch = self.c[j];
                match q {
                    Some(qc) if ch == qc => q = None,
                    Some(_) => {}
                    None if ch == '\'' || ch == '"' => q = Some(ch),
                    None if ch == open => depth += 1,
                    None if ch == close => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    None => {}
                }
                j += 1;
            }
            let end = (j + 1).min(self.c.len());
            let s: String = self.c[k..end].iter().collect();
            self.cur.push_str(&s, p);
            let name: String = s
                .trim_start_matches("${")
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if open == '{' && !quoted && start_parts && s == format!("${{{name}}}") {
                self.bare = Some(name);
                self.parts = 1;
            } else {
                self.parts += 2;
            }
            return end;
        }
        let mut j = k + 1;
        while j < self.c.len() && (self.c[j].is_ascii_alphanumeric() || self.c[j] == '_') {
            j += 1;
        }
        if j == k + 1 {
            // `$?`, `$@`, `$1`… or a lone `$`.
            if let Some(c) = next.filter(|c| "?@*#!$-0123456789".contains(*c)) {
                self.cur.push('$', p);
                self.cur.push(c, p);
                self.parts += 2;
                return k + 2;
            }
            self.literal('$', k);
            return k + 1;
        }
        let name: String = self.c[k + 1..j].iter().collect();
        self.cur.push_str(&format!("${{{name}}}"), p);
        if !quoted && start_parts {
            self.bare = Some(name);
            self.parts = 1;
        } else {
            self.parts += 2;
        }
        j
    }

    fn skip_heredocs(&mut self) {
        let docs = std::mem::take(&mut self.pending_heredocs);
        for (delim, strip) in docs {
            loop {
                if self.i >= self.c.len() {
                    return;
                }
                let start = self.i;
                while self.i < self.c.len() && self.c[self.i] != '\n' {
                    self.i += 1;
                }
                let line: String = self.c[start..self.i].iter().collect();
                self.i += 1;
                let l = if strip {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if l.trim_end() == delim {
                    break;
                }
            }
        }
    }

    fn run(&mut self) {
        while self.i < self.c.len() {
            let c = self.c[self.i];
            let k = self.i;
            match c {
                '\\' => {
                    match self.at(k + 1) {
                        Some('\n') => {}
                        Some(n) => self.literal(n, k + 1),
                        None => {}
                    }
                    self.i += 2;
                }
                '#' if !self.started => {
                    while self.i < self.c.len() && self.c[self.i] != '\n' {
                        self.i += 1;
                    }
                }
                ' ' | '\t' | '\r' => {
                    self.end_word();
                    self.i += 1;
                }
                '\n' => {
                    self.end_command(Sep::Newline);
                    self.i += 1;
                    self.skip_heredocs();
                }
                ';' => {
                    self.end_command(Sep::Semi);
                    self.i += if self.at(k + 1) == Some(';') { 2 } else { 1 };
                }
                '&' if self.at(k + 1) == Some('&') => {
                    self.end_command(Sep::And);
                    self.i += 2;
                }
                '|' if self.at(k + 1) == Some('|') => {
                    self.end_command(Sep::Or);
                    self.i += 2;
                }
                '|' => {
                    self.end_command(Sep::Pipe);
                    self.i += 1;
                }
                '&' if self.at(k + 1) != Some('>') => {
                    self.end_command(Sep::Amp);
                    self.i += 1;
                }
                '(' | ')' => {
                    self.end_command(Sep::Semi);
                    self.i += 1;
                }
                '>' | '<' | '&' => {
                    // A redirection; a preceding all-digit word is its fd.
                    if self.started && self.cur.text.chars().all(|c| c.is_ascii_digit()) {
                        self.cur = Word::default();
                        self.started = false;
                        self.parts = 0;
                        self.bare = None;
                    } else {
                        self.end_word();
                    }
                    let mut op = String::new();
                    let mut j = k;
                    while j < self.c.len() && "<>&-".contains(self.c[j]) && op.len() < 3 {
                        op.push(self.c[j]);
                        j += 1;
                    }
                    self.i = j;
                    // `>&2`, `2>&1`: a descriptor, not a file.
                    if op.ends_with('&') {
                        while self.i < self.c.len() && self.c[self.i].is_ascii_digit() {
                            self.i += 1;
                        }
                        continue;
                    }
                    self.want_redirect = Some(op);
                }
                '\'' => {
                    self.mark();
                    self.parts += 2;
                    let mut j = k + 1;
                    while j < self.c.len() && self.c[j] != '\'' {
                        let p = self.pos(j);
                        self.cur.push(self.c[j], p);
                        j += 1;
                    }
                    self.i = j + 1;
                }
                '"' => {
                    self.mark();
                    self.parts += 2;
                    let mut j = k + 1;
                    while j < self.c.len() && self.c[j] != '"' {
                        match self.c[j] {
                            '\\' if matches!(self.at(j + 1), Some('"' | '\\' | '$' | '`')) => {
                                let p = self.pos(j + 1);
                                self.cur.push(self.c[j + 1], p);
                                j += 2;
                            }
                            '\\' if self.at(j + 1) == Some('\n') => j += 2,
                            '$' => j = self.expansion(j, true),
                            '`' => j = self.backquote(j),
                            ch => {
                                let p = self.pos(j);
                                self.cur.push(ch, p);
                                j += 1;
                            }
                        }
                    }
                    self.i = j + 1;
                }
                '$' => self.i = self.expansion(k, false),
                '`' => {
                    self.mark();
                    self.parts += 2;
                    self.i = self.backquote(k);
                }
                _ => {
                    self.literal(c, k);
                    self.i += 1;
                }
            }
        }
        self.end_command(Sep::Newline);
    }

    fn backquote(&mut self, k: usize) -> usize {
        let mut j = k + 1;
        while j < self.c.len() && self.c[j] != '`' {
            j += 1;
        }
        let end = (j + 1).min(self.c.len());
        let p = self.pos(k);
        let s: String = self.c[k..end].iter().collect();
        self.cur.push_str(&s, p);
        end
    }
}

/// Splits a value (already without quotes) into fields at whitespace, as an
/// unquoted expansion splits; `${…}`, `${{ … }}` and `$(…)` stay whole.
#[must_use]
pub fn split_fields(w: &Word) -> Vec<Word> {
    let chars: Vec<char> = w.text.chars().collect();
    let mut out = Vec::new();
    let mut cur = Word::default();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let p = w.pos.get(i).copied().unwrap_or_else(|| w.start());
        if c == '$' && matches!(chars.get(i + 1), Some('{' | '(')) {
            depth += 1;
            cur.push(c, p);
            cur.push(chars[i + 1], p);
            i += 2;
            continue;
        }
        if depth > 0 && (c == '}' || c == ')') {
            // `${{ x }}` closes with two braces.
            if !(c == '}' && chars.get(i + 1) == Some(&'}')) {
                depth -= 1;
            }
            cur.push(c, p);
            i += 1;
            continue;
        }
        if depth == 0 && c.is_whitespace() {
            if !cur.text.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c, p);
        }
        i += 1;
    }
    if !cur.text.is_empty() {
        out.push(cur);
    }
    for f in &mut out {
        f.bare_var = bare_name(&f.text);
    }
    out
}

fn bare_name(t: &str) -> Option<String> {
    let inner = t.strip_prefix("${")?.strip_suffix('}')?;
    (!inner.is_empty() && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| inner.to_string())
}

/// Where [`resolve`] looks values up.
pub trait Lookup {
    /// The values of a variable (`${X}`), if known.
    fn var(&self, name: &str) -> Option<Vec<String>>;
    /// The values of a GitHub expression (`${{ expr }}`), if known.
    fn expr(&self, expr: &str) -> Option<Vec<String>>;
}

/// The canonical text of an unknown GitHub expression: `github.sha` and the
/// run numbers as the variables the runner also sets, `env.X` as `${X}`.
#[must_use]
pub fn canonical_expr(expr: &str) -> String {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    match e.as_str() {
        "github.sha" => "${GITHUB_SHA}".into(),
        "github.run_number" => "${GITHUB_RUN_NUMBER}".into(),
        "github.run_id" => "${GITHUB_RUN_ID}".into(),
        "github.run_attempt" => "${GITHUB_RUN_ATTEMPT}".into(),
        "github.ref_name" => "${GITHUB_REF_NAME}".into(),
        "github.repository" => "${GITHUB_REPOSITORY}".into(),
        _ => match e.strip_prefix("env.") {
            Some(n) if n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                format!("${{{n}}}")
            }
            _ => format!("${{{{ {e} }}}}"),
        },
    }
}

fn product(acc: Vec<String>, alts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for a in &acc {
        for b in alts {
            if out.len() >= MAX_ALTS {
                return out;
            }
            let s = format!("{a}{b}");
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// Every value `text` can have: variables and expressions substituted from
/// `lk` (each with all its values), unknown ones kept in canonical form,
/// command substitutions kept as text.
#[must_use]
pub fn resolve(text: &str, lk: &dyn Lookup) -> Vec<String> {
    resolve_depth(text, lk, 0)
}

fn resolve_depth(text: &str, lk: &dyn Lookup, depth: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut acc = vec![String::new()];
    let mut lit = String::new();
    let mut i = 0;
    let flush = |acc: Vec<String>, lit: &mut String| {
        let out = product(acc, &[std::mem::take(lit)]);
        if out.is_empty() {
            vec![String::new()]
        } else {
            out
        }
    };
    while i < chars.len() {
        if chars[i] != '$' {
            lit.push(chars[i]);
            i += 1;
            continue;
        }
        let rest: String = chars[i..].iter().collect();
        if let Some(body) = rest.strip_prefix("${{") {
            let Some(end) = body.find("}}") else {
                lit.push_str(&rest);
                break;
            };
            let expr = body[..end].trim();
            acc = flush(acc, &mut lit);
            let vals = match lk.expr(expr) {
                Some(v) if depth < MAX_DEPTH && !v.is_empty() => v
                    .iter()
                    .flat_map(|x| resolve_depth(x, lk, depth + 1))
                    .collect(),
                _ => {
                    let c = canonical_expr(expr);
                    match c.strip_prefix("${").and_then(|n| n.strip_suffix('}')) {
                        Some(n) if !n.starts_with('{') => {
                            lookup_var(n, None, lk, depth).unwrap_or_else(|| vec![c.clone()])
                        }
                        _ => vec![c],
                    }
                }
            };
            acc = product(acc, &vals);
            i += 3 + body[..end].chars().count() + 2;
            continue;
        }
        if let Some(body) = rest.strip_prefix("${") {
            let Some(end) = body.find('}') else {
                lit.push_str(&rest);
                break;
            };
            let inner = &body[..end];
            let name: String = inner
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let op = &inner[name.len()..];
            let default = op
                .strip_prefix(":-")
                .or_else(|| op.strip_prefix('-'))
                .or_else(|| op.strip_prefix(":="));
            acc = flush(acc, &mut lit);
            let vals = lookup_var(&name, default, lk, depth)
                .unwrap_or_else(|| vec![format!("${{{name}}}")]);
            acc = product(acc, &vals);
            i += 2 + body[..end].chars().count() + 1;
            continue;
        }
        lit.push('$');
        i += 1;
    }
    flush(acc, &mut lit)
}

fn lookup_var(
    name: &str,
    default: Option<&str>,
    lk: &dyn Lookup,
    depth: usize,
) -> Option<Vec<String>> {
    if depth >= MAX_DEPTH || name.is_empty() {
        return None;
    }
    match lk.var(name) {
        Some(v) if !v.is_empty() => Some(
            v.iter()
                .flat_map(|x| resolve_depth(x, lk, depth + 1))
                .take(MAX_ALTS)
                .collect(),
        ),
        _ => default.map(|d| resolve_depth(d, lk, depth + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lex(s: &str) -> Vec<Command> {
        let chars: Vec<char> = s.chars().collect();
        let mut pos = Vec::new();
        let (mut line, mut col) = (1, 1);
        for c in &chars {
            pos.push(Pos { line, col });
            if *c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        parse(&chars, &pos)
    }

    fn texts(c: &Command) -> Vec<&str> {
        c.words.iter().map(|w| w.text.as_str()).collect()
    }

    #[test]
    fn words_quotes_continuations() {
        let c = lex(
            "docker buildx build \\\n  --cache-from \"type=registry,ref=${CACHE}\" \\\n  -t 'a b' $TAG . # done\necho x",
        );
        assert_eq!(c.len(), 2);
        assert_eq!(
            texts(&c[0]),
            [
                "docker",
                "buildx",
                "build",
                "--cache-from",
                "type=registry,ref=${CACHE}",
                "-t",
                "a b",
                "${TAG}",
                "."
            ]
        );
        assert_eq!(c[0].words[3].start(), Pos { line: 2, col: 3 });
        assert_eq!(c[0].words[7].bare_var.as_deref(), Some("TAG"));
        assert_eq!(c[0].words[4].bare_var, None);
    }

    #[test]
    fn separators_and_redirects() {
        let c = lex(
            "if docker buildx imagetools inspect \"$R\" >/dev/null 2>&1; then X=1; fi\necho \"a=b\" >> \"$GITHUB_OUTPUT\"",
        );
        assert_eq!(
            texts(&c[0]),
            ["if", "docker", "buildx", "imagetools", "inspect", "${R}"]
        );
        assert_eq!(c[0].redirects[0].1.text, "/dev/null");
        assert_eq!(texts(&c[1]), ["then", "X=1"]);
        assert_eq!(texts(&c[2]), ["fi"]);
        assert_eq!(c[3].redirects[0].0, ">>");
        assert_eq!(c[3].redirects[0].1.text, "${GITHUB_OUTPUT}");
        let c = lex("a && b || c | d");
        let seps: Vec<Sep> = c.iter().map(|c| c.after).collect();
        assert_eq!(seps, [Sep::Start, Sep::And, Sep::Or, Sep::Pipe]);
    }

    #[test]
    fn expressions_stay_whole() {
        let c = lex(
            "docker build -t ${{ env.IMAGE }}:${{ github.sha }} $(git rev-parse --short HEAD) .",
        );
        assert_eq!(texts(&c[0])[3], "${{ env.IMAGE }}:${{ github.sha }}");
        assert_eq!(texts(&c[0])[4], "$(git rev-parse --short HEAD)");
    }

    #[test]
    fn heredocs_are_skipped() {
        let c = lex("cat <<EOF > f\ndocker build --push .\nEOF\necho done");
        assert_eq!(c.len(), 2);
        assert_eq!(texts(&c[1]), ["echo", "done"]);
    }

    struct Map(HashMap<&'static str, Vec<String>>);
    impl Lookup for Map {
        fn var(&self, n: &str) -> Option<Vec<String>> {
            self.0.get(n).cloned()
        }
        fn expr(&self, _: &str) -> Option<Vec<String>> {
            None
        }
    }

    #[test]
    fn resolves_alternatives() {
        let m = Map(HashMap::from([
            ("IMG", vec!["repo/app".to_string()]),
            (
                "TAG",
                vec!["${{ inputs.tag }}".to_string(), "${IMAGE_TAG}".to_string()],
            ),
        ]));
        assert_eq!(
            resolve("${IMG}:${TAG}", &m),
            ["repo/app:${{ inputs.tag }}", "repo/app:${IMAGE_TAG}"]
        );
        assert_eq!(resolve("${NOPE:-x}-${{ env.IMG }}", &m), ["x-repo/app"]);
        assert_eq!(resolve("${{ github.sha }}", &m), ["${GITHUB_SHA}"]);
    }

    #[test]
    fn fields_split_outside_expansions() {
        let w = Word {
            text: " --cache-from type=registry,ref=${{ env.A }} -t x".into(),
            pos: vec![Pos::default(); 48],
            bare_var: None,
        };
        let f: Vec<String> = split_fields(&w).into_iter().map(|w| w.text).collect();
        assert_eq!(
            f,
            ["--cache-from", "type=registry,ref=${{ env.A }}", "-t", "x"]
        );
    }
}
