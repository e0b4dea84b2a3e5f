//! The output formats of `kiln lint`: text for people, the JSON contract,
//! and SARIF 2.1.0 for code-scanning tools.
//!
//! The JSON contract (`--format json`), one object:
//!
//! ```json
//! {"findings": [{"rule": "cache-from-self", "severity": "error|warning|note",
//!                "file": "path/as/shown", "line": 1, "column": 1,
//!                "message": "...", "why": "...", "fix": "..."}],
//!  "summary": {"files_checked": 3, "errors": 1, "warnings": 0, "notes": 0}}
//! ```
//!
//! Findings are sorted by file, line, column and rule; `line`/`column` are
//! 1-based, columns count characters.

use serde::Serialize;
use serde_json::{Value, json};

use crate::rules::{RULES, doc_path};
use crate::{Finding, Report};

/// One finding in the JSON contract.
#[derive(Debug, Serialize)]
pub struct JsonFinding<'a> {
    pub rule: &'a str,
    pub severity: &'a str,
    pub file: &'a str,
    pub line: usize,
    pub column: usize,
    pub message: &'a str,
    pub why: &'a str,
    pub fix: &'a str,
}

/// The counts in the JSON contract.
#[derive(Debug, Serialize)]
pub struct JsonSummary {
    pub files_checked: usize,
    pub errors: usize,
    pub warnings: usize,
    pub notes: usize,
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    pub findings: Vec<JsonFinding<'a>>,
    pub summary: JsonSummary,
}

impl<'a> From<&'a Finding> for JsonFinding<'a> {
    fn from(f: &'a Finding) -> Self {
        let r = f.rule_info();
        JsonFinding {
            rule: f.rule,
            severity: f.severity.as_str(),
            file: &f.file,
            line: f.line,
            column: f.column,
            message: &f.message,
            why: r.why,
            fix: r.fix,
        }
    }
}

fn summary(r: &Report) -> JsonSummary {
    let (errors, warnings, notes) = r.counts();
    JsonSummary {
        files_checked: r.files_checked,
        errors,
        warnings,
        notes,
    }
}

/// The JSON contract, pretty-printed, with a trailing newline.
#[must_use]
pub fn json(r: &Report) -> String {
    let doc = JsonReport {
        findings: r.findings.iter().map(JsonFinding::from).collect(),
        summary: summary(r),
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Text: findings grouped by file (`file:line:col: severity[rule] message`,
/// then `why:` and `fix:`), then a summary line.
#[must_use]
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let mut last_file: Option<&str> = None;
    for f in &r.findings {
        if last_file.is_some_and(|l| l != f.file) {
            out.push('\n');
        }
        last_file = Some(&f.file);
        let info = f.rule_info();
        out.push_str(&format!(
            "{}:{}:{}: {}[{}] {}\n    why: {}\n    fix: {}\n",
            f.file,
            f.line,
            f.column,
            f.severity.as_str(),
            f.rule,
            f.message,
            info.why,
            info.fix
        ));
    }
    let s = summary(r);
    if r.findings.is_empty() {
        out.push_str(&format!(
            "no findings ({} checked)\n",
            plural(s.files_checked, "file")
        ));
        return out;
    }
    out.push('\n');
    out.push_str(&format!(
        "{}, {}, {} in {} ({} checked)\n",
        plural(s.errors, "error"),
        plural(s.warnings, "warning"),
        plural(s.notes, "note"),
        plural(
            r.findings
                .iter()
                .map(|f| &f.file)
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            "file"
        ),
        plural(s.files_checked, "file"),
    ));
    out
}

/// `a-rule-id` → `ARuleId` (SARIF's rule `name`).
fn rule_name(id: &str) -> String {
    id.split('-')
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A path as a SARIF URI reference: relative paths stay relative (to the
/// directory kiln ran in), absolute ones become `file://` URIs.
fn uri(path: &str) -> String {
    let mut out = String::new();
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"/-._~".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// SARIF 2.1.0: one run, the rule table as `tool.driver.rules` (with
/// `helpUri` at the rule's docs page), one result per finding.
#[must_use]
pub fn sarif(r: &Report) -> String {
    let repo = env!("CARGO_PKG_REPOSITORY");
    let rules: Vec<Value> = RULES
        .iter()
        .map(|rule| {
            json!({
                "id": rule.id,
                "name": rule_name(rule.id),
                "shortDescription": {"text": rule.summary},
                "fullDescription": {"text": rule.why},
                "help": {"text": rule.fix},
                "helpUri": format!("{repo}/blob/main/{}", doc_path(rule.id)),
                "defaultConfiguration": {"level": rule.severity.as_str()},
            })
        })
        .collect();
    let results: Vec<Value> = r
        .findings
        .iter()
        .map(|f| {
            let info = f.rule_info();
            json!({
                "ruleId": f.rule,
                "ruleIndex": RULES.iter().position(|x| x.id == f.rule).unwrap_or(0),
                "level": f.severity.as_str(),
                "message": {"text": format!("{} — fix: {}", f.message, info.fix)},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&f.file)},
                        "region": {"startLine": f.line, "startColumn": f.column},
                    }
                }],
            })
        })
        .collect();
    let doc = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kiln",
                "informationUri": repo,
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uris() {
        assert_eq!(rule_name("cache-from-self"), "CacheFromSelf");
        assert_eq!(uri("a b/Dockerfile"), "a%20b/Dockerfile");
        assert_eq!(uri("/x/y"), "file:///x/y");
    }
}
