//! kiln against registries shaped like users' ones, on the current engine
//! and on a remote buildx builder: `scripts/registries up` starts Debian's
//! distribution registry under the hostname `registry.test` (not loopback
//! by name) in four shapes — plain HTTP, TLS with a CA installed in
//! `/etc/docker/certs.d`, TLS with token auth, TLS with htpasswd. In each:
//! `kiln build --push` with its records in that registry, a rerun that
//! skips every target, preflight that finds a present image and names a
//! missing one, and a registry that refuses credentials is exit 3 with a
//! message that names it. Without the registries (or the engine) these
//! tests say so and pass; with `KILN_E2E=1` (`.ci/run`) that is a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::e2e::*;

/// One registry of `scripts/registries`.
struct Shape {
    name: &'static str,
    /// `registry.test:PORT`.
    host: String,
    /// Wants a login.
    auth: bool,
}

struct Registries {
    shapes: Vec<Shape>,
    user: String,
    password: String,
}

fn registries() -> Option<Registries> {
    let out = std::process::Command::new(repo().join("scripts/registries"))
        .arg("env")
        .output();
    let vars: std::collections::BTreeMap<String, String> = match &out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        _ => {
            assert!(
                std::env::var("KILN_E2E").as_deref() != Ok("1"),
                "KILN_E2E=1 but the test registries are not up: run scripts/registries up"
            );
            eprintln!("skipped: no test registries (run `scripts/registries up`)");
            return None;
        }
    };
    let get = |k: &str| {
        vars.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("scripts/registries env has no {k}"))
    };
    Some(Registries {
        shapes: vec![
            Shape {
                name: "http",
                host: get("KILN_TEST_REGISTRY_HTTP"),
                auth: false,
            },
            Shape {
                name: "tls",
                host: get("KILN_TEST_REGISTRY_TLS"),
                auth: false,
            },
            Shape {
                name: "token",
                host: get("KILN_TEST_REGISTRY_TOKEN"),
                auth: true,
            },
            Shape {
                name: "basic",
                host: get("KILN_TEST_REGISTRY_BASIC"),
                auth: true,
            },
        ],
        user: get("KILN_TEST_REGISTRY_USER"),
        password: get("KILN_TEST_REGISTRY_PASSWORD"),
    })
}

/// A docker CLI configuration directory for the test: the dev
/// environment's buildx plugin, contexts and builders, and a
/// `config.json` with the given logins (`docker login` writes the same).
fn docker_config(dir: &Path, logins: &[(&str, &str, &str)]) -> PathBuf {
    use base64::Engine as _;
    let cfg = dir.join(format!("docker-config-{}", logins.len()));
    std::fs::create_dir_all(&cfg).unwrap();
    if let Some(dev) = dev_env().1.get("DOCKER_CONFIG") {
        for part in ["cli-plugins", "contexts", "buildx"] {
            let from = Path::new(dev).join(part);
            if from.exists() && !cfg.join(part).exists() {
                std::os::unix::fs::symlink(&from, cfg.join(part)).unwrap();
            }
        }
    }
    let auths: serde_json::Map<String, serde_json::Value> = logins
        .iter()
        .map(|(host, u, p)| {
            (
                host.to_string(),
                serde_json::json!({
                    "auth": base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
                }),
            )
        })
        .collect();
    std::fs::write(
        cfg.join("config.json"),
        serde_json::json!({ "auths": auths }).to_string(),
    )
    .unwrap();
    cfg
}

const BAKE: &str = r#"
variable "REG" {}
variable "BASE" {}
variable "NS" { default = "e2e-reg" }
target "_c" { network = "host" }
group "default" { targets = ["os", "app"] }
target "os" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.os"
  args = { BASE = BASE }
  tags = ["${REG}/${NS}/os:1"]
}
target "app" {
  inherits = ["_c"]
  contexts = { os = "target:os" }
  dockerfile = "Dockerfile.app"
  tags = ["${REG}/${NS}/app:1"]
}
target "present" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.present"
}
target "missing" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.missing"
}
"#;

/// How kiln builds in a case: the engine driver, or the remote builder.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Engine,
    Remote,
}

/// Builds the two-target stack with `--push` into `shape`'s registry,
/// with its records there, twice (built, then skipped), then asks
/// preflight about an image the registry has and one it has not, then —
/// for a registry that wants a login — with a wrong password.
fn case(shape_name: &str, via: Via) {
    let Some((host, reg)) = engine() else { return };
    let Some(regs) = registries() else { return };
    let remote = match via {
        Via::Engine => None,
        Via::Remote => match dev_env().1.get("KILN_REMOTE_BUILDER") {
            Some(b) => Some(b.clone()),
            None => {
                eprintln!("skipped: no remote builder (the legacy engine has no buildx)");
                return;
            }
        },
    };
    let shape = regs.shapes.iter().find(|s| s.name == shape_name).unwrap();
    let salt = unique(&format!("{shape_name}-"));
    let target_reg = &shape.host;
    let dir = workspace(&[
        ("docker-bake.hcl", BAKE),
        (
            "Dockerfile.os",
            &format!("ARG BASE\nFROM ${{BASE}}\nRUN echo {salt} > /salt\n"),
        ),
        ("Dockerfile.app", "FROM os\nRUN cat /salt > /app\n"),
        (
            "Dockerfile.present",
            &format!("FROM {target_reg}/e2e-reg-{salt}/os:1\n"),
        ),
        (
            "Dockerfile.missing",
            &format!("FROM {target_reg}/e2e-reg/nothing-{salt}:1\n"),
        ),
    ]);
    let logins: Vec<(&str, &str, &str)> = if shape.auth {
        vec![(
            target_reg.as_str(),
            regs.user.as_str(),
            regs.password.as_str(),
        )]
    } else {
        Vec::new()
    };
    let cfg = docker_config(&dir, &logins);
    let cfg_s = cfg.display().to_string();
    let store = format!("oci://{target_reg}/e2e-reg/records-{salt}");
    // A builder without an image store takes its base from a registry;
    // the engine can too.
    let base = format!("{reg}/kiln/busybox:latest");
    // The remote builder's registry configuration is not kiln's to see:
    // a plain-HTTP registry is declared to kiln, as a user of such a
    // builder does. On the engine, kiln learns it from the engine.
    let insecure = if via == Via::Remote && shape.name == "http" {
        target_reg.clone()
    } else {
        String::new()
    };
    let env: Vec<(&str, &str)> = vec![
        ("DOCKER_CONFIG", cfg_s.as_str()),
        ("KILN_STORE", store.as_str()),
        ("KILN_INSECURE_REGISTRIES", insecure.as_str()),
    ];
    let ns = format!("e2e-reg-{salt}");
    let args: Vec<String> = vec![
        "--var".into(),
        format!("NS={ns}"),
        "--var".into(),
        format!("REG={target_reg}"),
        "--var".into(),
        format!("BASE={base}"),
    ];
    let mut driver: Vec<String> = Vec::new();
    if let Some(b) = &remote {
        driver.extend([
            "--driver".into(),
            "buildx".into(),
            "--builder".into(),
            b.clone(),
        ]);
    }
    let build = |extra: &[&str]| -> Output {
        let mut a: Vec<&str> = vec!["--push", "--require-store"];
        a.extend(args.iter().map(String::as_str));
        a.extend(driver.iter().map(String::as_str));
        a.extend_from_slice(extra);
        build_json(&dir, &host, &a, &env)
    };
    let o = build(&["os", "app"]);
    assert!(o.status.success(), "{shape_name}: {}", failure(&o));
    let s = summary(&o);
    for n in ["os", "app"] {
        let t = target(&s, n);
        assert_eq!(t["status"], "built", "{shape_name}: {t}");
        let digest = t["digest"].as_str().unwrap_or_default();
        assert!(digest.starts_with("sha256:"), "{shape_name}: pushed: {t}");
    }
    let o = build(&["os", "app"]);
    assert!(o.status.success(), "{shape_name}: {}", failure(&o));
    let s = summary(&o);
    for n in ["os", "app"] {
        assert_eq!(
            target(&s, n)["status"],
            "skipped",
            "{shape_name}: the rerun skips by the records in the registry: {}",
            target(&s, n)
        );
    }
    let digest_of = |s: &serde_json::Value, n: &str| {
        target(s, n)["digest"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let os_digest = digest_of(&s, "os");

    // The rerun checked the pushed tags in the registry and says so: a
    // skipped target is never said to be pushed.
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let os_tag = format!("{target_reg}/{ns}/os:1");
    assert!(
        err.contains(&format!("[os] verified {os_tag}@{os_digest}")),
        "{shape_name}: {err}"
    );
    assert!(!err.contains("] pushed "), "{shape_name}: {err}");

    // A tag moved in the registry is pointed back at the recorded image
    // through kiln's own registry access (TLS, CA, login), not rebuilt and
    // not pushed. The tag is moved with the engine's docker push
    // (dockerd's own registry configuration).
    let docker = |a: &[&str]| {
        let o = std::process::Command::new("docker")
            .args(a)
            .env("DOCKER_HOST", &host)
            .env("DOCKER_CONFIG", &cfg)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "docker {a:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    docker(&["tag", &format!("{reg}/kiln/busybox:latest"), &os_tag]);
    docker(&["push", &os_tag]);
    let _ = std::process::Command::new("docker")
        .args(["rmi", &os_tag])
        .env("DOCKER_HOST", &host)
        .output();
    let o = build(&["os", "app"]);
    assert!(o.status.success(), "{shape_name}: {}", failure(&o));
    let s = summary(&o);
    for n in ["os", "app"] {
        let t = target(&s, n);
        assert_eq!(t["status"], "skipped", "{shape_name}: {t}");
    }
    let pushed = target(&s, "os")["pushed"].to_string();
    assert!(
        pushed.contains(&os_digest),
        "{shape_name}: the tag points at the recorded image again: {pushed}"
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.contains(&format!("[os] restored {os_tag}@{os_digest} (was sha256:")),
        "{shape_name}: {err}"
    );
    assert!(
        err.contains(&format!("[app] verified {target_reg}/{ns}/app:1@")),
        "{shape_name}: {err}"
    );
    assert!(!err.contains("] pushed "), "{shape_name}: {err}");
    // The registry holds the recorded image under the tag again: the next
    // run finds it there.
    let o = build(&["os", "app"]);
    assert!(o.status.success(), "{shape_name}: {}", failure(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.contains(&format!("[os] verified {os_tag}@{os_digest}")),
        "{shape_name}: {err}"
    );

    // Preflight: the image the run pushed is there; one nobody pushed is
    // named as missing. The engine's own copies of the tags go first, so
    // that only the registry can answer.
    for n in ["os", "app"] {
        let _ = std::process::Command::new("docker")
            .args(["rmi", &format!("{target_reg}/{ns}/{n}:1")])
            .env("DOCKER_HOST", &host)
            .output();
    }
    let mut pre: Vec<&str> = vec!["preflight"];
    pre.extend(args.iter().map(String::as_str));
    let with = |extra: &'static str| -> Vec<&str> {
        let mut a = pre.clone();
        a.push(extra);
        a
    };
    let o = kiln(&dir, &host, &with("present"), &env);
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{shape_name}: present: {out}");
    assert!(out.contains("1 available"), "{shape_name}: {out}");
    let o = kiln(&dir, &host, &with("missing"), &env);
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{shape_name}: missing: {out}");
    assert!(
        out.contains(&format!("{target_reg}/e2e-reg/nothing-{salt}:1")),
        "{shape_name}: {out}"
    );

    // Credentials refused: exit 3, the registry and what was refused named.
    if shape.auth {
        let wrong = docker_config(
            &dir.join("wrong"),
            &[(target_reg.as_str(), regs.user.as_str(), "not-the-password")],
        );
        let wrong_s = wrong.display().to_string();
        let env_wrong: Vec<(&str, &str)> = vec![
            ("DOCKER_CONFIG", wrong_s.as_str()),
            ("KILN_STORE", store.as_str()),
        ];
        let o = kiln(&dir, &host, &with("present"), &env_wrong);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(
            o.status.code(),
            Some(3),
            "{shape_name}: wrong password: {err}"
        );
        assert!(err.contains(target_reg.as_str()), "{shape_name}: {err}");
        assert!(
            err.contains("refused the credentials kiln sent"),
            "{shape_name}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_plain_http_registry_under_a_hostname_on_the_engine() {
    case("http", Via::Engine);
}

#[test]
fn a_plain_http_registry_under_a_hostname_on_a_remote_builder() {
    case("http", Via::Remote);
}

#[test]
fn a_tls_registry_with_a_private_ca_on_the_engine() {
    case("tls", Via::Engine);
}

#[test]
fn a_tls_registry_with_a_private_ca_on_a_remote_builder() {
    case("tls", Via::Remote);
}

#[test]
fn a_token_auth_registry_on_the_engine() {
    case("token", Via::Engine);
}

#[test]
fn a_token_auth_registry_on_a_remote_builder() {
    case("token", Via::Remote);
}

#[test]
fn an_htpasswd_registry_on_the_engine() {
    case("basic", Via::Engine);
}

#[test]
fn an_htpasswd_registry_on_a_remote_builder() {
    case("basic", Via::Remote);
}

/// A plain-HTTP registry under a hostname that nothing declares insecure
/// (a remote builder's configuration kiln cannot see, no
/// `KILN_INSECURE_REGISTRIES`): kiln never falls back to plain HTTP on its
/// own, and says what failed and how to declare the registry.
#[test]
fn an_undeclared_plain_http_registry_says_how_to_declare_it() {
    // Needs no engine (it runs without one), but the same environment.
    let Some(_) = engine() else { return };
    let Some(regs) = registries() else { return };
    let http = &regs.shapes[0].host;
    let dir = workspace(&[
        ("docker-bake.hcl", "target \"t\" {}\n"),
        ("Dockerfile", &format!("FROM {http}/e2e-reg/any:1\n")),
    ]);
    // No engine to learn from: a DOCKER_HOST that is not there.
    let o = kiln(
        &dir,
        "unix:///nonexistent/docker.sock",
        &["preflight", "t"],
        &[("KILN_INSECURE_REGISTRIES", "")],
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("plain HTTP"), "{err}");
    assert!(
        err.contains(&format!("KILN_INSECURE_REGISTRIES={http}")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The system's CA store counts as much as a registry's certs.d directory:
/// with no `certs.d` entry, the TLS registry is trusted when its CA is the
/// system's (`SSL_CERT_FILE`), and refused with a certificate error when the
/// system store does not hold it. (kiln reads the system store once per
/// process and gives it to every client as its roots; this holds that
/// reading to what the platform's verifier trusted.)
#[test]
fn a_tls_registry_is_trusted_through_the_system_store_and_refused_without_it() {
    let Some(_) = engine() else { return };
    let Some(regs) = registries() else { return };
    let tls = &regs.shapes[1].host;
    let certs_d = std::env::var_os("KILN_DOCKER_CERTS_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/etc/docker/certs.d"), PathBuf::from);
    let ca = std::fs::read_dir(certs_d.join(tls))
        .expect("scripts/registries installs the TLS registry's CA in certs.d")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "crt"))
        .expect("a .crt in the TLS registry's certs.d directory");
    let salt = unique("system-roots-");
    let dir = workspace(&[
        ("docker-bake.hcl", "target \"t\" {}\n"),
        (
            "Dockerfile",
            &format!("FROM {tls}/e2e-reg/nothing-{salt}:1\n"),
        ),
    ]);
    let empty = dir.join("empty-certs");
    std::fs::create_dir_all(&empty).unwrap();
    let (empty_s, ca_s) = (empty.display().to_string(), ca.display().to_string());
    let run = |cert_file: &str| {
        let o = kiln(
            &dir,
            "unix:///nonexistent/docker.sock",
            &["preflight", "t"],
            &[
                ("KILN_DOCKER_CERTS_DIR", empty_s.as_str()),
                ("SSL_CERT_DIR", empty_s.as_str()),
                ("SSL_CERT_FILE", cert_file),
            ],
        );
        let out =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        (o.status.code(), out)
    };
    // Trusted: the registry answers, and names the image as missing.
    let (code, out) = run(&ca_s);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("{tls}/e2e-reg/nothing-{salt}:1")),
        "{out}"
    );
    assert!(!out.to_lowercase().contains("certificate"), "{out}");
    // Not trusted: Debian's bundle has no private CA.
    let (code, out) = run("/etc/ssl/certs/ca-certificates.crt");
    assert_eq!(code, Some(3), "{out}");
    assert!(out.to_lowercase().contains("certificate"), "{out}");
    assert!(out.contains(tls.as_str()), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `scripts/registry-faults` in front of the dev environment's registry,
/// stopped when dropped.
struct FaultProxy {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl FaultProxy {
    fn start(dir: &Path, upstream: &str, faults: &[&str]) -> FaultProxy {
        let port_file = dir.join("faults.port");
        let log = dir.join("faults.log");
        let mut c = std::process::Command::new(repo().join("scripts/registry-faults"));
        c.args(["--upstream", upstream, "--port-file"])
            .arg(&port_file)
            .arg("--log")
            .arg(&log);
        for f in faults {
            c.args(["--fault", f]);
        }
        let child = c
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("scripts/registry-faults");
        let t0 = std::time::Instant::now();
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(t0.elapsed().as_secs() < 20, "the fault proxy did not start");
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        FaultProxy { child, port, log }
    }

    fn injected(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("INJECTED"))
            .map(String::from)
            .collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A registry that refuses the first manifest PUT of every repository with
/// `BLOB_UNKNOWN` (what distribution answers while another build of the run
/// is still pushing a shared layer): each target is pushed again, the run
/// succeeds, and the summary records the refused try as a `transient`
/// attempt — on the engine and on a remote builder.
#[test]
fn a_push_refused_for_a_blob_another_build_is_pushing_is_run_again() {
    let Some((host, reg)) = engine() else { return };
    let remote = dev_env().1.get("KILN_REMOTE_BUILDER").cloned();
    for via in [Via::Engine, Via::Remote] {
        if via == Via::Remote && remote.is_none() {
            eprintln!("skipped: no remote builder (the legacy engine has no buildx)");
            continue;
        }
        let salt = unique("faults-");
        let dir = workspace(&[
            ("docker-bake.hcl", BAKE),
            (
                "Dockerfile.os",
                &format!("ARG BASE\nFROM ${{BASE}}\nRUN echo {salt} > /salt\n"),
            ),
            ("Dockerfile.app", "FROM os\nRUN cat /salt > /app\n"),
        ]);
        let proxy = FaultProxy::start(&dir, &reg, &["manifest-put-blob-unknown=1"]);
        let target_reg = format!("127.0.0.1:{}", proxy.port);
        let mut args: Vec<String> = vec![
            "--push".into(),
            "--var".into(),
            format!("REG={target_reg}"),
            "--var".into(),
            format!("BASE={reg}/kiln/busybox:latest"),
        ];
        if via == Via::Remote {
            args.extend([
                "--driver".into(),
                "buildx".into(),
                "--builder".into(),
                remote.clone().unwrap(),
            ]);
        }
        args.extend(["os".into(), "app".into()]);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = build_json(&dir, &host, &a, &[]);
        assert!(o.status.success(), "{}", failure(&o));
        let s = summary(&o);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(
            proxy.injected().len() >= 2,
            "one refusal per repository: {:?}",
            proxy.injected()
        );
        for n in ["os", "app"] {
            let t = target(&s, n);
            assert_eq!(t["status"], "built", "{t}");
            let attempts = t["attempts"].as_array().cloned().unwrap_or_default();
            assert!(
                // dockerd 26's pusher (containerd 1.7) drops the
                // registry's reason; BuildKit's own says "blob unknown".
                attempts.iter().any(|a| a["outcome"] == "transient"
                    && a["error"].as_str().is_some_and(|e| {
                        let e = e.to_ascii_lowercase();
                        e.contains("blob unknown")
                            || (e.contains(&format!("/{n}/manifests/"))
                                && e.contains(": 400 bad request"))
                    })),
                "{n}: the refused try is an attempt: {t}\n{err}"
            );
            assert!(
                t["digest"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("sha256:")),
                "{t}"
            );
        }
        assert!(err.contains("again"), "the progress says so: {err}");
        drop(proxy);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Many targets that share a large layer, pushed at once to as many
/// repositories on a builder that has pushed none of it before: BuildKit's
/// concurrent pushes of one blob race in the registry (distribution 2.8 on
/// its filesystem driver); whatever they provoke is run again, and no
/// target fails.
#[test]
fn many_targets_sharing_a_large_layer_push_at_once() {
    let Some((host, reg)) = engine() else { return };
    let Some(remote) = dev_env().1.get("KILN_REMOTE_BUILDER").cloned() else {
        eprintln!("skipped: no remote builder (the legacy engine has no buildx)");
        return;
    };
    let salt = unique("stress-");
    let n = 8;
    let mut bake = String::from("variable \"REG\" {}\nvariable \"BASE\" {}\n");
    bake.push_str(&format!(
        "target \"layer\" {{\n  network = \"host\"\n  dockerfile = \"Dockerfile.layer\"\n  args = {{ BASE = BASE }}\n  tags = [\"${{REG}}/e2e-{salt}/layer:1\"]\n}}\n"
    ));
    let mut names = Vec::new();
    for i in 0..n {
        names.push(format!("t{i}"));
        bake.push_str(&format!(
            "target \"t{i}\" {{\n  network = \"host\"\n  contexts = {{ layer = \"target:layer\" }}\n  dockerfile = \"Dockerfile.t\"\n  args = {{ I = \"{i}\" }}\n  tags = [\"${{REG}}/e2e-{salt}/t{i}:1\"]\n}}\n"
        ));
    }
    let dir = workspace(&[
        ("docker-bake.hcl", &bake),
        (
            "Dockerfile.layer",
            // 48 MiB that no earlier build made: a new, large layer.
            &format!(
                "ARG BASE\nFROM ${{BASE}}\nRUN echo {salt} > /salt && head -c 50331648 /dev/urandom > /big\n"
            ),
        ),
        ("Dockerfile.t", "FROM layer\nARG I\nRUN echo $I > /i\n"),
    ]);
    let mut a: Vec<String> = vec![
        "--push".into(),
        "--jobs".into(),
        n.to_string(),
        "--driver".into(),
        "buildx".into(),
        "--builder".into(),
        remote,
        "--var".into(),
        format!("REG={reg}"),
        "--var".into(),
        format!("BASE={reg}/kiln/busybox:latest"),
    ];
    a.extend(names.iter().cloned());
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = build_json(&dir, &host, &a, &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let mut retried = 0;
    for name in &names {
        let t = target(&s, name);
        assert_eq!(t["status"], "built", "{t}");
        retried += t["attempts"].as_array().map_or(0, Vec::len);
    }
    eprintln!("{n} targets sharing a 48 MiB layer pushed at once: {retried} try(s) run again");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pushing no-op on a builder that keeps no image store asks the
/// registry one `HEAD` per tag, all at the start: the answer that a
/// recorded target's tag still names its digest is also where its image
/// is, so nothing is asked again by digest, level after level of the
/// graph, and nothing is written. (The requests are counted by
/// `scripts/registry-faults` in front of the registry, injecting nothing.)
#[test]
fn a_pushing_no_op_on_a_remote_builder_asks_one_head_per_tag_and_nothing_by_digest() {
    let Some((host, reg)) = engine() else { return };
    let Some(remote) = dev_env().1.get("KILN_REMOTE_BUILDER").cloned() else {
        eprintln!("skipped: no remote builder (the legacy engine has no buildx)");
        return;
    };
    let salt = unique("heads-");
    let dir = workspace(&[
        ("docker-bake.hcl", BAKE),
        (
            "Dockerfile.os",
            &format!("ARG BASE\nFROM ${{BASE}}\nRUN echo {salt} > /salt\n"),
        ),
        ("Dockerfile.app", "FROM os\nRUN cat /salt > /app\n"),
    ]);
    let proxy = FaultProxy::start(&dir, &reg, &["status=GET:^/nothing$:500:0"]);
    let ns = format!("e2e-{salt}");
    let args: Vec<String> = vec![
        "--push".into(),
        "--driver".into(),
        "buildx".into(),
        "--builder".into(),
        remote,
        "--var".into(),
        format!("REG=127.0.0.1:{}", proxy.port),
        "--var".into(),
        format!("NS={ns}"),
        "--var".into(),
        format!("BASE={reg}/kiln/busybox:latest"),
        "os".into(),
        "app".into(),
    ];
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = build_json(&dir, &host, &a, &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let requests = || -> Vec<String> {
        std::fs::read_to_string(&proxy.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" /v2/"))
            .map(String::from)
            .collect()
    };
    let before = requests().len();
    let o = build_json(&dir, &host, &a, &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    for n in ["os", "app"] {
        assert_eq!(target(&s, n)["status"], "skipped", "{s}");
    }
    let noop: Vec<String> = requests().split_off(before);
    let manifests: Vec<&String> = noop.iter().filter(|l| l.contains("/manifests/")).collect();
    for n in ["os", "app"] {
        let heads = manifests
            .iter()
            .filter(|l| l.contains(&format!(" HEAD /v2/{ns}/{n}/manifests/1 ")))
            .count();
        assert_eq!(heads, 1, "one HEAD for {n}:1: {noop:#?}");
    }
    assert_eq!(
        manifests.len(),
        2,
        "nothing else about a manifest: {noop:#?}"
    );
    assert!(
        noop.iter()
            .all(|l| l.contains(" GET /v2/ ") || l.contains(" HEAD /v2/")),
        "a no-op only reads: {noop:#?}"
    );
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}
