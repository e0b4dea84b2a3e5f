//! `--inputs`: telling legitimate rebuilds from cache failures with kiln's
//! input manifests (`kiln_plan::key::InputManifest`, the record payload) of
//! the previous build and of the build the log shows.
//!
//! The manifests are diffed with `kiln_plan::key::diff`, and the new
//! manifest's Dockerfile text (the canonical text of the needed stages) is
//! analysed with `kiln_dockerfile` to find, for every stage, the first step
//! from which a rebuild is legitimate:
//!
//! - every step, when the platform, the key recipe, the target stage or
//!   `SOURCE_DATE_EPOCH` changed, when the stage is new, when its base image
//!   (or named context) changed, or when a stage it starts `FROM` has a
//!   legitimate rebuild;
//! - from the first instruction whose canonical text changed;
//! - from the first `RUN` (or instruction using the arg) after the stage
//!   declares a build arg whose value changed;
//! - from the `COPY`/`ADD`/`RUN --mount=type=bind` that reads a changed
//!   context file, the `ADD` of a changed remote source, or the
//!   `COPY --from`/`--mount from=` of a changed image, named context or
//!   stage.
//!
//! Steps are matched by BuildKit's numbering: in a stage, `FROM <image>`
//! is step 1, then every `ADD`, `COPY`, `RUN` and `WORKDIR` in order
//! (`dockerfile2llb`'s `cmdTotal`). A rebuilt step before its stage's first
//! legitimate step is unexplained: a cache failure.

use std::collections::{BTreeMap, HashMap};

use kiln_dockerfile::dockerfile::{
    Analysis, DepTarget, DepVia, FromSource, InstructionKind, NEEDED_TEXT_VERSION, Stage, analyze,
};
use kiln_plan::key::{Change, ContextFile, InputManifest, diff, select_files};

/// Why `--inputs` could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputsError(pub String);

impl std::fmt::Display for InputsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputsError {}

/// Where rebuilds become legitimate in one stage.
#[derive(Clone, Debug, PartialEq, Eq)]
struct StageInputs {
    /// Numbered steps (BuildKit's `n` in `i/n`).
    total: u32,
    /// The first step whose rebuild is legitimate (`None`: none is).
    from: Option<u32>,
}

/// The two manifests, diffed and mapped onto the stages.
#[derive(Clone, Debug)]
pub struct Inputs {
    changes: Vec<Change>,
    stages: HashMap<String, StageInputs>,
}

/// How a rebuilt step is classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Legitimate,
    Unexplained,
    /// Unexplained, with a note on why the step could not be matched.
    Unmatched(String),
}

impl Inputs {
    /// Reads `{"old": <manifest>, "new": <manifest>}` or `[old, new]`.
    pub fn from_json(text: &str) -> Result<Inputs, InputsError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| InputsError(format!("not JSON: {e}")))?;
        let (old, new) = match v {
            serde_json::Value::Object(mut o) if o.contains_key("old") && o.contains_key("new") => {
                (o.remove("old"), o.remove("new"))
            }
            serde_json::Value::Array(mut a) if a.len() == 2 => {
                let new = a.pop();
                (a.pop(), new)
            }
            _ => {
                return Err(InputsError(
                    "expected {\"old\": <input manifest>, \"new\": <input manifest>} or [<old>, <new>]"
                        .into(),
                ));
            }
        };
        let manifest = |v: Option<serde_json::Value>, which: &str| {
            serde_json::from_value::<InputManifest>(v.unwrap_or_default())
                .map_err(|e| InputsError(format!("the {which} input manifest: {e}")))
        };
        Inputs::new(&manifest(old, "old")?, &manifest(new, "new")?)
    }

    /// Diffs two manifests and maps the changes onto the new one's stages.
    pub fn new(old: &InputManifest, new: &InputManifest) -> Result<Inputs, InputsError> {
        let changes = diff(old, new);
        let new_a = analysis(new).map_err(|e| {
            InputsError(format!(
                "the new input manifest's Dockerfile text cannot be analysed: {e}"
            ))
        })?;
        let old_a = analysis(old).ok();
        let everything = changes.iter().any(|c| {
            matches!(
                c,
                Change::Recipe { .. }
                    | Change::Platform { .. }
                    | Change::TargetStage { .. }
                    | Change::SourceDateEpoch { .. }
            )
        });
        let text_changed = changes.iter().any(|c| matches!(c, Change::Dockerfile));
        let mut froms: Vec<Option<u32>> = Vec::with_capacity(new_a.stages.len());
        let mut stages = HashMap::new();
        for s in &new_a.stages {
            let steps = Steps::of(s);
            let mut from = if everything { Some(1) } else { None };
            let mut at = |step: Option<u32>| {
                if let Some(n) = step {
                    from = Some(from.map_or(n, |f: u32| f.min(n)));
                }
            };
            if text_changed {
                match old_a.as_ref().and_then(|a| counterpart(a, s)) {
                    None => at(Some(1)),
                    Some(o) => {
                        let first = s
                            .instructions
                            .iter()
                            .zip(&o.instructions)
                            .position(|(a, b)| a.text != b.text)
                            .or((s.instructions.len() != o.instructions.len())
                                .then(|| s.instructions.len().min(o.instructions.len())));
                        at(first.map(|p| steps.at(p)));
                    }
                }
            }
            for c in &changes {
                match c {
                    Change::Arg { name, .. } => {
                        for d in s.args.iter().filter(|d| &d.name == name) {
                            let p = steps.position(d.line);
                            let q = s
                                .instructions
                                .iter()
                                .enumerate()
                                .skip(p + 1)
                                .find(|(_, i)| {
                                    i.kind == InstructionKind::Run || mentions(&i.text, name)
                                })
                                .map(|(q, _)| q);
                            at(q.map(|q| steps.at(q)));
                        }
                    }
                    Change::File { path, .. } => {
                        let file = [ContextFile {
                            path: path.clone(),
                            mode: 0,
                            digest: String::new(),
                        }];
                        for cs in &s.context_sources {
                            if !select_files(&file, std::slice::from_ref(cs)).is_empty() {
                                at(Some(steps.at(steps.position(cs.line))));
                            }
                        }
                    }
                    Change::Remote { source, .. } => {
                        for r in s.remote_sources.iter().filter(|r| &r.url == source) {
                            at(Some(steps.at(steps.position(r.line))));
                        }
                    }
                    _ => {}
                }
            }
            for d in &s.deps {
                let changed = match &d.target {
                    DepTarget::Stage(p) => froms.get(*p).copied().flatten().is_some(),
                    DepTarget::Image(r) => changes.iter().any(|c| match c {
                        Change::Image { reference, .. } => reference == r,
                        Change::Upstream { context, .. } => context == r,
                        _ => false,
                    }),
                };
                if changed {
                    at(Some(if d.via == DepVia::From {
                        1
                    } else {
                        steps.at(steps.position(d.line))
                    }));
                }
            }
            froms.push(from);
            stages.insert(
                stage_key(s),
                StageInputs {
                    total: steps.total,
                    from,
                },
            );
        }
        Ok(Inputs { changes, stages })
    }

    /// The number of steps BuildKit counts in `stage` (its `n` in `i/n`),
    /// if the new manifest's Dockerfile has that stage.
    pub fn stage_steps(&self, stage: &str) -> Option<u32> {
        self.stages.get(stage).map(|s| s.total)
    }

    /// The first step of `stage` whose rebuild is legitimate (`None`: no
    /// rebuild in that stage is, or there is no such stage).
    pub fn first_legitimate_step(&self, stage: &str) -> Option<u32> {
        self.stages.get(stage).and_then(|s| s.from)
    }

    /// The changed inputs, one line each.
    pub fn changes(&self) -> Vec<String> {
        self.changes.iter().map(ToString::to_string).collect()
    }

    /// Classifies a rebuilt step `index` of the stage BuildKit printed as
    /// `stage` (a `--platform` prefix is ignored), whose stage has `total`
    /// steps in the log.
    pub(crate) fn classify(&self, stage: &str, index: u32, total: u32) -> Class {
        let name = stage.rsplit(' ').next().unwrap_or(stage);
        let found = self.stages.get(name).or_else(|| {
            // A Dockerfile with one stage prints no stage name, even a named one.
            (name == "stage-0" && self.stages.len() == 1)
                .then(|| self.stages.values().next())
                .flatten()
        });
        let Some(s) = found else {
            return Class::Unmatched(format!(
                "stage {stage} is not in the new input manifest's Dockerfile"
            ));
        };
        let legit = s.from.is_some_and(|f| index >= f);
        if s.total != total && s.from != Some(1) {
            return Class::Unmatched(format!(
                "stage {stage}: the log counts {total} steps, the input manifest's Dockerfile {}",
                s.total
            ));
        }
        if legit {
            Class::Legitimate
        } else {
            Class::Unexplained
        }
    }
}

/// The analysis of a manifest's Dockerfile text with its args.
fn analysis(m: &InputManifest) -> Result<Analysis, String> {
    let text = m
        .dockerfile
        .strip_prefix(NEEDED_TEXT_VERSION)
        .map_or(m.dockerfile.as_str(), |t| t.strip_prefix('\n').unwrap_or(t));
    let args: BTreeMap<String, String> = m.args.clone();
    analyze(text, m.target_stage.as_deref(), &args)
        .or_else(|_| analyze(text, None, &args))
        .map_err(|e| e.to_string())
}

/// The name BuildKit prints for a stage.
fn stage_key(s: &Stage) -> String {
    s.name
        .clone()
        .unwrap_or_else(|| format!("stage-{}", s.index))
}

/// The same stage in the other analysis: by name, else by position.
fn counterpart<'a>(a: &'a Analysis, s: &Stage) -> Option<&'a Stage> {
    match &s.name {
        Some(n) => a.stages.iter().find(|o| o.name.as_deref() == Some(n)),
        None => a.stages.get(s.index).filter(|o| o.name.is_none()),
    }
}

/// Whether an instruction's text uses `$name` or `${name…}`.
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices('$').any(|(i, _)| {
        let rest = &text[i + 1..];
        let rest = rest.strip_prefix('{').unwrap_or(rest);
        rest.strip_prefix(name).is_some_and(|after| {
            !after
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

/// BuildKit's step numbering of one stage.
struct Steps {
    /// For each instruction position, the number of numbered instructions
    /// before it.
    before: Vec<u32>,
    lines: Vec<(usize, usize)>,
    total: u32,
}

impl Steps {
    fn of(s: &Stage) -> Steps {
        let mut before = Vec::with_capacity(s.instructions.len());
        let mut n = 0u32;
        for (p, i) in s.instructions.iter().enumerate() {
            before.push(n);
            let numbered = match i.kind {
                InstructionKind::From => p == 0 && matches!(s.from, FromSource::Image(_)),
                InstructionKind::Add
                | InstructionKind::Copy
                | InstructionKind::Run
                | InstructionKind::Workdir => true,
                _ => false,
            };
            n += u32::from(numbered);
        }
        Steps {
            before,
            lines: s
                .instructions
                .iter()
                .map(|i| (i.line, i.end_line))
                .collect(),
            total: n,
        }
    }

    /// The position of the instruction on `line` (0 if none).
    fn position(&self, line: usize) -> usize {
        self.lines
            .iter()
            .position(|&(a, b)| a <= line && line <= b)
            .unwrap_or(0)
    }

    /// The step number of the first numbered instruction at position `p` or
    /// later (one past the last step when there is none).
    fn at(&self, p: usize) -> u32 {
        self.before.get(p).map_or(self.total + 1, |b| b + 1).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_args() {
        assert!(mentions("RUN echo $V", "V"));
        assert!(mentions("RUN echo ${V}", "V"));
        assert!(mentions("RUN echo ${V:-x}", "V"));
        assert!(!mentions("RUN echo $VERSION", "V"));
        assert!(!mentions("RUN echo V", "V"));
    }
}
