//! Built-in functions: numeric group.

use super::Function;

pub(super) fn register(_out: &mut Vec<Function>) {}
