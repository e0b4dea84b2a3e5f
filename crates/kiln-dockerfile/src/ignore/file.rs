//! Reading `.dockerignore` text into patterns (moby's `ignorefile.ReadAll`).

use super::gopath;

/// Parse the text of a `.dockerignore` file into patterns, as the docker CLI does
/// (`github.com/moby/patternmatcher/ignorefile.ReadAll`):
///
/// - lines end at `\n`, and one `\r` before it is dropped;
/// - a UTF-8 byte-order mark at the start of the first line is dropped;
/// - a line whose first character is `#` is a comment (only in column one: `  # x` is
///   the pattern `# x`);
/// - surrounding whitespace is trimmed, and blank lines are skipped;
/// - a leading `!` marks an exclusion, and whitespace after it is trimmed too;
/// - the rest is cleaned with Go's `filepath.Clean`, and one leading `/` is dropped, so
///   `/foo` and `foo` are the same pattern.
///
/// A line that is `!` alone is kept as `!`; [`PatternMatcher::new`] rejects it, as Docker
/// does. (Go's scanner also fails on a line longer than 64 KiB; this reader does not.)
///
/// [`PatternMatcher::new`]: super::PatternMatcher::new
pub fn read_dockerignore(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if n == 0 {
            line.strip_prefix('\u{FEFF}').unwrap_or(line)
        } else {
            line
        };
        if line.starts_with('#') {
            continue;
        }
        let mut pattern = line.trim();
        if pattern.is_empty() {
            continue;
        }
        let invert = pattern.starts_with('!');
        if invert {
            pattern = pattern[1..].trim();
        }
        let mut cleaned = String::new();
        if !pattern.is_empty() {
            cleaned = gopath::clean(pattern);
            if cleaned.len() > 1 && cleaned.starts_with('/') {
                cleaned.remove(0);
            }
        }
        out.push(if invert {
            format!("!{cleaned}")
        } else {
            cleaned
        });
    }
    out
}
