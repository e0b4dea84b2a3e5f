//! `kiln keys generate NAME [--out FILE]`: a new ed25519 key that signs
//! records (docs/trust.md). The secret goes to a new file only its owner
//! can read; the public key, `NAME:BASE64`, is printed for the runs that
//! are to trust it.
//!
//! Must never: print, log or replace the secret (an existing file is an
//! error).

use std::io::Write;
use std::path::Path;

use crate::error::CliError;

pub fn generate(name: &str, file: Option<&Path>, out: &mut dyn Write) -> Result<(), CliError> {
    let key = kiln_store::trust::SigningKey::generate(name).map_err(CliError::usage)?;
    let default = format!("{name}.key");
    let path = file.unwrap_or(Path::new(&default));
    key.write_new(path).map_err(CliError::usage)?;
    eprintln!(
        "wrote the secret key {name} to {} (readable by you only): give it to the jobs that write records with --signing-key or KILN_SIGNING_KEY, and keep it out of pull requests' jobs",
        path.display()
    );
    crate::output::write(out, &format!("{}\n", key.public()))
}
