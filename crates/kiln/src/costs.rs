//! Where a target's cost comes from, for the fleet schedule: recorded
//! history first (median work of the last real builds, normalised by node
//! speed; `.kiln/history.sqlite`), then the costs file, then the documented
//! default (docs/scheduling.md); output sizes likewise, from the pushed
//! image's size in the registry. Memory requirements come only from the
//! file. Also records finished builds into the history.
//!
//! Must never: create the history just to read it, fail a command over a
//! history it cannot read or write (that is a warning on stderr), or
//! record a skipped or blocked target (it did no work).

use std::collections::BTreeMap;
use std::path::Path;

use kiln_plan::schedule::{Cost, CostsFile, DEFAULT_COST};
use kiln_store::history::{BuildEvent, History, LearnedCost};

/// Where a cost came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    History,
    File,
    Default,
}

/// Costs learned from the history file, if it exists (it is never created
/// just to be read). A history that cannot be read is a warning.
///
/// Read once per process and history: a build asks three times (the
/// schedule, the report's plan, the report's savings), all for the costs
/// known before the run, and records its own builds only after the last
/// of them (`report::record::record_build`). Each reading opened the
/// SQLite file, parsed its schema and ran the query again.
///
/// A reading started ahead ([`read_ahead`]) is waited for, not repeated.
pub fn learned(path: &Path) -> BTreeMap<String, LearnedCost> {
    let pending = AHEAD.lock().ok().and_then(|mut ahead| {
        let i = ahead.iter().position(|(p, _)| p == path)?;
        Some(ahead.swap_remove(i).1)
    });
    if let Some(reading) = pending {
        let _ = reading.join();
    }
    read(path)
}

/// Readings of [`learned`] started by [`read_ahead`], not yet waited for.
static AHEAD: std::sync::Mutex<Vec<(std::path::PathBuf, std::thread::JoinHandle<()>)>> =
    std::sync::Mutex::new(Vec::new());

/// Starts reading what [`learned`] answers for `path`, and then what
/// `also` reads of it, on a thread of its own, so that the caller's next
/// questions find them read: a build's report plans with the costs after
/// the run, and opening the history (SQLite's file, its schema) and the
/// queries take a millisecond or more that a no-op otherwise spends at its
/// end. The history is shared with what the run records later
/// ([`History::shared`]). [`learned`] waits for the whole reading. Nothing
/// is started when there is no history (it is never created just to be
/// read).
pub fn read_ahead(path: &Path, also: impl FnOnce(&Path) + Send + 'static) {
    if !path.exists() {
        return;
    }
    let owned = path.to_path_buf();
    let reading = kiln_engine::ahead::spawn("kiln-history", move || {
        read(&owned);
        also(&owned);
    });
    if let (Ok(reading), Ok(mut ahead)) = (reading, AHEAD.lock()) {
        ahead.push((path.to_path_buf(), reading));
    }
}

fn read(path: &Path) -> BTreeMap<String, LearnedCost> {
    static READ: kiln_util::Memo<std::path::PathBuf, BTreeMap<String, LearnedCost>> =
        kiln_util::Memo::new();
    READ.get_or_insert_with(path, || {
        if !path.exists() {
            BTreeMap::new()
        } else {
            match History::shared(path).and_then(|h| h.costs(1)) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("warning: build history not used: {e}");
                    BTreeMap::new()
                }
            }
        }
    })
}

/// The cost of `target` and where it came from.
pub fn cost_of(
    target: &str,
    file: &CostsFile,
    learned: &BTreeMap<String, LearnedCost>,
) -> (Cost, Source) {
    cost_as(target, target, file, learned)
}

/// The cost of what was built as `built` (a platform unit `app@linux/arm64`)
/// whose costs-file entry is `target`'s (`app`: its `work_s` is per
/// platform), and where it came from.
pub fn cost_as(
    built: &str,
    target: &str,
    file: &CostsFile,
    learned: &BTreeMap<String, LearnedCost>,
) -> (Cost, Source) {
    let base = file.get(target).copied();
    match (learned.get(built), base) {
        (Some(l), b) => {
            let b = b.unwrap_or(DEFAULT_COST);
            (
                Cost {
                    work_s: l.work_s,
                    output_mb: l.output_mb.unwrap_or(b.output_mb),
                    min_memory_gb: b.min_memory_gb,
                },
                Source::History,
            )
        }
        (None, Some(c)) => (c, Source::File),
        (None, None) => (DEFAULT_COST, Source::Default),
    }
}

/// The size in MB of every image the run built and pushed (`repo@digest`
/// of its first pushed reference, config and layers as stored): what a
/// node pulling it moves. Images whose size the registry does not tell are
/// left out (their `output_mb` stays the costs file's or the default).
pub async fn output_sizes(summary: &kiln_engine::RunSummary) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Ok(registry) = kiln_engine::registry::Registry::new(std::time::Duration::from_secs(10))
    else {
        return out;
    };
    for t in &summary.targets {
        if t.status != kiln_engine::TargetStatus::Built {
            continue;
        }
        let (Some(digest), Some(pushed)) = (&t.digest, t.pushed.first()) else {
            continue;
        };
        let reference = format!("{}@{digest}", kiln_plan::repository_name(pushed));
        if let Ok(Some(mb)) = registry.image_size_mb(&reference).await {
            out.insert(t.name.clone(), mb);
        }
    }
    out
}

/// Records what a run built (built or failed; skipped and blocked targets
/// did no work) into the history; `speed` gives a node's relative speed
/// (1.0 when unknown), `output_mb` a built target's pushed size when known.
/// Failures to record are warnings.
pub fn record(
    path: &Path,
    summary: &kiln_engine::RunSummary,
    speed: impl Fn(&str) -> f64,
    output_mb: impl Fn(&str) -> Option<f64>,
) {
    use kiln_engine::TargetStatus;
    let events: Vec<BuildEvent> = summary
        .targets
        .iter()
        .filter(|t| matches!(t.status, TargetStatus::Built | TargetStatus::Failed))
        .filter(|t| t.duration_s > 0.0)
        .map(|t| BuildEvent {
            target: t.name.clone(),
            key: t.key.clone(),
            node: t.node.clone(),
            node_speed: speed(&t.node),
            duration_s: t.duration_s,
            output_mb: output_mb(&t.name),
            steps_total: t.steps.total as u64,
            steps_cached: t.steps.cached as u64,
            status: if t.status == TargetStatus::Built {
                kiln_store::history::STATUS_BUILT.into()
            } else {
                kiln_store::history::STATUS_FAILED.into()
            },
            at: kiln_engine::run::now_rfc3339(),
        })
        .collect();
    if events.is_empty() {
        return;
    }
    let r = History::shared(path).and_then(|h| events.iter().try_for_each(|e| h.record(e)));
    if let Err(e) = r {
        eprintln!("warning: could not record the build history: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_then_file_then_default() {
        let file = CostsFile::parse(
            "costs.toml",
            "[target.a]\nwork_s = 100\noutput_mb = 10\nmin_memory_gb = 8\n[target.b]\nwork_s = 50\noutput_mb = 5\n",
        )
        .unwrap();
        let learned: BTreeMap<String, LearnedCost> = [(
            "a".to_string(),
            LearnedCost {
                work_s: 42.0,
                output_mb: None,
                samples: 3,
            },
        )]
        .into();
        let (c, src) = cost_of("a", &file, &learned);
        assert_eq!(src, Source::History);
        assert_eq!(c.work_s, 42.0);
        assert_eq!(
            c.output_mb, 10.0,
            "output from the file when history has none"
        );
        assert_eq!(c.min_memory_gb, 8.0, "memory only from the file");
        assert_eq!(
            cost_of("b", &file, &learned),
            (file.get("b").copied().unwrap(), Source::File)
        );
        assert_eq!(
            cost_of("c", &file, &learned),
            (DEFAULT_COST, Source::Default)
        );
    }

    #[test]
    fn what_is_read_ahead_is_waited_for_and_is_what_a_reading_finds() {
        let dir = std::env::temp_dir().join(format!("kiln-costs-ahead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history.sqlite");
        let h = History::open(&path).unwrap();
        for d in [40.0, 42.0, 44.0] {
            h.record(&BuildEvent {
                target: "a".into(),
                key: None,
                node: "local".into(),
                node_speed: 1.0,
                duration_s: d,
                output_mb: None,
                steps_total: 1,
                steps_cached: 0,
                status: kiln_store::history::STATUS_BUILT.into(),
                at: "2026-12-01T00:00:00Z".into(),
            })
            .unwrap();
        }
        drop(h);
        let also_ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = also_ran.clone();
        read_ahead(&path, move |p| {
            // Slower than the caller's next question: it must wait.
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(p.ends_with("history.sqlite"));
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let found = learned(&path);
        assert!(
            also_ran.load(std::sync::atomic::Ordering::SeqCst),
            "learned waits for the whole reading ahead"
        );
        assert_eq!(found["a"].work_s, 42.0);
        assert_eq!(found["a"].samples, 3);
        // Nothing is read ahead of a history that does not exist (and
        // none is created).
        let none = dir.join("none.sqlite");
        read_ahead(&none, |_| panic!("nothing to read"));
        assert!(learned(&none).is_empty());
        assert!(!none.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
