//! Bake's built-in functions (buildx `bake/hclparser/stdlib.go`): the go-cty stdlib,
//! go-cty-funcs, and buildx's own additions, re-implemented over [`crate::value`].
//!
//! Owns: the function table and HCL call semantics (argument conversion to the
//! declared parameter types, null checks, arity). `try`, `can` and `convert`
//! need unevaluated arguments or type expressions and live in the evaluator.
//! Must never: touch bake blocks; only `homedir`, `timestamp` and `uuidv4` may
//! read the environment, the clock or randomness.

use std::sync::LazyLock;

use crate::value::{Type, Value, convert};

mod collections;
mod encoding;
mod goquote;
mod numeric;
#[cfg(test)]
mod testkit;
mod text;

/// A function implementation. Arguments arrive already converted to the declared
/// parameter types (variadic arguments to the variadic parameter's type), and
/// non-null unless the parameter allows null.
pub type FuncImpl = fn(&[Value]) -> Result<Value, FuncError>;

/// One declared parameter.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: &'static str,
    /// `Type::Dynamic` accepts any value unconverted.
    pub ty: Type,
    pub allow_null: bool,
}

impl Param {
    pub fn new(name: &'static str, ty: Type) -> Param {
        Param {
            name,
            ty,
            allow_null: false,
        }
    }
    pub fn nullable(name: &'static str, ty: Type) -> Param {
        Param {
            name,
            ty,
            allow_null: true,
        }
    }
}

/// A built-in function.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: &'static str,
    pub params: Vec<Param>,
    pub variadic: Option<Param>,
    pub imp: FuncImpl,
}

impl Function {
    pub fn new(name: &'static str, params: Vec<Param>, imp: FuncImpl) -> Function {
        Function {
            name,
            params,
            variadic: None,
            imp,
        }
    }
    pub fn variadic(
        name: &'static str,
        params: Vec<Param>,
        variadic: Param,
        imp: FuncImpl,
    ) -> Function {
        Function {
            name,
            params,
            variadic: Some(variadic),
            imp,
        }
    }
}

/// Why a call failed.
#[derive(Clone, Debug, PartialEq)]
pub enum FuncError {
    /// Argument `index` (0-based, counting variadic arguments) is unsuitable;
    /// HCL reports it as `Invalid value for "<param>" parameter: <msg>`.
    Arg { index: usize, msg: String },
    /// Wrong number of arguments.
    Arity { msg: String },
    /// The call itself failed; HCL reports `Call to function "f" failed: <msg>`.
    Failed(String),
}

impl FuncError {
    pub fn arg(index: usize, msg: impl Into<String>) -> FuncError {
        FuncError::Arg {
            index,
            msg: msg.into(),
        }
    }
    pub fn failed(msg: impl Into<String>) -> FuncError {
        FuncError::Failed(msg.into())
    }
}

impl From<String> for FuncError {
    fn from(s: String) -> Self {
        FuncError::Failed(s)
    }
}

impl From<&str> for FuncError {
    fn from(s: &str) -> Self {
        FuncError::Failed(s.to_string())
    }
}

static TABLE: LazyLock<crate::fxhash::FxHashMap<&'static str, Function>> = LazyLock::new(|| {
    let mut all = Vec::new();
    collections::register(&mut all);
    encoding::register(&mut all);
    numeric::register(&mut all);
    text::register(&mut all);
    all.into_iter().map(|f| (f.name, f)).collect()
});

/// The names handled by the evaluator rather than the table.
pub const SPECIAL: &[&str] = &["try", "can", "convert"];

/// Looks up a built-in function by name.
pub fn lookup(name: &str) -> Option<&'static Function> {
    TABLE.get(name)
}

/// Every built-in name (table plus the evaluator's special forms), sorted.
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = TABLE
        .keys()
        .copied()
        .chain(SPECIAL.iter().copied())
        .collect();
    v.sort_unstable();
    v
}

/// Calls a function with HCL semantics: arity check, null check, conversion of
/// each argument to its parameter type, then the implementation.
pub fn call(f: &Function, args: Vec<Value>) -> Result<Value, FuncError> {
    let n = f.params.len();
    if args.len() < n {
        let missing = &f.params[args.len()];
        return Err(FuncError::Arity {
            msg: format!(
                "Function {:?} expects {} argument(s). Missing value for {:?}.",
                f.name, n, missing.name
            ),
        });
    }
    if args.len() > n && f.variadic.is_none() {
        return Err(FuncError::Arity {
            msg: format!("Function {:?} expects only {} argument(s).", f.name, n),
        });
    }
    let mut conv = Vec::with_capacity(args.len());
    for (i, a) in args.into_iter().enumerate() {
        let p = f
            .params
            .get(i)
            .or(f.variadic.as_ref())
            .expect("arity checked above");
        if a.is_null() && !p.allow_null {
            return Err(FuncError::arg(i, "argument must not be null"));
        }
        let c = convert(a, &p.ty).map_err(|m| FuncError::arg(i, m))?;
        conv.push(c);
    }
    (f.imp)(&conv)
}

/// Calls a built-in by name; for tests and for the evaluator's operators.
pub fn call_by_name(name: &str, args: Vec<Value>) -> Result<Value, FuncError> {
    let f = lookup(name).ok_or_else(|| FuncError::failed(format!("no function {name:?}")))?;
    call(f, args)
}

/// The parameter that argument `index` binds to, for error messages.
pub fn param_name(f: &Function, index: usize) -> &'static str {
    f.params
        .get(index)
        .or(f.variadic.as_ref())
        .map(|p| p.name)
        .unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bake registers 106 names (FEATURES.md §5); every one must exist.
    #[test]
    fn all_bake_stdlib_names_exist() {
        let expected = "absolute add and base64decode base64encode basename bcrypt byteslen \
            bytesslice can ceil chomp chunklist cidrhost cidrnetmask cidrsubnet cidrsubnets \
            coalesce coalescelist compact concat contains convert csvdecode dirname distinct \
            divide element equal flatten floor format formatdate formattimestamp formatlist \
            greaterthan greaterthanorequalto hasindex homedir indent index indexof int join \
            jsondecode jsonencode keys length lessthan lessthanorequalto log lookup lower max \
            md5 merge min modulo multiply negate not notequal or parseint pow range \
            regex_replace regex regexall replace reverse reverselist rsadecrypt sanitize \
            semvercmp sethaselement setintersection setproduct setsubtract \
            setsymmetricdifference setunion sha1 sha256 sha512 signum slice sort split strlen \
            substr subtract timeadd timestamp title trim trimprefix trimspace trimsuffix try \
            unixtimestampparse upper urlencode uuidv4 uuidv5 values zipmap";
        let mut want: Vec<&str> = expected.split_whitespace().collect();
        want.sort_unstable();
        assert_eq!(want.len(), 106);
        let have = names();
        let missing: Vec<&&str> = want.iter().filter(|n| !have.contains(n)).collect();
        assert!(missing.is_empty(), "missing functions: {missing:?}");
        let extra: Vec<&&str> = have.iter().filter(|n| !want.contains(n)).collect();
        assert!(extra.is_empty(), "unexpected functions: {extra:?}");
    }
}
