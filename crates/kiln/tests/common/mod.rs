//! Helpers shared by the integration tests that run the real binary on the
//! repository's stacks.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs kiln in the repository root with a clean environment and returns
/// its JSON output; fails the test if kiln fails.
pub fn kiln_json(bin: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut c = Command::new(bin);
    c.args(args)
        .current_dir(root())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run kiln");
    assert!(
        o.status.success(),
        "kiln {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

/// The seed's 27 edges (`stacks/rocm/edges.txt`), dependency first.
pub fn seed_edges() -> BTreeSet<(String, String)> {
    std::fs::read_to_string(root().join("stacks/rocm/edges.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (a, b) = l.split_once("->").expect("edge line `from -> to`");
            (a.trim().to_string(), b.trim().to_string())
        })
        .collect()
}
