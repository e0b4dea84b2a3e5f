//! BuildKit progress logs (plain and rawjson), as `kiln diagnose` reads
//! them: streamed through `Parser` in chunks, diagnosed (without and with
//! input manifests), rendered as text and JSON. The whole-buffer `parse`
//! must agree with the chunked reading.
//!
//! Input: raw bytes (the parser takes bytes).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// Real input manifests (old and new) from the crate's fixtures.
const INPUTS: &str = include_str!("../../crates/kiln-diagnose/tests/fixtures/seed000-inputs.json");

fuzz_target!(|data: &[u8]| {
    // Chunk sizes from the first byte, so line and object boundaries fall
    // anywhere.
    let chunk = 1 + usize::from(data.first().copied().unwrap_or(0) % 64);
    let mut parser = kiln_diagnose::Parser::new();
    for c in data.chunks(chunk) {
        parser.feed(c);
    }
    let trace = parser.finish();
    let whole = kiln_diagnose::parse(data);
    assert_eq!(
        format!("{trace:?}"),
        format!("{whole:?}"),
        "chunked and whole reading disagree"
    );

    if let Ok(report) = kiln_diagnose::diagnose(&trace, None) {
        let _ = kiln_diagnose::render_text(&report);
        let _ = serde_json::to_string_pretty(&report);
    }
    // Read once: the same manifests for every log.
    static PARSED: OnceLock<Option<kiln_diagnose::Inputs>> = OnceLock::new();
    let inputs = PARSED.get_or_init(|| kiln_diagnose::Inputs::from_json(INPUTS).ok());
    if let Some(inputs) = inputs {
        if let Ok(report) = kiln_diagnose::diagnose(&trace, Some(inputs)) {
            let _ = kiln_diagnose::render_text(&report);
            let _ = serde_json::to_string_pretty(&report);
        }
    }
});
