//! "Did you mean" suggestions for mistyped names.
//!
//! Owns the edit distance used to suggest a known name for an unknown one. Pure and
//! allocation-light; it never decides whether a name is an error, only what to suggest.

/// The candidate closest to `name` by Damerau–Levenshtein distance (optimal string
/// alignment: insertions, deletions, substitutions and adjacent transpositions), if it is
/// within `max(2, chars(name) / 3)` edits. Ties go to the candidate seen first.
///
/// ```
/// let names = ["pytorch", "pytorch-wheel", "vllm"];
/// assert_eq!(kiln_util::suggest("pytroch", names), Some("pytorch"));
/// assert_eq!(kiln_util::suggest("tensorflow", names), None);
/// ```
#[must_use]
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let name: Vec<char> = name.chars().collect();
    let limit = (name.len() / 3).max(2);
    let mut best: Option<(usize, &'a str)> = None;
    let mut other: Vec<char> = Vec::new();
    for candidate in candidates {
        other.clear();
        other.extend(candidate.chars());
        // The distance is at least the length difference: skip hopeless candidates cheaply.
        if other.len().abs_diff(name.len()) > limit {
            continue;
        }
        let distance = osa_distance(&name, &other);
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// Optimal string alignment distance between two strings (Levenshtein plus
/// adjacent transpositions).
#[must_use]
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    osa_distance(&a, &b)
}

/// Optimal string alignment distance between two character sequences, in O(|a|·|b|) time
/// and O(|b|) space (three rolling rows).
fn osa_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut before_previous = vec![0; width];
    let mut previous: Vec<usize> = (0..width).collect();
    let mut current = vec![0; width];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut value = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                value = value.min(before_previous[j - 2] + 1);
            }
            current[j] = value;
        }
        std::mem::swap(&mut before_previous, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        osa_distance(&a, &b)
    }

    #[test]
    fn distances() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("vllm", "vlml"), 1); // transposition
        assert_eq!(distance("ca", "abc"), 3); // OSA, not unrestricted Damerau
        assert_eq!(distance("pytorch", "pytorch-wheel"), 6);
        assert_eq!(distance("héllo", "hello"), 1); // characters, not bytes
    }

    #[test]
    fn suggests_the_closest_within_the_limit() {
        let names = [
            "rocm-runtime",
            "pytorch",
            "pytorch-wheel",
            "triton-wheel",
            "vllm",
            "vllm-wheel",
        ];
        assert_eq!(suggest("vlm", names), Some("vllm"));
        assert_eq!(suggest("vllm-whel", names), Some("vllm-wheel"));
        assert_eq!(suggest("pytorch-wheels", names), Some("pytorch-wheel"));
        assert_eq!(suggest("tritonwheel", names), Some("triton-wheel"));
        assert_eq!(suggest("rocm", names), None);
        assert_eq!(suggest("tensorflow", names), None);
        assert_eq!(suggest("anything", std::iter::empty()), None);
    }

    #[test]
    fn limit_scales_with_length() {
        // 12 characters allow 4 edits; 5 characters allow 2.
        assert_eq!(
            suggest("rocm-runtxyz", ["rocm-runtime"]),
            Some("rocm-runtime")
        );
        assert_eq!(suggest("abcde", ["abxyz"]), None);
        assert_eq!(suggest("abcde", ["abcxy"]), Some("abcxy"));
    }

    #[test]
    fn ties_go_to_the_first_candidate() {
        assert_eq!(suggest("abc", ["abd", "abe"]), Some("abd"));
        assert_eq!(suggest("abc", ["abe", "abd"]), Some("abe"));
    }
}
