//! Built-in functions: collections group.

use super::Function;

pub(super) fn register(_out: &mut Vec<Function>) {}
