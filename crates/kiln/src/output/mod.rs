//! Writing data to stdout: a closed pipe is not an error.
//!
//! Must never: put a message or a warning on stdout (those go to stderr),
//! or turn a reader that went away into an error.

pub mod metadata;
pub mod summary;

use std::io::Write;

use crate::error::CliError;

/// Writes `text`; a broken pipe ends quietly (the reader went away).
pub fn write(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::env(format!("cannot write output: {e}"))),
    }
}

/// JSON with `<`, `>`, `&`, U+2028 and U+2029 written as `\uXXXX`, as Go's
/// `encoding/json` writes them: `kiln print` stays byte-identical to
/// `docker buildx bake --print`, and JSON embedded in an HTML page can
/// never end its script element. These characters only occur inside JSON
/// strings, so replacing them everywhere keeps the value.
pub fn html_safe_json(s: &str) -> String {
    if !s.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}
