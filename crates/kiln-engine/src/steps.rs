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
    let Some(rest) = name.strip_prefix('[') else {
        return false;
    };
    let Some((inside, after)) = rest.split_once(']') else {
        return false;
    };
    let counter = inside.rsplit(' ').next().unwrap_or("");
    let Some((a, b)) = counter.split_once('/') else {
        return false;
    };
    if a.is_empty()
        || b.is_empty()
        || !a.bytes().all(|c| c.is_ascii_digit())
        || !b.bytes().all(|c| c.is_ascii_digit())
    {
        return false;
    }
    !after.trim_start().to_ascii_uppercase().starts_with("FROM ")
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

    /// The failing step's name and the tail of its log, if a step failed.
    pub fn failure(&self) -> Option<(String, String, Vec<String>)> {
        self.order
            .iter()
            .filter_map(|id| self.steps.get(id))
            .find_map(|s| {
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
}
