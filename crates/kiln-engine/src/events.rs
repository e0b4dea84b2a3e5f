//! Progress events: what the engine reports while it runs. The CLI renders
//! them (bars, plain lines or JSON lines); tests collect them.
//!
//! Must never: render or print an event (the CLI's reporters do), or hold
//! up the run: a reporter is called on the build's path and must return
//! quickly.

use serde::Serialize;

/// One step's state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepState {
    Started,
    Cached,
    Done,
    Error,
}

/// A progress event.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// A target started building with the named driver on the named node.
    TargetStarted {
        target: String,
        driver: String,
        node: String,
        /// The node's build slot (lane, from 0) it runs in.
        #[serde(skip_serializing_if = "Option::is_none")]
        slot: Option<usize>,
    },
    /// A target's content key was computed (`key` is absent while an
    /// upstream's output is pending); `read_files`/`read_bytes` say how much
    /// file content was read (the rest came from the stat cache).
    Key {
        target: String,
        key: Option<String>,
        files: u64,
        read_files: u64,
        read_bytes: u64,
    },
    /// Something the user should know that does not stop the target.
    Warning { target: String, message: String },
    /// The target waits for another run that builds the same key (or
    /// takes its build over): whom, and what happens.
    Waiting { target: String, message: String },
    /// A build step (a BuildKit vertex) changed state.
    Step {
        target: String,
        step: String,
        state: StepState,
        #[serde(skip_serializing_if = "Option::is_none")]
        duration_s: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A line of a step's output.
    Log {
        target: String,
        step: String,
        line: String,
    },
    /// A target finished (built, skipped, failed or blocked).
    TargetFinished {
        target: String,
        status: String,
        duration_s: f64,
        /// The image's name: its first tag, or kiln's own reference when
        /// the target has no tag.
        #[serde(skip_serializing_if = "Option::is_none")]
        image: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An image was pushed.
    Pushed {
        target: String,
        reference: String,
        digest: String,
    },
    /// A skipped target's tag was checked in its registry and names the
    /// recorded digest: nothing was pushed.
    Verified {
        target: String,
        reference: String,
        digest: String,
    },
    /// A skipped target's tag had moved (`was`: the digest it named) or
    /// vanished (`was` absent) and was pointed back at the recorded digest
    /// through the registry API (a manifest put): nothing was built or
    /// pushed but that manifest.
    Restored {
        target: String,
        reference: String,
        digest: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        was: Option<String>,
    },
}

/// Receives events; implementations must be cheap and never block long.
pub trait Reporter: Send + Sync {
    fn event(&self, e: &Event);
}

/// A reporter that keeps every event (for tests).
#[derive(Default)]
pub struct Collect(pub std::sync::Mutex<Vec<Event>>);

impl Reporter for Collect {
    fn event(&self, e: &Event) {
        if let Ok(mut v) = self.0.lock() {
            v.push(e.clone());
        }
    }
}
