//! The thread the HTTP back ends (OCI registry, S3, WebDAV) run their
//! async clients on. The [`crate::RecordStore`] trait is synchronous and is
//! called from plain threads, from `spawn_blocking` and from inside async
//! code; a store therefore owns a thread with a current-thread runtime,
//! sends each operation's future there and waits on a channel, so no
//! runtime is ever entered from the caller's thread.

use std::future::Future;
use std::pin::Pin;

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A thread with a current-thread runtime that runs the store's futures.
/// It ends when the store (the only sender) is dropped.
pub(crate) struct Worker {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl Worker {
    pub(crate) fn start(name: &str) -> Result<Worker, String> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("starting the I/O runtime: {e}")));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                rt.block_on(async move {
                    while let Some(job) = rx.recv().await {
                        tokio::spawn(job);
                    }
                });
            })
            .map_err(|e| format!("starting the I/O thread: {e}"))?;
        ready_rx
            .recv()
            .map_err(|_| "the I/O thread stopped".to_string())??;
        Ok(Worker { jobs: tx })
    }

    /// Runs `fut` on the worker and waits for its output (`None` if the
    /// worker is gone or the future panicked).
    pub(crate) fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.jobs
            .send(Box::pin(async move {
                let _ = tx.send(fut.await);
            }))
            .ok()?;
        rx.recv().ok()
    }
}
