//! Built-in functions: text group.
//!
//! Re-implements go-cty's `cty/function/stdlib/{string.go,string_replace.go,
//! format.go,format_fsm.rl,regexp.go,csv.go,json.go,bytes.go}` and buildx's own
//! `basename`, `dirname`, `sanitize` and `homedir` (`bake/hclparser/stdlib.go`),
//! with their parameter types, result types and error wording.
//!
//! Owns: the 29 text functions, plus private re-creations of the Go library pieces
//! whose exact behaviour leaks into results: `fmt`'s and `math/big`'s number
//! formatting, `strings.Title`/`ToUpper`/`ToLower` (simple case mappings),
//! `path.Base`/`path.Dir`, `encoding/csv`'s reader, `encoding/json`'s token decoder
//! and HTML-escaping string encoder, and a translator from Go's RE2 syntax to the
//! `regex` crate's (ASCII-only `\d \s \w \b`, octal escapes, `\Q…\E`, literal `{`,
//! Go's error codes) together with Go's `$name` replacement expansion.
//! Must never: panic on any input, or build unbounded output (results above
//! [`MAX_OUTPUT`] bytes are refused; go-cty has no such limit).

use std::collections::BTreeMap;

use unicode_segmentation::UnicodeSegmentation;

use super::goquote::{go_quote, go_quote_rune};
use super::{FuncError, Function, Param};
use crate::value::{Type, Value, convert, format_number, parse_number};

/// Upper bound on the size of any string this module builds.
const MAX_OUTPUT: usize = 64 << 20;

/// Go's `fmt` refuses widths and precisions above this (`tooLarge`).
const MAX_FMT_NUM: usize = 1_000_000;

/// Deepest JSON nesting `jsondecode` accepts.
const MAX_JSON_DEPTH: usize = crate::value::MAX_VALUE_DEPTH;

/// gocty's message for a number that does not fit a Go `int`.
const WHOLE_NUMBER: &str =
    "value must be a whole number, between -9223372036854775808 and 9223372036854775807";

pub(super) fn register(out: &mut Vec<Function>) {
    let s = |name| Param::new(name, Type::String);
    let n = |name| Param::new(name, Type::Number);
    let fmt_args = || Param::nullable("args", Type::Dynamic);

    out.push(Function::new("basename", vec![s("path")], basename));
    out.push(Function::new(
        "byteslen",
        vec![Param::new("buf", Type::Dynamic)],
        byteslen,
    ));
    out.push(Function::new(
        "bytesslice",
        vec![Param::new("buf", Type::Dynamic), n("offset"), n("length")],
        bytesslice,
    ));
    out.push(Function::new("chomp", vec![s("str")], chomp));
    out.push(Function::new("csvdecode", vec![s("str")], csvdecode));
    out.push(Function::new("dirname", vec![s("path")], dirname));
    out.push(Function::variadic(
        "format",
        vec![s("format")],
        fmt_args(),
        format,
    ));
    out.push(Function::variadic(
        "formatlist",
        vec![s("format")],
        fmt_args(),
        formatlist,
    ));
    out.push(Function::new("homedir", vec![], homedir));
    out.push(Function::new("indent", vec![n("spaces"), s("str")], indent));
    out.push(Function::variadic(
        "join",
        vec![s("separator")],
        Param::new("lists", Type::list(Type::String)),
        join,
    ));
    out.push(Function::new("jsondecode", vec![s("str")], jsondecode));
    out.push(Function::new(
        "jsonencode",
        vec![Param::nullable("val", Type::Dynamic)],
        jsonencode,
    ));
    out.push(Function::new("lower", vec![s("str")], lower));
    out.push(Function::new(
        "regex",
        vec![s("pattern"), s("string")],
        regex_fn,
    ));
    out.push(Function::new(
        "regexall",
        vec![s("pattern"), s("string")],
        regexall,
    ));
    out.push(Function::new(
        "regex_replace",
        vec![s("str"), s("pattern"), s("replace")],
        regex_replace,
    ));
    out.push(Function::new(
        "replace",
        vec![s("str"), s("substr"), s("replace")],
        replace,
    ));
    out.push(Function::new("reverse", vec![s("str")], reverse));
    out.push(Function::new("sanitize", vec![s("name")], sanitize));
    out.push(Function::new(
        "split",
        vec![s("separator"), s("str")],
        split,
    ));
    out.push(Function::new("strlen", vec![s("str")], strlen));
    out.push(Function::new(
        "substr",
        vec![s("str"), n("offset"), n("length")],
        substr,
    ));
    out.push(Function::new("title", vec![s("str")], title));
    out.push(Function::new("trim", vec![s("str"), s("cutset")], trim));
    out.push(Function::new(
        "trimprefix",
        vec![s("str"), s("prefix")],
        trimprefix,
    ));
    out.push(Function::new("trimspace", vec![s("str")], trimspace));
    out.push(Function::new(
        "trimsuffix",
        vec![s("str"), s("suffix")],
        trimsuffix,
    ));
    out.push(Function::new("upper", vec![s("str")], upper));
}

// ------------------------------------------------------------------ helpers

fn failed(msg: impl Into<String>) -> FuncError {
    FuncError::failed(msg)
}

fn arg(args: &[Value], i: usize) -> Result<&Value, FuncError> {
    args.get(i)
        .ok_or_else(|| failed(format!("missing argument {}", i + 1)))
}

fn str_arg(args: &[Value], i: usize) -> Result<&str, FuncError> {
    match arg(args, i)? {
        Value::String(s) => Ok(s),
        other => Err(FuncError::arg(
            i,
            format!("string required, but have {}", other.type_name()),
        )),
    }
}

fn num_arg(args: &[Value], i: usize) -> Result<f64, FuncError> {
    match arg(args, i)? {
        Value::Number(n) => Ok(*n),
        other => Err(FuncError::arg(
            i,
            format!("number required, but have {}", other.type_name()),
        )),
    }
}

/// gocty's conversion of a number into a Go `int` (64-bit).
fn go_int(n: f64) -> Result<i64, FuncError> {
    if n.fract() == 0.0 && (i64::MIN as f64..-(i64::MIN as f64)).contains(&n) {
        Ok(n as i64)
    } else {
        Err(failed(WHOLE_NUMBER))
    }
}

fn string(s: impl Into<String>) -> Result<Value, FuncError> {
    Ok(Value::String(s.into()))
}

fn check_size(len: usize) -> Result<(), FuncError> {
    if len > MAX_OUTPUT {
        Err(failed(format!(
            "result would be longer than {MAX_OUTPUT} bytes"
        )))
    } else {
        Ok(())
    }
}

// ------------------------------------------------------------------ simple strings

fn chomp(args: &[Value]) -> Result<Value, FuncError> {
    // go-cty: regexp `(?:\r\n?|\n)*\z` replaced by "": any run of CR/LF at the end.
    string(str_arg(args, 0)?.trim_end_matches(['\r', '\n']))
}

fn indent(args: &[Value]) -> Result<Value, FuncError> {
    let spaces = go_int(num_arg(args, 0)?)?;
    let s = str_arg(args, 1)?;
    let Ok(spaces) = usize::try_from(spaces) else {
        // strings.Repeat panics; go-cty's function.Call recovers the panic.
        return Err(failed(
            "panic in function implementation: strings: negative Repeat count",
        ));
    };
    let newlines = s.bytes().filter(|&b| b == b'\n').count();
    if newlines == 0 {
        return string(s);
    }
    let total = newlines
        .checked_mul(spaces)
        .and_then(|n| n.checked_add(s.len()))
        .unwrap_or(usize::MAX);
    check_size(total)?;
    let pad = format!("\n{}", " ".repeat(spaces));
    string(s.replace('\n', &pad))
}

fn join(args: &[Value]) -> Result<Value, FuncError> {
    let sep = str_arg(args, 0)?;
    let lists = args.get(1..).unwrap_or_default();
    if lists.is_empty() {
        return Err(failed("at least one list is required"));
    }
    let mut items: Vec<&str> = Vec::new();
    for (ai, list) in lists.iter().enumerate() {
        let elems = list.as_seq().unwrap_or_default();
        for (ei, v) in elems.iter().enumerate() {
            match v {
                Value::String(s) => items.push(s),
                _ if lists.len() > 1 => {
                    return Err(FuncError::arg(
                        ai + 1,
                        format!(
                            "element {ei} of list {} is null; cannot concatenate null values",
                            ai + 1
                        ),
                    ));
                }
                _ => {
                    return Err(FuncError::arg(
                        ai + 1,
                        format!("element {ei} is null; cannot concatenate null values"),
                    ));
                }
            }
        }
    }
    let total = items
        .iter()
        .map(|s| s.len())
        .sum::<usize>()
        .saturating_add(sep.len().saturating_mul(items.len()));
    check_size(total)?;
    string(items.join(sep))
}

/// `unicode.ToUpper`: the simple (one-to-one) Unicode mapping. Rust's
/// `char::to_uppercase` applies the full mapping, which may expand to several
/// characters; Go leaves those characters alone, except the Greek letters with
/// ypogegrammeni whose simple mapping is to the titlecase form.
fn go_to_upper(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    let mut it = c.to_uppercase();
    if let (Some(u), None) = (it.next(), it.next()) {
        return u;
    }
    let cp = c as u32;
    let mapped = match cp {
        0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7 => cp + 8,
        0x1FB3 => 0x1FBC,
        0x1FC3 => 0x1FCC,
        0x1FF3 => 0x1FFC,
        _ => cp,
    };
    char::from_u32(mapped).unwrap_or(c)
}

/// `unicode.ToLower` (simple mapping; only U+0130 has a multi-character full
/// lowercase mapping).
fn go_to_lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let mut it = c.to_lowercase();
    match (it.next(), it.next()) {
        (Some(l), None) => l,
        _ if c == '\u{130}' => 'i',
        _ => c,
    }
}

/// `unicode.ToTitle`: like the uppercase mapping except for the Latin digraphs
/// and Georgian, whose titlecase forms differ from their uppercase forms.
fn go_to_title(c: char) -> char {
    match c as u32 {
        0x1C4..=0x1C6 => '\u{1C5}',
        0x1C7..=0x1C9 => '\u{1C8}',
        0x1CA..=0x1CC => '\u{1CB}',
        0x1F1..=0x1F3 => '\u{1F2}',
        0x10D0..=0x10FA | 0x10FD..=0x10FF => c,
        _ => go_to_upper(c),
    }
}

fn upper(args: &[Value]) -> Result<Value, FuncError> {
    string(
        str_arg(args, 0)?
            .chars()
            .map(go_to_upper)
            .collect::<String>(),
    )
}

fn lower(args: &[Value]) -> Result<Value, FuncError> {
    string(
        str_arg(args, 0)?
            .chars()
            .map(go_to_lower)
            .collect::<String>(),
    )
}

/// `strings.Title`'s word-separator test.
fn go_title_separator(c: char) -> bool {
    if c.is_ascii() {
        return !(c.is_ascii_alphanumeric() || c == '_');
    }
    // Letters and digits are not separators; otherwise only spaces are.
    c.is_whitespace()
}

fn title(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let mut prev = ' ';
    let out: String = s
        .chars()
        .map(|c| {
            let r = if go_title_separator(prev) {
                go_to_title(c)
            } else {
                c
            };
            prev = c;
            r
        })
        .collect();
    string(out)
}

fn trim(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let cutset = str_arg(args, 1)?;
    string(s.trim_matches(|c| cutset.contains(c)))
}

fn trimprefix(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let prefix = str_arg(args, 1)?;
    string(s.strip_prefix(prefix).unwrap_or(s))
}

fn trimsuffix(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let suffix = str_arg(args, 1)?;
    string(s.strip_suffix(suffix).unwrap_or(s))
}

fn trimspace(args: &[Value]) -> Result<Value, FuncError> {
    // Go's unicode.IsSpace and Rust's White_Space agree.
    string(str_arg(args, 0)?.trim())
}

fn replace(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let substr = str_arg(args, 1)?;
    let with = str_arg(args, 2)?;
    let count = if substr.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(substr).count()
    };
    let total = count.saturating_mul(with.len()).saturating_add(s.len());
    check_size(total)?;
    string(s.replace(substr, with))
}

fn split(args: &[Value]) -> Result<Value, FuncError> {
    let sep = str_arg(args, 0)?;
    let s = str_arg(args, 1)?;
    let parts: Vec<Value> = if sep.is_empty() {
        // strings.Split with an empty separator splits after each UTF-8 sequence.
        s.chars().map(|c| Value::String(c.to_string())).collect()
    } else {
        s.split(sep).map(|p| Value::String(p.to_string())).collect()
    };
    Ok(Value::List(Type::String, parts))
}

fn strlen(args: &[Value]) -> Result<Value, FuncError> {
    let n = str_arg(args, 0)?.graphemes(true).count();
    Ok(Value::Number(n as f64))
}

fn reverse(args: &[Value]) -> Result<Value, FuncError> {
    string(str_arg(args, 0)?.graphemes(true).rev().collect::<String>())
}

fn substr(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let mut offset = go_int(num_arg(args, 1)?)?;
    let length = go_int(num_arg(args, 2)?)?;
    if offset < 0 {
        offset = offset.saturating_add(s.graphemes(true).count() as i64);
    } else if length == 0 {
        return string("");
    }
    // Byte offsets of grapheme cluster ends.
    let mut sub = s;
    if offset > 0 {
        let mut pos = 0i64;
        let mut i = 0usize;
        for g in s.graphemes(true) {
            i += g.len();
            pos += 1;
            if pos == offset {
                break;
            }
            if i >= s.len() {
                return string("");
            }
        }
        sub = s.get(i..).unwrap_or("");
    }
    if length < 0 {
        return string(sub);
    }
    let mut pos = 0i64;
    let mut i = 0usize;
    for g in sub.graphemes(true) {
        i += g.len();
        pos += 1;
        if pos == length {
            break;
        }
    }
    string(sub.get(..i).unwrap_or(sub))
}

fn sanitize(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    string(
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>(),
    )
}

fn basename(args: &[Value]) -> Result<Value, FuncError> {
    string(kiln_util::gopath::base(str_arg(args, 0)?))
}

fn dirname(args: &[Value]) -> Result<Value, FuncError> {
    string(kiln_util::gopath::dir(str_arg(args, 0)?))
}

fn homedir(_args: &[Value]) -> Result<Value, FuncError> {
    // os.UserHomeDir on Unix: $HOME, an error when it is unset or empty.
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => string(h.to_string_lossy()),
        _ => Err(failed("$HOME is not defined")),
    }
}

/// go-cty's `byteslen`/`bytesslice` take a `bytes` capsule, which no bake
/// expression can produce: HCL's argument conversion rejects every value.
fn byteslen(_args: &[Value]) -> Result<Value, FuncError> {
    Err(FuncError::arg(0, "bytes required"))
}

fn bytesslice(_args: &[Value]) -> Result<Value, FuncError> {
    Err(FuncError::arg(0, "bytes required"))
}

// ------------------------------------------------------------------ JSON encoding

/// Go's `encoding/json` string encoder (with its default HTML escaping).
fn go_json_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                let b = c as u32;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize & 0xf] as char);
                out.push(HEX[b as usize & 0xf] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `big.Float.Text('f', -1)`, as cty's JSON marshaller writes numbers.
fn json_number(n: f64) -> String {
    if n.is_infinite() {
        return if n > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    format_number(n)
}

/// cty's `json.Marshal` of a value with its own type.
fn marshal_json(v: &Value, out: &mut String) {
    match v {
        Value::Null(_) => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number(*n)),
        Value::String(s) => go_json_string(s, out),
        Value::List(_, e) | Value::Set(_, e) | Value::Tuple(e) => {
            out.push('[');
            for (i, x) in e.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                marshal_json(x, out);
            }
            out.push(']');
        }
        Value::Map(_, m) | Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(k, out);
                out.push(':');
                marshal_json(x, out);
            }
            out.push('}');
        }
    }
}

fn to_json_string(v: &Value) -> Result<String, FuncError> {
    let mut out = String::new();
    marshal_json(v, &mut out);
    check_size(out.len())?;
    Ok(out)
}

fn jsonencode(args: &[Value]) -> Result<Value, FuncError> {
    let v = arg(args, 0)?;
    if v.is_null() {
        return string("null");
    }
    string(to_json_string(v)?)
}

// ------------------------------------------------------------------ Go number formatting

/// `math/big`'s multi-precision decimal: `0.mant × 10^exp`, no trailing zeros in
/// `mant`; zero has an empty `mant`.
struct Decimal {
    mant: Vec<u8>,
    exp: i64,
}

impl Decimal {
    /// Parses Rust's `{:e}` output ("1.2345e-7") of a non-negative finite number.
    fn from_sci(s: &str) -> Decimal {
        let (m, e) = s.split_once('e').unwrap_or((s, "0"));
        let e: i64 = e.parse().unwrap_or(0);
        let mut mant: Vec<u8> = m.bytes().filter(u8::is_ascii_digit).collect();
        while mant.last() == Some(&b'0') {
            mant.pop();
        }
        if mant.is_empty() {
            return Decimal { mant, exp: 0 };
        }
        Decimal { mant, exp: e + 1 }
    }

    /// The exact decimal expansion of `|x|` (an f64 has at most 767 significant
    /// decimal digits).
    fn exact(x: f64) -> Decimal {
        Decimal::from_sci(&format!("{:.800e}", x.abs()))
    }

    /// The shortest decimal that reads back as `|x|`.
    fn shortest(x: f64) -> Decimal {
        Decimal::from_sci(&format!("{:e}", x.abs()))
    }

    fn at(&self, i: i64) -> u8 {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.mant.get(i).copied())
            .unwrap_or(b'0')
    }

    fn trim(&mut self) {
        while self.mant.last() == Some(&b'0') {
            self.mant.pop();
        }
        if self.mant.is_empty() {
            self.exp = 0;
        }
    }

    fn round(&mut self, n: i64) {
        let Ok(n) = usize::try_from(n) else { return };
        if n >= self.mant.len() {
            return;
        }
        let up = if self.mant[n] == b'5' && n + 1 == self.mant.len() {
            // exactly halfway: round to even
            n > 0 && (self.mant[n - 1] - b'0') & 1 != 0
        } else {
            self.mant[n] >= b'5'
        };
        if up {
            let mut n = n;
            while n > 0 && self.mant[n - 1] >= b'9' {
                n -= 1;
            }
            if n == 0 {
                self.mant.clear();
                self.mant.push(b'1');
                self.exp += 1;
                return;
            }
            self.mant[n - 1] += 1;
            self.mant.truncate(n);
        } else {
            self.mant.truncate(n);
            self.trim();
        }
    }

    /// `%e`: d.ddddde±dd
    fn fmt_e(&self, buf: &mut String, fmt: char, prec: i64) {
        buf.push(self.mant.first().map_or('0', |&c| c as char));
        if prec > 0 {
            buf.push('.');
            let mut i = 1i64;
            let m = (self.mant.len() as i64).min(prec + 1);
            while i < m {
                buf.push(self.at(i) as char);
                i += 1;
            }
            while i <= prec {
                buf.push('0');
                i += 1;
            }
        }
        buf.push(fmt);
        let mut exp = if self.mant.is_empty() {
            0
        } else {
            self.exp - 1
        };
        if exp < 0 {
            buf.push('-');
            exp = -exp;
        } else {
            buf.push('+');
        }
        if exp < 10 {
            buf.push('0');
        }
        buf.push_str(&exp.to_string());
    }

    /// `%f`: ddddddd.ddddd
    fn fmt_f(&self, buf: &mut String, prec: i64) {
        if self.exp > 0 {
            let m = (self.mant.len() as i64).min(self.exp);
            for i in 0..m {
                buf.push(self.at(i) as char);
            }
            for _ in m..self.exp {
                buf.push('0');
            }
        } else {
            buf.push('0');
        }
        if prec > 0 {
            buf.push('.');
            for i in 0..prec {
                buf.push(self.at(self.exp + i) as char);
            }
        }
    }
}

/// `big.Float.Append(buf, fmt, prec)` for `fmt` in e, E, f, g, G; a negative
/// `prec` asks for the shortest representation.
fn big_float_text(x: f64, fmt: char, prec: i64) -> String {
    let mut buf = String::new();
    if x.is_sign_negative() && !x.is_nan() {
        buf.push('-');
    }
    if x.is_infinite() {
        if x > 0.0 {
            buf.push('+');
        }
        buf.push_str("Inf");
        return buf;
    }
    if x.is_nan() {
        buf.push_str("NaN");
        return buf;
    }
    let mut prec = prec;
    let shortest = prec < 0;
    let mut d;
    if shortest {
        d = Decimal::shortest(x);
        prec = match fmt {
            'e' | 'E' => d.mant.len() as i64 - 1,
            'f' => (d.mant.len() as i64 - d.exp).max(0),
            _ => d.mant.len() as i64,
        };
    } else {
        d = Decimal::exact(x);
        match fmt {
            'e' | 'E' => d.round(1 + prec),
            'f' => d.round(d.exp + prec),
            _ => {
                if prec == 0 {
                    prec = 1;
                }
                d.round(prec);
            }
        }
    }
    match fmt {
        'e' | 'E' => d.fmt_e(&mut buf, fmt, prec),
        'f' => d.fmt_f(&mut buf, prec),
        _ => {
            let len = d.mant.len() as i64;
            let mut eprec = prec;
            if eprec > len && len >= d.exp {
                eprec = len;
            }
            if shortest {
                eprec = 6;
            }
            let exp = d.exp - 1;
            let e = if fmt == 'G' { 'E' } else { 'e' };
            if exp < -4 || exp >= eprec {
                if prec > len {
                    prec = len;
                }
                d.fmt_e(&mut buf, e, prec - 1);
            } else {
                if prec > d.exp {
                    prec = len;
                }
                d.fmt_f(&mut buf, (prec - d.exp).max(0));
            }
        }
    }
    buf
}

/// The digits of the integer `|x|` in `base` (`x` must be integral and finite).
fn int_digits(x: f64, base: u32) -> String {
    let a = x.abs();
    if a < 18_446_744_073_709_551_616.0 {
        let v = a as u64;
        return match base {
            2 => format!("{v:b}"),
            8 => format!("{v:o}"),
            16 => format!("{v:x}"),
            _ => v.to_string(),
        };
    }
    // a = mant × 2^shift with shift > 0; build it as little-endian u32 limbs.
    let bits = a.to_bits();
    let mant = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let shift = ((bits >> 52) & 0x7ff) as i64 - 1075;
    let shift = usize::try_from(shift).unwrap_or(0);
    let mut limbs = vec![0u32; shift / 32 + 3];
    let word = shift / 32;
    let wide = (mant as u128) << (shift % 32);
    for k in 0..3 {
        if let Some(l) = limbs.get_mut(word + k) {
            *l = (wide >> (32 * k)) as u32;
        }
    }
    let mut digits = Vec::new();
    while limbs.iter().any(|&l| l != 0) {
        let mut rem = 0u64;
        for l in limbs.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*l);
            *l = (cur / u64::from(base)) as u32;
            rem = cur % u64::from(base);
        }
        digits.push(b"0123456789abcdef"[rem as usize]);
        while limbs.last() == Some(&0) {
            limbs.pop();
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

// ------------------------------------------------------------------ format

/// One `%…` sequence of a format string.
struct Verb<'a> {
    raw: &'a str,
    offset: usize,
    arg_num: usize,
    mode: char,
    zero: bool,
    sharp: bool,
    plus: bool,
    minus: bool,
    space: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

enum FmtError {
    /// go-cty's `function.NewArgErrorf(index, …)`.
    Arg(usize, String),
    Msg(String),
}

impl FmtError {
    fn into_func_error(self) -> FuncError {
        match self {
            FmtError::Arg(i, m) => FuncError::arg(i, m),
            FmtError::Msg(m) => FuncError::failed(m),
        }
    }
    fn message(self) -> String {
        match self {
            FmtError::Arg(_, m) | FmtError::Msg(m) => m,
        }
    }
}

/// go-cty's `formatFSM` (the ragel machine in format_fsm.rl).
fn format_fsm(format: &str, args: &[Value]) -> Result<String, FmtError> {
    let b = format.as_bytes();
    let mut out = String::new();
    let mut p = 0usize;
    let mut next_arg = 1usize;
    let mut highest = 0usize;
    let eof_err = || {
        FmtError::Msg(format!(
            "invalid format string starting at offset {}",
            b.len()
        ))
    };
    let char_err = |p: usize| {
        let c = format
            .get(p..)
            .and_then(|s| s.chars().next())
            .unwrap_or('\u{FFFD}');
        FmtError::Msg(format!(
            "unrecognized format character {} at offset {p}",
            go_quote_rune(c)
        ))
    };
    let digits = |p: &mut usize| {
        let mut n = 0usize;
        while let Some(c) = b.get(*p).filter(|c| c.is_ascii_digit()) {
            n = n.saturating_mul(10).saturating_add(usize::from(c - b'0'));
            *p += 1;
        }
        n
    };
    while p < b.len() {
        if b[p] != b'%' {
            let end = format
                .get(p..)
                .and_then(|s| s.find('%'))
                .map_or(b.len(), |i| p + i);
            out.push_str(format.get(p..end).unwrap_or(""));
            p = end;
            continue;
        }
        let ts = p;
        p += 1;
        match b.get(p) {
            None => return Err(eof_err()),
            Some(b'%') => {
                out.push('%');
                p += 1;
                continue;
            }
            Some(_) => {}
        }
        let mut v = Verb {
            raw: "",
            offset: ts,
            arg_num: next_arg,
            mode: 'v',
            zero: false,
            sharp: false,
            plus: false,
            minus: false,
            space: false,
            width: None,
            prec: None,
        };
        while let Some(&c) = b.get(p) {
            match c {
                b'0' => v.zero = true,
                b'#' => v.sharp = true,
                b'-' => v.minus = true,
                b'+' => v.plus = true,
                b' ' => v.space = true,
                _ => break,
            }
            p += 1;
        }
        if b.get(p) == Some(&b'[') {
            p += 1;
            match b.get(p) {
                None => return Err(eof_err()),
                Some(b'1'..=b'9') => {}
                Some(_) => return Err(char_err(p)),
            }
            v.arg_num = digits(&mut p);
            match b.get(p) {
                None => return Err(eof_err()),
                Some(b']') => p += 1,
                Some(_) => return Err(char_err(p)),
            }
        }
        if matches!(b.get(p), Some(b'1'..=b'9')) {
            v.width = Some(digits(&mut p));
        }
        if b.get(p) == Some(&b'.') {
            p += 1;
            v.prec = Some(digits(&mut p));
        }
        match b.get(p) {
            None => return Err(eof_err()),
            Some(c) if c.is_ascii_alphabetic() => {
                v.mode = char::from(*c);
                p += 1;
            }
            Some(_) => return Err(char_err(p)),
        }
        v.raw = format.get(ts..p).unwrap_or("");
        highest = highest.max(v.arg_num);
        format_append(&v, &mut out, args)?;
        next_arg = v.arg_num.saturating_add(1);
        if out.len() > MAX_OUTPUT {
            return Err(FmtError::Msg(format!(
                "result would be longer than {MAX_OUTPUT} bytes"
            )));
        }
    }
    if highest < args.len() {
        let first_bad = highest + 1;
        if highest == 0 {
            return Err(FmtError::Arg(
                first_bad,
                "too many arguments; no verbs in format string".into(),
            ));
        }
        return Err(FmtError::Arg(
            first_bad,
            format!("too many arguments; only {highest} used by format string"),
        ));
    }
    Ok(out)
}

/// go-cty's `formatAppend`.
fn format_append(v: &Verb, out: &mut String, args: &[Value]) -> Result<(), FmtError> {
    let raw = go_quote(v.raw);
    let Some(arg) = v.arg_num.checked_sub(1).and_then(|i| args.get(i)) else {
        return Err(FmtError::Msg(format!(
            "not enough arguments for {raw} at {}: need index {} but have {} total",
            v.offset,
            v.arg_num,
            args.len()
        )));
    };
    if v.mode != 'v' && arg.is_null() {
        return Err(FmtError::Msg(format!(
            "unsupported value for {raw} at {}: null value cannot be formatted",
            v.offset
        )));
    }
    if v.width.is_some_and(|w| w > MAX_FMT_NUM) || v.prec.is_some_and(|p| p > MAX_FMT_NUM) {
        return Err(FmtError::Msg(format!(
            "unsupported value for {raw} at {}: width or precision too large",
            v.offset
        )));
    }
    let unsupported =
        |e: String| FmtError::Msg(format!("unsupported value for {raw} at {}: {e}", v.offset));
    match v.mode {
        'v' => {
            let s = match arg {
                Value::String(s) if !v.sharp => s.clone(),
                Value::Number(n) if !v.sharp => big_float_text(*n, 'g', -1),
                other => {
                    let mut s = String::new();
                    marshal_json(other, &mut s);
                    s
                }
            };
            out.push_str(&pad_width(v, s));
        }
        't' => match convert(arg.clone(), &Type::Bool).map_err(unsupported)? {
            Value::Bool(true) => out.push_str("true"),
            _ => out.push_str("false"),
        },
        'b' | 'd' | 'o' | 'x' | 'X' | 'e' | 'E' | 'f' | 'g' | 'G' => {
            let n = match convert(arg.clone(), &Type::Number).map_err(unsupported)? {
                Value::Number(n) => n,
                _ => return Err(unsupported("number required".into())),
            };
            if matches!(v.mode, 'b' | 'd' | 'o' | 'x' | 'X') {
                if n.fract() != 0.0 || !n.is_finite() {
                    return Err(unsupported("an integer is required".into()));
                }
                out.push_str(&go_int_format(n, v));
            } else {
                out.push_str(&go_float_format(n, v));
            }
        }
        's' | 'q' => {
            let s = match convert(arg.clone(), &Type::String).map_err(unsupported)? {
                Value::String(s) => s,
                _ => return Err(unsupported("string required".into())),
            };
            let s = match v.prec {
                Some(p) if p > 0 => s.graphemes(true).take(p).collect::<String>(),
                _ => s,
            };
            if v.mode == 's' {
                out.push_str(&pad_width(v, s));
            } else {
                let mut q = String::new();
                go_json_string(&s, &mut q);
                out.push_str(&pad_width(v, q));
            }
        }
        m => {
            return Err(FmtError::Msg(format!(
                "unsupported format verb {} in {raw} at offset {}",
                go_quote_rune(m),
                v.offset
            )));
        }
    }
    Ok(())
}

/// go-cty's `formatPadWidth`: width counted in grapheme clusters.
fn pad_width(v: &Verb, s: String) -> String {
    let Some(want) = v.width else { return s };
    let have = s.graphemes(true).count();
    if have >= want {
        return s;
    }
    let pads = if v.zero { "0" } else { " " }.repeat(want - have);
    if v.minus { s + &pads } else { pads + &s }
}

/// `fmt.Sprintf(verb, *big.Float)`, i.e. `big.Float.Format`.
fn go_float_format(x: f64, v: &Verb) -> String {
    let mut prec = v.prec.map_or(6, |p| p as i64);
    if matches!(v.mode, 'g' | 'G') && v.prec.is_none() {
        prec = -1;
    }
    let buf = big_float_text(x, v.mode, prec);
    let (sign, body) = if let Some(rest) = buf.strip_prefix('-') {
        ("-", rest)
    } else if let Some(rest) = buf.strip_prefix('+') {
        (if v.space { " " } else { "+" }, rest)
    } else if v.plus {
        ("+", buf.as_str())
    } else if v.space {
        (" ", buf.as_str())
    } else {
        ("", buf.as_str())
    };
    let padding = v
        .width
        .map_or(0, |w| w.saturating_sub(sign.len() + body.len()));
    // fmt clears the zero flag when '-' is present.
    if v.zero && !v.minus && !x.is_infinite() {
        format!("{sign}{}{body}", "0".repeat(padding))
    } else if v.minus {
        format!("{sign}{body}{}", " ".repeat(padding))
    } else {
        format!("{}{sign}{body}", " ".repeat(padding))
    }
}

/// `fmt.Sprintf(verb, *big.Int)`, i.e. `big.Int.Format`.
fn go_int_format(x: f64, v: &Verb) -> String {
    let base = match v.mode {
        'b' => 2,
        'o' => 8,
        'x' | 'X' => 16,
        _ => 10,
    };
    let sign = if x < 0.0 {
        "-"
    } else if v.plus {
        "+"
    } else if v.space {
        " "
    } else {
        ""
    };
    let prefix = match (v.sharp, v.mode) {
        (true, 'b') => "0b",
        (true, 'o') => "0",
        (true, 'x') => "0x",
        (true, 'X') => "0X",
        _ => "",
    };
    let mut digits = int_digits(x, base);
    if v.mode == 'X' {
        digits.make_ascii_uppercase();
    }
    let mut zeros = 0usize;
    if let Some(p) = v.prec {
        if digits.len() < p {
            zeros = p - digits.len();
        } else if digits == "0" && p == 0 {
            return String::new();
        }
    }
    let length = sign.len() + prefix.len() + zeros + digits.len();
    let (mut left, mut right) = (0usize, 0usize);
    if let Some(w) = v.width.filter(|&w| length < w) {
        let d = w - length;
        if v.minus {
            right = d;
        } else if v.zero && v.prec.is_none() {
            zeros = d;
        } else {
            left = d;
        }
    }
    format!(
        "{}{sign}{prefix}{}{digits}{}",
        " ".repeat(left),
        "0".repeat(zeros),
        " ".repeat(right)
    )
}

fn format(args: &[Value]) -> Result<Value, FuncError> {
    let f = str_arg(args, 0)?;
    let rest = args.get(1..).unwrap_or_default();
    format_fsm(f, rest)
        .map(Value::String)
        .map_err(FmtError::into_func_error)
}

fn formatlist(args: &[Value]) -> Result<Value, FuncError> {
    let f = str_arg(args, 0)?;
    let rest = args.get(1..).unwrap_or_default();
    if rest.is_empty() {
        let s = format_fsm(f, rest).map_err(FmtError::into_func_error)?;
        return Ok(Value::List(Type::String, vec![Value::String(s)]));
    }
    let mut iter_len: Option<(usize, usize)> = None; // (length, chooser)
    for (i, a) in rest.iter().enumerate() {
        if let Some(elems) = a.as_seq() {
            match iter_len {
                None => iter_len = Some((elems.len(), i)),
                Some((len, chooser)) if len != elems.len() => {
                    return Err(FuncError::arg(
                        i + 1,
                        format!(
                            "argument {} has length {}, which is inconsistent with argument {} of length {len}",
                            i + 1,
                            elems.len(),
                            chooser + 1
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    let n = iter_len.map_or(1, |(len, _)| len);
    let mut out = Vec::with_capacity(n.min(1024));
    let mut total = 0usize;
    for idx in 0..n {
        let call_args: Vec<Value> = rest
            .iter()
            .map(|a| match a.as_seq() {
                Some(elems) => elems.get(idx).cloned().unwrap_or_else(Value::null),
                None => a.clone(),
            })
            .collect();
        let s = format_fsm(f, &call_args)
            .map_err(|e| failed(format!("error on format iteration {idx}: {}", e.message())))?;
        total = total.saturating_add(s.len());
        check_size(total)?;
        out.push(Value::String(s));
    }
    Ok(Value::List(Type::String, out))
}

// ------------------------------------------------------------------ regular expressions

/// A Go `regexp/syntax` error: its code text and the offending expression.
#[derive(Clone)]
struct ReError {
    code: &'static str,
    expr: String,
}

const ERR_INVALID_CHAR_RANGE: &str = "invalid character class range";
const ERR_INVALID_ESCAPE: &str = "invalid escape sequence";
const ERR_INVALID_NAMED_CAPTURE: &str = "invalid named capture";
const ERR_INVALID_PERL_OP: &str = "invalid or unsupported Perl syntax";
const ERR_INVALID_REPEAT_OP: &str = "invalid nested repetition operator";
const ERR_INVALID_REPEAT_SIZE: &str = "invalid repeat count";
const ERR_MISSING_BRACKET: &str = "missing closing ]";
const ERR_MISSING_PAREN: &str = "missing closing )";
const ERR_MISSING_REPEAT_ARGUMENT: &str = "missing argument to repetition operator";
const ERR_TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
const ERR_UNEXPECTED_PAREN: &str = "unexpected )";
const ERR_NESTING_DEPTH: &str = "expression nests too deeply";
const ERR_LARGE: &str = "expression too large";

fn re_err(code: &'static str, expr: &str) -> ReError {
    ReError {
        code,
        expr: expr.to_string(),
    }
}

/// The part of `before` that `after` does not cover (`before[:len(before)-len(after)]`).
fn consumed<'a>(before: &'a str, after: &str) -> &'a str {
    before
        .get(..before.len().saturating_sub(after.len()))
        .unwrap_or(before)
}

/// A compiled Go regular expression: the translated `regex::Regex` and the names
/// of its capture groups (index 0 is the whole match; unnamed groups are "").
#[derive(Clone)]
struct GoRegex {
    re: regex::Regex,
    names: Vec<String>,
}

const POSIX_CLASSES: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// Go's Perl classes (ASCII-only), as the body of a Rust class and as a whole class.
fn perl_class(c: u8) -> Option<(&'static str, &'static str)> {
    Some(match c {
        b'd' => ("0-9", "[0-9]"),
        b'D' => ("[^0-9]", "[^0-9]"),
        b's' => (r"\t\n\x0C\r\x20", r"[\t\n\x0C\r\x20]"),
        b'S' => (r"[^\t\n\x0C\r\x20]", r"[^\t\n\x0C\r\x20]"),
        b'w' => ("0-9A-Za-z_", "[0-9A-Za-z_]"),
        b'W' => ("[^0-9A-Za-z_]", "[^0-9A-Za-z_]"),
        _ => return None,
    })
}

/// A Rust class item for the code point range `lo..=hi` (surrogates, which can
/// never match, are dropped).
fn push_class_range(out: &mut String, lo: u32, hi: u32) {
    let (lo, hi) = if (0xD800..=0xDFFF).contains(&lo) {
        (0xE000, hi)
    } else {
        (lo, hi)
    };
    let hi = if (0xD800..=0xDFFF).contains(&hi) {
        0xD7FF
    } else {
        hi
    };
    if lo > hi {
        return;
    }
    if lo == hi {
        out.push_str(&format!("\\x{{{lo:X}}}"));
    } else {
        out.push_str(&format!("\\x{{{lo:X}}}-\\x{{{hi:X}}}"));
    }
}

/// Emits a literal code point.
fn push_literal(out: &mut String, r: u32) {
    match char::from_u32(r) {
        Some(c) => {
            let mut buf = [0u8; 4];
            out.push_str(&regex::escape(c.encode_utf8(&mut buf)));
        }
        // A surrogate code point never matches anything.
        None => out.push_str(r"[^\x00-\x{10FFFF}]"),
    }
}

/// Go's `parseEscape`: one escaped character, returning the code point and the rest.
fn parse_escape(s: &str) -> Result<(u32, &str), ReError> {
    let t = s.get(1..).unwrap_or("");
    let mut chars = t.chars();
    let Some(c) = chars.next() else {
        return Err(re_err(ERR_TRAILING_BACKSLASH, ""));
    };
    let mut t = chars.as_str();
    let is_oct = |t: &str| matches!(t.as_bytes().first(), Some(b'0'..=b'7'));
    match c {
        '1'..='7' if !is_oct(t) => {}
        '0'..='7' => {
            let mut r = c as u32 - '0' as u32;
            for _ in 1..3 {
                if !is_oct(t) {
                    break;
                }
                r = r * 8 + u32::from(t.as_bytes()[0] - b'0');
                t = &t[1..];
            }
            return Ok((r, t));
        }
        'x' => {
            let mut it = t.chars();
            if let Some(c1) = it.next() {
                t = it.as_str();
                if c1 == '{' {
                    let mut nhex = 0;
                    let mut r: u32 = 0;
                    let mut ok = false;
                    loop {
                        let mut it = t.chars();
                        let Some(c2) = it.next() else { break };
                        t = it.as_str();
                        if c2 == '}' {
                            ok = nhex > 0;
                            break;
                        }
                        let Some(v) = c2.to_digit(16) else { break };
                        r = r * 16 + v;
                        if r > 0x10FFFF {
                            break;
                        }
                        nhex += 1;
                    }
                    if ok {
                        return Ok((r, t));
                    }
                } else {
                    let mut it = t.chars();
                    let c2 = it.next();
                    t = it.as_str();
                    if let (Some(x), Some(y)) = (c1.to_digit(16), c2.and_then(|c| c.to_digit(16))) {
                        return Ok((x * 16 + y, t));
                    }
                }
            }
        }
        'a' => return Ok((7, t)),
        'f' => return Ok((12, t)),
        'n' => return Ok((10, t)),
        'r' => return Ok((13, t)),
        't' => return Ok((9, t)),
        'v' => return Ok((11, t)),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => return Ok((c as u32, t)),
        _ => {}
    }
    Err(re_err(ERR_INVALID_ESCAPE, consumed(s, t)))
}

/// Go's `parseUnicodeClass` for `s` starting with `\p` or `\P`: the Rust class
/// and the rest.
fn parse_unicode_class(s: &str) -> Result<(String, &str), ReError> {
    let mut negate = s.as_bytes().get(1) == Some(&b'P');
    let t = s.get(2..).unwrap_or("");
    let (seq, mut name, rest) = if t.starts_with('{') {
        let Some(end) = s.find('}') else {
            return Err(re_err(ERR_INVALID_CHAR_RANGE, s));
        };
        (&s[..=end], s.get(3..end).unwrap_or(""), &s[end + 1..])
    } else {
        let len = t.chars().next().map_or(0, char::len_utf8);
        let seq = s.get(..2 + len).unwrap_or(s);
        (
            seq,
            seq.get(2..).unwrap_or(""),
            s.get(2 + len..).unwrap_or(""),
        )
    };
    if let Some(n) = name.strip_prefix('^') {
        negate = !negate;
        name = n;
    }
    let valid = !name.is_empty()
        && !name.contains(['}', '{', '\\', '[', ']'])
        && regex::Regex::new(&format!(r"\p{{{name}}}")).is_ok();
    if !valid {
        return Err(re_err(ERR_INVALID_CHAR_RANGE, seq));
    }
    let p = if negate { 'P' } else { 'p' };
    Ok((format!("\\{p}{{{name}}}"), rest))
}

/// Go's `parseClass` for `s` starting with `[`: the Rust class and the rest.
fn parse_class(s: &str) -> Result<(String, &str), ReError> {
    let mut t = &s[1..];
    let mut negate = false;
    if let Some(rest) = t.strip_prefix('^') {
        negate = true;
        t = rest;
    }
    let mut items = String::new();
    let mut first = true;
    while t.is_empty() || !t.starts_with(']') || first {
        first = false;
        if t.len() > 2
            && t.starts_with("[:")
            && let Some(i) = t[2..].find(":]")
        {
            let name = &t[..i + 4];
            let inner = &t[2..i + 2];
            let bare = inner.strip_prefix('^').unwrap_or(inner);
            if !POSIX_CLASSES.contains(&bare) {
                return Err(re_err(ERR_INVALID_CHAR_RANGE, name));
            }
            items.push_str(name);
            t = &t[i + 4..];
            continue;
        }
        if t.starts_with("\\p") || t.starts_with("\\P") {
            let (class, rest) = parse_unicode_class(t)?;
            items.push_str(&class);
            t = rest;
            continue;
        }
        if t.starts_with('\\')
            && let Some((inner, _)) = t.as_bytes().get(1).and_then(|&c| perl_class(c))
        {
            items.push_str(inner);
            t = &t[2..];
            continue;
        }
        let range_start = t;
        let (lo, rest) = parse_class_char(t, s)?;
        t = rest;
        let mut hi = lo;
        if t.len() >= 2 && t.starts_with('-') && !t[1..].starts_with(']') {
            let (h, rest) = parse_class_char(&t[1..], s)?;
            t = rest;
            hi = h;
            if hi < lo {
                return Err(re_err(ERR_INVALID_CHAR_RANGE, consumed(range_start, t)));
            }
        }
        push_class_range(&mut items, lo, hi);
    }
    let rest = &t[1..];
    let class = match (items.is_empty(), negate) {
        (true, false) => r"[^\x00-\x{10FFFF}]".to_string(),
        (true, true) => r"[\x00-\x{10FFFF}]".to_string(),
        (false, false) => format!("[{items}]"),
        (false, true) => format!("[^{items}]"),
    };
    Ok((class, rest))
}

fn parse_class_char<'a>(s: &'a str, whole: &str) -> Result<(u32, &'a str), ReError> {
    if s.is_empty() {
        return Err(re_err(ERR_MISSING_BRACKET, whole));
    }
    if s.starts_with('\\') {
        return parse_escape(s);
    }
    let mut it = s.chars();
    let c = it.next().map_or(0, |c| c as u32);
    Ok((c, it.as_str()))
}

/// Go's `parseRepeat` for `s` starting with `{`: (min, max, rest), max -1 for
/// "unbounded"; `None` when `{` is to be taken literally.
fn parse_repeat(s: &str) -> Option<(i64, i64, &str)> {
    fn parse_int(s: &str) -> Option<(i64, &str)> {
        let b = s.as_bytes();
        if !b.first()?.is_ascii_digit() {
            return None;
        }
        if b.len() >= 2 && b[0] == b'0' && b[1].is_ascii_digit() {
            return None;
        }
        let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut v: i64 = 0;
        for &c in &b[..n] {
            if v >= 100_000_000 {
                v = -1;
                break;
            }
            v = v * 10 + i64::from(c - b'0');
        }
        Some((v, &s[n..]))
    }
    let s = s.strip_prefix('{')?;
    let (min, mut s) = parse_int(s)?;
    let max;
    if let Some(rest) = s.strip_prefix(',') {
        if let Some(rest2) = rest.strip_prefix('}') {
            return Some((min, -1, rest2));
        }
        let (m, rest) = parse_int(rest)?;
        s = rest;
        max = m;
        if max < 0 {
            return s.strip_prefix('}').map(|r| (-1, max, r));
        }
    } else {
        max = min;
    }
    s.strip_prefix('}').map(|r| (min, max, r))
}

/// Translates a Go (RE2, `regexp.Compile`) pattern into the `regex` crate's
/// syntax with the same meaning, reporting Go's errors.
fn translate_go_regex(src: &str) -> Result<(String, Vec<String>), ReError> {
    let mut out = String::with_capacity(src.len() + 16);
    let mut names = vec![String::new()];
    let mut depth = 0usize;
    // Whether the last thing parsed can take a repetition operator (Go: the top
    // of the parse stack is not a pseudo-operator).
    let mut operand = false;
    let mut last_repeat: Option<&str> = None;
    let mut t = src;
    while let Some(c) = t.chars().next() {
        let mut repeat: Option<&str> = None;
        match c {
            '(' if t.starts_with("(?") => {
                let b = t.as_bytes();
                let named =
                    (b.len() > 4 && b[2] == b'P' && b[3] == b'<') || (b.len() > 3 && b[2] == b'<');
                if named {
                    let begin = if b[2] == b'<' { 3 } else { 4 };
                    let Some(end) = t.find('>') else {
                        return Err(re_err(ERR_INVALID_NAMED_CAPTURE, t));
                    };
                    let capture = &t[..=end];
                    let name = t.get(begin..end).unwrap_or("");
                    if name.is_empty()
                        || !name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric())
                    {
                        return Err(re_err(ERR_INVALID_NAMED_CAPTURE, capture));
                    }
                    names.push(name.to_string());
                    depth += 1;
                    out.push('(');
                    operand = false;
                    t = &t[end + 1..];
                } else {
                    // Flags: (?flags) or (?flags:re)
                    let mut rest = &t[2..];
                    let mut negated = false;
                    let mut saw_flag = false;
                    let mut done = None;
                    while let Some(f) = rest.chars().next() {
                        rest = &rest[f.len_utf8()..];
                        match f {
                            'i' | 'm' | 's' | 'U' => saw_flag = true,
                            '-' if !negated => {
                                negated = true;
                                saw_flag = false;
                            }
                            ':' | ')' if !negated || saw_flag => {
                                done = Some(f);
                                break;
                            }
                            _ => break,
                        }
                    }
                    let text = consumed(t, rest);
                    match done {
                        None => return Err(re_err(ERR_INVALID_PERL_OP, text)),
                        Some(':') => {
                            depth += 1;
                            out.push_str(text);
                            operand = false;
                        }
                        Some(_) => {
                            if text != "(?)" {
                                out.push_str(text);
                            }
                        }
                    }
                    t = rest;
                }
            }
            '(' => {
                names.push(String::new());
                depth += 1;
                out.push('(');
                operand = false;
                t = &t[1..];
            }
            '|' => {
                out.push('|');
                operand = false;
                t = &t[1..];
            }
            ')' => {
                if depth == 0 {
                    return Err(re_err(ERR_UNEXPECTED_PAREN, src));
                }
                depth -= 1;
                out.push(')');
                operand = true;
                t = &t[1..];
            }
            '^' | '$' => {
                out.push_str(if c == '^' { "(?:^)" } else { "(?:$)" });
                operand = true;
                t = &t[1..];
            }
            '.' => {
                out.push('.');
                operand = true;
                t = &t[1..];
            }
            '[' => {
                let (class, rest) = parse_class(t)?;
                out.push_str(&class);
                operand = true;
                t = rest;
            }
            '*' | '+' | '?' | '{' => {
                let before = t;
                let (op, after) = if c == '{' {
                    match parse_repeat(t) {
                        None => {
                            push_literal(&mut out, '{' as u32);
                            operand = true;
                            t = &t[1..];
                            last_repeat = None;
                            continue;
                        }
                        Some((min, max, after)) => {
                            if !(0..=1000).contains(&min) || max > 1000 || (max >= 0 && min > max) {
                                return Err(re_err(
                                    ERR_INVALID_REPEAT_SIZE,
                                    consumed(before, after),
                                ));
                            }
                            let op = match max {
                                -1 => format!("{{{min},}}"),
                                m if m == min => format!("{{{min}}}"),
                                m => format!("{{{min},{m}}}"),
                            };
                            (op, after)
                        }
                    }
                } else {
                    (c.to_string(), &t[1..])
                };
                let (lazy, after) = match after.strip_prefix('?') {
                    Some(a) => (true, a),
                    None => (false, after),
                };
                if let Some(lr) = last_repeat {
                    return Err(re_err(ERR_INVALID_REPEAT_OP, consumed(lr, after)));
                }
                if !operand {
                    return Err(re_err(ERR_MISSING_REPEAT_ARGUMENT, consumed(before, after)));
                }
                out.push_str(&op);
                if lazy {
                    out.push('?');
                }
                repeat = Some(before);
                t = after;
            }
            '\\' => {
                let b = t.as_bytes();
                let assertion = match b.get(1) {
                    Some(b'A') => Some(r"(?:\A)"),
                    Some(b'z') => Some(r"(?:\z)"),
                    Some(b'b') => Some(r"(?:(?-u:\b))"),
                    Some(b'B') => Some(r"(?:(?-u:\B))"),
                    _ => None,
                };
                if let Some(a) = assertion {
                    out.push_str(a);
                    operand = true;
                    t = &t[2..];
                } else if b.get(1) == Some(&b'C') {
                    return Err(re_err(ERR_INVALID_ESCAPE, &t[..2]));
                } else if b.get(1) == Some(&b'Q') {
                    let body = &t[2..];
                    let (lit, rest) = body.split_once("\\E").unwrap_or((body, ""));
                    for ch in lit.chars() {
                        push_literal(&mut out, ch as u32);
                        operand = true;
                    }
                    t = rest;
                } else if matches!(b.get(1), Some(b'p' | b'P')) {
                    let (class, rest) = parse_unicode_class(t)?;
                    out.push_str(&class);
                    operand = true;
                    t = rest;
                } else if let Some((_, whole)) = b.get(1).and_then(|&c| perl_class(c)) {
                    out.push_str(whole);
                    operand = true;
                    t = &t[2..];
                } else {
                    let (r, rest) = parse_escape(t)?;
                    push_literal(&mut out, r);
                    operand = true;
                    t = rest;
                }
            }
            c => {
                push_literal(&mut out, c as u32);
                operand = true;
                t = &t[c.len_utf8()..];
            }
        }
        last_repeat = repeat;
    }
    if depth > 0 {
        return Err(re_err(ERR_MISSING_PAREN, src));
    }
    Ok((out, names))
}

/// Go's `regexp.Compile`.
/// Compiled once per process: a bake file is evaluated more than once a run
/// (its stamp variables' views), each time calling its `regex*` functions with the
/// same patterns, and compiling a pattern costs far more than matching it.
///
/// Handed out shared, not cloned: a clone of a `regex::Regex` starts with an
/// empty pool of search caches, and building a cache costs more than a
/// match of a short string.
fn compile_go_regex(src: &str) -> Result<std::sync::Arc<GoRegex>, ReError> {
    type Compiled = Result<std::sync::Arc<GoRegex>, ReError>;
    static COMPILED: kiln_util::Memo<String, Compiled> = kiln_util::Memo::new();
    COMPILED.get_or_insert_with(src, || compile_go_regex_now(src).map(std::sync::Arc::new))
}

fn compile_go_regex_now(src: &str) -> Result<GoRegex, ReError> {
    let (pattern, names) = translate_go_regex(src)?;
    let re = regex::RegexBuilder::new(&pattern)
        .nest_limit(1000)
        .build()
        .map_err(|e| {
            let msg = e.to_string();
            let code = if msg.contains("size limit") {
                ERR_LARGE
            } else if msg.contains("nest") {
                ERR_NESTING_DEPTH
            } else {
                ERR_INVALID_PERL_OP
            };
            re_err(code, src)
        })?;
    Ok(GoRegex { re, names })
}

/// go-cty's `regexPatternResultType` (as an argument error for the pattern).
fn regex_result_type(re: &GoRegex) -> Result<Type, FuncError> {
    let groups = re.names.get(1..).unwrap_or_default();
    let unnamed = groups.iter().filter(|n| n.is_empty()).count();
    let named = groups.len() - unnamed;
    Ok(match (unnamed, named) {
        (0, 0) => Type::String,
        (u, n) if u > 0 && n > 0 => {
            return Err(FuncError::arg(
                0,
                "invalid regexp pattern: cannot mix both named and unnamed capture groups",
            ));
        }
        (u, _) if u > 0 => Type::Tuple(vec![Type::String; u]),
        _ => Type::Object(groups.iter().map(|n| (n.clone(), Type::String)).collect()),
    })
}

/// go-cty's `regexPatternResult`.
fn regex_match_value(re: &GoRegex, caps: &regex::Captures, ty: &Type) -> Value {
    let group = |i: usize| match caps.get(i) {
        Some(m) => Value::String(m.as_str().to_string()),
        None => Value::Null(Type::String),
    };
    match ty {
        Type::Tuple(ts) => Value::Tuple((1..=ts.len()).map(group).collect()),
        Type::Object(_) => {
            let mut m = BTreeMap::new();
            for (i, name) in re.names.iter().enumerate().skip(1) {
                m.insert(name.clone(), group(i));
            }
            Value::Object(m)
        }
        _ => group(0),
    }
}

fn compile_for_regex_fn(pattern: &str) -> Result<std::sync::Arc<GoRegex>, FuncError> {
    compile_go_regex(pattern).map_err(|e| {
        FuncError::arg(
            0,
            format!("invalid regexp pattern: {} in {}", e.code, e.expr),
        )
    })
}

fn regex_fn(args: &[Value]) -> Result<Value, FuncError> {
    let re = compile_for_regex_fn(str_arg(args, 0)?)?;
    let ty = regex_result_type(&re)?;
    let s = str_arg(args, 1)?;
    let caps = re
        .re
        .captures(s)
        .ok_or_else(|| failed("pattern did not match any part of the given string"))?;
    Ok(regex_match_value(&re, &caps, &ty))
}

fn regexall(args: &[Value]) -> Result<Value, FuncError> {
    let re = compile_for_regex_fn(str_arg(args, 0)?)?;
    let ty = regex_result_type(&re)?;
    let s = str_arg(args, 1)?;
    let elems: Vec<Value> = re
        .re
        .captures_iter(s)
        .map(|caps| regex_match_value(&re, &caps, &ty))
        .collect();
    Ok(Value::List(ty, elems))
}

/// Go's `Regexp.expand`: `$name`, `${name}`, `$1`, `$$`.
fn go_expand(out: &mut String, template: &str, re: &GoRegex, caps: &regex::Captures) {
    let mut t = template;
    while let Some(i) = t.find('$') {
        out.push_str(&t[..i]);
        t = &t[i + 1..];
        if let Some(rest) = t.strip_prefix('$') {
            out.push('$');
            t = rest;
            continue;
        }
        let Some((name, rest)) = go_expand_extract(t) else {
            out.push('$');
            continue;
        };
        t = rest;
        let num = if name.len() > 1 && name.starts_with('0') {
            None
        } else if name.bytes().all(|c| c.is_ascii_digit()) && name.len() <= 8 {
            name.parse::<usize>().ok()
        } else {
            None
        };
        match num {
            Some(n) => {
                if let Some(m) = caps.get(n) {
                    out.push_str(m.as_str());
                }
            }
            None => {
                for (i, n) in re.names.iter().enumerate() {
                    if n == name
                        && let Some(m) = caps.get(i)
                    {
                        out.push_str(m.as_str());
                        break;
                    }
                }
            }
        }
    }
    out.push_str(t);
}

/// Go's `extract`: the name after a `$` and the rest of the template.
fn go_expand_extract(s: &str) -> Option<(&str, &str)> {
    let (brace, body) = match s.strip_prefix('{') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let end = body
        .char_indices()
        .find(|&(_, c)| !(c == '_' || c.is_alphanumeric()))
        .map_or(body.len(), |(i, _)| i);
    if end == 0 {
        return None;
    }
    let name = &body[..end];
    let rest = &body[end..];
    if brace {
        let rest = rest.strip_prefix('}')?;
        return Some((name, rest));
    }
    Some((name, rest))
}

fn regex_replace(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let pattern = str_arg(args, 1)?;
    let template = str_arg(args, 2)?;
    let re = compile_go_regex(pattern)
        .map_err(|e| failed(format!("error parsing regexp: {}: `{}`", e.code, e.expr)))?;
    let mut out = String::new();
    let mut last = 0usize;
    for caps in re.re.captures_iter(s) {
        let Some(m) = caps.get(0) else { continue };
        out.push_str(s.get(last..m.start()).unwrap_or(""));
        go_expand(&mut out, template, &re, &caps);
        last = m.end();
        check_size(out.len())?;
    }
    out.push_str(s.get(last..).unwrap_or(""));
    check_size(out.len())?;
    string(out)
}

// ------------------------------------------------------------------ csvdecode

/// A port of Go's `encoding/csv.Reader` with its default settings (comma
/// separator, no comments, strict quotes).
struct CsvReader<'a> {
    data: &'a str,
    pos: usize,
    num_line: usize,
    fields_per_record: usize,
}

/// `csv.ParseError`, reduced to what go-cty reports.
struct CsvError {
    line: usize,
    msg: &'static str,
}

const CSV_BARE_QUOTE: &str = "bare \" in non-quoted-field";
const CSV_QUOTE: &str = "extraneous or missing \" in quoted-field";
const CSV_FIELD_COUNT: &str = "wrong number of fields";

fn length_nl(s: &str) -> usize {
    usize::from(s.ends_with('\n'))
}

impl<'a> CsvReader<'a> {
    fn new(data: &'a str) -> CsvReader<'a> {
        CsvReader {
            data,
            pos: 0,
            num_line: 0,
            fields_per_record: 0,
        }
    }

    /// `readLine`: the next line with its `\n` (CRLF normalised to LF), or
    /// `None` at the end of the input.
    fn read_line(&mut self) -> Option<String> {
        self.num_line += 1;
        let rest = self.data.get(self.pos..).unwrap_or("");
        if rest.is_empty() {
            return None;
        }
        let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let mut line = rest[..end].to_string();
        self.pos += end;
        if !line.ends_with('\n') && line.ends_with('\r') {
            line.pop();
        }
        if line.ends_with("\r\n") {
            line.truncate(line.len() - 2);
            line.push('\n');
        }
        Some(line)
    }

    /// `readRecord`: `Ok(None)` at the end of the input.
    fn read_record(&mut self) -> Result<Option<Vec<String>>, CsvError> {
        let mut line = loop {
            match self.read_line() {
                None => return Ok(None),
                Some(l) if l.len() == length_nl(&l) => continue,
                Some(l) => break l,
            }
        };
        let mut l = 0usize; // offset of the unparsed part of `line`
        let rec_line = self.num_line;
        let mut buf = String::new();
        let mut ends: Vec<usize> = Vec::new();
        let mut err: Option<CsvError> = None;
        'field: loop {
            let rest = line.get(l..).unwrap_or("");
            if !rest.starts_with('"') {
                let comma = rest.find(',');
                let field = match comma {
                    Some(i) => &rest[..i],
                    None => &rest[..rest.len() - length_nl(rest)],
                };
                if field.contains('"') {
                    err = Some(CsvError {
                        line: self.num_line,
                        msg: CSV_BARE_QUOTE,
                    });
                    break 'field;
                }
                buf.push_str(field);
                ends.push(buf.len());
                match comma {
                    Some(i) => {
                        l += i + 1;
                        continue 'field;
                    }
                    None => break 'field,
                }
            }
            // Quoted field.
            l += 1;
            loop {
                let rest = line.get(l..).unwrap_or("");
                if let Some(i) = rest.find('"') {
                    buf.push_str(&rest[..i]);
                    l += i + 1;
                    let rest = line.get(l..).unwrap_or("");
                    if rest.starts_with('"') {
                        buf.push('"');
                        l += 1;
                    } else if rest.starts_with(',') {
                        l += 1;
                        ends.push(buf.len());
                        continue 'field;
                    } else if length_nl(rest) == rest.len() {
                        ends.push(buf.len());
                        break 'field;
                    } else {
                        err = Some(CsvError {
                            line: self.num_line,
                            msg: CSV_QUOTE,
                        });
                        break 'field;
                    }
                } else if !rest.is_empty() {
                    buf.push_str(rest);
                    check_csv_size(buf.len())?;
                    line = self.read_line().unwrap_or_default();
                    l = 0;
                } else {
                    // Abrupt end of file.
                    err = Some(CsvError {
                        line: self.num_line,
                        msg: CSV_QUOTE,
                    });
                    break 'field;
                }
            }
        }
        if let Some(e) = err {
            return Err(e);
        }
        let mut fields = Vec::with_capacity(ends.len());
        let mut prev = 0usize;
        for &e in &ends {
            fields.push(buf.get(prev..e).unwrap_or("").to_string());
            prev = e;
        }
        if self.fields_per_record > 0 {
            if fields.len() != self.fields_per_record {
                return Err(CsvError {
                    line: rec_line,
                    msg: CSV_FIELD_COUNT,
                });
            }
        } else {
            self.fields_per_record = fields.len();
        }
        Ok(Some(fields))
    }
}

fn check_csv_size(len: usize) -> Result<(), CsvError> {
    if len > MAX_OUTPUT {
        Err(CsvError {
            line: 0,
            msg: "field too long",
        })
    } else {
        Ok(())
    }
}

fn csv_error(e: CsvError) -> FuncError {
    failed(format!("CSV parse error on line {}: {}", e.line, e.msg))
}

fn csvdecode(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0)?;
    let mut r = CsvReader::new(s);
    let headers = r
        .read_record()
        .map_err(csv_error)?
        .ok_or_else(|| failed("missing header line"))?;
    let mut atys = BTreeMap::new();
    for name in &headers {
        if atys.insert(name.clone(), Type::String).is_some() {
            return Err(failed(format!("duplicate column name {}", go_quote(name))));
        }
    }
    let mut rows = Vec::new();
    while let Some(cols) = r.read_record().map_err(csv_error)? {
        let obj: BTreeMap<String, Value> = headers
            .iter()
            .cloned()
            .zip(cols.into_iter().map(Value::String))
            .collect();
        rows.push(Value::Object(obj));
    }
    Ok(Value::List(Type::Object(atys), rows))
}

// ------------------------------------------------------------------ jsondecode

/// Go's `json.Decoder` token states.
#[derive(Clone, Copy, PartialEq)]
enum TokState {
    TopValue,
    ArrayStart,
    ArrayValue,
    ArrayComma,
    ObjectStart,
    ObjectKey,
    ObjectColon,
    ObjectValue,
    ObjectComma,
}

enum Tok {
    Open(u8),
    Close,
    Str(String),
    Num(String),
    Bool(bool),
    Null,
}

/// A port of Go's `json.Decoder.Token` (with `UseNumber`), producing Go's
/// syntax error messages.
struct JsonDecoder<'a> {
    s: &'a [u8],
    src: &'a str,
    pos: usize,
    state: TokState,
    stack: Vec<TokState>,
}

/// `encoding/json`'s `quoteChar`.
fn json_quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        _ => {
            let q = go_quote(&char::from(c).to_string());
            format!("'{}'", q.get(1..q.len() - 1).unwrap_or(""))
        }
    }
}

const UNEXPECTED_EOF: &str = "unexpected EOF";

impl<'a> JsonDecoder<'a> {
    fn new(src: &'a str) -> JsonDecoder<'a> {
        JsonDecoder {
            s: src.as_bytes(),
            src,
            pos: 0,
            state: TokState::TopValue,
            stack: Vec::new(),
        }
    }

    fn peek(&mut self) -> Option<u8> {
        while let Some(&c) = self.s.get(self.pos) {
            if matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
                self.pos += 1;
            } else {
                return Some(c);
            }
        }
        None
    }

    fn value_allowed(&self) -> bool {
        matches!(
            self.state,
            TokState::TopValue
                | TokState::ArrayStart
                | TokState::ArrayValue
                | TokState::ObjectValue
        )
    }

    fn value_end(&mut self) {
        self.state = match self.state {
            TokState::ArrayStart | TokState::ArrayValue => TokState::ArrayComma,
            TokState::ObjectValue => TokState::ObjectComma,
            s => s,
        };
    }

    fn token_error(&self, c: u8) -> String {
        let context = match self.state {
            TokState::TopValue
            | TokState::ArrayStart
            | TokState::ArrayValue
            | TokState::ObjectValue => " looking for beginning of value",
            TokState::ArrayComma => " after array element",
            TokState::ObjectKey => " looking for beginning of object key string",
            TokState::ObjectColon => " after object key",
            TokState::ObjectComma => " after object key:value pair",
            TokState::ObjectStart => "",
        };
        format!("invalid character {}{context}", json_quote_char(c))
    }

    fn token(&mut self) -> Result<Tok, String> {
        loop {
            let Some(c) = self.peek() else {
                return Err("EOF".into());
            };
            match c {
                b'[' | b'{' => {
                    if !self.value_allowed() {
                        return Err(self.token_error(c));
                    }
                    if self.stack.len() >= MAX_JSON_DEPTH {
                        return Err("exceeded max depth".into());
                    }
                    self.pos += 1;
                    self.stack.push(self.state);
                    self.state = if c == b'[' {
                        TokState::ArrayStart
                    } else {
                        TokState::ObjectStart
                    };
                    return Ok(Tok::Open(c));
                }
                b']' | b'}' => {
                    let ok = if c == b']' {
                        matches!(self.state, TokState::ArrayStart | TokState::ArrayComma)
                    } else {
                        matches!(self.state, TokState::ObjectStart | TokState::ObjectComma)
                    };
                    if !ok {
                        return Err(self.token_error(c));
                    }
                    self.pos += 1;
                    self.state = self.stack.pop().unwrap_or(TokState::TopValue);
                    self.value_end();
                    return Ok(Tok::Close);
                }
                b':' => {
                    if self.state != TokState::ObjectColon {
                        return Err(self.token_error(c));
                    }
                    self.pos += 1;
                    self.state = TokState::ObjectValue;
                }
                b',' => {
                    self.state = match self.state {
                        TokState::ArrayComma => TokState::ArrayValue,
                        TokState::ObjectComma => TokState::ObjectKey,
                        _ => return Err(self.token_error(c)),
                    };
                    self.pos += 1;
                }
                b'"' if matches!(self.state, TokState::ObjectStart | TokState::ObjectKey) => {
                    let s = self.scan_string()?;
                    self.state = TokState::ObjectColon;
                    return Ok(Tok::Str(s));
                }
                _ => {
                    if !self.value_allowed() {
                        return Err(self.token_error(c));
                    }
                    let t = self.scan_scalar(c)?;
                    self.value_end();
                    return Ok(t);
                }
            }
        }
    }

    /// `Decoder.More` at the top level.
    fn more(&mut self) -> bool {
        matches!(self.peek(), Some(c) if c != b']' && c != b'}')
    }

    fn scan_scalar(&mut self, c: u8) -> Result<Tok, String> {
        match c {
            b'"' => self.scan_string().map(Tok::Str),
            b'-' | b'0'..=b'9' => self.scan_number().map(Tok::Num),
            b't' => self.scan_literal("true").map(|()| Tok::Bool(true)),
            b'f' => self.scan_literal("false").map(|()| Tok::Bool(false)),
            b'n' => self.scan_literal("null").map(|()| Tok::Null),
            _ => Err(format!(
                "invalid character {} looking for beginning of value",
                json_quote_char(c)
            )),
        }
    }

    fn scan_literal(&mut self, word: &str) -> Result<(), String> {
        for (k, want) in word.bytes().enumerate().skip(1) {
            match self.s.get(self.pos + k) {
                None => return Err(UNEXPECTED_EOF.into()),
                Some(&c) if c != want => {
                    return Err(format!(
                        "invalid character {} in literal {word} (expecting {})",
                        json_quote_char(c),
                        json_quote_char(want)
                    ));
                }
                Some(_) => {}
            }
        }
        self.pos += word.len();
        Ok(())
    }

    fn scan_number(&mut self) -> Result<String, String> {
        let start = self.pos;
        let s = self.s;
        let mut i = self.pos;
        let digits = |i: &mut usize| {
            while s.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
        };
        if s.get(i) == Some(&b'-') {
            i += 1;
        }
        match s.get(i) {
            None => return Err(UNEXPECTED_EOF.into()),
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => digits(&mut i),
            Some(&c) => {
                return Err(format!(
                    "invalid character {} in numeric literal",
                    json_quote_char(c)
                ));
            }
        }
        if s.get(i) == Some(&b'.') {
            i += 1;
            match s.get(i) {
                None => return Err(UNEXPECTED_EOF.into()),
                Some(c) if c.is_ascii_digit() => digits(&mut i),
                Some(&c) => {
                    return Err(format!(
                        "invalid character {} after decimal point in numeric literal",
                        json_quote_char(c)
                    ));
                }
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(s.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            match s.get(i) {
                None => return Err(UNEXPECTED_EOF.into()),
                Some(c) if c.is_ascii_digit() => digits(&mut i),
                Some(&c) => {
                    return Err(format!(
                        "invalid character {} in exponent of numeric literal",
                        json_quote_char(c)
                    ));
                }
            }
        }
        self.pos = i;
        Ok(self.src.get(start..i).unwrap_or("").to_string())
    }

    /// Scans and unquotes a string starting at the opening quote.
    fn scan_string(&mut self) -> Result<String, String> {
        let s = self.s;
        let mut i = self.pos + 1;
        let mut out = String::new();
        let mut run_start = i;
        let hex4 = |i: usize| -> Option<u32> {
            let h = s.get(i..i + 4)?;
            let h = std::str::from_utf8(h).ok()?;
            u32::from_str_radix(h, 16).ok()
        };
        loop {
            let Some(&c) = s.get(i) else {
                return Err(UNEXPECTED_EOF.into());
            };
            match c {
                b'"' => {
                    out.push_str(self.src.get(run_start..i).unwrap_or(""));
                    self.pos = i + 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(self.src.get(run_start..i).unwrap_or(""));
                    let Some(&e) = s.get(i + 1) else {
                        return Err(UNEXPECTED_EOF.into());
                    };
                    i += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            for k in 0..4 {
                                match s.get(i + k) {
                                    None => return Err(UNEXPECTED_EOF.into()),
                                    Some(h) if h.is_ascii_hexdigit() => {}
                                    Some(&h) => {
                                        return Err(format!(
                                            "invalid character {} in \\u hexadecimal character escape",
                                            json_quote_char(h)
                                        ));
                                    }
                                }
                            }
                            let r = hex4(i).unwrap_or(0xFFFD);
                            i += 4;
                            if (0xD800..0xE000).contains(&r) {
                                // A surrogate: combine with a following \uDC00-\uDFFF
                                // escape, else U+FFFD (Go's unquote).
                                let low = if s.get(i) == Some(&b'\\') && s.get(i + 1) == Some(&b'u')
                                {
                                    hex4(i + 2)
                                } else {
                                    None
                                };
                                match low {
                                    Some(lo) if r < 0xDC00 && (0xDC00..0xE000).contains(&lo) => {
                                        let c = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
                                        out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                                        i += 6;
                                    }
                                    _ => out.push('\u{FFFD}'),
                                }
                            } else {
                                out.push(char::from_u32(r).unwrap_or('\u{FFFD}'));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "invalid character {} in string escape code",
                                json_quote_char(e)
                            ));
                        }
                    }
                    run_start = i;
                }
                c if c < 0x20 => {
                    return Err(format!(
                        "invalid character {} in string literal",
                        json_quote_char(c)
                    ));
                }
                _ => i += 1,
            }
        }
    }
}

/// Frames of the value being built by `jsondecode`.
enum JsonFrame {
    Array(Vec<Value>),
    Object(BTreeMap<String, Value>, Option<String>),
}

fn json_scalar(tok: Tok) -> Result<Value, String> {
    Ok(match tok {
        Tok::Str(s) => Value::String(s),
        Tok::Num(n) => match parse_number(&n) {
            Some(f) => Value::Number(f),
            None => return Err(format!("number {n} is out of range")),
        },
        Tok::Bool(b) => Value::Bool(b),
        _ => Value::null(),
    })
}

/// cty's `json.ImpliedType` + `json.Unmarshal`: objects become objects, arrays
/// tuples, nulls untyped nulls.
fn json_decode(src: &str) -> Result<Value, String> {
    let mut dec = JsonDecoder::new(src);
    let mut stack: Vec<JsonFrame> = Vec::new();
    let mut done: Option<Value> = None;
    while done.is_none() {
        let tok = dec.token()?;
        let value = match tok {
            Tok::Open(b'[') => {
                stack.push(JsonFrame::Array(Vec::new()));
                continue;
            }
            Tok::Open(_) => {
                stack.push(JsonFrame::Object(BTreeMap::new(), None));
                continue;
            }
            Tok::Close => match stack.pop() {
                Some(JsonFrame::Array(v)) => Value::Tuple(v),
                Some(JsonFrame::Object(m, _)) => Value::Object(m),
                None => return Err("unexpected end of JSON input".into()),
            },
            Tok::Str(s) => {
                if let Some(JsonFrame::Object(_, key @ None)) = stack.last_mut() {
                    *key = Some(s);
                    continue;
                }
                Value::String(s)
            }
            other => json_scalar(other)?,
        };
        match stack.last_mut() {
            None => done = Some(value),
            Some(JsonFrame::Array(v)) => v.push(value),
            Some(JsonFrame::Object(m, key)) => {
                if let Some(k) = key.take() {
                    m.insert(k, value);
                }
            }
        }
    }
    if dec.more() {
        return Err("extraneous data after JSON object".into());
    }
    Ok(done.unwrap_or_else(Value::null))
}

fn jsondecode(args: &[Value]) -> Result<Value, FuncError> {
    json_decode(str_arg(args, 0)?).map_err(failed)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::{FuncError, call_by_name};
    use crate::value::{Type, Value};

    fn s(v: &str) -> Value {
        Value::string(v)
    }
    fn n(v: f64) -> Value {
        Value::Number(v)
    }
    fn strs(vals: &[&str]) -> Vec<Value> {
        vals.iter().map(|v| s(v)).collect()
    }
    fn list(vals: &[&str]) -> Value {
        Value::List(Type::String, strs(vals))
    }
    fn tuple(vals: Vec<Value>) -> Value {
        Value::Tuple(vals)
    }
    fn obj(entries: &[(&str, Value)]) -> Value {
        Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn call(name: &str, args: Vec<Value>) -> Value {
        call_by_name(name, args).unwrap_or_else(|e| panic!("{name}: unexpected error {e:?}"))
    }
    fn call_s(name: &str, args: Vec<Value>) -> String {
        match call(name, args) {
            Value::String(v) => v,
            other => panic!("{name}: expected a string, got {other:?}"),
        }
    }
    fn err(name: &str, args: Vec<Value>) -> FuncError {
        match call_by_name(name, args) {
            Ok(v) => panic!("{name}: expected an error, got {v:?}"),
            Err(e) => e,
        }
    }
    fn err_msg(name: &str, args: Vec<Value>) -> String {
        match err(name, args) {
            FuncError::Arg { msg, .. } | FuncError::Failed(msg) | FuncError::Arity { msg } => msg,
        }
    }
    fn fmt(f: &str, args: Vec<Value>) -> Result<String, FuncError> {
        let mut all = vec![s(f)];
        all.extend(args);
        call_by_name("format", all).map(|v| match v {
            Value::String(v) => v,
            other => panic!("format returned {other:?}"),
        })
    }
    fn fmt_ok(f: &str, args: Vec<Value>) -> String {
        fmt(f, args).unwrap_or_else(|e| panic!("format({f:?}): {e:?}"))
    }
    fn fmt_err(f: &str, args: Vec<Value>) -> String {
        match fmt(f, args) {
            Ok(v) => panic!("format({f:?}): expected an error, got {v:?}"),
            Err(FuncError::Arg { msg, .. } | FuncError::Failed(msg) | FuncError::Arity { msg }) => {
                msg
            }
        }
    }

    // ---------------------------------------------------------------- simple strings

    #[test]
    fn upper_lower_follow_go_simple_case_mapping() {
        for (i, w) in [
            ("hello", "HELLO"),
            ("HELLO", "HELLO"),
            ("", ""),
            ("1", "1"),
            ("жж", "ЖЖ"),
            ("noël", "NOËL"),
            ("baﬄe", "BAﬄE"),
            ("😸😾", "😸😾"),
            ("straße", "STRAßE"),
            ("ᾳ", "ᾼ"),
        ] {
            assert_eq!(call_s("upper", vec![s(i)]), w, "upper({i})");
        }
        for (i, w) in [
            ("HELLO", "hello"),
            ("hello", "hello"),
            ("", ""),
            ("1", "1"),
            ("ЖЖ", "жж"),
            ("İ", "i"),
            ("ΟΔΟΣ", "οδοσ"),
        ] {
            assert_eq!(call_s("lower", vec![s(i)]), w, "lower({i})");
        }
        // HCL converts arguments to the parameter type.
        assert_eq!(call_s("upper", vec![n(1.0)]), "1");
        assert_eq!(call_s("lower", vec![Value::Bool(true)]), "true");
        assert_eq!(
            err_msg("upper", vec![Value::null()]),
            "argument must not be null"
        );
        assert_eq!(err_msg("upper", vec![list(&["a"])]), "string required");
    }

    #[test]
    fn title_uses_go_word_rules() {
        assert_eq!(call_s("title", vec![s("hello world")]), "Hello World");
        assert_eq!(
            call_s("title", vec![s("hello-world_foo bar.baz")]),
            "Hello-World_foo Bar.Baz"
        );
        assert_eq!(call_s("title", vec![s("élan vital")]), "Élan Vital");
        assert_eq!(call_s("title", vec![s("ǆemal")]), "ǅemal");
        assert_eq!(call_s("title", vec![s("x1y 2z")]), "X1y 2z");
        assert_eq!(call_s("title", vec![s("")]), "");
        assert_eq!(call_s("title", vec![n(12.0)]), "12");
    }

    #[test]
    fn chomp_removes_trailing_newlines() {
        for (i, w) in [
            ("hello world", "hello world"),
            ("hello world\n", "hello world"),
            ("hello world\n\n", "hello world"),
            ("hello world\r\n", "hello world"),
            ("hello world\r\n\r\n\n\r", "hello world"),
            ("hello\nworld", "hello\nworld"),
            ("\n", ""),
            ("", ""),
        ] {
            assert_eq!(call_s("chomp", vec![s(i)]), w, "chomp({i:?})");
        }
        assert_eq!(
            err_msg("chomp", vec![Value::null()]),
            "argument must not be null"
        );
    }

    #[test]
    fn indent_pads_all_but_first_line() {
        assert_eq!(
            call_s("indent", vec![n(2.0), s("foo\nbar\nbaz")]),
            "foo\n  bar\n  baz"
        );
        assert_eq!(call_s("indent", vec![n(4.0), s("single")]), "single");
        assert_eq!(call_s("indent", vec![s("1"), s("a\n")]), "a\n ");
    }

    #[test]
    fn indent_errors() {
        assert_eq!(
            err_msg("indent", vec![n(1.5), s("a")]),
            "value must be a whole number, between -9223372036854775808 and 9223372036854775807"
        );
        assert_eq!(
            err_msg("indent", vec![n(-1.0), s("a\nb")]),
            "panic in function implementation: strings: negative Repeat count"
        );
        // strings.Repeat runs (and panics) even when there is no newline.
        assert_eq!(
            err_msg("indent", vec![n(-1.0), s("no newline")]),
            "panic in function implementation: strings: negative Repeat count"
        );
        assert_eq!(
            err_msg("indent", vec![s("x"), s("a")]),
            "a number is required"
        );
        assert!(err_msg("indent", vec![n(1e12), s("a\nb")]).contains("longer than"));
        assert!(matches!(
            err("indent", vec![n(1.0)]),
            FuncError::Arity { .. }
        ));
    }

    #[test]
    fn join_concatenates_lists() {
        assert_eq!(
            call_s("join", vec![s(", "), list(&["a", "b", "c"])]),
            "a, b, c"
        );
        assert_eq!(
            call_s(
                "join",
                vec![s("-"), list(&["a"]), list(&[]), list(&["b", "c"])]
            ),
            "a-b-c"
        );
        assert_eq!(call_s("join", vec![s(","), list(&[])]), "");
        assert_eq!(
            call_s(
                "join",
                vec![s(","), tuple(vec![s("a"), n(1.0), Value::Bool(true)])]
            ),
            "a,1,true"
        );
        let set = Value::set(strs(&["b", "a"])).unwrap();
        assert_eq!(call_s("join", vec![s("+"), set]), "a+b");
    }

    #[test]
    fn join_errors() {
        assert_eq!(
            err_msg("join", vec![s(",")]),
            "at least one list is required"
        );
        assert_eq!(
            err("join", vec![s(","), tuple(vec![s("a"), Value::null()])]),
            FuncError::Arg {
                index: 1,
                msg: "element 1 is null; cannot concatenate null values".into()
            }
        );
        assert_eq!(
            err(
                "join",
                vec![s(","), list(&["x"]), tuple(vec![Value::null()])]
            ),
            FuncError::Arg {
                index: 2,
                msg: "element 0 of list 2 is null; cannot concatenate null values".into()
            }
        );
        assert_eq!(
            err_msg("join", vec![s(","), s("abc")]),
            "list of string required"
        );
        assert_eq!(
            err_msg("join", vec![s(","), Value::null()]),
            "argument must not be null"
        );
    }

    #[test]
    fn trim_family() {
        assert_eq!(call_s("trim", vec![s("?!hello?!"), s("!?")]), "hello");
        assert_eq!(call_s("trim", vec![s("foobar"), s("")]), "foobar");
        assert_eq!(call_s("trim", vec![s("  x "), s(" ")]), "x");
        assert_eq!(call_s("trim", vec![s("ééaéé"), s("é")]), "a");
        assert_eq!(
            call_s("trimprefix", vec![s("helloworld"), s("hello")]),
            "world"
        );
        assert_eq!(
            call_s("trimprefix", vec![s("helloworld"), s("cat")]),
            "helloworld"
        );
        assert_eq!(
            call_s("trimprefix", vec![s("hellohello"), s("hello")]),
            "hello"
        );
        assert_eq!(
            call_s("trimsuffix", vec![s("helloworld"), s("world")]),
            "hello"
        );
        assert_eq!(
            call_s("trimsuffix", vec![s("helloworld"), s("cat")]),
            "helloworld"
        );
        assert_eq!(
            call_s("trimspace", vec![s(" \t\n hello \r\n\u{a0}\u{3000}")]),
            "hello"
        );
        assert_eq!(call_s("trimspace", vec![s("\u{200b}x")]), "\u{200b}x");
        assert_eq!(call_s("trimspace", vec![n(5.0)]), "5");
        assert_eq!(
            err_msg("trim", vec![s("a"), Value::null()]),
            "argument must not be null"
        );
        assert!(matches!(
            err("trimprefix", vec![s("a")]),
            FuncError::Arity { .. }
        ));
    }

    #[test]
    fn replace_is_literal() {
        assert_eq!(call_s("replace", vec![s("hello"), s("l"), s("")]), "heo");
        assert_eq!(
            call_s("replace", vec![s("😸😸😸😾😾😾"), s("😾"), s("😸")]),
            "😸😸😸😸😸😸"
        );
        assert_eq!(call_s("replace", vec![s("a.b.c"), s("."), s("-")]), "a-b-c");
        // Slashes do not make the substring a regular expression.
        assert_eq!(call_s("replace", vec![s("abc"), s("/b/"), s("x")]), "abc");
        assert_eq!(call_s("replace", vec![s("abc"), s(""), s("-")]), "-a-b-c-");
        assert_eq!(call_s("replace", vec![n(1.5), s("."), s(",")]), "1,5");
        assert!(
            err_msg(
                "replace",
                vec![s(&"a".repeat(1000)), s(""), s(&"x".repeat(100_000))]
            )
            .contains("longer than")
        );
    }

    #[test]
    fn split_returns_a_list_of_strings() {
        assert_eq!(
            call("split", vec![s(","), s("a,b,c")]),
            list(&["a", "b", "c"])
        );
        assert_eq!(call("split", vec![s(","), s("")]), list(&[""]));
        assert_eq!(call("split", vec![s(","), s("abc")]), list(&["abc"]));
        assert_eq!(call("split", vec![s(","), s(",a,")]), list(&["", "a", ""]));
        assert_eq!(call("split", vec![s(""), s("añb")]), list(&["a", "ñ", "b"]));
        assert_eq!(call("split", vec![s(""), s("")]), list(&[]));
        assert_eq!(call("split", vec![s("."), n(1.5)]), list(&["1", "5"]));
        assert_eq!(
            call("split", vec![s(","), s("x")]).ty(),
            Type::list(Type::String)
        );
    }

    #[test]
    fn strlen_reverse_count_grapheme_clusters() {
        for (i, w) in [
            ("hello", 5.0),
            ("", 0.0),
            ("1", 1.0),
            ("Живой Журнал", 12.0),
            ("noe\u{308}l", 4.0),
            (
                "we\u{301}\u{301}\u{301}e\u{301}\u{301}\u{301}e\u{301}\u{301}\u{301}!",
                5.0,
            ),
            ("baﬄe", 4.0),
            ("😸😾", 2.0),
        ] {
            assert_eq!(call("strlen", vec![s(i)]), n(w), "strlen({i})");
        }
        for (i, w) in [
            ("hello", "olleh"),
            ("", ""),
            ("Живой Журнал", "ланруЖ йовиЖ"),
            ("noe\u{308}l", "le\u{308}on"),
            ("baﬄe", "eﬄab"),
            ("😸😾", "😾😸"),
        ] {
            assert_eq!(call_s("reverse", vec![s(i)]), w, "reverse({i})");
        }
        assert_eq!(call("strlen", vec![n(123.0)]), n(3.0));
    }

    #[test]
    fn substr_vectors_from_go_cty() {
        let e3 = "we\u{301}\u{301}\u{301}e\u{301}\u{301}\u{301}e\u{301}\u{301}\u{301}!";
        let ea = "e\u{301}\u{301}\u{301}";
        for (i, o, l, w) in [
            ("hello", 0.0, 2.0, "he".to_string()),
            ("hello", 1.0, 3.0, "ell".into()),
            ("hello", 1.0, -1.0, "ello".into()),
            ("hello", 1.0, -10.0, "ello".into()),
            ("hello", 1.0, 10.0, "ello".into()),
            ("hello", -3.0, -1.0, "llo".into()),
            ("hello", -3.0, 2.0, "ll".into()),
            ("hello", 10.0, 10.0, "".into()),
            ("hello", 0.0, 0.0, "".into()),
            ("hello", 5.0, 1.0, "".into()),
            ("hello", -10.0, 2.0, "he".into()),
            // go-cty quirk: a negative offset skips the zero-length short cut.
            ("hello", -3.0, 0.0, "llo".into()),
            ("noe\u{308}l", 0.0, 3.0, "noe\u{308}".into()),
            ("noe\u{308}l", 3.0, -1.0, "l".into()),
            (e3, 2.0, 2.0, format!("{ea}{ea}")),
            (e3, 3.0, 2.0, format!("{ea}!")),
            (e3, -2.0, -1.0, format!("{ea}!")),
            ("noe\u{308}l", -2.0, -1.0, "e\u{308}l".into()),
            ("😸😾", 0.0, 1.0, "😸".into()),
            ("😸😾", 1.0, 1.0, "😾".into()),
        ] {
            assert_eq!(
                call_s("substr", vec![s(i), n(o), n(l)]),
                w,
                "substr({i:?}, {o}, {l})"
            );
        }
        assert_eq!(call_s("substr", vec![s("hello"), s("1"), s("2")]), "el");
    }

    #[test]
    fn substr_errors() {
        let whole =
            "value must be a whole number, between -9223372036854775808 and 9223372036854775807";
        assert_eq!(err_msg("substr", vec![s("hello"), n(0.5), n(1.0)]), whole);
        assert_eq!(err_msg("substr", vec![s("hello"), n(0.0), n(1e300)]), whole);
        assert_eq!(
            err_msg("substr", vec![s("hello"), s("x"), n(1.0)]),
            "a number is required"
        );
        assert_eq!(
            err_msg("substr", vec![s("hello"), Value::null(), n(1.0)]),
            "argument must not be null"
        );
    }

    #[test]
    fn sanitize_vectors_from_buildx() {
        for (i, w) in [
            ("", ""),
            ("foo/bar", "foo_bar"),
            ("foobar", "foobar"),
            ("foo/bar.", "foo_bar_"),
            ("foo/bar..", "foo_bar__"),
            ("foo/bar...", "foo_bar___"),
            ("foo/🍕bar", "foo__bar"),
            ("foo/bar!@(ba+z)", "foo_bar___ba_z_"),
            ("A-Z_a-z0-9", "A-Z_a-z0-9"),
            ("é", "_"),
        ] {
            assert_eq!(call_s("sanitize", vec![s(i)]), w, "sanitize({i})");
        }
        assert_eq!(call_s("sanitize", vec![n(1.5)]), "1_5");
    }

    #[test]
    fn basename_dirname_vectors_from_buildx() {
        for (i, b, d) in [
            ("", ".", "."),
            ("/", "/", "/"),
            ("/foo/bar", "bar", "/foo"),
            ("foo/bar", "bar", "foo"),
            ("/foo/bar.", "bar.", "/foo"),
            ("/foo/bar..", "bar..", "/foo"),
            ("/foo/bar...", "bar...", "/foo"),
            ("foo", "foo", "."),
            ("foo/", "foo", "foo"),
            ("//a//b//", "b", "/a/b"),
            ("a/./b/../../c/d", "d", "c"),
            ("../../x", "x", "../.."),
            ("/../x", "x", "/"),
            ("a/../../b/c", "c", "../b"),
        ] {
            assert_eq!(call_s("basename", vec![s(i)]), b, "basename({i:?})");
            assert_eq!(call_s("dirname", vec![s(i)]), d, "dirname({i:?})");
        }
        assert_eq!(
            err_msg("basename", vec![Value::null()]),
            "argument must not be null"
        );
    }

    #[test]
    fn homedir_reads_home() {
        match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => {
                assert_eq!(call_s("homedir", vec![]), h.to_string_lossy());
            }
            _ => assert_eq!(err_msg("homedir", vec![]), "$HOME is not defined"),
        }
        assert!(matches!(
            err("homedir", vec![s("x")]),
            FuncError::Arity { .. }
        ));
    }

    #[test]
    fn bytes_functions_reject_every_bake_value() {
        let bytes = FuncError::Arg {
            index: 0,
            msg: "bytes required".into(),
        };
        assert_eq!(err("byteslen", vec![s("abc")]), bytes);
        assert_eq!(err("byteslen", vec![list(&["a"])]), bytes);
        assert_eq!(err("bytesslice", vec![s("abc"), n(0.0), n(1.0)]), bytes);
        assert_eq!(
            err_msg("byteslen", vec![Value::null()]),
            "argument must not be null"
        );
        assert!(matches!(
            err("bytesslice", vec![s("abc")]),
            FuncError::Arity { .. }
        ));
    }

    // ---------------------------------------------------------------- format

    #[test]
    fn format_defaults_and_literals() {
        assert_eq!(fmt_ok("", vec![]), "");
        assert_eq!(fmt_ok("hello", vec![]), "hello");
        assert_eq!(fmt_ok("100%% successful", vec![]), "100% successful");
        assert_eq!(fmt_ok("100%%", vec![]), "100%");
        assert_eq!(fmt_ok("string %v", vec![s("hello")]), "string hello");
        assert_eq!(
            fmt_ok("string %[2]v", vec![Value::Bool(true), s("hello")]),
            "string hello"
        );
        assert_eq!(fmt_ok("string %#v", vec![s("hello")]), "string \"hello\"");
        assert_eq!(fmt_ok("number %v", vec![n(2.0)]), "number 2");
        assert_eq!(fmt_ok("number %#v", vec![n(2.0)]), "number 2");
        assert_eq!(fmt_ok("bool %v", vec![Value::Bool(true)]), "bool true");
        assert_eq!(fmt_ok("bool %#v", vec![Value::Bool(true)]), "bool true");
        assert_eq!(
            fmt_ok("object %v", vec![Value::empty_object()]),
            "object {}"
        );
        assert_eq!(fmt_ok("tuple %v", vec![Value::empty_tuple()]), "tuple []");
        assert_eq!(fmt_ok("%%%v", vec![Value::Bool(false)]), "%false");
        assert_eq!(fmt_ok("%v", vec![Value::Null(Type::Bool)]), "null");
        assert_eq!(fmt_ok("%v", vec![Value::null()]), "null");
        assert_eq!(
            fmt_ok("%v", vec![tuple(vec![n(1.0), s("a<b"), Value::null()])]),
            "[1,\"a\\u003cb\",null]"
        );
        assert_eq!(
            fmt_ok("%v", vec![obj(&[("b", n(0.5)), ("a", list(&["x"]))])]),
            r#"{"a":["x"],"b":0.5}"#
        );
        assert_eq!(fmt_ok("%v", vec![n(1e6)]), "1e+06");
        assert_eq!(fmt_ok("%v", vec![n(123456.0)]), "123456");
        assert_eq!(fmt_ok("%v", vec![n(0.0001)]), "0.0001");
        assert_eq!(fmt_ok("%v", vec![n(0.00001)]), "1e-05");
        assert_eq!(fmt_ok("%v", vec![n(-2.5)]), "-2.5");
        assert_eq!(fmt_ok("%#v", vec![n(1e6)]), "1000000");
        assert_eq!(
            fmt_ok("%6v|%-6v|%06v", vec![Value::Bool(true), n(1.0), s("ab")]),
            "  true|1     |0000ab"
        );
        assert_eq!(fmt_ok("café %s", vec![s("ok")]), "café ok");
    }

    #[test]
    fn format_strings() {
        assert_eq!(
            fmt_ok("Hello, %s!", vec![s("Ermintrude")]),
            "Hello, Ermintrude!"
        );
        assert_eq!(
            fmt_ok("Hello, %[2]s!", vec![s("Stephen"), s("Ermintrude")]),
            "Hello, Ermintrude!"
        );
        assert_eq!(
            fmt_ok(
                "Hello, %q... if that _is_ your real name!",
                vec![s("Ermintrude")]
            ),
            "Hello, \"Ermintrude\"... if that _is_ your real name!"
        );
        assert_eq!(
            fmt_ok("This statement is %s", vec![Value::Bool(false)]),
            "This statement is false"
        );
        assert_eq!(
            fmt_ok("This statement is %q", vec![Value::Bool(false)]),
            "This statement is \"false\""
        );
        assert_eq!(fmt_ok("%10s", vec![s("hello")]), "     hello");
        assert_eq!(fmt_ok("%-10s", vec![s("hello")]), "hello     ");
        assert_eq!(fmt_ok("%4s", vec![s("💃🏿")]), "   💃🏿");
        assert_eq!(fmt_ok("%-4s", vec![s("💃🏿")]), "💃🏿   ");
        assert_eq!(fmt_ok("%q", vec![s("💃🏿")]), "\"💃🏿\"");
        assert_eq!(fmt_ok("%6q", vec![s("💃🏿")]), "   \"💃🏿\"");
        assert_eq!(fmt_ok("%-6q", vec![s("💃🏿")]), "\"💃🏿\"   ");
        assert_eq!(fmt_ok("%.2s", vec![s("hello")]), "he");
        assert_eq!(fmt_ok("%.2q", vec![s("hello")]), "\"he\"");
        assert_eq!(fmt_ok("%.5s", vec![s("日本語日本語")]), "日本語日本");
        assert_eq!(fmt_ok("%.1q", vec![s("日本語日本語")]), "\"日\"");
        assert_eq!(fmt_ok("%.10s", vec![s("hello")]), "hello");
        assert_eq!(fmt_ok("%.0s", vec![s("hello")]), "hello");
        assert_eq!(fmt_ok("%4.2s", vec![s("hello")]), "  he");
        assert_eq!(fmt_ok("%6.2q", vec![s("hello")]), "  \"he\"");
        assert_eq!(fmt_ok("%-4.2s", vec![s("hello")]), "he  ");
        assert_eq!(fmt_ok("%q", vec![s("Hello\nWorld")]), "\"Hello\\nWorld\"");
        assert_eq!(
            fmt_ok("%q", vec![s("<&>\u{1}\u{8}\u{2028}")]),
            "\"\\u003c\\u0026\\u003e\\u0001\\b\\u2028\""
        );
        assert_eq!(fmt_ok("%s", vec![n(1.5)]), "1.5");
        assert_eq!(fmt_ok("%05s", vec![s("ab")]), "000ab");
    }

    #[test]
    fn format_bools() {
        assert_eq!(
            fmt_ok("This statement is %t", vec![Value::Bool(false)]),
            "This statement is false"
        );
        assert_eq!(
            fmt_ok(
                "This statement is %[2]t",
                vec![Value::Bool(true), Value::Bool(false)]
            ),
            "This statement is false"
        );
        assert_eq!(
            fmt_ok("This statement is %t", vec![Value::Bool(true)]),
            "This statement is true"
        );
        assert_eq!(
            fmt_ok("This statement is %t", vec![s("false")]),
            "This statement is false"
        );
        assert_eq!(fmt_ok("%10t", vec![Value::Bool(true)]), "true");
        assert_eq!(
            fmt_err("%t", vec![n(1.0)]),
            "unsupported value for \"%t\" at 0: bool required"
        );
        assert_eq!(
            fmt_err("%t", vec![s("yes")]),
            "unsupported value for \"%t\" at 0: a bool is required"
        );
    }

    #[test]
    fn format_integers() {
        let bottles = "green bottles standing on the wall";
        assert_eq!(
            fmt_ok(&format!("%d {bottles}"), vec![n(10.0)]),
            format!("10 {bottles}")
        );
        assert_eq!(fmt_ok("%[2]d things", vec![n(1.0), n(10.0)]), "10 things");
        assert_eq!(
            fmt_ok(&format!("%+d {bottles}"), vec![n(10.0)]),
            format!("+10 {bottles}")
        );
        assert_eq!(
            fmt_ok(&format!("% d {bottles}"), vec![n(10.0)]),
            format!(" 10 {bottles}")
        );
        assert_eq!(
            fmt_ok(&format!("%5d {bottles}"), vec![n(10.0)]),
            format!("   10 {bottles}")
        );
        assert_eq!(
            fmt_ok(&format!("%-5d {bottles}"), vec![n(10.0)]),
            format!("10    {bottles}")
        );
        assert_eq!(
            fmt_err(&format!("%d {bottles}"), vec![Value::Bool(true)]),
            "unsupported value for \"%d\" at 0: number required"
        );
        assert_eq!(fmt_ok("%b", vec![n(5.0)]), "101");
        assert_eq!(fmt_ok("%o", vec![n(9.0)]), "11");
        assert_eq!(fmt_ok("%x", vec![n(254.0)]), "fe");
        assert_eq!(fmt_ok("%X", vec![n(254.0)]), "FE");
        assert_eq!(fmt_ok("%x", vec![n(-255.0)]), "-ff");
        assert_eq!(
            fmt_ok("%#x|%#X|%#o|%#b", vec![n(255.0), n(255.0), n(8.0), n(5.0)]),
            "0xff|0XFF|010|0b101"
        );
        assert_eq!(
            fmt_ok("%05d|%-05d|%+05d", vec![n(42.0), n(42.0), n(42.0)]),
            "00042|42   |+0042"
        );
        assert_eq!(
            fmt_ok("%.3d|%6.3d|%06.3d", vec![n(7.0), n(7.0), n(7.0)]),
            "007|   007|   007"
        );
        assert_eq!(
            fmt_ok("[%.0d]|[%5.0d]|[%.0d]", vec![n(0.0), n(0.0), n(3.0)]),
            "[]|[]|[3]"
        );
        assert_eq!(fmt_ok("%d", vec![s("12")]), "12");
        assert_eq!(fmt_ok("%d", vec![n(1e20)]), "100000000000000000000");
        assert_eq!(
            fmt_ok("%d", vec![n(-9007199254740993.0)]),
            "-9007199254740992"
        );
        assert_eq!(fmt_ok("%x", vec![n(2f64.powi(70))]), "400000000000000000");
        assert_eq!(fmt_ok("%d", vec![n(1e300)]).len(), 301);
        assert_eq!(
            fmt_ok("%b", vec![n(2f64.powi(100))]),
            format!("1{}", "0".repeat(100))
        );
        assert_eq!(
            fmt_err("%d", vec![n(1.5)]),
            "unsupported value for \"%d\" at 0: an integer is required"
        );
        assert_eq!(
            fmt_err("%d", vec![s("abc")]),
            "unsupported value for \"%d\" at 0: a number is required"
        );
        assert_eq!(
            fmt_err("%d", vec![Value::Null(Type::Number)]),
            "unsupported value for \"%d\" at 0: null value cannot be formatted"
        );
    }

    #[test]
    fn format_floats() {
        assert_eq!(fmt_ok("%f things", vec![n(10.0)]), "10.000000 things");
        assert_eq!(
            fmt_ok("%[2]f things", vec![n(1.0), n(10.0)]),
            "10.000000 things"
        );
        assert_eq!(fmt_ok("%+f things", vec![n(10.0)]), "+10.000000 things");
        assert_eq!(fmt_ok("% f things", vec![n(10.0)]), " 10.000000 things");
        assert_eq!(fmt_ok("%+f things", vec![n(-10.0)]), "-10.000000 things");
        assert_eq!(fmt_ok("% f things", vec![n(-10.0)]), "-10.000000 things");
        assert_eq!(
            fmt_ok(
                "%f things",
                vec![s("1.00000000000000000000000000000000000001")]
            ),
            "1.000000 things"
        );
        assert_eq!(
            fmt_ok(
                "%.4f things",
                vec![s("1.00000000000000000000000000000000000001")]
            ),
            "1.0000 things"
        );
        assert_eq!(fmt_ok("%.1f things", vec![s("1.06")]), "1.1 things");
        assert_eq!(fmt_ok("%e things", vec![n(1000.0)]), "1.000000e+03 things");
        assert_eq!(fmt_ok("%E things", vec![n(1000.0)]), "1.000000E+03 things");
        assert_eq!(fmt_ok("%g things", vec![n(1000.0)]), "1000 things");
        assert_eq!(fmt_ok("%G things", vec![n(1000.0)]), "1000 things");
        assert_eq!(
            fmt_ok("%g things", vec![s("0.00000000000000000000001")]),
            "1e-23 things"
        );
        assert_eq!(
            fmt_ok("%G things", vec![s("0.00000000000000000000001")]),
            "1E-23 things"
        );
        assert_eq!(
            fmt_ok("%.0f|%.0f|%.0f|%.0f", vec![n(0.5), n(1.5), n(2.5), n(0.6)]),
            "0|2|2|1"
        );
        assert_eq!(
            fmt_ok("%.2f|%.1f|%.1f", vec![n(0.125), n(0.05), n(0.04)]),
            "0.12|0.1|0.0"
        );
        assert_eq!(
            fmt_ok("%5.1f|%-7.2f|%08.3f", vec![n(1.23456), n(2.5), n(-1.23456)]),
            "  1.2|2.50   |-001.235"
        );
        assert_eq!(
            fmt_ok(
                "%.3g|%.3g|%.10g|%.0g",
                vec![n(1.23456), n(1234567.0), n(0.1), n(7.5)]
            ),
            "1.23|1.23e+06|0.1|8"
        );
        assert_eq!(
            fmt_ok("%g|%g|%g", vec![n(100000.0), n(1e6), n(1.5e-5)]),
            "100000|1e+06|1.5e-05"
        );
        assert_eq!(
            fmt_ok("%e|%.2e|%.0e", vec![n(0.0), n(123456.0), n(5.5)]),
            "0.000000e+00|1.23e+05|6e+00"
        );
        assert_eq!(fmt_ok("%.3e", vec![n(1e-300)]), "1.000e-300");
        assert_eq!(fmt_ok("%f", vec![n(1e21)]), "1000000000000000000000.000000");
        assert_eq!(fmt_ok("%.20f", vec![n(0.1)]), "0.10000000000000000555");
        assert_eq!(fmt_ok("%f", vec![n(f64::INFINITY)]), "+Inf");
        assert_eq!(
            fmt_ok(
                "%6f|%-6f|%06f",
                vec![n(f64::NEG_INFINITY), n(f64::INFINITY), n(f64::INFINITY)]
            ),
            "  -Inf|+Inf  |  +Inf"
        );
        assert_eq!(
            fmt_err("%f", vec![list(&[])]),
            "unsupported value for \"%f\" at 0: number required"
        );
    }

    #[test]
    fn format_errors() {
        assert_eq!(
            fmt_err("%s", vec![Value::Null(Type::String)]),
            "unsupported value for \"%s\" at 0: null value cannot be formatted"
        );
        assert_eq!(
            fmt_err("%s is not in the args list", vec![]),
            "not enough arguments for \"%s\" at 0: need index 1 but have 0 total"
        );
        assert_eq!(
            fmt_err(
                "%[3]s is not in the args list",
                vec![Value::Bool(true), Value::Bool(true)]
            ),
            "not enough arguments for \"%[3]s\" at 0: need index 3 but have 2 total"
        );
        assert_eq!(
            fmt_err(
                "%[0]s is not valid because args are 1-based",
                vec![Value::Bool(true), Value::Bool(true)]
            ),
            "unrecognized format character '0' at offset 2"
        );
        assert_eq!(
            fmt_err("%v %v %v", vec![Value::Bool(true), Value::Bool(true)]),
            "not enough arguments for \"%v\" at 6: need index 3 but have 2 total"
        );
        assert_eq!(
            fmt_err("%z is not a valid sequence", vec![n(10.0)]),
            "unsupported format verb 'z' in \"%z\" at offset 0"
        );
        assert_eq!(
            fmt_err("%#z is not a valid sequence", vec![n(10.0)]),
            "unsupported format verb 'z' in \"%#z\" at offset 0"
        );
        assert_eq!(
            fmt_err("%012z is not a valid sequence", vec![n(10.0)]),
            "unsupported format verb 'z' in \"%012z\" at offset 0"
        );
        assert_eq!(
            fmt_err("%☠ is not a valid sequence", vec![n(10.0)]),
            "unrecognized format character '☠' at offset 1"
        );
        assert_eq!(
            fmt_err("%💃🏿 is not a valid sequence", vec![n(10.0)]),
            "unrecognized format character '💃' at offset 1"
        );
        assert_eq!(
            fmt_err("%\n", vec![n(10.0)]),
            "unrecognized format character '\\n' at offset 1"
        );
        assert_eq!(
            fmt_err("%'", vec![n(10.0)]),
            "unrecognized format character '\\'' at offset 1"
        );
        assert_eq!(
            fmt_err("abc%", vec![]),
            "invalid format string starting at offset 4"
        );
        assert_eq!(
            fmt_err("%5", vec![n(1.0)]),
            "invalid format string starting at offset 2"
        );
        assert_eq!(
            fmt_err("%[1", vec![n(1.0)]),
            "invalid format string starting at offset 3"
        );
        assert_eq!(
            fmt_err("%[1x", vec![n(1.0)]),
            "unrecognized format character 'x' at offset 3"
        );
        assert_eq!(
            fmt_err("%5[1]d", vec![n(1.0)]),
            "unrecognized format character '[' at offset 2"
        );
        assert_eq!(
            fmt_err("%.*d", vec![n(1.0)]),
            "unrecognized format character '*' at offset 2"
        );
        assert_eq!(
            fmt_err("%s", vec![list(&["a"])]),
            "unsupported value for \"%s\" at 0: string required"
        );
        assert_eq!(
            fmt_err("%9999999s", vec![s("a")]),
            "unsupported value for \"%9999999s\" at 0: width or precision too large"
        );
        assert_eq!(
            fmt("no format verbs at all", vec![n(10.0)]),
            Err(FuncError::Arg {
                index: 1,
                msg: "too many arguments; no verbs in format string".into()
            })
        );
        assert_eq!(
            fmt("only one verb %d", vec![n(10.0), n(11.0)]),
            Err(FuncError::Arg {
                index: 2,
                msg: "too many arguments; only 1 used by format string".into()
            })
        );
        assert_eq!(fmt_ok("%[2]d %d", vec![n(1.0), n(2.0), n(3.0)]), "2 3");
        assert_eq!(fmt_ok("%[2]d %[1]d", vec![n(1.0), n(2.0)]), "2 1");
        assert_eq!(
            err_msg("format", vec![Value::null(), n(10.0)]),
            "argument must not be null"
        );
        assert_eq!(fmt_ok("%s", vec![n(1.0)]), "1");
        assert_eq!(call_s("format", vec![n(7.0)]), "7");
        assert!(matches!(err("format", vec![]), FuncError::Arity { .. }));
    }

    #[test]
    fn formatlist_vectors_from_go_cty() {
        let fl = |f: &str, args: Vec<Value>| {
            let mut all = vec![s(f)];
            all.extend(args);
            call_by_name("formatlist", all)
        };
        assert_eq!(fl("", vec![]), Ok(list(&[""])));
        assert_eq!(fl("hello", vec![]), Ok(list(&["hello"])));
        assert_eq!(
            fl("100%% successful", vec![]),
            Ok(list(&["100% successful"]))
        );
        assert_eq!(fl("100%%", vec![]), Ok(list(&["100%"])));
        assert_eq!(fl("%s", vec![s("hello")]), Ok(list(&["hello"])));
        assert_eq!(fl("%s", vec![list(&["hello"])]), Ok(list(&["hello"])));
        assert_eq!(
            fl("%s", vec![list(&["hello", "world"])]),
            Ok(list(&["hello", "world"]))
        );
        assert_eq!(
            fl(
                "%s %s",
                vec![list(&["hello", "goodbye"]), list(&["world", "universe"])]
            ),
            Ok(list(&["hello world", "goodbye universe"]))
        );
        assert_eq!(
            fl("%s %s", vec![list(&["hello", "goodbye"]), s("world")]),
            Ok(list(&["hello world", "goodbye world"]))
        );
        assert_eq!(
            fl("%s %s", vec![s("hello"), list(&["world", "universe"])]),
            Ok(list(&["hello world", "hello universe"]))
        );
        assert_eq!(
            fl("%s %s", vec![list(&["hello", "goodbye"]), list(&["world"])]),
            Err(FuncError::Arg {
                index: 2,
                msg: "argument 2 has length 1, which is inconsistent with argument 1 of length 2"
                    .into()
            })
        );
        assert_eq!(
            fl("%s", vec![Value::empty_object()]),
            Err(FuncError::Failed(
                "error on format iteration 0: unsupported value for \"%s\" at 0: string required"
                    .into()
            ))
        );
        assert_eq!(fl("%v", vec![Value::empty_tuple()]), Ok(list(&[])));
        assert_eq!(
            fl("%v", vec![Value::Null(Type::list(Type::String))]),
            Ok(list(&["null"]))
        );
        assert_eq!(
            fl("%v", vec![Value::Null(Type::String)]),
            Ok(list(&["null"]))
        );
        assert_eq!(
            fl(
                "%v",
                vec![Value::List(
                    Type::Tuple(vec![Type::String]),
                    vec![tuple(strs(&["hello"])), tuple(strs(&["world"]))]
                )]
            ),
            Ok(list(&["[\"hello\"]", "[\"world\"]"]))
        );
        assert_eq!(
            fl(
                "%s=%d",
                vec![tuple(vec![s("a"), s("b")]), tuple(vec![n(1.0), n(2.0)])]
            ),
            Ok(list(&["a=1", "b=2"]))
        );
        let set = Value::set(strs(&["y", "x"])).unwrap();
        assert_eq!(fl("<%s>", vec![set]), Ok(list(&["<x>", "<y>"])));
        assert_eq!(
            fl("%s", vec![list(&["a"]), s("extra")]),
            Err(FuncError::Failed(
                "error on format iteration 0: too many arguments; only 1 used by format string"
                    .into()
            ))
        );
        assert_eq!(
            fl("%s %s", vec![s("a")]),
            Err(FuncError::Failed(
                "error on format iteration 0: not enough arguments for \"%s\" at 3: need index 2 but have 1 total".into()
            ))
        );
        assert_eq!(
            fl("%", vec![]),
            Err(FuncError::Failed(
                "invalid format string starting at offset 1".into()
            ))
        );
        assert_eq!(
            call("formatlist", vec![s("%s"), list(&[])]).ty(),
            Type::list(Type::String)
        );
    }

    // ---------------------------------------------------------------- regex

    #[test]
    fn regex_vectors_from_go_cty() {
        assert_eq!(
            call("regex", vec![s("[a-z]+"), s("135abc456def789")]),
            s("abc")
        );
        assert_eq!(
            call("regex", vec![s("([0-9]*)([a-z]*)"), s("135abc456def")]),
            tuple(strs(&["135", "abc"]))
        );
        let uri = r"^(?:(?P<scheme>[^:/?#]+):)?(?://(?P<authority>[^/?#]*))?(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?";
        let want = obj(&[
            ("scheme", s("http")),
            ("authority", s("www.ics.uci.edu")),
            ("path", s("/pub/ietf/uri/")),
            ("query", Value::Null(Type::String)),
            ("fragment", s("Related")),
        ]);
        assert_eq!(
            call(
                "regex",
                vec![s(uri), s("http://www.ics.uci.edu/pub/ietf/uri/#Related")]
            ),
            want
        );
        assert_eq!(
            call(
                "regexall",
                vec![s(uri), s("http://www.ics.uci.edu/pub/ietf/uri/#Related")]
            ),
            Value::List(want.ty(), vec![want])
        );
        assert_eq!(
            call("regexall", vec![s("[a-z]+"), s("135abc456def789")]),
            list(&["abc", "def"])
        );
        assert_eq!(
            call("regexall", vec![s("([0-9]*)([a-z]*)"), s("135abc456def")]),
            Value::List(
                Type::Tuple(vec![Type::String, Type::String]),
                vec![tuple(strs(&["135", "abc"])), tuple(strs(&["456", "def"]))]
            )
        );
        assert_eq!(
            call("regexall", vec![s("a."), s("paranormal")]),
            list(&["ar", "an", "al"])
        );
        assert_eq!(
            call("regexall", vec![s("a*"), s("baaab")]),
            list(&["", "aaa", ""])
        );
        let none = call("regexall", vec![s("(x)(y)"), s("abc")]);
        assert_eq!(
            none,
            Value::List(Type::Tuple(vec![Type::String, Type::String]), vec![])
        );
        assert_eq!(
            call("regex", vec![s("(a)|(b)"), s("b")]),
            tuple(vec![Value::Null(Type::String), s("b")])
        );
        assert_eq!(
            call("regex", vec![s("(?P<x>a)(?P<x>b)?"), s("a")]),
            obj(&[("x", Value::Null(Type::String))])
        );
        assert_eq!(call("regex", vec![s("[0-9]+"), n(12345.0)]), s("12345"));
    }

    #[test]
    fn regex_errors() {
        assert_eq!(
            err("regex", vec![s("[a-z]+"), s("123")]),
            FuncError::Failed("pattern did not match any part of the given string".into())
        );
        assert_eq!(
            err("regex", vec![s("(?P<a>x)(y)"), s("xy")]),
            FuncError::Arg {
                index: 0,
                msg: "invalid regexp pattern: cannot mix both named and unnamed capture groups"
                    .into()
            }
        );
        assert_eq!(
            err("regexall", vec![s("("), s("x")]),
            FuncError::Arg {
                index: 0,
                msg: "invalid regexp pattern: missing closing ) in (".into()
            }
        );
        for (pat, want) in [
            ("a)", "unexpected ) in a)"),
            ("[a", "missing closing ] in [a"),
            ("x[]", "missing closing ] in []"),
            ("*a", "missing argument to repetition operator in *"),
            ("a|*", "missing argument to repetition operator in *"),
            ("a**", "invalid nested repetition operator in **"),
            ("a*?+", "invalid nested repetition operator in *?+"),
            ("a{2}{3}", "invalid nested repetition operator in {2}{3}"),
            ("a{1001}", "invalid repeat count in {1001}"),
            ("a{3,2}", "invalid repeat count in {3,2}"),
            (r"\q", r"invalid escape sequence in \q"),
            (r"\1", r"invalid escape sequence in \1"),
            (r"\8", r"invalid escape sequence in \8"),
            (r"\C", r"invalid escape sequence in \C"),
            (r"\xZZ", r"invalid escape sequence in \xZZ"),
            (r"\x{}", r"invalid escape sequence in \x{}"),
            ("a\\", "trailing backslash at end of expression in "),
            ("[z-a]", "invalid character class range in z-a"),
            ("[[:foo:]]", "invalid character class range in [:foo:]"),
            (r"\p{Foo}", r"invalid character class range in \p{Foo}"),
            (r"\pX", r"invalid character class range in \pX"),
            ("(?x)a", "invalid or unsupported Perl syntax in (?x"),
            ("(?=a)", "invalid or unsupported Perl syntax in (?="),
            ("(?P=a)", "invalid or unsupported Perl syntax in (?P"),
            ("(?i", "invalid or unsupported Perl syntax in (?i"),
            ("(?P<a", "invalid named capture in (?P<a"),
            ("(?<=a)b", "invalid named capture in (?<=a)b"),
            ("(?P<a-b>x)", "invalid named capture in (?P<a-b>"),
            ("(?i-)", "invalid or unsupported Perl syntax in (?i-)"),
        ] {
            assert_eq!(
                err_msg("regex", vec![s(pat), s("x")]),
                format!("invalid regexp pattern: {want}"),
                "pattern {pat:?}"
            );
        }
    }

    #[test]
    fn regex_uses_go_syntax_and_semantics() {
        let m = |p: &str, t: &str| call_by_name("regex", vec![s(p), s(t)]);
        // Perl classes and word boundaries are ASCII-only in Go.
        assert_eq!(m(r"\d+", "x٣4"), Ok(s("4")));
        assert_eq!(m(r"\w+", "éa_1"), Ok(s("a_1")));
        assert_eq!(m(r"[\s]+", "a \u{a0}\t b"), Ok(s(" ")));
        assert_eq!(m(r"\bx", "éx"), Ok(s("x")));
        assert_eq!(m(r"[^\d\s]+", "12 ab 3"), Ok(s("ab")));
        assert_eq!(m(r"[\D]+", "12ab3"), Ok(s("ab")));
        // Octal and hex escapes, quoting, literal braces and brackets.
        assert_eq!(m(r"\101\x42\x{43}", "ABC"), Ok(s("ABC")));
        assert_eq!(m(r"\Q.*+\E+", ".*+++"), Ok(s(".*+++")));
        assert_eq!(m(r"a{,2}", "a{,2}"), Ok(s("a{,2}")));
        assert_eq!(m(r"x{01}", "x{01}"), Ok(s("x{01}")));
        assert_eq!(m(r"[[a]+", "[a[b"), Ok(s("[a[")));
        assert_eq!(m(r"[a&&b]+", "a&&b"), Ok(s("a&&b")));
        assert_eq!(m(r"[a-]+", "-a-"), Ok(s("-a-")));
        assert_eq!(m(r"[]a]+", "]a]"), Ok(s("]a]")));
        assert_eq!(m(r"\<a\>", "<a>"), Ok(s("<a>")));
        assert_eq!(m(r"a]b}c", "a]b}c"), Ok(s("a]b}c")));
        assert_eq!(m(r"[[:alpha:][:digit:]]+", "-ab1-"), Ok(s("ab1")));
        assert_eq!(m(r"[[:^alpha:]]+", "ab12cd"), Ok(s("12")));
        assert_eq!(m(r"\p{Greek}+", "abγδ"), Ok(s("γδ")));
        assert_eq!(m(r"\p{^Greek}+", "γδab"), Ok(s("ab")));
        assert_eq!(m(r"\PL+", "ab12"), Ok(s("12")));
        // Flags, anchors, laziness, named groups with Go-only names.
        assert_eq!(m(r"(?i)HELLO", "say hello"), Ok(s("hello")));
        assert_eq!(m(r"(?i:A)a", "Aa AA"), Ok(s("Aa")));
        assert_eq!(m(r"(?m)^b$", "a\nb\nc"), Ok(s("b")));
        assert_eq!(m(r"(?s)a.b", "a\nb"), Ok(s("a\nb")));
        assert_eq!(m(r"a.b", "a\nb axb"), Ok(s("axb")));
        assert_eq!(m(r"(?U)a+", "aaa"), Ok(s("a")));
        assert_eq!(m(r"a+?", "aaa"), Ok(s("a")));
        assert_eq!(m(r"a{2,}", "aaaa"), Ok(s("aaaa")));
        assert_eq!(m(r"(?)x", "x"), Ok(s("x")));
        assert_eq!(m(r"^*x", "x"), Ok(s("x")));
        assert_eq!(m(r"(?P<1x>a)", "a"), Ok(obj(&[("1x", s("a"))])));
        assert_eq!(m(r"(?<n>a)", "a"), Ok(obj(&[("n", s("a"))])));
        assert_eq!(m(r"\x{D800}|b", "ab"), Ok(s("b")));
        // Leftmost-first alternation.
        assert_eq!(m(r"a|ab", "ab"), Ok(s("a")));
    }

    #[test]
    fn regex_replace_expands_like_go() {
        let rr = |t: &str, p: &str, r: &str| call_s("regex_replace", vec![s(t), s(p), s(r)]);
        assert_eq!(rr("-ab-axxb-", "a(x*)b", "T"), "-T-T-");
        assert_eq!(rr("-ab-axxb-", "a(x*)b", "$1"), "--xx-");
        assert_eq!(rr("-ab-axxb-", "a(x*)b", "$1W"), "---");
        assert_eq!(rr("-ab-axxb-", "a(x*)b", "${1}W"), "-W-xxW-");
        assert_eq!(rr("-ab-axxb-", "a(?P<1W>x*)b", "$1W"), "--xx-");
        assert_eq!(rr("-ab-axxb-", "a(?P<1W>x*)b", "${1}W"), "-W-xxW-");
        assert_eq!(
            rr("abc", "(?P<n>b)", "[$n][${n}][$$][$][${n][$01][$9]"),
            "a[b][b][$][$][${n][][]c"
        );
        assert_eq!(rr("baaab", "a*", "X"), "XbXbX");
        assert_eq!(rr("hello", "l+", ""), "heo");
        assert_eq!(rr("", "^", "x"), "x");
        assert_eq!(rr("1.5", "[.]", "$$"), "1$5");
        assert_eq!(
            call_s("regex_replace", vec![n(1.5), s(r"\."), s(",")]),
            "1,5"
        );
    }

    #[test]
    fn regex_replace_errors() {
        assert_eq!(
            err("regex_replace", vec![s(""), s("("), s("")]),
            FuncError::Failed("error parsing regexp: missing closing ): `(`".into())
        );
        assert_eq!(
            err_msg("regex_replace", vec![s(""), s("a\\"), s("")]),
            "error parsing regexp: trailing backslash at end of expression: ``"
        );
        assert_eq!(
            err_msg("regex_replace", vec![s("a"), Value::null(), s("")]),
            "argument must not be null"
        );
    }

    // ---------------------------------------------------------------- csvdecode

    #[test]
    fn csvdecode_vectors_from_go_cty() {
        let csv = "\"name\",\"size\",\"type\"\n\"foo\",\"100\",\"tiny\"\n\"bar\",\"\",\"huge\"\n\"baz\",\"50\",\"weedy\"\n";
        let row =
            |a: &str, b: &str, c: &str| obj(&[("name", s(a)), ("size", s(b)), ("type", s(c))]);
        let ety = Type::Object(
            ["name", "size", "type"]
                .iter()
                .map(|k| (k.to_string(), Type::String))
                .collect::<BTreeMap<_, _>>(),
        );
        let got = call("csvdecode", vec![s(csv)]);
        assert_eq!(
            got,
            Value::List(
                ety.clone(),
                vec![
                    row("foo", "100", "tiny"),
                    row("bar", "", "huge"),
                    row("baz", "50", "weedy")
                ]
            )
        );
        assert_eq!(got.ty(), Type::list(ety));
        let header_only = call("csvdecode", vec![s("\"just\",\"header\",\"line\"")]);
        assert_eq!(header_only.len(), Some(0));
        assert_eq!(
            header_only.ty(),
            Type::list(Type::Object(
                ["just", "header", "line"]
                    .iter()
                    .map(|k| (k.to_string(), Type::String))
                    .collect()
            ))
        );
        assert_eq!(
            call("csvdecode", vec![s("not csv at all")]).ty(),
            Type::list(Type::Object(
                [("not csv at all".to_string(), Type::String)]
                    .into_iter()
                    .collect()
            ))
        );
        assert_eq!(err_msg("csvdecode", vec![s("")]), "missing header line");
        assert_eq!(
            err_msg("csvdecode", vec![s("\n\r\n")]),
            "missing header line"
        );
        assert_eq!(
            err_msg("csvdecode", vec![s("invalid\"thing\"")]),
            "CSV parse error on line 1: bare \" in non-quoted-field"
        );
        assert_eq!(
            err_msg("csvdecode", vec![Value::null()]),
            "argument must not be null"
        );
        assert_eq!(err_msg("csvdecode", vec![list(&[])]), "string required");
    }

    #[test]
    fn csvdecode_follows_go_encoding_csv() {
        let got = call(
            "csvdecode",
            vec![s("a,b\r\n\r\n1,\"x\"\"y\"\n\"multi\r\nline\",  sp  \n,\n")],
        );
        assert_eq!(
            got.as_seq().unwrap(),
            &[
                obj(&[("a", s("1")), ("b", s("x\"y"))]),
                obj(&[("a", s("multi\nline")), ("b", s("  sp  "))]),
                obj(&[("a", s("")), ("b", s(""))]),
            ]
        );
        let got = call("csvdecode", vec![s("a\nlast\r")]);
        assert_eq!(got.as_seq().unwrap(), &[obj(&[("a", s("last"))])]);
        assert_eq!(
            err_msg("csvdecode", vec![s("a,b\n1,2,3\n")]),
            "CSV parse error on line 2: wrong number of fields"
        );
        assert_eq!(
            err_msg("csvdecode", vec![s("a,b\n1,2\n\n4\n")]),
            "CSV parse error on line 4: wrong number of fields"
        );
        assert_eq!(
            err_msg("csvdecode", vec![s("a\n\"x\"y\n")]),
            "CSV parse error on line 2: extraneous or missing \" in quoted-field"
        );
        assert_eq!(
            err_msg("csvdecode", vec![s("a\n\"unterminated\n")]),
            "CSV parse error on line 3: extraneous or missing \" in quoted-field"
        );
        assert_eq!(
            err_msg("csvdecode", vec![s("a,b,a\n")]),
            "duplicate column name \"a\""
        );
        assert_eq!(
            err_msg("csvdecode", vec![s("a,\"b\nc\"x\n")]),
            "CSV parse error on line 2: extraneous or missing \" in quoted-field"
        );
    }

    // ---------------------------------------------------------------- JSON

    #[test]
    fn jsonencode_matches_cty() {
        let je = |v: Value| call_s("jsonencode", vec![v]);
        assert_eq!(je(n(15.0)), "15");
        assert_eq!(je(s("hello")), "\"hello\"");
        assert_eq!(je(Value::Bool(true)), "true");
        assert_eq!(je(Value::List(Type::Number, vec![])), "[]");
        assert_eq!(
            je(Value::List(
                Type::Bool,
                vec![Value::Bool(true), Value::Bool(false)]
            )),
            "[true,false]"
        );
        assert_eq!(
            je(obj(&[
                ("true", Value::Bool(true)),
                ("false", Value::Bool(false))
            ])),
            r#"{"false":false,"true":true}"#
        );
        assert_eq!(je(Value::Null(Type::String)), "null");
        assert_eq!(je(Value::null()), "null");
        assert_eq!(je(n(0.1)), "0.1");
        assert_eq!(je(n(1e21)), "1000000000000000000000");
        assert_eq!(je(n(-2.5)), "-2.5");
        assert_eq!(
            je(s("<a href=\"x\">&</a>\n\u{7f}\u{2029}é")),
            r#""\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e\n"#.to_string() + "\u{7f}\\u2029é\""
        );
        assert_eq!(
            je(obj(&[
                ("<k>", tuple(vec![Value::null(), n(1.0)])),
                (
                    "m",
                    Value::Map(
                        Type::String,
                        [("z".to_string(), s("1"))].into_iter().collect()
                    )
                )
            ])),
            r#"{"\u003ck\u003e":[null,1],"m":{"z":"1"}}"#
        );
        let set = Value::set(vec![n(3.0), n(1.0)]).unwrap();
        assert_eq!(je(set), "[1,3]");
    }

    #[test]
    fn jsondecode_implied_types() {
        let jd = |t: &str| call_by_name("jsondecode", vec![s(t)]);
        assert_eq!(jd("15"), Ok(n(15.0)));
        assert_eq!(jd("\"hello\""), Ok(s("hello")));
        assert_eq!(jd("true"), Ok(Value::Bool(true)));
        assert_eq!(jd("[]"), Ok(Value::empty_tuple()));
        assert_eq!(
            jd("[true,false]"),
            Ok(tuple(vec![Value::Bool(true), Value::Bool(false)]))
        );
        assert_eq!(
            jd(r#"{"false":false,"true":true}"#),
            Ok(obj(&[
                ("true", Value::Bool(true)),
                ("false", Value::Bool(false))
            ]))
        );
        assert_eq!(jd("null"), Ok(Value::null()));
        assert_eq!(
            jd(" {\"a\": [1, \"x\", null, {}], \"b\": -1.5e2 } "),
            Ok(obj(&[
                (
                    "a",
                    tuple(vec![n(1.0), s("x"), Value::null(), Value::empty_object()])
                ),
                ("b", n(-150.0)),
            ]))
        );
        assert_eq!(jd(r#"{"a":1,"a":2}"#), Ok(obj(&[("a", n(2.0))])));
        assert_eq!(
            jd(r#""\u00e9\ud83d\ude00\ud800x\/\"\\\b\f\n\r\t""#),
            Ok(s("é😀\u{FFFD}x/\"\\\u{8}\u{c}\n\r\t"))
        );
        assert_eq!(jd("[1] ]"), Ok(tuple(vec![n(1.0)])));
        let decoded = jd(r#"{"k":[{"x":null}]}"#).unwrap();
        assert_eq!(
            decoded.ty().type_expr(),
            "object({k=tuple([object({x=any})])})"
        );
        assert_eq!(call("jsondecode", vec![n(3.0)]), n(3.0));
    }

    #[test]
    fn jsondecode_errors_match_go() {
        for (input, want) in [
            (
                "aaaa",
                "invalid character 'a' looking for beginning of value",
            ),
            (
                "nope",
                "invalid character 'o' in literal null (expecting 'u')",
            ),
            ("", "EOF"),
            ("   ", "EOF"),
            ("[1,", "EOF"),
            ("tru", "unexpected EOF"),
            ("\"abc", "unexpected EOF"),
            ("-", "unexpected EOF"),
            ("-x", "invalid character 'x' in numeric literal"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (
                "1ex",
                "invalid character 'x' in exponent of numeric literal",
            ),
            ("1 2", "extraneous data after JSON object"),
            ("{} x", "extraneous data after JSON object"),
            ("01", "extraneous data after JSON object"),
            ("[1 2]", "invalid character '2' after array element"),
            (
                "[1,]",
                "invalid character ']' looking for beginning of value",
            ),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 \"b\":2}",
                "invalid character '\"' after object key:value pair",
            ),
            (
                "{\"a\":1,}",
                "invalid character '}' looking for beginning of object key string",
            ),
            ("{1:2}", "invalid character '1'"),
            ("]", "invalid character ']' looking for beginning of value"),
            ("\"a\nb\"", "invalid character '\\n' in string literal"),
            ("\"\\q\"", "invalid character 'q' in string escape code"),
            (
                "\"\\u12G4\"",
                "invalid character 'G' in \\u hexadecimal character escape",
            ),
            (
                "'x'",
                "invalid character '\\'' looking for beginning of value",
            ),
            ("é", "invalid character 'Ã' looking for beginning of value"),
        ] {
            assert_eq!(
                err_msg("jsondecode", vec![s(input)]),
                want,
                "jsondecode({input:?})"
            );
        }
        let deep = "[".repeat(5000);
        assert_eq!(err_msg("jsondecode", vec![s(&deep)]), "exceeded max depth");
        assert_eq!(
            err_msg("jsondecode", vec![Value::null()]),
            "argument must not be null"
        );
    }

    #[test]
    fn json_round_trip() {
        let v = obj(&[
            ("a", tuple(vec![s("x<y"), n(2.5), Value::Bool(false)])),
            ("b", Value::null()),
        ]);
        let text = call("jsonencode", vec![v.clone()]);
        assert_eq!(call("jsondecode", vec![text]), v);
    }

    /// Deterministic random inputs through every parser-like function: errors are
    /// fine, panics are not.
    #[test]
    fn random_inputs_never_panic() {
        const ALPHABET: &[&str] = &[
            "%", "[", "]", "{", "}", "(", ")", "*", "+", "?", "\\", "|", "^", "$", ".", "-", ":",
            ",", "\"", "'", "\n", "\r", "<", ">", "P", "p", "Q", "E", "x", "u", "0", "1", "9", "a",
            "z", "d", "s", "w", "b", "e", "f", "g", "q", "v", "#", " ", "é", "😀", "\u{301}", "=",
            "!", "&", "~", "t", "n", "l",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..1000 {
            let len = (next() % 12) as usize;
            let text: String = (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect();
            let num = n(((next() % 41) as f64 - 20.0) / 2.0);
            let _ = call_by_name(
                "format",
                vec![s(&text), num.clone(), s(&text), list(&["a"])],
            );
            let _ = call_by_name("formatlist", vec![s(&text), list(&["a", "b"]), num.clone()]);
            let _ = call_by_name("regex", vec![s(&text), s(&text)]);
            let _ = call_by_name("regexall", vec![s(&text), s("a1 éx\n")]);
            let _ = call_by_name("regex_replace", vec![s("abc abc"), s(&text), s(&text)]);
            let _ = call_by_name("jsondecode", vec![s(&text)]);
            let _ = call_by_name("csvdecode", vec![s(&text)]);
            let _ = call_by_name("substr", vec![s(&text), num.clone(), num.clone()]);
            let _ = call_by_name("indent", vec![num.clone(), s(&text)]);
            let _ = call_by_name("title", vec![s(&text)]);
            let _ = call_by_name("dirname", vec![s(&text)]);
            let _ = call_by_name("basename", vec![s(&text)]);
            let _ = call_by_name("replace", vec![s(&text), s(&text), s(&text)]);
            let _ = call_by_name("split", vec![s(&text), s(&text)]);
        }
    }
}
