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

/// The reporter `--progress` asks for (`auto`: the live view on a
/// terminal, plain lines otherwise), behind the compiler-cache counter.
/// `lanes` are the nodes and their build slots, `expected_s` the planned
/// time of each target, for the live view.
/// Progress that says nothing (`--progress quiet|none`): failures and
/// the summary are still written after the run.
struct Silent;

impl Reporter for Silent {
    fn event(&self, _: &kiln_engine::Event) {}
}

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
