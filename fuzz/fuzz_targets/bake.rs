//! The bake file evaluator, the way `kiln print` drives it: parse and
//! evaluate one or more HCL / JSON files, list targets and variables, resolve
//! the default group (and each defined target), apply the `--print`
//! conversion and render the JSON.
//!
//! Input: UTF-8 text (invalid bytes replaced). A line `##FILE##` splits it
//! into up to three files. A text whose first non-blank character is `{` is
//! named `.json`, else `.hcl`. Comment lines `#set T.attr=value` and
//! `#target NAME` become `--set` overrides and requested targets.
#![no_main]

use std::collections::BTreeMap;

use kiln_bake::Options;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut files = Vec::new();
    for (i, part) in text.split("\n##FILE##\n").take(3).enumerate() {
        let ext = if part.trim_start().starts_with('{') {
            "json"
        } else {
            "hcl"
        };
        files.push((format!("f{i}/docker-bake.{ext}"), part.to_string()));
    }
    let sets: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#set "))
        .take(4)
        .map(str::to_string)
        .collect();
    let mut requested: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#target "))
        .take(4)
        .map(str::to_string)
        .collect();

    let opts = Options {
        builtins: [
            ("BAKE_CMD_CONTEXT".to_string(), "cwd://".to_string()),
            ("BAKE_LOCAL_PLATFORM".to_string(), "linux/amd64".to_string()),
        ]
        .into(),
        env: BTreeMap::from([
            ("TAG".to_string(), "fuzz".to_string()),
            ("VERSION".to_string(), "1.2.3".to_string()),
        ]),
        vars: BTreeMap::new(),
        disable_env_lookup: data.len() % 2 == 1,
        file_relative_paths: data.len() % 3 == 0,
    };

    let Ok(bake) = kiln_bake::load(files, &opts) else {
        return;
    };
    let _ = bake.render_warnings();
    let _ = kiln_bake::list_targets(&bake.config);
    let _ = kiln_bake::list_variables(&bake.config);
    let _ = serde_json::to_string_pretty(&kiln_bake::config_json(&bake.config));

    let po = kiln_bake::PrintOptions {
        cwd: std::path::PathBuf::from("/nonexistent-kiln-fuzz"),
        source_date_epoch: Some("0".to_string()),
    };
    let print = |requested: &[String], sets: &[String]| {
        if let Ok(mut r) = bake.resolve(requested, sets, &opts) {
            if kiln_bake::to_build_opts(&mut r, &po).is_ok() {
                let _ = serde_json::to_string_pretty(&kiln_bake::print_json(&r));
            }
        }
    };
    // `kiln print` with no target (the default group), then as asked.
    print(&[], &sets);
    if !requested.is_empty() {
        print(&requested, &sets);
    }
    // Every defined target, as `kiln print NAME` would.
    requested = bake
        .config
        .targets
        .iter()
        .take(8)
        .map(|t| t.name.clone())
        .collect();
    requested.extend(bake.config.groups.iter().take(4).map(|g| g.name.clone()));
    for name in requested {
        print(std::slice::from_ref(&name), &[]);
    }
});
