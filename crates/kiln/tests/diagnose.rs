//! `kiln diagnose` through the real binary: snapshots of the text and JSON
//! reports, stdin, exit codes, the saved real logs, and real builds on the
//! local engine (cold, warm, a missing `--cache-from` ref, inline cache
//! exported, pushed and imported) whose reports must agree with counts
//! taken straight from the log text. Without an engine the builds say
//! "skipped" and pass; with `KILN_E2E=1` a missing engine is a failure.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kiln-diagnose/tests/fixtures")
}

fn kiln(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kiln"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("run kiln");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.unwrap_or_default())
        .expect("write stdin");
    drop(pipe);
    child.wait_with_output().expect("kiln output")
}

use common::{stderr, stdout};

fn report(path: &Path) -> serde_json::Value {
    let p = path.to_str().expect("utf-8 path");
    let o = kiln(&["diagnose", "--format", "json", p], None);
    assert!(o.status.success(), "{p}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("JSON report")
}

/// Step counts taken from a plain log's text, independently of kiln: a
/// vertex `#N [<stage> i/n] <INSTRUCTION>` that is not a `FROM` is a step,
/// and it is cached if a line `#N CACHED` exists. Per stage `(total,
/// cached)`, `stage-0` for a nameless `[i/n]`.
fn log_counts(log: &str) -> BTreeMap<String, (u64, u64)> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut cached: HashSet<&str> = HashSet::new();
    for line in log.lines() {
        let Some((num, rest)) = line.split_once(' ') else {
            continue;
        };
        if !num.starts_with('#') {
            continue;
        }
        if rest == "CACHED" {
            cached.insert(num);
        } else if rest.starts_with('[') {
            names.entry(num).or_insert(rest);
        }
    }
    let mut out = BTreeMap::new();
    for (num, name) in names {
        let Some((inside, instruction)) = name[1..].split_once("] ") else {
            continue;
        };
        let mut words: Vec<&str> = inside.split_whitespace().collect();
        let Some(counter) = words.pop() else {
            continue;
        };
        let numeric = counter
            .split('/')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        if !counter.contains('/') || !numeric || instruction.starts_with("FROM ") {
            continue;
        }
        let stage = if words.is_empty() {
            "stage-0".to_string()
        } else {
            words.join(" ")
        };
        let e = out.entry(stage).or_insert((0, 0));
        e.0 += 1;
        e.1 += u64::from(cached.contains(num));
    }
    out
}

/// The report's per-stage counts and totals equal the log's own.
fn assert_counts_match(report: &serde_json::Value, log: &str) {
    let expected = log_counts(log);
    let got: BTreeMap<String, (u64, u64)> = report["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                (s["total"].as_u64().unwrap(), s["cached"].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(got, expected, "per-stage counts; log:\n{log}");
    let total: u64 = expected.values().map(|v| v.0).sum();
    let cached: u64 = expected.values().map(|v| v.1).sum();
    assert_eq!(report["steps"]["total"], total, "log:\n{log}");
    assert_eq!(report["steps"]["cached"], cached, "log:\n{log}");
}

#[test]
fn real_logs_agree_with_their_own_counts() {
    let mut seen = 0;
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "log") {
            let log = std::fs::read_to_string(&p).unwrap();
            let log: String = log
                .lines()
                .map(|l| match l.split_once("Z ") {
                    Some((stamp, rest)) if stamp.starts_with("20") => rest,
                    _ => l,
                })
                .collect::<Vec<_>>()
                .join("\n");
            assert_counts_match(&report(&p), &log);
            seen += 1;
        }
    }
    assert!(seen >= 6, "{seen} plain fixtures");
}

#[test]
fn text_report_with_inputs() {
    let f = fixtures();
    let o = kiln(
        &[
            "diagnose",
            f.join("plain-seed000.log").to_str().unwrap(),
            "--inputs",
            f.join("seed000-inputs.json").to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    insta::assert_snapshot!("diagnose_seed000_text", stdout(&o));
}

#[test]
fn json_report() {
    let o = kiln(
        &[
            "diagnose",
            "--format",
            "json",
            fixtures()
                .join("plain-missing-cache-from.log")
                .to_str()
                .unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    insta::assert_snapshot!("diagnose_missing_cache_from_json", stdout(&o));
}

#[test]
fn stdin_and_dash_read_the_same_log() {
    let path = fixtures().join("rawjson-registry.jsonl");
    let log = std::fs::read(&path).unwrap();
    let from_file = kiln(
        &["diagnose", "--format", "json", path.to_str().unwrap()],
        None,
    );
    let from_stdin = kiln(&["diagnose", "--format", "json"], Some(&log));
    let from_dash = kiln(&["diagnose", "-", "--format", "json"], Some(&log));
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
    assert_eq!(stdout(&from_stdin), stdout(&from_file));
    assert_eq!(stdout(&from_dash), stdout(&from_file));
    let v: serde_json::Value = serde_json::from_slice(&from_stdin.stdout).unwrap();
    assert_eq!(v["verdict"], "healthy");
}

#[test]
fn a_missing_log_is_exit_2() {
    let o = kiln(&["diagnose", "/nonexistent/build.log"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains("error: cannot read /nonexistent/build.log: No such file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn output_without_buildkit_progress_is_exit_2() {
    let o = kiln(
        &["diagnose"],
        Some(b"Step 1/2 : FROM busybox\n ---> 3f57d9401f8d\n"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("error: stdin: no BuildKit progress in the log (2 line(s) read)"),
        "{}",
        stderr(&o)
    );
    let o = kiln(&["diagnose"], Some(b""));
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bad_inputs_are_exit_2() {
    let f = fixtures();
    let log = f.join("plain-cold.log");
    let o = kiln(
        &[
            "diagnose",
            log.to_str().unwrap(),
            "--inputs",
            f.join("plain-warm.log").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not JSON"), "{}", stderr(&o));
    let o = kiln(
        &[
            "diagnose",
            log.to_str().unwrap(),
            "--inputs",
            "/nonexistent.json",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read --inputs"),
        "{}",
        stderr(&o)
    );
}

/// Real builds on the dev engine.
mod engine {
    use super::*;
    use common::e2e;

    const DOCKERFILE: &str = "FROM kiln/busybox:latest AS base\n\
        RUN echo base-@U@ > /base.txt\n\
        COPY a.txt /a.txt\n\
        \n\
        FROM base AS build\n\
        RUN echo build-@U@ > /build.txt\n\
        COPY b.txt /b.txt\n\
        RUN cat /a.txt /b.txt /build.txt > /out.txt\n\
        \n\
        FROM kiln/busybox:latest\n\
        COPY --from=build /out.txt /out.txt\n\
        RUN echo final-@U@-@V@\n";

    struct Ws {
        dir: PathBuf,
        host: String,
        unique: String,
    }

    impl Ws {
        fn new(host: &str) -> Ws {
            let unique = format!(
                "{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            );
            let dir = e2e::workspace(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
            Ws {
                dir,
                host: host.to_string(),
                unique,
            }
        }

        /// `DOCKER_BUILDKIT=1 docker build --progress=plain` with the last
        /// step's text `variant`; returns the log and the kiln report.
        fn build(&self, variant: &str, args: &[&str]) -> (String, serde_json::Value) {
            let df = DOCKERFILE
                .replace("@U@", &self.unique)
                .replace("@V@", variant);
            std::fs::write(self.dir.join("Dockerfile"), df).unwrap();
            let o = Command::new("/usr/bin/docker")
                .arg("-H")
                .arg(&self.host)
                .args(["build", "--progress=plain", "--network", "host"])
                .args(args)
                .arg(".")
                .current_dir(&self.dir)
                .env("DOCKER_BUILDKIT", "1")
                .output()
                .expect("docker build");
            let log = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(o.status.success(), "docker build {args:?} failed:\n{log}");
            let path = self.dir.join(format!("build-{variant}.log"));
            std::fs::write(&path, &log).unwrap();
            let r = report(&path);
            assert_counts_match(&r, &log);
            (log, r)
        }

        fn tag(&self, name: &str) -> String {
            format!("kiln-diagnose-e2e/{name}:{}", self.unique)
        }
    }

    #[test]
    fn cold_warm_missing_ref_and_inline_cache() {
        let Some((host, registry)) = e2e::engine() else {
            return;
        };
        let ws = Ws::new(&host);
        let local = ws.tag("local");

        // Cold: content no build has seen, so nothing can be cached.
        let (_, r) = ws.build("1", &["-t", &local]);
        assert_eq!(r["steps"]["total"], 7);
        assert_eq!(r["steps"]["cached"], 0);
        assert_eq!(r["verdict"], "no-cache-import");
        assert_eq!(r["findings"][1], "no-cache-export");

        // Warm: the same build again, everything from the local cache.
        let (_, r) = ws.build("1", &["-t", &local]);
        assert_eq!(r["steps"]["cached"], 7);
        assert_eq!(r["verdict"], "no-cache-export");

        // A --cache-from ref that does not exist: the import errors, the
        // build goes on (the last step changed, so it is rebuilt).
        let missing = format!("{registry}/{}", ws.tag("missing"));
        let (log, r) = ws.build("2", &["-t", &local, "--cache-from", &missing]);
        assert!(log.contains("importing cache manifest from"), "{log}");
        assert_eq!(r["imports"][0]["ref"], missing.as_str());
        assert_eq!(r["imports"][0]["outcome"], "error");
        assert_eq!(r["imports"][0]["cause"], "not-found");
        assert_eq!(r["steps"]["cached"], 6);
        assert_eq!(r["verdict"], "import-failed");

        // Inline cache: exported with the image, pushed, the local tag
        // removed, then imported with --cache-from (the shared engine's
        // build cache is not pruned, so the hits may come from it too).
        let pushed = format!("{registry}/{}", ws.tag("inline"));
        let inline = ["--build-arg", "BUILDKIT_INLINE_CACHE=1"];
        let (_, r) = ws.build("3", &[&inline[..], &["-t", &pushed]].concat());
        // dockerd 20.10 shows inline cache as its own `exporting cache`
        // vertex; BuildKit 0.13 as a status inside `exporting to image`.
        assert_eq!(r["exports"].as_array().unwrap().len(), 1, "{r}");
        let e = &r["exports"][0];
        assert!(
            matches!(
                (e["name"].as_str(), e["kind"].as_str()),
                (Some("exporting cache"), Some("unspecified"))
                    | (Some("preparing layers for inline cache"), Some("inline"))
            ),
            "{e}"
        );
        assert_eq!(r["exports"][0]["outcome"], "ok");
        assert_eq!(r["steps"]["cached"], 6);
        let push = e2e::docker(&host, &["push", &pushed]);
        assert!(push.contains("digest: sha256:"), "push failed: {push}");
        e2e::docker(&host, &["rmi", &pushed]);
        let (_, r) = ws.build(
            "3",
            &[&inline[..], &["-t", &local, "--cache-from", &pushed]].concat(),
        );
        assert_eq!(r["imports"][0]["ref"], pushed.as_str());
        assert_eq!(r["imports"][0]["outcome"], "ok");
        assert_eq!(r["exports"][0]["outcome"], "ok");
        assert_eq!(r["steps"]["cached"], 7);
        assert_eq!(r["verdict"], "healthy");

        e2e::docker(&host, &["rmi", &local]);
        let _ = std::fs::remove_dir_all(&ws.dir);
    }
}
