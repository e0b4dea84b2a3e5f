//! Source files and diagnostics: every error the evaluator reports carries a
//! summary, a detail and, where there is one, a span that renders as
//! `file:line:col` with the source line and a caret.

use std::fmt;
use std::sync::OnceLock;

use crate::ast::Span;

/// One loaded bake file.
#[derive(Clone, Debug)]
pub struct Source {
    /// The name as given on the command line (`-f`), used in messages.
    pub name: String,
    pub text: String,
    /// Where each line starts, found on the first position asked for: only
    /// diagnostics need it, and it would otherwise cost a word per line of
    /// every file loaded.
    line_starts: OnceLock<Box<[usize]>>,
}

impl Source {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source {
            name: name.into(),
            text: text.into(),
            line_starts: OnceLock::new(),
        }
    }

    fn line_starts(&self) -> &[usize] {
        self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        })
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line_starts = self.line_starts();
        let line = match line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = line_starts[line];
        let col = self
            .text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        (line + 1, col)
    }

    /// The text of a 1-based line, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let line_starts = self.line_starts();
        let Some(&start) = line_starts.get(line.wrapping_sub(1)) else {
            return "";
        };
        let end = line_starts
            .get(line)
            .map(|e| e - 1)
            .unwrap_or(self.text.len());
        self.text
            .get(start..end.max(start))
            .unwrap_or("")
            .trim_end_matches('\r')
    }
}

/// The set of loaded files; `Span::file` indexes it.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub files: Vec<Source>,
}

impl Sources {
    pub fn add(&mut self, src: Source) -> u32 {
        self.files.push(src);
        (self.files.len() - 1) as u32
    }
    pub fn get(&self, id: u32) -> Option<&Source> {
        self.files.get(id as usize)
    }
    /// A resolved position for a span.
    pub fn pos(&self, span: Span) -> Option<Pos> {
        let src = self.get(span.file)?;
        let (line, col) = src.line_col(span.start as usize);
        let (end_line, end_col) = src.line_col(span.end as usize);
        Some(Pos {
            file: src.name.clone(),
            line,
            col,
            end_line,
            end_col,
        })
    }
}

/// A resolved source position.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Pos {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub end_line: usize,
    pub end_col: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// One diagnostic.
#[derive(Clone, Debug, PartialEq)]
pub struct Diag {
    pub summary: String,
    pub detail: String,
    pub span: Option<Span>,
}

impl Diag {
    pub fn new(summary: impl Into<String>, detail: impl Into<String>, span: Option<Span>) -> Diag {
        Diag {
            summary: summary.into(),
            detail: detail.into(),
            span,
        }
    }
    pub fn at(span: Span, summary: impl Into<String>, detail: impl Into<String>) -> Diag {
        Diag::new(summary, detail, Some(span))
    }
    pub fn plain(msg: impl Into<String>) -> Diag {
        Diag::new(msg, "", None)
    }
    /// `summary; detail` as HCL prints it.
    pub fn message(&self) -> String {
        if self.detail.is_empty() {
            self.summary.clone()
        } else if self.summary.is_empty() {
            self.detail.clone()
        } else {
            format!("{}; {}", self.summary, self.detail)
        }
    }
}

/// A list of diagnostics (at least one): the evaluator's error type.
#[derive(Clone, Debug, PartialEq)]
pub struct Diags(pub Vec<Diag>);

impl Diags {
    pub fn one(d: Diag) -> Diags {
        Diags(vec![d])
    }
    pub fn plain(msg: impl Into<String>) -> Diags {
        Diags::one(Diag::plain(msg))
    }
    pub fn at(span: Span, summary: impl Into<String>, detail: impl Into<String>) -> Diags {
        Diags::one(Diag::at(span, summary, detail))
    }
    pub fn first(&self) -> Option<&Diag> {
        self.0.first()
    }
}

impl From<Diag> for Diags {
    fn from(d: Diag) -> Self {
        Diags::one(d)
    }
}

/// Renders diagnostics with positions, source lines and carets.
pub fn render(diags: &Diags, sources: &Sources) -> String {
    let mut out = String::new();
    for (i, d) in diags.0.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render_one(d, sources));
    }
    out
}

fn render_one(d: &Diag, sources: &Sources) -> String {
    let mut out = d.message();
    let Some(span) = d.span else {
        return out;
    };
    let (Some(src), Some(pos)) = (sources.get(span.file), sources.pos(span)) else {
        return out;
    };
    let line = src.line_text(pos.line);
    let width = pos.line.to_string().len();
    let caret_len = if pos.end_line == pos.line && pos.end_col > pos.col {
        pos.end_col - pos.col
    } else {
        1
    };
    let lead: String = line
        .chars()
        .take(pos.col.saturating_sub(1))
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    out.push_str(&format!(
        "\n{pad}--> {pos}\n{pad} |\n{ln} | {line}\n{pad} | {lead}{carets}",
        pad = " ".repeat(width),
        ln = pos.line,
        carets = "^".repeat(caret_len.min(line.chars().count().max(1))),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars() {
        let s = Source::new("f.hcl", "a\nbé c\n");
        assert_eq!(s.line_col(0), (1, 1));
        assert_eq!(s.line_col(2), (2, 1));
        assert_eq!(s.line_col(6), (2, 4));
        assert_eq!(s.line_text(2), "bé c");
        assert_eq!(s.line_text(9), "");
    }

    #[test]
    fn render_has_caret_under_span() {
        let mut srcs = Sources::default();
        let id = srcs.add(Source::new("x.hcl", "target \"a\" {\n  tags = nope\n}\n"));
        let d = Diags::at(
            Span::new(id, 22, 26),
            "Unknown variable",
            "There is no variable named \"nope\".",
        );
        let r = render(&d, &srcs);
        assert!(r.contains("--> x.hcl:2:10"), "{r}");
        assert!(r.contains("2 |   tags = nope"), "{r}");
        assert!(r.ends_with("|          ^^^^"), "{r}");
    }
}
