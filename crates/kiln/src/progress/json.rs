//! JSON progress: one object per event on stderr (`--progress json`), in
//! the event contract of `kiln_engine::events`.
//!
//! Must never: write to stdout.

use std::io::Write;
use std::sync::Mutex;

use kiln_engine::Reporter;
use kiln_engine::events::Event;

/// One JSON object per event on stderr.
pub struct JsonReporter {
    pub out: Mutex<std::io::Stderr>,
}

impl Reporter for JsonReporter {
    fn event(&self, e: &Event) {
        if let (Ok(mut o), Ok(text)) = (self.out.lock(), serde_json::to_string(e)) {
            let _ = writeln!(o, "{text}");
        }
    }
}
