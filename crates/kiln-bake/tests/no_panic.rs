//! Robustness properties: no input, however malformed, may make `load`,
//! `Bake::resolve` or the print helpers panic, hang or overflow the stack.
//! Every case must *return* (`Ok` or `Err`, either is fine).
//!
//! Each case runs in its own thread with a fixed 2 MiB stack (the same as a
//! libtest test thread, *not* a bigger one) under `catch_unwind`, and with a
//! watchdog: a case that has not returned after [`CASE_TIMEOUT`] is reported
//! as a hang. A stack overflow cannot be caught; it aborts the test binary
//! with "thread '<test name>' has overflowed its stack".

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Once, mpsc};
use std::time::Duration;

use kiln_bake::{
    Options, PrintOptions, config_json, list_targets, list_variables, load, print_json,
    to_build_opts,
};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

/// Stack size of the thread each case runs in (libtest's default).
const CASE_STACK: usize = 2 * 1024 * 1024;
/// How long one case may run before it counts as a hang (debug build, busy
/// 2-core machine: generous on purpose; normal cases take milliseconds).
const CASE_TIMEOUT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

thread_local! {
    /// `file:line:col: message` of the last panic on this thread.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Chains a panic hook that remembers where the panic happened, so a failure
/// report names the offending source line.
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let loc = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            let msg = info
                .payload_as_str()
                .unwrap_or("<non-string payload>")
                .to_string();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{loc}: {msg}")));
            prev(info);
        }));
    });
}

/// One case: files, requested targets (`None`: the default request and then
/// every target and group by name), `--set` overrides and options.
#[derive(Clone, Debug)]
struct Case {
    files: Vec<(String, String)>,
    requested: Option<Vec<String>>,
    sets: Vec<String>,
    opts: Options,
}

impl Case {
    fn hcl(text: impl Into<String>) -> Case {
        Case::file("docker-bake.hcl", text)
    }

    fn file(name: &str, text: impl Into<String>) -> Case {
        Case {
            files: vec![(name.to_string(), text.into())],
            requested: None,
            sets: Vec::new(),
            opts: Options::default(),
        }
    }
}

/// Drives every public entry point that consumes the input.
fn exercise(case: Case) {
    let Case {
        files,
        requested,
        sets,
        opts,
    } = case;
    let bake = match load(files, &opts) {
        Ok(b) => b,
        Err(e) => {
            // Rendering slices the sources at the diagnostic spans.
            let _ = e.to_string();
            let _ = e.position();
            return;
        }
    };
    let _ = config_json(&bake.config).to_string();
    let _ = list_targets(&bake.config);
    let _ = list_variables(&bake.config);
    let requests = match requested {
        Some(r) => vec![r],
        None => {
            let all: Vec<String> = bake
                .config
                .targets
                .iter()
                .map(|t| t.name.clone())
                .chain(bake.config.groups.iter().map(|g| g.name.clone()))
                .collect();
            vec![Vec::new(), all]
        }
    };
    for req in requests {
        match bake.resolve(&req, &sets, &opts) {
            Ok(mut r) => {
                let _ = print_json(&r).to_string();
                match to_build_opts(&mut r, &PrintOptions::default()) {
                    Ok(()) => {
                        let _ = print_json(&r).to_string();
                    }
                    Err(e) => {
                        let _ = e.to_string();
                    }
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
}

/// Runs one case on a fresh 2 MiB thread; `Err` describes a panic or a hang.
fn run(case: Case) -> Result<(), String> {
    install_hook();
    let label = std::thread::current()
        .name()
        .unwrap_or("no_panic")
        .to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(label)
        .stack_size(CASE_STACK)
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| exercise(case)));
            let r = r.map_err(|_| {
                LAST_PANIC
                    .with(|p| p.borrow_mut().take())
                    .unwrap_or_else(|| "panic".into())
            });
            let _ = tx.send(r);
        })
        .map_err(|e| format!("spawn failed: {e}"))?;
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(p)) => Err(format!("panicked at {p}")),
        // The runaway thread is leaked; the failure is reported right away.
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(format!("hang: no result within {CASE_TIMEOUT:?}"))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err("case thread died without a result".into())
        }
    }
}

fn must_return(case: Case) {
    if let Err(e) = run(case.clone()) {
        panic!("{e}\ninput: {case:#?}");
    }
}

fn must_return_hcl(text: impl Into<String>) {
    must_return(Case::hcl(text));
}

fn cfg(cases: u32) -> ProptestConfig {
    // `PROPTEST_CASES=N` runs every property N times (for longer hunts).
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        // Never write `proptest-regressions/` files into the crate.
        failure_persistence: None,
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Grammar
// ---------------------------------------------------------------------------

/// Every name bake registers (buildx `bake/hclparser/stdlib.go`).
const FUNCS: &[&str] = &[
    "absolute",
    "add",
    "and",
    "base64decode",
    "base64encode",
    "basename",
    "bcrypt",
    "byteslen",
    "bytesslice",
    "can",
    "ceil",
    "chomp",
    "chunklist",
    "cidrhost",
    "cidrnetmask",
    "cidrsubnet",
    "cidrsubnets",
    "coalesce",
    "coalescelist",
    "compact",
    "concat",
    "contains",
    "convert",
    "csvdecode",
    "dirname",
    "distinct",
    "divide",
    "element",
    "equal",
    "flatten",
    "floor",
    "format",
    "formatdate",
    "formattimestamp",
    "formatlist",
    "greaterthan",
    "greaterthanorequalto",
    "hasindex",
    "homedir",
    "indent",
    "index",
    "indexof",
    "int",
    "join",
    "jsondecode",
    "jsonencode",
    "keys",
    "length",
    "lessthan",
    "lessthanorequalto",
    "log",
    "lookup",
    "lower",
    "max",
    "md5",
    "merge",
    "min",
    "modulo",
    "multiply",
    "negate",
    "not",
    "notequal",
    "or",
    "parseint",
    "pow",
    "range",
    "regex_replace",
    "regex",
    "regexall",
    "replace",
    "reverse",
    "reverselist",
    "rsadecrypt",
    "sanitize",
    "semvercmp",
    "sethaselement",
    "setintersection",
    "setproduct",
    "setsubtract",
    "setsymmetricdifference",
    "setunion",
    "sha1",
    "sha256",
    "sha512",
    "signum",
    "slice",
    "sort",
    "split",
    "strlen",
    "substr",
    "subtract",
    "timeadd",
    "timestamp",
    "title",
    "trim",
    "trimprefix",
    "trimspace",
    "trimsuffix",
    "try",
    "unixtimestampparse",
    "upper",
    "urlencode",
    "uuidv4",
    "uuidv5",
    "values",
    "zipmap",
];

/// Callees besides the stdlib: the user function every generated file
/// declares, and names that do not exist.
const OTHER_CALLEES: &[&str] = &["f", "g", "nosuch", "Upper", "target"];

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "0.5",
    "-2.5",
    "31",
    "64",
    "100",
    "4096",
    "1000000",
    "1e12",
    "-1e12",
    "1e308",
    "-1e308",
    "4.9e-324",
    "1e-400",
    "9007199254740993",
    "18446744073709551616",
    "99999999999999999999999999999999999999",
    "0.1e1",
];

/// Well-formed string literals aimed at particular functions (formats,
/// CIDRs, dates, regexes, JSON, CSV, base64, UUIDs, paths) and at number
/// parsing.
const STRINGS: &[&str] = &[
    r#""""#,
    r#""a""#,
    r#""NaN""#,
    r#""nan""#,
    r#""inf""#,
    r#""-Inf""#,
    r#""+Infinity""#,
    r#""1e999""#,
    r#""0x1F""#,
    r#""1_000""#,
    r#""  42  ""#,
    r#""true""#,
    r#""null""#,
    r#""%""#,
    r#""%d""#,
    r#""%s %s %s""#,
    r#""%[2]d""#,
    r#""%[0]d""#,
    r#""%[-1]d""#,
    r#""%*d""#,
    r#""%-999q""#,
    r#""%.99999f""#,
    r#""%v %#v %T %!""#,
    r#""%99999999999999999999d""#,
    r#""%%{x}""#,
    r#""$${x}""#,
    r#""${"nested ${"deep"}"}""#,
    r#""${1 / 0}""#,
    r#""%{ if true }y%{ else }n%{ endif }""#,
    r#""%{ for i, v in [1, 2] }${i}=${v} %{ endfor }""#,
    r#""%{~ if false ~} x %{~ endif ~}""#,
    r#""é€😀\u00e9\U0001F600\t\n\\""#,
    r#""e\u0301\u200d👨‍👩‍👧""#,
    r#""a,b,\"c\"\n1,2""#,
    r#""a,\"b\n""#,
    r#""10.0.0.0/8""#,
    r#""192.168.1.0/24""#,
    r#""0.0.0.0/0""#,
    r#""255.255.255.255/32""#,
    r#""::1/128""#,
    r#""fe80::/10""#,
    r#""::/0""#,
    r#""2006-01-02T15:04:05Z""#,
    r#""2024-02-29T23:59:60+14:00""#,
    r#""0001-01-01T00:00:00Z""#,
    r#""9999-12-31T23:59:59-23:59""#,
    r#""YYYY-MM-DD'T'hh:mm:ssZZZZZ EEEE aa""#,
    r#""'unterminated""#,
    r#""1h30m""#,
    r#""-9999999999h""#,
    r#""1.5.5us""#,
    r#""v1.2.3-rc.1+build""#,
    r#""1.0.0""#,
    r#""(a+)+$""#,
    r#""(?P<n>x)""#,
    r#""(?i)A|b*""#,
    r#""\\b""#,
    r#""[""#,
    r#""$1$2${3}""#,
    r#""{\"a\": [1, null, {\"b\": 1e400}]}""#,
    r#""[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]""#,
    r#""aGVsbG8=""#,
    r#""!!!""#,
    r#""6ba7b810-9dad-11d1-80b4-00c04fd430c8""#,
    r#""dns""#,
    r#""url""#,
    r#""oid""#,
    r#""x500""#,
    r#""../../a/./b//""#,
    r#""~/x""#,
    r#""/""#,
    r#""target:t""#,
    r#""target:other""#,
    r#""target:nosuch""#,
    r#""docker-image://alpine""#,
    r#""type=local,dest=out""#,
    // Heredocs end in a newline; the parentheses make that legal anywhere.
    "(<<EOT\nheredoc ${1 + 1} %{ if true }x%{ endif }\nEOT\n)",
    "(<<-EOT\n    indented\n      more\n    EOT\n)",
    "(<<EOT\nEOT\n)",
];

/// Literals that do not parse (they poison the whole file, so rare).
const BAD_SYNTAX: &[&str] = &[
    "1e309",
    r#""%{""#,
    r#""${""#,
    r#""\ud800""#,
    r#""\q""#,
    "<<EOT\nno end",
    "1..2",
    "[1,,]",
    "(",
    "f(,)",
];

/// Well-formed values of every type.
const VALUES: &[&str] = &[
    "true",
    "false",
    "null",
    "[]",
    "{}",
    "[null]",
    "[1, 2, 3]",
    "[3, -1, 2.5, 1e308]",
    r#"["b", "a", "b"]"#,
    r#"["", "x", "%s"]"#,
    r#"[1, "a", true, null, [], {}]"#,
    r#"{ a = 1, b = null, "c d" = [2] }"#,
    r#"{ a = "x", b = "y" }"#,
    r#"{ "" = 1 }"#,
    r#"[{ a = 1 }, { a = "x" }, null]"#,
    r#"[{ a = [1] }, { a = [2, 3] }]"#,
    "[[1, 2], [3], []]",
    r#"[["a"], ["b", "c"]]"#,
    "W",
    "A",
    "target.t.name",
    "target.other.tags",
    "target.other.contexts",
    "group.default.targets",
    "group.default",
    "target.other",
    "convert([1, 2], set(number))",
    r#"convert(["a", "a"], set(string))"#,
    "convert({ a = 1 }, map(number))",
    "convert([], list(string))",
    "convert(null, string)",
    "convert(null, list(string))",
    "range(5)",
    "range(-3)",
];

/// Names that may or may not resolve (self references, loop variables
/// outside loops, type keywords as values, unknown names).
const MAYBE_NAMES: &[&str] = &[
    "V",
    "x",
    "k",
    "v",
    "nosuch",
    "target",
    "target.t",
    "target.t.args",
    "target.t.args.X",
    "target.t.args.Y",
    "target.t.tags",
    "target.nosuch.args",
    "group.nosuch",
    "BAKE_CMD_CONTEXT",
    "string",
    "any",
    "list(string)",
];

/// A type expression, for `convert` and `variable` types.
const TYPES: &[&str] = &[
    "string",
    "number",
    "bool",
    "any",
    "list(string)",
    "list(number)",
    "set(string)",
    "set(bool)",
    "map(string)",
    "map(number)",
    "list(any)",
    "map(any)",
    "tuple([string, number])",
    "tuple([])",
    "object({ a = string, b = number })",
    "object({})",
    "list(list(string))",
    "map(object({ x = bool }))",
    "nosuchtype",
    "list(1)",
    "list(string, number)",
    "\"string\"",
];

/// Costs handed to `bcrypt`: at most 6 (higher ones are only slow), plus
/// unsuitable values.
const BCRYPT_COSTS: &[&str] = &[
    "4", "5", "6", "0", "-1", "3", "null", r#""x""#, "6.5", "[]", "-1e308", "1/0",
];

const BIN_OPS: &[&str] = &[
    "+", "-", "*", "/", "%", "==", "!=", "<", ">", "<=", ">=", "&&", "||",
];

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(NUMBERS).prop_map(String::from),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
        2 => any::<u8>().prop_map(|n| n.to_string()),
        1 => (-40i32..40).prop_map(|n| n.to_string()),
    ]
}

/// A string literal with random contents. Mostly escaped so that it parses
/// (with `${`/`%{` escaped as `$${`/`%%{`); rarely raw.
fn random_string() -> impl Strategy<Value = String> {
    let body = "[a-z0-9 ,.:/\\-_=%${}~*()\\[\\]\"\\\\\\n\\té😀\u{0}\u{7f}\u{200b}]{0,16}";
    prop_oneof![
        40 => body.prop_map(|s| {
            let s = s.replace("${", "$${").replace("%{", "%%{");
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\u{0}' => out.push_str("\\u0000"),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }),
        2 => body.prop_map(|s| format!("(<<EOT\n{}\nEOT\n)", s.replace("${", "$${").replace("%{", "%%{"))),
        // Raw: usually does not parse, which poisons the whole file.
        1 => body.prop_map(|s| format!("\"{s}\"")),
    ]
}

/// A well-formed value literal of a random type, possibly composite.
fn value() -> BoxedStrategy<String> {
    let scalar = prop_oneof![
        3 => number(),
        3 => prop::sample::select(STRINGS).prop_map(String::from),
        2 => random_string(),
        3 => prop::sample::select(VALUES).prop_map(String::from),
    ];
    scalar
        .prop_recursive(2, 8, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|v| format!("[{}]", v.join(", "))),
                prop::collection::vec(inner, 0..4).prop_map(|v| {
                    let f: Vec<String> = v
                        .iter()
                        .enumerate()
                        .map(|(i, x)| format!("{} = {x}", ["a", "b", "c", "d"][i]))
                        .collect();
                    format!("{{ {} }}", f.join(", "))
                }),
            ]
        })
        .boxed()
}

fn leaf() -> BoxedStrategy<String> {
    prop_oneof![
        240 => value(),
        30 => prop::sample::select(MAYBE_NAMES).prop_map(String::from),
        1 => prop::sample::select(BAD_SYNTAX).prop_map(String::from),
    ]
    .boxed()
}

/// Random HCL expressions over the grammar, up to a few levels deep.
fn expr() -> BoxedStrategy<String> {
    leaf()
        .prop_recursive(4, 32, 4, |inner| {
            // Arguments lean towards plain values so that most calls reach
            // the function's implementation instead of failing on an operand.
            let arg = prop_oneof![3 => value(), 2 => inner.clone()];
            // Conditions are mostly bool-valued, sometimes anything.
            let cond = prop_oneof![
                2 => (inner.clone(), prop::sample::select(&["==", "!=", "<", ">="][..]), inner.clone())
                    .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
                2 => inner.clone().prop_map(|a| format!("can({a})")),
                1 => prop::sample::select(&["true", "false"][..]).prop_map(String::from),
                1 => inner.clone(),
            ];
            let callee = prop_oneof![
                12 => prop::sample::select(FUNCS),
                1 => prop::sample::select(OTHER_CALLEES),
            ];
            let call = (
                callee,
                prop::collection::vec(arg.clone(), 0..=4),
                prop::sample::select(BCRYPT_COSTS),
                prop::sample::select(TYPES),
                any::<bool>(),
                0..10u8,
            )
                .prop_map(|(name, mut args, cost, ty, flag, spread)| {
                    match name {
                        // Keep bcrypt fast: never a computed cost.
                        "bcrypt" => {
                            args.truncate(1);
                            if flag {
                                args.push(cost.to_string());
                            }
                        }
                        "convert" if flag => {
                            args.truncate(1);
                            args.push(ty.to_string());
                        }
                        _ => {}
                    }
                    // `f(args...)` expands the last argument.
                    let dots = if spread == 0 && !args.is_empty() && name != "bcrypt" { "..." } else { "" };
                    format!("{name}({}{dots})", args.join(", "))
                });
            let bin = (arg.clone(), prop::sample::select(BIN_OPS), arg.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})"));
            let unary = (prop::sample::select(&["-", "!", "- -", "!!"][..]), arg.clone()).prop_map(|(op, a)| format!("{op}({a})"));
            let ternary = (cond.clone(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| format!("({c} ? {a} : {b})"));
            let body = prop_oneof![
                2 => inner.clone(),
                1 => prop::sample::select(&["x", "v", "k", "[x, x]", "{ a = v }", "\"${k}-${v}\"", "x == null"][..]).prop_map(String::from),
            ];
            let for_expr = (arg.clone(), body, cond.clone(), 0..7u8).prop_map(|(coll, body, c, kind)| match kind {
                0 => format!("[for x in {coll} : {body}]"),
                1 => format!("[for k, v in {coll} : {body} if {c}]"),
                2 => format!("{{for k, v in {coll} : k => {body}}}"),
                3 => format!("{{for x in {coll} : x => {body}...}}"),
                4 => format!("{{for x in {coll} : {body} => x if {c}}}"),
                5 => format!("[for x in {coll} : x if x == null]"),
                _ => format!("[for x in {coll} : [for y in x : {body}]]"),
            });
            let access = (arg.clone(), arg.clone(), 0..11u8).prop_map(|(a, i, kind)| match kind {
                0 => format!("({a})[{i}]"),
                1 => format!("({a})[-1]"),
                2 => format!("({a})[100]"),
                3 => format!("({a}).0"),
                4 => format!("({a}).a"),
                5 => format!("({a})[*]"),
                6 => format!("({a})[*].a"),
                7 => format!("({a}).*.a"),
                8 => format!("({a})[*][0]"),
                9 => format!("({a})[0.5]"),
                _ => format!("({a})[1e308]"),
            });
            let collection = (prop::collection::vec(inner.clone(), 0..4), inner.clone(), 0..3u8).prop_map(|(items, k, kind)| {
                match kind {
                    0 => format!("[{}]", items.join(", ")),
                    1 => {
                        let fields: Vec<String> = items.iter().enumerate().map(|(i, v)| format!("f{i} = {v}")).collect();
                        format!("{{ {} }}", fields.join(", "))
                    }
                    _ => format!("{{ ({k}) = {} }}", items.first().map_or("1", String::as_str)),
                }
            });
            let template = (inner.clone(), inner.clone(), cond, 0..6u8).prop_map(|(a, b, c, kind)| match kind {
                0 => format!("\"${{{a}}}\""),
                1 => format!("\"pre-${{{a}}}-mid-${{{b}}}-post\""),
                2 => format!("\"%{{ if {c} }}yes%{{ else }}${{{b}}}%{{ endif }}\""),
                3 => format!("\"%{{ for x in {a} }}${{x}},%{{ endfor }}\""),
                4 => format!("\"%{{ for k, v in {a} ~}} ${{k}}=${{v}} %{{~ endfor }}\""),
                _ => format!("(<<EOT\n${{{a}}}\n%{{ for k, v in {b} ~}}\n${{k}}\n%{{~ endfor }}\nEOT\n)"),
            });
            let typed = typed_call(Some(inner.clone()));
            prop_oneof![
                4 => call,
                4 => typed,
                4 => bin,
                1 => unary,
                2 => ternary,
                2 => for_expr,
                2 => access,
                2 => collection,
                2 => template,
                1 => inner.prop_map(|a| format!("({a})")),
            ]
        })
        .boxed()
}

/// Parameter kinds of every stdlib function: `n` number, `s` string, `b`
/// bool, `l` list, `m` map/object, `a` anything, `t` type expression, `c`
/// bcrypt cost; a trailing `*` repeats the last kind 0–3 times, `?` makes
/// it optional.
const SIGNATURES: &[(&str, &str)] = &[
    ("absolute", "n"),
    ("add", "nn"),
    ("and", "bb"),
    ("base64decode", "s"),
    ("base64encode", "s"),
    ("basename", "s"),
    ("bcrypt", "sc?"),
    ("byteslen", "s"),
    ("bytesslice", "snn"),
    ("can", "a"),
    ("ceil", "n"),
    ("chomp", "s"),
    ("chunklist", "ln"),
    ("cidrhost", "sn"),
    ("cidrnetmask", "s"),
    ("cidrsubnet", "snn"),
    ("cidrsubnets", "sn*"),
    ("coalesce", "a*"),
    ("coalescelist", "l*"),
    ("compact", "l"),
    ("concat", "l*"),
    ("contains", "la"),
    ("convert", "at"),
    ("csvdecode", "s"),
    ("dirname", "s"),
    ("distinct", "l"),
    ("divide", "nn"),
    ("element", "ln"),
    ("equal", "aa"),
    ("flatten", "l"),
    ("floor", "n"),
    ("format", "sa*"),
    ("formatdate", "ss"),
    ("formattimestamp", "sn?"),
    ("formatlist", "sa*"),
    ("greaterthan", "nn"),
    ("greaterthanorequalto", "nn"),
    ("hasindex", "aa"),
    ("homedir", ""),
    ("indent", "ns"),
    ("index", "aa"),
    ("indexof", "la"),
    ("int", "n"),
    ("join", "sl*"),
    ("jsondecode", "s"),
    ("jsonencode", "a"),
    ("keys", "m"),
    ("length", "a"),
    ("lessthan", "nn"),
    ("lessthanorequalto", "nn"),
    ("log", "nn"),
    ("lookup", "msa"),
    ("lower", "s"),
    ("max", "n*"),
    ("md5", "s"),
    ("merge", "m*"),
    ("min", "n*"),
    ("modulo", "nn"),
    ("multiply", "nn"),
    ("negate", "n"),
    ("not", "b"),
    ("notequal", "aa"),
    ("or", "bb"),
    ("parseint", "sn"),
    ("pow", "nn"),
    ("range", "n*"),
    ("regex_replace", "sss"),
    ("regex", "ss"),
    ("regexall", "ss"),
    ("replace", "sss"),
    ("reverse", "s"),
    ("reverselist", "l"),
    ("rsadecrypt", "ss"),
    ("sanitize", "s"),
    ("semvercmp", "ss"),
    ("sethaselement", "la"),
    ("setintersection", "ll*"),
    ("setproduct", "l*"),
    ("setsubtract", "ll"),
    ("setsymmetricdifference", "ll*"),
    ("setunion", "ll*"),
    ("sha1", "s"),
    ("sha256", "s"),
    ("sha512", "s"),
    ("signum", "n"),
    ("slice", "lnn"),
    ("sort", "l"),
    ("split", "ss"),
    ("strlen", "s"),
    ("substr", "snn"),
    ("subtract", "nn"),
    ("timeadd", "ss"),
    ("timestamp", ""),
    ("title", "s"),
    ("trim", "ss"),
    ("trimprefix", "ss"),
    ("trimspace", "s"),
    ("trimsuffix", "ss"),
    ("try", "a*"),
    ("unixtimestampparse", "n"),
    ("upper", "s"),
    ("urlencode", "s"),
    ("uuidv4", ""),
    ("uuidv5", "ss"),
    ("values", "m"),
    ("zipmap", "ll"),
];

/// Numbers that probe edge cases of indices, counts, radixes and sizes.
const EDGE_NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "-2",
    "0.5",
    "-0.5",
    "1.5",
    "8",
    "10",
    "16",
    "32",
    "33",
    "36",
    "37",
    "64",
    "128",
    "129",
    "255",
    "256",
    "-0",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1e15",
    "1e16",
    "1e100",
    "1e308",
    "-1e308",
    "4.9e-324",
    "0.1",
    "1/0",
    "-1/0",
];

/// Strings most functions' parsers choke on, on top of [`STRINGS`].
const EDGE_STRINGS: &[&str] = &[
    r#""""#,
    r#"" ""#,
    r#""\n""#,
    r#""é""#,
    r#""😀😀""#,
    r#""e\u0301""#,
    r#""\u0000""#,
    r#""ab""#,
    r#""-""#,
    r#""+""#,
    r#""1""#,
    r#""-1""#,
    r#""ff""#,
    r#""1.2.3""#,
    r#""v1""#,
    r#""1.2.3-alpha.01""#,
    r#""999999999999999999999.0.0""#,
    r#""=""#,
    r#""==""#,
    r#""a=""#,
    r#""YYYY""#,
    r#""'""#,
    r#""''""#,
    r#""h""#,
    r#""ms""#,
    r#""1.5h""#,
    r#""-0s""#,
    r#""256.0.0.0/8""#,
    r#""10.0.0.0/33""#,
    r#""10.0.0.0/-1""#,
    r#""::/129""#,
    r#""1.2.3.4""#,
    r#""10.0.0.0/8/8""#,
    r#""a\nb\n""#,
    r#""\r\n""#,
    r#""a,b\n1""#,
    r#""a,b\n1,2,3""#,
    r#""\"""#,
    r#""*""#,
    r#""$""#,
    r#""$0$99""#,
    r#""${"$"}{x}""#,
    r#""\\""#,
    r#""(""#,
    r#""a{99999}""#,
    r#""x{2,1}""#,
    r#""%""#,
    r#""%5.2f|%-8s|%08d|%+q|%x|%X|%o|%b|%e|%g|%t|%c|%U""#,
    r#""%[3]*.[2]*[1]f""#,
    r#""%!""#,
    r#""-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----""#,
    r#""AAAA""#,
    r#""====""#,
    r#""a%zz%""#,
];

fn kind_value(kind: char) -> BoxedStrategy<String> {
    let typed = match kind {
        'n' => prop_oneof![
            3 => prop::sample::select(EDGE_NUMBERS).prop_map(String::from),
            2 => number().boxed(),
            1 => prop::sample::select(&["\"5\"", "\"-1\"", "\"1e3\"", "\"x\""][..]).prop_map(String::from),
        ]
        .boxed(),
        's' => prop_oneof![
            3 => prop::sample::select(EDGE_STRINGS).prop_map(String::from),
            3 => prop::sample::select(STRINGS).prop_map(String::from),
            2 => random_string().boxed(),
            1 => number().boxed(),
        ]
        .boxed(),
        'b' => prop::sample::select(&["true", "false", "\"true\"", "\"false\"", "1"][..]).prop_map(String::from).boxed(),
        'l' => prop_oneof![
            2 => prop::collection::vec(kind_scalar(), 0..6).prop_map(|v| format!("[{}]", v.join(", "))),
            2 => prop::collection::vec(prop::sample::select(EDGE_NUMBERS), 0..6).prop_map(|v| format!("[{}]", v.join(", "))),
            2 => prop::collection::vec(prop::sample::select(EDGE_STRINGS), 0..6).prop_map(|v| format!("[{}]", v.join(", "))),
            1 => prop::collection::vec(value(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            1 => prop::sample::select(TYPES).prop_map(|t| format!("convert([], {t})")),
            1 => prop::sample::select(&["range(5)", "range(3, 0, -1)", "[[1, [2]], [[3]]]", "[null, null]", "convert([\"a\", \"b\"], set(string))"][..])
                .prop_map(String::from),
        ]
        .boxed(),
        'm' => prop_oneof![
            2 => prop::collection::vec((prop::sample::select(EDGE_STRINGS), kind_scalar()), 0..5).prop_map(|v| {
                let f: Vec<String> = v.iter().map(|(k, x)| format!("({k}) = {x}")).collect();
                format!("{{ {} }}", f.join(", "))
            }),
            1 => value(),
            1 => prop::sample::select(&["{}", "{ a = 1, b = \"x\" }", "{ a = { b = [] } }", "convert({ a = 1 }, map(number))", "null"][..])
                .prop_map(String::from),
        ]
        .boxed(),
        't' => prop::sample::select(TYPES).prop_map(String::from).boxed(),
        'c' => prop::sample::select(BCRYPT_COSTS).prop_map(String::from).boxed(),
        _ => value(),
    };
    if kind == 'c' {
        return typed;
    }
    // Sometimes a value of the wrong type, to exercise conversion errors.
    prop_oneof![8 => typed, 1 => value()].boxed()
}

fn kind_scalar() -> BoxedStrategy<String> {
    prop_oneof![
        prop::sample::select(EDGE_NUMBERS).prop_map(String::from),
        prop::sample::select(EDGE_STRINGS).prop_map(String::from),
        prop::sample::select(&["true", "false", "null"][..]).prop_map(String::from),
    ]
    .boxed()
}

/// A call that follows the function's signature (right arity, mostly
/// well-typed edge-case arguments); `inner` optionally supplies nested
/// expressions as arguments.
fn typed_call(inner: Option<BoxedStrategy<String>>) -> BoxedStrategy<String> {
    prop::sample::select(SIGNATURES)
        .prop_flat_map(move |(name, sig)| {
            let mut fixed: Vec<char> = sig.chars().collect();
            let (rep, max) = match fixed.last() {
                Some('*') => {
                    fixed.pop();
                    (fixed.pop(), 4)
                }
                Some('?') => {
                    fixed.pop();
                    (fixed.pop(), 2)
                }
                _ => (None, 1),
            };
            let arg = |k: char| -> BoxedStrategy<String> {
                match &inner {
                    Some(i) if k != 'c' => prop_oneof![3 => kind_value(k), 1 => i.clone()].boxed(),
                    _ => kind_value(k),
                }
            };
            let fixed: Vec<BoxedStrategy<String>> = fixed.into_iter().map(arg).collect();
            let rest = match rep {
                Some(k) => prop::collection::vec(arg(k), 0..max).boxed(),
                None => Just(Vec::new()).boxed(),
            };
            (fixed, rest).prop_map(move |(a, b)| {
                let args: Vec<String> = a.into_iter().chain(b).collect();
                format!("{name}({})", args.join(", "))
            })
        })
        .boxed()
}

/// An HCL string literal for arbitrary text (every character survives).
fn hcl_quote(s: &str) -> String {
    let mut out = String::from("\"");
    let mut prev = '\0';
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // `${` and `%{` are escaped by doubling the sigil.
            '{' if prev == '$' || prev == '%' => {
                out.push(prev);
                out.push('{');
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
        prev = c;
    }
    out.push('"');
    out
}

/// Random text from an alphabet, as an HCL string literal.
fn text(alphabet: &'static str, max: usize) -> BoxedStrategy<String> {
    let chars: Vec<char> = alphabet.chars().collect();
    prop::collection::vec(prop::sample::select(chars), 0..max)
        .prop_map(|v| hcl_quote(&v.into_iter().collect::<String>()))
        .boxed()
}

fn any_quoted() -> BoxedStrategy<String> {
    any::<String>().prop_map(|s| hcl_quote(&s)).boxed()
}

fn edge_number() -> BoxedStrategy<String> {
    prop_oneof![
        prop::sample::select(EDGE_NUMBERS).prop_map(String::from),
        any::<i64>().prop_map(|n| n.to_string()),
        (-70i32..70).prop_map(|n| n.to_string()),
    ]
    .boxed()
}

fn pem() -> BoxedStrategy<String> {
    let label = prop::sample::select(&["RSA PRIVATE KEY", "PRIVATE KEY", "X", ""][..]);
    let headers = prop::collection::vec(text("Proc-Type:4,ENCRYPTED DEK-Info: \t", 20), 0..3);
    let body = text(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n -",
        200,
    );
    (
        label,
        headers,
        body,
        any::<bool>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(label, headers, body, end, cut)| {
            let strip = |s: &str| s[1..s.len() - 1].to_string();
            let hs: Vec<String> = headers.iter().map(|h| strip(h)).collect();
            let mut s = format!(
                "-----BEGIN {label}-----\\n{}\\n{}",
                hs.join("\\n"),
                strip(&body)
            );
            if end {
                s.push_str(&format!("\\n-----END {label}-----\\n"));
            }
            // Truncate at a random character boundary (never inside an escape).
            let cuts: Vec<usize> = s
                .char_indices()
                .map(|(i, _)| i)
                .filter(|&i| !s[..i].ends_with('\\'))
                .collect();
            let at = cuts
                .get(cut.index(cuts.len().max(1)))
                .copied()
                .unwrap_or(s.len());
            if cut.index(4) == 0 {
                s.truncate(at);
            }
            format!("\"{s}\"")
        })
        .boxed()
}

/// Calls to the functions that parse their string arguments (formats,
/// dates, durations, CIDRs, versions, numbers, base64, CSV, JSON, regexes,
/// PEM), with arguments drawn from each parser's own alphabet.
fn parser_call() -> BoxedStrategy<String> {
    let fmt = || text("%%[]0123456789*.+-# vdsqfegxXotbcTU!", 14);
    let date = || {
        prop_oneof![
            prop::sample::select(
                &[
                    "\"2006-01-02T15:04:05Z\"",
                    "\"2024-02-29T23:59:60+14:00\"",
                    "\"0000-01-01T00:00:00Z\"",
                    "\"9999-12-31T23:59:59.999999999-23:59\"",
                    "\"2017-11-22T00:00:00.123456789Z\"",
                    "timestamp()",
                ][..]
            )
            .prop_map(String::from),
            text("0123456789TZtz:-+. ", 30),
        ]
    };
    let cidr = || {
        prop_oneof![
            prop::sample::select(
                &[
                    "\"10.0.0.0/8\"",
                    "\"10.1.2.3/32\"",
                    "\"0.0.0.0/0\"",
                    "\"192.168.0.0/31\"",
                    "\"::/0\"",
                    "\"fd00::/8\"",
                    "\"2001:db8::/127\"",
                    "\"::ffff:10.0.0.0/104\"",
                    "\"1.2.3.4/24\"",
                ][..]
            )
            .prop_map(String::from),
            text("0123456789abcdef.:/", 22),
        ]
    };
    let duration = || {
        prop_oneof![
            prop::sample::select(
                &[
                    "\"1h\"",
                    "\"-30m\"",
                    "\"1.5h2m3s4ms5us6ns\"",
                    "\"9999999999h\"",
                    "\"-9223372036854775808ns\"",
                    "\"0\""
                ][..]
            )
            .prop_map(String::from),
            text("0123456789.-+hmsuµn", 14),
        ]
    };
    prop_oneof![
        (fmt(), prop::collection::vec(value(), 0..4)).prop_map(|(f, a)| format!(
            "format({f}{})",
            a.iter().map(|x| format!(", {x}")).collect::<String>()
        )),
        (fmt(), prop::collection::vec(value(), 0..3)).prop_map(|(f, a)| format!(
            "formatlist({f}{})",
            a.iter().map(|x| format!(", {x}")).collect::<String>()
        )),
        (text("YMDhmsaAEZz' -:/", 16), date()).prop_map(|(f, d)| format!("formatdate({f}, {d})")),
        (
            text("YMDhmsaAEZz' -:/", 16),
            prop_oneof![date().boxed(), edge_number()]
        )
            .prop_map(|(f, d)| format!("formattimestamp({f}, {d})")),
        edge_number().prop_map(|n| format!("unixtimestampparse({n})")),
        (date(), duration()).prop_map(|(d, u)| format!("timeadd({d}, {u})")),
        (cidr(), edge_number()).prop_map(|(c, n)| format!("cidrhost({c}, {n})")),
        cidr().prop_map(|c| format!("cidrnetmask({c})")),
        (cidr(), edge_number(), edge_number())
            .prop_map(|(c, a, b)| format!("cidrsubnet({c}, {a}, {b})")),
        (cidr(), prop::collection::vec(edge_number(), 0..5)).prop_map(|(c, v)| format!(
            "cidrsubnets({c}{})",
            v.iter().map(|x| format!(", {x}")).collect::<String>()
        )),
        (
            text("0123456789v.-+abrc", 16),
            text("0123456789v.-+abrc", 16)
        )
            .prop_map(|(a, b)| format!("semvercmp({a}, {b})")),
        (text("0123456789abcdefxzABZ+-_ ", 24), edge_number())
            .prop_map(|(s, b)| format!("parseint({s}, {b})")),
        text("ABCabc0123456789+/=-_ \n\r", 24).prop_map(|s| format!("base64decode({s})")),
        text("ab,\"\n\r ", 24).prop_map(|s| format!("csvdecode({s})")),
        text("[]{}\":,0123456789.eE+-tfnrulase\\ ", 24).prop_map(|s| format!("jsondecode({s})")),
        (
            text("a()[]*+?{}|^$\\.0123456789,:<>PiIsmU-", 14),
            any_quoted()
        )
            .prop_map(|(r, s)| format!("regex({r}, {s})")),
        (
            text("a()[]*+?{}|^$\\.0123456789,:<>PiIsmU-", 14),
            any_quoted()
        )
            .prop_map(|(r, s)| format!("regexall({r}, {s})")),
        (
            any_quoted(),
            text("a()[]*+?{}|^$\\.0123456789", 12),
            text("$0123456789{}ab", 10)
        )
            .prop_map(|(s, r, w)| format!("regex_replace({s}, {r}, {w})")),
        (
            any_quoted(),
            text("/a()[]*+?{}|^$\\.", 12),
            text("$0123456789{}ab", 10)
        )
            .prop_map(|(s, r, w)| format!("replace({s}, {r}, {w})")),
        (pem(), text("ABCabc0123456789+/=", 40)).prop_map(|(k, c)| format!("rsadecrypt({c}, {k})")),
        (any_quoted(), edge_number(), edge_number())
            .prop_map(|(s, a, b)| format!("substr({s}, {a}, {b})")),
        (any_quoted(), edge_number(), edge_number())
            .prop_map(|(s, a, b)| format!("bytesslice({s}, {a}, {b})")),
        (edge_number(), any_quoted()).prop_map(|(n, s)| format!("indent({n}, {s})")),
        (any_quoted(), any_quoted()).prop_map(|(a, b)| format!("split({a}, {b})")),
        (any_quoted(), any_quoted()).prop_map(|(a, b)| format!("trim({a}, {b})")),
        (
            prop::sample::select(
                &[
                    "\"dns\"",
                    "\"url\"",
                    "\"oid\"",
                    "\"x500\"",
                    "\"6ba7b810-9dad-11d1-80b4-00c04fd430c8\"",
                    "\"\"",
                    "\"zz\""
                ][..]
            ),
            any_quoted()
        )
            .prop_map(|(ns, n)| format!("uuidv5({ns}, {n})")),
        (
            prop::sample::select(
                &[
                    "title",
                    "sanitize",
                    "reverse",
                    "upper",
                    "lower",
                    "strlen",
                    "byteslen",
                    "chomp",
                    "trimspace",
                    "urlencode",
                    "md5",
                    "sha1",
                    "sha256",
                    "sha512",
                    "base64encode",
                    "basename",
                    "dirname",
                    "jsonencode"
                ][..]
            ),
            any_quoted()
        )
            .prop_map(|(f, s)| format!("{f}({s})")),
    ]
    .boxed()
}

/// One direct stdlib call: usually following the signature, sometimes
/// with 0–4 plain values of random types.
fn direct_call() -> BoxedStrategy<String> {
    let random = (
        prop::sample::select(FUNCS),
        prop::collection::vec(value(), 0..=4),
        prop::sample::select(BCRYPT_COSTS),
        any::<bool>(),
    )
        .prop_map(|(name, mut args, cost, flag)| {
            if name == "bcrypt" {
                args.truncate(1);
                if flag {
                    args.push(cost.to_string());
                }
            }
            format!("{name}({})", args.join(", "))
        });
    prop_oneof![3 => typed_call(None), 1 => random].boxed()
}

/// The declarations every grammar file shares: a user function (whose body
/// is also a generated expression), a variable, a global attribute, a second
/// target and a group.
fn prelude(fbody: &str) -> String {
    format!(
        "function \"f\" {{\n  params = [x]\n  result = {fbody}\n}}\n\
         function \"g\" {{\n  params = []\n  variadic_params = rest\n  result = rest\n}}\n\
         variable \"W\" {{\n  default = \"w\"\n}}\n\
         A = W\n\
         target \"other\" {{\n  tags = [\"o\"]\n  contexts = {{ base = \"target:t\" }}\n}}\n\
         group \"default\" {{\n  targets = [\"t\"]\n}}\n"
    )
}

/// Places a generated expression somewhere in a bake file.
fn embed(kind: u8, e: &str, e2: &str) -> String {
    match kind {
        0 => format!("target \"t\" {{\n  args = {{\n    X = {e}\n  }}\n}}\n"),
        1 => format!(
            "variable \"V\" {{\n  default = {e}\n}}\ntarget \"t\" {{\n  args = {{\n    X = V\n  }}\n}}\n"
        ),
        2 => format!(
            "target \"t\" {{\n  matrix = {{\n    a = {e}\n  }}\n  name = \"t-${{a}}\"\n  args = {{\n    X = a\n  }}\n}}\n"
        ),
        3 => format!("target \"t\" {{\n  matrix = {e}\n  name = {e2}\n}}\n"),
        4 => format!(
            "target \"t\" {{\n  matrix = {{\n    a = [1, \"b\", null]\n  }}\n  name = {e}\n}}\n"
        ),
        5 => format!(
            "target \"base\" {{\n  args = {{ B = {e2} }}\n}}\ntarget \"t\" {{\n  inherits = {e}\n}}\n"
        ),
        6 => format!("target \"t\" {{\n  contexts = {{\n    a = {e}\n  }}\n}}\n"),
        7 => format!(
            "target \"t\" {{\n  args = {{\n    X = {e}\n    Y = target.t.args.X\n  }}\n  tags = [target.t.args.Y, {e2}]\n}}\n"
        ),
        8 => format!("target \"t\" {{\n  args = {{\n    X = f({e})\n  }}\n}}\n"),
        9 => format!("A2 = {e}\ntarget \"t\" {{\n  labels = {{\n    L = A2\n  }}\n}}\n"),
        10 => format!("target \"t\" {{\n  platforms = {e}\n  tags = {e2}\n}}\n"),
        11 => format!(
            "target \"t\" {{\n  output = [{e}]\n  cache-from = [{e2}]\n  secret = [{e}]\n  ssh = [{e2}]\n  attest = [{e}]\n}}\n"
        ),
        12 => format!(
            "target \"t\" {{\n  no-cache = {e}\n  pull = {e2}\n  resources = {e}\n  shm-size = {e2}\n}}\n"
        ),
        13 => format!(
            "variable \"V\" {{\n  type = {e2}\n  default = {e}\n}}\ntarget \"t\" {{\n  args = {{ X = V }}\n}}\n"
        ),
        14 => format!(
            "target \"t\" {{\n  args = {e}\n  context = {e2}\n  dockerfile-inline = {e}\n}}\n"
        ),
        15 => format!(
            "group \"g2\" {{\n  targets = {e}\n}}\ntarget \"t\" {{\n  description = {e2}\n}}\n"
        ),
        16 => format!(
            "variable \"V\" {{\n  default = 1\n  validation {{\n    condition = {e}\n    error_message = {e2}\n  }}\n}}\ntarget \"t\" {{\n  args = {{ X = V }}\n}}\n"
        ),
        _ => format!(
            "target \"t\" {{\n  args = {{\n    X = try({e}, {e2}, \"fallback\")\n    Y = can({e})\n  }}\n}}\n"
        ),
    }
}

const EMBEDDINGS: u8 = 18;

/// The same kind of file in JSON syntax (expressions go inside templates).
fn embed_json(kind: u8, e: &str, e2: &str) -> String {
    let tpl = |s: &str| serde_json::Value::String(format!("${{{s}}}"));
    let doc = match kind % 4 {
        0 => serde_json::json!({ "target": { "t": { "args": { "X": tpl(e) } } } }),
        1 => serde_json::json!({
            "variable": { "V": { "default": tpl(e) } },
            "target": { "t": { "args": { "X": "${V}" } } },
        }),
        2 => serde_json::json!({
            "function": { "f": { "params": ["x"], "result": tpl(e2) } },
            "target": { "t": { "args": { "X": tpl(&format!("f({e})")) }, "tags": [tpl(e2)] } },
        }),
        _ => serde_json::json!({
            "target": { "t": { "matrix": { "a": tpl(e) }, "name": tpl(e2), "platforms": tpl(e) } },
        }),
    };
    doc.to_string()
}

// ---------------------------------------------------------------------------
// 1. Random bytes and strings in every syntax
// ---------------------------------------------------------------------------

const FILE_NAMES: &[&str] = &[
    "docker-bake.hcl",
    "docker-bake.json",
    "bake.txt",
    "Bakefile",
    ".hcl",
    "x.json.hcl",
];

/// Text with lots of HCL/JSON punctuation so the parsers get past the first
/// byte more often than with uniformly random strings.
fn hclish_text() -> impl Strategy<Value = String> {
    const TOKENS: &[&str] = &[
        "target",
        "group",
        "variable",
        "function",
        "\"t\"",
        "\"\"",
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        "=",
        ":",
        ",",
        ".",
        "..",
        "...",
        "\n",
        " ",
        "\"",
        "${",
        "%{",
        "}",
        "$${",
        "<<EOT\n",
        "\nEOT\n",
        "<<-",
        "1",
        "-",
        "1e308",
        "/",
        "%",
        "0",
        "?",
        "=>",
        "for",
        "in",
        "if",
        "endif",
        "endfor",
        "x",
        "null",
        "true",
        "*",
        "#",
        "//",
        "/*",
        "*/",
        "\\",
        "é",
        "\u{0}",
        "\r\n",
        "args",
        "matrix",
        "name",
        "default",
        "params",
        "result",
        "inherits",
        "contexts",
        "\"target:t\"",
        "{\"target\":",
        "{\"t\":",
        "\"${",
        "}\"",
        "&&",
        "||",
        "!",
        "~",
        "[*]",
        ".*",
        "-1",
        "range(",
        "f(",
        "try(",
        "convert(",
        "bcrypt(\"x\")",
    ];
    prop::collection::vec(prop::sample::select(TOKENS), 0..80).prop_map(|t| t.concat())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..400).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        2 => any::<String>(),
        1 => "[ -~\\n\\t]{0,300}",
        4 => hclish_text(),
    ]
}

proptest! {
    #![proptest_config(cfg(256))]

    #[test]
    fn random_text_any_syntax(name in prop::sample::select(FILE_NAMES), text in any_text()) {
        let r = run(Case::file(name, text));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn random_text_two_files(a in any_text(), b in any_text(), json_first in any::<bool>()) {
        let (n1, n2) = if json_first { ("a.json", "b.hcl") } else { ("a.hcl", "b") };
        let case = Case {
            files: vec![(n1.to_string(), a), (n2.to_string(), b)],
            requested: None,
            sets: Vec::new(),
            opts: Options::default(),
        };
        let r = run(case);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// Random mutations (byte flips, truncation) of a realistic file.
    #[test]
    fn mutated_valid_file(name in prop::sample::select(FILE_NAMES), cut in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), junk in "[^a-z]{0,4}") {
        let base = if name.ends_with(".json") { VALID_JSON } else { VALID_HCL };
        let cut = cut.index(base.len() + 1);
        let at = at.index(base.len() + 1);
        let mut s: Vec<u8> = base.as_bytes().to_vec();
        s.truncate(cut.max(at));
        s.splice(at.min(s.len())..at.min(s.len()), junk.bytes());
        let r = run(Case::file(name, String::from_utf8_lossy(&s).into_owned()));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

// ---------------------------------------------------------------------------
// 2. Grammar-aware expressions in every position
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg(256))]

    #[test]
    fn grammar_expr_in_hcl(e in expr(), e2 in expr(), fbody in expr(), kind in 0..EMBEDDINGS) {
        let text = format!("{}{}", prelude(&fbody), embed(kind, &e, &e2));
        let r = run(Case::hcl(text));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// Every stdlib function called directly with plain values of random
    /// types, eight calls per file. `try` makes sure every call is made
    /// even when others fail; the results are also interpolated into
    /// strings and printed.
    #[test]
    fn stdlib_direct_calls(calls in prop::collection::vec(direct_call(), 8)) {
        let globals: Vec<String> = calls.iter().enumerate().map(|(i, c)| format!("G{i} = try({c}, \"failed\")\n")).collect();
        let args: Vec<String> = (0..calls.len()).map(|i| format!("    X{i} = try(\"${{G{i}}}\", \"not a string\")\n")).collect();
        let text = format!("{}target \"t\" {{\n  args = {{\n{}  }}\n}}\n", globals.concat(), args.concat());
        let r = run(Case::hcl(text));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// The string-parsing functions with arguments from their own alphabets.
    #[test]
    fn stdlib_string_parsers(calls in prop::collection::vec(parser_call(), 8)) {
        let globals: Vec<String> = calls.iter().enumerate().map(|(i, c)| format!("G{i} = try({c}, \"failed\")\n")).collect();
        let args: Vec<String> = (0..calls.len()).map(|i| format!("    X{i} = try(\"${{G{i}}}\", \"not a string\")\n")).collect();
        let text = format!("{}target \"t\" {{\n  args = {{\n{}  }}\n}}\n", globals.concat(), args.concat());
        let r = run(Case::hcl(text));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// Two generated files merged (duplicate targets, variables and
    /// functions across files and syntaxes), with file-relative paths.
    #[test]
    fn grammar_two_files_merged(
        e in expr(),
        e2 in expr(),
        k1 in 0..EMBEDDINGS,
        k2 in 0..EMBEDDINGS,
        jk in 0..4u8,
        names in prop::sample::select(&[
            ("docker-bake.hcl", "docker-bake.override.hcl"),
            ("a/b/docker-bake.hcl", "../c/x.json"),
            ("/abs/é/bake.hcl", "bake"),
            ("", "-"),
            ("dir/", "./x/../y.json"),
        ][..]),
        relative in any::<bool>(),
    ) {
        let second = if names.1.ends_with(".json") { embed_json(jk, &e2, &e) } else { embed(k2, &e2, &e) };
        let mut case = Case::hcl("");
        case.files = vec![(names.0.to_string(), format!("{}{}", prelude(&e2), embed(k1, &e, &e2))), (names.1.to_string(), second)];
        case.opts.file_relative_paths = relative;
        let r = run(case);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn grammar_expr_in_json(e in expr(), e2 in expr(), kind in 0..4u8) {
        let r = run(Case::file("docker-bake.json", embed_json(kind, &e, &e2)));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// Typed variables with a generated default and a random `--var` /
    /// environment override (typed override parsing, `_JSON` overrides).
    #[test]
    fn grammar_typed_variable_overrides(
        ty in prop::sample::select(TYPES),
        e in expr(),
        ov in prop_oneof!["[ -~]{0,24}", Just("[1, \"a\"]".to_string()), Just("a=1,b=2".to_string()), Just("\"x\",\"y".to_string())],
        json in any::<bool>(),
        env in any::<bool>(),
    ) {
        let text = format!("variable \"V\" {{\n  type = {ty}\n  default = {e}\n}}\nvariable \"U\" {{\n  default = {e}\n}}\ntarget \"t\" {{\n  args = {{\n    X = V\n    Y = U\n  }}\n}}\n");
        let mut case = Case::hcl(text);
        let key = if json { "V_JSON" } else { "V" };
        let map: BTreeMap<String, String> = [(key.to_string(), ov.clone()), ("U".to_string(), ov)].into();
        if env { case.opts.env = map } else { case.opts.vars = map }
        let r = run(case);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

// ---------------------------------------------------------------------------
// 3. Random `--set` overrides over a valid file
// ---------------------------------------------------------------------------

const VALID_HCL: &str = r#"
variable "TAG" {
  default = "latest"
}
function "tag" {
  params = [name]
  result = "repo/${name}:${TAG}"
}
group "default" {
  targets = ["app", "db"]
}
target "base" {
  dockerfile = "Dockerfile"
  args = { BASE = "1" }
  platforms = ["linux/amd64"]
}
target "app" {
  inherits = ["base"]
  context = "./app"
  contexts = { dep = "target:db" }
  tags = [tag("app")]
  args = { VERSION = "1.0", EMPTY = null }
  labels = { "org.opencontainers.image.title" = "app" }
  cache-from = ["type=registry,ref=repo/app:cache"]
  cache-to = ["type=inline"]
  output = ["type=image,push=false"]
  secret = ["id=token,env=TOKEN"]
  ssh = ["default"]
  attest = ["type=sbom"]
  platforms = ["linux/amd64", "linux/arm64"]
  extra-hosts = { "h" = "1.2.3.4" }
}
target "db" {
  matrix = { v = ["15", "16"] }
  name = "db-${v}"
  args = { PG = v }
  platforms = ["linux/amd64", "linux/arm64"]
}
target "db" {
  context = "db"
}
"#;

const VALID_JSON: &str = r#"{
  "variable": { "TAG": { "default": "latest" } },
  "group": { "default": { "targets": ["app"] } },
  "target": {
    "app": {
      "context": ".",
      "tags": ["repo/app:${TAG}"],
      "args": { "A": "${upper(TAG)}" },
      "platforms": ["linux/amd64"]
    }
  }
}"#;

const SET_PATTERNS: &[&str] = &[
    "app", "db-15", "db", "base", "*", "a*", "?pp", "[a-d]*", "[^a]*", "[", "[]", "[a-", "\\a",
    "\\", "", "nosuch", "**", "db-1[56]",
];

const SET_KEYS: &[&str] = &[
    "args",
    "args.X",
    "args.VERSION",
    "args.",
    "context",
    "contexts",
    "contexts.dep",
    "contexts.x",
    "dockerfile",
    "labels",
    "labels.l",
    "extra-hosts",
    "extra-hosts.h",
    "tags",
    "platform",
    "platforms",
    "output",
    "cache-from",
    "cache-to",
    "secrets",
    "secret",
    "secret.token",
    "secret.nosuch",
    "ssh",
    "attest",
    "policy",
    "no-cache",
    "pull",
    "push",
    "load",
    "no-cache-filter",
    "shm-size",
    "ulimits",
    "network",
    "target",
    "call",
    "entitlements",
    "annotations",
    "resources",
    "resources.memory",
    "resources.cpu-shares",
    "resources.nosuch",
    "nosuch",
    "",
    "args.X.Y",
];

const SET_VALUES: &[&str] = &[
    "",
    "1",
    "true",
    "false",
    "maybe",
    "linux/arm64",
    "type=registry,ref=x",
    "type=local,dest=out",
    "type=image,push=true",
    "type=docker",
    "type=cacheonly",
    "type=tar,dest=-",
    "id=token,src=/nonexistent/secret",
    "id=token,env=X",
    "id=other,src=x",
    "src=x",
    "type=sbom,disabled=true",
    "type=provenance,mode=max",
    "default=/tmp/agent",
    "\"quoted,comma\",x",
    "\"",
    "a=b=c",
    ",,,",
    "=",
    "target:app",
    "target:db-15",
    "cwd://x",
    "-",
    "nofile=1024:2048",
    "99999999999999999999",
    "-1",
    "1e308",
    "é😀",
];

fn set_string() -> impl Strategy<Value = String> {
    let structured = (
        prop::sample::select(SET_PATTERNS),
        prop::sample::select(SET_KEYS),
        any::<bool>(),
        prop::option::of(prop_oneof![
            prop::sample::select(SET_VALUES).prop_map(String::from),
            "[ -~]{0,20}",
        ]),
    )
        .prop_map(|(p, k, append, v)| {
            let plus = if append { "+" } else { "" };
            let key = if k.is_empty() {
                p.to_string()
            } else {
                format!("{p}.{k}")
            };
            match v {
                Some(v) => format!("{key}{plus}={v}"),
                None => format!("{key}{plus}"),
            }
        });
    prop_oneof![
        6 => structured,
        1 => "[ -~]{0,30}",
        1 => any::<String>(),
    ]
}

fn requested() -> impl Strategy<Value = Option<Vec<String>>> {
    const NAMES: &[&str] = &[
        "app", "db", "db-15", "db-16", "base", "default", "nosuch", "", "*", "app,db",
    ];
    prop::option::of(prop::collection::vec(
        prop::sample::select(NAMES).prop_map(String::from),
        0..3,
    ))
}

proptest! {
    #![proptest_config(cfg(256))]

    #[test]
    fn random_set_overrides_hcl(sets in prop::collection::vec(set_string(), 0..6), req in requested()) {
        let mut case = Case::hcl(VALID_HCL);
        case.sets = sets;
        case.requested = req;
        let r = run(case);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn random_set_overrides_json(sets in prop::collection::vec(set_string(), 0..6), req in requested()) {
        let mut case = Case::file("docker-bake.json", VALID_JSON);
        case.sets = sets;
        case.requested = req;
        let r = run(case);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

// ---------------------------------------------------------------------------
// Regressions: known-dangerous inputs
// ---------------------------------------------------------------------------

fn target_arg(e: &str) -> String {
    format!("target \"t\" {{\n  args = {{\n    X = {e}\n  }}\n}}\n")
}

#[test]
fn regress_division_and_modulo_by_zero() {
    for e in [
        "1/0",
        "-(1/0)",
        "5 % 0",
        "0/0",
        "0 % 0",
        "(1/0) % 1",
        "1 % (1/0)",
        "(1/0) - (1/0)",
        "-1e308 * 10",
        "\"${1/0}\"",
    ] {
        must_return_hcl(target_arg(e));
    }
}

#[test]
fn regress_deep_parens_5000() {
    let n = 5000;
    must_return_hcl(target_arg(&format!("{}1{}", "(".repeat(n), ")".repeat(n))));
}

#[test]
fn regress_deep_tuples_5000() {
    let n = 5000;
    must_return_hcl(target_arg(&format!("{}1{}", "[".repeat(n), "]".repeat(n))));
}

#[test]
fn regress_deep_nesting_other_forms() {
    let n = 5000;
    // Objects, unary operators, binary chains, templates, blocks, JSON.
    must_return_hcl(target_arg(&format!(
        "{}1{}",
        "{a = ".repeat(n),
        "}".repeat(n)
    )));
    must_return_hcl(target_arg(&format!("{}1", "-".repeat(n))));
    must_return_hcl(target_arg(&format!("{}1", "!".repeat(n))));
    must_return_hcl(target_arg(&vec!["1"; n].join(" + ")));
    must_return_hcl(target_arg(&format!(
        "{}1{}",
        "\"${".repeat(n),
        "}\"".repeat(n)
    )));
    must_return_hcl(target_arg(&format!("{}1{}", "f(".repeat(n), ")".repeat(n))));
    must_return_hcl(target_arg(&format!("x{}", "[0]".repeat(n))));
    must_return_hcl(format!("{}{}", "a {\n".repeat(n), "}\n".repeat(n)));
    must_return(Case::file(
        "docker-bake.json",
        format!("{}1{}", "[".repeat(n), "]".repeat(n)),
    ));
    must_return(Case::file(
        "docker-bake.json",
        format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)),
    ));
    let deep_tpl = format!("${{{}1{}}}", "(".repeat(n), ")".repeat(n));
    must_return(Case::file(
        "docker-bake.json",
        serde_json::json!({ "target": { "t": { "args": { "X": deep_tpl } } } }).to_string(),
    ));
}

/// The kinds of reference chain a file can build; each link nests one more
/// resolution on the native stack.
#[derive(Clone, Copy, Debug)]
enum Chain {
    /// `variable "V0" { default = V1 }` ... `variable "Vn" { default = "end" }`.
    Variables,
    /// `A0 = A1` ... `An = "end"`.
    GlobalAttrs,
    /// `target "t0" { args = { X = target.t1.args.X } }` ...
    TargetRefs,
    /// `target "t0" { inherits = ["t1"] }` ...
    Inherits,
    /// `target "t0" { contexts = { c = "target:t1" } }` ...
    Contexts,
    /// `group "g0" { targets = ["g1"] }` ...
    Groups,
    /// `function "f0" { params = [x] result = f1(x) }` ...
    UserFuncs,
    /// `target "t0" { matrix = ... name = target.t1.name }` ...
    MatrixNames,
}

fn chain(kind: Chain, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        let j = i + 1;
        s.push_str(&match kind {
            Chain::Variables => format!("variable \"V{i}\" {{\n  default = V{j}\n}}\n"),
            Chain::GlobalAttrs => format!("A{i} = A{j}\n"),
            Chain::TargetRefs => {
                format!("target \"t{i}\" {{\n  args = {{ X = target.t{j}.args.X }}\n}}\n")
            }
            Chain::Inherits => format!("target \"t{i}\" {{\n  inherits = [\"t{j}\"]\n}}\n"),
            Chain::Contexts => {
                format!("target \"t{i}\" {{\n  contexts = {{ c = \"target:t{j}\" }}\n}}\n")
            }
            Chain::Groups => format!("group \"g{i}\" {{\n  targets = [\"g{j}\"]\n}}\n"),
            Chain::UserFuncs => {
                format!("function \"f{i}\" {{\n  params = [x]\n  result = f{j}(x)\n}}\n")
            }
            Chain::MatrixNames => format!(
                "target \"t{i}\" {{\n  matrix = {{ a = [1] }}\n  name = target.t{j}.name\n}}\n"
            ),
        });
    }
    s.push_str(&match kind {
        Chain::Variables => format!("variable \"V{n}\" {{\n  default = \"end\"\n}}\n{}", target_arg("V0")),
        Chain::GlobalAttrs => format!("A{n} = \"end\"\n{}", target_arg("A0")),
        Chain::TargetRefs | Chain::Inherits => format!("target \"t{n}\" {{\n  args = {{ X = \"end\" }}\n}}\n"),
        Chain::Contexts | Chain::MatrixNames => format!("target \"t{n}\" {{}}\n"),
        Chain::Groups => format!("group \"default\" {{\n  targets = [\"g0\"]\n}}\ngroup \"g{n}\" {{\n  targets = [\"t\"]\n}}\ntarget \"t\" {{}}\n"),
        Chain::UserFuncs => format!("function \"f{n}\" {{\n  params = [x]\n  result = x\n}}\n{}", target_arg("f0(1)")),
    });
    s
}

const ALL_CHAINS: [Chain; 8] = [
    Chain::Variables,
    Chain::GlobalAttrs,
    Chain::TargetRefs,
    Chain::Inherits,
    Chain::Contexts,
    Chain::Groups,
    Chain::UserFuncs,
    Chain::MatrixNames,
];

/// Moderate chains of every kind work (the limits below are far away).
#[test]
fn regress_chains_50() {
    for kind in ALL_CHAINS {
        must_return_hcl(chain(kind, 50));
    }
}

/// The chains that stay shallow on the stack at 1,000 links.
#[test]
fn regress_chains_1000_bounded_kinds() {
    for kind in [
        Chain::Contexts,
        Chain::Groups,
        Chain::UserFuncs,
        Chain::MatrixNames,
    ] {
        must_return_hcl(chain(kind, 1000));
    }
}

// Each link of these chains costs 10–22 KiB of stack in a debug build
// (measured: a 2 MiB stack holds ~188 variable or global-attribute links,
// ~92 `target.<name>` reference links, ~165 `inherits` links). The evaluator
// bounds lazy resolution at `parse::MAX_NESTING` (64) levels and `inherits`
// at 64, so 1,000-link chains end in an error instead of aborting.

#[test]
fn regress_variable_chain_1000() {
    must_return_hcl(chain(Chain::Variables, 1000));
}

#[test]
fn regress_global_attr_chain_1000() {
    must_return_hcl(chain(Chain::GlobalAttrs, 1000));
}

#[test]
fn regress_target_ref_chain_1000() {
    must_return_hcl(chain(Chain::TargetRefs, 1000));
}

#[test]
fn regress_inherits_chain_1000() {
    must_return_hcl(chain(Chain::Inherits, 1000));
}

#[test]
fn regress_cycles() {
    // Variables, global attributes and a self-referencing variable.
    must_return_hcl(format!(
        "variable \"A\" {{\n  default = B\n}}\nvariable \"B\" {{\n  default = A\n}}\n{}",
        target_arg("A")
    ));
    must_return_hcl(format!(
        "variable \"A\" {{\n  default = \"${{A}}x\"\n}}\n{}",
        target_arg("A")
    ));
    must_return_hcl(format!("X1 = X2\nX2 = [X1]\n{}", target_arg("X1")));
    // Target attribute self references.
    must_return_hcl("target \"t\" {\n  args = { X = target.t.args.X }\n}\n");
    must_return_hcl("target \"t\" {\n  args = { X = target.t.args.Y, Y = target.t.args.X }\n}\n");
    must_return_hcl("target \"t\" {\n  tags = target.t.tags\n}\n");
    must_return_hcl("target \"t\" {\n  args = { X = jsonencode(target.t) }\n}\n");
    must_return_hcl(
        "target \"a\" {\n  tags = target.b.tags\n}\ntarget \"b\" {\n  tags = target.a.tags\n}\n",
    );
    // A matrix and a name that depend on the block itself.
    must_return_hcl("target \"t\" {\n  matrix = { a = target.t.args }\n  name = \"t${a}\"\n}\n");
    must_return_hcl("target \"t\" {\n  matrix = { a = [1] }\n  name = target.t.name\n}\n");
    // inherits cycles, direct and indirect.
    must_return_hcl("target \"t\" {\n  inherits = [\"t\"]\n}\n");
    must_return_hcl(
        "target \"a\" {\n  inherits = [\"b\"]\n}\ntarget \"b\" {\n  inherits = [\"a\"]\n}\n",
    );
    must_return_hcl(
        "target \"a\" {\n  inherits = target.b.inherits\n}\ntarget \"b\" {\n  inherits = [\"a\"]\n}\n",
    );
    // contexts = target: cycles.
    must_return_hcl("target \"t\" {\n  contexts = { a = \"target:t\" }\n}\n");
    must_return_hcl(
        "target \"a\" {\n  contexts = { x = \"target:b\" }\n}\ntarget \"b\" {\n  contexts = { x = \"target:c\" }\n}\ntarget \"c\" {\n  contexts = { x = \"target:a\" }\n}\n",
    );
    // Groups containing themselves.
    must_return_hcl("group \"default\" {\n  targets = [\"default\"]\n}\n");
    must_return_hcl(
        "group \"a\" {\n  targets = [\"b\"]\n}\ngroup \"b\" {\n  targets = [\"a\", \"t\"]\n}\ntarget \"t\" {}\n",
    );
}

#[test]
fn regress_recursive_user_functions() {
    must_return_hcl(format!(
        "function \"f\" {{\n  params = [x]\n  result = f(x)\n}}\n{}",
        target_arg("f(1)")
    ));
    must_return_hcl(format!(
        "function \"f\" {{\n  params = [x]\n  result = g(x)\n}}\nfunction \"g\" {{\n  params = [x]\n  result = f(x)\n}}\n{}",
        target_arg("f(1)")
    ));
    must_return_hcl(format!(
        "function \"f\" {{\n  params = [x]\n  result = x == 0 ? 0 : f(x - 1)\n}}\n{}",
        target_arg("f(100000)")
    ));
    // A function whose result calls itself via a variable.
    must_return_hcl(format!(
        "variable \"V\" {{\n  default = f(1)\n}}\nfunction \"f\" {{\n  params = [x]\n  result = V\n}}\n{}",
        target_arg("V")
    ));
}

#[test]
fn regress_huge_allocations() {
    for e in [
        "range(0, 1e12)",
        "range(1e12)",
        "range(-1e12, 1e12, 0.5)",
        "range(0, 1e308)",
        "range(0, 1, 1e-300)",
        "length(range(1e9))",
        "setproduct(range(1000), range(1000), range(1000))",
        "setproduct(range(100), range(100), range(100), range(100))",
        "length(setproduct(range(50), range(50), range(50), range(50), range(50)))",
        "format(\"%999999999d\", 1)",
        "format(\"%.999999999f\", 1)",
        "format(\"%-999999999s\", \"x\")",
        "format(\"%[999999999]d\", 1)",
        "formatlist(\"%999999999d\", [1])",
        "indent(999999999, \"x\\ny\")",
        "indent(1e308, \"x\\ny\")",
        "chunklist(range(10), 0)",
        "chunklist(range(10), 1e308)",
        "substr(\"abc\", 0, 1e308)",
        "substr(\"abc\", -1e308, 1e308)",
        "slice(range(3), 0, 1e308)",
        "element([], 0)",
        "element([1], 1e308)",
        "cidrsubnets(\"10.0.0.0/8\", 24, 24, 24, 24)",
        "cidrsubnet(\"10.0.0.0/8\", 1e308, 0)",
        "cidrhost(\"::/0\", 1e308)",
        "pow(10, 1e308)",
        "log(0, 0)",
        "parseint(\"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\", 36)",
        "parseint(\"1\", 1e308)",
        "jsondecode(\"1e999999\")",
        "timeadd(\"2024-01-01T00:00:00Z\", \"9999999999999999h\")",
        "formatdate(\"YYYY\", \"9999-12-31T23:59:59Z\")",
        "join(\",\", [for i in range(100000) : \"x\"])",
        "[for i in range(1000) : [for j in range(1000) : j]]",
        "replace(\"aaaa\", \"\", \"bbbbbbbb\")",
        "regex_replace(\"a\", \"(a*)*\", \"$1$1$1\")",
        "bcrypt(\"x\", 6)",
    ] {
        must_return_hcl(target_arg(e));
    }
    // A matrix that expands past any sensible size.
    must_return_hcl(
        "target \"t\" {\n  matrix = { a = range(1000), b = range(1000) }\n  name = \"t-${a}-${b}\"\n}\n",
    );
    must_return_hcl("target \"t\" {\n  matrix = { a = range(1e12) }\n  name = \"t-${a}\"\n}\n");
}

/// Long target names with a glob `--set` pattern full of `*`s: the glob
/// matcher backtracks exponentially (Go's `path.Match` does not).
#[test]
fn regress_set_glob_with_many_stars() {
    let name = "a".repeat(60);
    let pattern = format!("{}b", "*a".repeat(12));
    // As a `--set` target pattern...
    let mut case = Case::hcl(format!("target \"{name}\" {{}}\n"));
    case.sets = vec![format!("{pattern}.args.X=1")];
    must_return(case.clone());
    // ...and as a requested target pattern.
    case.sets = Vec::new();
    case.requested = Some(vec![pattern]);
    must_return(case);
}

/// `jsondecode("[[[…1…]]]")` / `jsondecode("{\"a\":{…}}")`, `depth` levels
/// deep, as an HCL expression.
fn deep_json_values(depth: usize) -> [String; 2] {
    let arr = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let obj = format!("{}1{}", "{\\\"a\\\":".repeat(depth), "}".repeat(depth));
    [arr, obj].map(|j| format!("jsondecode(\"{j}\")"))
}

/// Values as deep as `jsondecode` allows (1,000 levels), pushed through
/// the recursive value operations (type inference, equality, encoding,
/// printing, indexing, collection functions).
#[test]
fn regress_deep_values() {
    for depth in [999, 1000, 1001] {
        for d in deep_json_values(depth) {
            let exprs = [
                format!("jsonencode({d})"),
                format!("{d} == {d}"),
                format!("equal({d}, {d})"),
                format!("flatten([{d}])"),
                format!("contains([{d}], {d})"),
                format!("format(\"%v\", {d})"),
                format!("\"${{{d}}}\""),
                format!("sort([{d}])"),
                format!("coalescelist([{d}], [{d}])"),
                format!("concat([{d}], [[{d}]])"),
                format!("[{d}, 1]"),
                format!("{d}[0][0][0]"),
                format!("{d}.a.a.a"),
                format!("{d}[*]"),
                format!("[for x in [{d}] : x]"),
                format!("try({d})"),
                format!("length({d})"),
                format!("keys({d})"),
                format!("merge({d}, {d})"),
                format!("lookup({d}, \"a\", {d})"),
                format!("zipmap([\"k\"], [{d}])"),
                format!("setproduct([{d}], [{d}])"),
            ];
            for e in &exprs {
                must_return_hcl(target_arg(e));
            }
            // Deep values stored in variables, matrices and print output.
            must_return_hcl(format!(
                "variable \"V\" {{\n  default = {d}\n}}\n{}",
                target_arg("jsonencode(V)")
            ));
            must_return_hcl(format!(
                "variable \"V\" {{\n  type = any\n  default = {d}\n}}\n{}",
                target_arg("\"x\"")
            ));
            must_return_hcl(format!(
                "target \"t\" {{\n  matrix = {{ a = [{d}] }}\n  name = \"t\"\n  args = {{ X = jsonencode(a) }}\n}}\n"
            ));
            must_return_hcl(format!(
                "target \"t\" {{\n  tags = {d}\n  args = {d}\n  secret = {d}\n}}\n"
            ));
        }
    }
}

/// Converting a deep value to a nested collection type recurses through
/// `value::convert_at` (about 8 KiB of stack per level in a debug build):
/// about 245 levels overflow a 2 MiB stack, 1,000 (what `jsondecode`
/// accepts) overflow 8 MiB.
#[test]
fn regress_deep_value_conversion() {
    for d in deep_json_values(250) {
        for e in [
            format!("convert({d}, list(any))"),
            format!("convert([{d}], set(any))"),
            format!("distinct([{d}, {d}])"),
            format!("setunion([{d}], [{d}])"),
        ] {
            must_return_hcl(target_arg(&e));
        }
    }
}
