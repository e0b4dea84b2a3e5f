//! Go's `strconv.Quote` family (what `%q` and Go error messages print),
//! shared by the stdlib groups so quoting is identical everywhere.

/// Go's `strconv.Quote`.
pub(super) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        go_escape_rune(c, '"', &mut out);
    }
    out.push('"');
    out
}

/// Go's `strconv.QuoteRune`.
pub(super) fn go_quote_rune(c: char) -> String {
    let mut out = String::from("'");
    go_escape_rune(c, '\'', &mut out);
    out.push('\'');
    out
}

/// `unicode.IsPrint`, approximated without the general-category tables: every
/// character except controls, non-ASCII spaces, format characters and
/// private-use characters.
pub(super) fn go_is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    let cp = c as u32;
    let format = matches!(
        cp,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private = matches!(cp, 0xE000..=0xF8FF | 0xF0000..=0x10FFFF);
    !(c.is_control() || c.is_whitespace() || format || private)
}

pub(super) fn go_escape_rune(c: char, quote: char, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    if c == quote || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if go_is_print(c) {
        out.push(c);
        return;
    }
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        _ => {
            let r = c as u32;
            if r < 0x20 || r == 0x7f {
                out.push_str("\\x");
                out.push(HEX[(r >> 4) as usize & 0xf] as char);
                out.push(HEX[r as usize & 0xf] as char);
            } else if r < 0x10000 {
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[(r >> shift) as usize & 0xf] as char);
                }
            } else {
                out.push_str("\\U");
                for shift in [28, 24, 20, 16, 12, 8, 4, 0] {
                    out.push(HEX[(r >> shift) as usize & 0xf] as char);
                }
            }
        }
    }
}

/// Go's `strconv.Quote` over bytes that may not be UTF-8: invalid bytes
/// print as `\xNN`.
pub(super) fn go_quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            go_escape_rune(c, '"', &mut out);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}
