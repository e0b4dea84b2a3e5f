//! From a BuildKit progress step back to the Dockerfile line it came from.
//!
//! BuildKit names the vertex of an instruction `[stage k/n] TEXT`: the
//! stage's name (`stage-N` for an unnamed stage of a file with several,
//! nothing for a file with one; a platform may come first), the
//! instruction's number among the stage's vertex-making instructions, and
//! the instruction as BuildKit prints it. [`step_line`] finds the
//! instruction by its text in that stage, and by its number when the text
//! differs (BuildKit printed it expanded or reworded).
//!
//! Must never: guess a line when neither the text nor the number fits.

use super::{Analysis, InstructionKind, Stage};

/// The 1-based Dockerfile line of the instruction BuildKit named `step`
/// (`[build 3/4] RUN make test`), if the analysis has it.
pub fn step_line(a: &Analysis, step: &str) -> Option<usize> {
    let rest = step.trim().strip_prefix('[')?;
    let (inside, text) = rest.split_once(']')?;
    let words: Vec<&str> = inside.split_whitespace().collect();
    let (k, _) = words.last()?.split_once('/')?;
    let k: usize = k.parse().ok()?;
    // A platform (`linux/amd64`, `linux/amd64->arm64`) has a slash; a stage
    // name never does.
    let stage_word = words
        .len()
        .checked_sub(2)
        .map(|i| words[i])
        .filter(|w| !w.contains('/'));
    let stages: Vec<&Stage> = match stage_word {
        Some(w) => a.stages.iter().filter(|s| stage_is(s, w)).collect(),
        None => a.stages.iter().collect(),
    };
    let want = normalize(text);
    if want.is_empty() {
        return None;
    }
    let by_text = stages.iter().find_map(|s| {
        s.instructions
            .iter()
            .find(|i| text_matches(&normalize(&i.text), &want))
            .map(|i| i.line)
    });
    by_text.or_else(|| {
        let [stage] = stages.as_slice() else {
            return None;
        };
        numbered(stage).nth(k.checked_sub(1)?).map(|i| i.line)
    })
}

/// Whether `word` names `stage` in BuildKit's progress.
fn stage_is(stage: &Stage, word: &str) -> bool {
    match &stage.name {
        Some(n) => n.eq_ignore_ascii_case(word),
        None => word == format!("stage-{}", stage.index),
    }
}

/// The instructions BuildKit numbers in a stage, in order.
fn numbered(stage: &Stage) -> impl Iterator<Item = &super::Instruction> {
    stage.instructions.iter().filter(|i| {
        matches!(
            i.kind,
            InstructionKind::From
                | InstructionKind::Run
                | InstructionKind::Copy
                | InstructionKind::Add
        )
    })
}

/// An instruction's text as one line: continuations joined, comments
/// between them dropped, runs of blanks one space, the keyword upper case.
fn normalize(text: &str) -> String {
    let mut joined = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') && !joined.is_empty() {
            continue;
        }
        let t = t.strip_suffix('\\').unwrap_or(t);
        joined.push(' ');
        joined.push_str(t);
    }
    let mut out = String::with_capacity(joined.len());
    for (i, w) in joined.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
            out.push_str(w);
        } else {
            out.push_str(&w.to_ascii_uppercase());
        }
    }
    out
}

/// The same instruction: equal, or one a prefix of the other over at least
/// 24 characters (BuildKit cuts long names; a heredoc's body is not
/// printed).
fn text_matches(written: &str, shown: &str) -> bool {
    if written == shown {
        return true;
    }
    let n = written.len().min(shown.len());
    n >= 24 && written.is_char_boundary(n) && shown.is_char_boundary(n) && {
        written[..n] == shown[..n]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::dockerfile::analyze;

    const FILE: &str = "\
# syntax=docker/dockerfile:1
ARG BASE=busybox
FROM ${BASE} AS build
WORKDIR /src
COPY . .
RUN set -eu; \\
    # a comment between lines
    make   all
RUN make test

FROM build AS test
RUN false

FROM busybox
COPY --from=build /src/out /out
";

    fn line(step: &str) -> Option<usize> {
        let a = analyze(FILE, None, &BTreeMap::new()).unwrap();
        step_line(&a, step)
    }

    #[test]
    fn finds_a_step_by_stage_and_text() {
        assert_eq!(line("[build 4/5] RUN make test"), Some(9));
        assert_eq!(line("[build 3/5] RUN set -eu;     make all"), Some(6));
        assert_eq!(line("[test 2/2] RUN false"), Some(12));
        assert_eq!(
            line("[stage-2 2/2] COPY --from=build /src/out /out"),
            Some(15)
        );
        assert_eq!(
            line("[linux/arm64 build 4/5] RUN make test"),
            Some(9),
            "a platform before the stage is not its name"
        );
    }

    #[test]
    fn falls_back_to_the_number_when_the_text_was_reworded() {
        // BuildKit printed the COPY with its arguments expanded.
        assert_eq!(line("[build 2/4] COPY ./ ./"), Some(5));
    }

    #[test]
    fn says_nothing_rather_than_guess() {
        assert_eq!(
            line("[internal] load build definition from Dockerfile"),
            None
        );
        assert_eq!(line("[nosuch 2/2] RUN x"), None);
        assert_eq!(line("exporting to image"), None);
        assert_eq!(line("[test 9/9] RUN nothing like it"), None);
    }

    #[test]
    fn a_file_of_one_stage_has_unnamed_steps() {
        let a = analyze(
            "FROM busybox\nCOPY a /a\nRUN echo hi\n",
            None,
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(step_line(&a, "[3/3] RUN echo hi"), Some(3));
        assert_eq!(step_line(&a, "[2/3] COPY a /a"), Some(2));
    }
}
