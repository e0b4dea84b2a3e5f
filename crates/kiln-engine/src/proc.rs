//! Child processes whose output kiln reads: started in a process group of
//! their own, their stdout and stderr read while they run (a pipe holds
//! about 64 KiB: a child that writes more blocks until someone reads, so
//! reading only after it exits hangs on large output, such as `git
//! ls-remote` of a repository with thousands of refs), bounded in time and
//! in size, and stopped with their whole group when a bound passes (`git
//! ls-remote` of an `https://` URL runs `git-remote-https` as its own
//! child, which must not outlive it).
//!
//! It also owns the rest of what kiln's child processes leave on the
//! machine: the process groups of running builds (stopped as a whole when
//! kiln stops), private temporary directories, and build log files.
//!
//! Must never: block on a child without a deadline, keep an unbounded
//! amount of its output, or leave a temporary directory behind.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::EngineError;

/// The most output of one stream kept by default: 256 MiB, far above any
/// `git ls-remote` (PyTorch's, with every pull request's refs, is a few
/// MB) and still a bound.
pub const DEFAULT_MAX_OUTPUT: usize = 256 << 20;

/// What a finished child left.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    /// The last non-empty line of stderr, trimmed: what a failing command
    /// usually says of itself.
    #[must_use]
    pub fn last_error_line(&self) -> String {
        String::from_utf8_lossy(&self.stderr)
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string()
    }
}

/// Why a child gave no output.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} did not finish within {}s (stopped)", bound.as_secs_f64())]
    TimedOut { program: String, bound: Duration },
    #[error("{program} wrote more than {} MiB to {stream} (stopped)", limit >> 20)]
    TooLarge {
        program: String,
        stream: &'static str,
        limit: usize,
    },
    #[error("reading the output of {program}: {source}")]
    Io {
        program: String,
        source: std::io::Error,
    },
}

/// Runs `cmd` (stdin from `/dev/null` unless the caller set it), reading
/// its stdout and stderr as they come, and returns once it has exited and
/// both streams are closed. When `bound` passes first, or a stream passes
/// `max_output` bytes, the child's whole process group is killed and an
/// error says which bound it was.
pub fn output(cmd: &mut Command, bound: Duration, max_output: usize) -> Result<Output, ProcError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let t0 = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| ProcError::Spawn {
            program: program.clone(),
            source,
        })?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel::<Event>();
    let reader = |stream: &'static str, pipe: Option<Box<dyn Read + Send>>| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let r = match pipe {
                Some(p) => read_capped(p, &mut buf, max_output),
                None => Ok(false),
            };
            let _ = tx.send(Event::Stream(stream, r.map(|over| (over, buf))));
        })
    };
    let out_thread = reader(
        "stdout",
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err_thread = reader(
        "stderr",
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let waiter = {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Event::Exited(child.wait()));
        })
    };
    drop(tx);

    let mut status = None;
    let mut stdout = None;
    let mut stderr = None;
    let mut failure: Option<ProcError> = None;
    while status.is_none() || stdout.is_none() || stderr.is_none() {
        let left = bound.saturating_sub(t0.elapsed());
        let event = match rx.recv_timeout(left) {
            Ok(e) => e,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                failure.get_or_insert(ProcError::TimedOut {
                    program: program.clone(),
                    bound,
                });
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        match event {
            Event::Exited(Ok(s)) => status = Some(s),
            Event::Exited(Err(source)) => {
                failure.get_or_insert(ProcError::Io {
                    program: program.clone(),
                    source,
                });
                break;
            }
            Event::Stream(name, Ok((over, buf))) => {
                if over {
                    failure.get_or_insert(ProcError::TooLarge {
                        program: program.clone(),
                        stream: name,
                        limit: max_output,
                    });
                    break;
                }
                if name == "stdout" {
                    stdout = Some(buf);
                } else {
                    stderr = Some(buf);
                }
            }
            Event::Stream(_, Err(source)) => {
                failure.get_or_insert(ProcError::Io {
                    program: program.clone(),
                    source,
                });
                break;
            }
        }
    }
    // Whatever happened, nothing of the group outlives this call: a
    // grandchild that kept a pipe open is stopped too. (Once the leader
    // has been waited for, its id may be reused, but not as a group id
    // while members of its group live; signalling an empty group fails
    // harmlessly.)
    if failure.is_some() || status.is_none() || stdout.is_none() || stderr.is_none() {
        kill_group(pid);
    }
    let _ = waiter.join();
    let _ = out_thread.join();
    let _ = err_thread.join();
    if let Some(f) = failure {
        return Err(f);
    }
    match (status, stdout, stderr) {
        (Some(status), Some(stdout), Some(stderr)) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        _ => Err(ProcError::Io {
            program,
            source: std::io::Error::other("the child's output ended unexpectedly"),
        }),
    }
}

enum Event {
    Exited(std::io::Result<ExitStatus>),
    /// A stream's bytes, and whether it passed the size bound.
    Stream(&'static str, std::io::Result<(bool, Vec<u8>)>),
}

/// Reads `pipe` to its end into `buf`; `Ok(true)` once more than `max`
/// bytes came (reading stops there).
fn read_capped(mut pipe: impl Read, buf: &mut Vec<u8>, max: usize) -> std::io::Result<bool> {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                if buf.len() + n > max {
                    return Ok(true);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// SIGKILL to the process group `pgid`.
fn kill_group(pgid: u32) {
    signal_group(pgid, Sig::Kill);
}

// ---- Build process groups ----
//
// The build processes kiln starts (the docker CLI, which may run the
// buildx plugin as its own child), each in a process group of its own, so
// that stopping kiln stops the whole tree: `kill_on_drop` reaches only the
// direct child, and a plugin left behind would go on building and then
// tag or push an image nobody asked for any more.
//
// A group has its own leader's PID as its id. [`Group`] registers it while
// the child runs; [`terminate_all`] signals every registered group (SIGTERM,
// then SIGKILL after a grace period) with `kill(2)` through rustix's safe
// wrapper (kiln's own code has no `unsafe`), so stopping a group starts no
// process — which a signal handler on its way out, or a no-op run that
// should start none, cannot afford.

fn running() -> &'static std::sync::Mutex<std::collections::HashSet<u32>> {
    static RUNNING: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<u32>>> =
        std::sync::OnceLock::new();
    RUNNING.get_or_init(Default::default)
}

/// A running build process group, registered until dropped.
pub struct Group(u32);

impl Group {
    /// Registers the group led by `pid` (a child spawned with
    /// `process_group(0)`).
    pub fn new(pid: Option<u32>) -> Option<Group> {
        let pid = pid?;
        running().lock().ok()?.insert(pid);
        Some(Group(pid))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The group may outlive its leader (a plugin still building): it
        // is signalled before it leaves the registry.
        signal_group(self.0, Sig::Kill);
        if let Ok(mut r) = running().lock() {
            r.remove(&self.0);
        }
    }
}

/// A signal kiln sends to a child's process group.
#[derive(Clone, Copy, Debug)]
enum Sig {
    Term,
    Kill,
}

/// Sends `signal` to the process group `pgid` (rustix's safe `kill(2)`:
/// no process is started to send it). A group that is gone already is
/// not an error.
fn signal_group(pgid: u32, signal: Sig) {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let sig = match signal {
        Sig::Term => rustix::process::Signal::TERM,
        Sig::Kill => rustix::process::Signal::KILL,
    };
    let _ = rustix::process::kill_process_group(pid, sig);
}

/// Stops every running build group: SIGTERM, then SIGKILL to what is left
/// after `grace`.
pub fn terminate_all(grace: std::time::Duration) {
    let groups: Vec<u32> = running()
        .lock()
        .map(|r| r.iter().copied().collect())
        .unwrap_or_default();
    if groups.is_empty() {
        return;
    }
    for g in &groups {
        signal_group(*g, Sig::Term);
    }
    let alive = |g: &u32| std::path::Path::new(&format!("/proc/{g}")).exists();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < grace && groups.iter().any(alive) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for g in &groups {
        signal_group(*g, Sig::Kill);
    }
}

// ---- Temporary directories and log files ----

/// A private temporary directory (mode 0700), removed when dropped — or by
/// [`remove_temp_dirs`] when the process exits without unwinding (a
/// second signal), since it may hold a secret (the job count, the compiler
/// cache's credentials).
pub struct TempDir(std::path::PathBuf);

fn temp_dirs() -> &'static std::sync::Mutex<std::collections::HashSet<std::path::PathBuf>> {
    static DIRS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashSet<std::path::PathBuf>>,
    > = std::sync::OnceLock::new();
    DIRS.get_or_init(Default::default)
}

impl TempDir {
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    pub fn new(name: &str) -> Result<TempDir, EngineError> {
        let path =
            std::env::temp_dir().join(format!("kiln-{}-{}-{}", std::process::id(), name, unique()));
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            b.mode(0o700);
        }
        b.create(&path)
            .map_err(|e| EngineError::io(path.display().to_string(), e))?;
        if let Ok(mut d) = temp_dirs().lock() {
            d.insert(path.clone());
        }
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if let Ok(mut d) = temp_dirs().lock() {
            d.remove(&self.0);
        }
    }
}

/// Removes every temporary directory still alive: for a process about to
/// exit without running destructors.
pub fn remove_temp_dirs() {
    let dirs: Vec<std::path::PathBuf> = temp_dirs()
        .lock()
        .map(|mut d| d.drain().collect())
        .unwrap_or_default();
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A build's progress log file (created with its directory); writing is
/// best effort: a log that cannot be written never fails a build.
pub struct LogFile(Option<std::io::BufWriter<std::fs::File>>);

impl LogFile {
    pub fn create(path: Option<&std::path::Path>) -> LogFile {
        LogFile(path.and_then(|p| {
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).ok()?;
            }
            std::fs::File::create(p).ok().map(std::io::BufWriter::new)
        }))
    }

    pub fn line(&mut self, line: &str) {
        use std::io::Write;
        if let Some(w) = &mut self.0
            && writeln!(w, "{line}").is_err()
        {
            self.0 = None;
        }
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        use std::io::Write;
        if let Some(w) = &mut self.0 {
            let _ = w.flush();
        }
    }
}

/// The CPUs this process may use, read once: the standard library reads
/// the cgroup's quota files each time it is asked.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn output_far_larger_than_a_pipe_is_read_while_the_child_runs() {
        // 8 MiB on stdout and 1 MiB on stderr: each blocks a child whose
        // output is read only after it exits.
        let o = output(
            &mut sh("head -c 8388608 /dev/zero; head -c 1048576 /dev/zero >&2; exit 3"),
            Duration::from_secs(20),
            DEFAULT_MAX_OUTPUT,
        )
        .unwrap();
        assert_eq!(o.stdout.len(), 8 << 20);
        assert_eq!(o.stderr.len(), 1 << 20);
        assert_eq!(o.status.code(), Some(3));
    }

    #[test]
    fn a_group_is_signalled_without_starting_a_process() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        for (sig, number) in [(Sig::Term, 15), (Sig::Kill, 9)] {
            let mut child = std::process::Command::new("sleep")
                .arg("30")
                .process_group(0)
                .spawn()
                .unwrap();
            signal_group(child.id(), sig);
            let status = child.wait().unwrap();
            assert_eq!(status.signal(), Some(number), "{sig:?}: {status:?}");
        }
        // A group that is gone is not an error.
        signal_group(u32::MAX, Sig::Kill);
        signal_group(0, Sig::Kill);
    }

    #[test]
    fn a_child_past_its_time_is_stopped_with_its_group() {
        let dir = std::env::temp_dir().join(format!("kiln-proc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("grandchild");
        // The grandchild holds stdout open and would outlive a killed
        // leader.
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let t0 = Instant::now();
        let e = output(&mut sh(&script), Duration::from_millis(500), 1 << 20).unwrap_err();
        assert!(matches!(e, ProcError::TimedOut { .. }), "{e}");
        assert!(e.to_string().contains("did not finish within 0.5s"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        let grandchild = std::fs::read_to_string(&pidfile).unwrap();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{}/stat", grandchild.trim()))
                .is_ok_and(|s| !s.contains(") Z "))
        };
        let t1 = Instant::now();
        while alive() && t1.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "the grandchild {grandchild} survived");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn output_past_its_size_is_stopped() {
        let e = output(
            &mut sh("head -c 10000000 /dev/zero; sleep 30"),
            Duration::from_secs(20),
            1 << 20,
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                ProcError::TooLarge {
                    stream: "stdout",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let e = output(
            &mut Command::new("kiln-no-such-program"),
            Duration::from_secs(5),
            1024,
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("cannot run kiln-no-such-program"),
            "{e}"
        );
    }

    #[test]
    fn temp_dirs_are_private_and_removed_on_drop_or_at_exit() {
        let a = TempDir::new("proc-test").unwrap();
        let b = TempDir::new("proc-test").unwrap();
        assert_ne!(a.path(), b.path());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        assert!(!pa.exists());
        // An exit that runs no destructor still removes what is left.
        remove_temp_dirs();
        assert!(!pb.exists());
        drop(b);
    }
}
