//! Opening a run report in a real browser: Debian's `chromium`, headless,
//! with the flags that keep it off the network, loading the file from
//! disk. What the page drew is read back from the DOM after its script ran
//! (`--dump-dom`), what it logged from chromium's console lines, what it
//! asked for from chromium's network log; a screenshot is kept as an
//! artifact (`target/artifacts/`, or `$KILN_ARTIFACTS`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser, if there is one. With `KILN_E2E=1` (CI) a missing browser
/// fails the test: CI installs it.
pub fn chromium() -> Option<PathBuf> {
    let p = std::env::var_os("KILN_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var("KILN_E2E").as_deref() != Ok("1"),
        "KILN_E2E=1 but there is no browser at {} (apt-get install chromium; .ci/run does)",
        p.display()
    );
    eprintln!("skipped: no chromium at {}", p.display());
    None
}

/// What a page came to in the browser.
pub struct Page {
    /// The DOM after the page's script ran.
    pub dom: String,
    /// Console lines chromium printed for the page.
    pub console: Vec<String>,
    /// The network requests the page made (its own: chromium's
    /// background requests, whose initiator is the browser, are not the
    /// page's). Loading the file itself is not a network request.
    pub requests: Vec<String>,
    pub screenshot: PathBuf,
}

/// The flags of a headless chromium that stays off the network.
fn base(browser: &Path, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Where artifacts of the tests go.
pub fn artifacts() -> PathBuf {
    let d = std::env::var_os("KILN_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::root().join("target/artifacts"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Loads `html` from disk in `browser`: the DOM, the console, the network
/// log, and a screenshot saved as `artifacts()/<name>.png`.
pub fn open(browser: &Path, html: &Path, name: &str) -> Page {
    let work = std::env::temp_dir().join(format!("kiln-browser-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let url = format!("file://{}", html.canonicalize().unwrap().display());
    let netlog = work.join("net.json");
    let o = base(browser, &work.join("profile"))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("run chromium");
    assert!(
        o.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let console = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(String::from)
        .collect();
    let log = std::fs::read_to_string(&netlog).unwrap_or_default();
    let requests = page_requests(&log);
    let screenshot = artifacts().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    let o = base(browser, &work.join("profile-shot"))
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg("--window-size=1400,2400")
        .arg(&url)
        .output()
        .expect("run chromium");
    assert!(
        o.status.success() && screenshot.is_file(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&work);
    Page {
        dom,
        console,
        requests,
        screenshot,
    }
}

/// The URLs of the requests a page started, from chromium's network log
/// (`URL_REQUEST_START_JOB` events whose initiator is an origin: the
/// browser's own start with initiator `not an origin`).
fn page_requests(log: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(log) else {
        panic!(
            "chromium's network log is not JSON: {}",
            &log[..log.len().min(500)]
        );
    };
    let start_job = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].as_u64();
    assert!(
        start_job.is_some(),
        "the network log names no URL_REQUEST_START_JOB"
    );
    v["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["type"].as_u64() == start_job)
        .filter(|e| e["params"]["initiator"].as_str() != Some("not an origin"))
        .filter_map(|e| e["params"]["url"].as_str().map(String::from))
        .collect()
}

/// The elements `<tag …>` of `dom` (opening tags only), as attribute maps,
/// in document order.
pub fn elements(dom: &str, tag: &str) -> Vec<BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find(&open) {
        rest = &rest[at + open.len()..];
        let end = rest.find('>').unwrap_or(rest.len());
        out.push(attributes(&rest[..end]));
        rest = &rest[end..];
    }
    out
}

/// `a="1" b="x &amp; y"` → {a: 1, b: x & y}.
fn attributes(s: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let name_end = rest
            .find(|c: char| c == '=' || c.is_whitespace() || c == '/')
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_string();
        rest = rest[name_end..].trim_start();
        if let Some(r) = rest.strip_prefix('=') {
            let r = r.trim_start();
            let (value, after) = match r.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let body = &r[1..];
                    let end = body.find(q).unwrap_or(body.len());
                    (&body[..end], &body[(end + 1).min(body.len())..])
                }
                _ => {
                    let end = r.find(char::is_whitespace).unwrap_or(r.len());
                    (&r[..end], &r[end..])
                }
            };
            m.insert(name, unescape(value));
            rest = after.trim_start();
        } else {
            if !name.is_empty() {
                m.insert(name, String::new());
            }
            rest = rest.trim_start_matches('/').trim_start();
        }
    }
    m
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The part of `dom` inside the element whose opening tag carries
/// `id="<id>"`, up to its matching `</tag>` (not nested in a same-named
/// tag: enough for an `<svg>`).
pub fn section<'a>(dom: &'a str, tag: &str, id: &str) -> &'a str {
    let marker = format!("id=\"{id}\"");
    let Some(at) = dom.find(&marker) else {
        panic!("no element with {marker} in the page");
    };
    let start = dom[..at].rfind(&format!("<{tag}")).unwrap_or(at);
    let end = dom[at..]
        .find(&format!("</{tag}>"))
        .map(|e| at + e)
        .unwrap_or(dom.len());
    &dom[start..end]
}

/// Checks a rendered run report against the recorded run it was made
/// from (`kiln report --format json`): it finished rendering, logged
/// nothing, asked for nothing outside the file, shows every target with
/// its outcome, draws each build on its node and slot, a lane's bars in
/// the order they ran, and each attempt lost or run again.
pub fn check_report(page: &Page, run: &serde_json::Value) {
    assert!(
        page.dom.contains("data-ready=\"1\""),
        "the page's script did not finish: {}",
        &page.dom[..page.dom.len().min(2000)]
    );
    assert!(page.console.is_empty(), "console: {:?}", page.console);
    assert!(
        page.requests.is_empty(),
        "the page asked the network: {:?}",
        page.requests
    );
    let sections = elements(&page.dom, "details");
    check_numbers(page, run);
    if !page.dom.contains("id=\"gantt-actual\"") {
        // A run that built nothing: a short page, no timeline.
        for t in run["targets"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            assert!(
                sections
                    .iter()
                    .any(|d| d.get("data-target").map(String::as_str) == Some(name)),
                "no details for {name}"
            );
        }
        return;
    }
    let actual = section(&page.dom, "svg", "gantt-actual");
    let rects = elements(actual, "rect");
    let bars: Vec<&BTreeMap<String, String>> = rects
        .iter()
        .filter(|r| {
            r.get("class")
                .is_some_and(|c| c.split(' ').any(|w| w == "bar"))
        })
        .collect();
    let targets = run["targets"].as_array().unwrap();
    for t in targets {
        let name = t["name"].as_str().unwrap();
        let outcome = t["outcome"].as_str().unwrap();
        let s = sections
            .iter()
            .find(|d| d.get("data-target").map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no details for {name}"));
        assert_eq!(
            s.get("data-outcome").map(String::as_str),
            Some(outcome),
            "{name}"
        );
        if let (Some(node), Some(slot)) = (t["node"].as_str(), t["slot"].as_u64()) {
            let lane = format!("{node}/{slot}");
            let bar = bars
                .iter()
                .find(|b| {
                    b.get("data-target").map(String::as_str) == Some(name)
                        && !b.get("class").is_some_and(|c| c.contains("attempt"))
                })
                .unwrap_or_else(|| panic!("no bar for {name}"));
            assert_eq!(bar.get("data-lane"), Some(&lane), "{name}");
            assert!(
                bar.get("class")
                    .is_some_and(|c| c.contains(&format!("o-{outcome}"))),
                "{name}: {bar:?}"
            );
        }
        for a in t["attempts"].as_array().into_iter().flatten() {
            let lane = format!(
                "{}/{}",
                a["node"].as_str().unwrap(),
                a["slot"].as_u64().unwrap_or(0)
            );
            // Lost with its node, or run again after a transient error
            // (a push the registry refused while another build pushed the
            // same layer): drawn with its own outcome.
            let outcome = a["outcome"].as_str().unwrap_or("lost");
            assert!(
                bars.iter()
                    .any(|b| b.get("data-target").map(String::as_str) == Some(name)
                        && b.get("data-outcome").map(String::as_str) == Some(outcome)
                        && b.get("data-lane") == Some(&lane)),
                "no {outcome} attempt of {name} on {lane}: {a}"
            );
        }
    }
    // On each lane, bars left to right in the order they started.
    let mut lanes: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for b in &bars {
        let (Some(lane), Some(x), Some(start)) =
            (b.get("data-lane"), b.get("x"), b.get("data-start"))
        else {
            panic!("a bar without lane, x or start: {b:?}");
        };
        lanes
            .entry(lane.clone())
            .or_default()
            .push((x.parse().unwrap(), start.parse().unwrap()));
    }
    for (lane, mut v) in lanes {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(
            v.windows(2).all(|w| w[0].1 <= w[1].1),
            "lane {lane}: bars out of order {v:?}"
        );
    }
}

/// The text of each element whose opening tag carries `class="<class>"`
/// (its content up to the next tag), in document order.
pub fn texts(dom: &str, class: &str) -> Vec<String> {
    let marker = format!("class=\"{class}\"");
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find(&marker) {
        rest = &rest[at + marker.len()..];
        let Some(open_end) = rest.find('>') else {
            break;
        };
        rest = &rest[open_end + 1..];
        let end = rest.find('<').unwrap_or(rest.len());
        out.push(unescape(&rest[..end]));
        rest = &rest[end..];
    }
    out
}

fn num(m: &BTreeMap<String, String>, k: &str) -> Option<f64> {
    m.get(k).and_then(|v| v.parse().ok())
}

/// The page's numbers agree with each other and with the run: a build's
/// bar is as long as its time on the axis scale (and its details say the
/// same time), the lower bound is at most the makespan or labelled (a
/// guess, or a run that beat it), time saved is at most what the skipped
/// targets cost when last built, lanes carry node names; a run that
/// built nothing says so.
pub fn check_numbers(page: &Page, run: &serde_json::Value) {
    let dom = &page.dom;
    let targets = run["targets"].as_array().unwrap();
    let details = elements(dom, "details");
    let detail = |name: &str| {
        details
            .iter()
            .find(|d| d.get("data-target").map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no details for {name}"))
    };
    let noop = !run["run"]["failed"].as_bool().unwrap_or(false)
        && targets
            .iter()
            .all(|t| matches!(t["outcome"].as_str(), Some("skipped" | "cutoff" | "pulled")));
    // Time saved: at most what the skipped targets took when last built.
    let saved = elements(dom, "div")
        .into_iter()
        .find(|d| d.get("data-total").map(String::as_str) == Some("saved"))
        .and_then(|d| num(&d, "data-saved-s"))
        .expect("the page shows the time saved, with its seconds");
    let cost: f64 = details
        .iter()
        .filter(|d| {
            matches!(
                d.get("data-outcome").map(String::as_str),
                Some("skipped" | "cutoff" | "pulled")
            )
        })
        .filter_map(|d| num(d, "data-last-build"))
        .sum();
    assert!(
        saved <= cost + 0.05,
        "time saved {saved}s is more than the skipped targets cost when built ({cost}s)"
    );
    if noop {
        let n = targets.len();
        assert!(
            dom.contains(&format!("nothing to do: {n} target")),
            "a run that built nothing says so"
        );
        assert!(
            !dom.contains("id=\"gantt-actual\""),
            "and draws no timeline"
        );
        return;
    }
    // Makespan against the lower bound.
    let mk = elements(dom, "div")
        .into_iter()
        .find(|d| d.get("id").map(String::as_str) == Some("mk"));
    if let Some(mk) = mk {
        let guessed = mk.get("data-plan").map(String::as_str) == Some("guessed");
        let shown = section(dom, "div", "mk");
        if guessed {
            assert!(
                shown.contains("guesses") && !shown.contains("lower bound <b>"),
                "a guessed plan is labelled, its bound not compared: {shown}"
            );
        } else if let (Some(lb), Some(w)) =
            (num(&mk, "data-lower-bound"), num(&mk, "data-makespan"))
        {
            assert!(
                lb <= w + 1e-9 || shown.contains("under it"),
                "lower bound {lb} over makespan {w}, unlabelled: {shown}"
            );
        }
        if guessed && dom.contains("id=\"gantt-planned\"") {
            let planned = section(dom, "svg", "gantt-planned");
            assert!(
                planned.contains("data-order-only=\"true\""),
                "a guessed plan is drawn as an order"
            );
        }
    }
    // Each build's bar is its time on the axis scale; its details say the same.
    let actual = section(dom, "svg", "gantt-actual");
    let svg = &elements(actual, "svg")[0];
    let scale = num(svg, "data-scale").expect("the timeline says its scale");
    let x0 = num(svg, "data-x0").expect("the timeline says where 0 s is");
    for r in elements(actual, "rect") {
        if !r.get("class").is_some_and(|c| c.starts_with("bar ")) {
            continue;
        }
        let (s, e, x, w) = (
            num(&r, "data-start").unwrap(),
            num(&r, "data-end").unwrap(),
            num(&r, "x").unwrap(),
            num(&r, "width").unwrap(),
        );
        assert!(
            (x - (x0 + s * scale)).abs() <= 1.0,
            "bar starts off its time: {r:?}"
        );
        assert!(
            (w - ((e - s) * scale).max(1.5)).abs() <= 1.0,
            "bar length {w}px is not its time {}s × {scale}px/s: {r:?}",
            e - s
        );
        if r.get("class").is_some_and(|c| c.contains("attempt")) {
            continue;
        }
        let name = r.get("data-target").unwrap();
        let d = num(detail(name), "data-duration").expect("details say the time");
        assert!(
            (d - (e - s)).abs() < 0.002,
            "{name}: details say {d}s, its bar {}s",
            e - s
        );
        let t = targets.iter().find(|t| t["name"] == name.as_str()).unwrap();
        assert!(
            (t["duration_s"].as_f64().unwrap() - (e - s)).abs() < 0.002,
            "{name}: the recorded time is not its bar"
        );
    }
    // Lanes carry node names.
    let names: Vec<&str> = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    let labels = texts(actual, "ll")
        .into_iter()
        .chain(texts(actual, "ll lost"));
    for l in labels {
        if l == "no build" {
            continue;
        }
        let lane = l.trim_end_matches(" (lost)");
        let (node, slot) = lane.rsplit_once('/').unwrap_or((lane, ""));
        assert!(
            !node.contains("://") && names.contains(&node) && slot.parse::<u32>().is_ok(),
            "lane {l:?} is not a node's name and slot ({names:?})"
        );
    }
    // The dependency graph fits the page's width.
    let graph = section(dom, "svg", "graph");
    assert!(
        graph.contains("data-fit=\"width\""),
        "the dependency graph does not fit the page"
    );
}
