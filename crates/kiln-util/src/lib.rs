//! kiln-util: small helpers shared by every kiln crate. Pure, no I/O.

pub mod gopath;
mod suggest;

pub use suggest::{distance, suggest};
