//! JSON progress: one object per event on stderr (`--progress json`), in
//! the event contract of `kiln_engine::events`.
//!
//! Must never: write to stdout.

use std::sync::Mutex;

use kiln_engine::Reporter;
use kiln_engine::events::Event;

/// One JSON object per event on stderr.
pub struct JsonReporter {
    pub out: Mutex<std::io::Stderr>,
}

impl Reporter for JsonReporter {
    fn event(&self, e: &Event) {
        if let Ok(line) = serde_json::to_string(e) {
            super::write_line(&self.out, line);
        }
    }
}
