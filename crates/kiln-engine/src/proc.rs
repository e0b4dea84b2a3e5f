//! Child processes whose output kiln reads: started in a process group of
//! their own, their stdout and stderr read while they run (a pipe holds
//! about 64 KiB: a child that writes more blocks until someone reads, so
//! reading only after it exits hangs on large output, such as `git
//! ls-remote` of a repository with thousands of refs), bounded in time and
//! in size, and stopped with their whole group when a bound passes (`git
//! ls-remote` of an `https://` URL runs `git-remote-https` as its own
//! child, which must not outlive it).
//!
//! Must never: block on a child without a deadline, or keep an unbounded
//! amount of its output.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// SIGKILL to the process group `pgid` (kiln's code has no `unsafe` for
/// `kill(2)`, so `kill(1)` sends it, as [`crate::children`] does).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
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
}
