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

/// `kiln versions` on the reference stack, its upstreams served by loopback
/// mirrors (git's `url.<mirror>.insteadOf`, as a CI would point at a mirror):
/// every `*_REF` is found from the bake file or from how the Dockerfiles
/// clone it, none is a branch, and each is told against its mirror's
/// newest release.
#[test]
fn the_reference_stacks_pins_are_tags_or_commits_of_their_upstreams() {
    let mirrors = std::env::temp_dir().join(format!("kiln-rocm-mirrors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&mirrors);
    std::fs::create_dir_all(&mirrors).unwrap();
    let insteadof = format!("url.file://{}/.insteadOf", mirrors.display());
    let run = |extra: &[&str]| {
        let mut args = vec!["versions", "-f", "docker-bake.hcl", "--format", "json"];
        args.extend_from_slice(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(&args)
            .current_dir(common::root().join("stacks/rocm"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &mirrors)
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", &insteadof)
            .env("GIT_CONFIG_VALUE_0", "https://github.com/")
            .output()
            .unwrap()
    };
    // No mirror yet: every repository is named, and none answers (exit 3).
    let o = run(&["--no-registry"]);
    assert_eq!(o.status.code(), Some(3), "{}", common::stderr(&o));
    let pins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pins = pins.as_array().unwrap().clone();
    let repos: BTreeSet<(String, String)> = pins
        .iter()
        .filter_map(|p| {
            Some((
                p["variable"].as_str()?.to_string(),
                p["repository"].as_str()?.to_string(),
            ))
        })
        .collect();
    let with_repo: BTreeSet<&str> = repos.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        with_repo,
        [
            "AITER_REF",
            "ATOM_REF",
            "CUPY_REF",
            "LMCACHE_REF",
            "NIXL_REF",
            "TORCHVISION_REF",
            "TRITON_REF",
            "UCX_REF",
            "VLLM_REF"
        ]
        .into(),
        "every pinned upstream ref is found: {pins:#?}"
    );
    // The mirrors: the pinned tag and a newer release of each.
    for p in &pins {
        let (Some(var), Some(url)) = (p["variable"].as_str(), p["repository"].as_str()) else {
            continue;
        };
        let path = url
            .strip_prefix("https://github.com/")
            .and_then(|r| r.strip_suffix(".git"))
            .unwrap_or_else(|| panic!("{var}: {url} is not a GitHub repository"));
        let pin = p["pin"].as_str().unwrap();
        let tags: Vec<&str> = if pin.len() == 40 {
            vec!["v99.0.0"]
        } else {
            vec![pin, "v99.0.0"]
        };
        common::git_repo(&mirrors, path, &tags, &["main-dev"]);
    }
    let o = run(&["--no-registry"]);
    assert!(
        o.status.success(),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    let pins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for p in pins.as_array().unwrap() {
        if p["repository"].is_null() {
            continue;
        }
        let kind = if p["pin"].as_str().unwrap().len() == 40 {
            "commit"
        } else {
            "tag"
        };
        assert_eq!(p["kind"], kind, "{p}");
        assert_eq!(p["newest"], "v99.0.0", "{p}");
    }
    // What is built from each pin: the targets it reaches as an arg.
    let vllm = pins
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["variable"] == "VLLM_REF")
        .unwrap();
    let targets: Vec<&str> = vllm["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["vllm", "vllm-wheel"], "{vllm}");
    let _ = std::fs::remove_dir_all(&mirrors);
}

/// The reference stack passes kiln's own lint with no finding at all, with
/// `MAX_JOBS` unset or pinned: every target's Dockerfile and sources are
/// there, the refs come from the bake file, and no job count is a build arg.
#[test]
fn the_reference_stack_lints_clean() {
    for env in [&[][..], &[("MAX_JOBS", "8")][..]] {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_kiln"));
        c.args(["lint", "--format", "json", "stacks/rocm"])
            .current_dir(common::root())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{env:?}: {}{}",
            common::stdout(&o),
            common::stderr(&o)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let findings = v["findings"].as_array().unwrap();
        assert!(findings.is_empty(), "{env:?}: {findings:#?}");
    }
}

/// The targets that compile, those that inherit `_compile`.
const COMPILING: [&str; 9] = [
    "aiter-wheel",
    "cupy-wheel",
    "lmcache",
    "nixl-wheel",
    "pytorch",
    "pytorch-wheel",
    "torchvision-wheel",
    "triton-wheel",
    "vllm",
];

/// Job counts reach the stack's builds the kiln way: as the secret
/// `kiln-jobs`, never as a build arg. Every RUN step that sources
/// compile-env.sh mounts it, no Dockerfile declares `ARG MAX_JOBS`, no
/// target passes it, and a pinned `MAX_JOBS` becomes the bake file's own
/// `kiln-jobs` secret (read from the environment) on exactly the targets
/// that compile.
#[test]
fn compile_jobs_reach_the_stack_as_the_kiln_jobs_secret_never_as_an_arg() {
    let docker = common::root().join("stacks/rocm/docker");
    let mut mounting = BTreeSet::new();
    for entry in std::fs::read_dir(&docker).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some(target) = name.strip_prefix("Dockerfile.") else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let joined = text.replace("\\\n", " ");
        for line in joined.lines() {
            let l = line.trim_start();
            assert!(
                !(l.starts_with("ARG ") && l.contains("MAX_JOBS")),
                "{name}: {l}"
            );
            if l.starts_with("RUN ") && l.contains(". /usr/local/lib/compile-env.sh") {
                assert!(
                    l.contains("--mount=type=secret,id=kiln-jobs "),
                    "{name}: a compile step without the kiln-jobs mount: {l}"
                );
                mounting.insert(target.to_string());
            }
        }
    }
    let compiling: BTreeSet<String> = COMPILING.iter().map(|s| s.to_string()).collect();
    assert_eq!(mounting, compiling, "the targets whose steps compile");
    let all = ["default", "pytorch-run", "pytorch-test"];
    let mut args = vec!["print", "-f", "stacks/rocm/docker-bake.hcl"];
    args.extend_from_slice(&all);
    for (env, pinned) in [(&[][..], false), (&[("MAX_JOBS", "8")][..], true)] {
        let v = kiln(&args, env);
        let targets = v["target"].as_object().unwrap();
        assert_eq!(targets.len(), 16);
        for (name, t) in targets {
            assert!(t["args"].get("MAX_JOBS").is_none(), "{name}: {t}");
            let want = if pinned && compiling.contains(name) {
                serde_json::json!([{"id": "kiln-jobs", "env": "MAX_JOBS"}])
            } else {
                serde_json::Value::Null
            };
            assert_eq!(t.get("secret").cloned().unwrap_or_default(), want, "{name}");
        }
    }
}

/// compile-env.sh (installed by pytorch-base, sourced by every compile
/// step) takes the count from the secret's file, decimal text and a
/// newline as kiln writes it; without the file, or with anything else in
/// it, one job per 2 GB of MemAvailable, at least 1.
#[test]
fn the_compile_env_reads_the_job_count_from_the_secret() {
    let text =
        std::fs::read_to_string(common::root().join("stacks/rocm/docker/Dockerfile.pytorch-base"))
            .unwrap();
    let body = text
        .split_once("COPY <<'SH' /usr/local/lib/compile-env.sh\n")
        .unwrap()
        .1;
    let end = body.find("export MAX_JOBS").unwrap();
    let end = end + body[end..].find('\n').unwrap();
    let dir = std::env::temp_dir().join(format!("kiln-rocm-jobs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("kiln-jobs");
    let script = body[..=end].replace("/run/secrets/kiln-jobs", &secret.to_string_lossy());
    assert!(script.contains(&*secret.to_string_lossy()), "{script}");
    std::fs::write(dir.join("jobs.sh"), script).unwrap();
    let jobs = |content: Option<&str>| -> String {
        let _ = std::fs::remove_file(&secret);
        if let Some(c) = content {
            std::fs::write(&secret, c).unwrap();
        }
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "set -eu; . '{}'; echo \"$MAX_JOBS $CMAKE_BUILD_PARALLEL_LEVEL\"",
                dir.join("jobs.sh").display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    assert_eq!(jobs(Some("7\n")), "7 7");
    assert_eq!(jobs(Some("12")), "12 12");
    let mem_kb: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap();
    let derived = (mem_kb / 2_097_152).max(1);
    // MemAvailable moves between two reads; allow a job either way.
    for content in [None, Some(""), Some("0\n"), Some("eight\n")] {
        let got = jobs(content);
        let n: u64 = got.split(' ').next().unwrap().parse().unwrap();
        assert!(
            n >= 1 && n.abs_diff(derived) <= 1,
            "{content:?}: {got} vs {derived}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
