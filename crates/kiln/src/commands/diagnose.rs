//! `kiln diagnose [LOG|-] [--format text|json] [--inputs FILE]`: reads
//! BuildKit progress and says whether the layer cache worked
//! (docs/diagnose.md). The analysis is `kiln_diagnose`; this file reads the
//! log (streamed, never held whole) and the manifests, and writes the report.
//!
//! Exit codes: 0 when the log was read, whatever the verdict (the verdict is
//! data); 2 when the log or the inputs cannot be read or hold no BuildKit
//! progress.
//!
//! Must never: ask the engine, a registry or the record store (the log and
//! the manifests given are all it reads), or fail because the cache did
//! not work: the verdict is data.

use std::io::Write;

use crate::cli::Format;
use crate::error::CliError;

pub struct DiagnoseSettings {
    /// `None`: stdin.
    pub log: Option<String>,
    pub format: Format,
    pub inputs: Option<String>,
}

pub fn run(s: DiagnoseSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let inputs = match &s.inputs {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::usage(format!("cannot read --inputs {path}: {e}")))?;
            Some(kiln_diagnose::Inputs::from_json(&text).map_err(|e| {
                CliError::usage(format!("--inputs {path}: {e}")).with_hint(
                    "give the input manifests (kiln's record payloads) of the previous build and \
                     of this one as {\"old\": …, \"new\": …} or [old, new]; see docs/diagnose.md",
                )
            })?)
        }
    };
    let name = s.log.as_deref().unwrap_or("stdin");
    let mut parser = kiln_diagnose::Parser::new();
    let read = match &s.log {
        Some(path) => std::fs::File::open(path).and_then(|mut f| parser.read_from(&mut f)),
        None => parser.read_from(&mut std::io::stdin().lock()),
    };
    read.map_err(|e| CliError::usage(format!("cannot read {name}: {e}")))?;
    let trace = parser.finish();
    let report = kiln_diagnose::diagnose(&trace, inputs.as_ref()).map_err(|e| {
        CliError::usage(format!("{name}: {e}")).with_hint(
            "save the build's output with `docker build --progress=plain … 2>&1 | tee build.log` \
             (or `docker buildx build --progress=rawjson`) and pass that file",
        )
    })?;
    let text = match s.format {
        Format::Json => {
            let mut t =
                serde_json::to_string_pretty(&report).map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => kiln_diagnose::render_text(&report),
    };
    crate::output::write(out, &text)
}
