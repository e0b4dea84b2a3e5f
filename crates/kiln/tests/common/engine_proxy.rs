//! A unix-socket proxy in front of an engine that keeps the request line
//! (`GET /v1.45/images/json?...`) of every Engine API request it passes
//! on: how many questions a run asked the engine. Bytes go through
//! unchanged in both directions; request lines are found at the start of
//! the client's stream and after each request's headers (the runs it
//! watches send no request bodies but tiny ones).

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub struct EngineProxy {
    pub host: String,
    path: PathBuf,
    requests: Arc<Mutex<Vec<String>>>,
}

impl EngineProxy {
    /// Listens at `path`, forwarding to the engine at `DOCKER_HOST`-style
    /// `engine` (`unix://...`).
    pub fn start(engine: &str, path: &Path) -> EngineProxy {
        let target = PathBuf::from(engine.strip_prefix("unix://").expect("a unix:// engine"));
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = UnixStream::connect(&target) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let seen = seen.clone();
                std::thread::spawn(move || upstream(client, server, seen));
                std::thread::spawn(move || copy(s2, c2));
            }
        });
        EngineProxy {
            host: format!("unix://{}", path.display()),
            path: path.to_path_buf(),
            requests,
        }
    }

    /// The request lines so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        self.requests.lock().unwrap().clear();
    }
}

impl Drop for EngineProxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

const METHODS: [&str; 5] = ["GET ", "POST ", "HEAD ", "DELETE ", "PUT "];

fn upstream(mut from: UnixStream, mut to: UnixStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut buf = [0u8; 65536];
    let mut pending: Vec<u8> = Vec::new();
    // Bytes of the current request's body still to come.
    let mut body = 0usize;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        pending.extend_from_slice(&buf[..n]);
        loop {
            let k = body.min(pending.len());
            pending.drain(..k);
            body -= k;
            if body > 0 {
                break;
            }
            // Each request: its line, headers, a blank line, its body.
            let Some(end) = find(&pending, b"\r\n\r\n") else {
                break;
            };
            let head = String::from_utf8_lossy(&pending[..end]).to_string();
            let line = head.lines().next().unwrap_or_default().to_string();
            if METHODS.iter().any(|m| line.starts_with(m)) {
                seen.lock().unwrap().push(line);
            }
            body = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            pending.drain(..end + 4);
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

fn copy(mut from: UnixStream, mut to: UnixStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(std::net::Shutdown::Write);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
