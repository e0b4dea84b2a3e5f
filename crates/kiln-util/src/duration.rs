//! Durations as people read them.

/// `1h 32m`, `4m 05s`, `45.2s`; `-` for a negative or non-finite value.
#[must_use]
pub fn duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "-".into();
    }
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let total = s.round() as u64;
    let (h, m, sec) = (total / 3600, (total / 60) % 60, total % 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else {
        format!("{m}m {sec:02}s")
    }
}

/// A wall time, as precise as it is short: `0.42s` under ten seconds,
/// else as [`duration`].
#[must_use]
pub fn wall(s: f64) -> String {
    if s.is_finite() && (0.0..10.0).contains(&s) {
        format!("{s:.2}s")
    } else {
        duration(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(45.24), "45.2s");
        assert_eq!(duration(245.0), "4m 05s");
        assert_eq!(duration(5520.0), "1h 32m");
        assert_eq!(duration(-1.0), "-");
        assert_eq!(wall(0.0), "0.00s");
        assert_eq!(wall(0.42), "0.42s");
        assert_eq!(wall(9.994), "9.99s");
        assert_eq!(wall(15.24), "15.2s");
        assert_eq!(wall(185.0), "3m 05s");
        assert_eq!(wall(3720.0), "1h 02m");
        assert_eq!(wall(f64::NAN), "-");
    }
}
