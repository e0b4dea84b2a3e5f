//! Helpers shared by the stdlib groups' unit tests.

use super::{FuncError, call_by_name};
use crate::value::Value;

pub fn s(x: &str) -> Value {
    Value::string(x)
}

pub fn n(x: f64) -> Value {
    Value::Number(x)
}

pub fn b(x: bool) -> Value {
    Value::Bool(x)
}

pub fn call(name: &str, args: Vec<Value>) -> Result<Value, FuncError> {
    call_by_name(name, args)
}

/// The call's value; panics naming the call if it fails.
pub fn ok(name: &str, args: Vec<Value>) -> Value {
    match call(name, args.clone()) {
        Ok(v) => v,
        Err(e) => panic!("{name}({args:?}) failed: {e:?}"),
    }
}

/// The message of a call failure (`FuncError::Failed`).
pub fn failed(name: &str, args: Vec<Value>) -> String {
    match call(name, args.clone()) {
        Err(FuncError::Failed(m)) => m,
        other => panic!("{name}({args:?}): expected a call failure, got {other:?}"),
    }
}

/// The index and message of an argument error.
pub fn arg_err(name: &str, args: Vec<Value>) -> (usize, String) {
    match call(name, args.clone()) {
        Err(FuncError::Arg { index, msg }) => (index, msg),
        other => panic!("{name}({args:?}): expected an argument error, got {other:?}"),
    }
}
