//! Property tests: no pattern or path makes the matcher panic, and an escaped name
//! matches itself.

use kiln_dockerfile::ignore::{MatchInfo, PatternMatcher, read_dockerignore};
use proptest::prelude::*;

/// Characters that exercise every branch of the glob and regex translation.
fn pattern_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec![
            '*', '?', '[', ']', '^', '!', '\\', '-', '/', '.', '{', '}', '(', ')', '|', '+',
            '$', ':', ' ', '#', '\t', '\u{FEFF}', 'p', 'P', 'd', 'x', 'Q', 'E', 'b', '0', '7',
        ]),
        2 => prop::char::range('a', 'e'),
        1 => any::<char>(),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(pattern_char(), 0..24).prop_map(|v| v.into_iter().collect())
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::char::range('a', 'e'),
            1 => prop::sample::select(vec!['/', '.', '*', '[', ']', '^', '\\', ' ', 'é']),
            1 => any::<char>(),
        ],
        0..20,
    )
    .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn compiling_and_matching_never_panic(
        patterns in prop::collection::vec(pattern(), 0..4),
        paths in prop::collection::vec(path(), 1..4),
    ) {
        if let Ok(pm) = PatternMatcher::new(&patterns) {
            for p in &paths {
                let _ = pm.matches(p);
                let _ = pm.matches_exact(p);
                let _ = pm.matches_or_parent_matches(p);
                if let Ok((_, info)) = pm.matches_using_parent_results(p, &MatchInfo::default()) {
                    let _ = pm.matches_using_parent_results(&format!("{p}/child"), &info);
                }
            }
        }
    }

    #[test]
    fn reading_never_panics_and_yields_no_blank_patterns(text in prop::collection::vec(pattern(), 0..6)) {
        let text = text.join("\n");
        for p in read_dockerignore(&text) {
            prop_assert!(!p.is_empty());
            prop_assert!(!p.starts_with('/') || p == "/");
        }
    }

    /// A name with every glob and regex metacharacter escaped is matched literally: this
    /// holds the Go-regex translation to plain literals for arbitrary Unicode.
    #[test]
    fn an_escaped_name_matches_itself(name in "[^/\\x00]{1,12}") {
        prop_assume!(name.trim() == name && name != "." && name != "..");
        // Go's text/scanner drops a leading byte-order mark from the regex (a moby quirk,
        // ported); such names match without it.
        prop_assume!(!name.starts_with('\u{FEFF}'));
        let mut pattern = String::new();
        for c in name.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\' | '^' | '!') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        let pm = PatternMatcher::new(&[&pattern]).unwrap();
        prop_assert!(pm.matches_exact(&name).unwrap(), "{pattern:?} vs {name:?}");
        let longer = format!("{name}x");
        prop_assert!(!pm.matches_exact(&longer).unwrap());
    }
}
