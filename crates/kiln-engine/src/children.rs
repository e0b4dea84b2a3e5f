//! The build processes kiln starts (the docker CLI, which may run the
//! buildx plugin as its own child), each in a process group of its own, so
//! that stopping kiln stops the whole tree: `kill_on_drop` reaches only the
//! direct child, and a plugin left behind would go on building and then
//! tag or push an image nobody asked for any more.
//!
//! A group has its own leader's PID as its id. [`Group`] registers it while
//! the child runs; [`terminate_all`] signals every registered group (SIGTERM,
//! then SIGKILL after a grace period) with `kill(1)`, since kiln's code has
//! no `unsafe` for `kill(2)`.

use std::collections::HashSet;
use std::sync::Mutex;

fn running() -> &'static Mutex<HashSet<u32>> {
    static RUNNING: std::sync::OnceLock<Mutex<HashSet<u32>>> = std::sync::OnceLock::new();
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
        signal_group(self.0, "KILL");
        if let Ok(mut r) = running().lock() {
            r.remove(&self.0);
        }
    }
}

fn signal_group(pgid: u32, signal: &str) {
    let _ = std::process::Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{pgid}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
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
        signal_group(*g, "TERM");
    }
    let alive = |g: &u32| std::path::Path::new(&format!("/proc/{g}")).exists();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < grace && groups.iter().any(alive) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for g in &groups {
        signal_group(*g, "KILL");
    }
}
