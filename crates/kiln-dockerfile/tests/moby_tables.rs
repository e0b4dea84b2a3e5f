//! The test tables of `github.com/moby/patternmatcher` (patternmatcher_test.go and
//! ignorefile/ignorefile_test.go), ported case for case. Go-only subtests are noted where
//! they are left out.

use kiln_dockerfile::ignore::{
    IgnoreError, MatchInfo, MatchType, PatternMatcher, matches, read_dockerignore,
};

fn m(file: &str, patterns: &[&str]) -> Result<bool, IgnoreError> {
    matches(file, patterns)
}

#[test]
fn wildcard_matches() {
    assert!(m("fileutils.go", &["*"]).unwrap());
}

#[test]
fn pattern_matches() {
    assert!(m("fileutils.go", &["*.go"]).unwrap());
}

#[test]
fn exclusion_pattern_matches_pattern_before() {
    assert!(m("fileutils.go", &["!fileutils.go", "*.go"]).unwrap());
}

#[test]
fn pattern_matches_folder_exclusions() {
    assert!(!m("docs/README.md", &["docs", "!docs/README.md"]).unwrap());
}

#[test]
fn pattern_matches_folder_with_slash_exclusions() {
    assert!(!m("docs/README.md", &["docs/", "!docs/README.md"]).unwrap());
}

#[test]
fn pattern_matches_folder_wildcard_exclusions() {
    assert!(!m("docs/README.md", &["docs/*", "!docs/README.md"]).unwrap());
}

#[test]
fn exclusion_pattern_matches_pattern_after() {
    assert!(!m("fileutils.go", &["*.go", "!fileutils.go"]).unwrap());
}

#[test]
fn exclusion_pattern_matches_whole_directory() {
    assert!(!m(".", &["*.go"]).unwrap());
}

#[test]
fn single_exclamation_error() {
    assert!(matches!(
        m("fileutils.go", &["!"]),
        Err(IgnoreError::IllegalExclusion)
    ));
}

#[test]
fn matches_with_no_patterns() {
    assert!(!m("/any/path/there", &[]).unwrap());
}

#[test]
fn matches_with_malformed_patterns() {
    assert!(matches!(
        m("/any/path/there", &["["]),
        Err(IgnoreError::BadPattern { .. })
    ));
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Pass {
    Fail,
    Exact,
    Inexact,
}
use Pass::{Exact, Fail, Inexact};

/// moby's `TestMatches` single-pattern table (Unix entries included).
const TESTS: &[(&str, &str, Pass)] = &[
    ("**", "file", Exact),
    ("**", "file/", Exact),
    ("**/", "file", Exact), // weird one
    ("**/", "file/", Exact),
    ("**", "/", Exact),
    ("**/", "/", Exact),
    ("**", "dir/file", Exact),
    ("**/", "dir/file", Exact),
    ("**", "dir/file/", Exact),
    ("**/", "dir/file/", Exact),
    ("**/**", "dir/file", Exact),
    ("**/**", "dir/file/", Exact),
    ("dir/**", "dir/file", Exact),
    ("dir/**", "dir/file/", Exact),
    ("dir/**", "dir/dir2/file", Exact),
    ("dir/**", "dir/dir2/file/", Exact),
    ("**/dir", "dir", Exact),
    ("**/dir", "dir/file", Inexact),
    ("**/dir2/*", "dir/dir2/file", Exact),
    ("**/dir2/*", "dir/dir2/file/", Inexact),
    ("**/dir2/**", "dir/dir2/dir3/file", Exact),
    ("**/dir2/**", "dir/dir2/dir3/file/", Exact),
    ("**file", "file", Exact),
    ("**file", "dir/file", Exact),
    ("**/file", "dir/file", Exact),
    ("**file", "dir/dir/file", Exact),
    ("**/file", "dir/dir/file", Exact),
    ("**/file*", "dir/dir/file", Exact),
    ("**/file*", "dir/dir/file.txt", Exact),
    ("**/file*txt", "dir/dir/file.txt", Exact),
    ("**/file*.txt", "dir/dir/file.txt", Exact),
    ("**/file*.txt*", "dir/dir/file.txt", Exact),
    ("**/**/*.txt", "dir/dir/file.txt", Exact),
    ("**/**/*.txt2", "dir/dir/file.txt", Fail),
    ("**/*.txt", "file.txt", Exact),
    ("**/**/*.txt", "file.txt", Exact),
    ("a**/*.txt", "a/file.txt", Exact),
    ("a**/*.txt", "a/dir/file.txt", Exact),
    ("a**/*.txt", "a/dir/dir/file.txt", Exact),
    ("a/*.txt", "a/dir/file.txt", Fail),
    ("a/*.txt", "a/file.txt", Exact),
    ("a/*.txt**", "a/file.txt", Exact),
    ("a[b-d]e", "ae", Fail),
    ("a[b-d]e", "ace", Exact),
    ("a[b-d]e", "aae", Fail),
    ("a[^b-d]e", "aze", Exact),
    (".*", ".foo", Exact),
    (".*", "foo", Fail),
    ("abc.def", "abcdef", Fail),
    ("abc.def", "abc.def", Exact),
    ("abc.def", "abcZdef", Fail),
    ("abc?def", "abcZdef", Exact),
    ("abc?def", "abcdef", Fail),
    ("**/foo/bar", "foo/bar", Exact),
    ("**/foo/bar", "dir/foo/bar", Exact),
    ("**/foo/bar", "dir/dir2/foo/bar", Exact),
    ("abc/**", "abc", Fail),
    ("abc/**", "abc/def", Exact),
    ("abc/**", "abc/def/ghi", Exact),
    ("**/.foo", ".foo", Exact),
    ("**/.foo", "bar.foo", Fail),
    ("a(b)c/def", "a(b)c/def", Exact),
    ("a(b)c/def", "a(b)c/xyz", Fail),
    ("a.|)$(}+{bc", "a.|)$(}+{bc", Exact),
    (
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        Exact,
    ),
    (
        "dist/*.whl",
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        Exact,
    ),
    // The non-Windows additions.
    ("a\\\\", "a\\", Exact),
    ("a\\*b", "a*b", Exact),
];

const MULTI: &[(&[&str], &str, Pass)] = &[
    (&["**", "!util/docker/web"], "util/docker/web/foo", Fail),
    (
        &["**", "!util/docker/web", "util/docker/web/foo"],
        "util/docker/web/foo",
        Exact,
    ),
    (
        &[
            "**",
            "!dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        ],
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        Fail,
    ),
    (
        &["**", "!dist/*.whl"],
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        Fail,
    ),
];

/// Go's `strings.Split(filepath.Dir(text), "/")`, or nothing when the parent is `.`.
fn parent_dirs(text: &str) -> Vec<String> {
    let parent = match text.rfind('/') {
        Some(i) => {
            // filepath.Dir cleans; the table's texts need only the trailing-slash case.
            let d = text[..=i].trim_end_matches('/');
            if d.is_empty() {
                "/".to_owned()
            } else {
                d.to_owned()
            }
        }
        None => ".".to_owned(),
    };
    if parent == "." {
        return Vec::new();
    }
    parent.split('/').map(str::to_owned).collect()
}

fn using_parent_results(pm: &PatternMatcher, text: &str) -> bool {
    let dirs = parent_dirs(text);
    let mut info = MatchInfo::default();
    for i in 0..dirs.len() {
        info = pm
            .matches_using_parent_results(&dirs[..=i].join("/"), &info)
            .unwrap()
            .1;
    }
    pm.matches_using_parent_results(text, &info).unwrap().0
}

#[test]
fn matches_exact_table() {
    for &(pattern, text, pass) in TESTS {
        let pm = PatternMatcher::new(&[pattern]).unwrap();
        assert_eq!(
            pm.matches_exact(text).unwrap(),
            pass == Exact,
            "pattern={pattern:?} text={text:?}"
        );
    }
}

#[test]
fn matches_or_parent_matches_table() {
    for &(pattern, text, pass) in TESTS {
        let pm = PatternMatcher::new(&[pattern]).unwrap();
        assert_eq!(
            pm.matches_or_parent_matches(text).unwrap(),
            pass != Fail,
            "pattern={pattern:?} text={text:?}"
        );
    }
    for &(patterns, text, pass) in MULTI {
        let pm = PatternMatcher::new(patterns).unwrap();
        assert_eq!(
            pm.matches_or_parent_matches(text).unwrap(),
            pass != Fail,
            "patterns={patterns:?} text={text:?}"
        );
    }
}

// moby's "MatchesUsingParentResult" subtest exercises a deprecated single-bool variant
// that nothing in the CLI uses any more; it is not ported.

#[test]
fn matches_using_parent_results_table() {
    for &(pattern, text, pass) in TESTS {
        let pm = PatternMatcher::new(&[pattern]).unwrap();
        assert_eq!(
            using_parent_results(&pm, text),
            pass != Fail,
            "pattern={pattern:?} text={text:?}"
        );
    }
    for &(patterns, text, pass) in MULTI {
        let pm = PatternMatcher::new(patterns).unwrap();
        assert_eq!(
            using_parent_results(&pm, text),
            pass != Fail,
            "patterns={patterns:?} text={text:?}"
        );
    }
}

#[test]
fn matches_using_parent_results_no_context_table() {
    for &(pattern, text, pass) in TESTS {
        let pm = PatternMatcher::new(&[pattern]).unwrap();
        let (res, _) = pm
            .matches_using_parent_results(text, &MatchInfo::default())
            .unwrap();
        assert_eq!(res, pass != Fail, "pattern={pattern:?} text={text:?}");
    }
    for &(patterns, text, pass) in MULTI {
        let pm = PatternMatcher::new(patterns).unwrap();
        let (res, _) = pm
            .matches_using_parent_results(text, &MatchInfo::default())
            .unwrap();
        assert_eq!(res, pass != Fail, "patterns={patterns:?} text={text:?}");
    }
}

#[test]
fn match_info_from_another_matcher_is_an_error() {
    let two = PatternMatcher::new(&["a", "b"]).unwrap();
    let three = PatternMatcher::new(&["a", "b", "c"]).unwrap();
    let (_, info) = two
        .matches_using_parent_results("a", &MatchInfo::default())
        .unwrap();
    assert!(matches!(
        three.matches_using_parent_results("a/x", &info),
        Err(IgnoreError::MatchInfoMismatch {
            expected: 3,
            got: 2
        })
    ));
}

#[test]
fn clean_patterns() {
    let pm = PatternMatcher::new(&["docs", "config"]).unwrap();
    assert_eq!(pm.patterns().len(), 2);
}

#[test]
fn clean_patterns_strip_empty_patterns() {
    let pm = PatternMatcher::new(&["docs", "config", ""]).unwrap();
    assert_eq!(pm.patterns().len(), 2);
}

#[test]
fn clean_patterns_exception_flag() {
    let pm = PatternMatcher::new(&["docs", "!docs/README.md"]).unwrap();
    assert!(pm.exclusions());
}

#[test]
fn clean_patterns_leading_space_trimmed() {
    let pm = PatternMatcher::new(&["docs", "  !docs/README.md"]).unwrap();
    assert!(pm.exclusions());
}

#[test]
fn clean_patterns_trailing_space_trimmed() {
    let pm = PatternMatcher::new(&["docs", "!docs/README.md  "]).unwrap();
    assert!(pm.exclusions());
}

#[test]
fn clean_patterns_error_single_exception() {
    assert!(matches!(
        PatternMatcher::new(&["!"]),
        Err(IgnoreError::IllegalExclusion)
    ));
}

/// moby's `matchTests` (taken from Go's filepath.Match tests): `Some(bool)` is the match,
/// `None` is `ErrBadPattern`.
const MATCH_TESTS: &[(&str, &str, Option<bool>)] = &[
    ("abc", "abc", Some(true)),
    ("*", "abc", Some(true)),
    ("*c", "abc", Some(true)),
    ("a*", "a", Some(true)),
    ("a*", "abc", Some(true)),
    ("a*", "ab/c", Some(true)),
    ("a*/b", "abc/b", Some(true)),
    ("a*/b", "a/c/b", Some(false)),
    ("a*b*c*d*e*/f", "axbxcxdxe/f", Some(true)),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/f", Some(true)),
    ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", Some(false)),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", Some(false)),
    ("a*b?c*x", "abxbbxdbxebxczzx", Some(true)),
    ("a*b?c*x", "abxbbxdbxebxczzy", Some(false)),
    ("ab[c]", "abc", Some(true)),
    ("ab[b-d]", "abc", Some(true)),
    ("ab[e-g]", "abc", Some(false)),
    ("ab[^c]", "abc", Some(false)),
    ("ab[^b-d]", "abc", Some(false)),
    ("ab[^e-g]", "abc", Some(true)),
    ("a\\*b", "a*b", Some(true)),
    ("a\\*b", "ab", Some(false)),
    ("a?b", "a☺b", Some(true)),
    ("a[^a]b", "a☺b", Some(true)),
    ("a???b", "a☺b", Some(false)),
    ("a[^a][^a][^a]b", "a☺b", Some(false)),
    ("[a-ζ]*", "α", Some(true)),
    ("*[a-ζ]", "A", Some(false)),
    ("a?b", "a/b", Some(false)),
    ("a*b", "a/b", Some(false)),
    ("[\\]a]", "]", Some(true)),
    ("[\\-]", "-", Some(true)),
    ("[x\\-]", "x", Some(true)),
    ("[x\\-]", "-", Some(true)),
    ("[x\\-]", "z", Some(false)),
    ("[\\-x]", "x", Some(true)),
    ("[\\-x]", "-", Some(true)),
    ("[\\-x]", "a", Some(false)),
    ("[]a]", "]", None),
    ("[-]", "-", None),
    ("[x-]", "x", None),
    ("[x-]", "-", None),
    ("[x-]", "z", None),
    ("[-x]", "x", None),
    ("[-x]", "-", None),
    ("[-x]", "a", None),
    ("\\", "a", None),
    ("[a-b-c]", "a", None),
    ("[", "a", None),
    ("[^", "a", None),
    ("[^bc", "a", None),
    ("a[", "a", None), // was nil but IMO its wrong
    ("a[", "ab", None),
    ("*x", "xxx", Some(true)),
];

#[test]
fn match_table() {
    for &(pattern, s, want) in MATCH_TESTS {
        let got = m(s, &[pattern]);
        match want {
            Some(want) => assert_eq!(got.unwrap(), want, "Match({pattern:?}, {s:?})"),
            None => assert!(
                matches!(got, Err(IgnoreError::BadPattern { .. })),
                "Match({pattern:?}, {s:?}) = {got:?}, want ErrBadPattern"
            ),
        }
    }
}

/// moby's `compileTests` (the slash variant; the backslash one is Windows-only).
const COMPILE_TESTS: &[(&str, MatchType, &str)] = &[
    ("*", MatchType::Regexp, "^[^/]*$"),
    ("file*", MatchType::Regexp, "^file[^/]*$"),
    ("*file", MatchType::Regexp, "^[^/]*file$"),
    ("a*/b", MatchType::Regexp, "^a[^/]*/b$"),
    ("**", MatchType::Suffix, ""),
    ("**/**", MatchType::Regexp, "^(.*/)?.*$"),
    ("dir/**", MatchType::Prefix, ""),
    ("**/dir", MatchType::Suffix, ""),
    ("**/dir2/*", MatchType::Regexp, "^(.*/)?dir2/[^/]*$"),
    ("**/dir2/**", MatchType::Regexp, "^(.*/)?dir2/.*$"),
    ("**file", MatchType::Suffix, ""),
    ("**/file*txt", MatchType::Regexp, "^(.*/)?file[^/]*txt$"),
    (
        "**/**/*.txt",
        MatchType::Regexp,
        "^(.*/)?(.*/)?[^/]*\\.txt$",
    ),
    ("a[b-d]e", MatchType::Regexp, "^a[b-d]e$"),
    (".*", MatchType::Regexp, "^\\.[^/]*$"),
    ("abc.def", MatchType::Exact, ""),
    ("abc?def", MatchType::Regexp, "^abc[^/]def$"),
    ("**/foo/bar", MatchType::Suffix, ""),
    ("a(b)c/def", MatchType::Exact, ""),
    ("a.|)$(}+{bc", MatchType::Exact, ""),
    (
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        MatchType::Exact,
        "",
    ),
];

#[test]
fn compile_table() {
    for &(pattern, ty, regex) in COMPILE_TESTS {
        let pm = PatternMatcher::new(&[pattern]).unwrap();
        let p = &pm.patterns()[0];
        assert_eq!(p.match_type(), ty, "pattern {pattern:?}");
        if ty == MatchType::Regexp {
            assert_eq!(p.go_regex(), Some(regex), "pattern {pattern:?}");
        } else {
            assert_eq!(p.go_regex(), None, "pattern {pattern:?}");
        }
    }
}

/// Regression test for moby/moby#52203: a pattern `filepath.Match` accepts but whose
/// regular expression does not compile fails on every evaluation, without panicking.
#[test]
fn malformed_pattern_fails_on_repeated_calls() {
    let pm = PatternMatcher::new(&["[Local-Only]/"]).expect("passes initial validation");
    for _ in 0..2 {
        assert!(matches!(
            pm.matches_or_parent_matches("x"),
            Err(IgnoreError::BadPattern { ref pattern }) if pattern == "[Local-Only]"
        ));
    }
}

/// ignorefile_test.go `TestReadAll` (the reader-error half has no equivalent: the Rust
/// reader takes text).
#[test]
fn read_all() {
    assert!(read_dockerignore("").is_empty());
    let content =
        "test1\n/test2\n/a/file/here\n\nlastfile\n# this is a comment\n! /inverted/abs/path\n!\n! ";
    assert_eq!(
        read_dockerignore(content),
        [
            "test1",
            "test2",       // /foo/bar is treated as foo/bar
            "a/file/here", // likewise
            "lastfile",
            "!inverted/abs/path",
            "!",
            "!",
        ]
    );
}

/// Go-isms the port keeps on purpose (each checked against the docker CLI where the
/// oracle covers it: `[*]` is case 66, `[[]x].txt` case 43, `[!a]` case 25).
#[test]
fn go_quirks() {
    let yes = |pattern: &str, path: &str| {
        PatternMatcher::new(&[pattern])
            .unwrap()
            .matches_or_parent_matches(path)
            .unwrap()
    };
    // `[!a]` is a class of `!` and `a`; `[^a]` negates.
    assert!(yes("[!a].txt", "a.txt") && yes("[!a].txt", "!.txt") && !yes("[!a].txt", "c.txt"));
    assert!(yes("[^a].txt", "c.txt") && !yes("[^a].txt", "a.txt"));
    // Go's regex reads `[` inside a class as a literal.
    assert!(yes("[*]", "]") && yes("[*]", "[^]") && !yes("[*]", "z"));
    assert!(yes("[?]", "^]") && yes("[?]", "[]") && !yes("[?]", "a"));
    assert!(yes("[[]x].txt", "[x].txt"));
    // A raw `^` inside a regex-type pattern is an anchor, so this never matches; in an
    // exact-type pattern it is just a character.
    assert!(!yes("a^b*", "a^b") && !yes("a^b*", "a^bc"));
    assert!(yes("a^b", "a^b"));
    // Go escapes: `\d` is an ASCII digit class, `\ ` a space.
    assert!(yes("v\\d", "v7") && !yes("v\\d", "vd") && !yes("v\\d", "v٣"));
    assert!(yes("sp\\ ace", "sp ace"));
    // Suffix and prefix forms of `**`.
    assert!(yes("**foo", "barfoo") && yes("**/foo", "foo") && !yes("dir/**", "dir"));
    // A leading byte-order mark is dropped from the regex (text/scanner), so the pattern
    // matches the name without it.
    assert!(yes("\u{FEFF}*.txt", "a.txt"));
    assert!(yes("\u{FEFF}a.txt", "\u{FEFF}a.txt") && !yes("\u{FEFF}a.txt", "a.txt"));
}
