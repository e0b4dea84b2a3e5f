//! The HTML rendering: `template.html` (the page: its styles and the
//! script that draws the Gantt charts, the graph and the details) with the
//! run's JSON embedded in a `<script type="application/json">` element.
//! The page loads nothing: its Content-Security-Policy allows no request.
//!
//! Must never: embed the run's JSON unescaped (it goes through
//! `html_safe_json`, so no string from the run can end the script
//! element), or give the page anything to fetch.

use super::RunReport;

/// The page, with `/*KILN_RUN_DATA*/null` and `KILN_TITLE` to fill.
const TEMPLATE: &str = include_str!("template.html");
const DATA_SLOT: &str = "/*KILN_RUN_DATA*/null";
const TITLE_SLOT: &str = "KILN_TITLE";

/// The report page of `report`.
pub fn render(report: &RunReport) -> String {
    let json = serde_json::to_string(report).unwrap_or_else(|_| "null".into());
    let title = format!("kiln run {} — {}", report.run.id, report.run.project);
    TEMPLATE
        .replacen(TITLE_SLOT, &escape_html(&title), 1)
        .replacen(DATA_SLOT, &crate::output::html_safe_json(&json), 1)
}

/// Text for an HTML element's content.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
