//! Built-in functions: encoding group.

use super::Function;

pub(super) fn register(_out: &mut Vec<Function>) {}
