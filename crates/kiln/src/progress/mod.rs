//! Progress on stderr while a build runs: the ways of showing the
//! run's events — plain lines ([`plain`], BuildKit's whole log with `raw`), JSON objects ([`json`]), the
//! live view on a terminal ([`terminal`], drawing `crate::live`), or nothing
//! (`--progress quiet|none`) — each
//! behind the compiler-cache counter ([`stats`]), which reads sccache's
//! counters from the build logs as the events pass.
//!
//! Must never: write to stdout (that is the summary's), or decide anything
//! about the run.

pub mod json;
pub mod plain;
pub mod stats;
pub mod terminal;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use kiln_engine::Reporter;

use crate::cli::Progress;
pub use stats::StatsReporter;

/// Progress that says nothing (`--progress quiet|none`): failures and
/// the summary are still written after the run.
struct Silent;

impl Reporter for Silent {
    fn event(&self, _: &kiln_engine::Event) {}
}

/// Writes `line` and its newline to `out` in one write: stderr is not
/// buffered, and `writeln!` writes the newline on its own (a second
/// system call per line, and a line another process may split).
fn write_line<W: std::io::Write>(out: &Mutex<W>, mut line: String) {
    if let Ok(mut o) = out.lock() {
        line.push('\n');
        let _ = o.write_all(line.as_bytes());
    }
}

/// The reporter `--progress` asks for (`auto`: the live view on a
/// terminal, plain lines otherwise), behind the compiler-cache counter.
/// `lanes` are the nodes and their build slots, `expected_s` the planned
/// time of each target, for the live view.
pub fn reporter(
    progress: Progress,
    lanes: &[(String, usize)],
    targets: Vec<String>,
    expected_s: HashMap<String, f64>,
) -> Arc<StatsReporter> {
    let total = targets.len();
    let inner: Arc<dyn Reporter> = match progress {
        Progress::Json => Arc::new(json::JsonReporter {
            out: Mutex::new(std::io::stderr()),
        }),
        Progress::Tty | Progress::Auto if std::io::stderr().is_terminal() => {
            Arc::new(terminal::TtyReporter::new(
                crate::live::LaneView::new(lanes, targets, expected_s),
                total,
            ))
        }
        Progress::Quiet | Progress::Nothing => Arc::new(Silent),
        // `Tty` off a terminal and `Rawjson` are refused with the flags
        // (`crate::settings`); plain lines if they ever got here.
        Progress::Plain | Progress::Auto | Progress::Tty | Progress::Rawjson => {
            Arc::new(plain::PlainReporter {
                out: Mutex::new(std::io::stderr()),
                raw: false,
            })
        }
        Progress::Raw => Arc::new(plain::PlainReporter {
            out: Mutex::new(std::io::stderr()),
            raw: true,
        }),
    };
    Arc::new(StatsReporter {
        inner,
        stats: Mutex::new(Default::default()),
    })
}

#[cfg(test)]
mod tests {
    /// Counts the writes it is asked to make.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl std::io::Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_progress_line_is_one_write() {
        let out = std::sync::Mutex::new(Writes::default());
        super::write_line(&out, "{\"event\":\"key\"}".into());
        super::write_line(&out, "[a] up to date".into());
        let writes = out.into_inner().unwrap().0;
        assert_eq!(
            writes,
            [
                b"{\"event\":\"key\"}\n".to_vec(),
                b"[a] up to date\n".to_vec()
            ]
        );
    }
}
