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
        failed_at: None,
        log_tail: Vec::new(),
        attempts: Vec::new(),
        pushed_bytes: None,
        compiler_cache: None,
        driver: None,
        last_build_s: None,
        saved_s: None,
        unit_of: None,
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
            endpoint: None,
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

/// `kiln build` renders its run's page from the report it just saved, not
/// from the file read back: the two are the same report, normalised as
/// `load` normalises (an engine's address named `engine`), so the page is
/// the one `kiln report` draws of the file.
#[test]
fn a_saved_run_read_back_is_the_saved_report_normalised() {
    let dir = scratch();
    let mut r = sample();
    r.nodes[0].name = "unix:///tmp/kiln-dev/docker.sock".into();
    for t in &mut r.targets {
        if t.node.is_some() {
            t.node = Some("unix:///tmp/kiln-dev/docker.sock".into());
        }
    }
    let p = save(dir.path(), &mut r).unwrap();
    let read_back = load(&p).unwrap();
    assert_ne!(read_back, r, "the sample should need normalising");
    normalize(&mut r);
    assert_eq!(read_back, r);
    assert_eq!(html::render(&read_back), html::render(&r));
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
    let last = KEEP + PRUNE_SLACK;
    for i in 0..=last {
        if i == last {
            // Up to the slack, nothing is pruned.
            assert_eq!(list(dir.path()).len(), KEEP + PRUNE_SLACK);
        }
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
    // One past it, the oldest go at once, down to KEEP.
    let kept = list(dir.path());
    assert_eq!(kept.len(), KEEP);
    assert_eq!(kept.first(), Some(&format!("run.{}", last + 1 - KEEP)));
    assert_eq!(kept.last(), Some(&format!("run.{last}")));
}

/// A target of a run summary as the engine reports it.
fn result(
    name: &str,
    status: kiln_engine::TargetStatus,
    slot: Option<usize>,
    start_end: Option<(f64, f64)>,
    duration_s: f64,
) -> kiln_engine::TargetResult {
    kiln_engine::TargetResult {
        name: name.into(),
        status,
        node: "unix:///tmp/kiln-dev/docker.sock".into(),
        image: None,
        digest: None,
        key: None,
        duration_s,
        steps: kiln_engine::steps::StepCounts::default(),
        driver: "docker-cli".into(),
        cache: Vec::new(),
        log: None,
        reason: None,
        error: None,
        failed_step: None,
        failed_at: None,
        log_tail: Vec::new(),
        pushed: Vec::new(),
        hashed: None,
        jobs: None,
        handed: Default::default(),
        build_name: None,
        compiler_cache: None,
        start_s: start_end.map(|(s, _)| s),
        end_s: start_end.map(|(_, e)| e),
        slot,
        attempts: Vec::new(),
        pulled: None,
        cutoff_by: Vec::new(),
        changes: Vec::new(),
    }
}

/// A summary of one engine (named by its socket, as the engine names
/// it): `built` waited 1.9 s for its slot, then built from 7.0 s to
/// 7.7 s; `a`, `b`, `c` were skipped.
fn summary() -> kiln_engine::RunSummary {
    use kiln_engine::TargetStatus::{Built, Skipped};
    kiln_engine::RunSummary {
        run_id: "r2".into(),
        stamps: Default::default(),
        started_at: "2026-12-02T10:00:00Z".into(),
        wall_s: 7.7,
        nodes: vec![kiln_engine::run::NodeUse {
            name: "unix:///tmp/kiln-dev/docker.sock".into(),
            slots: 2,
            lost: false,
        }],
        targets: vec![
            result("a", Skipped, None, Some((0.0, 0.01)), 0.01),
            result("b", Skipped, None, Some((0.0, 0.01)), 0.01),
            result("c", Skipped, None, Some((0.0, 0.01)), 0.01),
            result("built", Built, Some(1), Some((7.0, 7.7)), 2.6),
        ],
        stopped: None,
        stop_error: None,
    }
}

fn report_of(
    s: &kiln_engine::RunSummary,
    costs: &[(&str, f64)],
    last: &[(&str, f64)],
    planned: &Planned,
) -> RunReport {
    let map = |v: &[(&str, f64)]| -> HashMap<String, f64> {
        v.iter().map(|(k, c)| (k.to_string(), *c)).collect()
    };
    let (costs, last) = (map(costs), map(last));
    let empty = HashMap::new();
    let cx = Context {
        project: "p".into(),
        driver: "docker-cli".into(),
        planned,
        deps: &HashMap::new(),
        tags: &HashMap::new(),
        costs: &costs,
        last_built: &last,
        speeds: &empty,
        sizes: &BTreeMap::new(),
    };
    build(s, &cx)
}

/// Time saved counts learned costs only (a target without one saves
/// nothing, never the default guess), each at most what the target's last
/// build took: the total is never more than the skipped targets cost.
#[test]
fn time_saved_is_learned_and_never_more_than_the_skipped_targets_cost() {
    let r = report_of(
        &summary(),
        // a's learned cost includes waits: more than its last build took.
        &[("a", 100.0), ("b", 2.0)],
        &[("a", 3.0), ("b", 5.0), ("c", 4.0)],
        &Planned::default(),
    );
    let by = |n: &str| r.targets.iter().find(|t| t.name == n).unwrap().clone();
    assert_eq!(by("a").saved_s, Some(3.0), "capped by its last build");
    assert_eq!(by("b").saved_s, Some(2.0), "its learned cost");
    assert_eq!(by("c").saved_s, None, "no learned cost: nothing");
    assert_eq!(by("c").last_build_s, Some(4.0));
    assert_eq!(r.totals.saved_s, 5.0);
    let cost: f64 = r.targets.iter().filter_map(|t| t.last_build_s).sum();
    assert!(r.totals.saved_s <= cost);
    // Nothing recorded before: nothing saved.
    let r = report_of(&summary(), &[("a", 100.0)], &[], &Planned::default());
    assert_eq!(r.totals.saved_s, 0.0);
}

/// A build's time is one figure: from taking its slot to its end, what its
/// bar shows (not the task's time, which includes waiting for a slot).
#[test]
fn a_build_s_time_is_its_bar() {
    let r = report_of(&summary(), &[], &[], &Planned::default());
    let b = r.targets.iter().find(|t| t.name == "built").unwrap();
    assert_eq!(b.duration_s, 0.7);
    assert_eq!(Some(b.duration_s), measured(b.slot, b.start_s, b.end_s));
    let text = text::render(&r);
    let row = text.lines().find(|l| l.starts_with("built ")).unwrap();
    assert!(row.contains(" 0.7s ") && !row.contains("2.6s"), "{text}");
}

/// One engine is a lane called `engine` (its socket kept as its
/// endpoint), in the nodes, the targets and the plan; a fleet's nodes keep
/// their names.
#[test]
fn lanes_are_named_by_node() {
    let mut planned = Planned::default();
    planned.targets.insert(
        "built".into(),
        PlannedSlot {
            node: "unix:///tmp/kiln-dev/docker.sock".into(),
            slot: 0,
            start_s: 0.0,
            end_s: 1.0,
        },
    );
    let r = report_of(&summary(), &[], &[], &planned);
    assert_eq!(r.nodes[0].name, "engine");
    assert_eq!(
        r.nodes[0].endpoint.as_deref(),
        Some("unix:///tmp/kiln-dev/docker.sock")
    );
    assert!(
        r.targets
            .iter()
            .all(|t| t.node.as_deref() == Some("engine"))
    );
    let b = r.targets.iter().find(|t| t.name == "built").unwrap();
    assert_eq!(b.planned.as_ref().unwrap().node, "engine");
    assert!(text::render(&r).contains("  engine/1: built [built 7.0s–7.7s]"));
    let mut fleet = sample();
    fleet.run.driver = "fleet of 2".into();
    fleet.nodes[0].name = "node1".into();
    normalize(&mut fleet);
    assert_eq!(fleet.nodes[0].name, "node1");
}

/// A verdict shows only where it means something for the driver that
/// built: the engine never imports or exports a registry cache by design.
#[test]
fn verdicts_meaningless_for_the_driver_are_not_shown() {
    let verdict = |code: &str| {
        Some(Verdict {
            code: code.into(),
            summary: "why".into(),
        })
    };
    let mut r = sample();
    r.run.driver = "docker-cli".into();
    r.targets[0].verdict = verdict("no-cache-import");
    r.targets[1].verdict = verdict("import-failed");
    r.targets[2].verdict = verdict("no-cache-export");
    r.targets[2].driver = Some("buildx".into());
    normalize(&mut r);
    assert_eq!(r.targets[0].verdict, None);
    assert_eq!(r.targets[1].verdict, verdict("import-failed"));
    assert_eq!(r.targets[2].verdict, verdict("no-cache-export"), "buildx");
    assert!(!means_something("no-cache-export", Some("engine-api")));
    assert!(means_something("no-cache-import", Some("buildx")));
}

/// A plan made with guessed costs is said to be one: its seconds and its
/// lower bound are not compared with the run's.
#[test]
fn a_plan_from_guessed_costs_is_flagged() {
    let mut r = sample();
    r.run.planned_makespan_s = Some(5400.0);
    r.run.lower_bound_s = Some(5400.0);
    r.run.planned_guessed = 3;
    assert!(r.plan_guessed());
    let t = text::render(&r);
    assert!(
        t.contains("makespan 3.5s; no plan to compare: 3 of 3 targets"),
        "{t}"
    );
    assert!(!t.contains("1h 30m"), "{t}");
    // Learned costs, and the run beat the bound: said so.
    r.run.planned_guessed = 0;
    r.run.lower_bound_s = Some(5.0);
    let t = text::render(&r);
    assert!(
        t.contains("lower bound 5.0s (0.70× the bound: under it"),
        "{t}"
    );
}

/// A run that built nothing is a no-op, and its report says only that.
#[test]
fn a_run_that_built_nothing_is_a_no_op() {
    let mut r = report_of(&summary(), &[], &[], &Planned::default());
    assert!(!r.built_nothing());
    r.targets.retain(|t| t.name != "built");
    r.targets[1].outcome = "pulled".into();
    assert!(r.built_nothing());
    let t = text::render(&r);
    assert!(t.contains("nothing to do: 3 targets up to date"), "{t}");
    assert!(!t.contains("lanes"), "{t}");
    assert!(!sample().built_nothing(), "a failed run is not a no-op");
}

/// `kiln report` with no run: the last run that built something, and the
/// later runs that built nothing (newest first); when no run built, the
/// last run.
#[test]
fn the_default_run_is_the_last_that_built_something() {
    let dir = scratch();
    let noop = || {
        let mut r = report_of(&summary(), &[], &[], &Planned::default());
        r.targets.retain(|t| t.name != "built");
        r
    };
    let mut first = noop();
    first.run.id = "n0".into();
    save(dir.path(), &mut first).unwrap();
    let (p, skipped) = last_that_built(dir.path()).unwrap();
    assert_eq!((p, skipped), (locate(dir.path(), None).unwrap(), vec![]));
    let mut built = sample();
    let built_at = save(dir.path(), &mut built).unwrap();
    for id in ["n1", "n2"] {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut r = noop();
        r.run.id = id.into();
        save(dir.path(), &mut r).unwrap();
    }
    let (p, skipped) = last_that_built(dir.path()).unwrap();
    assert_eq!(p, built_at);
    assert_eq!(skipped, ["n2", "n1"]);
}

/// A failed run whose text could break Markdown or XML: a target name with
/// markup, a log tail with backticks, an ANSI colour and a control byte.
fn hostile() -> RunReport {
    let mut r = sample();
    r.targets[0].tags = vec!["reg.test/a:1".into()];
    r.targets[0].digest = Some(format!("sha256:{}", "ab".repeat(32)));
    r.targets[0].why = vec!["file `x|y`: content changed".into()];
    let b = &mut r.targets[1];
    b.error = Some("exit code 1 <&> \"quoted\"\nsecond line".into());
    b.failed_step = Some("[build 3/4] RUN make".into());
    b.failed_at = Some("docker/Dockerfile.b:12".into());
    b.log_tail = vec![
        "```not a fence```".into(),
        "\u{1b}[31mred\u{1b}[0m error\u{7}".into(),
        "make: *** [all] Error 1".into(),
    ];
    r.targets[2].reason = Some("dependency b did not build".into());
    r
}

#[test]
fn the_markdown_summary_has_a_row_per_target_and_each_failure() {
    let md = markdown::render(&hostile());
    assert!(md.starts_with("### kiln run `r1` of p: failed\n"), "{md}");
    assert!(
        md.contains("3 targets: 1 built, 0 skipped, 1 failed, 1 blocked · took 3.5s"),
        "{md}"
    );
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
        .collect();
    // Header, then a row per target, each with six cells.
    assert_eq!(rows.len(), 4, "{md}");
    for row in &rows {
        let cells = row.replace("\\|", "").matches('|').count();
        assert_eq!(cells, 7, "six cells: {row}");
    }
    assert!(
        rows[1].starts_with("| a\\<b\\> | 🔨 built | 2.0s |"),
        "{}",
        rows[1]
    );
    assert!(
        rows[1].contains(&format!("`reg.test/a:1@sha256:{}`", "ab".repeat(32))),
        "{}",
        rows[1]
    );
    assert!(
        rows[1].contains("file \\`x\\|y\\`: content changed"),
        "{}",
        rows[1]
    );
    assert!(
        rows[2].contains("❌ failed") && rows[2].contains("exit code 1"),
        "{}",
        rows[2]
    );
    assert!(
        rows[3].contains("⛔ blocked") && rows[3].contains("dependency b"),
        "{}",
        rows[3]
    );
    assert!(
        md.contains("step `[build 3/4] RUN make` at `docker/Dockerfile.b:12`"),
        "{md}"
    );
    // The log tail is fenced with more backticks than it holds, without
    // its terminal colours and control bytes.
    assert!(
        md.contains("\n````text\n```not a fence```\nred error\nmake: *** [all] Error 1\n````\n"),
        "{md}"
    );
    assert!(!md.contains('\u{1b}') && !md.contains('\u{7}'));
}

#[test]
fn the_junit_file_parses_and_says_what_the_run_did() {
    let xml = junit::render(&hostile());
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let suites = doc.root_element();
    assert_eq!(suites.tag_name().name(), "testsuites");
    assert_eq!(suites.attribute("tests"), Some("3"));
    assert_eq!(suites.attribute("failures"), Some("1"));
    assert_eq!(suites.attribute("errors"), Some("1"));
    let suite = suites
        .children()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("timestamp"), Some("2026-12-02T10:00:00"));
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<_> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
    assert_eq!(names, ["a<b>", "b", "c"]);
    assert_eq!(cases[0].attribute("time"), Some("2.000"));
    let failure = cases[1]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(
        failure.attribute("message"),
        Some("exit code 1 <&> \"quoted\"")
    );
    let body = failure.text().unwrap();
    assert!(
        body.starts_with("step: [build 3/4] RUN make\nat: docker/Dockerfile.b:12\n"),
        "{body}"
    );
    assert!(
        body.contains("second line") && body.contains("| red error\n"),
        "{body}"
    );
    assert!(!body.contains('\u{1b}'), "{body:?}");
    let error = cases[2]
        .children()
        .find(|n| n.has_tag_name("error"))
        .unwrap();
    assert_eq!(
        error.attribute("message"),
        Some("dependency b did not build")
    );
    // A skipped target is a skipped case with why.
    let mut r = sample();
    r.targets[0].outcome = "skipped".into();
    r.targets[0].reason = Some("up to date".into());
    let xml = junit::render(&r);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let skipped = doc
        .descendants()
        .find(|n| n.has_tag_name("skipped"))
        .unwrap();
    assert_eq!(skipped.attribute("message"), Some("up to date"));
}

/// A target's platform units are listed just after it and marked as its,
/// whatever order the run finished them in; a name with `@` that is no
/// target's unit stays where it was.
#[test]
fn platform_units_are_grouped_under_their_target() {
    let t = |n: &str| target(n, &[], Some(0.0), Some(1.0));
    let out = group_units(vec![
        t("base@linux/amd64"),
        t("base@linux/arm64"),
        t("base"),
        t("other"),
        t("lone@linux/arm64"),
    ]);
    let names: Vec<(&str, Option<&str>)> = out
        .iter()
        .map(|x| (x.name.as_str(), x.unit_of.as_deref()))
        .collect();
    assert_eq!(
        names,
        [
            ("base", None),
            ("base@linux/amd64", Some("base")),
            ("base@linux/arm64", Some("base")),
            ("other", None),
            ("lone@linux/arm64", None),
        ]
    );
}
