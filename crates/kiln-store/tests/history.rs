//! The build-history database: recording, normalisation, which builds teach
//! a cost, medians over the last builds, concurrent writers, and the files
//! it refuses.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kiln_store::history::{
    RunEntry, RunTarget, SCHEMA_VERSION, STATUS_BUILT, STATUS_FAILED, WINDOW,
};
use kiln_store::{BuildEvent, History, LearnedCost, StoreError};

fn dir() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "kiln-history-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A successful build of `target` with some steps not cached, `i` seconds
/// after a fixed time.
fn built(target: &str, duration_s: f64, i: u32) -> BuildEvent {
    BuildEvent {
        target: target.into(),
        key: Some(format!("k1:{i:04x}")),
        node: "local".into(),
        node_speed: 1.0,
        duration_s,
        output_mb: None,
        steps_total: 5,
        steps_cached: 2,
        status: STATUS_BUILT.into(),
        at: at(i),
    }
}

fn at(i: u32) -> String {
    format!(
        "2026-11-30T{:02}:{:02}:{:02}Z",
        i / 3600,
        (i / 60) % 60,
        i % 60
    )
}

fn unavailable(r: Result<History, StoreError>) -> (String, String) {
    match r {
        Err(StoreError::Unavailable { location, detail }) => (location, detail),
        Err(e) => panic!("expected Unavailable, got {e}"),
        Ok(h) => panic!("expected an error, opened {}", h.path().display()),
    }
}

#[test]
fn history_is_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<History>();
}

#[test]
fn round_trip_and_reopen() {
    let d = dir();
    let path = d.join(".kiln/history.sqlite");
    let h = History::open(&path).unwrap();
    assert!(path.is_file(), "file and directory created");
    assert!(h.costs(1).unwrap().is_empty());
    let mut e = built("app", 30.0, 1);
    e.output_mb = Some(250.0);
    h.record(&e).unwrap();
    h.record(&built("base", 12.5, 2)).unwrap();
    let expected = [
        (
            "app".to_string(),
            LearnedCost {
                work_s: 30.0,
                output_mb: Some(250.0),
                samples: 1,
            },
        ),
        (
            "base".to_string(),
            LearnedCost {
                work_s: 12.5,
                output_mb: None,
                samples: 1,
            },
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(h.costs(1).unwrap(), expected);
    drop(h);
    // Reopened: the same history, the schema version recorded.
    let h = History::open(&path).unwrap();
    assert_eq!(h.costs(1).unwrap(), expected);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION.to_string());
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let (key, node, status, at): (Option<String>, String, String, String) = conn
        .query_row(
            "SELECT key, node, status, at FROM builds WHERE target = 'app'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        (key.as_deref(), node.as_str(), status.as_str(), at.as_str()),
        (Some("k1:0001"), "local", "built", "2026-11-30T00:00:01Z")
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn durations_are_normalised_by_node_speed() {
    let d = dir();
    let path = d.join("history.sqlite");
    let h = History::open(&path).unwrap();
    let mut e = built("pytorch", 60.0, 1);
    e.node = "think".into();
    e.node_speed = 2.0;
    h.record(&e).unwrap();
    let mut slow = built("pytorch", 240.0, 2);
    slow.node_speed = 0.5;
    h.record(&slow).unwrap();
    let costs = h.costs(1).unwrap();
    // 60 s at speed 2 and 240 s at speed 0.5 are both 120 s at speed 1.
    assert_eq!(costs["pytorch"].work_s, 120.0);
    assert_eq!(costs["pytorch"].samples, 2);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: Vec<(f64, f64, f64)> = conn
        .prepare("SELECT duration_s, node_speed, work_s FROM builds ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows, [(60.0, 2.0, 120.0), (240.0, 0.5, 120.0)]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn fully_cached_and_failed_builds_teach_nothing() {
    let d = dir();
    let h = History::open(&d.join("history.sqlite")).unwrap();
    h.record(&built("app", 100.0, 1)).unwrap();
    // Every step cached: 2 s of lookups, not the cost of a build.
    let mut cached = built("app", 2.0, 2);
    cached.steps_cached = cached.steps_total;
    h.record(&cached).unwrap();
    // No steps at all counts as fully cached.
    let mut empty = built("app", 1.0, 3);
    empty.steps_total = 0;
    empty.steps_cached = 0;
    h.record(&empty).unwrap();
    // A failure stopped part way.
    let mut failed = built("app", 5.0, 4);
    failed.status = STATUS_FAILED.into();
    h.record(&failed).unwrap();
    // A target with nothing but such builds has no learned cost.
    let mut only_cached = built("lib", 3.0, 5);
    only_cached.steps_cached = only_cached.steps_total;
    h.record(&only_cached).unwrap();
    let mut only_failed = built("lib", 9.0, 6);
    only_failed.status = STATUS_FAILED.into();
    h.record(&only_failed).unwrap();
    let costs = h.costs(1).unwrap();
    assert_eq!(costs.keys().collect::<Vec<_>>(), ["app"]);
    assert_eq!(costs["app"].work_s, 100.0);
    assert_eq!(costs["app"].samples, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn medians_of_odd_and_even_counts() {
    let d = dir();
    let h = History::open(&d.join("history.sqlite")).unwrap();
    for (i, (w, mb)) in [(10.0, Some(5.0)), (30.0, None), (20.0, Some(1.0))]
        .into_iter()
        .enumerate()
    {
        let mut e = built("odd", w, i as u32);
        e.output_mb = mb;
        h.record(&e).unwrap();
    }
    for (i, (w, mb)) in [
        (100.0, Some(7.0)),
        (10.0, Some(1.0)),
        (30.0, Some(3.0)),
        (20.0, None),
    ]
    .into_iter()
    .enumerate()
    {
        let mut e = built("even", w, i as u32);
        e.output_mb = mb;
        h.record(&e).unwrap();
    }
    let costs = h.costs(1).unwrap();
    assert_eq!(
        costs["odd"],
        LearnedCost {
            work_s: 20.0,
            // The median of the outputs that are known (5 and 1).
            output_mb: Some(3.0),
            samples: 3,
        }
    );
    assert_eq!(
        costs["even"],
        LearnedCost {
            work_s: 25.0,
            output_mb: Some(3.0),
            samples: 4,
        }
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn only_the_last_builds_count() {
    let d = dir();
    let h = History::open(&d.join("history.sqlite")).unwrap();
    // Five slow builds long ago, then twenty fast ones.
    for i in 0..5 {
        h.record(&built("app", 1000.0, i)).unwrap();
    }
    for i in 5..25 {
        h.record(&built("app", 10.0 + f64::from(i % 2), i)).unwrap();
    }
    assert_eq!(
        h.costs(1).unwrap()["app"],
        LearnedCost {
            work_s: 10.5,
            output_mb: None,
            samples: WINDOW,
        }
    );
    // "Last" is by the time of the build, not the order of recording: an
    // old build recorded late is outside the window...
    h.record(&built("app", 5000.0, 0)).unwrap();
    assert_eq!(h.costs(1).unwrap()["app"].work_s, 10.5);
    // ...and a new one pushes the oldest out. 07:00:00+02:00 is 05:00 UTC,
    // later than everything above but earlier than it reads.
    for _ in 0..11 {
        let mut e = built("app", 2000.0, 0);
        e.at = "2026-11-30T07:00:00.250+02:00".into();
        h.record(&e).unwrap();
    }
    assert_eq!(h.costs(1).unwrap()["app"].work_s, 2000.0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn min_samples_filters_targets() {
    let d = dir();
    let h = History::open(&d.join("history.sqlite")).unwrap();
    for i in 0..3 {
        h.record(&built("three", 10.0, i)).unwrap();
    }
    h.record(&built("one", 10.0, 3)).unwrap();
    let names = |n| h.costs(n).unwrap().into_keys().collect::<Vec<_>>();
    assert_eq!(names(0), ["one", "three"]);
    assert_eq!(names(1), ["one", "three"]);
    assert_eq!(names(2), ["three"]);
    assert_eq!(names(3), ["three"]);
    assert!(names(4).is_empty());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn two_handles_write_concurrently() {
    let d = dir();
    let path = d.join("history.sqlite");
    const PER_THREAD: u32 = 200;
    // Both handles open the new file at once, then write at once.
    let handles: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let path = path.clone();
            std::thread::spawn(move || {
                let h = History::open(&path)?;
                for i in 0..PER_THREAD {
                    h.record(&built(name, f64::from(i), i))?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for t in handles {
        t.join().unwrap().unwrap();
    }
    let h = History::open(&path).unwrap();
    let costs = h.costs(1).unwrap();
    assert_eq!(costs.keys().collect::<Vec<_>>(), ["a", "b"]);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM builds", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2 * i64::from(PER_THREAD));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn many_handles_and_threads_on_a_new_file() {
    let d = dir();
    let path = d.join("history.sqlite");
    let shared = std::sync::Arc::new(History::open(&d.join("shared.sqlite")).unwrap());
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let path = path.clone();
            let shared = shared.clone();
            std::thread::spawn(move || {
                let h = History::open(&path)?;
                for i in 0..25 {
                    h.record(&built(&format!("t{t}"), 1.0, i))?;
                    shared.record(&built(&format!("t{t}"), 1.0, i))?;
                    h.costs(1)?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    for h in [
        History::open(&path).unwrap(),
        std::sync::Arc::into_inner(shared).unwrap(),
    ] {
        let costs = h.costs(1).unwrap();
        assert_eq!(costs.len(), 8);
        assert!(costs.values().all(|c| c.samples == WINDOW));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_garbage_file_is_a_clear_error_and_left_alone() {
    let d = dir();
    std::fs::create_dir_all(&d).unwrap();
    for (name, bytes) in [
        ("long.sqlite", vec![b'x'; 8192]),
        ("short.sqlite", b"not a database".to_vec()),
        (
            "json.sqlite",
            br#"{"format": "kiln-record-v1", "key": "k1:00"}"#.repeat(100),
        ),
    ] {
        let path = d.join(name);
        std::fs::write(&path, &bytes).unwrap();
        let (location, detail) = unavailable(History::open(&path));
        assert_eq!(location, path.display().to_string());
        assert!(
            detail.contains("not a readable SQLite database") && detail.contains("move it away"),
            "{name}: {detail}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} left alone");
        let message = StoreError::Unavailable { location, detail }.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
    }
    // An empty file is a new database.
    let empty = d.join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    History::open(&empty).unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn another_sqlite_database_is_refused() {
    let d = dir();
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("other.sqlite");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE things (x INTEGER); INSERT INTO things VALUES (1);")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let (_, detail) = unavailable(History::open(&path));
    assert!(detail.contains("not a kiln build history"), "{detail}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_newer_schema_version_is_refused_and_not_rewritten() {
    let d = dir();
    let path = d.join("history.sqlite");
    History::open(&path)
        .unwrap()
        .record(&built("app", 1.0, 1))
        .unwrap();
    let set_version = |v: &str| {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
            [v],
        )
        .unwrap();
        // Fold the WAL into the file so that its bytes are the database.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    };
    set_version(&(SCHEMA_VERSION + 1).to_string());
    let before = std::fs::read(&path).unwrap();
    let (location, detail) = unavailable(History::open(&path));
    assert_eq!(location, path.display().to_string());
    assert!(
        detail.contains(&format!("schema version {}", SCHEMA_VERSION + 1))
            && detail.contains("newer kiln"),
        "{detail}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "not rewritten");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM builds", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "the newer kiln's builds are kept");
    drop(conn);
    // A version that is not a number is refused too.
    set_version("two");
    let (_, detail) = unavailable(History::open(&path));
    assert!(detail.contains("unknown schema version"), "{detail}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_unwritable_path_is_unavailable_with_the_path() {
    let d = dir();
    std::fs::create_dir_all(&d).unwrap();
    // A regular file where the directory should be (refused even for root).
    let file = d.join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let path = file.join("history.sqlite");
    let (location, detail) = unavailable(History::open(&path));
    assert_eq!(location, path.display().to_string());
    assert!(detail.contains("directory"), "{detail}");
    // A directory where the file should be.
    let (location, detail) = unavailable(History::open(&d));
    assert_eq!(location, d.display().to_string());
    assert!(
        detail.contains("opening") || detail.contains("unable"),
        "{detail}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn malformed_events_are_invalid_and_not_written() {
    let d = dir();
    let h = History::open(&d.join("history.sqlite")).unwrap();
    type Change = Box<dyn Fn(&mut BuildEvent)>;
    let cases: Vec<(&str, Change)> = vec![
        ("target name is empty", Box::new(|e| e.target.clear())),
        ("node name is empty", Box::new(|e| e.node.clear())),
        ("node speed 0", Box::new(|e| e.node_speed = 0.0)),
        ("node speed NaN", Box::new(|e| e.node_speed = f64::NAN)),
        ("duration -1", Box::new(|e| e.duration_s = -1.0)),
        ("duration inf", Box::new(|e| e.duration_s = f64::INFINITY)),
        ("output -3", Box::new(|e| e.output_mb = Some(-3.0))),
        ("6 cached steps of 5", Box::new(|e| e.steps_cached = 6)),
        (
            "too many",
            Box::new(|e| {
                e.steps_total = u64::MAX;
                e.steps_cached = 1;
            }),
        ),
        ("status \"ok\"", Box::new(|e| e.status = "ok".into())),
        (
            "overflows",
            Box::new(|e| {
                e.duration_s = f64::MAX;
                e.node_speed = 4.0;
            }),
        ),
        ("not RFC 3339", Box::new(|e| e.at = "now".into())),
        ("not RFC 3339", Box::new(|e| e.at = "2026-11-30".into())),
        (
            "not RFC 3339",
            Box::new(|e| e.at = "2026-11-30T00:00:00".into()),
        ),
        (
            "not RFC 3339",
            Box::new(|e| e.at = "2026-11-30T00:00:00.Z".into()),
        ),
        (
            "not a valid date",
            Box::new(|e| e.at = "2026-13-30T00:00:00Z".into()),
        ),
    ];
    for (why, change) in &cases {
        let mut e = built("app", 1.0, 1);
        change(&mut e);
        match h.record(&e) {
            Err(StoreError::Invalid(m)) => assert!(m.contains(why), "{why}: {m}"),
            other => panic!("{why}: expected Invalid, got {other:?}"),
        }
    }
    assert!(h.costs(0).unwrap().is_empty(), "nothing written");
    // The accepted forms of the time.
    for at in [
        "2026-11-30T00:00:00Z",
        "2026-11-30t00:00:00z",
        "2026-11-30 00:00:00.123456789+05:30",
        "2026-11-30T00:00:00-08:00",
    ] {
        let mut e = built("app", 1.0, 1);
        e.at = at.into();
        h.record(&e).unwrap_or_else(|err| panic!("{at}: {err}"));
    }
    assert_eq!(h.costs(0).unwrap()["app"].samples, 4);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_default_location_is_next_to_the_store() {
    assert_eq!(
        Path::new(kiln_store::history::DEFAULT_LOCATION).parent(),
        Some(Path::new(".kiln"))
    );
}

/// Environment variable naming the history a child process writes to.
const CHILD_PATH: &str = "KILN_TEST_HISTORY_CHILD";

/// Run by `two_processes_write_concurrently` in child processes (ignored
/// otherwise): records 200 builds of the target named in the path's
/// environment variable.
#[test]
#[ignore = "a child process of two_processes_write_concurrently"]
fn child_writer() {
    let (Ok(path), Ok(target)) = (
        std::env::var(CHILD_PATH),
        std::env::var(format!("{CHILD_PATH}_TARGET")),
    ) else {
        return;
    };
    let h = History::open(Path::new(&path)).unwrap();
    for i in 0..200 {
        h.record(&built(&target, f64::from(i), i)).unwrap();
    }
}

#[test]
fn two_processes_write_concurrently() {
    let d = dir();
    let path = d.join("history.sqlite");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = ["p", "q"]
        .into_iter()
        .map(|target| {
            std::process::Command::new(&exe)
                .args(["--exact", "child_writer", "--ignored", "--test-threads=1"])
                .env(CHILD_PATH, &path)
                .env(format!("{CHILD_PATH}_TARGET"), target)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "the child ran"
        );
    }
    let costs = History::open(&path).unwrap().costs(1).unwrap();
    assert_eq!(costs.keys().collect::<Vec<_>>(), ["p", "q"]);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM builds", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 400);
    let _ = std::fs::remove_dir_all(&d);
}

fn run(id: &str, second: u32, targets: &[(&str, &str, f64, Option<f64>)]) -> RunEntry {
    RunEntry {
        id: id.into(),
        project: "twin".into(),
        started_at: at(second),
        wall_s: 12.5,
        failed: targets.iter().any(|t| t.1 == "failed"),
        targets: targets
            .iter()
            .map(|(t, o, d, e)| RunTarget {
                target: (*t).into(),
                outcome: (*o).into(),
                node: Some("local".into()),
                duration_s: *d,
                expected_s: *e,
            })
            .collect(),
    }
}

#[test]
fn runs_come_back_newest_first_with_their_targets_and_filter_by_target() {
    let d = dir();
    let h = History::open(&d.join("history.sqlite")).unwrap();
    let r1 = run(
        "r1",
        10,
        &[("a", "built", 10.0, Some(8.0)), ("b", "skipped", 0.0, None)],
    );
    let r2 = run("r2", 20, &[("a", "skipped", 0.0, None)]);
    let r3 = run(
        "r3",
        30,
        &[("b", "failed", 3.0, Some(5.0)), ("c", "blocked", 0.0, None)],
    );
    for r in [&r1, &r2, &r3] {
        h.record_run(r).unwrap();
    }
    let all = h.runs(None, 10).unwrap();
    assert_eq!(all, vec![r3.clone(), r2.clone(), r1.clone()]);
    assert_eq!(h.runs(None, 2).unwrap(), vec![r3.clone(), r2.clone()]);
    let a = h.runs(Some("a"), 10).unwrap();
    assert_eq!(
        a.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["r2", "r1"]
    );
    assert!(a.iter().all(|r| r.targets.iter().all(|t| t.target == "a")));
    // Recording a run again replaces it.
    let again = run("r1", 10, &[("a", "built", 11.0, Some(8.0))]);
    h.record_run(&again).unwrap();
    assert_eq!(h.runs(Some("b"), 10).unwrap()[0].id, "r3");
    assert_eq!(h.runs(None, 10).unwrap()[2], again);
    let _ = std::fs::remove_dir_all(&d);
}

/// `last_built` is what reading the runs says: each target's duration in the
/// newest run, of the last `limit`, that built it.
#[test]
fn last_built_is_the_newest_build_among_the_kept_runs() {
    let path = dir().join("history.sqlite");
    let h = History::open(&path).unwrap();
    let runs = [
        run(
            "r1",
            1,
            &[("app", "built", 40.0, None), ("lib", "built", 9.0, None)],
        ),
        run(
            "r2",
            2,
            &[("app", "skipped", 0.0, None), ("lib", "built", 7.0, None)],
        ),
        run(
            "r3",
            3,
            &[("app", "built", 30.0, None), ("lib", "skipped", 0.0, None)],
        ),
        run(
            "r4",
            4,
            &[("app", "skipped", 0.0, None), ("lib", "failed", 2.0, None)],
        ),
    ];
    for r in &runs {
        h.record_run(r).unwrap();
    }
    let by_reading = |limit: usize| {
        let mut out = std::collections::BTreeMap::new();
        for t in h
            .runs(None, limit)
            .unwrap()
            .iter()
            .flat_map(|r| r.targets.clone())
        {
            if t.outcome == "built" {
                out.entry(t.target).or_insert(t.duration_s);
            }
        }
        out
    };
    for limit in [1, 2, 3, 4, 200] {
        assert_eq!(
            h.last_built(limit).unwrap(),
            by_reading(limit),
            "limit {limit}"
        );
    }
    assert_eq!(h.last_built(200).unwrap().get("app"), Some(&30.0));
    assert_eq!(h.last_built(200).unwrap().get("lib"), Some(&7.0));
    assert_eq!(h.last_built(2).unwrap().get("lib"), None);
    // The shared handle is one per file, and a file replaced is opened anew.
    let a = History::shared(&path).unwrap();
    let b = History::shared(&path).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    drop((a, b, h));
    std::fs::remove_file(&path).unwrap();
    let _ = std::fs::remove_file(path.with_extension("sqlite-wal"));
    let _ = std::fs::remove_file(path.with_extension("sqlite-shm"));
    let fresh = History::shared(&path).unwrap();
    assert!(fresh.runs(None, 10).unwrap().is_empty());
}

/// A write-ahead log left long (by handles that never close) is emptied
/// when the history is opened, and nothing in it is lost.
#[test]
fn a_long_write_ahead_log_is_emptied_when_the_history_is_opened() {
    let path = dir().join("history.sqlite");
    let h = History::open(&path).unwrap();
    for i in 0..200 {
        let r = run(
            &format!("r{i}"),
            i,
            &[("app", "built", 1.0, None), ("lib", "skipped", 0.0, None)],
        );
        h.record_run(&r).unwrap();
    }
    let wal = path.with_file_name("history.sqlite-wal");
    let len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert!(len() > 512 * 1024, "the log holds {} bytes", len());
    let again = History::open(&path).unwrap();
    assert!(len() <= 512 * 1024, "the log holds {} bytes", len());
    assert_eq!(again.runs(None, 1000).unwrap().len(), 200);
    drop(h);
}

#[test]
fn a_run_that_makes_no_sense_is_refused_and_nothing_is_written() {
    let d = dir();
    let h = History::open(&d.join("history.sqlite")).unwrap();
    let mut bad = run("r1", 1, &[("a", "built", 1.0, None)]);
    bad.started_at = "yesterday".into();
    assert!(matches!(h.record_run(&bad), Err(StoreError::Invalid(m)) if m.contains("RFC 3339")));
    let bad = run("r1", 1, &[("a", "built", f64::NAN, None)]);
    assert!(matches!(h.record_run(&bad), Err(StoreError::Invalid(_))));
    let bad = run("r1", 1, &[("", "built", 1.0, None)]);
    assert!(matches!(h.record_run(&bad), Err(StoreError::Invalid(_))));
    assert!(h.runs(None, 10).unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_version_1_history_is_migrated_and_keeps_its_builds() {
    let d = dir();
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("history.sqlite");
    // A history as kiln's schema version 1 wrote it.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE builds (
                 id INTEGER PRIMARY KEY, target TEXT NOT NULL, key TEXT, node TEXT NOT NULL,
                 node_speed REAL NOT NULL, duration_s REAL NOT NULL, work_s REAL NOT NULL,
                 output_mb REAL, steps_total INTEGER NOT NULL, steps_cached INTEGER NOT NULL,
                 status TEXT NOT NULL, at TEXT NOT NULL, at_unix REAL NOT NULL);
             CREATE INDEX builds_by_target ON builds (status, target, at_unix);
             INSERT INTO meta VALUES ('schema_version', '1');
             INSERT INTO builds (target, key, node, node_speed, duration_s, work_s, output_mb,
                                 steps_total, steps_cached, status, at, at_unix)
             VALUES ('app', 'k1:01', 'local', 1.0, 42.0, 42.0, NULL, 5, 1, 'built',
                     '2026-11-30T00:00:01Z', 1796083201.0);",
        )
        .unwrap();
    }
    let h = History::open(&path).unwrap();
    assert_eq!(h.costs(1).unwrap()["app"].work_s, 42.0, "builds kept");
    h.record_run(&run("r1", 5, &[("app", "built", 40.0, Some(42.0))]))
        .unwrap();
    assert_eq!(h.runs(None, 5).unwrap().len(), 1);
    drop(h);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION.to_string());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_current_history_without_a_later_index_gets_it_when_opened() {
    let d = dir();
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("history.sqlite");
    let index_count = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'run_targets_built'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    drop(History::open(&path).unwrap());
    // A history written before the index was added (same schema version).
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        assert_eq!(index_count(&conn), 1);
        conn.execute_batch("DROP INDEX run_targets_built").unwrap();
        assert_eq!(index_count(&conn), 0);
    }
    drop(History::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(
        index_count(&conn),
        1,
        "the index is created when the history is opened"
    );
    let _ = std::fs::remove_dir_all(&d);
}
