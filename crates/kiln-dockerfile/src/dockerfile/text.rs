//! Source positions: where each instruction starts and ends, and the canonical form of its
//! text that the needed-text hash is computed over.

use parse_dockerfile as pd;
use std::ops::Range;

/// Byte offset → 1-based line.
pub(crate) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(crate) fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { starts }
    }

    pub(crate) fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

/// The byte range of one instruction in the source, from its keyword to the end of its
/// last line (the heredoc terminator line included), and the ranges of its heredoc bodies.
pub(crate) fn instruction_extent(
    text: &str,
    inst: &pd::Instruction<'_>,
) -> (Range<usize>, Vec<Range<usize>>) {
    let mut spans = Vec::new();
    let mut heredocs = Vec::new();
    collect(inst, &mut spans, &mut heredocs);
    let start = spans.iter().map(|s| s.start).min().unwrap_or(0);
    let plain_end = spans.iter().map(|s| s.end).max().unwrap_or(start);
    let here_end = heredocs.iter().map(|s| s.end).max();
    let end = match here_end {
        // The heredoc body ends where its terminator line starts: take that line too.
        Some(h) if h >= plain_end => line_end(text, h),
        _ => line_end(text, plain_end.saturating_sub(1).max(start)),
    };
    (
        start.min(text.len())..end.max(start).min(text.len()),
        heredocs,
    )
}

fn line_end(text: &str, from: usize) -> usize {
    let from = from.min(text.len());
    text.as_bytes()[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |p| from + p)
}

fn flags(options: &[pd::Flag<'_>], spans: &mut Vec<Range<usize>>) {
    spans.extend(options.iter().map(pd::Flag::span));
}

fn command(c: &pd::Command<'_>, spans: &mut Vec<Range<usize>>) {
    match c {
        pd::Command::Exec(e) => spans.push(e.span.clone()),
        pd::Command::Shell(s) => spans.push(s.span.clone()),
        _ => {}
    }
}

fn collect(
    inst: &pd::Instruction<'_>,
    spans: &mut Vec<Range<usize>>,
    heredocs: &mut Vec<Range<usize>>,
) {
    use pd::Instruction as I;
    let sources = |src: &[pd::Source<'_>],
                   spans: &mut Vec<Range<usize>>,
                   heredocs: &mut Vec<Range<usize>>| {
        for s in src {
            match s {
                pd::Source::Path(p) => spans.push(p.span.clone()),
                pd::Source::HereDoc(h) => heredocs.push(h.span.clone()),
                _ => {}
            }
        }
    };
    match inst {
        I::Add(i) => {
            spans.push(i.add.span.clone());
            flags(&i.options, spans);
            sources(&i.src, spans, heredocs);
            spans.push(i.dest.span.clone());
        }
        I::Copy(i) => {
            spans.push(i.copy.span.clone());
            flags(&i.options, spans);
            sources(&i.src, spans, heredocs);
            spans.push(i.dest.span.clone());
        }
        I::Arg(i) => {
            spans.push(i.arg.span.clone());
            spans.push(i.arguments.span.clone());
        }
        I::Env(i) => {
            spans.push(i.env.span.clone());
            spans.push(i.arguments.span.clone());
        }
        I::Label(i) => {
            spans.push(i.label.span.clone());
            spans.push(i.arguments.span.clone());
        }
        I::Cmd(i) => {
            spans.push(i.cmd.span.clone());
            command(&i.arguments, spans);
        }
        I::Entrypoint(i) => {
            spans.push(i.entrypoint.span.clone());
            command(&i.arguments, spans);
        }
        I::Run(i) => {
            spans.push(i.run.span.clone());
            flags(&i.options, spans);
            command(&i.arguments, spans);
            heredocs.extend(i.here_docs.iter().map(|h| h.span.clone()));
        }
        I::Expose(i) => {
            spans.push(i.expose.span.clone());
            spans.extend(i.arguments.iter().map(|a| a.span.clone()));
        }
        I::From(i) => {
            spans.push(i.from.span.clone());
            flags(&i.options, spans);
            spans.push(i.image.span.clone());
            if let Some((k, n)) = &i.as_ {
                spans.push(k.span.clone());
                spans.push(n.span.clone());
            }
        }
        I::Healthcheck(i) => {
            spans.push(i.healthcheck.span.clone());
            flags(&i.options, spans);
            match &i.arguments {
                pd::HealthcheckArguments::Cmd { cmd, arguments, .. } => {
                    spans.push(cmd.span.clone());
                    command(arguments, spans);
                }
                pd::HealthcheckArguments::None { none, .. } => spans.push(none.span.clone()),
                _ => {}
            }
        }
        I::Maintainer(i) => {
            spans.push(i.maintainer.span.clone());
            spans.push(i.name.span.clone());
        }
        I::Onbuild(i) => {
            spans.push(i.onbuild.span.clone());
            collect(&i.instruction, spans, heredocs);
        }
        I::Shell(i) => {
            spans.push(i.shell.span.clone());
            spans.extend(i.arguments.iter().map(|a| a.span.clone()));
        }
        I::Stopsignal(i) => {
            spans.push(i.stopsignal.span.clone());
            spans.push(i.arguments.span.clone());
        }
        I::User(i) => {
            spans.push(i.user.span.clone());
            spans.push(i.arguments.span.clone());
        }
        I::Volume(i) => {
            spans.push(i.volume.span.clone());
            match &i.arguments {
                pd::JsonOrStringArray::Json(j) => spans.push(j.span.clone()),
                pd::JsonOrStringArray::String(v) => spans.extend(v.iter().map(|a| a.span.clone())),
            }
        }
        I::Workdir(i) => {
            spans.push(i.workdir.span.clone());
            spans.push(i.arguments.span.clone());
        }
        _ => {}
    }
}

/// The canonical form of one instruction's source text: its first line, then each
/// continuation line that is neither blank nor a comment, every line with trailing
/// whitespace removed — except heredoc bodies and their terminators, which are kept
/// byte for byte. Lines are joined with `\n`.
pub(crate) fn canonical(
    text: &str,
    range: Range<usize>,
    heredocs: &[Range<usize>],
    lines: &Lines,
) -> String {
    let Some(src) = text.get(range.clone()) else {
        return String::new();
    };
    let here_lines: Vec<(usize, usize)> = heredocs
        .iter()
        .map(|h| (lines.line_of(h.start), lines.line_of(h.end)))
        .collect();
    let first_line = lines.line_of(range.start);
    let mut out = Vec::new();
    for (n, line) in src.split('\n').enumerate() {
        let lineno = first_line + n;
        if here_lines
            .iter()
            .any(|&(a, b)| a <= lineno && lineno <= b && n > 0)
        {
            out.push(line.to_string());
            continue;
        }
        let trimmed = line.trim_end();
        let t = trimmed.trim_start();
        if n > 0 && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        out.push(trimmed.to_string());
    }
    out.join("\n")
}
