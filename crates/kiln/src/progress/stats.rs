//! The compiler cache's counters, read from each build's log lines
//! (`sccache --show-stats`) as the events pass.
//!
//! Must never: change or hold back an event.

use std::sync::{Arc, Mutex};

use kiln_engine::Reporter;
use kiln_engine::events::Event;

/// Passes every event on, counting sccache's `--show-stats` lines per
/// target (`Event::Log`).
pub struct StatsReporter {
    pub inner: Arc<dyn Reporter>,
    pub stats: Mutex<std::collections::HashMap<String, kiln_store::compiler_cache::Stats>>,
}

impl Reporter for StatsReporter {
    fn event(&self, e: &Event) {
        if let Event::Log { target, line, .. } = e
            && let Ok(mut m) = self.stats.lock()
        {
            let mut s = m.get(target).copied().unwrap_or_default();
            if s.line(line) {
                m.insert(target.clone(), s);
            }
        }
        self.inner.event(e);
    }
}
