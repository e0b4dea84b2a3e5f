//! `kiln print`: the same JSON as `docker buildx bake --print`.
//!
//! Must never: add anything of kiln's to the JSON (it must match buildx's
//! byte for byte), or ask the engine, a registry or the record store.

use std::io::Write;

use crate::cli::ListKind;
use crate::error::CliError;
use crate::prepare::{load, resolve};
use crate::settings::BakeSettings;

pub struct PrintSettings {
    pub bake: BakeSettings,
    pub list: Option<ListKind>,
    pub targets: Vec<String>,
}

pub fn run(s: PrintSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let bake = load(&s.bake)?;
    if let Some(kind) = s.list {
        let text = match kind {
            ListKind::Targets => kiln_bake::list_targets(&bake.config),
            ListKind::Variables => kiln_bake::list_variables(&bake.config),
        };
        return crate::output::write(out, &text);
    }
    let mut r = resolve(&bake, &s.bake, &s.targets)?;
    let po = kiln_bake::PrintOptions {
        cwd: s.bake.cwd.clone(),
        source_date_epoch: s.bake.source_date_epoch.clone(),
    };
    kiln_bake::to_build_opts(&mut r, &po).map_err(CliError::from)?;
    let doc = kiln_bake::print_json(&r);
    let text = serde_json::to_string_pretty(&doc).map_err(|e| CliError::env(e.to_string()))?;
    crate::output::write(out, &format!("{}\n", crate::output::html_safe_json(&text)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn html_characters_are_escaped_like_go() {
        assert_eq!(
            crate::output::html_safe_json(r#"{"a": "<b>&"}"#),
            r#"{"a": "\u003cb\u003e\u0026"}"#
        );
        assert_eq!(crate::output::html_safe_json("plain"), "plain");
    }
}
