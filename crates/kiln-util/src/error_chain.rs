//! An error with its sources, in one line.

/// `e`, then each of its sources not already contained in the text,
/// joined by `: ` ("client error (SendRequest): connection closed …"), so
/// a wrapped I/O or HTTP error says why.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
        src = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn sources_are_appended_once() {
        let e = E(
            "client error (SendRequest)",
            Some(Box::new(E(
                "connection closed",
                Some(Box::new(E("connection closed", None))),
            ))),
        );
        assert_eq!(
            error_chain(&e),
            "client error (SendRequest): connection closed"
        );
        assert_eq!(error_chain(&E("alone", None)), "alone");
    }
}
