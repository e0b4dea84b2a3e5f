//! Text renderings of a graph (or part of it) for people: mermaid and Graphviz.
//!
//! Both are deterministic: nodes in build order, then edges grouped by dependent in build
//! order, whatever order the subset was given in.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::graph::Graph;

impl Graph {
    /// A mermaid `flowchart TD` of the targets in `subset` and the edges between them
    /// (unknown names are ignored). Node ids are derived from the names but restricted to
    /// `[A-Za-z0-9_]` and prefixed, so any name yields valid mermaid; labels carry the
    /// real name.
    #[must_use]
    pub fn render_mermaid(&self, subset: &[&str]) -> String {
        let marked = self.mark(subset);
        let mut ids = vec![String::new(); self.len()];
        let mut taken = HashSet::new();
        let mut out = String::from("flowchart TD\n");
        for v in self.in_order(&marked) {
            ids[v] = mermaid_id(self.name(v), &mut taken);
            let _ = writeln!(out, "    {}[\"{}\"]", ids[v], mermaid_label(self.name(v)));
        }
        let mut first_edge = true;
        for v in self.in_order(&marked) {
            for dep in self.deps_of(v).filter(|&d| marked[d]) {
                if first_edge {
                    out.push('\n');
                    first_edge = false;
                }
                let _ = writeln!(out, "    {} --> {}", ids[dep], ids[v]);
            }
        }
        out
    }

    /// A Graphviz `digraph` of the targets in `subset` and the edges between them (unknown
    /// names are ignored), with every id quoted and escaped.
    #[must_use]
    pub fn render_dot(&self, subset: &[&str]) -> String {
        let marked = self.mark(subset);
        let mut out = String::from("digraph kiln {\n    rankdir=TB;\n    node [shape=box];\n");
        for v in self.in_order(&marked) {
            let _ = writeln!(out, "    {};", dot_id(self.name(v)));
        }
        for v in self.in_order(&marked) {
            for dep in self.deps_of(v).filter(|&d| marked[d]) {
                let _ = writeln!(
                    out,
                    "    {} -> {};",
                    dot_id(self.name(dep)),
                    dot_id(self.name(v))
                );
            }
        }
        out.push_str("}\n");
        out
    }
}

/// `t_` + the name with every character outside `[A-Za-z0-9]` replaced by `_`, suffixed
/// `_2`, `_3`… when that collides. The prefix keeps ids off mermaid keywords (`end`,
/// `graph`…) and off the `o`/`x` edge-ending letters.
fn mermaid_id(name: &str, taken: &mut HashSet<String>) -> String {
    let base: String = std::iter::once('t')
        .chain(std::iter::once('_'))
        .chain(
            name.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
        )
        .collect();
    let mut id = base.clone();
    let mut n = 2;
    while !taken.insert(id.clone()) {
        id = format!("{base}_{n}");
        n += 1;
    }
    id
}

/// A name made safe inside a quoted mermaid label, using mermaid's `#…;` entity codes.
fn mermaid_label(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A Graphviz quoted id.
fn dot_id(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mermaid_ids_are_safe_and_unique() {
        let mut taken = HashSet::new();
        assert_eq!(mermaid_id("end", &mut taken), "t_end");
        assert_eq!(mermaid_id("a-b", &mut taken), "t_a_b");
        assert_eq!(mermaid_id("a.b", &mut taken), "t_a_b_2");
        assert_eq!(mermaid_id("a_b_2", &mut taken), "t_a_b_2_2");
        assert_eq!(mermaid_id("ünï", &mut taken), "t__n_");
    }

    #[test]
    fn labels_and_dot_ids_are_escaped() {
        assert_eq!(mermaid_label(r#"a"b#c<d>&"#), "a#quot;b#35;c#lt;d#gt;#amp;");
        assert_eq!(dot_id(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
