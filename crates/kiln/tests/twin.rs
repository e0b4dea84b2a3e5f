//! The runnable twin (`examples/twin/docker-bake.hcl`) has the reference
//! stack's graph exactly: the same sixteen targets, the 27 edges of
//! `stacks/rocm/edges.txt`, the same groups, and Dockerfiles wired to the bake
//! file's inputs by the `ARG X_IMAGE=<context>` / `FROM ${X_IMAGE} AS <context>`
//! pattern. Building it needs a Docker engine (examples/twin/README.md); these
//! tests do not.

use std::collections::{BTreeMap, BTreeSet};

mod common;
use common::{root, seed_edges as reference_edges};

fn kiln(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    common::kiln_json(env!("CARGO_BIN_EXE_kiln"), args, env)
}

const TWIN: &str = "examples/twin/docker-bake.hcl";
const REFERENCE: &str = "stacks/rocm/docker-bake.hcl";

fn plan_edges(file: &str, env: &[(&str, &str)]) -> (BTreeSet<(String, String)>, Vec<String>) {
    common::plan_edges(env!("CARGO_BIN_EXE_kiln"), file, env)
}

#[test]
fn graph_matches_the_reference_edges() {
    let want = reference_edges();
    assert_eq!(want.len(), 27);
    let (edges, order) = plan_edges(TWIN, &[]);
    assert_eq!(order.len(), 16, "sixteen targets: {order:?}");
    assert_eq!(edges, want);
    let (_, ref_order) = plan_edges(REFERENCE, &[]);
    let names = |o: &[String]| o.iter().cloned().collect::<BTreeSet<_>>();
    assert_eq!(
        names(&order),
        names(&ref_order),
        "the reference's target names"
    );
}

#[test]
fn published_inputs_keep_the_same_graph() {
    let (edges, _) = plan_edges(TWIN, &[("PUBLISHED_INPUTS", "1")]);
    assert_eq!(edges, reference_edges());
}

#[test]
fn groups_match_the_reference() {
    let groups = |file: &str, args: &[&str]| -> serde_json::Value {
        let mut a = vec!["print", "-f", file];
        a.extend_from_slice(args);
        kiln(&a, &[])["group"].clone()
    };
    // `print default wheels serving` lists wheels and serving as groups.
    let (twin, reference) = (
        groups(TWIN, &["default", "wheels", "serving"]),
        groups(REFERENCE, &["default", "wheels", "serving"]),
    );
    for g in ["wheels", "serving"] {
        assert_eq!(twin[g]["targets"], reference[g]["targets"], "group {g}");
    }
    assert_eq!(twin["wheels"]["targets"].as_array().unwrap().len(), 8);
    assert_eq!(twin["serving"]["targets"].as_array().unwrap().len(), 7);
    // `print default` lists the default group itself.
    let (twin, reference) = (groups(TWIN, &["default"]), groups(REFERENCE, &["default"]));
    assert_eq!(twin["default"]["targets"], reference["default"]["targets"]);
    let dflt: BTreeSet<&str> = twin["default"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(dflt.len(), 14, "{dflt:?}");
    assert!(!dflt.contains("pytorch-test") && !dflt.contains("pytorch-run"));
}

/// Every target of the twin, as `kiln print` resolves it with paths relative
/// to the bake file (the documented way to build it from the repository root).
fn twin_targets() -> BTreeMap<String, serde_json::Value> {
    let v = kiln(
        &[
            "print",
            "-f",
            TWIN,
            "default",
            "pytorch-run",
            "pytorch-test",
        ],
        &[("BUILDX_BAKE_FILE_RELATIVE_PATHS", "1")],
    );
    v["target"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, t)| (k.clone(), t.clone()))
        .collect()
}

fn dockerfile(t: &serde_json::Value) -> String {
    let ctx = t["context"].as_str().unwrap();
    assert_eq!(
        ctx, "examples/twin",
        "every target builds the twin directory"
    );
    let path = root().join(ctx).join(t["dockerfile"].as_str().unwrap());
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn dockerfiles_take_each_input_through_its_named_stage() {
    let targets = twin_targets();
    assert_eq!(targets.len(), 16);
    for (name, t) in &targets {
        let df = dockerfile(t);
        let lines: Vec<&str> = df.lines().map(str::trim).collect();
        let args = t["args"].as_object().unwrap();
        let contexts = t["contexts"].as_object().cloned().unwrap_or_default();
        // Every named context: an arg naming it, `ARG A=<ctx>` and `FROM ${A} AS <ctx>`.
        for ctx in contexts.keys() {
            let (arg, _) = args
                .iter()
                .find(|(_, v)| v.as_str() == Some(ctx.as_str()))
                .unwrap_or_else(|| panic!("{name}: no arg names context {ctx}"));
            assert!(
                lines.contains(&format!("ARG {arg}={ctx}").as_str()),
                "{name}: missing `ARG {arg}={ctx}`"
            );
            assert!(
                lines.contains(&format!("FROM ${{{arg}}} AS {ctx}").as_str()),
                "{name}: missing `FROM ${{{arg}}} AS {ctx}`"
            );
        }
        // And no input stage the bake file does not know about.
        for l in &lines {
            if let Some(rest) = l.strip_prefix("FROM ${") {
                let stage = rest.rsplit(" AS ").next().unwrap();
                assert!(
                    contexts.contains_key(stage),
                    "{name}: input stage {stage} has no context in the bake file"
                );
            }
        }
        // Build-context COPYs read only the target's own source tree.
        for l in &lines {
            let Some(rest) = l.strip_prefix("COPY ") else {
                continue;
            };
            if rest.contains("--from=") {
                continue;
            }
            let words: Vec<&str> = rest
                .split_whitespace()
                .filter(|w| !w.starts_with("--"))
                .collect();
            for src in &words[..words.len() - 1] {
                assert!(
                    src.starts_with(&format!("src/{name}/")),
                    "{name}: COPY {src} is outside src/{name}/"
                );
                assert!(
                    root().join("examples/twin").join(src).exists(),
                    "{name}: COPY source {src} does not exist"
                );
            }
        }
    }
}

#[test]
fn pytorch_run_takes_pytorch_by_its_first_tag() {
    for env in [&[][..], &[("PUBLISHED_INPUTS", "1")][..]] {
        let v = kiln(&["print", "-f", TWIN, "pytorch", "pytorch-run"], env);
        let tag = v["target"]["pytorch"]["tags"][0].as_str().unwrap();
        assert_eq!(
            v["target"]["pytorch-run"]["contexts"]["pytorch-img"],
            format!("docker-image://{tag}")
        );
    }
}

#[test]
fn tags_and_shared_settings() {
    for (name, t) in &twin_targets() {
        let tag = t["tags"][0].as_str().unwrap();
        let prefix = format!("127.0.0.1:5000/twin/{name}:");
        assert!(tag.starts_with(&prefix), "{name}: {tag}");
        assert_eq!(
            tag.ends_with("-gfx950"),
            name != "triton-wheel",
            "{name}: only triton-wheel has no architecture: {tag}"
        );
        assert_eq!(t["network"], "host", "{name}");
        assert_eq!(t["platforms"], serde_json::json!(["linux/amd64"]), "{name}");
        assert_eq!(t["args"]["SOURCE_DATE_EPOCH"], "1700000000", "{name}");
        assert!(
            t["args"].get("MAX_JOBS").is_none(),
            "{name}: MAX_JOBS is passed only when pinned"
        );
        for (k, v) in t["args"].as_object().unwrap() {
            let k = k.to_ascii_uppercase();
            assert!(
                !k.contains("TOKEN") && !k.contains("PASSWORD"),
                "{name}: credential-looking arg {k}={v}"
            );
        }
        let secrets = t.get("secret").cloned().unwrap_or_default();
        if name == "cupy-wheel" {
            assert_eq!(
                secrets,
                serde_json::json!([{"id": "pip_token", "env": "PIP_TOKEN"}])
            );
        } else {
            assert!(secrets.is_null(), "{name}: only cupy-wheel takes a secret");
        }
    }
}

/// The buildx driver's full command lines for the whole twin, as data
/// (buildx is not installable here): every target imports its own
/// commit-independent cache ref and its per-commit tag, exports with
/// mode=max to a ref no other target uses, hands inputs over by digest, and
/// never asks for inline cache.
#[test]
fn buildx_command_lines_for_the_twin() {
    let v = kiln(
        &[
            "plan",
            "-f",
            TWIN,
            "--host",
            "unix:///nonexistent/docker.sock",
            "--driver",
            "buildx",
            "--builder",
            "fleet",
            "--format",
            "json",
            "default",
            "pytorch-run",
        ],
        // Stamps as a CI would set them (else kiln takes them from this
        // checkout's git, which changes at every commit).
        &[
            ("BUILDX_BAKE_FILE_RELATIVE_PATHS", "1"),
            ("VCS_REF", "0123456789abcdef0123456789abcdef01234567"),
            ("BUILD_DATE", "2026-01-02T03:04:05Z"),
        ],
    );
    let mut text = String::new();
    let mut stable = BTreeSet::new();
    for t in v["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let argv: Vec<String> = t["command"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no command"))
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let line = argv.join(" ");
        assert!(!line.contains("BUILDKIT_INLINE_CACHE"), "{line}");
        let to: Vec<&String> = argv
            .iter()
            .zip(argv.iter().skip(1))
            .filter(|(a, _)| *a == "--cache-to")
            .map(|(_, b)| b)
            .collect();
        assert_eq!(to.len(), 1, "{name}: {line}");
        assert!(
            to[0].contains("mode=max,image-manifest=true,oci-mediatypes=true,ignore-error=true")
        );
        assert!(stable.insert(t["cache"][0]["stable_ref"].as_str().unwrap().to_string()));
        for (a, b) in argv.iter().zip(argv.iter().skip(1)) {
            if a == "--build-context" {
                assert!(b.contains("@<digest of "), "hand-over by digest: {b}");
            }
        }
        text.push_str(&format!(
            "# {name}\n{}\n",
            kiln_engine::driver::buildx::render(&argv)
        ));
    }
    assert_eq!(stable.len(), 15, "one cache ref per target");
    insta::assert_snapshot!("twin_buildx_commands", text);
}

/// The twin pushes to the registry the dev environment started: with
/// `KILN_REGISTRY` exported (dev-env prints it, e.g. on port 5001 when
/// 5000 was taken), every tag follows it; without it, 127.0.0.1:5000.
#[test]
fn the_twin_follows_the_dev_environments_registry() {
    let file = "examples/twin/docker-bake.hcl";
    let tags = |env: &[(&str, &str)]| -> Vec<String> {
        let v = kiln(&["print", "-f", file, "rocm-runtime"], env);
        v["target"]["rocm-runtime"]["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    let moved = tags(&[("KILN_REGISTRY", "127.0.0.1:5001")]);
    assert!(!moved.is_empty());
    assert!(
        moved.iter().all(|t| t.starts_with("127.0.0.1:5001/")),
        "{moved:?}"
    );
    let default = tags(&[]);
    assert!(
        default.iter().all(|t| t.starts_with("127.0.0.1:5000/")),
        "{default:?}"
    );
}

/// The twin ships what its targets cost: a fresh clone's schedule of the
/// twin on its fleet uses no 600 s defaults for one-second builds, and
/// every target of the costs file is one of the twin's.
#[test]
fn the_twins_costs_cover_every_target() {
    let v = kiln(
        &[
            "schedule",
            "--simulate",
            "--fleet",
            "examples/twin/fleet.toml",
            "--costs",
            "examples/twin/costs.toml",
            "-f",
            "examples/twin/docker-bake.hcl",
            "--format",
            "json",
            "default",
            "pytorch-run",
            "pytorch-test",
        ],
        &[],
    );
    assert_eq!(v["default_costs"], serde_json::json!([]), "{v}");
    assert!(v["makespan_s"].as_f64().unwrap() < 60.0, "{v}");
}
