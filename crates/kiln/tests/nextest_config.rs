//! `.config/nextest.toml` keeps the end-to-end tests (the binaries
//! e2e_build, e2e_buildx, e2e_registries, e2e_probe) under the one limit it says they
//! share: no override gives any of them a test group other than `engine`
//! (for each setting the first matching override wins, so such a group
//! would take the test out of `engine`'s limit), and every test the file
//! names is one of theirs (a renamed test would fall out silently: a filter
//! naming no test is no error to nextest).

use std::path::Path;

const HEAVY: [&str; 4] = ["e2e_build", "e2e_buildx", "e2e_registries", "e2e_probe"];

/// The `#[test]` functions of the end-to-end binaries.
fn heavy_tests(root: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for bin in HEAVY {
        let src =
            std::fs::read_to_string(root.join(format!("crates/kiln/tests/{bin}.rs"))).unwrap();
        let mut lines = src.lines();
        while let Some(l) = lines.next() {
            if l.trim() == "#[test]" {
                let f = lines.next().unwrap().trim();
                let name = f.strip_prefix("fn ").and_then(|f| f.split('(').next());
                names.push(
                    name.unwrap_or_else(|| panic!("{bin}: #[test] before {f:?}"))
                        .to_string(),
                );
            }
        }
    }
    names
}

#[test]
fn every_end_to_end_test_counts_against_the_engine_groups_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = std::fs::read_to_string(root.join(".config/nextest.toml")).unwrap();
    // Without comments: they may name tests and settings.
    let text: String = file
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let heavy = heavy_tests(&root);
    assert!(heavy.len() > 20, "{heavy:?}");
    let setting = |block: &str, key: &str| {
        block.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches(['\'', '"']).to_string())
        })
    };

    assert!(
        text.contains("[test-groups.engine]\nmax-threads = 2\n"),
        "{text}"
    );
    let mut engine_binaries = false;
    for block in text.split("[[profile.default.overrides]]").skip(1) {
        // The test names the filter gives: each must be an end-to-end test.
        let named: Vec<&str> = block
            .split("test(=")
            .skip(1)
            .map(|s| s.split(')').next().unwrap())
            .collect();
        for n in &named {
            assert!(
                heavy.iter().any(|h| h == n),
                "{n} is no end-to-end test\n{block}"
            );
        }
        let group = setting(block, "test-group");
        if !named.is_empty()
            || HEAVY
                .iter()
                .any(|b| block.contains(&format!("binary({b})")))
        {
            assert!(
                group.as_deref().is_none_or(|g| g == "engine"),
                "an override gives end-to-end tests a group other than engine:\n{block}"
            );
        }
        if let Some(t) = setting(block, "threads-required") {
            assert_eq!(
                t, "2",
                "a test that runs alone takes the whole group:\n{block}"
            );
        }
        let filter = block
            .split_once("filter = '")
            .map(|(_, f)| f.split('\'').next().unwrap());
        let all = HEAVY.map(|b| format!("binary({b})")).join(" | ");
        if filter == Some(all.as_str()) {
            assert_eq!(group.as_deref(), Some("engine"), "{block}");
            assert_eq!(setting(block, "retries").as_deref(), Some("1"), "{block}");
            engine_binaries = true;
        }
    }
    assert!(
        engine_binaries,
        "no override puts the end-to-end binaries into engine:\n{text}"
    );
}
