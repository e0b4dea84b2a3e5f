//! A fault-injecting proxy in front of the Docker engine's Unix socket.
//!
//! Every accepted connection is forwarded byte for byte to the real socket,
//! in both directions. The proxy reads just enough HTTP/1.1 framing on the
//! client side (request heads, `Content-Length` and chunked bodies) to know
//! which request a connection is carrying; a connection upgrade (BuildKit's
//! `/session`) is passed through as plain bytes from its head on. Responses
//! are never parsed: they are copied as they come, which is what lets a
//! fault cut one in the middle of a chunk.
//!
//! Faults (each applies to `POST /v…/build` requests only):
//! - refuse the next N: read the request head, then close the connection
//!   without forwarding anything;
//! - cut the response at the first occurrence of a marker (e.g. the image
//!   id message `moby.image.id`), in the middle of the message that holds
//!   it: close the connection there (mid-chunk), or end the body properly
//!   after the truncated message, or die there (close every connection and
//!   stop accepting: connecting is refused), see [`CutHow`].
//!
//! `Proxy::die` kills it at any time.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// Largest request head the proxy accepts.
const MAX_HEAD: usize = 64 * 1024;

#[derive(Default)]
struct Faults {
    /// Build requests still to refuse.
    refuse_builds: usize,
    /// Cut the next build response at this marker.
    cut: Option<Cut>,
}

struct Cut {
    marker: Vec<u8>,
    how: CutHow,
}

/// What happens at the marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutHow {
    /// The connection closes, in the middle of the chunk.
    Close,
    /// The chunk is shortened to end in the middle of the marker, then the
    /// body ends properly (a last, empty chunk) and the connection closes:
    /// the response is complete, its last message truncated.
    EndBody,
    /// Every connection closes and the proxy stops accepting.
    Die,
}

#[derive(Default)]
struct Seen {
    /// Request lines, in the order they arrived.
    requests: Vec<String>,
    /// What was forwarded of the last build response.
    build_response: Vec<u8>,
}

struct Shared {
    upstream: PathBuf,
    faults: Mutex<Faults>,
    seen: Mutex<Seen>,
    build_requests: AtomicUsize,
    refused: AtomicUsize,
    cuts: AtomicUsize,
    /// `true` once the proxy has died: every task ends.
    dead: watch::Sender<bool>,
}

/// A running proxy; it lives as long as the test's runtime.
pub struct Proxy {
    dir: PathBuf,
    socket: PathBuf,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on a fresh socket in a temporary directory and forwards to
    /// the Unix socket `upstream`.
    pub async fn start(upstream: &Path) -> Proxy {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kiln-faults-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("proxy directory");
        let socket = dir.join("docker.sock");
        let listener = UnixListener::bind(&socket).expect("proxy socket");
        let shared = Arc::new(Shared {
            upstream: upstream.to_path_buf(),
            faults: Mutex::new(Faults::default()),
            seen: Mutex::new(Seen::default()),
            build_requests: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            cuts: AtomicUsize::new(0),
            dead: watch::channel(false).0,
        });
        let s = shared.clone();
        tokio::spawn(async move {
            let mut dead = s.dead.subscribe();
            loop {
                tokio::select! {
                    _ = dead.wait_for(|d| *d) => break,
                    r = listener.accept() => match r {
                        Ok((client, _)) => {
                            tokio::spawn(serve(client, s.clone()));
                        }
                        Err(_) => break,
                    },
                }
            }
            // The listener is dropped here: connecting is refused from now on.
        });
        Proxy {
            dir,
            socket,
            shared,
        }
    }

    /// The proxy's address, as `DOCKER_HOST` spells it.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Refuses the next `n` build requests (head read, connection closed).
    pub fn refuse_builds(&self, n: usize) {
        self.shared.faults.lock().unwrap().refuse_builds = n;
    }

    /// Cuts the next build response at the first occurrence of `marker`,
    /// in the middle of the message that holds it.
    pub fn cut_build_response_at(&self, marker: &str, how: CutHow) {
        self.shared.faults.lock().unwrap().cut = Some(Cut {
            marker: marker.as_bytes().to_vec(),
            how,
        });
    }

    /// Dies now.
    pub fn die(&self) {
        self.shared.dead.send_replace(true);
    }

    /// Build requests that reached the proxy (refused ones included).
    pub fn build_requests(&self) -> usize {
        self.shared.build_requests.load(Ordering::SeqCst)
    }

    /// Build requests refused so far.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// Build responses cut so far.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// Every request line seen so far.
    pub fn requests(&self) -> Vec<String> {
        self.shared.seen.lock().unwrap().requests.clone()
    }

    /// The bytes of the last build response that reached the client.
    pub fn build_response(&self) -> Vec<u8> {
        self.shared.seen.lock().unwrap().build_response.clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.dead.send_replace(true);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `POST /v1.41/build?...` (or `/build` without a version).
fn is_build(request_line: &str) -> bool {
    let Some(path) = request_line.strip_prefix("POST /") else {
        return false;
    };
    let path = match path.split_once('/') {
        Some((v, rest)) if v.starts_with('v') => rest,
        _ => path,
    };
    path.starts_with("build?") || path.starts_with("build ")
}

/// One client connection and its upstream twin. Returning drops (closes)
/// both.
async fn serve(client: UnixStream, shared: Arc<Shared>) {
    let Ok(upstream) = UnixStream::connect(&shared.upstream).await else {
        return;
    };
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    // Whether the request in flight is a build (HTTP/1.1 clients here never
    // pipeline: a response belongs to the last request sent).
    let in_build = AtomicBool::new(false);
    let mut dead = shared.dead.subscribe();
    tokio::select! {
        _ = dead.wait_for(|d| *d) => {}
        _ = requests(BufReader::new(cr), uw, &shared, &in_build) => {}
        _ = responses(ur, cw, &shared, &in_build) => {}
    }
}

/// Client to daemon. Returns when the connection is to be closed; when the
/// client has merely finished sending, waits for the response side.
async fn requests(
    mut client: BufReader<OwnedReadHalf>,
    mut upstream: OwnedWriteHalf,
    shared: &Shared,
    in_build: &AtomicBool,
) -> io::Result<()> {
    loop {
        let Some(head) = read_head(&mut client).await? else {
            upstream.shutdown().await?;
            return std::future::pending().await;
        };
        let text = String::from_utf8_lossy(&head).into_owned();
        let line = text.lines().next().unwrap_or("").to_string();
        shared.seen.lock().unwrap().requests.push(line.clone());
        let build = is_build(&line);
        if build {
            shared.build_requests.fetch_add(1, Ordering::SeqCst);
            let mut f = shared.faults.lock().unwrap();
            if f.refuse_builds > 0 {
                f.refuse_builds -= 1;
                shared.refused.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
        }
        in_build.store(build, Ordering::SeqCst);
        upstream.write_all(&head).await?;
        let header = |name: &str| {
            text.lines().skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_ascii_lowercase())
            })
        };
        if header("upgrade").is_some()
            || header("connection").is_some_and(|c| c.contains("upgrade"))
        {
            // From here on the connection is not HTTP any more.
            tokio::io::copy(&mut client, &mut upstream).await?;
            upstream.shutdown().await?;
            return std::future::pending().await;
        }
        if header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            copy_chunked(&mut client, &mut upstream).await?;
        } else if let Some(n) = header("content-length").and_then(|n| n.parse::<u64>().ok()) {
            let copied = tokio::io::copy(&mut (&mut client).take(n), &mut upstream).await?;
            if copied != n {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// A request head (request line, headers, empty line), or `None` at a clean
/// end of stream.
async fn read_head(client: &mut BufReader<OwnedReadHalf>) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let start = head.len();
        if client.read_until(b'\n', &mut head).await? == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        let line = &head[start..];
        if line == b"\r\n" || line == b"\n" {
            // Keep-alive clients may send a stray CRLF between requests.
            if start == 0 {
                head.clear();
                continue;
            }
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::other("request head too large"));
        }
    }
}

/// Copies one chunked body, framing included.
async fn copy_chunked(
    client: &mut BufReader<OwnedReadHalf>,
    upstream: &mut OwnedWriteHalf,
) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if client.read_until(b'\n', &mut line).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        upstream.write_all(&line).await?;
        let size = String::from_utf8_lossy(&line);
        let size = size.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size, 16)
            .map_err(|_| io::Error::other(format!("bad chunk size {size:?}")))?;
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                line.clear();
                if client.read_until(b'\n', &mut line).await? == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                upstream.write_all(&line).await?;
                if line == b"\r\n" || line == b"\n" {
                    return Ok(());
                }
            }
        }
        // The data and its CRLF.
        let want = size + 2;
        let copied = tokio::io::copy(&mut (&mut *client).take(want), upstream).await?;
        if copied != want {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
}

/// Daemon to client, as the bytes come; faults apply to build responses.
async fn responses(
    mut upstream: OwnedReadHalf,
    mut client: OwnedWriteHalf,
    shared: &Shared,
    in_build: &AtomicBool,
) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    // Whether the current build response has started (to reset the record).
    let mut started = false;
    loop {
        let n = upstream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        let data = &buf[..n];
        if !in_build.load(Ordering::SeqCst) {
            started = false;
            client.write_all(data).await?;
            continue;
        }
        let marker = shared
            .faults
            .lock()
            .unwrap()
            .cut
            .as_ref()
            .map(|c| (c.marker.clone(), c.how));
        // What to send, and whether the connection ends after it.
        let (out, cut) = {
            let mut seen = shared.seen.lock().unwrap();
            if !started {
                seen.build_response.clear();
                started = true;
            }
            let before = seen.build_response.len();
            seen.build_response.extend_from_slice(data);
            let found = marker.and_then(|(m, how)| {
                // Search from where a marker split across reads could start.
                let from = before.saturating_sub(m.len());
                let p = from + find(&seen.build_response[from..], &m)?;
                Some((p, m.len(), how))
            });
            match found {
                None => (data.to_vec(), None),
                Some((p, len, how)) => {
                    let whole = std::mem::take(&mut seen.build_response);
                    let mut kept = whole[..p.max(before)].to_vec();
                    if how == CutHow::EndBody
                        && let Some((chunk, message)) = chunk_start(&whole, p)
                        && chunk >= before
                    {
                        // The chunk holding the marker is replaced by one
                        // holding its message up to the marker's middle.
                        let part = &whole[message..p + len / 2];
                        kept.truncate(chunk);
                        kept.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                        kept.extend_from_slice(part);
                        kept.extend_from_slice(b"\r\n0\r\n\r\n");
                    }
                    let out = kept[before.min(kept.len())..].to_vec();
                    seen.build_response = kept;
                    (out, Some(how))
                }
            }
        };
        client.write_all(&out).await?;
        if let Some(how) = cut {
            client.flush().await?;
            shared.faults.lock().unwrap().cut = None;
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            if how == CutHow::Die {
                shared.dead.send_replace(true);
            }
            return Ok(());
        }
    }
}

/// Where the chunk holding byte `p` of a chunked response starts (its size
/// line) and where its data starts, if `p` is on the chunk's first line.
fn chunk_start(response: &[u8], p: usize) -> Option<(usize, usize)> {
    // The data starts after the last CRLF before `p`, the size line before it.
    let data = response[..p].windows(2).rposition(|w| w == b"\r\n")? + 2;
    let size_end = data - 2;
    let size_start = response[..size_end]
        .iter()
        .rposition(|b| !b.is_ascii_hexdigit())?
        + 1;
    (size_start < size_end && response[..size_start].ends_with(b"\r\n"))
        .then_some((size_start, data))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
