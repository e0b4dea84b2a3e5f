//! Writing data to stdout: a closed pipe is not an error.

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
