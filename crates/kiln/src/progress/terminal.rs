//! The terminal progress: the live view of nodes and slots
//! (`crate::live`) redrawn in place, with one permanent line per finished
//! target above it.
//!
//! Must never: write to stdout, or draw when stderr is not a terminal.

use std::sync::{Arc, Mutex};

use kiln_engine::Reporter;
use kiln_engine::events::{Event, StepState};

use crate::output::summary::image_and_reason;

/// The permanent terminal line of a finished target, or none for a target
/// skipped as up to date: that one gets its single line in the summary, and
/// the terminal keeps what happened in this run.
fn terminal_line(
    target: &str,
    status: &str,
    duration_s: f64,
    image: Option<&str>,
    reason: Option<&str>,
) -> Option<String> {
    let up_to_date = status == "skipped" && reason.is_some_and(|r| r.starts_with("up to date"));
    if up_to_date {
        return None;
    }
    let mark = match status {
        "built" => "✔",
        "skipped" => "=",
        _ => "✘",
    };
    Some(format!(
        "{mark} {target} {status} in {duration_s:.1}s {}",
        image_and_reason(image, reason)
    ))
}

/// The live view on a terminal (`crate::live`): one line per node and
/// slot with its target, elapsed against expected time and step, and the
/// queue, redrawn in place every [`crate::live::TICK`] and on each event;
/// a finished target leaves one permanent line above them.
pub struct TtyReporter {
    inner: Arc<TtyInner>,
}

struct TtyInner {
    bars: indicatif::MultiProgress,
    state: Mutex<(crate::live::LaneView, Vec<indicatif::ProgressBar>)>,
    total: usize,
    finished: std::sync::atomic::AtomicUsize,
}

impl TtyReporter {
    pub fn new(view: crate::live::LaneView, total: usize) -> TtyReporter {
        let inner = Arc::new(TtyInner {
            bars: indicatif::MultiProgress::with_draw_target(
                indicatif::ProgressDrawTarget::stderr(),
            ),
            state: Mutex::new((view, Vec::new())),
            total,
            finished: std::sync::atomic::AtomicUsize::new(0),
        });
        let weak = Arc::downgrade(&inner);
        // Elapsed times move while no event comes: a ticker redraws until
        // the run is over (or the reporter is gone).
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(crate::live::TICK);
                let Some(inner) = weak.upgrade() else { break };
                if inner.over() {
                    break;
                }
                inner.redraw();
            }
        });
        TtyReporter { inner }
    }
}

impl TtyInner {
    fn over(&self) -> bool {
        self.finished.load(std::sync::atomic::Ordering::Relaxed) >= self.total
    }

    /// Draws the lanes and the queue (or, once every target finished,
    /// takes them away so the summary follows the permanent lines).
    fn redraw(&self) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let (view, bars) = &mut *st;
        if self.over() {
            for pb in bars.drain(..) {
                pb.finish_and_clear();
                self.bars.remove(&pb);
            }
            return;
        }
        let lines = view.lines(std::time::Instant::now());
        if lines.len() != bars.len() {
            for pb in bars.drain(..) {
                pb.finish_and_clear();
                self.bars.remove(&pb);
            }
            for _ in &lines {
                let pb = self.bars.add(indicatif::ProgressBar::new_spinner());
                pb.set_style(
                    indicatif::ProgressStyle::with_template("{wide_msg}")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                bars.push(pb);
            }
        }
        for (pb, l) in bars.iter().zip(lines) {
            pb.set_message(l);
        }
    }
}

impl Reporter for TtyReporter {
    fn event(&self, e: &Event) {
        let inner = &self.inner;
        let now = std::time::Instant::now();
        match e {
            Event::TargetStarted {
                target, node, slot, ..
            } => {
                if let Ok(mut st) = inner.state.lock() {
                    st.0.started(target, node, *slot, now);
                }
            }
            Event::Step {
                target,
                step,
                state,
                ..
            } => {
                let mark = match state {
                    StepState::Cached => " (cached)",
                    StepState::Error => " (error)",
                    _ => "",
                };
                if let Ok(mut st) = inner.state.lock() {
                    st.0.step(target, &format!("{step}{mark}"));
                }
            }
            Event::TargetFinished {
                target,
                status,
                duration_s,
                image,
                reason,
            } => {
                if let Ok(mut st) = inner.state.lock() {
                    st.0.finished(target, status);
                }
                inner
                    .finished
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if let Some(line) = terminal_line(
                    target,
                    status,
                    *duration_s,
                    image.as_deref(),
                    reason.as_deref(),
                ) {
                    inner.bars.suspend(|| eprintln!("{line}"));
                }
            }
            Event::Pushed { target, .. }
            | Event::Verified { target, .. }
            | Event::Restored { target, .. } => {
                let what = super::plain::published(e).unwrap_or_default();
                let _ = inner.bars.println(format!("  {target} {what}"));
            }
            Event::Warning { target, message } => {
                let line = if target.is_empty() {
                    format!("! {message}")
                } else {
                    format!("! {target}: {message}")
                };
                let _ = inner.bars.println(line);
            }
            Event::Waiting { target, message } => {
                let _ = inner.bars.println(format!("  {target}: {message}"));
            }
            Event::Log { .. } | Event::Key { .. } => return,
        }
        inner.redraw();
    }
}

#[cfg(test)]
mod tests {
    use super::terminal_line;

    /// A no-op on a terminal names each up-to-date target once (in the
    /// summary), not twice; what happened in this run keeps its line.
    #[test]
    fn a_terminal_shows_up_to_date_targets_only_in_the_summary() {
        let up = Some("up to date (built 2026-12-02T05:00:00Z on n)");
        assert_eq!(terminal_line("a", "skipped", 0.0, None, up), None);
        let line = terminal_line("a", "skipped", 0.1, None, Some("early cutoff")).unwrap();
        assert!(
            line.starts_with("= a skipped in 0.1s early cutoff"),
            "{line}"
        );
        let line = terminal_line("b", "built", 2.0, Some("r/b:1"), None).unwrap();
        assert!(line.starts_with("✔ b built in 2.0s r/b:1"), "{line}");
        let line = terminal_line("c", "failed", 1.0, None, Some("exit 1")).unwrap();
        assert!(line.starts_with("✘ c failed"), "{line}");
    }
}
