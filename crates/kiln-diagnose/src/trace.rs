//! The vertices a log describes, whichever format it came in, and what each
//! vertex is: a Dockerfile step, a cache import, a cache export, or
//! something else — and, for an image export, whether it carried inline
//! cache.

use crate::contract::{ExportKind, ImportCause, LogFormat};

/// What a vertex is, judged from its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A Dockerfile instruction other than `FROM`: `[stage i/n] RUN …`.
    Step {
        /// See [`step_name`].
        stage: String,
        index: u32,
        total: u32,
        instruction: String,
    },
    /// `[stage 1/n] FROM …`: not counted (see [`crate::contract::Steps`]).
    From,
    /// `importing cache manifest from REF`.
    Import { reference: String },
    /// `exporting cache…` and the backend-specific names.
    Export(ExportKind),
    /// Internal vertices, image export, metadata lookups. An image export
    /// with [`INLINE_CACHE`] among its statuses also stands for a cache
    /// export ([`Vertex::inline_cache`]).
    Other,
}

/// How far a vertex got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Pending,
    Done,
    Error(String),
    Canceled,
}

/// One vertex, merged over every line or update that named it.
#[derive(Clone, Debug)]
pub(crate) struct Vertex {
    pub name: String,
    pub kind: Kind,
    pub cached: bool,
    pub state: State,
    /// Seconds (plain: `DONE 1.2s`; rawjson: completed − started).
    pub time_s: f64,
    /// Finished `writing layer …` sub-steps (exports).
    pub layers: u64,
    /// The vertex showed the status [`INLINE_CACHE`] (BuildKit ≥ 0.12 writes
    /// inline cache inside `exporting to image`, with no vertex of its own):
    /// the status's time in seconds, 0 until it finished.
    pub inline_cache: Option<f64>,
}

impl Vertex {
    pub fn new(name: String) -> Self {
        let kind = classify(&name);
        Vertex {
            name,
            kind,
            cached: false,
            state: State::Pending,
            time_s: 0.0,
            layers: 0,
            inline_cache: None,
        }
    }

    /// Records the [`INLINE_CACHE`] status, with its time once it finished.
    pub fn saw_inline_cache(&mut self, time_s: f64) {
        let t = if time_s.is_finite() && time_s > 0.0 {
            time_s.min(1e9)
        } else {
            0.0
        };
        self.inline_cache = Some(self.inline_cache.map_or(t, |s| s.max(t)));
    }

    /// Gives a vertex first seen without a name (rawjson) its name.
    pub fn set_name(&mut self, name: &str) {
        if self.name.is_empty() && !name.is_empty() {
            self.name = name.to_string();
            self.kind = classify(name);
        }
    }

    /// Records an error message; a cancellation is not a failure.
    pub fn fail(&mut self, message: &str) {
        let m = message.trim();
        self.state = if m.ends_with("context canceled") || m == "CANCELED" {
            State::Canceled
        } else if m.is_empty() {
            State::Error("failed".into())
        } else {
            State::Error(m.to_string())
        };
    }
}

/// An import failure reported outside any vertex: the client's
/// `WARNING: local cache import at PATH not found …`, or a
/// `failed to configure registry cache importer: REF: …` message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Notice {
    pub reference: String,
    pub error: String,
}

/// Everything read from one log.
#[derive(Clone, Debug)]
pub struct Trace {
    pub(crate) format: LogFormat,
    pub(crate) vertices: Vec<Vertex>,
    pub(crate) notices: Vec<Notice>,
    pub(crate) lines: u64,
    pub(crate) unrecognized: u64,
    pub(crate) builds: u32,
}

impl Trace {
    pub(crate) fn new(format: LogFormat) -> Self {
        Trace {
            format,
            vertices: Vec::new(),
            notices: Vec::new(),
            lines: 0,
            unrecognized: 0,
            builds: 0,
        }
    }

    /// Whether the log held any BuildKit vertex at all.
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    /// Lines read.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Adds a vertex and returns its index.
    pub(crate) fn push(&mut self, name: String) -> usize {
        if self.builds == 0 {
            self.builds = 1;
        }
        self.vertices.push(Vertex::new(name));
        self.vertices.len() - 1
    }

    /// A line that was not progress: keeps the import failures it reports.
    pub(crate) fn message(&mut self, line: &[u8]) {
        if let Some(n) = notice(line) {
            self.notices.push(n);
        } else if !line.iter().all(u8::is_ascii_whitespace) {
            self.unrecognized += 1;
        }
    }
}

const IMPORT_PREFIX: &str = "importing cache manifest from ";
/// What BuildKit ≥ 0.12 shows while it prepares inline cache
/// (`runInlineCacheExporter`'s `progress.OneOff`): a status of the image
/// export's vertex (or, in some logs, a vertex of its own). The name of the
/// cache export kiln reports for it.
pub(crate) const INLINE_CACHE: &str = "preparing layers for inline cache";
const IMPORTER_FAILED: &[u8] = b"failed to configure registry cache importer";
const LOCAL_IMPORT_WARNING: &[u8] = b"WARNING: local cache import at ";

/// The parts of a step's vertex name: `[linux/amd64 build 2/5] RUN make`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StepName<'a> {
    /// The stage as BuildKit prints it, `stage-0` standing in for a missing
    /// name (a single-stage Dockerfile): `build`, `stage-2`,
    /// `linux/amd64 build`, `linux/amd64 stage-0`.
    pub stage: String,
    pub index: u32,
    pub total: u32,
    /// After the bracket: `RUN make`.
    pub instruction: &'a str,
}

/// Parses a Dockerfile step's vertex name; `None` for other vertices.
///
/// BuildKit's `prefixCommand` writes `[`, the platform when several are
/// built, the stage name (none when the Dockerfile has one stage), then
/// `i/n` with `i` padded to the width of `n` (`[builder  7/11]`), `] ` and the
/// instruction. The same rule as `kiln_engine::steps::is_step`, which this
/// crate cannot depend on (it would pull the engine driver into a pure
/// crate); kept in step with it by `tests/names.rs`.
pub(crate) fn step_name(name: &str) -> Option<StepName<'_>> {
    let rest = name.strip_prefix('[')?;
    let (inside, after) = rest.split_once(']')?;
    let inside = inside.trim_end();
    let (label, counter) = match inside.rsplit_once(' ') {
        Some((l, c)) => (l.trim(), c),
        None => ("", inside),
    };
    let (a, b) = counter.split_once('/')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    let index = a.parse().ok()?;
    let total = b.parse().ok()?;
    let named = label
        .rsplit(' ')
        .next()
        .is_some_and(|last| !last.is_empty() && !last.contains('/'));
    let stage = match (label.is_empty(), named) {
        (true, _) => "stage-0".to_string(),
        (false, true) => label.to_string(),
        (false, false) => format!("{label} stage-0"),
    };
    Some(StepName {
        stage,
        index,
        total,
        instruction: after.trim_start(),
    })
}

fn is_from(instruction: &str) -> bool {
    instruction
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("FROM "))
}

/// What a vertex is, from its name.
pub(crate) fn classify(name: &str) -> Kind {
    if let Some(s) = step_name(name) {
        if is_from(s.instruction) {
            return Kind::From;
        }
        return Kind::Step {
            stage: s.stage,
            index: s.index,
            total: s.total,
            instruction: s.instruction.to_string(),
        };
    }
    if let Some(r) = name.strip_prefix(IMPORT_PREFIX) {
        return Kind::Import {
            reference: r.trim().to_string(),
        };
    }
    let export = match name {
        "exporting cache to registry" => Some(ExportKind::Registry),
        "exporting cache to client directory" => Some(ExportKind::Local),
        "exporting to GitHub Actions Cache" => Some(ExportKind::Gha),
        "exporting cache to Amazon S3" => Some(ExportKind::S3),
        "exporting cache to Azure Blob Storage" => Some(ExportKind::Azblob),
        "exporting inline cache" | INLINE_CACHE => Some(ExportKind::Inline),
        "exporting content cache" => Some(ExportKind::Unspecified),
        n if n.starts_with("exporting cache") => Some(ExportKind::Unspecified),
        _ => None,
    };
    export.map_or(Kind::Other, Kind::Export)
}

/// An import failure stated in a message line, if the line is one.
fn notice(line: &[u8]) -> Option<Notice> {
    if let Some(at) = memchr::memmem::find(line, LOCAL_IMPORT_WARNING) {
        let text = String::from_utf8_lossy(&line[at..]).into_owned();
        let rest = &text[LOCAL_IMPORT_WARNING.len()..];
        let reference = rest
            .split_once(" not found")
            .or_else(|| rest.split_once(' '))
            .map_or(rest, |(p, _)| p)
            .to_string();
        return Some(Notice {
            reference,
            error: text.trim_end().to_string(),
        });
    }
    let at = memchr::memmem::find(line, IMPORTER_FAILED)?;
    let text = String::from_utf8_lossy(&line[at..]).into_owned();
    // `failed to configure registry cache importer: REF: not found`
    let reference = text[IMPORTER_FAILED.len()..]
        .trim_start_matches(':')
        .trim()
        .split(": ")
        .next()
        .unwrap_or("")
        .to_string();
    Some(Notice {
        reference,
        error: text.trim_end().to_string(),
    })
}

/// Whether a log line of an import vertex says the import failed.
pub(crate) fn import_failure_line(line: &[u8]) -> bool {
    memchr::memmem::find(line, IMPORTER_FAILED).is_some()
}

/// Why an import failed, from its message.
pub(crate) fn import_cause(error: &str) -> ImportCause {
    let e = error.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| e.contains(w));
    if has(&["too large"]) {
        ImportCause::TooLarge
    } else if has(&["not found", "404", "manifest unknown", "does not exist"]) {
        ImportCause::NotFound
    } else if has(&[
        "401",
        "403",
        "unauthorized",
        "denied",
        "authorization",
        "forbidden",
    ]) {
        ImportCause::Unauthorized
    } else if has(&[
        "connection refused",
        "no such host",
        "timeout",
        "timed out",
        "dial tcp",
        "network is unreachable",
        "tls:",
    ]) {
        ImportCause::Unreachable
    } else {
        ImportCause::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names() {
        let s = step_name("[build 2/4] COPY src /src").unwrap();
        assert_eq!((s.stage.as_str(), s.index, s.total), ("build", 2, 4));
        assert_eq!(s.instruction, "COPY src /src");
        assert_eq!(step_name("[2/3] RUN x").unwrap().stage, "stage-0");
        assert_eq!(step_name("[ 1/11] FROM x").unwrap().stage, "stage-0");
        let s = step_name("[builder  7/11] COPY a b").unwrap();
        assert_eq!((s.stage.as_str(), s.index), ("builder", 7));
        assert_eq!(
            step_name("[linux/amd64 build 2/5] RUN make").unwrap().stage,
            "linux/amd64 build"
        );
        assert_eq!(
            step_name("[linux/arm64 3/5] RUN make").unwrap().stage,
            "linux/arm64 stage-0"
        );
        assert!(step_name("[internal] load build definition from Dockerfile").is_none());
        assert!(step_name("[a/b] RUN x").is_none());
        assert!(step_name("[99999999999/1] RUN x").is_none());
        assert!(step_name("exporting to image").is_none());
    }

    #[test]
    fn kinds() {
        assert_eq!(classify("[base 1/3] FROM docker.io/x"), Kind::From);
        assert!(matches!(
            classify("[base 2/3] RUN make"),
            Kind::Step { index: 2, .. }
        ));
        assert_eq!(
            classify("importing cache manifest from r/app:cache"),
            Kind::Import {
                reference: "r/app:cache".into()
            }
        );
        assert_eq!(
            classify("exporting cache to registry"),
            Kind::Export(ExportKind::Registry)
        );
        assert_eq!(
            classify("exporting cache"),
            Kind::Export(ExportKind::Unspecified)
        );
        assert_eq!(
            classify("preparing layers for inline cache"),
            Kind::Export(ExportKind::Inline)
        );
        assert_eq!(classify("exporting to image"), Kind::Other);
        assert_eq!(classify("[internal] load metadata for x"), Kind::Other);
    }

    #[test]
    fn notices_and_causes() {
        let n = notice(b"#7 ERROR: failed to configure registry cache importer: ghcr.io/o/app:buildcache: not found").unwrap();
        assert_eq!(n.reference, "ghcr.io/o/app:buildcache");
        assert_eq!(import_cause(&n.error), ImportCause::NotFound);
        let n = notice(b"WARNING: local cache import at /tmp/buildx-cache not found due to err: could not read /tmp/buildx-cache/index.json").unwrap();
        assert_eq!(n.reference, "/tmp/buildx-cache");
        assert!(notice(b"Sending build context to Docker daemon").is_none());
        assert_eq!(
            import_cause(
                "unexpected status from HEAD request to https://x/v2/a/manifests/b: 401 Unauthorized"
            ),
            ImportCause::Unauthorized
        );
        assert_eq!(
            import_cause("blob sha256:ab is too large (1618088 > 1048576)"),
            ImportCause::TooLarge
        );
        assert_eq!(
            import_cause(
                "failed to do request: Head \"http://localhost/v2/x\": dial tcp 127.0.0.1:80: connect: connection refused"
            ),
            ImportCause::Unreachable
        );
    }
}
