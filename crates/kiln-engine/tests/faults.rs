//! The local engine driver's recovery from connection faults, against the
//! real engine (`DOCKER_HOST` from `scripts/dev-env env`) through a proxy
//! that injects them (`fault_proxy`):
//! - a build request that could not be sent (the connection closed after
//!   the request head: hyper's `SendRequest` error) is sent again, at most
//!   twice more;
//! - a build whose progress stream is cut after the export is built when
//!   its build tag exists and no step failed, and failed otherwise;
//! - a daemon that stops answering is `EngineError::Unreachable`.
//!
//! Without an engine every test says it was skipped, unless `KILN_E2E=1`.

mod fault_proxy;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fault_proxy::{CutHow, Proxy};
use kiln_engine::driver::local::LocalEngine;
use kiln_engine::driver::{Built, Failed};
use kiln_engine::events::Collect;
use kiln_engine::{BuildSpec, Endpoint, EngineError};

/// The engine's Unix socket, or `None` (after saying so) when the test is
/// to be skipped.
fn engine_socket() -> Option<PathBuf> {
    let e2e = std::env::var("KILN_E2E").as_deref() == Ok("1");
    let Some(host) = std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()) else {
        assert!(
            !e2e,
            "KILN_E2E=1 but DOCKER_HOST is not set (export $(scripts/dev-env env))"
        );
        eprintln!("skipped: DOCKER_HOST is not set (export $(scripts/dev-env env))");
        return None;
    };
    match host.strip_prefix("unix://") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            assert!(
                !e2e,
                "KILN_E2E=1 but DOCKER_HOST={host} is not a unix:// socket"
            );
            eprintln!("skipped: the fault proxy needs a unix:// DOCKER_HOST, not {host}");
            None
        }
    }
}

/// The proxy in front of the engine, the engine through it, and the engine
/// itself (to check what it holds).
struct Setup {
    proxy: Proxy,
    engine: LocalEngine,
    real: LocalEngine,
}

impl Setup {
    /// `None` when the test is to be skipped.
    async fn start() -> Option<Setup> {
        let socket = engine_socket()?;
        let proxy = Proxy::start(&socket).await;
        let engine = connect(proxy.host())
            .await
            .expect("engine through the proxy");
        let real = connect(format!("unix://{}", socket.display()))
            .await
            .expect("engine");
        // These faults are those of the Engine API's context upload, which
        // kiln uses on the classic image store only (the containerd
        // store's BuildKit cannot read an uploaded tar, so builds there
        // take the docker CLI's session client). CI runs them on the
        // legacy engine (scripts/dev-env up --engine legacy).
        if real.image_store == kiln_engine::driver::local::ImageStore::Containerd {
            eprintln!(
                "skipped: the engine keeps its images in the containerd store, where kiln does not upload contexts through the Engine API; these tests run on the legacy engine"
            );
            return None;
        }
        Some(Setup {
            proxy,
            engine,
            real,
        })
    }
}

async fn connect(host: String) -> Result<LocalEngine, EngineError> {
    LocalEngine::connect(Endpoint {
        host,
        docker_cli: "/usr/bin/docker".into(),
    })
    .await
}

/// A one-step target on the dev environment's base image, in a context of
/// its own (removed on drop), with a per-run build tag like the
/// scheduler's (`kiln.local/<target>:run-<id>`).
struct Target {
    spec: BuildSpec,
    dockerfile: String,
    tag: String,
    /// Text unique to this target, in its RUN step: the step really runs.
    salt: String,
}

impl Target {
    /// `run` is the RUN step, with `{salt}` replaced by the salt.
    fn new(test: &str, run: &str) -> Target {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let id = format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let salt = format!("{test}-{id}-{nanos}");
        let dir = std::env::temp_dir().join(format!("kiln-faults-ctx-{id}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dockerfile = format!(
            "FROM kiln/busybox:latest\nRUN {}\n",
            run.replace("{salt}", &salt)
        );
        std::fs::write(dir.join("Dockerfile"), &dockerfile).unwrap();
        let name = format!("faults-{test}");
        Target {
            tag: format!("kiln.local/{name}:run-{nanos}"),
            spec: BuildSpec {
                name,
                dockerfile: dir.join("Dockerfile"),
                context: dir,
                // RUN steps on an engine without a bridge network.
                network: Some("host".into()),
                ..BuildSpec::default()
            },
            dockerfile,
            salt,
        }
    }

    async fn build(&self, engine: &LocalEngine) -> Result<Result<Built, Failed>, EngineError> {
        let reporter = Collect::default();
        tokio::time::timeout(
            Duration::from_secs(180),
            engine.build(
                &self.spec,
                &self.dockerfile,
                &Default::default(),
                &self.tag,
                &reporter,
            ),
        )
        .await
        .expect("the build finished within 3 minutes")
    }

    /// Removes the build tag from the engine, and the image if nothing else
    /// names it (the engine may still hold it for a moment after a cut).
    async fn remove_image(&self, s: &Setup) {
        for _ in 0..20 {
            let Ok(o) = std::process::Command::new("/usr/bin/docker")
                .args(["-H", &s.real.endpoint.host, "rmi", &self.tag])
                .output()
            else {
                return;
            };
            if o.status.success() || String::from_utf8_lossy(&o.stderr).contains("No such image") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        eprintln!("note: could not remove {}", self.tag);
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.spec.context);
    }
}

/// The failure a build reported (the test fails otherwise).
fn failed(r: &Result<Result<Built, Failed>, EngineError>) -> &Failed {
    match r {
        Ok(Err(f)) => f,
        other => panic!("expected a failed build, got {other:?}"),
    }
}

/// The image a build reported (the test fails otherwise).
fn built(r: &Result<Result<Built, Failed>, EngineError>) -> &Built {
    match r {
        Ok(Ok(b)) => b,
        other => panic!("expected a built image, got {other:?}"),
    }
}

/// The endpoint of an `Unreachable` error (the test fails otherwise).
fn unreachable(r: &Result<Result<Built, Failed>, EngineError>) -> &str {
    match r {
        Err(EngineError::Unreachable { endpoint, .. }) => endpoint,
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_build_request_the_engine_closed_is_sent_again() {
    let Some(s) = Setup::start().await else {
        return;
    };
    let t = Target::new("resend", "echo {salt} > /salt");
    s.proxy.refuse_builds(1);
    let r = t.build(&s.engine).await;
    assert_eq!(s.proxy.refused(), 1);
    assert_eq!(s.proxy.build_requests(), 2, "{:#?}", s.proxy.requests());
    let b = built(&r);
    assert_eq!(s.real.image_id(&t.tag).await, Some(b.image_id.clone()));
    assert_eq!(b.steps.total, 1, "{b:?}");
    t.remove_image(&s).await;
}

#[tokio::test]
async fn a_build_request_is_sent_at_most_three_times() {
    let Some(s) = Setup::start().await else {
        return;
    };
    let t = Target::new("resend3", "echo {salt} > /salt");
    s.proxy.refuse_builds(3);
    let r = t.build(&s.engine).await;
    assert_eq!(s.proxy.build_requests(), 3, "{:#?}", s.proxy.requests());
    assert_eq!(s.proxy.refused(), 3);
    // The error the retry recognises: hyper's, for a request sent on a
    // connection that closed before any response.
    let f = failed(&r);
    assert!(f.message.contains("SendRequest"), "{f:?}");
    // The engine itself is fine, and nothing was built.
    assert!(s.engine.answers().await);
    assert_eq!(s.real.image_id(&t.tag).await, None);
}

/// Builds a one-step image whose response is cut `how` in the image id
/// message (sent after the export and its tagging): the build is done.
async fn cut_after_the_export(test: &str, how: CutHow) {
    let Some(s) = Setup::start().await else {
        return;
    };
    let t = Target::new(test, "echo {salt} > /salt");
    s.proxy.cut_build_response_at("moby.image.id", how);
    let r = t.build(&s.engine).await;
    assert_eq!(s.proxy.cuts(), 1, "the response was not cut");
    let response = String::from_utf8_lossy(&s.proxy.build_response()).into_owned();
    assert!(!response.contains("moby.image.id"), "{response}");
    assert_eq!(
        response.ends_with("\r\n0\r\n\r\n"),
        how == CutHow::EndBody,
        "{response}"
    );
    let b = built(&r);
    let held = s.real.image_id(&t.tag).await.expect("the build tag exists");
    assert_eq!(b.image_id, held);
    assert!(b.image_id.starts_with("sha256:"), "{b:?}");
    assert_eq!(b.steps.total, 1, "{b:?}");
    assert_eq!(s.proxy.build_requests(), 1);
    t.remove_image(&s).await;
}

#[tokio::test]
async fn a_connection_closed_after_the_export_is_a_built_image() {
    cut_after_the_export("cut", CutHow::Close).await;
}

/// The body ends properly after a truncated last message (the decoder's
/// `bytes remaining on stream`).
#[tokio::test]
async fn a_last_message_truncated_after_the_export_is_a_built_image() {
    cut_after_the_export("truncated", CutHow::EndBody).await;
}

/// Builds an image whose step fails, its response cut `how` in the daemon's
/// final error message, while a tag by the build tag's name already exists
/// (an image this build did not make): only the failed step tells the truth.
async fn cut_after_a_failed_step(test: &str, how: CutHow) {
    let Some(s) = Setup::start().await else {
        return;
    };
    let t = Target::new(test, "echo {salt} && exit 3");
    s.real.tag("kiln/busybox:latest", &t.tag).await.unwrap();
    // The daemon's error message is the last; the step's error came before.
    s.proxy.cut_build_response_at("errorDetail", how);
    let r = t.build(&s.engine).await;
    s.real.untag(&t.tag).await;
    assert_eq!(s.proxy.cuts(), 1, "the response was not cut");
    let response = String::from_utf8_lossy(&s.proxy.build_response()).into_owned();
    assert!(!response.contains("errorDetail"), "{response}");
    let f = failed(&r);
    let step = f.step.as_deref().unwrap_or_default();
    assert!(step.contains("RUN echo"), "{f:?}");
    assert!(f.log_tail.iter().any(|l| l.contains(&t.salt)), "{f:?}");
}

#[tokio::test]
async fn a_failed_build_whose_connection_is_closed_stays_failed() {
    cut_after_a_failed_step("cutfail", CutHow::Close).await;
}

#[tokio::test]
async fn a_failed_build_whose_last_message_is_truncated_stays_failed() {
    cut_after_a_failed_step("truncfail", CutHow::EndBody).await;
}

#[tokio::test]
async fn an_engine_that_dies_during_a_build_is_unreachable() {
    let Some(s) = Setup::start().await else {
        return;
    };
    let t = Target::new("die", "echo {salt} > /salt && sleep 2");
    // At the first progress message: the build has started.
    s.proxy
        .cut_build_response_at("moby.buildkit.trace", CutHow::Die);
    let r = t.build(&s.engine).await;
    assert_eq!(s.proxy.cuts(), 1, "the proxy did not die during the build");
    assert_eq!(s.proxy.build_requests(), 1);
    assert_eq!(unreachable(&r), s.proxy.host());
    assert!(!s.engine.answers().await);
    t.remove_image(&s).await;
}

#[tokio::test]
async fn an_engine_gone_before_the_build_is_unreachable() {
    let Some(s) = Setup::start().await else {
        return;
    };
    let t = Target::new("gone", "echo {salt} > /salt");
    s.proxy.die();
    let r = t.build(&s.engine).await;
    assert_eq!(unreachable(&r), s.proxy.host());
    assert_eq!(s.proxy.build_requests(), 0);
}

/// A connection started early (while a run is prepared) and the ones
/// asked for while it is in flight make one: the engine is asked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_started_early_is_waited_for_not_made_twice() {
    let Some(socket) = engine_socket() else {
        return;
    };
    let proxy = Proxy::start(&socket).await;
    let endpoint = Endpoint {
        host: proxy.host(),
        docker_cli: "/usr/bin/docker".into(),
    };
    LocalEngine::start_early(endpoint.clone(), Vec::new());
    let (a, b) = tokio::join!(
        LocalEngine::connect(endpoint.clone()),
        LocalEngine::connect(endpoint.clone())
    );
    a.expect("engine through the proxy");
    b.expect("engine through the proxy");
    let requests = proxy.requests();
    // A connection asks `/version` (and `/info`) of an engine it does not
    // know, or pings one it knows.
    let connections = requests
        .iter()
        .filter(|r| r.contains("/version ") || r.contains("/_ping "))
        .count();
    assert_eq!(connections, 1, "{requests:#?}");
}
