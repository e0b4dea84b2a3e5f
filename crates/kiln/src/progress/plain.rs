//! Plain progress: one line per event on stderr (`--progress plain`, and
//! `auto` when stderr is not a terminal).
//!
//! Must never: write to stdout.

use std::io::Write;
use std::sync::Mutex;

use kiln_engine::Reporter;
use kiln_engine::events::{Event, StepState};

use crate::output::summary::image_and_reason;

/// Plain lines on stderr.
pub struct PlainReporter {
    pub out: Mutex<std::io::Stderr>,
}

impl Reporter for PlainReporter {
    fn event(&self, e: &Event) {
        let line = match e {
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
            Event::Pushed {
                target,
                reference,
                digest,
            } => format!("[{target}] pushed {reference}@{digest}"),
        };
        if let Ok(mut o) = self.out.lock() {
            let _ = writeln!(o, "{line}");
        }
    }
}
