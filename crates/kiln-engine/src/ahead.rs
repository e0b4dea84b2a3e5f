//! Work done ahead: what a run will need later (its targets' inputs, their
//! latest records, what the history learned), started while the run is
//! prepared, on threads of its own that yield to the run's own thread.
//!
//! A no-op is short and its critical path is one thread: reading the bake
//! files, the preflight's question to the engine, the keys, the skips. On
//! a machine with few cores, threads reading ahead at the same priority
//! took a share of the CPU from that path (and from the engine's own
//! daemon answering it) that they only needed later. On Linux each such
//! thread lowers its own scheduling priority ([`NICE`] above the process's)
//! when it starts; it then runs in full whenever the run's thread waits,
//! which is when its work is needed.
//!
//! Must never: be given work the run waits for at once (a thread that
//! yields would only lengthen the wait), or change any thread's priority
//! but its own.

/// How much lower a thread working ahead runs (nice levels, out of 19).
pub const NICE: i32 = 5;

/// Starts `f` on a thread named `name` that yields to the process's other
/// threads; `Err` when no thread can be started.
pub fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            yield_to_the_run();
            f()
        })
}

/// Lowers the calling thread's priority by [`NICE`] (Linux sets a nice
/// value per thread). Best effort: a system that refuses leaves it as it
/// was.
fn yield_to_the_run() {
    #[cfg(target_os = "linux")]
    {
        let me = rustix::thread::gettid();
        if let Ok(now) = rustix::process::getpriority_process(Some(me)) {
            let _ = rustix::process::setpriority_process(Some(me), (now + NICE).min(19));
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_working_ahead_runs_below_the_thread_that_started_it() {
        let mine = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let ahead = super::spawn("kiln-test-ahead", || {
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(ahead, (mine + super::NICE).min(19));
        // The starting thread keeps its own.
        let after = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        assert_eq!(after, mine);
    }
}
