//! Text files that must be UTF-8, and where they are not.

/// Where a file stops being UTF-8: 1-based line and column (in characters
/// of the valid text before it) and the first offending byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotUtf8 {
    pub line: usize,
    pub col: usize,
    pub byte: u8,
}

impl std::fmt::Display for NotUtf8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: not UTF-8 text (byte 0x{:02x})",
            self.line, self.col, self.byte
        )
    }
}

/// The bytes as a string, or where they are not UTF-8.
pub fn utf8_text(bytes: Vec<u8>) -> Result<String, NotUtf8> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // Valid up to `at` by construction.
        let valid = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
        let line = valid.matches('\n').count() + 1;
        let col = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        NotUtf8 {
            line,
            col,
            byte: bytes[at],
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_the_first_byte_that_is_not_utf8() {
        assert_eq!(utf8_text(b"a\xc3\xa9\n".to_vec()).unwrap(), "aé\n");
        let e = utf8_text(b"x = 1\nn\xc3\xa9 = \xff\n".to_vec()).unwrap_err();
        assert_eq!(
            e,
            NotUtf8 {
                line: 2,
                col: 6,
                byte: 0xff
            }
        );
        assert_eq!(e.to_string(), "2:6: not UTF-8 text (byte 0xff)");
        let e = utf8_text(vec![0xfe]).unwrap_err();
        assert_eq!((e.line, e.col), (1, 1));
    }
}
