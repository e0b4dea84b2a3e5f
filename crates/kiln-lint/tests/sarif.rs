//! The SARIF output validates against the official SARIF 2.1.0 JSON schema
//! (vendored in `tests/data/`, checked with Python's `jsonschema`, which
//! `scripts/test` installs; without it this test says it skipped), and its
//! shape carries what code-scanning tools read.

use std::path::PathBuf;
use std::process::Command;

fn report(rel: &str) -> kiln_lint::Report {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    kiln_lint::lint(&[p]).unwrap()
}

#[test]
fn sarif_has_rules_results_and_regions() {
    let s = kiln_lint::output::sarif(&report("seed000"));
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let run = &v["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), kiln_lint::RULES.len());
    for r in rules {
        let id = r["id"].as_str().unwrap();
        assert!(
            r["helpUri"]
                .as_str()
                .unwrap()
                .ends_with(&format!("docs/lint/{id}.md")),
            "{r}"
        );
    }
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 9);
    let first = &results[0];
    let idx = first["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(rules[idx]["id"], first["ruleId"]);
    let region = &first["locations"][0]["physicalLocation"]["region"];
    assert!(region["startLine"].as_u64().unwrap() >= 1);
    assert!(region["startColumn"].as_u64().unwrap() >= 1);
}

#[test]
fn sarif_validates_against_the_2_1_0_schema() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/validate_sarif.py");
    let have = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        eprintln!("skipped: python3 with jsonschema is not available (scripts/test installs it)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("kiln-lint-sarif-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for rel in [
        "seed000",
        "clean",
        "secret-in-arg/bad",
        "parse-error/bad",
        "insecure-registry-tls/bad",
    ] {
        let p = dir.join(format!("{}.sarif", rel.replace('/', "-")));
        std::fs::write(&p, kiln_lint::output::sarif(&report(rel))).unwrap();
        files.push(p);
    }
    let out = Command::new("python3")
        .arg(&script)
        .args(&files)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
