//! Dockerfile analysis: the default (last) stage, then each named stage as
//! the target with the global ARGs given values, then an unknown stage.
//!
//! Input: UTF-8 text (invalid inputs skipped, as `analyze_file` would fail).
#![no_main]

use std::collections::BTreeMap;

use kiln_dockerfile::dockerfile::analyze;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(a) = analyze(text, None, &BTreeMap::new()) else {
        return;
    };
    assert!(a.target < a.stages.len(), "target stage out of range");
    assert!(
        a.needed.iter().all(|&i| i < a.stages.len()),
        "needed stage out of range"
    );
    let args: BTreeMap<String, String> = a
        .global_args
        .iter()
        .chain(a.stages.iter().flat_map(|s| s.args.iter()))
        .take(16)
        .map(|d| (d.name.clone(), format!("fuzz-{}", d.name)))
        .collect();
    for s in a.stages.iter().take(4) {
        if let Some(name) = &s.name {
            let _ = analyze(text, Some(name), &args);
        }
    }
    let _ = analyze(text, Some("no-such-stage"), &args);
});
