//! The reference stack (`stacks/rocm/docker-bake.hcl`) evaluates, and kiln's
//! graph for it is exactly seed 003's flowchart: 27 edges, three groups.

use std::collections::BTreeSet;
use std::process::Command;

mod common;
use common::{root, seed_edges};

fn kiln(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    common::kiln_json(env!("CARGO_BIN_EXE_kiln"), args, env)
}

fn plan_edges(env: &[(&str, &str)]) -> (BTreeSet<(String, String)>, Vec<String>) {
    common::plan_edges(
        env!("CARGO_BIN_EXE_kiln"),
        "stacks/rocm/docker-bake.hcl",
        env,
        false,
    )
}

#[test]
fn graph_matches_seed_flowchart() {
    let want = seed_edges();
    assert_eq!(want.len(), 27, "edges.txt lists the seed's 27 edges");
    let (edges, order) = plan_edges(&[]);
    assert_eq!(order.len(), 16, "sixteen targets: {order:?}");
    assert_eq!(edges, want);
}

#[test]
fn published_inputs_keep_the_same_graph() {
    // With PUBLISHED_INPUTS=1 the target: contexts collapse to registry
    // references; kiln still finds every edge through the tags.
    let (edges, _) = plan_edges(&[("PUBLISHED_INPUTS", "1")]);
    assert_eq!(edges, seed_edges());
}

#[test]
fn groups_match_the_seed() {
    let v = kiln(
        &[
            "print",
            "-f",
            "stacks/rocm/docker-bake.hcl",
            "default",
            "wheels",
            "serving",
        ],
        &[],
    );
    let members = |g: &str| -> BTreeSet<String> {
        v["group"][g]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    let set = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        members("wheels"),
        set(&[
            "pytorch-wheel",
            "triton-wheel",
            "aiter-wheel",
            "nixl-wheel",
            "torchvision-wheel",
            "cupy-wheel",
            "vllm-wheel",
            "lmcache-wheel"
        ])
    );
    assert_eq!(
        members("serving"),
        set(&[
            "torchvision-wheel",
            "cupy-wheel",
            "nixl-wheel",
            "vllm",
            "vllm-wheel",
            "lmcache",
            "lmcache-wheel"
        ])
    );
    let dv = kiln(&["print", "-f", "stacks/rocm/docker-bake.hcl"], &[]);
    let dflt: BTreeSet<String> = dv["target"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(dflt.len(), 14, "default builds 14 targets: {dflt:?}");
    assert!(!dflt.contains("pytorch-test") && !dflt.contains("pytorch-run"));
}

#[test]
fn variables_carry_the_seed_defaults() {
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "print",
            "-f",
            "stacks/rocm/docker-bake.hcl",
            "--list",
            "variables",
        ])
        .current_dir(root())
        .env_clear()
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let value = |name: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.split('\t').next() == Some(name))
            .unwrap_or_else(|| panic!("variable {name} missing"));
        let cells: Vec<&str> = line.split('\t').filter(|c| !c.is_empty()).collect();
        // NAME [TYPE] VALUE [DESCRIPTION]: find the value by the seed's table.
        cells.get(1..).map(|c| c.join("\t")).unwrap_or_default()
    };
    // Seed 004's tables (versions, registry, build shape, cache, reproducibility).
    for (name, want) in [
        ("PYTORCH_VERSION", "2.15.0"),
        ("ROCM_VERSION", "10.1.0-full"),
        ("PYTHON_VERSION", "3.14"),
        ("TRITON_VERSION", "3.9.0"),
        ("TRITON_REF", "aad2a60d958f945420c5c40936b37d411fb02e89"),
        ("AITER_REF", "v0.1.29"),
        ("TORCHVISION_REF", "v0.29.2"),
        ("ATOM_REF", "v0.1.9"),
        ("NIXL_REF", "v1.5.2"),
        ("UCX_REF", "v1.22.0"),
        ("VLLM_REF", "v0.33.0"),
        ("CUPY_REF", "v14.2.0"),
        ("LMCACHE_REF", "v0.5.7"),
        ("RUST_VERSION", "1.95"),
        ("REGISTRY", "snoc-strix.fold-leaffish.ts.net:8080"),
        ("REGISTRY_NAME", "rocm-pytorch"),
        ("PYTORCH_ROCM_ARCH", "gfx950"),
        ("ROCM_PRUNE_PROFILE", "keep-toolchain"),
        ("SCCACHE_WEBDAV_PORT", "8081"),
        ("SCCACHE_VERSION", "0.19.0"),
        ("SDE_EPOCH", "1700000000"),
        ("RUN_ID", "dev"),
    ] {
        let v = value(name);
        assert!(v.contains(want), "{name}: expected {want:?} in {v:?}");
    }
    assert!(
        text.lines().count() > 50,
        "seed 004 lists over fifty variables"
    );
}
