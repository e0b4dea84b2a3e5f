//! RUN heredocs the parser does not take itself: a heredoc that is not the
//! first word of the command (`RUN python3 - <<EOF`, `RUN cat <<EOF > f`),
//! and several heredocs in one RUN (`RUN cat <<A > a && cat <<B > b`).
//! BuildKit reads every `<<WORD` of a RUN line (outside quotes) as a
//! heredoc whose body follows the line, one after the other.
//!
//! Their bodies are blanked (every byte but newlines becomes a space, so
//! every offset stays where it was) before the text is parsed, and handed
//! back by the offset of their instruction's keyword: the instruction's
//! extent and canonical text take them from the original text, so a change
//! in a body changes the content key as a change anywhere else does.

use std::collections::BTreeMap;
use std::ops::Range;

/// The text with those heredoc bodies blanked, and the body ranges (the
/// body's lines, up to the start of its terminator line) with the end of
/// the last terminator line, by the offset of their RUN keyword.
pub(crate) struct Masked {
    pub(crate) text: String,
    pub(crate) bodies: BTreeMap<usize, (Vec<Range<usize>>, usize)>,
}

/// `None` when no RUN needs it (the text is parsed as it is).
pub(crate) fn mask(text: &str) -> Option<Masked> {
    let escape = escape_char(text);
    // (start, end without the newline) of every line.
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            lines.push((start, i));
            start = i + 1;
        }
    }
    if start < text.len() {
        lines.push((start, text.len()));
    }
    let mut masked: Option<Vec<u8>> = None;
    let mut bodies = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let (ls, le) = lines[i];
        let line = &text[ls..le];
        let keyword_at = ls + (line.len() - line.trim_start().len());
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            i += 1;
            continue;
        };
        if first.starts_with('#') {
            i += 1;
            continue;
        }
        // The logical line: continuation lines joined.
        let mut j = i;
        let mut logical = String::new();
        loop {
            let l = &text[lines[j].0..lines[j].1];
            let t = l.trim_end();
            if t.ends_with(escape) && j + 1 < lines.len() {
                logical.push_str(&t[..t.len() - escape.len_utf8()]);
                logical.push(' ');
                j += 1;
            } else {
                logical.push_str(l);
                break;
            }
        }
        let is_run = first.eq_ignore_ascii_case("RUN");
        let heredoc_kw =
            is_run || first.eq_ignore_ascii_case("COPY") || first.eq_ignore_ascii_case("ADD");
        if !heredoc_kw {
            i = j + 1;
            continue;
        }
        let args = logical.trim_start()[first.len()..].trim_start();
        let markers = markers(args);
        if markers.is_empty() {
            i = j + 1;
            continue;
        }
        // Where each body ends: its terminator line.
        let mut k = j + 1;
        let mut ranges = Vec::new();
        let mut last_end = lines[j].1;
        let mut complete = true;
        for (word, strip_tabs) in &markers {
            let body_start = lines.get(k).map_or(text.len(), |l| l.0);
            let mut t = k;
            while t < lines.len() {
                let l = &text[lines[t].0..lines[t].1];
                let l = if *strip_tabs {
                    l.trim_start_matches('\t')
                } else {
                    l
                };
                if l == word {
                    break;
                }
                t += 1;
            }
            if t == lines.len() {
                complete = false;
                break;
            }
            ranges.push(body_start..lines[t].0);
            last_end = lines[t].1;
            k = t + 1;
        }
        if !complete {
            // Unterminated: the parser says so where it finds it.
            i = j + 1;
            continue;
        }
        // What the parser takes itself: COPY/ADD heredoc sources, and a
        // RUN whose one heredoc is its command's first word.
        let parser_takes = !is_run || (markers.len() == 1 && command_starts_with_heredoc(args));
        if !parser_takes {
            // Every body and terminator line, from the first body line on.
            let m = masked.get_or_insert_with(|| text.as_bytes().to_vec());
            let from = lines.get(j + 1).map_or(last_end, |l| l.0);
            for b in &mut m[from..last_end] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
            bodies.insert(keyword_at, (ranges, last_end));
        }
        i = k;
    }
    let m = masked?;
    // Only ASCII bytes were replaced by spaces, whole lines at a time:
    // the text is still UTF-8.
    String::from_utf8(m)
        .ok()
        .map(|text| Masked { text, bodies })
}

/// The escape character of the `# escape=` parser directive (default `\`).
fn escape_char(text: &str) -> char {
    for line in text.lines() {
        let t = line.trim();
        let Some(d) = t.strip_prefix('#') else {
            break;
        };
        let d = d.trim();
        if let Some((k, v)) = d.split_once('=')
            && k.trim().eq_ignore_ascii_case("escape")
        {
            return if v.trim() == "`" { '`' } else { '\\' };
        }
    }
    '\\'
}

/// Whether the command (after `--flag` options) starts with `<<`.
fn command_starts_with_heredoc(args: &str) -> bool {
    let mut rest = args;
    loop {
        rest = rest.trim_start();
        if rest.starts_with("--") {
            rest = rest.split_once(char::is_whitespace).map_or("", |(_, r)| r);
        } else {
            return rest.starts_with("<<");
        }
    }
}

/// Every `<<WORD`, `<<-WORD`, `<<"WORD"`, `<<'WORD'` outside quotes, in
/// order: the terminator and whether leading tabs are stripped. `<<<` (a
/// here-string) is not one.
fn markers(args: &str) -> Vec<(String, bool)> {
    let b = args.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == b'\\' && q == b'"' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            None => {
                if c == b'\\' {
                    i += 2;
                    continue;
                }
                if c == b'\'' || c == b'"' {
                    quote = Some(c);
                    i += 1;
                    continue;
                }
            }
        }
        if c == b'<'
            && b.get(i + 1) == Some(&b'<')
            && b.get(i + 2) != Some(&b'<')
            && (i == 0 || b[i - 1] != b'<')
        {
            let mut j = i + 2;
            let strip = b.get(j) == Some(&b'-');
            if strip {
                j += 1;
            }
            let q = match b.get(j) {
                Some(&q @ (b'"' | b'\'')) => {
                    j += 1;
                    Some(q)
                }
                _ => None,
            };
            let w0 = j;
            while j < b.len()
                && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'_' | b'-' | b'.'))
            {
                j += 1;
            }
            if j > w0 && q.is_none_or(|q| b.get(j) == Some(&q)) {
                out.push((args[w0..j].to_string(), strip));
                if q.is_some() {
                    j += 1;
                }
            }
            i = j.max(i + 2);
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_outside_quotes_in_order() {
        assert_eq!(
            markers("cat <<A > a && cat <<-'B' > b"),
            [("A".to_string(), false), ("B".to_string(), true)]
        );
        assert!(markers("echo '<<A' \"<<B\" <<<here").is_empty());
        assert_eq!(markers("python3 - <<\"EOF\""), [("EOF".to_string(), false)]);
    }

    #[test]
    fn a_heredoc_later_in_the_command_is_blanked_and_given_back() {
        let text = "FROM x\nRUN python3 - <<EOF\nprint(1)\nEOF\nRUN true\n";
        let m = mask(text).unwrap();
        assert_eq!(m.text.len(), text.len());
        assert_eq!(
            m.text,
            "FROM x\nRUN python3 - <<EOF\n        \n   \nRUN true\n"
        );
        let (ranges, end) = &m.bodies[&7];
        assert_eq!(&text[ranges[0].clone()], "print(1)\n");
        assert_eq!(&text[..*end], "FROM x\nRUN python3 - <<EOF\nprint(1)\nEOF");
    }

    #[test]
    fn what_the_parser_takes_is_left_alone() {
        assert!(mask("FROM x\nRUN <<EOF\necho hi\nEOF\nCOPY <<A /a\nx\nA\n").is_none());
        // Not a heredoc at all.
        assert!(mask("FROM x\nRUN echo '<<EOF'\n").is_none());
    }

    #[test]
    fn two_heredocs_and_continuation_lines() {
        let text = "FROM x\nRUN --mount=type=cache,target=/c \\\n  cat <<A > /a && cat <<-B > /b\na\nA\n\tb\n\tB\nRUN true\n";
        let m = mask(text).unwrap();
        let (ranges, _) = &m.bodies[&7];
        assert_eq!(&text[ranges[0].clone()], "a\n");
        assert_eq!(&text[ranges[1].clone()], "\tb\n");
        assert!(m.text.ends_with("\nRUN true\n"));
        assert!(!m.text.contains("\tb"));
    }
}
