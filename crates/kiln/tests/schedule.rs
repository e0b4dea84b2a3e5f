//! `kiln schedule` on the real binary: the ROCm stack simulated on the example
//! fleet (text and JSON snapshots), the baseline against kiln's policy on the
//! same input, the twin's local fleet, the SVG, and bad input (exit 2 with
//! `file:line:col`).

use std::path::Path;
use std::process::Output;

mod common;
use common::e2e::workspace;
use common::root;

const ROCM: [&str; 8] = [
    "-f",
    "stacks/rocm/docker-bake.hcl",
    "--simulate",
    "--fleet",
    "examples/fleet/fleet.toml",
    "--costs",
    "examples/fleet/costs.toml",
    "default",
];

/// `kiln schedule ARGS` in `dir` with a cleared environment.
fn kiln(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["schedule"];
    all.extend_from_slice(args);
    common::kiln_clean(dir, &all)
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "kiln failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(args: &[&str]) -> serde_json::Value {
    let all: Vec<&str> = ["schedule"].iter().chain(args).copied().collect();
    common::kiln_json(env!("CARGO_BIN_EXE_kiln"), &all, &[])
}

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    ROCM.iter().chain(extra).copied().collect()
}

#[test]
fn rocm_text() {
    insta::assert_snapshot!("schedule_rocm_text", ok(&kiln(&root(), &ROCM)));
}

#[test]
fn rocm_json_contract() {
    let text = ok(&kiln(&root(), &with(&["--format", "json"])));
    insta::assert_snapshot!("schedule_rocm_json", text);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let makespan = v["makespan_s"].as_f64().unwrap();
    let lb = v["lower_bound_s"].as_f64().unwrap();
    assert!(makespan >= lb && lb > 0.0);
    assert_eq!(v["policy"], "kiln");
    let assignments = v["assignments"].as_array().unwrap();
    assert_eq!(assignments.len(), 14, "the default group builds 14 targets");
    let mut latest: f64 = 0.0;
    for a in assignments {
        let (start, end) = (a["start_s"].as_f64().unwrap(), a["end_s"].as_f64().unwrap());
        assert!(start <= end && a["target"].is_string() && a["node"].is_string());
        latest = latest.max(end);
    }
    assert_eq!(latest, makespan);
    // The only node with memory for pytorch builds it.
    let pytorch = assignments
        .iter()
        .find(|a| a["target"] == "pytorch")
        .unwrap();
    assert_eq!(pytorch["node"], "think");
    assert_eq!(v["default_costs"], serde_json::json!([]));
}

#[test]
fn kiln_beats_the_baseline_on_the_same_input() {
    let kiln_s = json(&with(&["--format", "json"]));
    let greedy = json(&with(&["--format", "json", "--policy", "greedy"]));
    assert_eq!(greedy["policy"], "greedy");
    assert_eq!(kiln_s["lower_bound_s"], greedy["lower_bound_s"]);
    let (k, g) = (
        kiln_s["makespan_s"].as_f64().unwrap(),
        greedy["makespan_s"].as_f64().unwrap(),
    );
    assert!(k <= g, "kiln {k} > greedy {g}");
    assert!(
        k < g,
        "on the ROCm stack kiln should strictly win: {k} vs {g}"
    );
    let names = |v: &serde_json::Value| {
        let mut n: Vec<String> = v["assignments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["target"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&kiln_s), names(&greedy));
}

#[test]
fn default_costs_are_named() {
    let v = json(&[
        "-f",
        "stacks/rocm/docker-bake.hcl",
        "--simulate",
        "--fleet",
        "examples/fleet/fleet.toml",
        "--format",
        "json",
        "vllm-wheel",
    ]);
    let defaults = v["default_costs"].as_array().unwrap();
    assert_eq!(defaults.len(), v["assignments"].as_array().unwrap().len());
    assert!(defaults.contains(&serde_json::json!("vllm-wheel")));
}

#[test]
fn twin_fleet_schedules() {
    let o = kiln(
        &root().join("examples/twin"),
        &["--simulate", "--fleet", "fleet.toml", "--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    let nodes: std::collections::BTreeSet<&str> = v["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["node"].as_str().unwrap())
        .collect();
    assert!(
        nodes.len() >= 2,
        "the work spreads over the fleet: {nodes:?}"
    );
}

#[test]
fn svg_is_written() {
    let dir = workspace(&[("README", "the SVG goes here\n")]);
    let svg = dir.join("gantt.svg");
    let svg_arg = svg.to_string_lossy().into_owned();
    let mut args: Vec<&str> = ROCM.to_vec();
    args.extend(["--format", "json", "--svg", &svg_arg]);
    ok(&kiln(&root(), &args));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(text.contains(">pytorch</text>") && text.trim_end().ends_with("</svg>"));
}

#[test]
fn bad_fleet_file_is_a_usage_error_with_position() {
    let fleet = "[[node]]\nname = \"a\"\nendpoint = \"unix:///a.sock\"\ncores = 16\nmemory_gb = 15\nlink_mbps = 100\nspeeed = 2\n";
    let dir = workspace(&[("fleet.toml", fleet)]);
    let bake = root().join("stacks/rocm/docker-bake.hcl");
    let bake = bake.to_string_lossy();
    let o = kiln(&dir, &["-f", &bake, "--simulate", "--fleet", "fleet.toml"]);
    assert_eq!(o.status.code(), Some(2));
    insta::assert_snapshot!("schedule_err_bad_fleet", String::from_utf8_lossy(&o.stderr));
    let o = kiln(&dir, &["-f", &bake, "--simulate", "--fleet", "absent.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read the fleet file absent.toml"));
}

#[test]
fn unknown_target_in_costs_is_a_warning() {
    let costs = "[target.pytorch]\nwork_s = 100\noutput_mb = 10\n\n[target.pytroch]\nwork_s = 1\noutput_mb = 1\n";
    let dir = workspace(&[("costs.toml", costs)]);
    let root = root();
    let bake = root.join("stacks/rocm/docker-bake.hcl");
    let fleet = root.join("examples/fleet/fleet.toml");
    let o = kiln(
        &dir,
        &[
            "-f",
            &bake.to_string_lossy(),
            "--simulate",
            "--fleet",
            &fleet.to_string_lossy(),
            "--costs",
            "costs.toml",
            "pytorch",
        ],
    );
    ok(&o);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "warning: costs.toml:5:9: the bake files define no target `pytroch`; its costs are not used\n"
    );
}

/// A fleet of an amd64 node and an arm64 node: each platform of a
/// multi-platform target is its own unit on the node that builds it
/// natively, a dependent's units wait only for their own platform, and a
/// platform no node builds natively goes under emulation, said in both
/// formats.
#[test]
fn platform_units_go_to_native_nodes_and_emulation_is_said() {
    let fleet = r#"[[node]]
name = "amd"
endpoint = "unix:///amd.sock"
cores = 16
memory_gb = 32
link_mbps = 1000
platforms = ["linux/amd64"]

[[node]]
name = "arm"
endpoint = "unix:///arm.sock"
cores = 16
memory_gb = 32
link_mbps = 1000
platforms = ["linux/arm64/v8"]
"#;
    let bake = r#"target "base" {
  dockerfile = "Dockerfile"
  platforms = ["linux/amd64", "linux/arm64"]
}
target "app" {
  dockerfile = "Dockerfile"
  contexts = { base = "target:base" }
  platforms = ["linux/amd64", "linux/arm64"]
}
target "board" {
  dockerfile = "Dockerfile"
  contexts = { app = "target:app" }
  platforms = ["linux/riscv64"]
}
"#;
    let dir = workspace(&[
        ("fleet.toml", fleet),
        ("docker-bake.hcl", bake),
        ("Dockerfile", "FROM scratch\nCOPY Dockerfile /\n"),
    ]);
    let args = ["--simulate", "--fleet", "fleet.toml", "app", "board"];
    let v: serde_json::Value = serde_json::from_str(&ok(&kiln(
        &dir,
        &[&args[..], &["--format", "json"]].concat(),
    )))
    .unwrap();
    let a = v["assignments"].as_array().unwrap();
    let find = |t: &str| {
        a.iter()
            .find(|x| x["target"] == t)
            .unwrap_or_else(|| panic!("{t}: {v}"))
    };
    for (unit, node, platform) in [
        ("base@linux/amd64", "amd", "linux/amd64"),
        ("base@linux/arm64", "arm", "linux/arm64"),
        ("app@linux/amd64", "amd", "linux/amd64"),
        ("app@linux/arm64", "arm", "linux/arm64"),
    ] {
        let x = find(unit);
        assert_eq!(
            (x["node"].as_str(), x["platform"].as_str()),
            (Some(node), Some(platform))
        );
        assert!(x.get("emulated").is_none(), "{x}");
    }
    assert_eq!(a.len(), 5, "{v}");
    // Each unit of app waits for its own platform of base only: both
    // start when their base unit ends (each node's own, no pull).
    for p in ["linux/amd64", "linux/arm64"] {
        let (b, x) = (find(&format!("base@{p}")), find(&format!("app@{p}")));
        assert_eq!(x["start_s"], b["end_s"], "{p}");
        assert_eq!(x["pull_s"], 0.0, "{p}");
    }
    // board needs both of app's platforms (riscv64 is neither) and no node
    // builds riscv64: emulated, ten times the build.
    let board = find("board");
    assert_eq!(board["emulated"], true);
    assert_eq!(board["build_s"], 600.0 / 1.0 * 10.0);
    let end_app = find("app@linux/amd64")["end_s"]
        .as_f64()
        .unwrap()
        .max(find("app@linux/arm64")["end_s"].as_f64().unwrap());
    assert!(board["start_s"].as_f64().unwrap() >= end_app);
    let text = ok(&kiln(&dir, &args));
    assert!(
        text.contains(
            "under emulation (no node builds the platform natively; build time x10): board on "
        ),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("app@linux/arm64 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(row.split_whitespace().nth(1), Some("arm"), "{text}");
}
