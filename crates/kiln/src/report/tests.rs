use super::*;

fn target(name: &str, deps: &[&str], start: Option<f64>, end: Option<f64>) -> TargetInfo {
    TargetInfo {
        name: name.into(),
        outcome: "built".into(),
        node: Some("n".into()),
        slot: Some(0),
        start_s: start,
        end_s: end,
        duration_s: end.unwrap_or(0.0) - start.unwrap_or(0.0),
        expected_s: None,
        planned: None,
        deps: deps.iter().map(|d| d.to_string()).collect(),
        critical: false,
        image: None,
        digest: None,
        tags: Vec::new(),
        reason: None,
        why: Vec::new(),
        steps: Steps::default(),
        stages: Vec::new(),
        longest_steps: Vec::new(),
        cache: Vec::new(),
        verdict: None,
        error: None,
        failed_step: None,
        log_tail: Vec::new(),
        attempts: Vec::new(),
        pushed_bytes: None,
        compiler_cache: None,
    }
}

#[test]
fn a_planned_build_takes_the_lowest_slot_free_at_its_start() {
    let rows = vec![
        ("a".to_string(), "n1".to_string(), 0.0, 10.0),
        ("b".to_string(), "n1".to_string(), 0.0, 5.0),
        ("c".to_string(), "n1".to_string(), 5.0, 8.0),
        ("d".to_string(), "n1".to_string(), 10.0, 12.0),
        ("e".to_string(), "n2".to_string(), 1.0, 2.0),
    ];
    let slots = [("n1".to_string(), 2), ("n2".to_string(), 1)]
        .into_iter()
        .collect();
    let p = planned_slots(&rows, &slots);
    assert_eq!(p["a"].slot, 0);
    assert_eq!(p["b"].slot, 1);
    assert_eq!(p["c"].slot, 1, "c starts as b ends: b's slot");
    assert_eq!(p["d"].slot, 0);
    assert_eq!((p["e"].node.as_str(), p["e"].slot), ("n2", 0));
}

#[test]
fn the_critical_path_follows_the_dependency_that_ended_last() {
    // a ─┬─ b ─┐
    //    └─ c ─┴─ d      (c ends after b, so d waited for c)
    //    e (independent, ends early)
    let mut skipped = target("s", &[], Some(0.0), Some(0.1));
    skipped.slot = None;
    let mut ts = vec![
        skipped,
        target("a", &["s"], Some(0.1), Some(10.0)),
        target("b", &["a"], Some(10.0), Some(15.0)),
        target("c", &["a"], Some(10.0), Some(30.0)),
        target("d", &["b", "c"], Some(30.0), Some(40.0)),
        target("e", &[], Some(0.0), Some(3.0)),
        target("f", &["a"], None, None),
    ];
    mark_critical(&mut ts);
    let crit: Vec<&str> = ts
        .iter()
        .filter(|t| t.critical)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        crit,
        ["a", "c", "d"],
        "a skip costs no time: the path starts at a"
    );
}

#[test]
fn the_embedded_json_cannot_close_its_script_element() {
    let nasty = r#"{"name":"</script><script>alert(1)</script><!--&"}"#;
    let safe = crate::output::html_safe_json(nasty);
    assert!(!safe.contains('<') && !safe.contains('>') && !safe.contains('&'));
    let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
    assert_eq!(back["name"], "</script><script>alert(1)</script><!--&");
}

fn sample() -> RunReport {
    let mut a = target("a<b>", &[], Some(0.0), Some(2.0));
    a.reason = Some("built: file x: content changed".into());
    let mut b = target("b", &["a<b>"], Some(2.0), Some(3.5));
    b.outcome = "failed".into();
    b.error = Some("exit code 1".into());
    b.log_tail = vec!["make: *** [all] Error 1".into()];
    let mut c = target("c", &["b"], None, None);
    c.outcome = "blocked".into();
    c.node = None;
    c.slot = None;
    RunReport {
        format: FORMAT.into(),
        run: RunInfo {
            id: "r1".into(),
            project: "p".into(),
            started_at: "2026-12-02T10:00:00Z".into(),
            finished_at: "2026-12-02T10:00:04Z".into(),
            wall_s: 3.5,
            planned_makespan_s: Some(4.0),
            lower_bound_s: Some(3.0),
            planned_guessed: 0,
            failed: true,
            driver: "docker-cli".into(),
        },
        nodes: vec![NodeInfo {
            name: "n".into(),
            slots: 1,
            speed: 1.0,
            lost: false,
        }],
        targets: vec![a, b, c],
        totals: Totals {
            targets: 3,
            built: 1,
            failed: 1,
            blocked: 1,
            ..Totals::default()
        },
    }
}

#[test]
fn the_page_embeds_the_run_and_loads_nothing() {
    let page = html::render(&sample());
    assert!(page.contains("\"format\":\"kiln-run-report-v1\""));
    assert!(
        page.contains("a\\u003cb\\u003e"),
        "names are escaped in the data"
    );
    assert!(!page.contains("/*KILN_RUN_DATA*/"));
    assert!(page.contains("<title>kiln run r1 — p</title>"));
    assert!(
        page.contains("default-src 'none'"),
        "the CSP forbids every request"
    );
    // The SVG namespace is a name, not a request.
    let page = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for external in ["http://", "https://", "src=\"//", "@import"] {
        assert!(!page.contains(external), "{external} in the page");
    }
    // CSS `url(…)` only for a fragment of the page itself (an SVG pattern).
    for (at, _) in page.match_indices("url(") {
        assert!(page[at + 4..].starts_with('#'), "{}", &page[at..at + 40]);
    }
}

#[test]
fn the_text_report_says_what_the_page_says() {
    let t = text::render(&sample());
    assert!(t.contains("run r1 (p) FAILED"), "{t}");
    assert!(
        t.contains("targets 3: built 1, skipped 0, cutoff 0, pulled 0, failed 1, blocked 1"),
        "{t}"
    );
    assert!(
        t.contains("makespan 3.5s, planned 4.0s, lower bound 3.0s (1.17× the bound)"),
        "{t}"
    );
    assert!(
        t.contains("n/0: a<b> [built 0.0s–2.0s] → b [failed 2.0s–3.5s]"),
        "{t}"
    );
    assert!(
        t.contains("b failed: exit code 1\n  | make: *** [all] Error 1"),
        "{t}"
    );
}

#[test]
fn a_saved_run_loads_back_and_is_the_last() {
    let dir = scratch();
    let mut r = sample();
    let p = save(dir.path(), &mut r).unwrap();
    assert_eq!(locate(dir.path(), None).unwrap(), p);
    assert_eq!(locate(dir.path(), Some("r1")).unwrap(), p);
    assert_eq!(load(&p).unwrap(), r);
    let e = locate(dir.path(), Some("nope")).unwrap_err();
    assert!(
        e.contains("no recorded run \"nope\"") && e.contains("recorded: r1"),
        "{e}"
    );
}

/// A run id used again (a CI job run again with the same RUN_ID) never
/// overwrites the earlier run: the next is recorded as `<id>.2`, then
/// `<id>.3`, and each loads back as what it was.
#[test]
fn a_run_id_used_again_keeps_the_earlier_run() {
    let dir = scratch();
    let mut first = sample();
    let p1 = save(dir.path(), &mut first).unwrap();
    assert_eq!(first.run.id, "r1");
    let mut again = sample();
    again.run.wall_s = 99.0;
    let p2 = save(dir.path(), &mut again).unwrap();
    assert_eq!(again.run.id, "r1.2");
    assert_ne!(p1, p2);
    let mut third = sample();
    save(dir.path(), &mut third).unwrap();
    assert_eq!(third.run.id, "r1.3");
    assert_eq!(load(&p1).unwrap(), first, "the first run is kept as it was");
    assert_eq!(load(&p2).unwrap(), again);
    assert_eq!(locate(dir.path(), Some("r1.2")).unwrap(), p2);
    assert_eq!(list(dir.path()).len(), 3);
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(runs_dir(dir.path()))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".tmp-")), "{names:?}");
}

#[test]
fn a_file_that_is_not_a_recorded_run_is_refused_with_where() {
    let dir = scratch();
    let p = dir.path().join("x.json");
    std::fs::write(&p, "{\"format\": \"kiln-run-report-v9\"}").unwrap();
    assert!(
        load(&p)
            .unwrap_err()
            .contains("format \"kiln-run-report-v9\"")
    );
    std::fs::write(&p, "{\n  nope").unwrap();
    let e = load(&p).unwrap_err();
    assert!(e.contains("x.json:2:3: not JSON"), "{e}");
    std::fs::write(&p, "{}").unwrap();
    assert!(load(&p).unwrap_err().contains("not a recorded kiln run"));
    assert!(
        locate(dir.path(), None)
            .unwrap_err()
            .contains("no run is recorded")
    );
}

#[test]
fn durations_and_sizes_read_like_a_person_wrote_them() {
    assert_eq!(text::duration(45.24), "45.2s");
    assert_eq!(text::duration(245.0), "4m 05s");
    assert_eq!(text::duration(5520.0), "1h 32m");
    assert_eq!(text::bytes(512), "512 B");
    assert_eq!(text::bytes(3 * 1024 * 1024 + 400 * 1024), "3.4 MiB");
}

/// A fresh directory under the system's temporary directory.
fn scratch() -> Scratch {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "kiln-report-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    Scratch(p)
}

struct Scratch(std::path::PathBuf);

impl Scratch {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn only_the_newest_runs_are_kept() {
    let dir = scratch();
    let mut r = sample();
    for i in 0..KEEP + 3 {
        r.run.id = format!("run.{i}");
        save(dir.path(), &mut r).unwrap();
        // Distinct file times, oldest first.
        let p = runs_dir(dir.path()).join(format!("run.{i}.json"));
        let t = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(1_000_000 + i as u64);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
    let kept = list(dir.path());
    assert_eq!(kept.len(), KEEP);
    assert!(!kept.contains(&"run.0".to_string()) && kept.contains(&format!("run.{}", KEEP + 2)));
}
