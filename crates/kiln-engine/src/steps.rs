//! Turning BuildKit progress into steps: which vertices are Dockerfile
//! instructions, whether they were cached, how long they took, and the
//! tail of their logs (for failure reports).
//!
//! Counting rule (documented in docs/engine-local.md): a step is a vertex
//! named like `[stage 2/5] RUN ...` — a Dockerfile instruction. Internal
//! vertices (`[internal] ...`, `load build definition`, `copy /context /`,
//! `exporting to image`, metadata lookups) are not steps. `FROM` steps are
//! not counted either: dockerd's embedded BuildKit reports a `FROM <local
//! image>` as DONE, never CACHED, even when nothing changed, so counting it
//! would make a fully cached build look partly rebuilt.
//!
//! Must never: count a `FROM` or an internal vertex as a step, or report
//! anything itself: it returns events to the driver that feeds it.

use std::collections::{BTreeMap, VecDeque};

use crate::events::{Event, StepState};

/// How many log lines to keep per step for failure reports.
const LOG_TAIL: usize = 30;

#[derive(Clone, Debug, Default)]
struct StepInfo {
    name: String,
    cached: bool,
    started: Option<f64>,
    completed: Option<f64>,
    error: Option<String>,
    announced: Option<StepState>,
    logs: VecDeque<String>,
    partial: String,
}

/// Whether a vertex name is a Dockerfile instruction step (see module docs).
pub fn is_step(name: &str) -> bool {
    is_instruction(name) && !is_from(name)
}

/// Whether a vertex is a `FROM` step.
fn is_from(name: &str) -> bool {
    name.split_once(']')
        .is_some_and(|(_, after)| after.trim_start().to_ascii_uppercase().starts_with("FROM "))
}

/// Whether a vertex name is any Dockerfile instruction (`[stage k/n] …`),
/// `FROM` included.
pub fn is_instruction(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('[') else {
        return false;
    };
    let Some((inside, _)) = rest.split_once(']') else {
        return false;
    };
    let counter = inside.rsplit(' ').next().unwrap_or("");
    let Some((a, b)) = counter.split_once('/') else {
        return false;
    };
    !a.is_empty()
        && !b.is_empty()
        && a.bytes().all(|c| c.is_ascii_digit())
        && b.bytes().all(|c| c.is_ascii_digit())
}

/// Tracks the vertices of one target's build.
#[derive(Debug, Default)]
pub struct StepTracker {
    target: String,
    steps: BTreeMap<String, StepInfo>,
    order: Vec<String>,
}

/// Step counts of a finished build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StepCounts {
    pub total: usize,
    pub cached: usize,
}

impl StepTracker {
    pub fn new(target: &str) -> Self {
        StepTracker {
            target: target.to_string(),
            ..Default::default()
        }
    }

    /// Records a vertex update; returns the events it causes.
    pub fn vertex(
        &mut self,
        id: &str,
        name: &str,
        cached: bool,
        started: Option<f64>,
        completed: Option<f64>,
        error: Option<&str>,
    ) -> Vec<Event> {
        if !self.steps.contains_key(id) {
            self.order.push(id.to_string());
        }
        let s = self.steps.entry(id.to_string()).or_default();
        if !name.is_empty() {
            s.name = name.to_string();
        }
        s.cached |= cached;
        if started.is_some() {
            s.started = s.started.or(started);
        }
        if completed.is_some() {
            s.completed = completed;
        }
        if let Some(e) = error.filter(|e| !e.is_empty()) {
            s.error = Some(e.to_string());
        }
        let state = if s.error.is_some() {
            Some(StepState::Error)
        } else if s.cached {
            Some(StepState::Cached)
        } else if s.completed.is_some() {
            Some(StepState::Done)
        } else if s.started.is_some() {
            Some(StepState::Started)
        } else {
            None
        };
        let mut out = Vec::new();
        if let Some(st) = state
            && s.announced != Some(st)
            && !(s.announced == Some(StepState::Cached) && st == StepState::Done)
        {
            s.announced = Some(st);
            let duration_s = match (s.started, s.completed) {
                (Some(a), Some(b)) if st != StepState::Started => {
                    Some(((b - a).max(0.0) * 1000.0).round() / 1000.0)
                }
                _ => None,
            };
            out.push(Event::Step {
                target: self.target.clone(),
                step: s.name.clone(),
                state: st,
                duration_s,
                error: s.error.clone(),
            });
        }
        out
    }

    /// Records log output of a vertex; returns one event per complete line.
    pub fn log(&mut self, id: &str, data: &[u8]) -> Vec<Event> {
        let s = self.steps.entry(id.to_string()).or_default();
        s.partial.push_str(&String::from_utf8_lossy(data));
        let mut out = Vec::new();
        while let Some(i) = s.partial.find('\n') {
            let line: String = s.partial.drain(..=i).collect();
            let line = line.trim_end_matches(['\n', '\r']).to_string();
            if s.logs.len() == LOG_TAIL {
                s.logs.pop_front();
            }
            s.logs.push_back(line.clone());
            out.push(Event::Log {
                target: self.target.clone(),
                step: s.name.clone(),
                line,
            });
        }
        out
    }

    /// Instruction steps and how many were cached.
    pub fn counts(&self) -> StepCounts {
        let mut c = StepCounts::default();
        for s in self.steps.values().filter(|s| is_step(&s.name)) {
            c.total += 1;
            if s.cached {
                c.cached += 1;
            }
        }
        c
    }

    /// The layer-cache imports and exports BuildKit reported, in order,
    /// with their outcome (`ok`, `error`, or `running` when the vertex
    /// never finished).
    pub fn cache_ops(&self) -> Vec<CacheOp> {
        self.order
            .iter()
            .filter_map(|id| self.steps.get(id))
            .filter_map(|s| {
                let (kind, reference) = cache_vertex(&s.name)?;
                let outcome = if s.error.is_some() {
                    "error"
                } else if s.completed.is_some() || s.cached {
                    "ok"
                } else {
                    "running"
                };
                Some(CacheOp {
                    kind,
                    reference: reference.map(String::from),
                    outcome,
                    error: s.error.clone(),
                })
            })
            .collect()
    }

    /// The failing step's name and the tail of its log, if a step failed.
    /// A failed cache import or export is not the failure of a build
    /// (BuildKit goes on without the cache, and `ignore-error=true` keeps
    /// a failed export from failing it): another error is preferred.
    pub fn failure(&self) -> Option<(String, String, Vec<String>)> {
        let failed = |s: &&StepInfo| s.error.is_some();
        let pick = self
            .order
            .iter()
            .filter_map(|id| self.steps.get(id))
            .filter(failed)
            .find(|s| cache_vertex(&s.name).is_none())
            .or_else(|| {
                self.order
                    .iter()
                    .filter_map(|id| self.steps.get(id))
                    .find(failed)
            });
        pick.into_iter().find_map(|s| {
            s.error.as_ref().map(|e| {
                let mut logs: Vec<String> = s.logs.iter().cloned().collect();
                if !s.partial.is_empty() {
                    logs.push(s.partial.clone());
                }
                (s.name.clone(), e.clone(), logs)
            })
        })
    }
}

/// The last lines a build client printed, and what failed when the client
/// exited non-zero: the failing step from the tracker, else the client's
/// last `ERROR` line, else its last line.
#[derive(Debug, Default)]
pub(crate) struct ClientTail(VecDeque<String>);

impl ClientTail {
    const LINES: usize = 40;

    pub(crate) fn push(&mut self, line: String) {
        if self.0.len() == Self::LINES {
            self.0.pop_front();
        }
        self.0.push_back(line);
    }

    /// `(failing step, message, log tail)`; `fallback` when the client
    /// printed nothing at all.
    pub(crate) fn failure(
        &self,
        tracker: &StepTracker,
        fallback: impl FnOnce() -> String,
    ) -> (Option<String>, String, Vec<String>) {
        if let Some((s, m, logs)) = tracker.failure() {
            return (Some(s), m, logs);
        }
        let last = self
            .0
            .iter()
            .rev()
            .find(|l| l.starts_with("ERROR"))
            .or_else(|| self.0.iter().rev().find(|l| !l.trim().is_empty()))
            .cloned()
            .unwrap_or_else(fallback);
        (None, last, self.0.iter().cloned().collect())
    }
}

/// A layer-cache import or export as BuildKit reported it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CacheOp {
    /// `import` or `export`.
    pub kind: &'static str,
    /// The ref imported from (exports do not name theirs in the progress).
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// `ok`, `error` or `running`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether a vertex is a cache import (`importing cache manifest from
/// REF`) or export (`exporting cache ...`, `exporting content cache`).
fn cache_vertex(name: &str) -> Option<(&'static str, Option<&str>)> {
    if let Some(r) = name.strip_prefix("importing cache manifest from ") {
        return Some(("import", Some(r.trim())));
    }
    if name.starts_with("exporting cache") || name == "exporting content cache" {
        return Some(("export", None));
    }
    None
}

/// Whether `s` is only a digest (`sha256:` and 64 hex digits).
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// Parses the docker CLI's `--progress=plain` output, one line at a time,
/// into the same tracker (vertices are keyed by their `#N` number).
#[derive(Debug, Default)]
pub struct PlainParser {
    names: BTreeMap<String, String>,
}

impl PlainParser {
    pub fn line(&mut self, tracker: &mut StepTracker, line: &str) -> Vec<Event> {
        let Some(rest) = line.strip_prefix('#') else {
            return Vec::new();
        };
        let Some((num, text)) = rest.split_once(' ') else {
            return Vec::new();
        };
        if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit()) {
            return Vec::new();
        }
        let id = format!("#{num}");
        let text = text.trim_end();
        let name = self.names.get(&id).cloned();
        if name.is_none() {
            self.names.insert(id.clone(), text.to_string());
            return tracker.vertex(&id, text, false, Some(0.0), None, None);
        }
        let name = name.unwrap_or_default();
        if text == "CACHED" {
            return tracker.vertex(&id, &name, true, None, Some(0.0), None);
        }
        if let Some(d) = text.strip_prefix("DONE ") {
            let secs = d.trim_end_matches('s').parse::<f64>().unwrap_or(0.0);
            return tracker.vertex(&id, &name, false, Some(0.0), Some(secs), None);
        }
        if let Some(e) = text
            .strip_prefix("ERROR: ")
            .or_else(|| text.strip_prefix("ERROR "))
        {
            return tracker.vertex(&id, &name, false, None, None, Some(e));
        }
        if text == "ERROR" {
            return tracker.vertex(&id, &name, false, None, None, Some("failed"));
        }
        // `#N sha256:…`: the vertex's digest, which the plain format prints
        // when a vertex starts; it is not output of the step.
        if is_digest(text) {
            return Vec::new();
        }
        // `#N 0.123 output...`: a log line with a timestamp.
        let msg = match text.split_once(' ') {
            Some((t, m)) if t.parse::<f64>().is_ok() => m,
            _ => text,
        };
        tracker.log(&id, format!("{msg}\n").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names() {
        assert!(is_step("[2/3] RUN echo hi"));
        assert!(is_step("[build 2/4] COPY src /src"));
        assert!(is_step("[stage-1 3/3] COPY --from=build /o /o"));
        assert!(!is_step("[1/3] FROM docker.io/kiln/busybox:latest"));
        assert!(!is_step("[internal] load build definition from Dockerfile"));
        assert!(!is_step("copy /context /"));
        assert!(!is_step("exporting to image"));
        assert!(!is_step("[a/b] RUN x"));
    }

    #[test]
    fn tracker_counts_and_failure() {
        let mut t = StepTracker::new("app");
        t.vertex("a", "[1/3] FROM x", false, Some(0.0), Some(1.0), None);
        t.vertex("b", "[2/3] RUN make", true, Some(0.0), Some(0.1), None);
        t.vertex("c", "[3/3] RUN test", false, Some(0.0), None, None);
        t.log("c", b"line one\nline ");
        t.log("c", b"two\n");
        let ev = t.vertex("c", "", false, None, Some(2.0), Some("exit code: 1"));
        assert!(matches!(
            ev[0],
            Event::Step {
                state: StepState::Error,
                ..
            }
        ));
        assert_eq!(
            t.counts(),
            StepCounts {
                total: 2,
                cached: 1
            }
        );
        let (step, err, logs) = t.failure().unwrap();
        assert_eq!(step, "[3/3] RUN test");
        assert_eq!(err, "exit code: 1");
        assert_eq!(logs, ["line one", "line two"]);
    }

    #[test]
    fn plain_progress_lines() {
        let mut t = StepTracker::new("app");
        let mut p = PlainParser::default();
        for l in [
            "#1 [internal] load build definition from Dockerfile",
            "#1 DONE 0.0s",
            "#5 [2/3] RUN echo hi",
            "#5 0.201 hi",
            "#5 DONE 0.3s",
            "#6 [3/3] COPY a /a",
            "#6 CACHED",
            "#7 [stage 1/1] RUN false",
            "#7 ERROR: executor failed running [/bin/sh -c false]: exit code: 1",
        ] {
            p.line(&mut t, l);
        }
        assert_eq!(
            t.counts(),
            StepCounts {
                total: 3,
                cached: 1
            }
        );
        assert!(t.failure().unwrap().1.contains("exit code: 1"));
    }

    #[test]
    fn a_vertex_digest_line_is_not_output_of_its_step() {
        let mut t = StepTracker::new("app");
        let mut p = PlainParser::default();
        let digest = format!("sha256:{}", "4e0176ab".repeat(8));
        let mut events = Vec::new();
        for l in [
            "#7 [build 3/3] RUN make".to_string(),
            format!("#7 {digest}"),
            "#7 0.112 cc -o app main.c".to_string(),
            "#7 0.200 main.c:3: error: expected ';'".to_string(),
            "#7 ERROR: process \"/bin/sh -c make\" did not complete successfully".to_string(),
        ] {
            events.extend(p.line(&mut t, &l));
        }
        let logged: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::Log { line, .. } => Some(line.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            logged,
            ["cc -o app main.c", "main.c:3: error: expected ';'"]
        );
        let (step, _, tail) = t.failure().unwrap();
        assert_eq!(step, "[build 3/3] RUN make");
        assert_eq!(tail, ["cc -o app main.c", "main.c:3: error: expected ';'"]);
        assert!(is_digest(&digest));
        assert!(!is_digest("sha256:abc"));
        assert!(!is_digest("cc -o app main.c"));
    }
}

/// The longest single rawjson object kept (a status object with many
/// vertices is a few kB; BuildKit bounds log chunks). A longer one is
/// dropped whole, never half-parsed.
const MAX_OBJECT: usize = 4 << 20;

/// Parses buildx's `--progress=rawjson` output into the same tracker: a
/// stream of `client.SolveStatus` objects, pretty-printed over many lines
/// (buildx's encoder indents) or one per line, possibly followed by plain
/// text (buildx prints the error excerpt and `ERROR: ...` after the
/// stream). Bytes outside objects are returned as text lines.
#[derive(Debug, Default)]
pub struct RawJsonParser {
    buf: Vec<u8>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Text outside any object, up to the next newline.
    text: Vec<u8>,
    overflow: bool,
}

/// What a chunk of rawjson output gave.
#[derive(Debug, Default)]
pub struct RawJsonOutput {
    pub events: Vec<Event>,
    /// Plain text lines between or after the objects.
    pub text: Vec<String>,
}

impl RawJsonParser {
    /// Feeds one line (without its newline).
    pub fn line(&mut self, tracker: &mut StepTracker, line: &str) -> RawJsonOutput {
        let mut out = RawJsonOutput::default();
        for &b in line.as_bytes().iter().chain(std::iter::once(&b'\n')) {
            self.byte(tracker, b, &mut out);
        }
        out
    }

    fn byte(&mut self, tracker: &mut StepTracker, b: u8, out: &mut RawJsonOutput) {
        if self.depth == 0 {
            match b {
                b'{' if self.text.iter().all(u8::is_ascii_whitespace) => {
                    self.text.clear();
                    self.depth = 1;
                    self.buf.clear();
                    self.buf.push(b);
                    self.overflow = false;
                }
                b'\n' => {
                    let t = String::from_utf8_lossy(&self.text).trim_end().to_string();
                    if !t.trim().is_empty() {
                        out.text.push(t);
                    }
                    self.text.clear();
                }
                _ => self.text.push(b),
            }
            return;
        }
        if self.buf.len() < MAX_OBJECT {
            self.buf.push(b);
        } else {
            self.overflow = true;
        }
        if self.in_string {
            match (self.escaped, b) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth -= 1;
                if self.depth == 0 && !self.overflow {
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&self.buf) {
                        out.events.extend(solve_status(tracker, &v));
                    }
                    self.buf.clear();
                }
            }
            _ => {}
        }
    }
}

/// RFC 3339 → seconds since the epoch.
fn rfc3339_secs(v: Option<&serde_json::Value>) -> Option<f64> {
    let t =
        time::OffsetDateTime::parse(v?.as_str()?, &time::format_description::well_known::Rfc3339)
            .ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e9)
}

/// One `client.SolveStatus` (vertexes, logs) into the tracker.
fn solve_status(tracker: &mut StepTracker, v: &serde_json::Value) -> Vec<Event> {
    let mut out = Vec::new();
    let s = |x: &serde_json::Value, k: &str| {
        x.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string()
    };
    for x in v
        .get("vertexes")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        let err = s(x, "error");
        out.extend(tracker.vertex(
            &s(x, "digest"),
            &s(x, "name"),
            x.get("cached").and_then(|c| c.as_bool()).unwrap_or(false),
            rfc3339_secs(x.get("started")),
            rfc3339_secs(x.get("completed")),
            (!err.is_empty()).then_some(err.as_str()),
        ));
    }
    for l in v
        .get("logs")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD
            .decode(s(l, "data"))
            .unwrap_or_default();
        out.extend(tracker.log(&s(l, "vertex"), &data));
    }
    out
}

#[cfg(test)]
mod rawjson_tests {
    use super::*;

    /// buildx's own form: indented objects, then plain error text.
    const STREAM: &str = r#"{
  "vertexes": [
    {
      "digest": "sha256:a",
      "name": "[builder 2/3] COPY f /f",
      "started": "2026-12-01T22:39:20.10Z"
    }
  ]
}
{
  "vertexes": [
    {
      "digest": "sha256:a",
      "name": "[builder 2/3] COPY f /f",
      "started": "2026-12-01T22:39:20.10Z",
      "completed": "2026-12-01T22:39:20.35Z",
      "cached": true
    },
    {
      "digest": "sha256:b",
      "name": "[builder 3/3] RUN echo \"}{\" \u003e /g",
      "started": "2026-12-01T22:39:20.40Z"
    }
  ]
}
{"logs":[{"vertex":"sha256:b","stream":1,"data":"aGVsbG8K","timestamp":"2026-12-01T22:39:20.41Z"}]}
{
  "vertexes": [
    {
      "digest": "sha256:b",
      "name": "[builder 3/3] RUN echo \"}{\" \u003e /g",
      "started": "2026-12-01T22:39:20.40Z",
      "completed": "2026-12-01T22:39:20.50Z",
      "error": "process did not complete successfully: exit code: 3"
    }
  ]
}
Dockerfile:3
ERROR: failed to solve: process did not complete successfully: exit code: 3"#;

    #[test]
    fn buildx_rawjson_objects_over_many_lines_become_the_same_events() {
        let mut t = StepTracker::new("app");
        let mut p = RawJsonParser::default();
        let mut events = Vec::new();
        let mut text = Vec::new();
        for l in STREAM.lines() {
            let o = p.line(&mut t, l);
            events.extend(o.events);
            text.extend(o.text);
        }
        let steps: Vec<(String, StepState)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Step { step, state, .. } => Some((step.clone(), *state)),
                _ => None,
            })
            .collect();
        assert_eq!(
            steps,
            vec![
                ("[builder 2/3] COPY f /f".to_string(), StepState::Started),
                ("[builder 2/3] COPY f /f".to_string(), StepState::Cached),
                (
                    "[builder 3/3] RUN echo \"}{\" > /g".to_string(),
                    StepState::Started
                ),
                (
                    "[builder 3/3] RUN echo \"}{\" > /g".to_string(),
                    StepState::Error
                ),
            ]
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Log { line, .. } if line == "hello"))
        );
        assert_eq!(
            t.counts(),
            StepCounts {
                total: 2,
                cached: 1
            }
        );
        assert!(t.cache_ops().is_empty());
        let (step, msg, logs) = t.failure().unwrap();
        assert!(step.contains("RUN echo"), "{step}");
        assert!(msg.contains("exit code: 3"), "{msg}");
        assert_eq!(logs, vec!["hello".to_string()]);
        assert_eq!(
            text,
            vec![
                "Dockerfile:3".to_string(),
                "ERROR: failed to solve: process did not complete successfully: exit code: 3"
                    .to_string()
            ]
        );
    }
}

#[cfg(test)]
mod cache_ops_tests {
    use super::*;

    #[test]
    fn cache_imports_and_exports_are_reported_and_never_the_failure() {
        let mut t = StepTracker::new("app");
        let mut p = PlainParser::default();
        let log = "#1 importing cache manifest from reg/app:buildcache
#1 ERROR: failed to configure registry cache importer: reg/app:buildcache: not found
#2 [build 1/2] RUN make
#2 ERROR: process \"/bin/sh -c make\" did not complete successfully: exit code: 2
#3 exporting cache to registry
#3 preparing build cache for export 0.1s done
#3 ERROR: error writing layer blob: connection refused";
        for l in log.lines() {
            p.line(&mut t, l);
        }
        let ops = t.cache_ops();
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert_eq!(ops[0].kind, "import");
        assert_eq!(ops[0].reference.as_deref(), Some("reg/app:buildcache"));
        assert_eq!(ops[0].outcome, "error");
        assert_eq!(ops[1].kind, "export");
        assert_eq!(ops[1].outcome, "error");
        assert!(
            ops[1]
                .error
                .as_deref()
                .unwrap()
                .contains("connection refused")
        );
        let (step, msg, _) = t.failure().unwrap();
        assert_eq!(step, "[build 1/2] RUN make");
        assert!(msg.contains("exit code: 2"), "{msg}");
    }
}
