//! kiln-util: small helpers shared by every kiln crate. Pure, no I/O.

mod duration;
mod error_chain;
pub mod gopath;
mod memo;
mod suggest;
mod text;

pub use duration::{duration, wall};
pub use error_chain::error_chain;
pub use memo::Memo;
pub use suggest::{distance, suggest};
pub use text::{NotUtf8, utf8_text};
