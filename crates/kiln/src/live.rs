//! The live view of a run on a terminal: one line per node and build slot
//! (the target it builds, its elapsed time against the expected time, its
//! current step), and a line for the queue — redrawn in place
//! (`progress::terminal`'s TTY reporter draws these lines; plain progress
//! is unchanged). This module is the state and the text, with no terminal
//! in it, so it is tested without one.
//!
//! Must never: write to the terminal or read the clock: the reporter
//! passes the time in and draws the lines.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::report::text::duration;

/// What runs in one lane.
#[derive(Clone, Debug)]
struct Busy {
    target: String,
    since: Instant,
    step: String,
}

/// The run as it goes.
#[derive(Debug)]
pub struct LaneView {
    /// Lanes in drawing order: `(node, slot)`.
    lanes: Vec<(String, usize)>,
    busy: HashMap<(String, usize), Busy>,
    /// Expected build seconds per target (the schedule's).
    expected: HashMap<String, f64>,
    /// Targets in build order, and which have started or finished.
    order: Vec<String>,
    /// A platform unit's target (`T` of `T@os/arch`, `T` in the run).
    unit_of: HashMap<String, String>,
    started: HashMap<String, ()>,
    finished: BTreeMap<String, String>,
}

impl LaneView {
    /// `nodes`: `(name, slots)` in order; `order`: every target of the run
    /// in build order; `expected`: expected build seconds.
    pub fn new(
        nodes: &[(String, usize)],
        order: Vec<String>,
        expected: HashMap<String, f64>,
    ) -> LaneView {
        let unit_of = order
            .iter()
            .filter_map(|u| {
                let (t, _) = u.split_once('@')?;
                order
                    .iter()
                    .any(|o| o == t)
                    .then(|| (u.clone(), t.to_string()))
            })
            .collect();
        LaneView {
            lanes: nodes
                .iter()
                .flat_map(|(n, s)| (0..(*s).max(1)).map(move |k| (n.clone(), k)))
                .collect(),
            busy: HashMap::new(),
            expected,
            order,
            unit_of,
            started: HashMap::new(),
            finished: BTreeMap::new(),
        }
    }

    pub fn lane_count(&self) -> usize {
        self.lanes.len()
    }

    /// A target started building on `node`'s slot (a slot never announced
    /// by the fleet gets a lane of its own).
    pub fn started(&mut self, target: &str, node: &str, slot: Option<usize>, now: Instant) {
        let lane = (node.to_string(), slot.unwrap_or(0));
        if !self.lanes.contains(&lane) {
            self.lanes.push(lane.clone());
        }
        self.started.insert(target.to_string(), ());
        self.busy.insert(
            lane,
            Busy {
                target: target.to_string(),
                since: now,
                step: String::new(),
            },
        );
    }

    /// The target's current step.
    pub fn step(&mut self, target: &str, step: &str) {
        if let Some(b) = self.busy.values_mut().find(|b| b.target == target) {
            b.step = step.to_string();
        }
    }

    /// A target finished (any status), built or not.
    pub fn finished(&mut self, target: &str, status: &str) {
        self.busy.retain(|_, b| b.target != target);
        self.started.insert(target.to_string(), ());
        self.finished.insert(target.to_string(), status.to_string());
    }

    /// One line per lane, then the queue line.
    pub fn lines(&self, now: Instant) -> Vec<String> {
        let w = self
            .lanes
            .iter()
            .map(|(n, s)| short(n).chars().count() + 1 + s.to_string().len())
            .max()
            .unwrap_or(4);
        let mut out: Vec<String> = self
            .lanes
            .iter()
            .map(|lane| {
                let name = format!("{}/{}", short(&lane.0), lane.1);
                match self.busy.get(lane) {
                    None => format!("{name:<w$}  idle"),
                    Some(b) => {
                        let elapsed = now.saturating_duration_since(b.since).as_secs_f64();
                        let timing = match self.expected.get(&b.target) {
                            Some(&e) if e > 0.0 => {
                                let late = if elapsed > e * 1.5 { "  (late)" } else { "" };
                                format!(
                                    "{} / ~{} ({:.0}%){late}",
                                    duration(elapsed),
                                    duration(e),
                                    100.0 * elapsed / e
                                )
                            }
                            _ => duration(elapsed),
                        };
                        let step = if b.step.is_empty() {
                            String::new()
                        } else {
                            format!("  {}", b.step)
                        };
                        format!("{name:<w$}  {}  {timing}{step}", b.target)
                    }
                }
            })
            .collect();
        out.push(self.queue_line());
        out
    }

    /// The queue counts targets: a target split into platform units
    /// waits until its first unit starts (`next: app (2 platforms)`), and
    /// is done when its join is.
    fn queue_line(&self) -> String {
        let units = |t: &str| -> Vec<&str> {
            self.unit_of
                .iter()
                .filter(|(_, of)| *of == t)
                .map(|(u, _)| u.as_str())
                .collect()
        };
        let targets: Vec<&str> = self
            .order
            .iter()
            .filter(|t| !self.unit_of.contains_key(*t))
            .map(String::as_str)
            .collect();
        let waiting: Vec<String> = targets
            .iter()
            .filter(|t| {
                !self.started.contains_key(**t)
                    && units(t).iter().all(|u| !self.started.contains_key(*u))
            })
            .map(|t| match units(t).len() {
                0 => t.to_string(),
                n => format!("{t} ({n} platforms)"),
            })
            .collect();
        let finished = || {
            self.finished
                .iter()
                .filter(|(t, _)| !self.unit_of.contains_key(*t))
        };
        let count = |s: &str| finished().filter(|(_, v)| *v == s).count();
        let done = finished().count();
        let mut l = format!(
            "queue {}{}  ·  done {done}/{}",
            waiting.len(),
            if waiting.is_empty() {
                String::new()
            } else {
                let next: Vec<&str> = waiting.iter().take(3).map(String::as_str).collect();
                format!(
                    " (next: {}{})",
                    next.join(", "),
                    if waiting.len() > 3 { ", …" } else { "" }
                )
            },
            targets.len()
        );
        for s in ["built", "skipped", "failed", "blocked"] {
            let n = count(s);
            if n > 0 {
                l.push_str(&format!(", {s} {n}"));
            }
        }
        l
    }
}

/// A lane's node as the view names it: an engine's socket address is
/// `engine` (one engine: the summary has its address), a long name keeps
/// its end.
fn short(node: &str) -> String {
    if node.starts_with("unix://") || node.starts_with("npipe://") {
        return "engine".into();
    }
    let n = node.chars().count();
    if n <= 24 {
        return node.to_string();
    }
    let tail: String = node.chars().skip(n - 23).collect();
    format!("…{tail}")
}

/// How often the view is redrawn while nothing happens.
pub const TICK: Duration = Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lane_shows_its_target_elapsed_against_expected_and_the_queue() {
        let t0 = Instant::now();
        let mut v = LaneView::new(
            &[("node1".into(), 2), ("node2".into(), 1)],
            ["a", "b", "c", "d", "e"].map(String::from).to_vec(),
            [("a".to_string(), 100.0), ("b".to_string(), 10.0)]
                .into_iter()
                .collect(),
        );
        assert_eq!(v.lane_count(), 3);
        v.started("a", "node1", Some(0), t0);
        v.started("b", "node2", Some(0), t0);
        v.step("a", "[builder 2/5] RUN make");
        let l = v.lines(t0 + Duration::from_secs(30));
        assert_eq!(
            l[0],
            "node1/0  a  30.0s / ~1m 40s (30%)  [builder 2/5] RUN make"
        );
        assert_eq!(l[1], "node1/1  idle");
        assert_eq!(l[2], "node2/0  b  30.0s / ~10.0s (300%)  (late)");
        assert_eq!(l[3], "queue 3 (next: c, d, e)  ·  done 0/5");
        v.finished("b", "built");
        v.finished("c", "skipped");
        let l = v.lines(t0 + Duration::from_secs(31));
        assert_eq!(l[2], "node2/0  idle");
        assert_eq!(
            l[3],
            "queue 2 (next: d, e)  ·  done 2/5, built 1, skipped 1"
        );
    }

    #[test]
    fn platform_units_run_in_lanes_and_count_as_their_target_in_the_queue() {
        let t0 = Instant::now();
        let order = ["base", "app@linux/amd64", "app@linux/arm64", "app", "tool"]
            .map(String::from)
            .to_vec();
        let mut v = LaneView::new(
            &[("amd".into(), 1), ("arm".into(), 1)],
            order,
            HashMap::new(),
        );
        assert_eq!(
            v.lines(t0)[2],
            "queue 3 (next: base, app (2 platforms), tool)  ·  done 0/3"
        );
        v.finished("base", "skipped");
        v.started("app@linux/amd64", "amd", Some(0), t0);
        v.started("app@linux/arm64", "arm", Some(0), t0);
        let l = v.lines(t0 + Duration::from_secs(4));
        assert_eq!(l[0], "amd/0  app@linux/amd64  4.0s");
        assert_eq!(l[1], "arm/0  app@linux/arm64  4.0s");
        assert_eq!(l[2], "queue 1 (next: tool)  ·  done 1/3, skipped 1");
        v.finished("app@linux/amd64", "built");
        v.finished("app@linux/arm64", "built");
        assert_eq!(
            v.lines(t0)[2],
            "queue 1 (next: tool)  ·  done 1/3, skipped 1",
            "the units are not the target"
        );
        v.finished("app", "built");
        assert_eq!(
            v.lines(t0)[2],
            "queue 1 (next: tool)  ·  done 2/3, built 1, skipped 1"
        );
    }

    #[test]
    fn an_engine_socket_and_a_long_name_are_shortened() {
        let t0 = Instant::now();
        let mut v = LaneView::new(
            &[
                ("unix:///work/x/.kiln/dev-env/docker.sock".into(), 1),
                ("builder-with-a-very-long-name-indeed".into(), 1),
            ],
            vec!["a".into()],
            HashMap::new(),
        );
        v.started("a", "unix:///work/x/.kiln/dev-env/docker.sock", Some(0), t0);
        let l = v.lines(t0 + Duration::from_secs(2));
        assert_eq!(l[0], "engine/0                    a  2.0s");
        assert_eq!(l[1], "…a-very-long-name-indeed/0  idle");
    }

    #[test]
    fn a_target_without_an_expected_time_shows_elapsed_only() {
        let t0 = Instant::now();
        let mut v = LaneView::new(&[("e".into(), 1)], vec!["x".into()], HashMap::new());
        v.started("x", "e", None, t0);
        assert_eq!(v.lines(t0 + Duration::from_secs(75))[0], "e/0  x  1m 15s");
    }
}
