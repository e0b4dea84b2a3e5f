//! The few Go `path/filepath` functions the matcher depends on, Unix flavour, ported so
//! that patterns are cleaned and validated exactly as the docker CLI does it.

pub(crate) use kiln_util::gopath::{clean, dir};

/// Whether Go's `filepath.Match(pattern, ".")` returns `ErrBadPattern`.
///
/// Go's `Match` checks every chunk of the pattern for well-formedness whatever the name
/// (since Go 1.16 it keeps parsing after a mismatch), so the pattern is bad exactly when
/// one of its chunks is: an unclosed or empty `[...]` class, a class bound that is `-` or
/// `]` or missing, or a `\` with nothing after it.
pub(crate) fn glob_is_valid(pattern: &str) -> bool {
    let mut rest = pattern;
    while !rest.is_empty() {
        let (chunk, after) = scan_chunk(rest);
        if !chunk_is_valid(chunk) {
            return false;
        }
        rest = after;
    }
    true
}

/// Go's `scanChunk`: skip leading `*`s, then take everything up to the next `*` that is
/// not inside a `[...]` class.
fn scan_chunk(pattern: &str) -> (&str, &str) {
    let pattern = pattern.trim_start_matches('*');
    let bytes = pattern.as_bytes();
    let mut in_range = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if i + 1 < bytes.len() => i += 1,
            b'[' => in_range = true,
            b']' => in_range = false,
            b'*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    // The loop stops on an ASCII `*` or at the end, so `i` is a character boundary; stay
    // defensive anyway, since splitting elsewhere would panic.
    let i = (0..=i)
        .rev()
        .find(|&j| pattern.is_char_boundary(j))
        .unwrap_or(0);
    pattern.split_at(i)
}

/// Go's `matchChunk` in its "already failed" state: parse the chunk, report whether it is
/// well-formed.
fn chunk_is_valid(chunk: &str) -> bool {
    let mut rest = chunk;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        match c {
            '[' => {
                if let Some(r) = rest.strip_prefix('^') {
                    rest = r;
                }
                let mut ranges = 0;
                loop {
                    if ranges > 0
                        && let Some(r) = rest.strip_prefix(']')
                    {
                        rest = r;
                        break;
                    }
                    let Some(r) = class_bound(rest) else {
                        return false;
                    };
                    rest = r;
                    if let Some(r) = rest.strip_prefix('-') {
                        let Some(r) = class_bound(r) else {
                            return false;
                        };
                        rest = r;
                    }
                    ranges += 1;
                }
            }
            '\\' => {
                let Some(next) = rest.chars().next() else {
                    return false;
                };
                rest = &rest[next.len_utf8()..];
            }
            _ => {}
        }
    }
    true
}

/// Go's `getEsc`: one class bound, possibly `\`-escaped. `None` where Go reports
/// `ErrBadPattern`, including when nothing follows the bound (the class is unclosed).
fn class_bound(chunk: &str) -> Option<&str> {
    let mut rest = chunk;
    match rest.chars().next() {
        None | Some('-' | ']') => return None,
        Some('\\') => rest = &rest[1..],
        Some(_) => {}
    }
    let c = rest.chars().next()?;
    let rest = &rest[c.len_utf8()..];
    (!rest.is_empty()).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_matches_go() {
        // From Go's path/filepath cleantests (Unix).
        let cases = [
            ("abc", "abc"),
            ("abc/def", "abc/def"),
            ("a/b/c", "a/b/c"),
            (".", "."),
            ("..", ".."),
            ("../..", "../.."),
            ("../../abc", "../../abc"),
            ("/abc", "/abc"),
            ("/", "/"),
            ("", "."),
            ("abc/", "abc"),
            ("abc/def/", "abc/def"),
            ("a/b/c/", "a/b/c"),
            ("./", "."),
            ("../", ".."),
            ("../../", "../.."),
            ("/abc/", "/abc"),
            ("abc//def//ghi", "abc/def/ghi"),
            ("//abc", "/abc"),
            ("///abc", "/abc"),
            ("//abc//", "/abc"),
            ("abc//", "abc"),
            ("abc/./def", "abc/def"),
            ("/./abc/def", "/abc/def"),
            ("abc/.", "abc"),
            ("abc/def/ghi/../jkl", "abc/def/jkl"),
            ("abc/def/../ghi/../jkl", "abc/jkl"),
            ("abc/def/..", "abc"),
            ("abc/def/../..", "."),
            ("/abc/def/../..", "/"),
            ("abc/def/../../..", ".."),
            ("/abc/def/../../..", "/"),
            ("abc/def/../../../ghi/jkl/../../../mno", "../../mno"),
            ("/../abc", "/abc"),
            ("../abc", "../abc"),
            ("abc/./../def", "def"),
            ("abc//./../def", "def"),
            ("abc/../../././../def", "../../def"),
            ("!./foo", "!./foo"),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input), want, "clean({input:?})");
        }
    }

    #[test]
    fn dir_matches_go() {
        let cases = [
            ("", "."),
            (".", "."),
            ("/.", "/"),
            ("/", "/"),
            ("////", "/"),
            ("/foo", "/"),
            ("x/", "x"),
            ("abc", "."),
            ("abc/def", "abc"),
            ("a/b/.x", "a/b"),
            ("a/b/c.", "a/b"),
            ("a/b/c.x", "a/b"),
        ];
        for (input, want) in cases {
            assert_eq!(dir(input), want, "dir({input:?})");
        }
    }

    #[test]
    fn glob_validity_matches_go() {
        // Go's filepath.Match error column for its own test table.
        let bad = [
            "[]a]", "[-]", "[x-]", "[-x]", "\\", "[a-b-c]", "[", "[^", "[^bc", "a[", "[\\", "*[",
            "a*[", "[a", "[a-", "[a-\\",
        ];
        for p in bad {
            assert!(!glob_is_valid(p), "{p:?} should be invalid");
        }
        let good = [
            "abc",
            "*",
            "*c",
            "a*/b",
            "ab[c]",
            "ab[^b-d]",
            "a\\*b",
            "a?b",
            "[a-ζ]*",
            "[\\]a]",
            "[\\-]",
            "[x\\-]",
            "[\\-x]",
            "*x",
            "[!a].txt",
            "[*]",
            "[?]",
            "[Local-Only]",
            "[[:alpha:]]",
            "a\\é",
            "é[é-ê]",
        ];
        for p in good {
            assert!(glob_is_valid(p), "{p:?} should be valid");
        }
    }
}
