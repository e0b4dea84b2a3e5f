//! `kiln print` is byte-identical to `docker buildx bake --print` on every
//! deterministic case of the conformance corpus (`print-golden.json`).

use std::path::Path;
use std::process::Command;

#[test]
fn print_is_byte_identical_to_bake() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/bake");
    let golden: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(root.join("print-golden.json")).unwrap())
            .unwrap();
    assert!(golden.len() > 100, "the golden file covers the corpus");
    let mut failures = Vec::new();
    for (id, want) in &golden {
        let dir = root.join("cases").join(id);
        let case: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln"));
        cmd.arg("print").current_dir(&dir).env_clear();
        for f in case["files"].as_array().unwrap() {
            cmd.args(["-f", f.as_str().unwrap()]);
        }
        for s in case["overrides"].as_array().into_iter().flatten() {
            cmd.args(["--set", s.as_str().unwrap()]);
        }
        for (k, v) in case["vars"].as_object().into_iter().flatten() {
            cmd.args(["--var", &format!("{k}={}", v.as_str().unwrap())]);
        }
        for t in case["targets"].as_array().into_iter().flatten() {
            cmd.arg(t.as_str().unwrap());
        }
        for (k, v) in case["env"].as_object().into_iter().flatten() {
            cmd.env(k, v.as_str().unwrap());
        }
        if case["options"]["file_relative_paths"] == serde_json::json!(true) {
            cmd.env("BUILDX_BAKE_FILE_RELATIVE_PATHS", "1");
        }
        let o = cmd.output().unwrap();
        let got = String::from_utf8_lossy(&o.stdout);
        if !o.status.success() || got != want.as_str().unwrap() {
            failures.push(format!(
                "{id}: status {:?}, stderr {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    println!(
        "byte-identical: {} of {}",
        golden.len() - failures.len(),
        golden.len()
    );
    assert!(
        failures.is_empty(),
        "{} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
