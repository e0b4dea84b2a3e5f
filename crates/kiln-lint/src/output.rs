//! The output formats of `kiln lint`: text for people, the JSON contract,
//! and SARIF 2.1.0 for code-scanning tools.
//!
//! The JSON contract (`--format json`), one object:
//!
//! ```json
//! {"findings": [{"rule": "cache-from-self", "severity": "error|warning|note",
//!                "file": "path/as/shown", "line": 1, "column": 1,
//!                "message": "...", "why": "...", "fix": "..."}],
//!  "summary": {"files_checked": 3, "errors": 1, "warnings": 0, "notes": 0,
//!              "set_aside": 16,
//!              "bake_files": [{"files": ["docker-bake.hcl"], "judged_as": "kiln|buildx",
//!                              "because": "no workflow of its repository runs bake on it"}]}}
//! ```
//!
//! Findings are sorted by file, line, column and rule; `line`/`column` are
//! 1-based, columns count characters. `set_aside` (findings kiln's cache
//! policy makes moot, not in `findings`) is left out when 0, `bake_files`
//! (how each bake file set was judged, see [`crate::view`]) when no bake
//! file was read.

use serde::Serialize;
use serde_json::{Value, json};

use crate::rules::{RULES, doc_path};
use crate::view::{BakeSet, Judged};
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
pub struct JsonSummary<'a> {
    pub files_checked: usize,
    pub errors: usize,
    pub warnings: usize,
    pub notes: usize,
    /// Findings set aside on bake files judged as kiln builds them.
    #[serde(skip_serializing_if = "is_zero")]
    pub set_aside: usize,
    /// How each bake file set was judged.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub bake_files: &'a [BakeSet],
}

// serde's `skip_serializing_if` passes a reference.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    pub findings: Vec<JsonFinding<'a>>,
    pub summary: JsonSummary<'a>,
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

fn summary(r: &Report) -> JsonSummary<'_> {
    let (errors, warnings, notes) = r.counts();
    JsonSummary {
        files_checked: r.files_checked,
        errors,
        warnings,
        notes,
        set_aside: r.set_aside.len(),
        bake_files: &r.bake,
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

/// What the summary line adds when judging bake files the other way would
/// report differently: the findings set aside on bake files judged as kiln
/// builds them (`--buildx` reports them), and the reported ones on bake
/// files judged as `docker buildx bake` builds them (`--kiln` sets them
/// aside). Empty when neither exists.
#[must_use]
pub fn view_summary(r: &Report) -> String {
    let mut out = String::new();
    let aside = r.set_aside.len();
    if aside > 0 {
        let files: Vec<&str> = r
            .bake
            .iter()
            .filter(|b| b.judged == Judged::Kiln)
            .filter(|b| r.set_aside.iter().any(|f| b.files.contains(&f.file)))
            .filter_map(|b| b.files.first().map(String::as_str))
            .collect();
        let because = if r.bake.iter().any(|b| b.because == "--kiln") {
            "--kiln".to_string()
        } else {
            format!("no workflow runs bake on {}", files.join(", "))
        };
        out.push_str(&format!(
            "; {} set aside: bake files judged as kiln builds them ({because}), and kiln applies \
             its cache policy itself; `kiln lint --buildx` reports them",
            plural(aside, "cache finding"),
        ));
    }
    let reported = r.policy_findings();
    if reported > 0 {
        let forced = r.bake.iter().any(|b| b.because == "--buildx");
        out.push_str(&format!(
            "; {} on bake files judged as `docker buildx bake` builds them ({}); \
             `kiln lint --kiln` if kiln builds them",
            plural(reported, "cache finding"),
            if forced {
                "--buildx"
            } else {
                "a workflow runs bake on them"
            },
        ));
    }
    out
}

/// Text: findings grouped by file (`file:line:col: severity[rule] message`,
/// then `why:` and `fix:`), then a summary line (which says how to judge
/// bake files the other way when that would report differently, see
/// [`view_summary`]).
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
            "no findings ({} checked){}\n",
            plural(s.files_checked, "file"),
            view_summary(r)
        ));
        return out;
    }
    out.push('\n');
    out.push_str(&format!(
        "{}, {}, {} in {} ({} checked){}\n",
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
        view_summary(r),
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
