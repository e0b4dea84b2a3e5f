//! RFC 3339 timestamps (as Go's `time.Time` marshals them in rawjson) to
//! seconds since the Unix epoch, without a date-time dependency.

/// `2026-06-10T14:12:42.123456789Z` or `…+02:00` → seconds since the epoch;
/// `None` if it is not such a timestamp.
pub(crate) fn parse_rfc3339(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &s[start..i.min(start + 9)];
        frac = digits.parse::<f64>().ok()? / 10f64.powi(digits.len() as i32);
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let h = num(i + 1..i + 3)?;
            let m = num(i + 4..i + 6)?;
            let o = h * 3600 + m * 60;
            if sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset;
    Some(secs as f64 + frac)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800.0));
        let a = parse_rfc3339("2026-06-10T14:12:42.25Z").unwrap();
        let b = parse_rfc3339("2026-06-10T16:12:43.75+02:00").unwrap();
        assert!((b - a - 1.5).abs() < 1e-6);
        assert_eq!(
            parse_rfc3339("2026-06-10T14:12:42.123456789123Z").map(|t| t.fract() > 0.12),
            Some(true)
        );
        for bad in [
            "",
            "2026-06-10",
            "2026-13-10T14:12:42Z",
            "2026-06-10T14:12:42",
            "2026-06-10T14:12:42.Z",
            "x026-06-10T14:12:42Z",
            "2026-06-10T14:12:42+0200",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
