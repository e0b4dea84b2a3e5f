//! The port of `github.com/moby/patternmatcher`: `.dockerignore` patterns compiled to
//! exact, prefix, suffix or regular-expression matchers, evaluated last-match-wins.

use std::fmt;
use std::sync::Arc;

use regex::Regex;

use super::error::IgnoreError;
use super::{gopath, goregex};

/// A compiled list of `.dockerignore` patterns (moby's `PatternMatcher`).
///
/// Each pattern is trimmed, cleaned with Go's `filepath.Clean`, split into a leading `!`
/// (an *exclusion*, which re-includes) and the glob, and checked with Go's
/// `filepath.Match` rules. Empty patterns are dropped. Unlike the `.dockerignore` reader
/// ([`read_dockerignore`](super::read_dockerignore)), `new` does not drop a leading `/`:
/// `/foo` never matches a relative path, as in Docker.
///
/// Paths given to the match methods are slash-separated and relative to the context root.
#[derive(Debug, Clone)]
pub struct PatternMatcher {
    patterns: Vec<Pattern>,
    exclusions: bool,
}

/// One cleaned pattern of a [`PatternMatcher`].
#[derive(Debug, Clone)]
pub struct Pattern {
    cleaned: String,
    dirs: usize,
    exclusion: bool,
    match_type: MatchType,
    go_regex: String,
    /// `Some(Err)` when the regular expression Go would compile is invalid: Docker reports
    /// that only when the pattern is first evaluated, and so does this port.
    regex: Option<Result<Compiled, ()>>,
}

/// A compiled [`MatchType::Regexp`] pattern.
#[derive(Debug, Clone)]
enum Compiled {
    /// The translated Go expression, Unicode-aware as Go's.
    Text(Arc<Regex>),
    /// An ASCII glob of literals, `*`, `?` and `**` only ([`byte_regex`]), matched on the
    /// path's UTF-8 bytes: the same paths, without the Unicode classes (`[^/]`, `.`) whose
    /// compilation allocates and clears a 320 KB table per expression (twice: forwards and
    /// in reverse), which cost more than the walk that matches with it.
    Bytes(Arc<regex::bytes::Regex>),
}

impl Compiled {
    fn is_match(&self, path: &str) -> bool {
        match self {
            Compiled::Text(re) => re.is_match(path),
            Compiled::Bytes(re) => re.is_match(path.as_bytes()),
        }
    }
}

/// How a [`Pattern`] is matched, decided by moby's `compile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchType {
    /// The path equals the pattern (no wildcard, class or escape).
    Exact,
    /// `dir/**`: the path starts with the text before `**`.
    Prefix,
    /// `**…` with no other wildcard: the path ends with the text after `**`, or equals it
    /// without its leading `/`.
    Suffix,
    /// Everything else: an anchored regular expression.
    Regexp,
}

/// What a directory matched, handed down to its children by the context walker (moby's
/// `MatchInfo`). The default value means "nothing known about the parent".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchInfo {
    parent_matched: Vec<bool>,
}

impl PatternMatcher {
    /// Compile `patterns` (moby's `New`).
    ///
    /// # Errors
    ///
    /// [`IgnoreError::IllegalExclusion`] for a pattern that is `!` alone, and
    /// [`IgnoreError::BadPattern`] for one Go's `filepath.Match` rejects. A pattern whose
    /// regular expression does not compile (`[z-a]`, which `filepath.Match` accepts) is
    /// reported when it is first evaluated, as in Docker.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, IgnoreError> {
        let mut out = Vec::with_capacity(patterns.len());
        let mut exclusions = false;
        for p in patterns {
            let p = p.as_ref().trim();
            if p.is_empty() {
                continue;
            }
            let mut cleaned = gopath::clean(p);
            let exclusion = cleaned.starts_with('!');
            if exclusion {
                if cleaned.len() == 1 {
                    return Err(IgnoreError::IllegalExclusion);
                }
                cleaned.remove(0);
                exclusions = true;
            }
            if !gopath::glob_is_valid(&cleaned) {
                return Err(IgnoreError::BadPattern { pattern: cleaned });
            }
            out.push(Pattern::compile(cleaned, exclusion));
        }
        Ok(Self {
            patterns: out,
            exclusions,
        })
    }

    /// Whether any pattern is an exclusion (`!…`).
    pub fn exclusions(&self) -> bool {
        self.exclusions
    }

    /// The compiled patterns, in order.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// moby's deprecated `Matches`: last match wins over the patterns, where a pattern also
    /// matches when it matches the parent path cut to the pattern's own number of
    /// components. The docker CLI still uses it to decide whether to re-include the
    /// Dockerfile and `.dockerignore` ([`trim_build_files_from_excludes`]); use
    /// [`matches_or_parent_matches`](Self::matches_or_parent_matches) otherwise.
    ///
    /// [`trim_build_files_from_excludes`]: super::trim_build_files_from_excludes
    ///
    /// # Errors
    ///
    /// [`IgnoreError::BadPattern`] when an evaluated pattern's regular expression is invalid.
    pub fn matches(&self, file: &str) -> Result<bool, IgnoreError> {
        let parent = gopath::dir(file);
        let parent_dirs: Vec<&str> = parent.split('/').collect();
        let mut matched = false;
        for pattern in &self.patterns {
            // Only an exclusion can undo a match, only an inclusion can make one.
            if pattern.exclusion != matched {
                continue;
            }
            let mut hit = pattern.is_match(file)?;
            if !hit && parent != "." && pattern.dirs <= parent_dirs.len() {
                hit = pattern
                    .is_match(&parent_dirs[..pattern.dirs].join("/"))
                    .unwrap_or(false);
            }
            if hit {
                matched = !pattern.exclusion;
            }
        }
        Ok(matched)
    }

    /// moby's `MatchesExact`: last match wins, without looking at parent directories.
    ///
    /// # Errors
    ///
    /// [`IgnoreError::BadPattern`] when an evaluated pattern's regular expression is invalid.
    pub fn matches_exact(&self, file: &str) -> Result<bool, IgnoreError> {
        let mut matched = false;
        for pattern in &self.patterns {
            if pattern.exclusion != matched {
                continue;
            }
            if pattern.is_match(file)? {
                matched = !pattern.exclusion;
            }
        }
        Ok(matched)
    }

    /// moby's `MatchesOrParentMatches`: last match wins, where a pattern matches a path
    /// when it matches the path or any of its ancestor directories.
    ///
    /// # Errors
    ///
    /// [`IgnoreError::BadPattern`] when an evaluated pattern's regular expression is invalid.
    pub fn matches_or_parent_matches(&self, file: &str) -> Result<bool, IgnoreError> {
        let parent = gopath::dir(file);
        let parent_dirs: Vec<&str> = parent.split('/').collect();
        let mut matched = false;
        for pattern in &self.patterns {
            if pattern.exclusion != matched {
                continue;
            }
            let mut hit = pattern.is_match(file)?;
            if !hit && parent != "." {
                hit = pattern.matches_an_ancestor(&parent_dirs);
            }
            if hit {
                matched = !pattern.exclusion;
            }
        }
        Ok(matched)
    }

    /// moby's `MatchesUsingParentResults`, what the docker CLI's context walker calls: like
    /// [`matches_or_parent_matches`](Self::matches_or_parent_matches), but a pattern the
    /// parent directory matched counts as matched without being evaluated again. Pass the
    /// parent's returned [`MatchInfo`], or the default for a top-level path (then the
    /// ancestors are checked as `matches_or_parent_matches` does).
    ///
    /// # Errors
    ///
    /// [`IgnoreError::BadPattern`] when an evaluated pattern's regular expression is
    /// invalid; [`IgnoreError::MatchInfoMismatch`] when `parent` came from a matcher with a
    /// different number of patterns.
    pub fn matches_using_parent_results(
        &self,
        file: &str,
        parent: &MatchInfo,
    ) -> Result<(bool, MatchInfo), IgnoreError> {
        let parent_matched = &parent.parent_matched;
        if !parent_matched.is_empty() && parent_matched.len() != self.patterns.len() {
            return Err(IgnoreError::MatchInfoMismatch {
                expected: self.patterns.len(),
                got: parent_matched.len(),
            });
        }
        let mut matched = false;
        let mut info = MatchInfo {
            parent_matched: vec![false; self.patterns.len()],
        };
        for (i, pattern) in self.patterns.iter().enumerate() {
            let mut hit = parent_matched.get(i).copied().unwrap_or(false);
            if !hit {
                if pattern.exclusion != matched {
                    continue;
                }
                hit = pattern.is_match(file)?;
                if !hit && parent_matched.is_empty() {
                    let parent = gopath::dir(file);
                    if parent != "." {
                        let parent_dirs: Vec<&str> = parent.split('/').collect();
                        hit = pattern.matches_an_ancestor(&parent_dirs);
                    }
                }
            }
            info.parent_matched[i] = hit;
            if hit {
                matched = !pattern.exclusion;
            }
        }
        Ok((matched, info))
    }
}

/// moby's free `Matches`: compile `patterns`, clean `file`, and never exclude `.` itself.
///
/// # Errors
///
/// As [`PatternMatcher::new`] and [`PatternMatcher::matches`].
pub fn matches<S: AsRef<str>>(file: &str, patterns: &[S]) -> Result<bool, IgnoreError> {
    let pm = PatternMatcher::new(patterns)?;
    let file = gopath::clean(file);
    if file == "." {
        return Ok(false);
    }
    pm.matches(&file)
}

/// moby's free `MatchesOrParentMatches`: compile `patterns`, clean `file`, and never
/// exclude `.` itself.
///
/// # Errors
///
/// As [`PatternMatcher::new`] and [`PatternMatcher::matches_or_parent_matches`].
pub fn matches_or_parent_matches<S: AsRef<str>>(
    file: &str,
    patterns: &[S],
) -> Result<bool, IgnoreError> {
    let pm = PatternMatcher::new(patterns)?;
    let file = gopath::clean(file);
    if file == "." {
        return Ok(false);
    }
    pm.matches_or_parent_matches(&file)
}

impl Pattern {
    /// moby's `compile`: classify the pattern and build the Go regular expression text
    /// (kept for [`go_regex`](Self::go_regex)), then translate that text for the `regex`
    /// crate.
    fn compile(cleaned: String, exclusion: bool) -> Self {
        let mut re = String::from("^");
        let mut ty = MatchType::Exact;
        let mut chars = cleaned.chars().peekable();
        // Go's text/scanner silently drops a byte-order mark at the very start.
        if chars.peek() == Some(&'\u{FEFF}') {
            chars.next();
        }
        let mut i = 0usize;
        while let Some(ch) = chars.next() {
            match ch {
                '*' if chars.peek() == Some(&'*') => {
                    chars.next();
                    // `**/` is `**`.
                    if chars.peek() == Some(&'/') {
                        chars.next();
                    }
                    if chars.peek().is_none() {
                        // A trailing `**` accepts everything (as in .gitignore).
                        if ty == MatchType::Exact {
                            ty = MatchType::Prefix;
                        } else {
                            re.push_str(".*");
                            ty = MatchType::Regexp;
                        }
                    } else {
                        // Any number of directories, including none.
                        re.push_str("(.*/)?");
                        ty = MatchType::Regexp;
                    }
                    if i == 0 {
                        ty = MatchType::Suffix;
                    }
                }
                '*' => {
                    re.push_str("[^/]*");
                    ty = MatchType::Regexp;
                }
                '?' => {
                    re.push_str("[^/]");
                    ty = MatchType::Regexp;
                }
                // Regex metacharacters with no meaning in a Go glob.
                '.' | '+' | '(' | ')' | '|' | '{' | '}' | '$' => {
                    re.push('\\');
                    re.push(ch);
                }
                '\\' => match chars.next() {
                    Some(next) => {
                        re.push('\\');
                        re.push(next);
                        ty = MatchType::Regexp;
                    }
                    None => re.push('\\'),
                },
                '[' | ']' => {
                    re.push(ch);
                    ty = MatchType::Regexp;
                }
                _ => re.push(ch),
            }
            i += 1;
        }
        let regex = (ty == MatchType::Regexp).then(|| {
            re.push('$');
            match byte_regex(&cleaned, &re) {
                Some(bytes) => compiled_bytes(&bytes).map(Compiled::Bytes).ok_or(()),
                None => compiled(&re).map(Compiled::Text).ok_or(()),
            }
        });
        Self {
            dirs: cleaned.split('/').count(),
            cleaned,
            exclusion,
            match_type: ty,
            go_regex: if ty == MatchType::Regexp {
                re
            } else {
                String::new()
            },
            regex,
        }
    }

    /// The cleaned pattern, without its leading `!` (moby's `String`).
    pub fn as_str(&self) -> &str {
        &self.cleaned
    }

    /// Whether this is an exclusion (`!…`) that re-includes what it matches.
    pub fn is_exclusion(&self) -> bool {
        self.exclusion
    }

    /// How the pattern is matched.
    pub fn match_type(&self) -> MatchType {
        self.match_type
    }

    /// The Go regular expression text moby builds for a [`MatchType::Regexp`] pattern
    /// (before the translation to `regex` syntax), for tests and diagnostics.
    pub fn go_regex(&self) -> Option<&str> {
        (self.match_type == MatchType::Regexp).then_some(self.go_regex.as_str())
    }

    /// moby's `Pattern.match`. Byte-wise, like Go's string slicing, so that a pattern whose
    /// `**` follows a byte-order mark cannot split a character.
    fn is_match(&self, path: &str) -> Result<bool, IgnoreError> {
        let pat = self.cleaned.as_bytes();
        let path_b = path.as_bytes();
        Ok(match self.match_type {
            MatchType::Exact => path == self.cleaned,
            MatchType::Prefix => path_b.starts_with(&pat[..pat.len().saturating_sub(2)]),
            MatchType::Suffix => {
                let suffix = pat.get(2..).unwrap_or_default();
                path_b.ends_with(suffix)
                    || (suffix.first() == Some(&b'/') && path_b == &suffix[1..])
            }
            MatchType::Regexp => match &self.regex {
                Some(Ok(compiled)) => compiled.is_match(path),
                _ => {
                    return Err(IgnoreError::BadPattern {
                        pattern: self.cleaned.clone(),
                    });
                }
            },
        })
    }

    /// Whether the pattern matches one of the ancestors `a`, `a/b`, … of a path whose
    /// parent splits into `parent_dirs`. Errors count as no match, as in moby.
    fn matches_an_ancestor(&self, parent_dirs: &[&str]) -> bool {
        (1..=parent_dirs.len()).any(|n| self.is_match(&parent_dirs[..n].join("/")).unwrap_or(false))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.cleaned)
    }
}

/// The Go regular expression `go`, translated and compiled once per process: a run
/// walks a context, and asks whether each target's Dockerfile is excluded, with the same
/// `.dockerignore` patterns many times (compiling them cost more than the walk's matching
/// in a profile of a no-op run). Handed out shared, not cloned: a clone of a `Regex`
/// starts with an empty pool of search caches, and building one costs more than matching
/// a path.
fn compiled(go: &str) -> Option<Arc<Regex>> {
    static COMPILED: kiln_util::Memo<String, Option<Arc<Regex>>> = kiln_util::Memo::new();
    COMPILED.get_or_insert_with(go, || {
        goregex::translate(go)
            .ok()
            .and_then(|rust| Regex::new(&rust).ok())
            .map(Arc::new)
    })
}

/// One character other than `/`, on UTF-8 bytes: an ASCII byte, or a leading byte and its
/// continuation bytes. Over a valid UTF-8 path (the only kind matched), what follows in the
/// expression never starts with a continuation byte, or takes any byte but `/` or `\n`
/// (`[^/]*`, `.`): either way the expression matches the paths Go's `[^/]` would.
const ONE_CHAR: &str = r"(?:[\x00-\x2E\x30-\x7F]|[\xC0-\xFF][\x80-\xBF]*)";

/// The byte-wise expression for the Go expression `go` that moby builds from the cleaned
/// pattern `cleaned`, when the pattern is ASCII without a bracket class or an escape: then
/// `go` holds only ASCII literals (metacharacters escaped), `^`, `$`, `[^/]*`, `[^/]`,
/// `(.*/)?` and `.*`, which mean the same in the `regex` crate's syntax. With Unicode off,
/// `[^/]*` and `.` take any byte but `/` or a newline, which over valid UTF-8 is any
/// character but those; a lone `[^/]` (a `?`) becomes [`ONE_CHAR`]. `None` otherwise (the
/// Unicode-aware translation is used).
fn byte_regex(cleaned: &str, go: &str) -> Option<String> {
    if !cleaned.is_ascii() || cleaned.contains(['[', ']', '\\']) {
        return None;
    }
    let mut out = String::from("(?-u)");
    let mut rest = go;
    while let Some(at) = rest.find("[^/]") {
        out.push_str(&rest[..at]);
        rest = &rest[at + 4..];
        if let Some(after) = rest.strip_prefix('*') {
            out.push_str("[^/]*");
            rest = after;
        } else {
            out.push_str(ONE_CHAR);
        }
    }
    out.push_str(rest);
    Some(out)
}

/// [`byte_regex`]'s expression compiled once per process, handed out shared (as
/// [`compiled`]).
fn compiled_bytes(text: &str) -> Option<Arc<regex::bytes::Regex>> {
    static COMPILED: kiln_util::Memo<String, Option<Arc<regex::bytes::Regex>>> =
        kiln_util::Memo::new();
    COMPILED.get_or_insert_with(text, || regex::bytes::Regex::new(text).ok().map(Arc::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names with one-, two-, three- and four-byte characters, where a byte-wise `?`
    /// could take part of a character.
    const PATHS: &[&str] = &[
        "",
        "a",
        "é",
        "éé",
        "ab",
        "aéb",
        "a€b",
        "a😀b",
        "é/x",
        "a/b",
        "x.tmp",
        "é.tmp",
        "a/b/c.tmp",
        "日本/x.tmp",
        "日本/ü/x.pyc",
        "__pycache__",
        "a/__pycache__",
        "a\nb",
        "é\n",
        "x.tmpé",
        "€",
        "😀",
        "😀😀",
        "a/😀/b",
        "a.b.c",
    ];

    #[test]
    fn an_ascii_glob_is_matched_on_bytes_and_takes_the_paths_the_go_expression_takes() {
        for glob in [
            "**/*.tmp",
            "**/*.pyc",
            "?",
            "??",
            "???",
            "a?b",
            "?*",
            "*?",
            "*",
            "a*b",
            "**/?",
            "?/*",
            "**/?/b",
            "*.?",
            "a/*/**",
            "**/a?",
            "?.tmp",
            "**/??.tmp",
            "a.b*",
        ] {
            let p = Pattern::compile(glob.to_string(), false);
            assert!(
                matches!(p.regex, Some(Ok(Compiled::Bytes(_)))),
                "{glob} is not matched on bytes"
            );
            let unicode = compiled(&p.go_regex).expect("Go's expression compiles");
            for path in PATHS {
                assert_eq!(
                    p.is_match(path).unwrap(),
                    unicode.is_match(path),
                    "glob {glob:?}, path {path:?}"
                );
            }
        }
    }

    #[test]
    fn a_glob_with_a_class_an_escape_or_a_non_ascii_character_keeps_gos_expression() {
        for glob in ["*.[ch]", "[!a]*", "a\\*b", "é*", "**/ü?"] {
            let p = Pattern::compile(glob.to_string(), false);
            assert!(
                matches!(p.regex, Some(Ok(Compiled::Text(_)))),
                "{glob} is matched on bytes"
            );
        }
    }
}
