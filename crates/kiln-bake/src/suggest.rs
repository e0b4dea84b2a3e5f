//! "Did you mean" suggestions (shared with the other crates through
//! `kiln-util`).

pub use kiln_util::{distance, suggest};
