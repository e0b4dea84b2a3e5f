//! The build history: every build kiln ran (target, node, duration, output
//! size, step counts, outcome), kept in an embedded SQLite database so that
//! schedules can learn what a target costs (`docs/scheduling.md`, "History").
//!
//! The file lives at [`DEFAULT_LOCATION`] under the project by default, next
//! to the record store. Several kiln processes may write it at once: it runs
//! in WAL mode with a busy timeout, and every write is one statement.
//!
//! Durations are normalised when recorded: `work_s = duration_s ×
//! node_speed` is what the build would have taken on a speed-1.0 node, the
//! unit of the costs file.
//!
//! Which builds teach a cost ([`History::costs`]): successful ones that were
//! not fully cached (`steps_cached < steps_total`). A fully cached build
//! (every step a cache hit, or no steps at all) took only the time to look
//! its steps up, which says nothing about what a real build costs; a failed
//! build stopped somewhere in the middle. Both are still recorded.
//!
//! Runs ([`RunEntry`]) are kept too, one row per run and one per target of
//! it (what it did, where, how long, and what the schedule expected), for
//! `kiln history`: outcomes over time and how far predictions were off.
//!
//! The schema is versioned in the `meta` table (`schema_version`). Opening
//! checks the version: an older one is migrated in place, one step at a
//! time in one transaction (1 → 2 adds the run tables; builds are kept), a
//! newer one is refused, never rewritten.
//!
//! Must never: panic, or rewrite a database it does not understand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::StoreError;

/// Where the history lives by default, relative to the project directory
/// (next to the filesystem record store, `.kiln/store`).
pub const DEFAULT_LOCATION: &str = ".kiln/history.sqlite";

/// The schema version this kiln writes and reads.
pub const SCHEMA_VERSION: u32 = 2;

/// How many of a target's most recent counted builds a learned cost is the
/// median of.
pub const WINDOW: usize = 20;

/// How long a write waits for another writer (another kiln process, or
/// another handle) before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// [`BuildEvent::status`] of a build that succeeded.
pub const STATUS_BUILT: &str = "built";
/// [`BuildEvent::status`] of a build that failed.
pub const STATUS_FAILED: &str = "failed";

/// The size of the write-ahead log past which [`History::open`] empties it.
const WAL_LIMIT: u64 = 512 * 1024;

const SCHEMA_V1: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE builds (
    id           INTEGER PRIMARY KEY,
    target       TEXT NOT NULL,
    key          TEXT,
    node         TEXT NOT NULL,
    node_speed   REAL NOT NULL,
    duration_s   REAL NOT NULL,
    work_s       REAL NOT NULL,
    output_mb    REAL,
    steps_total  INTEGER NOT NULL,
    steps_cached INTEGER NOT NULL,
    status       TEXT NOT NULL,
    at           TEXT NOT NULL,
    at_unix      REAL NOT NULL
);
CREATE INDEX builds_by_target ON builds (status, target, at_unix);
";

/// Version 2: the runs, and what each did per target.
const SCHEMA_V2: &str = "
CREATE TABLE runs (
    id           TEXT PRIMARY KEY,
    project      TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    started_unix REAL NOT NULL,
    wall_s       REAL NOT NULL,
    failed       INTEGER NOT NULL
);
CREATE TABLE run_targets (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    target      TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    node        TEXT,
    duration_s  REAL NOT NULL,
    expected_s  REAL,
    PRIMARY KEY (run_id, target)
);
CREATE INDEX run_targets_by_target ON run_targets (target);
";

/// Indexes any version may carry (an older kiln ignores them): the
/// `built` rows of each run, which [`History::last_built`] reads (a run
/// that changed nothing has none).
const INDEXES: &str = "
CREATE INDEX IF NOT EXISTS run_targets_built ON run_targets (run_id) WHERE outcome = 'built';
";

/// One run, as `kiln build` finished it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEntry {
    pub id: String,
    pub project: String,
    /// RFC 3339.
    pub started_at: String,
    pub wall_s: f64,
    pub failed: bool,
    pub targets: Vec<RunTarget>,
}

/// What a run did with one target.
#[derive(Clone, Debug, PartialEq)]
pub struct RunTarget {
    pub target: String,
    /// `built`, `skipped`, `cutoff`, `pulled`, `failed` or `blocked`.
    pub outcome: String,
    pub node: Option<String>,
    pub duration_s: f64,
    /// What the schedule expected a build to take, when it was built.
    pub expected_s: Option<f64>,
}

/// One build, as the engine reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildEvent {
    pub target: String,
    /// The content key, when one was computed.
    pub key: Option<String>,
    pub node: String,
    /// The node's speed factor from the fleet file (1.0 for a single engine).
    pub node_speed: f64,
    /// Wall-clock seconds of the build on that node.
    pub duration_s: f64,
    /// Megabytes pushed, when known.
    pub output_mb: Option<f64>,
    pub steps_total: u64,
    pub steps_cached: u64,
    /// [`STATUS_BUILT`] or [`STATUS_FAILED`].
    pub status: String,
    /// When the build finished, RFC 3339 (`2026-11-30T07:16:14Z`).
    pub at: String,
}

/// What the history says a target costs.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedCost {
    /// The median normalised work (seconds on a speed-1.0 node) of the last
    /// [`WINDOW`] counted builds.
    pub work_s: f64,
    /// The median output size of those builds that know it; `None` when
    /// none does.
    pub output_mb: Option<f64>,
    /// How many builds `work_s` is the median of (at most [`WINDOW`]).
    pub samples: usize,
}

/// The build-history database. One handle may be shared between threads;
/// several handles (and processes) may use one file at once.
#[derive(Debug)]
pub struct History {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl History {
    /// Opens the history at `path`, creating the file (and its directory)
    /// and the schema when missing.
    ///
    /// Errors: a path that cannot be created or opened, a file that is not a
    /// SQLite database (or is damaged), a database that is not kiln's, and
    /// one written by a newer kiln (schema version above
    /// [`SCHEMA_VERSION`]) are all [`StoreError::Unavailable`] naming the
    /// file. Nothing is written to a database that is refused.
    pub fn open(path: &Path) -> Result<History, StoreError> {
        let unavailable = |detail: String| StoreError::Unavailable {
            location: path.display().to_string(),
            detail,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                unavailable(format!(
                    "creating the build history's directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags)
            .map_err(|e| sql_error(path, "opening the build history", e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_error(path, "opening the build history", e))?;
        check_schema(path, &mut conn)?;
        set_wal(path, &conn)?;
        // In WAL mode, NORMAL loses at most the last transactions on power
        // loss, never consistency.
        conn.execute_batch("PRAGMA synchronous = NORMAL")
            .map_err(|e| sql_error(path, "setting synchronous", e))?;
        // A [`History::shared`] handle is never closed, so it never
        // checkpoints on close, and a process's first connection cannot
        // restart the write-ahead log (it rebuilds the log's index by reading
        // the whole log, not knowing what was checkpointed): the log grew by
        // each run (8 MB, and that read a fifth of a no-op run). Past
        // `WAL_LIMIT` it is checkpointed and emptied here, once every few runs.
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_LIMIT) {
            // A reader elsewhere may keep it from emptying: tried next time.
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
        Ok(History {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    /// The history at `path`, opened once per process and kept open: a
    /// build reads what it learned, then records the run and its builds,
    /// and each [`History::open`] checks the schema again, and each close
    /// of the last connection checkpoints the write-ahead log (four
    /// `fsync`s in a run that changed nothing). A file replaced since (a
    /// new inode) is opened again.
    pub fn shared(path: &Path) -> Result<std::sync::Arc<History>, StoreError> {
        use std::os::unix::fs::MetadataExt;
        type Open = std::collections::HashMap<PathBuf, ((u64, u64), std::sync::Arc<History>)>;
        static OPEN: std::sync::OnceLock<Mutex<Open>> = std::sync::OnceLock::new();
        let identity = || std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        let open = OPEN.get_or_init(Default::default);
        if let Some(now) = identity()
            && let Some((was, h)) = open.lock().ok().and_then(|m| m.get(path).cloned())
            && was == now
        {
            return Ok(h);
        }
        let h = std::sync::Arc::new(History::open(path)?);
        if let (Some(id), Ok(mut m)) = (identity(), open.lock()) {
            m.insert(path.to_path_buf(), (id, h.clone()));
        }
        Ok(h)
    }

    /// The file this history is kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic elsewhere while holding the lock leaves the connection
        // usable (SQLite statements are atomic), so poisoning is ignored.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records one build, storing `work_s = duration_s × node_speed`.
    ///
    /// An event with an empty target or node, a speed that is not positive,
    /// a negative or non-finite duration or output, more cached steps than
    /// steps, an unknown status or a time that is not RFC 3339 is
    /// [`StoreError::Invalid`] and nothing is written.
    pub fn record(&self, e: &BuildEvent) -> Result<(), StoreError> {
        let invalid = |why: String| {
            StoreError::Invalid(format!(
                "build history: the build of {:?} on {:?}: {why}",
                e.target, e.node
            ))
        };
        if e.target.is_empty() {
            return Err(invalid("the target name is empty".into()));
        }
        if e.node.is_empty() {
            return Err(invalid("the node name is empty".into()));
        }
        if !(e.node_speed.is_finite() && e.node_speed > 0.0) {
            return Err(invalid(format!(
                "node speed {} (expected a number above 0)",
                e.node_speed
            )));
        }
        if !(e.duration_s.is_finite() && e.duration_s >= 0.0) {
            return Err(invalid(format!(
                "duration {} s (expected a number ≥ 0)",
                e.duration_s
            )));
        }
        if let Some(mb) = e.output_mb
            && !(mb.is_finite() && mb >= 0.0)
        {
            return Err(invalid(format!("output {mb} MB (expected a number ≥ 0)")));
        }
        if e.steps_cached > e.steps_total {
            return Err(invalid(format!(
                "{} cached steps of {}",
                e.steps_cached, e.steps_total
            )));
        }
        let (Ok(steps_total), Ok(steps_cached)) =
            (i64::try_from(e.steps_total), i64::try_from(e.steps_cached))
        else {
            return Err(invalid(format!("{} steps is too many", e.steps_total)));
        };
        if e.status != STATUS_BUILT && e.status != STATUS_FAILED {
            return Err(invalid(format!(
                "status {:?} (expected {STATUS_BUILT:?} or {STATUS_FAILED:?})",
                e.status
            )));
        }
        if !rfc3339_shape(&e.at) {
            return Err(invalid(format!(
                "time {:?} is not RFC 3339 (expected like 2026-11-30T07:16:14Z)",
                e.at
            )));
        }
        let work_s = e.duration_s * e.node_speed;
        if !work_s.is_finite() {
            return Err(invalid(format!(
                "{} s × speed {} overflows",
                e.duration_s, e.node_speed
            )));
        }
        let conn = self.conn();
        // SQLite's date functions give the instant (so that offsets other
        // than Z order correctly) and check the ranges (month 1–12, ...).
        let at_unix: Option<f64> = conn
            .query_row(
                "SELECT unixepoch(?1, 'subsec')",
                [e.at.to_ascii_uppercase()],
                |r| r.get(0),
            )
            .map_err(|err| sql_error(&self.path, "recording a build", err))?;
        let Some(at_unix) = at_unix else {
            return Err(invalid(format!("time {:?} is not a valid date", e.at)));
        };
        conn.execute(
            "INSERT INTO builds (target, key, node, node_speed, duration_s, work_s, output_mb,
                                 steps_total, steps_cached, status, at, at_unix)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                e.target,
                e.key,
                e.node,
                e.node_speed,
                e.duration_s,
                work_s,
                e.output_mb,
                steps_total,
                steps_cached,
                e.status,
                e.at,
                at_unix,
            ],
        )
        .map_err(|err| sql_error(&self.path, "recording a build", err))?;
        Ok(())
    }

    /// What each target costs according to its history: over its last
    /// [`WINDOW`] successful, not fully cached builds (by `at`, then by
    /// recording order), the median `work_s` and the median `output_mb` of
    /// those that know it. Only targets with at least `min_samples` such
    /// builds are returned (so a `min_samples` above [`WINDOW`] returns
    /// none).
    ///
    /// A window function picks the last [`WINDOW`] rows per target; the
    /// medians are taken here (SQLite has no median): the middle value of an
    /// odd count, the mean of the two middle values of an even one.
    pub fn costs(&self, min_samples: usize) -> Result<BTreeMap<String, LearnedCost>, StoreError> {
        let conn = self.conn();
        let sql = "SELECT target, work_s, output_mb FROM (
                       SELECT target, work_s, output_mb,
                              row_number() OVER (PARTITION BY target
                                                 ORDER BY at_unix DESC, id DESC) AS n
                       FROM builds
                       WHERE status = ?1 AND steps_cached < steps_total
                   )
                   WHERE n <= ?2
                   ORDER BY target";
        let err = |e| sql_error(&self.path, "reading the build history", e);
        let mut stmt = conn.prepare(sql).map_err(err)?;
        let window = i64::try_from(WINDOW).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![STATUS_BUILT, window], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, f64>(1)?,
                    r.get::<_, Option<f64>>(2)?,
                ))
            })
            .map_err(err)?;
        let mut samples: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for row in rows {
            let (target, work_s, output_mb) = row.map_err(err)?;
            let (work, output) = samples.entry(target).or_default();
            work.push(work_s);
            output.extend(output_mb);
        }
        let mut costs = BTreeMap::new();
        for (target, (work, output)) in samples {
            let n = work.len();
            if n < min_samples {
                continue;
            }
            if let Some(work_s) = median(work) {
                let output_mb = median(output);
                costs.insert(
                    target,
                    LearnedCost {
                        work_s,
                        output_mb,
                        samples: n,
                    },
                );
            }
        }
        Ok(costs)
    }

    /// Records a run and what it did per target (replacing a run of the
    /// same id), in one transaction.
    ///
    /// A run with an empty id or project, a start that is not RFC 3339, a
    /// negative or non-finite time, or a target with an empty name is
    /// [`StoreError::Invalid`] and nothing is written.
    pub fn record_run(&self, run: &RunEntry) -> Result<(), StoreError> {
        let invalid = |why: String| {
            StoreError::Invalid(format!("build history: the run {:?}: {why}", run.id))
        };
        if run.id.is_empty() || run.project.is_empty() {
            return Err(invalid("the run id or project is empty".into()));
        }
        if !rfc3339_shape(&run.started_at) {
            return Err(invalid(format!(
                "start {:?} is not an RFC 3339 time",
                run.started_at
            )));
        }
        let bad = |x: f64| !(x.is_finite() && x >= 0.0);
        if bad(run.wall_s) {
            return Err(invalid(format!("wall time {} s", run.wall_s)));
        }
        for t in &run.targets {
            if t.target.is_empty() {
                return Err(invalid("a target name is empty".into()));
            }
            if bad(t.duration_s) || t.expected_s.is_some_and(bad) {
                return Err(invalid(format!(
                    "target {}: duration {} s, expected {:?} s",
                    t.target, t.duration_s, t.expected_s
                )));
            }
        }
        let mut conn = self.conn();
        let err = |e| sql_error(&self.path, "recording a run", e);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute("DELETE FROM run_targets WHERE run_id = ?1", [&run.id])
            .map_err(err)?;
        tx.execute(
            "INSERT OR REPLACE INTO runs (id, project, started_at, started_unix, wall_s, failed)
             VALUES (?1, ?2, ?3, unixepoch(?3, 'subsec'), ?4, ?5)",
            params![run.id, run.project, run.started_at, run.wall_s, run.failed],
        )
        .map_err(err)?;
        {
            // One statement for every target (SQL is parsed once).
            let mut insert = tx
                .prepare(
                    "INSERT INTO run_targets (run_id, target, outcome, node, duration_s, expected_s)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(err)?;
            for t in &run.targets {
                insert
                    .execute(params![
                        run.id,
                        t.target,
                        t.outcome,
                        t.node,
                        t.duration_s,
                        t.expected_s
                    ])
                    .map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    /// What each target's last build took: its `duration_s` in the newest of
    /// the last `limit` runs (as [`History::runs`] orders them) where its
    /// outcome was `built`. One query: a history of many runs that built
    /// little answers without reading every run's targets.
    pub fn last_built(&self, limit: usize) -> Result<BTreeMap<String, f64>, StoreError> {
        let conn = self.conn();
        let err = |e| sql_error(&self.path, "reading the runs", e);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = conn
            .prepare(
                "WITH kept AS (SELECT id, started_unix, rowid AS rid FROM runs
                               ORDER BY started_unix DESC, rowid DESC LIMIT ?1)
                 SELECT t.target, t.duration_s FROM kept JOIN run_targets t ON t.run_id = kept.id
                 WHERE t.outcome = 'built'
                 ORDER BY kept.started_unix DESC, kept.rid DESC",
            )
            .map_err(err)?;
        let rows = stmt
            .query_map(params![limit], |r| Ok((r.get::<_, String>(0)?, r.get(1)?)))
            .map_err(err)?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (target, duration_s) = row.map_err(err)?;
            out.entry(target).or_insert(duration_s);
        }
        Ok(out)
    }

    /// The last `limit` runs, newest first, each with its targets (only
    /// `target`'s when one is given; runs without it are left out).
    pub fn runs(&self, target: Option<&str>, limit: usize) -> Result<Vec<RunEntry>, StoreError> {
        let conn = self.conn();
        let err = |e| sql_error(&self.path, "reading the runs", e);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = conn
            .prepare(
                "SELECT id, project, started_at, wall_s, failed FROM runs
                 WHERE ?1 IS NULL OR EXISTS
                     (SELECT 1 FROM run_targets t WHERE t.run_id = runs.id AND t.target = ?1)
                 ORDER BY started_unix DESC, rowid DESC LIMIT ?2",
            )
            .map_err(err)?;
        let mut runs = stmt
            .query_map(params![target, limit], |r| {
                Ok(RunEntry {
                    id: r.get(0)?,
                    project: r.get(1)?,
                    started_at: r.get(2)?,
                    wall_s: r.get(3)?,
                    failed: r.get(4)?,
                    targets: Vec::new(),
                })
            })
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let mut stmt = conn
            .prepare(
                "SELECT target, outcome, node, duration_s, expected_s FROM run_targets
                 WHERE run_id = ?1 AND (?2 IS NULL OR target = ?2) ORDER BY rowid",
            )
            .map_err(err)?;
        for run in &mut runs {
            run.targets = stmt
                .query_map(params![run.id, target], |r| {
                    Ok(RunTarget {
                        target: r.get(0)?,
                        outcome: r.get(1)?,
                        node: r.get(2)?,
                        duration_s: r.get(3)?,
                        expected_s: r.get(4)?,
                    })
                })
                .map_err(err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
        }
        Ok(runs)
    }
}

/// The median: the middle value of an odd count, the mean of the two middle
/// values of an even one; `None` for no values.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, the form RFC 3339 requires
/// (`t`, `z` and a space for the `T` accepted, as RFC 3339 allows). The
/// ranges are checked by SQLite when recording.
fn rfc3339_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if !(digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && matches!(b.get(10), Some(b'T' | b't' | b' '))
        && digits(11..13)
        && b.get(13) == Some(&b':')
        && digits(14..16)
        && b.get(16) == Some(&b':')
        && digits(17..19))
    {
        return false;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()),
        _ => false,
    }
}

/// Puts the database in WAL mode, which lets readers and one writer proceed
/// at once and persists in the file. Done after the schema check, so that a
/// refused database is left as it was.
///
/// The switch needs the database to itself, and SQLite reports another
/// connection's activity as busy at once instead of calling the busy
/// handler, so it is retried until [`BUSY_TIMEOUT`]. Once the file is in
/// WAL mode (every open after the first) there is nothing to switch. The
/// resulting mode is not checked: where WAL is impossible (some network
/// filesystems) SQLite keeps its rollback journal, slower under contention
/// but equally correct.
fn set_wal(path: &Path, conn: &Connection) -> Result<(), StoreError> {
    let err = |e| sql_error(path, "setting the journal mode", e);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(err)?;
    if mode.eq_ignore_ascii_case("wal") {
        return Ok(());
    }
    let start = std::time::Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())) {
            Ok(()) => return Ok(()),
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && start.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(err(e)),
        }
    }
}

/// Creates the schema in an empty database, or checks the version of an
/// existing one. Runs in an immediate transaction, so that two processes
/// opening a new file at once create the schema once.
fn check_schema(path: &Path, conn: &mut Connection) -> Result<(), StoreError> {
    let err = |e| sql_error(path, "reading the build history's schema", e);
    // The common case is read without taking the write lock: the current
    // schema with every index.
    if is_current(conn).map_err(err)? {
        return Ok(());
    }
    let refuse = |detail: String| StoreError::Unavailable {
        location: path.display().to_string(),
        detail,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let has_meta: bool = tx
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(err)?
        > 0;
    if !has_meta {
        let tables: i64 = tx
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .map_err(err)?;
        if tables > 0 {
            return Err(refuse(
                "this SQLite database is not a kiln build history (it has tables but no \
                 `meta` table); move it away or choose another file"
                    .into(),
            ));
        }
        tx.execute_batch(SCHEMA_V1).map_err(err)?;
        tx.execute_batch(SCHEMA_V2).map_err(err)?;
        tx.execute_batch(INDEXES).map_err(err)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)",
            [SCHEMA_VERSION.to_string()],
        )
        .map_err(err)?;
        return tx.commit().map_err(err);
    }
    let version: Option<String> = tx
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(err)?;
    let Some(version) = version else {
        return Err(refuse(
            "the build history has no schema version; move it away (kiln starts a new \
             history)"
                .into(),
        ));
    };
    match version.trim().parse::<u32>() {
        Ok(SCHEMA_VERSION) => {
            tx.execute_batch(INDEXES).map_err(err)?;
            tx.commit().map_err(err)
        }
        // Migrations, each one step, in this transaction, ending with the
        // version updated.
        Ok(1) => {
            tx.execute_batch(SCHEMA_V2).map_err(err)?;
            tx.execute_batch(INDEXES).map_err(err)?;
            tx.execute(
                "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(err)?;
            tx.commit().map_err(err)
        }
        Ok(v) if v > SCHEMA_VERSION => Err(refuse(format!(
            "the build history has schema version {v}, written by a newer kiln; this kiln \
             reads version {SCHEMA_VERSION}. Use the newer kiln, or move the file away \
             (this kiln then starts a new history)"
        ))),
        _ => Err(refuse(format!(
            "the build history has an unknown schema version {version:?} (this kiln reads \
             version {SCHEMA_VERSION}); move it away (kiln starts a new history)"
        ))),
    }
}

/// Whether the history has the current schema version and every index of
/// [`INDEXES`] (nothing to create or migrate).
fn is_current(conn: &Connection) -> rusqlite::Result<bool> {
    let count = |sql: &str, name: &str| -> rusqlite::Result<bool> {
        conn.query_row(sql, [name], |r| r.get::<_, i64>(0).map(|n| n > 0))
    };
    let table = "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1";
    let index = "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?1";
    if !count(table, "meta")? {
        return Ok(false);
    }
    for name in INDEXES
        .split("CREATE INDEX IF NOT EXISTS ")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next())
    {
        if !count(index, name)? {
            return Ok(false);
        }
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok(version.is_some_and(|v| v.trim().parse() == Ok(SCHEMA_VERSION)))
}

/// A SQLite error as a [`StoreError`] naming the file; a file that is not a
/// database, or a damaged one, says to move it away.
fn sql_error(path: &Path, what: &str, e: rusqlite::Error) -> StoreError {
    let detail = match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => format!(
            "{what}: the file is not a readable SQLite database ({e}); move it away (kiln \
             starts a new history)"
        ),
        _ => format!("{what}: {e}"),
    };
    StoreError::Unavailable {
        location: path.display().to_string(),
        detail,
    }
}
