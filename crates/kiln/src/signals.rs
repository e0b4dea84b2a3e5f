//! SIGINT and SIGTERM during `kiln build`, in three phases.
//!
//! - **While the run goes**, the first signal stops it: [`Signals::first`]
//!   answers with the exit code it means (130, 143), and the build command
//!   stops the builds, keeps the stat cache and exits with that code.
//! - **While it stops** (the builds' process groups are given a grace
//!   period, the tasks a shutdown wait), a second signal exits at once.
//! - **After the run** (the size lookups, the run report, the summary), a
//!   signal exits at once too, as it would without kiln's handler.
//!
//! Once a process has listened for a signal, the runtime's handler stays
//! installed for the life of the process and a signal nobody listens for is
//! swallowed; so the listening never stops here. It runs on a thread of its
//! own with its own small runtime, which outlives the build's runtime and
//! its shutdown. Exiting "at once" first stops any build process group and
//! removes kiln's temporary directories (they may hold a secret), then
//! exits with the signal's code.
//!
//! Must never: decide anything about the run itself; the build command
//! reads [`Signals::first`] and does the stopping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::exit;

const RUNNING: u8 = 0;
const STOPPING: u8 = 1;
const AFTER: u8 = 2;

/// The signal watch of one build command.
pub struct Signals {
    phase: Arc<AtomicU8>,
    first: tokio::sync::watch::Receiver<Option<u8>>,
}

impl Signals {
    /// Starts listening. `None` when the handlers cannot be installed (the
    /// default dispositions then stay: a signal ends kiln at once).
    pub fn watch() -> Option<Signals> {
        let phase = Arc::new(AtomicU8::new(RUNNING));
        let (tx, rx) = tokio::sync::watch::channel(None);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let p = phase.clone();
        std::thread::Builder::new()
            .name("kiln-signals".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(_) => {
                        let _ = ready_tx.send(false);
                        return;
                    }
                };
                rt.block_on(listen(p, tx, ready_tx));
            })
            .ok()?;
        ready_rx
            .recv()
            .ok()?
            .then_some(Signals { phase, first: rx })
    }

    /// The exit code of the first signal, when it comes.
    pub async fn first(&self) -> u8 {
        let mut rx = self.first.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(code) => code.unwrap_or(exit::SIGINT),
            // The listener is gone: no signal will come this way.
            Err(_) => std::future::pending().await,
        }
    }

    /// The run has ended: from now on a signal exits at once.
    pub fn run_ended(&self) {
        let _ = self
            .phase
            .compare_exchange(RUNNING, AFTER, Ordering::SeqCst, Ordering::SeqCst);
    }
}

async fn listen(
    phase: Arc<AtomicU8>,
    first: tokio::sync::watch::Sender<Option<u8>>,
    ready: std::sync::mpsc::Sender<bool>,
) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        let _ = ready.send(false);
        return;
    };
    let _ = ready.send(true);
    loop {
        let (code, name) = tokio::select! {
            _ = int.recv() => (exit::SIGINT, "SIGINT"),
            _ = term.recv() => (exit::SIGTERM, "SIGTERM"),
        };
        match phase.compare_exchange(RUNNING, STOPPING, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {
                let _ = first.send(Some(code));
            }
            Err(now) => {
                let when = if now == STOPPING {
                    "again while the run stops"
                } else {
                    "after the run"
                };
                eprintln!("kiln: {name} {when}: exiting now");
                kiln_engine::proc::terminate_all(std::time::Duration::ZERO);
                kiln_engine::proc::remove_temp_dirs();
                std::process::exit(i32::from(code));
            }
        }
    }
}
