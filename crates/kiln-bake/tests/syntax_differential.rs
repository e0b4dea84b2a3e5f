//! The hand-written HCL parser (`kiln_bake::syntax`) against the former
//! `hcl-edit` based one (`kiln_bake::baseline`): for every input both must
//! agree. Valid input gives the same tree, spans included (compared through
//! `{:?}`); invalid input gives an error at the same byte with the same
//! title and message.
//!
//! Inputs: every HCL file of the conformance corpus, of the repository's
//! examples, stacks and test fixtures, the benchmark's generated file, a set
//! of hand-written snippets (valid and broken), and random inputs: token
//! soups and corpus files with a few bytes changed.

use std::path::{Path, PathBuf};

use kiln_bake::{Diags, baseline, syntax};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

#[allow(dead_code)]
#[macro_use]
#[path = "../benches/support/workload.rs"]
mod workload;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn hcl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target" || n == ".git") {
                continue;
            }
            hcl_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "hcl") {
            out.push(p);
        }
    }
}

/// What a parse gave, in a comparable form.
fn outcome<T: std::fmt::Debug>(r: Result<T, Diags>) -> Result<String, String> {
    match r {
        Ok(t) => Ok(format!("{t:?}")),
        Err(d) => Err(d
            .0
            .iter()
            .map(|d| format!("{:?} {} | {}", d.span, d.summary, d.detail))
            .collect::<Vec<_>>()
            .join("\n")),
    }
}

/// `None` when both parsers agree on `text`, else what differs.
fn differs_body(text: &str) -> Option<String> {
    let old = outcome(baseline::parse_body(text, 0));
    let new = outcome(syntax::parse_body(text, 0));
    report(text, old, new)
}

fn differs_expr(text: &str) -> Option<String> {
    let old = outcome(baseline::parse_expr(text, 1, 7));
    let new = outcome(syntax::parse_expr(text, 1, 7));
    report(text, old, new)
}

fn differs_template(text: &str) -> Option<String> {
    let old = outcome(baseline::parse_template(text, 1, 7));
    let new = outcome(syntax::parse_template(text, 1, 7));
    report(text, old, new)
}

fn report(text: &str, old: Result<String, String>, new: Result<String, String>) -> Option<String> {
    if old == new {
        return None;
    }
    let show = |r: &Result<String, String>| match r {
        Ok(t) => format!("Ok {}", shorten(t)),
        Err(e) => format!("Err {e}"),
    };
    Some(format!(
        "input {:?}\n  hcl-edit: {}\n  kiln:     {}",
        shorten(text),
        show(&old),
        show(&new)
    ))
}

fn shorten(s: &str) -> String {
    if s.len() <= 600 {
        return s.to_string();
    }
    let cut = (0..=600)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}… ({} bytes)", &s[..cut], s.len())
}

fn assert_all_agree(inputs: &[(String, String)]) {
    let mut failures = Vec::new();
    for (name, text) in inputs {
        if let Some(d) = differs_body(text) {
            failures.push(format!("{name}: {d}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} inputs parse differently:\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n")
    );
}

fn read_all(files: &[PathBuf]) -> Vec<(String, String)> {
    files
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            Some((p.display().to_string(), text))
        })
        .collect()
}

fn corpus_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    hcl_files(&repo().join("tests/conformance/bake/cases"), &mut files);
    files
}

#[test]
fn conformance_corpus_parses_the_same() {
    let files = corpus_files();
    assert!(files.len() > 300, "corpus not found: {} files", files.len());
    assert_all_agree(&read_all(&files));
}

#[test]
fn repository_hcl_files_parse_the_same() {
    let mut files = Vec::new();
    for dir in ["examples", "stacks", "crates"] {
        hcl_files(&repo().join(dir), &mut files);
    }
    assert!(!files.is_empty(), "no HCL files found under the repository");
    assert_all_agree(&read_all(&files));
}

#[test]
fn benchmark_workload_parses_the_same() {
    let wl = workload::generate(300, &workload::Funcs::probe());
    assert!(syntax::parse_body(&wl.text, 0).is_ok());
    assert_all_agree(&[("bench workload".into(), wl.text)]);
}

/// Valid and invalid snippets at the corners of the grammar.
const SNIPPETS: &[&str] = &[
    "",
    "\n",
    "# only a comment",
    "a = 1",
    "a = 1\n",
    "a = 1\r\nb = 2\r\n",
    "a=1\nb= 2 # c\nc =3 // d\nd = 4 /* e */\n",
    "/* a */ a = 1 /* b */\n",
    "a = 1 /* unclosed\n",
    "a = 1\na = 2\n",
    "target \"a\" {}\n",
    "target \"a\" {\n}\n",
    "target \"a\" { tags = [\"x\"] }\n",
    "target \"a\" \"b\" c {\n  x = 1\n  inner {\n    y = 2\n  }\n}\n",
    "target \"a\" { # c\n  x = 1\n}\n",
    "target \"a\" { /* c */\n  x = 1\n}\n",
    "target \"a\" { x = 1 y = 2 }\n",
    "target \"a\" { inner {} }\n",
    "target \"a\" {\n  tags = [\"a\" \"b\"]\n}\n",
    "target \"app\" {\n  tags = [\"ghcr.io/acme/app:latest\"\n}\n",
    "target \"a\" {\n  x = 1\n",
    "target \"a\" {\n  x = 1\n}",
    "target \"${x}\" {}\n",
    "target \"a\\q\" {}\n",
    "target a.b {}\n",
    "target = \n",
    "target\n",
    "1 = 2\n",
    "a = 1 2\n",
    "a = \"\\n\\t\\r\\\"\\\\\\u00e9\\U0001F600\"\n",
    "a = \"\\u00\"\n",
    "a = \"\\uD800\"\n",
    "a = \"$${x} %%{y} $ % $$ %% ${\"x\"}\"\n",
    "a = \"x\ny\"\n",
    "a = \"abc\n",
    "a = \"abc\\\n",
    "a = \"${a}${b}c${d}\"\n",
    "a = \"${ a ~} b ${~ c }\"\n",
    "a = \"x ${ \"y ${z}\" } w\"\n",
    "a = \"%{ if x }yes%{ else }no%{ endif }\"\n",
    "a = \"%{ if x ~} yes %{~ else ~} no %{~ endif }\"\n",
    "a = \" x %{~ if x } yes %{ endif ~} y \"\n",
    "a = \"%{ for k, v in m }${k}=${v},%{ endfor }\"\n",
    "a = \"%{ for v in l ~}\n  ${v}\n%{~ endfor }\"\n",
    "a = \"%{ if x }\\n\"\"%{ endif }\"\n",
    "a = \"%{ if x }\"\n",
    "a = \"%{ foo }\"\n",
    "a = \"%{ for x }\"\n",
    "a = \"%{ if x }a%{ endfor }\"\n",
    "a = \"${}\"\n",
    "a = \"${ a\n + b }\"\n",
    "a = <<EOT\nhello\n  world\nEOT\n",
    "a = <<EOT\nEOT\n",
    "a = <<EOT\n\nEOT\n",
    "a = <<-EOT\n    hello\n      ${x}\n    world\n    EOT\n",
    "a = <<-EOT\n\thello\n\t\tworld\nEOT\n",
    "a = <<-EOT\n  ${x} a\n  b\n  EOT\n",
    "a = <<-EOT\n  a %{ if x }\n    b\n  %{ endif }\n  EOT\n",
    "a = <<EOT\nx ${y}\nEOT\n",
    "a = <<EOT\nx $${y} \\n\nEOT\n",
    "a = <<EOT\nx\nEOTX\nEOT\n",
    "a = <<EOT\r\nx\r\nEOT\r\n",
    "a = <<EOT\nunterminated\n",
    "a = <<EOT x\n",
    "a = <<\n",
    "a = <<EOT\nEOT\nb = <<EOT\nx\nEOT\n",
    "a = 1.5\nb = 1e3\nc = 1.5E-3\nd = 0.0\ne = 007\nf = 18446744073709551616\n",
    "a = 1e\n",
    "a = 1.5e+\n",
    "a = 1e999\n",
    "a = 1.\n",
    "a = 1.x\n",
    "a = -1\nb = - 2\nc = -0\nd = -a\ne = !a\nf = -a.b[0]\ng = - /* c */ 3\n",
    "a = !!x\nb = --1\n",
    "a = 1 + 2 * 3 - 4 / 5 % 6\n",
    "a = 1 < 2 && 3 >= 4 || !x == y != z\n",
    "a = a - b - c\nb = a / b * c\n",
    "a = (1 + 2) * 3\nb = (a)\nc = ((a))\nd = (a).b\ne = (\n  1\n  + 2\n)\n",
    "a = 1 +\n",
    "a = 1 + \n 2\n",
    "a = [\n  1 +\n  2,\n]\n",
    "a = x ? 1 : 2\nb = x ? y ? 1 : 2 : 3\nc = x ? 1 : y ? 2 : 3\n",
    "a = x ? 1\n",
    "a = x\n  ? 1\n  : 2\n",
    "a = f(x)\n  ? 1\n  : 2\n",
    "a = [1, 2, 3]\nb = []\nc = [1,]\nd = [\n  1,\n  2\n]\ne = [,]\n",
    "a = [1\n2]\n",
    "a = [1, 2\n",
    "a = {}\nb = {a = 1, b = 2}\nc = {\n  a = 1\n  b: 2,\n  \"c\" = 3\n  (d) = 4\n  e.f = 5\n}\n",
    "a = {a = 1 b = 2}\n",
    "a = {a = 1, a = 2}\n",
    "a = {\"a\" = 1, \"a\" = 2}\n",
    "a = {a = 1 # c\n b = 2 // d\n}\n",
    "a = {a => 1}\n",
    "a = {a}\n",
    "a = {a = 1\n",
    "a = { a = f()\n + 1 }\n",
    "a = { a = 1\n + 1 }\n",
    "a = f()\nb = f(1)\nc = f(1, 2,)\nd = f(x...)\ne = ns::f(1)\nf = a::b::c(\n  1,\n  2\n)\n",
    "a = f(1,,2)\n",
    "a = f(,)\n",
    "a = f(1 2)\n",
    "a = f(x..)\n",
    "a = f\n",
    "a = a::b\n",
    "a = f (1)\n",
    "a = a.b.c\nb = a[0][\"x\"]\nc = a.0.1\nd = a.*.b\ne = a[*].b\nf = a.\n  b\ng = a [0]\n",
    "a = a.\n",
    "a = a.-\n",
    "a = a[\n",
    "a = a[1\n",
    "a = a.012\n",
    "a = a.99999999999999999999999\n",
    "a = [for x in l : x]\nb = [for i, x in l : x if i > 0]\nc = {for k, v in m : k => v}\nd = {for k, v in m : v => k...}\ne = {for k, v in m : k => v... if v}\n",
    "a = [for x in l: x]\n",
    "a = [for x l : x]\n",
    "a = [for x in l x]\n",
    "a = {for k in m : k}\n",
    "a = [format(x)]\nb = [forx]\nc = {format = 1}\n",
    "a = [\n  for x in l :\n  x\n]\n",
    "a = null\nb = true\nc = false\nd = null.x\ne = true(1)\n",
    "a = é\nb = _x\nc = x-y\nd = x_1\n",
    "é = 1\n",
    "a = 1 é\n",
    "a = \"é\" ? é\n",
    "a b c d e f g {}\n",
    "a { b = 1 }\n",
    "a \"b\" {\n  c \"d\" {\n    e = [for x in y : x]\n  }\n}\n",
    "a = x\n.y\n",
    "a = [x]\n.y\n",
    "a = 1 // comment\nb = 2 # comment\r\nc = 3\n",
    "a = 1 # comment\rb = 2\n",
    "a = 1\r\n",
    "a = 1\r",
    "a = {\r\n  b = 1\r\n}\r\n",
    "a = \"\\",
    "a = \"",
    "a = [",
    "a = (",
    "a = {",
    "a = f(",
    "a = <<EOT",
    "a = -",
    "a = !",
    "a = x ?",
    "a = x ? 1 :",
    "}\n",
    "{\n",
    "=\n",
    "a = 1 ~ 2\n",
    "a = 1 ! 2\n",
    "a = 1 = 2\n",
    "a = 1 & 2\n",
    "a = 1 / 2 // c\nb = 1 /* c */ / 2\n",
];

#[test]
fn snippets_parse_the_same() {
    let inputs: Vec<(String, String)> = SNIPPETS
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("snippet {i}"), s.to_string()))
        .collect();
    assert_all_agree(&inputs);
}

#[test]
fn deep_nesting_and_long_chains_fail_the_same() {
    let mut inputs = Vec::new();
    for n in [60, 63, 64, 65, 200] {
        inputs.push(format!("a = {}1{}\n", "[".repeat(n), "]".repeat(n)));
        inputs.push(format!("a = {}1{}\n", "(".repeat(n), ")".repeat(n)));
        inputs.push(format!("a = {}1\n", "-".repeat(n)));
        inputs.push(format!(
            "a = \"{}x{}\"\n",
            "${\"".repeat(n),
            "\"}".repeat(n)
        ));
        inputs.push(format!("{}{}\n", "b {\n".repeat(n), "}\n".repeat(n)));
        inputs.push(format!("a = x{}\n", " ? 1 : x".repeat(n)));
    }
    for n in [127, 128, 129, 300] {
        inputs.push(format!("a = 1{}\n", " + 1".repeat(n)));
        inputs.push(format!(
            "a = (1{}) * 2{}\n",
            " + 1".repeat(n / 2),
            " - 1".repeat(n / 2)
        ));
    }
    let inputs: Vec<(String, String)> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, s)| (format!("deep {i}"), s))
        .collect();
    assert_all_agree(&inputs);
}

#[test]
fn large_objects_refuse_repeated_keys_the_same() {
    let mut inputs = Vec::new();
    for dup in ["k7", "\"q7\"", "(k7)", "\"${x}7\"", "k7.a", "none"] {
        let mut items: Vec<String> = (0..100)
            .map(|i| match i % 5 {
                0 => format!("k{i} = {i}"),
                1 => format!("\"q{i}\" = {i}"),
                2 => format!("(k{i}) = {i}"),
                3 => format!("\"${{x}}{i}\" = {i}"),
                _ => format!("k{i}.a = {i}"),
            })
            .collect();
        if dup != "none" {
            items.insert(90, format!("{dup} = 0"));
        }
        inputs.push((
            format!("object, repeated {dup}"),
            format!("a = {{\n{}\n}}\n", items.join("\n")),
        ));
    }
    assert_all_agree(&inputs);
    // Linear in the number of keys: 50k keys parse at once.
    let big: Vec<String> = (0..50_000).map(|i| format!("\"k{i}\" = {i}")).collect();
    let text = format!("a = {{\n{}\n}}\n", big.join("\n"));
    let t = std::time::Instant::now();
    assert!(syntax::parse_body(&text, 0).is_ok());
    assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());
}

#[test]
fn expressions_and_templates_parse_the_same() {
    let exprs = [
        "list(string)",
        "map(object({a = string, b = optional(number)}))",
        "\"x\"",
        "1 + 2",
        "",
        " ",
        "a b",
        "[1, 2",
        "x ? y : z",
        "{a = 1}",
        "<<EOT\nx\nEOT",
    ];
    let templates = [
        "plain",
        "",
        "${a}",
        "x ${a} y",
        "$${a}",
        "%{ if a }b%{ endif }",
        "%{ for x in y }${x}%{ endfor }",
        "${",
        "%{",
        "%{ foo }",
        "a \" b \\n",
        "${ a ~} b",
    ];
    let mut failures = Vec::new();
    for e in exprs {
        failures.extend(differs_expr(e));
    }
    for t in templates {
        failures.extend(differs_template(t));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Token soup: text made of HCL's pieces, so that most inputs get far into
/// the grammar before they go wrong (or do not).
fn hclish() -> impl Strategy<Value = String> {
    const TOKENS: &[&str] = &[
        "target", "a", "b", "x", "\"t\"", "\"\"", "{", "}", "[", "]", "(", ")", "=", "==", ":",
        ",", ".", "..", "...", "\n", " ", "\t", "\"", "${", "%{", "$${", "<<EOT\n", "\nEOT\n",
        "<<-EOT\n", "  EOT\n", "1", "2.5", "1e3", "-", "+", "*", "/", "%", "?", "=>", "for ",
        " in ", "if ", "else", "endif", "endfor", "null", "true", "#", "//", "/*", "*/", "\\", "é",
        "\r\n", "&&", "||", "!", "~", "[*]", ".*", ".0", "f(", "ns::", "\\n", "\\u00e9",
    ];
    prop::collection::vec(prop::sample::select(TOKENS), 0..60).prop_map(|t| t.concat())
}

/// Blanks between pieces of an expression: none, spaces, a newline (valid
/// only in some places, which is the point), comments.
fn gap() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["", " ", "  ", "\n", " \n  ", " /* c */ ", "\t", " # c\n"][..])
}

/// Expressions built from HCL's grammar, mostly valid, with random blanks.
fn gen_expr() -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        prop::sample::select(&["x", "y_1", "a-b", "null", "true", "false", "é"][..])
            .prop_map(String::from),
        prop::sample::select(&["0", "1", "42", "1.5", "1e3", "2.5E-2", "007"][..])
            .prop_map(String::from),
        prop::sample::select(
            &[
                "\"s\"",
                "\"\"",
                "\"a ${x} b\"",
                "\"$${x}\"",
                "\"\\n\\u00e9\"",
                "\"%{ if x }y%{ else }z%{ endif }\"",
                "\"%{ for v in x ~} ${v} %{~ endfor }\"",
                "\" ${~ x ~} \"",
                "<<EOT\nline ${x}\n  more\nEOT\n",
                "<<-EOT\n    a\n      ${x}\n    EOT\n"
            ][..]
        )
        .prop_map(String::from),
    ];
    leaf.prop_recursive(5, 48, 4, |inner| {
        let ops = prop::sample::select(
            &[
                "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
            ][..],
        );
        prop_oneof![
            (inner.clone(), gap(), ops, gap(), inner.clone())
                .prop_map(|(a, g1, o, g2, b)| format!("{a}{g1}{o}{g2}{b}")),
            (prop::sample::select(&["-", "!", "- "][..]), inner.clone())
                .prop_map(|(o, a)| format!("{o}{a}")),
            (inner.clone(), gap(), inner.clone(), gap(), inner.clone())
                .prop_map(|(a, g, b, g2, c)| format!("{a}{g}? {b}{g2}: {c}")),
            (
                gap(),
                prop::collection::vec(inner.clone(), 0..4),
                gap(),
                any::<bool>()
            )
                .prop_map(|(g, v, g2, t)| {
                    format!(
                        "[{g}{}{}{g2}]",
                        v.join(&format!(",{g}")),
                        if t && !v.is_empty() { "," } else { "" }
                    )
                }),
            (
                gap(),
                prop::collection::vec(
                    (
                        prop::sample::select(&["k", "\"q\"", "(x)", "k.v", "\"${x}\""][..]),
                        prop::sample::select(&["=", ":", " = "][..]),
                        inner.clone()
                    ),
                    0..3
                ),
                prop::sample::select(&[",", "\n", ", ", "\n\n"][..])
            )
                .prop_map(|(g, items, sep)| {
                    let body: Vec<String> = items
                        .iter()
                        .enumerate()
                        .map(|(i, (k, a, v))| format!("{k}{i}{a}{v}"))
                        .collect();
                    format!("{{{g}{}{g}}}", body.join(sep))
                }),
            (
                prop::sample::select(&["f", "ns::f", "upper"][..]),
                gap(),
                prop::collection::vec(inner.clone(), 0..3),
                prop::sample::select(&["", ",", "..."][..])
            )
                .prop_map(|(n, g, v, t)| format!(
                    "{n}({g}{}{})",
                    v.join(&format!(",{g}")),
                    if v.is_empty() { "" } else { t }
                )),
            (
                inner.clone(),
                prop::collection::vec(
                    prop::sample::select(
                        &[
                            ".a", "[0]", ".0", ".*", "[*]", "[x]", " .b", "\n.c", "[\n1\n]"
                        ][..]
                    ),
                    1..3
                )
            )
                .prop_map(|(a, t)| format!("{a}{}", t.concat())),
            (gap(), inner.clone(), gap()).prop_map(|(g, a, g2)| format!("({g}{a}{g2})")),
            (gap(), inner.clone(), inner.clone(), any::<bool>()).prop_map(|(g, c, v, cond)| {
                format!(
                    "[{g}for k, v in {c} : {v}{}{g}]",
                    if cond { " if v" } else { "" }
                )
            }),
            (gap(), inner.clone(), inner.clone(), any::<bool>()).prop_map(|(g, c, v, grp)| {
                format!(
                    "{{{g}for k, v in {c} : k => {v}{}{g}}}",
                    if grp { "..." } else { "" }
                )
            }),
            inner.clone().prop_map(|a| format!("\"x ${{{a}}} y\"")),
        ]
    })
    .boxed()
}

/// A corpus file with a few bytes replaced, inserted or removed.
fn mutated() -> impl Strategy<Value = String> {
    let files = read_all(&corpus_files());
    let texts: Vec<String> = files.into_iter().map(|(_, t)| t).collect();
    (
        prop::sample::select(texts),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                0u8..3,
                prop::sample::select(MUTATIONS),
            ),
            1..4,
        ),
    )
        .prop_map(|(text, edits)| {
            let mut b = text.into_bytes();
            for (at, kind, ins) in edits {
                let i = if b.is_empty() { 0 } else { at.index(b.len()) };
                match kind {
                    0 if !b.is_empty() => {
                        b.remove(i);
                    }
                    1 => {
                        b.splice(i..i, ins.bytes());
                    }
                    _ if !b.is_empty() => {
                        b.splice(i..i + 1, ins.bytes());
                    }
                    _ => {}
                }
            }
            String::from_utf8_lossy(&b).into_owned()
        })
}

const MUTATIONS: &[&str] = &[
    "\"", "{", "}", "[", "]", "(", ")", "=", ",", "\n", " ", "$", "${", "%{", "~", ".", "#", "/*",
    "<<", "-", "?", ":", "\\", "1", "x", "é",
];

proptest! {
    // PROPTEST_CASES=200000 (with --release) for a longer search.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_token_soup_parses_the_same(text in hclish()) {
        let d = differs_body(&text);
        prop_assert!(d.is_none(), "{}", d.unwrap_or_default());
        let d = differs_template(&text);
        prop_assert!(d.is_none(), "{}", d.unwrap_or_default());
        let d = differs_expr(&text);
        prop_assert!(d.is_none(), "{}", d.unwrap_or_default());
    }

    #[test]
    fn generated_expressions_parse_the_same(e in gen_expr(), g in gap(), nested in any::<bool>()) {
        let text = if nested {
            format!("target \"t\" {{\n  a ={g}{e}\n}}\n")
        } else {
            format!("a = {e}\nb = 1\n")
        };
        let d = differs_body(&text);
        prop_assert!(d.is_none(), "{}", d.unwrap_or_default());
        let d = differs_expr(&e);
        prop_assert!(d.is_none(), "{}", d.unwrap_or_default());
    }

    #[test]
    fn mutated_corpus_files_parse_the_same(text in mutated()) {
        let d = differs_body(&text);
        prop_assert!(d.is_none(), "{}", d.unwrap_or_default());
    }
}
