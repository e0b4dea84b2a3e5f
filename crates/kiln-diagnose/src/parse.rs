//! Reading a log: split into lines as bytes arrive (memory stays bounded:
//! one partial line, capped, plus one record per vertex), detect the format
//! from the first non-blank line, and feed each line to the plain or the
//! rawjson reader.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use serde::Deserialize;

use crate::contract::LogFormat;
use crate::trace::{Kind, State, Trace, import_failure_line};

/// The longest line kept; the rest of a longer line is dropped (a rawjson
/// line that long no longer parses and counts as unrecognized).
pub const MAX_LINE: usize = 4 << 20;

/// A streaming log reader: [`Parser::feed`] bytes in any chunking, then
/// [`Parser::finish`].
#[derive(Debug, Default)]
pub struct Parser {
    partial: Vec<u8>,
    reader: Option<Reader>,
    /// Blank lines before the first non-blank one.
    leading: u64,
}

#[derive(Debug)]
enum Reader {
    Plain(Plain),
    Raw(Raw),
}

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the next bytes of the log.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if !self.partial.is_empty() {
            match memchr::memchr(b'\n', bytes) {
                None => {
                    self.keep(bytes);
                    return;
                }
                Some(i) => {
                    self.keep(&bytes[..i]);
                    let line = std::mem::take(&mut self.partial);
                    self.line(&line);
                    self.partial = line;
                    self.partial.clear();
                    bytes = &bytes[i + 1..];
                }
            }
        }
        let mut start = 0;
        for i in memchr::memchr_iter(b'\n', bytes) {
            self.line(&bytes[start..i]);
            start = i + 1;
        }
        self.keep(&bytes[start..]);
    }

    /// Reads everything from `r` (in 1 MiB chunks).
    pub fn read_from(&mut self, r: &mut dyn Read) -> std::io::Result<()> {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            match r.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => self.feed(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Ends the log (a last line without a newline counts) and returns what
    /// it held.
    pub fn finish(mut self) -> Trace {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
        }
        let mut trace = match self.reader {
            Some(Reader::Plain(p)) => p.trace,
            Some(Reader::Raw(r)) => r.finish(),
            None => Trace::new(LogFormat::Plain),
        };
        trace.lines += self.leading;
        trace
    }

    fn keep(&mut self, bytes: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn line(&mut self, raw: &[u8]) {
        let mut line = raw.strip_suffix(b"\r").unwrap_or(raw);
        line = strip_timestamp(line);
        let reader = match &mut self.reader {
            Some(r) => r,
            None => {
                let first = line.iter().position(|b| !b.is_ascii_whitespace());
                let Some(first) = first else {
                    self.leading += 1;
                    return;
                };
                self.reader = Some(if line[first] == b'{' {
                    Reader::Raw(Raw::default())
                } else {
                    Reader::Plain(Plain::default())
                });
                self.reader.as_mut().expect("just set")
            }
        };
        match reader {
            Reader::Plain(p) => p.line(line),
            Reader::Raw(r) => r.line(line),
        }
    }
}

/// Parses a whole log held in memory.
pub fn parse(bytes: &[u8]) -> Trace {
    let mut p = Parser::new();
    p.feed(bytes);
    p.finish()
}

/// Drops a CI runner's timestamp prefix (`2026-06-10T14:12:42.1234567Z `,
/// as GitHub Actions writes before every line).
fn strip_timestamp(line: &[u8]) -> &[u8] {
    if line.len() < 20
        || !line[0].is_ascii_digit()
        || line[4] != b'-'
        || line[7] != b'-'
        || line[10] != b'T'
    {
        return line;
    }
    let end = memchr::memchr(b' ', line).unwrap_or(line.len());
    let stamp = &line[..end];
    if end <= 40
        && stamp.last().is_some_and(u8::is_ascii_alphanumeric)
        && stamp
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b".:+-".contains(b))
    {
        &line[(end + 1).min(line.len())..]
    } else {
        line
    }
}

/// `--progress=plain`: `#N name`, then `#N` lines for that vertex
/// (statuses, logs, and one of `CACHED`, `DONE 1.2s`, `ERROR: …`,
/// `CANCELED`), `#N ...` when the printer switches to another vertex, a
/// blank line between blocks. The first line of a block names its vertex
/// (BuildKit's printer writes the name whenever it switches vertex).
#[derive(Debug)]
struct Plain {
    trace: Trace,
    /// `#N` → vertex, for the current build.
    slots: HashMap<u64, usize>,
    /// The vertex of the block being read.
    current: Option<(u64, usize)>,
    /// The highest `#N` of the current build.
    highest: u64,
}

impl Default for Plain {
    fn default() -> Self {
        Plain {
            trace: Trace::new(LogFormat::Plain),
            slots: HashMap::new(),
            current: None,
            highest: 0,
        }
    }
}

/// `#N rest` → `(N, rest)`.
fn vertex_number(line: &[u8]) -> Option<(u64, &[u8])> {
    let rest = line.strip_prefix(b"#")?;
    let sp = memchr::memchr(b' ', rest)?;
    let digits = &rest[..sp];
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some((n, &rest[sp + 1..]))
}

/// Whether a line that starts a block is really a body line of a known
/// vertex (a log whose blank lines were lost, or that starts mid-block).
fn looks_like_body(rest: &[u8]) -> bool {
    rest == b"CACHED"
        || rest == b"CANCELED"
        || rest == b"..."
        || rest == b"DONE"
        || rest.starts_with(b"DONE ")
        || rest.starts_with(b"ERROR")
        || rest.first().is_some_and(u8::is_ascii_digit)
}

fn seconds(text: &[u8]) -> f64 {
    let t = std::str::from_utf8(text).unwrap_or("").trim();
    let t = t.strip_suffix('s').unwrap_or(t);
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => v.min(1e9),
        _ => 0.0,
    }
}

impl Plain {
    fn line(&mut self, line: &[u8]) {
        self.trace.lines += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            self.current = None;
            return;
        }
        let Some((n, rest)) = vertex_number(line) else {
            self.trace.message(line);
            return;
        };
        let rest = rest.strip_suffix(b" ").unwrap_or(rest);
        if let Some((c, idx)) = self.current
            && c == n
        {
            self.body(idx, rest);
            return;
        }
        if let Some(&idx) = self.slots.get(&n)
            && looks_like_body(rest)
        {
            self.current = Some((n, idx));
            self.body(idx, rest);
            return;
        }
        self.header(n, rest);
    }

    fn header(&mut self, n: u64, rest: &[u8]) {
        // buildx's `#0 building with "<builder>" instance using <driver>
        // driver` starts a build and is no vertex.
        let announce = n == 0 && rest.starts_with(b"building with ");
        let starts_build = announce
            || (n == 1
                && rest.starts_with(b"[internal] load build definition")
                && self.highest >= 2);
        if starts_build && !self.slots.is_empty() {
            self.slots.clear();
            self.highest = 0;
            self.trace.builds += 1;
        }
        if announce {
            self.current = None;
            return;
        }
        self.highest = self.highest.max(n);
        let name = String::from_utf8_lossy(rest);
        let idx = match self.slots.get(&n) {
            Some(&i) if self.trace.vertices[i].name == name => i,
            _ => {
                let i = self.trace.push(name.into_owned());
                self.slots.insert(n, i);
                i
            }
        };
        self.current = Some((n, idx));
    }

    fn body(&mut self, idx: usize, rest: &[u8]) {
        let v = &mut self.trace.vertices[idx];
        match rest.first() {
            Some(b'C') if rest == b"CACHED" => {
                v.cached = true;
                if v.state == State::Pending {
                    v.state = State::Done;
                }
                return;
            }
            Some(b'C') if rest == b"CANCELED" => {
                v.state = State::Canceled;
                return;
            }
            Some(b'D') if rest == b"DONE" || rest.starts_with(b"DONE ") => {
                v.state = State::Done;
                v.time_s = seconds(&rest[4..]);
                return;
            }
            Some(b'E') if rest.starts_with(b"ERROR") => {
                let msg = rest[5..].strip_prefix(b":").unwrap_or(&rest[5..]);
                v.fail(&String::from_utf8_lossy(msg));
                return;
            }
            _ => {}
        }
        match v.kind {
            Kind::Import { .. } if import_failure_line(rest) => {
                let msg = String::from_utf8_lossy(rest).into_owned();
                v.fail(&msg);
            }
            Kind::Export(_) if rest.starts_with(b"writing layer ") && rest.ends_with(b" done") => {
                v.layers += 1;
            }
            _ => {}
        }
    }
}

/// `--progress=rawjson`: one `client.SolveStatus` a line (BuildKit
/// `client/graph.go`, written by `progressui`'s rawJSONDisplay with Go's
/// `json.Encoder`): `vertexes` carry `digest`, `name`, `started`,
/// `completed`, `cached`, `error`; `statuses` carry `id`, `vertex`,
/// `completed`; `logs` and `warnings` are not needed here.
#[derive(Debug)]
struct Raw {
    trace: Trace,
    by_digest: HashMap<String, usize>,
    times: Vec<(Option<f64>, Option<f64>)>,
    layers: HashSet<(usize, String)>,
}

impl Default for Raw {
    fn default() -> Self {
        Raw {
            trace: Trace::new(LogFormat::Rawjson),
            by_digest: HashMap::new(),
            times: Vec::new(),
            layers: HashSet::new(),
        }
    }
}

#[derive(Deserialize)]
struct SolveStatus<'a> {
    #[serde(default, borrow)]
    vertexes: Option<Vec<RawVertex<'a>>>,
    #[serde(default, borrow)]
    statuses: Option<Vec<RawStatus<'a>>>,
}

#[derive(Deserialize)]
struct RawVertex<'a> {
    #[serde(default, borrow)]
    digest: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    started: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    completed: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    cached: Option<bool>,
    #[serde(default, borrow)]
    error: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct RawStatus<'a> {
    #[serde(default, borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    vertex: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    completed: Option<std::borrow::Cow<'a, str>>,
}

impl Raw {
    fn line(&mut self, line: &[u8]) {
        self.trace.lines += 1;
        let Some(first) = line.iter().position(|b| !b.is_ascii_whitespace()) else {
            return;
        };
        if line[first] != b'{' {
            self.trace.message(line);
            return;
        }
        let Ok(status) = serde_json::from_slice::<SolveStatus<'_>>(line) else {
            self.trace.unrecognized += 1;
            return;
        };
        for v in status.vertexes.unwrap_or_default() {
            self.vertex(v);
        }
        for s in status.statuses.unwrap_or_default() {
            self.status(s);
        }
    }

    fn slot(&mut self, digest: &str) -> usize {
        if let Some(&i) = self.by_digest.get(digest) {
            return i;
        }
        let i = self.trace.push(String::new());
        self.times.push((None, None));
        self.by_digest.insert(digest.to_string(), i);
        i
    }

    fn vertex(&mut self, rv: RawVertex<'_>) {
        let Some(digest) = rv.digest.as_deref().filter(|d| !d.is_empty()) else {
            return;
        };
        let i = self.slot(digest);
        let v = &mut self.trace.vertices[i];
        if let Some(n) = rv.name.as_deref() {
            v.set_name(n);
        }
        if rv.cached == Some(true) {
            v.cached = true;
        }
        let (started, completed) = &mut self.times[i];
        if let Some(t) = rv.started.as_deref().and_then(crate::time::parse_rfc3339) {
            *started = Some(started.map_or(t, |s| s.min(t)));
        }
        if let Some(t) = rv.completed.as_deref().and_then(crate::time::parse_rfc3339) {
            *completed = Some(completed.map_or(t, |c| c.max(t)));
            if v.state == State::Pending {
                v.state = State::Done;
            }
        }
        if let Some(e) = rv.error.as_deref().filter(|e| !e.is_empty()) {
            v.fail(e);
        }
    }

    fn status(&mut self, s: RawStatus<'_>) {
        let (Some(id), Some(vertex), Some(_)) = (s.id, s.vertex, s.completed) else {
            return;
        };
        if !id.starts_with("writing layer ") {
            return;
        }
        let Some(&i) = self.by_digest.get(vertex.as_ref()) else {
            return;
        };
        if matches!(self.trace.vertices[i].kind, Kind::Export(_))
            && self.layers.insert((i, id.into_owned()))
        {
            self.trace.vertices[i].layers += 1;
        }
    }

    fn finish(mut self) -> Trace {
        for (v, (s, c)) in self.trace.vertices.iter_mut().zip(&self.times) {
            if let (Some(s), Some(c)) = (s, c) {
                let d = c - s;
                v.time_s = if d.is_finite() && d > 0.0 {
                    d.min(1e9)
                } else {
                    0.0
                };
            }
        }
        self.trace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_does_not_matter() {
        let log = b"#1 [internal] load build definition from Dockerfile\n#1 DONE 0.0s\n\n#5 [2/3] RUN echo hi\n#5 0.201 hi\n#5 DONE 0.3s\n\n#6 [3/3] COPY a /a\n#6 CACHED";
        let whole = parse(log);
        for size in 1..log.len() {
            let mut p = Parser::new();
            for c in log.chunks(size) {
                p.feed(c);
            }
            let t = p.finish();
            assert_eq!(t.vertices.len(), whole.vertices.len(), "chunk {size}");
            assert!(t.vertices[2].cached, "chunk {size}");
            assert_eq!(t.lines, whole.lines);
        }
    }

    #[test]
    fn timestamps_are_stripped() {
        assert_eq!(
            strip_timestamp(b"2026-06-10T14:12:42.1234567Z #5 CACHED"),
            b"#5 CACHED"
        );
        assert_eq!(strip_timestamp(b"#5 CACHED"), b"#5 CACHED");
        assert_eq!(strip_timestamp(b"2026-06-10 x"), b"2026-06-10 x");
        assert_eq!(strip_timestamp(b"2026-06-10T14:12:42.1234567Z"), b"");
    }

    #[test]
    fn long_lines_are_capped() {
        let mut p = Parser::new();
        p.feed(b"#1 ");
        let big = vec![b'x'; MAX_LINE + 100];
        p.feed(&big);
        p.feed(b"\n#1 DONE 1.0s\n");
        let t = p.finish();
        assert_eq!(t.vertices.len(), 1);
        assert_eq!(t.vertices[0].name.len(), MAX_LINE - 3);
        assert_eq!(t.vertices[0].state, State::Done);
    }

    #[test]
    fn numbers() {
        assert_eq!(vertex_number(b"#12 DONE"), Some((12, &b"DONE"[..])));
        assert_eq!(vertex_number(b"#99999999999999999999 DONE"), None);
        assert_eq!(vertex_number(b"# DONE"), None);
        assert_eq!(vertex_number(b"#12"), None);
        assert_eq!(seconds(b" 1.5s"), 1.5);
        assert_eq!(seconds(b" 1e400s"), 0.0);
        assert_eq!(seconds(b" NaNs"), 0.0);
        assert_eq!(seconds(b" -3s"), 0.0);
    }
}
