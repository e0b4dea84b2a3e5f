//! Scaling benchmark of the bake evaluator (`harness = false`, std only).
//!
//! Generates (`support/workload.rs`), in memory, realistic HCL bake files of N = 1 000, 10 000 and
//! 50 000 targets: typed and untyped variables overridden through
//! `Options.env`, a validation block, three user `function`s (one with a
//! `for` expression), `_base` targets inherited on several levels, stdlib
//! calls in tags/args/labels, `target:` contexts forming short chains with
//! diamonds (a DAG), matrix blocks (about 30 % of N; 6 instances each, named
//! through `name`) and groups listing slices of targets, all reached from a
//! `default` group.
//!
//! For each N it times, R times (R = 5 for 1k/10k, 3 for 50k):
//! (a) `kiln_bake::load` (HCL parse + evaluation),
//! (b) `Bake::resolve` of `default` (every target; inherits, links) and
//! (c) `kiln_bake::print_json` of the result,
//! then reports the median wall time of each phase and of their per-run
//! total, the total per target, the median on-CPU time of the total
//! (`/proc/thread-self/schedstat`, tick-granular: ±4 ms, but far less
//! disturbed than wall time by other work on a shared machine), the growth
//! ratios t(10k)/t(1k) and t(50k)/t(10k) measured in the same run (linear
//! growth is 10 and 5; `×lin` is the ratio over that, > 1.5 is flagged `!`),
//! the project goal (10k targets in ≤ 1 s) and peak RSS (`VmHWM`, reset per
//! N through `/proc/self/clear_refs` when the kernel allows it, otherwise
//! cumulative). Then it times (a) again R times through the former HCL
//! front end (`kiln_bake::baseline`, `hcl-edit`) and prints both loads and
//! the ratio new/old (wall and on-CPU), measured in the same run. The
//! 1-minute load average before and after is printed:
//! distrust a run made while the machine was busy. Results go to stdout
//! and, as JSON (every run, wall and CPU), to `target/bench-eval.json`
//! (`$CARGO_TARGET_DIR` is honoured). Only the evaluator is timed:
//! generating the file and dropping the results happen outside the clock.
//!
//! `--breakdown` adds one extra pass per N that splits the phases through
//! the public API: HCL syntax (`parse_file`, and the baseline's
//! `baseline::parse_file` with the ratio new/old) vs evaluation
//! (`parse::parse`), the memory load takes per target, measured in a fresh
//! child process (`load peak B`: peak RSS during syntax + evaluation above
//! the RSS before it, the generated text being in both; `load kept B`: the
//! RSS still added after it; `tree B`: what the syntax tree alone added,
//! before evaluation), resolving `default` vs
//! resolving every target by name (isolates group expansion), and the cost
//! of dropping the results.
//!
//! Should a text function used here (`upper`, `lower`, `join`, `format`,
//! `replace`, `split`) be missing from the stdlib, it is written as an
//! equivalent template instead; the substitutions are printed and recorded,
//! so compare figures only between runs with the same substitutions.
//!
//! `--profile-load N R` runs only `load` of N targets R times (for `perf`).
//!
//! Run (release, ~1 min on 2 cores): `cargo bench -p kiln-bake --bench eval`
//! Other sizes / breakdown: `cargo bench -p kiln-bake --bench eval -- 2000 20000 --breakdown`

// The same allocator as the `kiln` binary, so the figures are what users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kiln_bake::{Options, load, print_json};
use serde_json::{Value as J, json};

#[macro_use]
#[path = "support/workload.rs"]
mod workload;

use workload::{Funcs, MATRIX_FANOUT, Workload, generate, mx, svc};

fn options() -> Options {
    let mut o = Options::default();
    for (k, v) in [
        ("VERSION", "1.4.2"),
        ("BUILD_NUMBER", "1234"),
        ("PUSH_CACHE", "true"),
        ("PLATFORMS", "linux/amd64,linux/arm64"),
        ("UNRELATED", "x"),
    ] {
        o.env.insert(k.to_string(), v.to_string());
    }
    o
}

/// Checks that the generated file evaluated as intended (overrides applied,
/// every target reached), so the timings measure the real work.
fn check(doc: &J, wl: &Workload) {
    let targets = doc["target"].as_object().expect("target object");
    assert_eq!(targets.len(), wl.targets, "resolved target count");
    let t1 = &targets[&svc(1)];
    let tags = t1["tags"].as_array().expect("tags");
    assert!(
        tags.iter()
            .any(|t| t.as_str().is_some_and(|s| s.ends_with(":1.4.2"))),
        "VERSION env override not applied: {tags:?}"
    );
    assert!(
        tags.iter()
            .any(|t| t.as_str().is_some_and(|s| s.ends_with(":build-1234"))),
        "typed BUILD_NUMBER override not applied: {tags:?}"
    );
    assert_eq!(
        t1["platforms"].as_array().map(Vec::len),
        Some(2),
        "typed list override: {t1}"
    );
    assert!(
        t1["cache-to"].as_array().is_some_and(|a| !a.is_empty()),
        "typed bool override: {t1}"
    );
    assert_eq!(t1["contexts"]["upstream"], "target:svc-00000");
    if wl.matrix_blocks > 0 {
        let m = &targets[&format!("{}-debian-py312", mx(0))];
        assert_eq!(m["dockerfile"], "Dockerfile.debian");
    }
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[s.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `VmHWM` / `VmRSS` in KiB.
fn proc_status(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// On-CPU time of this thread (`/proc/thread-self/schedstat`, ns), which
/// other processes on a shared machine perturb much less than wall time.
fn cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace()
        .next()?
        .parse()
        .ok()
        .map(Duration::from_nanos)
}

/// A wall-clock and on-CPU timestamp.
#[derive(Clone, Copy)]
struct Stamp {
    wall: Instant,
    cpu: Option<Duration>,
}

impl Stamp {
    fn now() -> Stamp {
        let cpu = cpu_time();
        Stamp {
            wall: Instant::now(),
            cpu,
        }
    }

    /// (wall, cpu) elapsed since `earlier`; cpu is zero when unavailable.
    fn since(self, earlier: Stamp) -> (Duration, Duration) {
        let cpu = match (self.cpu, earlier.cpu) {
            (Some(b), Some(a)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        };
        (self.wall - earlier.wall, cpu)
    }
}

/// Resets `VmHWM` to the current RSS (Linux ≥ 4.0); false when not allowed.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

const PHASES: [&str; 4] = ["load", "resolve", "print", "total"];

struct SizeResult {
    n: usize,
    runs: usize,
    wl_bytes: usize,
    plain: usize,
    matrix_blocks: usize,
    groups: usize,
    links: usize,
    gen_ms: f64,
    /// Wall time per phase (PHASES order), every run.
    samples: [Vec<Duration>; 4],
    /// On-CPU time per phase, every run.
    cpu: [Vec<Duration>; 4],
    peak_rss_kib: Option<u64>,
    /// `load` through the baseline HCL front end (`hcl-edit`): wall, cpu.
    base_load: Vec<Duration>,
    base_load_cpu: Vec<Duration>,
}

impl SizeResult {
    fn med(&self, phase: usize) -> Duration {
        median(&self.samples[phase])
    }

    fn cpu_med(&self, phase: usize) -> Duration {
        median(&self.cpu[phase])
    }
}

fn run_size(n: usize, runs: usize, f: &Funcs, opts: &Options, peak_resettable: bool) -> SizeResult {
    if peak_resettable {
        reset_peak_rss();
    }
    let g0 = Instant::now();
    let wl = generate(n, f);
    let gen_ms = ms(g0.elapsed());
    let mut samples: [Vec<Duration>; 4] = Default::default();
    let mut cpu: [Vec<Duration>; 4] = Default::default();
    let requested = vec!["default".to_string()];
    for run in 0..runs {
        let files = vec![("docker-bake.hcl".to_string(), wl.text.clone())];
        let t0 = Stamp::now();
        let bake = match load(files, opts) {
            Ok(b) => b,
            Err(e) => panic!("load failed for N={n}:\n{e}"),
        };
        let t1 = Stamp::now();
        let resolved = bake
            .resolve(&requested, &[], opts)
            .unwrap_or_else(|e| panic!("resolve failed for N={n}: {e}"));
        let t2 = Stamp::now();
        let doc = print_json(&resolved);
        let t3 = Stamp::now();
        if run == 0 {
            check(&doc, &wl);
        }
        for (p, (b, a)) in [(t1, t0), (t2, t1), (t3, t2), (t3, t0)]
            .into_iter()
            .enumerate()
        {
            let (w, c) = b.since(a);
            samples[p].push(w);
            cpu[p].push(c);
        }
        // Dropped outside the timed region.
        drop((doc, resolved, bake));
    }
    let peak_rss_kib = proc_status("VmHWM:");
    // The same load through the former HCL front end, for the ratio.
    let mut base_load = Vec::new();
    let mut base_load_cpu = Vec::new();
    for _ in 0..runs {
        let files = vec![("docker-bake.hcl".to_string(), wl.text.clone())];
        let t0 = Stamp::now();
        let bake = load_baseline(files, opts);
        let (w, c) = Stamp::now().since(t0);
        base_load.push(w);
        base_load_cpu.push(c);
        drop(bake);
    }
    SizeResult {
        n,
        runs,
        wl_bytes: wl.text.len(),
        plain: wl.plain,
        matrix_blocks: wl.matrix_blocks,
        groups: wl.groups,
        links: wl.links,
        gen_ms,
        samples,
        cpu,
        peak_rss_kib,
        base_load,
        base_load_cpu,
    }
}

/// `load` with HCL parsed by the baseline front end (`hcl-edit`).
fn load_baseline(files: Vec<(String, String)>, opts: &Options) -> kiln_bake::Bake {
    let mut sources = kiln_bake::Sources::default();
    let mut bodies = Vec::new();
    let mut names = Vec::new();
    for (name, text) in files {
        bodies.push(kiln_bake::baseline::parse_file(&mut sources, &name, text).expect("syntax"));
        names.push(name);
    }
    let config = kiln_bake::parse::parse(&bodies, &names, opts).expect("evaluate");
    kiln_bake::Bake { sources, config }
}

/// `--breakdown`: one extra pass per N splitting the phases through the
/// public API: HCL syntax (`parse_file`) vs evaluation (`parse::parse`),
/// `resolve(["default"])` vs `resolve(<every target name>)` (the same
/// targets without group expansion), and dropping the result.
fn breakdown(n: usize, f: &Funcs, opts: &Options) -> J {
    let wl = generate(n, f);
    let name = "docker-bake.hcl".to_string();
    // The baseline front end first, its tree dropped before the rest.
    let mut old_sources = kiln_bake::Sources::default();
    let b0 = Stamp::now();
    let old = kiln_bake::baseline::parse_file(&mut old_sources, &name, wl.text.clone());
    let b1 = Stamp::now();
    drop((old.expect("baseline syntax"), old_sources));
    let text = wl.text.clone();
    let mut sources = kiln_bake::Sources::default();
    let t0 = Stamp::now();
    let body = kiln_bake::parse_file(&mut sources, &name, text).expect("syntax");
    let t1 = Stamp::now();
    let config = kiln_bake::parse::parse(
        std::slice::from_ref(&body),
        std::slice::from_ref(&name),
        opts,
    )
    .expect("evaluate");
    let t2 = Stamp::now();
    let bake = kiln_bake::Bake { sources, config };
    let by_group = bake
        .resolve(&["default".to_string()], &[], opts)
        .expect("resolve default");
    let t3 = Stamp::now();
    let expected = by_group.targets.len();
    drop(by_group);
    let t4 = Stamp::now();
    // The same targets requested by name: no group expansion. Run after the
    // first result is dropped, so both start from the same heap state.
    let names: Vec<String> = bake
        .config
        .targets
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| !n.starts_with('_'))
        .collect();
    let t5 = Stamp::now();
    let by_name = bake.resolve(&names, &[], opts).expect("resolve names");
    let t6 = Stamp::now();
    assert_eq!(by_name.targets.len(), expected);
    drop(by_name);
    let t7 = Stamp::now();
    drop((bake, body));
    let t8 = Stamp::now();
    let mut row = serde_json::Map::new();
    row.insert("n".into(), json!(n));
    if let Some((peak, kept, tree)) = load_memory(n) {
        row.insert("load_peak_bytes".into(), json!(peak));
        row.insert("load_kept_bytes".into(), json!(kept));
        row.insert("syntax_tree_bytes".into(), json!(tree));
    }
    for (key, (b, a)) in [
        ("syntax", (t1, t0)),
        ("syntax_baseline", (b1, b0)),
        ("evaluate", (t2, t1)),
        ("resolve_default", (t3, t2)),
        ("resolve_names", (t6, t5)),
        ("drop_resolved", (t4, t3)),
        ("drop_bake", (t8, t7)),
    ] {
        let (w, c) = b.since(a);
        row.insert(key.into(), json!({ "wall_ms": ms(w), "cpu_ms": ms(c) }));
    }
    J::Object(row)
}

/// The memory `load` takes for N targets, measured in a fresh process (this
/// benchmark run as a child with `--load-memory-child N`), so that no heap
/// kept from earlier work hides it: (peak RSS during load, RSS after it,
/// RSS after the syntax pass alone), each above the RSS before it, in bytes.
fn load_memory(n: usize) -> Option<(u64, u64, u64)> {
    let out = std::process::Command::new(std::env::current_exe().ok()?)
        .args(["--load-memory-child", &n.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

/// The child side of [`load_memory`]: prints "peak kept tree" in bytes,
/// `tree` being what the syntax tree alone added (before evaluation).
fn load_memory_child(n: usize) {
    let f = Funcs::probe();
    let opts = options();
    let name = "docker-bake.hcl".to_string();
    let text = generate(n, &f).text;
    let before = proc_status("VmRSS:");
    if !reset_peak_rss() {
        return;
    }
    // `load`, in its two steps.
    let mut sources = kiln_bake::Sources::default();
    let body = kiln_bake::parse_file(&mut sources, &name, text).expect("syntax");
    let tree = proc_status("VmRSS:");
    let config = kiln_bake::parse::parse(
        std::slice::from_ref(&body),
        std::slice::from_ref(&name),
        &opts,
    )
    .expect("evaluate");
    drop(body);
    let (Some(before), Some(tree), Some(peak), Some(after)) =
        (before, tree, proc_status("VmHWM:"), proc_status("VmRSS:"))
    else {
        return;
    };
    println!(
        "{} {} {}",
        peak.saturating_sub(before) * 1024,
        after.saturating_sub(before) * 1024,
        tree.saturating_sub(before) * 1024
    );
    drop((config, sources));
}

/// The 1-minute load average, to flag runs on a busy machine.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(String::from))
        .unwrap_or_else(|| "?".into())
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
            p.canonicalize().unwrap_or(p)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--profile-load") {
        // Only `load`, N targets R times: for a profiler.
        let n = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(10_000);
        let r = args.get(i + 2).and_then(|n| n.parse().ok()).unwrap_or(10);
        let wl = generate(n, &Funcs::probe());
        let opts = options();
        for _ in 0..r {
            let files = vec![("docker-bake.hcl".to_string(), wl.text.clone())];
            drop(load(files, &opts).expect("load"));
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--load-memory-child") {
        if let Some(n) = args.get(i + 1).and_then(|n| n.parse().ok()) {
            load_memory_child(n);
        }
        return;
    }
    // `cargo bench` passes `--bench`; any bare numbers replace the sizes.
    let want_breakdown = std::env::args().any(|a| a == "--breakdown");
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.replace('_', "").parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = vec![1_000, 10_000, 50_000];
    }
    let f = Funcs::probe();
    let subs = f.substitutions();
    let opts = options();
    let peak_resettable = reset_peak_rss();

    let load_before = loadavg();
    let mut out = String::new();
    w!(
        out,
        "kiln-bake evaluator scaling (median wall time of R runs; total = load + resolve + print)"
    );
    if subs.is_empty() {
        w!(out, "stdlib: every text function used is native");
    } else {
        w!(
            out,
            "stdlib: not available yet, written as templates instead: {}",
            subs.join(", ")
        );
    }

    // Warm-up (stdlib table, allocator) on a small file, not reported.
    run_size(200, 1, &f, &opts, false);

    let mut results = Vec::new();
    for &n in &sizes {
        let runs = if n >= 50_000 { 3 } else { 5 };
        let r = run_size(n, runs, &f, &opts, peak_resettable);
        eprintln!(
            "N={n}: load {:.1} ms, resolve {:.1} ms, print {:.1} ms",
            ms(r.med(0)),
            ms(r.med(1)),
            ms(r.med(2))
        );
        results.push(r);
    }

    w!(
        out,
        "\n{:>6} {:>2} {:>7} {:>5} {:>5} {:>6} {:>9} {:>10} {:>8} {:>9} {:>9} {:>9} {:>8}",
        "N",
        "R",
        "src MiB",
        "mxblk",
        "links",
        "groups",
        "load ms",
        "resolve ms",
        "print ms",
        "total ms",
        "µs/target",
        "cpu ms",
        "peak MiB"
    );
    for r in &results {
        w!(
            out,
            "{:>6} {:>2} {:>7.2} {:>5} {:>5} {:>6} {:>9.1} {:>10.1} {:>8.1} {:>9.1} {:>9.1} {:>9.1} {:>8}",
            r.n,
            r.runs,
            r.wl_bytes as f64 / (1024.0 * 1024.0),
            r.matrix_blocks,
            r.links,
            r.groups,
            ms(r.med(0)),
            ms(r.med(1)),
            ms(r.med(2)),
            ms(r.med(3)),
            r.med(3).as_secs_f64() * 1e6 / r.n as f64,
            ms(r.cpu_med(3)),
            r.peak_rss_kib
                .map(|k| format!("{:.0}", k as f64 / 1024.0))
                .unwrap_or_else(|| "?".into()),
        );
    }
    w!(
        out,
        "wall-time medians; cpu ms = median on-CPU time of load+resolve+print; peak MiB = VmHWM {}",
        if peak_resettable {
            "since the start of each N (reset via /proc/self/clear_refs)"
        } else {
            "of the whole process (cumulative: clear_refs not writable)"
        }
    );

    // Growth between consecutive sizes; linear growth is the size ratio.
    let mut growth = Vec::new();
    if results.len() > 1 {
        w!(
            out,
            "\ngrowth ratios (×lin = ratio / size ratio; 1.0 is linear, > 1.5 is flagged)"
        );
        w!(
            out,
            "{:>17} {:>6}  {:>16} {:>16} {:>16} {:>16} {:>16}",
            "",
            "linear",
            "load",
            "resolve",
            "print",
            "total",
            "total (cpu)"
        );
        for pair in results.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let lin = b.n as f64 / a.n as f64;
            let mut cells = String::new();
            let mut entry = serde_json::Map::new();
            entry.insert("from".into(), json!(a.n));
            entry.insert("to".into(), json!(b.n));
            entry.insert("linear".into(), json!(lin));
            for (p, name) in PHASES.iter().enumerate() {
                let ratio = b.med(p).as_secs_f64() / a.med(p).as_secs_f64();
                let x = ratio / lin;
                let flag = if x > 1.5 { "!" } else { " " };
                write!(cells, " {:>7.2} ({:>4.2}×){flag}", ratio, x).expect("string");
                entry.insert((*name).into(), json!({ "ratio": ratio, "x_linear": x }));
            }
            let (ca, cb) = (a.cpu_med(3).as_secs_f64(), b.cpu_med(3).as_secs_f64());
            if ca > 0.0 {
                let ratio = cb / ca;
                let x = ratio / lin;
                let flag = if x > 1.5 { "!" } else { " " };
                write!(cells, " {:>7.2} ({:>4.2}×){flag}", ratio, x).expect("string");
                entry.insert("total_cpu".into(), json!({ "ratio": ratio, "x_linear": x }));
            }
            w!(
                out,
                "{:>17} {:>6.1} {cells}",
                format!("t({})/t({})", b.n, a.n),
                lin
            );
            growth.push(J::Object(entry));
        }
    }
    if let Some(r) = results.iter().find(|r| r.n == 10_000) {
        let t = ms(r.med(3));
        w!(
            out,
            "goal 10k targets in <= 1 s: {t:.0} ms wall, {:.0} ms cpu -> {}",
            ms(r.cpu_med(3)),
            if t <= 1000.0 { "met" } else { "NOT met" }
        );
    }
    // The HCL front end against the baseline (`hcl-edit`), same run.
    w!(
        out,
        "\nload (syntax + evaluation) with the HCL front end vs the baseline (hcl-edit), median of R runs"
    );
    w!(
        out,
        "{:>6} {:>11} {:>11} {:>9} {:>12} {:>12} {:>9}",
        "N",
        "new ms",
        "old ms",
        "new/old",
        "new cpu ms",
        "old cpu ms",
        "new/old"
    );
    for r in &results {
        let (nw, ow) = (r.med(0), median(&r.base_load));
        let (nc, oc) = (r.cpu_med(0), median(&r.base_load_cpu));
        w!(
            out,
            "{:>6} {:>11.1} {:>11.1} {:>9.2} {:>12.1} {:>12.1} {:>9.2}",
            r.n,
            ms(nw),
            ms(ow),
            nw.as_secs_f64() / ow.as_secs_f64(),
            ms(nc),
            ms(oc),
            nc.as_secs_f64() / oc.as_secs_f64().max(1e-9)
        );
    }
    let load_after = loadavg();
    w!(
        out,
        "load average before/after: {load_before} / {load_after} (on {} CPUs; other work skews timings)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut breakdowns = Vec::new();
    if want_breakdown {
        w!(
            out,
            "\nbreakdown (1 run each, on-CPU ms; bytes per target): load = syntax + evaluate; resolve of `default` \
             vs of every target by name (no group expansion); drops"
        );
        w!(
            out,
            "{:>7} {:>10} {:>10} {:>8} {:>11} {:>11} {:>11} {:>11} {:>12} {:>12} {:>11} {:>11}",
            "N",
            "syntax ms",
            "(old ms)",
            "new/old",
            "evaluate ms",
            "load peak B",
            "load kept B",
            "tree B",
            "res dflt ms",
            "res names ms",
            "drop res ms",
            "drop bake ms"
        );
        for &n in &sizes {
            let b = breakdown(n, &f, &opts);
            let g = |k: &str| b[k]["cpu_ms"].as_f64().unwrap_or(f64::NAN);
            let per_target = |k: &str| b[k].as_f64().unwrap_or(f64::NAN) / n as f64;
            w!(
                out,
                "{:>7} {:>10.1} {:>10.1} {:>8.2} {:>11.1} {:>11.0} {:>11.0} {:>11.0} {:>12.1} {:>12.1} {:>11.1} {:>11.1}",
                n,
                g("syntax"),
                g("syntax_baseline"),
                g("syntax") / g("syntax_baseline"),
                g("evaluate"),
                per_target("load_peak_bytes"),
                per_target("load_kept_bytes"),
                per_target("syntax_tree_bytes"),
                g("resolve_default"),
                g("resolve_names"),
                g("drop_resolved"),
                g("drop_bake")
            );
            breakdowns.push(b);
        }
    }
    print!("{out}");

    let doc = json!({
        "bench": "kiln-bake/eval",
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "substituted_functions": subs,
        "peak_rss_resettable": peak_resettable,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "sizes": results.iter().map(|r| {
            let phase = |p: usize| json!({
                "median_ms": ms(r.med(p)),
                "min_ms": ms(*r.samples[p].iter().min().expect("runs")),
                "max_ms": ms(*r.samples[p].iter().max().expect("runs")),
                "runs_ms": r.samples[p].iter().map(|d| ms(*d)).collect::<Vec<_>>(),
                "cpu_median_ms": ms(r.cpu_med(p)),
                "cpu_runs_ms": r.cpu[p].iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            });
            json!({
                "n": r.n,
                "runs": r.runs,
                "source_bytes": r.wl_bytes,
                "plain_targets": r.plain,
                "matrix_blocks": r.matrix_blocks,
                "matrix_targets": r.matrix_blocks * MATRIX_FANOUT,
                "groups": r.groups,
                "target_links": r.links,
                "generate_ms": r.gen_ms,
                "load": phase(0),
                "resolve": phase(1),
                "print": phase(2),
                "total": phase(3),
                "us_per_target": r.med(3).as_secs_f64() * 1e6 / r.n as f64,
                "peak_rss_kib": r.peak_rss_kib,
                "load_baseline": {
                    "median_ms": ms(median(&r.base_load)),
                    "runs_ms": r.base_load.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
                    "cpu_median_ms": ms(median(&r.base_load_cpu)),
                },
            })
        }).collect::<Vec<_>>(),
        "growth": growth,
        "breakdown": breakdowns,
    });
    let dir = target_dir();
    let path = dir.join("bench-eval.json");
    let text = serde_json::to_string_pretty(&doc).expect("json") + "\n";
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, text)) {
        Ok(()) => println!("\nwrote {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}
