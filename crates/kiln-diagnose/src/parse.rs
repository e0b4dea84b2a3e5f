//! Reading a log: split into lines as bytes arrive, detect the format from
//! the first non-blank line, and feed each line to the plain or the rawjson
//! reader. Memory stays bounded: one partial line (capped at [`MAX_LINE`]),
//! for rawjson one partial JSON object (capped at [`MAX_OBJECT`]), plus one
//! record per vertex.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use serde::Deserialize;

use crate::contract::LogFormat;
use crate::trace::{INLINE_CACHE, Kind, State, Trace, import_failure_line};

/// The longest line kept; the rest of a longer line is dropped (a rawjson
/// line that long no longer parses and counts as unrecognized).
pub const MAX_LINE: usize = 4 << 20;

/// The largest rawjson object kept, over all its lines. A larger object is
/// skipped to its end, unparsed, and counts as one unrecognized line (as a
/// rawjson line over [`MAX_LINE`] does).
pub const MAX_OBJECT: usize = 4 << 20;

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
            Kind::Other => {
                if let Some(t) = inline_cache_status(rest) {
                    v.saw_inline_cache(t);
                }
            }
            _ => {}
        }
    }
}

/// `preparing layers for inline cache` (started) or `… 0.1s done`
/// (finished, with its time): `Some(seconds)`, 0 while unfinished.
fn inline_cache_status(rest: &[u8]) -> Option<f64> {
    let tail = rest.strip_prefix(INLINE_CACHE.as_bytes())?;
    if tail.is_empty() {
        return Some(0.0);
    }
    if tail[0] != b' ' {
        return None;
    }
    Some(tail.strip_suffix(b" done").map_or(0.0, seconds))
}

/// `--progress=rawjson`: a stream of `client.SolveStatus` objects (BuildKit
/// `client/graph.go`): `vertexes` carry `digest`, `name`, `started`,
/// `completed`, `cached`, `error`; `statuses` carry `id`, `vertex`, `name`,
/// `started`, `completed`; `logs` and `warnings` are not needed here.
///
/// Two layouts are read, mixed freely: one object a line (Go's
/// `json.Encoder`), and objects indented over many lines, one after
/// another (buildx ≥ 0.13's `rawJSONDisplay`, `SetIndent("", "  ")`). An
/// object ends where its braces balance (braces inside strings do not
/// count); JSON strings never span lines (Go escapes control characters),
/// so the string state starts afresh on every line. While an object is
/// open, a line starting in column 0 ends it: `}` closes it (the indented
/// layout's last line), anything else means the object was cut (it counts
/// as one unrecognized line) and the line is read afresh. Outside an
/// object, a line not starting with `{` is text — buildx prints its error
/// (`Dockerfile:3`, an excerpt, `ERROR: failed to solve: …`) after the
/// stream — and is read as a message like a plain log's non-progress lines.
#[derive(Debug)]
struct Raw {
    trace: Trace,
    by_digest: HashMap<String, usize>,
    times: Vec<(Option<f64>, Option<f64>)>,
    layers: HashSet<(usize, String)>,
    /// The open object's bytes so far (its lines joined by `\n`).
    partial: Vec<u8>,
    /// Unbalanced `{` of the open object; 0 outside an object.
    depth: usize,
    /// The open object outgrew [`MAX_OBJECT`]: it is skipped to its end.
    oversized: bool,
}

impl Default for Raw {
    fn default() -> Self {
        Raw {
            trace: Trace::new(LogFormat::Rawjson),
            by_digest: HashMap::new(),
            times: Vec::new(),
            layers: HashSet::new(),
            partial: Vec::new(),
            depth: 0,
            oversized: false,
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
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    started: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    completed: Option<std::borrow::Cow<'a, str>>,
}

impl Raw {
    fn line(&mut self, line: &[u8]) {
        self.trace.lines += 1;
        let mut at = 0;
        if self.depth > 0 {
            match line.first() {
                // The indented layout's closing line: whatever the count
                // says, this ends the object.
                Some(b'}') => self.depth = 1,
                Some(b) if !b.is_ascii_whitespace() => self.drop_object(),
                _ => {}
            }
        }
        if self.depth > 0 {
            match self.close(line, 0) {
                None => {
                    self.keep(line);
                    self.keep(b"\n");
                    return;
                }
                Some(end) => {
                    self.keep(&line[..end]);
                    self.end_object();
                    at = end;
                }
            }
        }
        loop {
            let rest = &line[at..];
            let Some(first) = rest.iter().position(|b| !b.is_ascii_whitespace()) else {
                return;
            };
            if rest[first] != b'{' {
                self.trace.message(&rest[first..]);
                return;
            }
            let start = at + first;
            match self.close(line, start) {
                // A whole object in the line: parsed in place.
                Some(end) => {
                    self.object(&line[start..end]);
                    at = end;
                }
                None => {
                    self.keep(&line[start..]);
                    self.keep(b"\n");
                    return;
                }
            }
        }
    }

    /// Follows the braces of the open object through `line` from `at`
    /// (which, outside an object, is its `{`): the index just past the
    /// `}` that closes it, or `None` if it stays open.
    fn close(&mut self, line: &[u8], mut at: usize) -> Option<usize> {
        let mut in_string = false;
        while at < line.len() {
            if in_string {
                let i = at + memchr::memchr2(b'"', b'\\', &line[at..])?;
                in_string = line[i] == b'\\';
                // A backslash skips the byte it escapes; the string goes on.
                at = i + if in_string { 2 } else { 1 };
                continue;
            }
            let i = at + memchr::memchr3(b'"', b'{', b'}', &line[at..])?;
            at = i + 1;
            match line[i] {
                b'"' => in_string = true,
                b'{' => self.depth = self.depth.saturating_add(1),
                _ => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(at);
                    }
                }
            }
        }
        None
    }

    /// Adds bytes of the open object, up to [`MAX_OBJECT`].
    fn keep(&mut self, bytes: &[u8]) {
        if self.oversized {
            return;
        }
        if self.partial.len() + bytes.len() > MAX_OBJECT {
            self.oversized = true;
            self.partial = Vec::new();
            return;
        }
        self.partial.extend_from_slice(bytes);
    }

    /// The open object closed: parse what was kept.
    fn end_object(&mut self) {
        let object = std::mem::take(&mut self.partial);
        if std::mem::take(&mut self.oversized) {
            self.trace.unrecognized += 1;
        } else {
            self.object(&object);
        }
        self.partial = object;
        self.partial.clear();
        self.depth = 0;
    }

    /// The open object will not close (cut, or the log ended): one
    /// unrecognized line.
    fn drop_object(&mut self) {
        self.trace.unrecognized += 1;
        self.partial.clear();
        self.oversized = false;
        self.depth = 0;
    }

    fn object(&mut self, bytes: &[u8]) {
        let Ok(status) = serde_json::from_slice::<SolveStatus<'_>>(bytes) else {
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
        let (Some(id), Some(vertex)) = (s.id.as_deref(), s.vertex.as_deref()) else {
            return;
        };
        let Some(&i) = self.by_digest.get(vertex) else {
            return;
        };
        let v = &mut self.trace.vertices[i];
        if id == INLINE_CACHE || s.name.as_deref() == Some(INLINE_CACHE) {
            let time = |t: &Option<std::borrow::Cow<'_, str>>| {
                t.as_deref().and_then(crate::time::parse_rfc3339)
            };
            let t = match (time(&s.started), time(&s.completed)) {
                (Some(a), Some(b)) => b - a,
                _ => 0.0,
            };
            v.saw_inline_cache(t);
            return;
        }
        if s.completed.is_some()
            && id.starts_with("writing layer ")
            && matches!(v.kind, Kind::Export(_))
            && self.layers.insert((i, id.to_string()))
        {
            v.layers += 1;
        }
    }

    fn finish(mut self) -> Trace {
        if self.depth > 0 {
            // The log ends inside an object.
            self.drop_object();
        }
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

    /// A vertex update as buildx 0.13 writes it: indented over many lines.
    fn indented(digest: &str, name: &str, extra: &str) -> String {
        format!(
            "{{\n  \"vertexes\": [\n    {{\n      \"digest\": \"{digest}\",\n      \"name\": \"{name}\"{extra}\n    }}\n  ]\n}}\n"
        )
    }

    #[test]
    fn rawjson_indented_and_one_a_line_mixed_with_text() {
        let mut log = String::from("\n");
        // The first non-blank line is just `{`.
        log += &indented("d1", "[a 2/3] RUN x", ",\n      \"cached\": true");
        log += "{\"vertexes\":[{\"digest\":\"d2\",\"name\":\"[a 3/3] RUN y\"}]}\n";
        log += "some text between objects\n";
        // Braces in strings do not count; two objects on one line.
        log += &indented("d3", "[b 2/2] RUN echo '}{' \\\"}\\\"", "");
        log += "{\"vertexes\":[{\"digest\":\"d4\",\"name\":\"[c 2/2] RUN z\"}]} {\"vertexes\":[{\"digest\":\"d2\",\"completed\":\"2026-06-10T14:12:42Z\"}]}\n";
        log += "Dockerfile:3\nERROR: failed to solve: process did not complete successfully\n";
        let t = parse(log.as_bytes());
        assert_eq!(t.format, LogFormat::Rawjson);
        let names: Vec<&str> = t.vertices.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "[a 2/3] RUN x",
                "[a 3/3] RUN y",
                "[b 2/2] RUN echo '}{' \"}\"",
                "[c 2/2] RUN z"
            ]
        );
        assert!(t.vertices[0].cached);
        assert_eq!(t.vertices[1].state, State::Done);
        assert_eq!(t.unrecognized, 3, "the three text lines");
        assert_eq!(t.lines, log.lines().count() as u64);
    }

    #[test]
    fn rawjson_cut_object_is_one_unrecognized_line() {
        let whole = indented("d1", "[a 2/2] RUN x", "");
        let cut = &whole[..whole.len() / 2];
        // Cut, then the next object at column 0; cut, then text; cut at
        // the end of the log.
        let log = format!("{cut}\n{whole}{cut}\nERROR: x\n{cut}");
        let t = parse(log.as_bytes());
        assert_eq!(t.vertices.len(), 1);
        assert_eq!(t.unrecognized, 4, "three cut objects and the text");
        // A closing brace in column 0 ends even an object whose braces do
        // not balance: what follows is read afresh.
        let log = format!("{{\n  \"vertexes\": [{{\n}}\n{whole}");
        let t = parse(log.as_bytes());
        assert_eq!((t.vertices.len(), t.unrecognized), (1, 1));
    }

    #[test]
    fn rawjson_oversized_objects_are_skipped_to_their_end() {
        let mut p = Parser::new();
        p.feed(b"{\n  \"vertexes\": [\n");
        let line = format!("    {{\"digest\": \"{}\"}},\n", "x".repeat(MAX_LINE / 2));
        for _ in 0..(MAX_OBJECT / line.len() + 2) {
            p.feed(line.as_bytes());
        }
        p.feed(b"    {\"digest\": \"d0\", \"name\": \"[a 1/2] RUN lost\"}\n  ]\n}\n");
        p.feed(indented("d1", "[a 2/2] RUN x", "").as_bytes());
        let t = p.finish();
        assert_eq!(t.unrecognized, 1, "the oversized object");
        let names: Vec<&str> = t.vertices.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["[a 2/2] RUN x"]);
    }

    #[test]
    fn rawjson_chunking_does_not_matter() {
        let log = format!(
            "{}{}{{\"vertexes\":[{{\"digest\":\"d2\",\"name\":\"[a 3/3] RUN y\",\"cached\":true}}]}}\nERROR: x\n",
            indented("d1", "[a 2/3] RUN x", ""),
            indented(
                "d1",
                "[a 2/3] RUN x",
                ",\n      \"completed\": \"2026-06-10T14:12:42Z\""
            )
        );
        let whole = parse(log.as_bytes());
        assert_eq!(whole.vertices.len(), 2);
        for size in 1..log.len() {
            let mut p = Parser::new();
            for c in log.as_bytes().chunks(size) {
                p.feed(c);
            }
            let t = p.finish();
            assert_eq!(t.vertices.len(), 2, "chunk {size}");
            assert_eq!(t.vertices[0].state, State::Done, "chunk {size}");
            assert!(t.vertices[1].cached, "chunk {size}");
            assert_eq!((t.lines, t.unrecognized), (whole.lines, 1), "chunk {size}");
        }
    }

    #[test]
    fn inline_cache_statuses() {
        assert_eq!(
            inline_cache_status(b"preparing layers for inline cache"),
            Some(0.0)
        );
        assert_eq!(
            inline_cache_status(b"preparing layers for inline cache 0.4s done"),
            Some(0.4)
        );
        assert_eq!(
            inline_cache_status(b"preparing layers for inline cache done"),
            Some(0.0)
        );
        assert_eq!(
            inline_cache_status(b"preparing layers for inline caches"),
            None
        );
        assert_eq!(inline_cache_status(b"exporting layers 0.1s done"), None);
        // rawjson: the status under its vertex, by `id` or by `name`.
        for key in ["\"id\"", "\"id\":\"x\",\"name\""] {
            let log = format!(
                "{}{{\"statuses\":[{{{key}:\"preparing layers for inline cache\",\"vertex\":\"e\",\"started\":\"2026-06-10T14:12:42Z\",\"completed\":\"2026-06-10T14:12:42.5Z\"}}]}}\n",
                indented("e", "exporting to image", "")
            );
            let t = parse(log.as_bytes());
            assert_eq!(t.vertices[0].inline_cache, Some(0.5), "{key}");
        }
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
