//! kiln-util: small helpers shared by every kiln crate. Pure, no I/O.

mod error_chain;
pub mod gopath;
mod suggest;

pub use error_chain::error_chain;
pub use suggest::{distance, suggest};
