//! Plain progress: one line per event on stderr (`--progress plain`, and
//! `auto` when stderr is not a terminal): kiln's own lines, and of the
//! build each Dockerfile step's start, cache state, result and output.
//! BuildKit's internal steps (loading the definition and the context,
//! resolving images, exporting) and their lines are left out; `--progress
//! raw` shows them too.
//!
//! Must never: write to stdout.

use std::sync::Mutex;

use kiln_engine::Reporter;
use kiln_engine::events::{Event, StepState};

use crate::output::summary::image_and_reason;

/// Plain lines on stderr.
pub struct PlainReporter {
    pub out: Mutex<std::io::Stderr>,
    /// Every step BuildKit reported, internal ones included.
    pub raw: bool,
}

/// Whether plain progress shows a step: a Dockerfile instruction
/// (`[stage 2/5] RUN …`, `FROM` included) or a failure of any step.
fn shown(step: &str, state: StepState) -> bool {
    state == StepState::Error || kiln_engine::steps::is_instruction(step)
}

impl Reporter for PlainReporter {
    fn event(&self, e: &Event) {
        if let Some(line) = line(e, self.raw) {
            super::write_line(&self.out, line);
        }
    }
}

/// The line an event shows as, if it shows (`raw`: every step).
pub fn line(e: &Event, raw: bool) -> Option<String> {
    let hidden = match e {
        Event::Step { step, state, .. } => !raw && !shown(step, *state),
        Event::Log { step, .. } => !raw && !kiln_engine::steps::is_instruction(step),
        _ => false,
    };
    if hidden {
        return None;
    }
    Some(match e {
        Event::TargetStarted {
            target,
            driver,
            node,
            ..
        } => format!("[{target}] building ({driver}) on {node}"),
        Event::Key {
            target,
            key,
            files,
            read_files,
            ..
        } => format!(
            "[{target}] key {} ({files} file(s), {read_files} read)",
            key.as_deref().unwrap_or("(pending)")
        ),
        Event::Warning { target, message } if target.is_empty() => {
            format!("warning: {message}")
        }
        Event::Warning { target, message } => format!("[{target}] warning: {message}"),
        Event::Waiting { target, message } => format!("[{target}] {message}"),
        Event::Step {
            target,
            step,
            state,
            duration_s,
            error,
        } => match state {
            StepState::Started => format!("[{target}] {step}"),
            StepState::Cached => format!("[{target}] {step} CACHED"),
            StepState::Done => {
                format!("[{target}] {step} DONE {:.1}s", duration_s.unwrap_or(0.0))
            }
            StepState::Error => format!(
                "[{target}] {step} ERROR: {}",
                error.clone().unwrap_or_default()
            ),
        },
        Event::Log { target, line, .. } => format!("[{target}]   {line}"),
        Event::TargetFinished {
            target,
            status,
            duration_s,
            image,
            reason,
        } => {
            let extra = image_and_reason(image.as_deref(), reason.as_deref());
            format!("[{target}] {status} in {duration_s:.1}s {extra}")
        }
        Event::Pushed { target, .. }
        | Event::Verified { target, .. }
        | Event::Restored { target, .. } => {
            format!("[{target}] {}", published(e).unwrap_or_default())
        }
    })
}

/// What became of a tag (`pushed`, `verified` or `restored REF@DIGEST`,
/// a restored one with what it named before: `was sha256:…` or `was
/// absent`), for the events that say so; `None` for the others.
pub(crate) fn published(e: &Event) -> Option<String> {
    Some(match e {
        Event::Pushed {
            reference, digest, ..
        } => format!("pushed {reference}@{digest}"),
        Event::Verified {
            reference, digest, ..
        } => format!("verified {reference}@{digest}"),
        Event::Restored {
            reference,
            digest,
            was,
            ..
        } => match was {
            Some(w) => format!("restored {reference}@{digest} (was {w})"),
            None => format!("restored {reference}@{digest} (was absent)"),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: &str, state: StepState) -> Event {
        Event::Step {
            target: "app".into(),
            step: step.into(),
            state,
            duration_s: Some(0.5),
            error: (state == StepState::Error).then(|| "failed".to_string()),
        }
    }

    fn log(step: &str, line: &str) -> Event {
        Event::Log {
            target: "app".into(),
            step: step.into(),
            line: line.into(),
        }
    }

    #[test]
    fn a_skipped_targets_tags_are_verified_or_restored_never_pushed() {
        let verified = Event::Verified {
            target: "os".into(),
            reference: "r.test/os:1".into(),
            digest: "sha256:aa".into(),
        };
        assert_eq!(
            line(&verified, false).as_deref(),
            Some("[os] verified r.test/os:1@sha256:aa")
        );
        let moved = Event::Restored {
            target: "os".into(),
            reference: "r.test/os:1".into(),
            digest: "sha256:aa".into(),
            was: Some("sha256:bb".into()),
        };
        assert_eq!(
            line(&moved, false).as_deref(),
            Some("[os] restored r.test/os:1@sha256:aa (was sha256:bb)")
        );
        let gone = Event::Restored {
            target: "os".into(),
            reference: "r.test/os:1".into(),
            digest: "sha256:aa".into(),
            was: None,
        };
        assert_eq!(
            line(&gone, false).as_deref(),
            Some("[os] restored r.test/os:1@sha256:aa (was absent)")
        );
        let json = serde_json::to_value(&moved).unwrap();
        assert_eq!(json["event"], "restored");
        assert_eq!(json["was"], "sha256:bb");
    }

    #[test]
    fn plain_shows_the_dockerfile_steps_and_raw_shows_everything() {
        let internal = "[internal] load build definition from Dockerfile";
        let run = "[build 2/3] RUN make";
        assert_eq!(
            line(&step(run, StepState::Started), false).unwrap(),
            "[app] [build 2/3] RUN make"
        );
        assert_eq!(
            line(&step(run, StepState::Done), false).unwrap(),
            "[app] [build 2/3] RUN make DONE 0.5s"
        );
        assert_eq!(
            line(&log(run, "cc main.c"), false).unwrap(),
            "[app]   cc main.c"
        );
        assert!(line(&step("[1/3] FROM busybox", StepState::Cached), false).is_some());
        assert!(line(&step(internal, StepState::Started), false).is_none());
        assert!(line(&step("exporting to image", StepState::Done), false).is_none());
        assert!(
            line(
                &log("exporting to image", "exporting layers 0.1s done"),
                false
            )
            .is_none()
        );
        // A failed internal step is shown: it is why the build failed.
        assert!(line(&step(internal, StepState::Error), false).is_some());
        assert!(line(&step(internal, StepState::Started), true).is_some());
        assert!(line(&log("exporting to image", "exporting layers"), true).is_some());
    }
}
