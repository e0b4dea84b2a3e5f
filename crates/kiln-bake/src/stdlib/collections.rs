//! Built-in functions: collections group.
//!
//! Re-implements go-cty's `cty/function/stdlib/{collection.go,set.go,sequence.go}`,
//! `CoalesceFunc` (general.go), `SortFunc` (string.go) and buildx's own `indexof`
//! (`bake/hclparser/stdlib.go`), with their parameter types, result types and error
//! wording.
//!
//! Owns: the 28 collection functions, plus private re-creations of the go-cty pieces
//! they depend on: `Value.Equals` (strictly type-sensitive), `convert.UnifyUnsafe`
//! (with go-cty's preference order) and integer extraction (`gocty.FromCtyValue`).
//! Must never: panic on any input, or allocate without a bound (`range` stops at
//! 1024 values like go-cty; `setproduct` refuses results above
//! [`MAX_PRODUCT_VALUES`] values, which go-cty does not).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use super::{FuncError, Function, Param};
use crate::value::{Type, Value, convert, to_json};

/// gocty's message for a number that does not fit a Go `int`.
const WHOLE_NUMBER: &str =
    "value must be a whole number, between -9223372036854775808 and 9223372036854775807";

/// go-cty's artificial cap on `range` results.
const MAX_RANGE_VALUES: usize = 1024;

/// Upper bound on the number of values (tuples × arguments) `setproduct` may build.
/// go-cty has no such limit; this keeps a hostile file from exhausting memory.
const MAX_PRODUCT_VALUES: usize = 1 << 20;

pub(super) fn register(out: &mut Vec<Function>) {
    let any = |name| Param::new(name, Type::Dynamic);
    let list_any = |name| Param::new(name, Type::list(Type::Dynamic));
    let set_any = |name| Param::new(name, Type::set(Type::Dynamic));

    out.push(Function::new(
        "chunklist",
        vec![list_any("list"), Param::new("size", Type::Number)],
        chunklist,
    ));
    out.push(Function::variadic(
        "coalesce",
        vec![],
        Param::nullable("vals", Type::Dynamic),
        coalesce,
    ));
    out.push(Function::variadic(
        "coalescelist",
        vec![],
        Param::nullable("vals", Type::Dynamic),
        coalescelist,
    ));
    out.push(Function::new(
        "compact",
        vec![Param::new("list", Type::list(Type::String))],
        compact,
    ));
    out.push(Function::variadic("concat", vec![], any("seqs"), concat));
    out.push(Function::new(
        "contains",
        vec![any("list"), any("value")],
        contains,
    ));
    out.push(Function::new("distinct", vec![list_any("list")], distinct));
    out.push(Function::new(
        "element",
        vec![any("list"), Param::new("index", Type::Number)],
        element,
    ));
    out.push(Function::new("flatten", vec![any("list")], flatten));
    out.push(Function::new(
        "hasindex",
        vec![any("collection"), any("key")],
        hasindex,
    ));
    out.push(Function::new(
        "index",
        vec![any("collection"), any("key")],
        index,
    ));
    out.push(Function::new(
        "indexof",
        vec![any("list"), any("value")],
        indexof,
    ));
    out.push(Function::new("keys", vec![any("inputMap")], keys));
    out.push(Function::new("length", vec![any("collection")], length));
    out.push(Function::new(
        "lookup",
        vec![
            any("inputMap"),
            Param::new("key", Type::String),
            any("default"),
        ],
        lookup,
    ));
    out.push(Function::variadic(
        "merge",
        vec![],
        Param::nullable("maps", Type::Dynamic),
        merge,
    ));
    out.push(Function::variadic(
        "range",
        vec![],
        Param::new("params", Type::Number),
        range,
    ));
    out.push(Function::new("reverselist", vec![any("list")], reverselist));
    out.push(Function::new(
        "sethaselement",
        vec![set_any("set"), any("elem")],
        sethaselement,
    ));
    out.push(Function::variadic(
        "setintersection",
        vec![set_any("first_set")],
        set_any("other_sets"),
        setintersection,
    ));
    out.push(Function::variadic(
        "setproduct",
        vec![],
        any("sets"),
        setproduct,
    ));
    out.push(Function::new(
        "setsubtract",
        vec![set_any("a"), set_any("b")],
        setsubtract,
    ));
    out.push(Function::variadic(
        "setsymmetricdifference",
        vec![set_any("first_set")],
        set_any("other_sets"),
        setsymmetricdifference,
    ));
    out.push(Function::variadic(
        "setunion",
        vec![set_any("first_set")],
        set_any("other_sets"),
        setunion,
    ));
    out.push(Function::new(
        "slice",
        vec![
            any("list"),
            Param::new("start_index", Type::Number),
            Param::new("end_index", Type::Number),
        ],
        slice,
    ));
    out.push(Function::new(
        "sort",
        vec![Param::new("list", Type::list(Type::String))],
        sort,
    ));
    out.push(Function::new("values", vec![any("mapping")], values));
    out.push(Function::new(
        "zipmap",
        vec![Param::new("keys", Type::list(Type::String)), any("values")],
        zipmap,
    ));
}

// ------------------------------------------------------------------ helpers

fn failed(msg: impl Into<String>) -> FuncError {
    FuncError::failed(msg)
}

/// Argument `i`; the call machinery guarantees arity, but never index blindly.
fn arg(args: &[Value], i: usize) -> Result<&Value, FuncError> {
    args.get(i)
        .ok_or_else(|| failed(format!("missing argument {}", i + 1)))
}

fn number(v: &Value) -> Result<f64, FuncError> {
    v.as_number()
        .ok_or_else(|| failed(format!("a number is required, got {}", v.type_name())))
}

/// `gocty.FromCtyValue(v, &int)`: a whole number in the range of a Go `int`.
fn whole(n: f64) -> Result<i64, String> {
    // -2^63 is exactly representable; 2^63 is the first value out of range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.is_finite() && n.fract() == 0.0 && (-LIMIT..LIMIT).contains(&n) {
        Ok(n as i64)
    } else {
        Err(WHOLE_NUMBER.to_string())
    }
}

/// A collection length as a Go `int`.
fn len_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

/// cty's `Value.Equals` for known values: nulls equal each other whatever their
/// type, a null never equals a non-null, and values of different types are never
/// equal (so `1` and `"1"`, or a list and a tuple, differ).
fn cty_equals(a: &Value, b: &Value) -> bool {
    match (a.is_null(), b.is_null()) {
        (true, true) => return true,
        (true, false) | (false, true) => return false,
        (false, false) => {}
    }
    a.ty() == b.ty() && same_type_equal(a, b)
}

/// Structural equality of two values already known to have the same type.
fn same_type_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null(_), Value::Null(_)) => true,
        (Value::Null(_), _) | (_, Value::Null(_)) => false,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::List(_, x), Value::List(_, y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_type_equal(p, q))
        }
        (Value::Set(_, x), Value::Set(_, y)) => {
            x.len() == y.len() && x.iter().all(|p| y.iter().any(|q| same_type_equal(p, q)))
        }
        (Value::Map(_, x), Value::Map(_, y)) | (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| kx == ky && same_type_equal(vx, vy))
        }
        _ => false,
    }
}

/// Membership in a slice sorted by [`Value::set_cmp`] (a set's elements).
fn sorted_contains(sorted: &[Value], v: &Value) -> bool {
    let start = sorted.partition_point(|e| Value::set_cmp(e, v) == Ordering::Less);
    sorted
        .get(start..)
        .unwrap_or(&[])
        .iter()
        .take_while(|e| Value::set_cmp(e, v) == Ordering::Equal)
        .any(|e| cty_equals(e, v))
}

/// Sorts and deduplicates set elements the way [`Value::set_of`] does.
fn set_elems(ety: &Type, elems: Vec<Value>) -> Vec<Value> {
    match Value::set_of(ety.clone(), elems) {
        Value::Set(_, e) => e,
        _ => Vec::new(),
    }
}

// ------------------------------------------------------------------ sequences

fn chunklist(args: &[Value]) -> Result<Value, FuncError> {
    let (ety, elems) = match arg(args, 0)? {
        Value::List(t, e) => (t, e),
        other => {
            return Err(failed(format!(
                "a list is required, got {}",
                other.type_name()
            )));
        }
    };
    let size = whole(number(arg(args, 1)?)?).map_err(|e| failed(format!("invalid size: {e}")))?;
    if size < 0 {
        return Err(failed("the size argument must be positive"));
    }
    let list_ty = Type::list(ety.clone());
    if elems.is_empty() {
        return Ok(Value::List(list_ty, Vec::new()));
    }
    if size == 0 {
        return Ok(Value::List(
            list_ty,
            vec![Value::List(ety.clone(), elems.clone())],
        ));
    }
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let chunks = elems
        .chunks(size)
        .map(|c| Value::List(ety.clone(), c.to_vec()))
        .collect();
    Ok(Value::List(list_ty, chunks))
}

fn coalesce(args: &[Value]) -> Result<Value, FuncError> {
    let types: Vec<Type> = args.iter().map(Value::ty).collect();
    let ret = crate::value::unify::unify(&types)
        .ok_or_else(|| failed("all arguments must have the same type"))?;
    match args.iter().find(|a| !a.is_null()) {
        Some(a) => convert(a.clone(), &ret).map_err(failed),
        None => Err(failed("no non-null arguments")),
    }
}

fn coalescelist(args: &[Value]) -> Result<Value, FuncError> {
    if args.is_empty() {
        return Err(failed("at least one argument is required"));
    }
    if args
        .iter()
        .any(|a| !matches!(a.ty(), Type::List(_) | Type::Tuple(_)))
    {
        return Err(failed("coalescelist arguments must be lists or tuples"));
    }
    args.iter()
        .find(|a| !a.is_null() && a.len().unwrap_or(0) > 0)
        .cloned()
        .ok_or_else(|| failed("no non-null arguments"))
}

fn compact(args: &[Value]) -> Result<Value, FuncError> {
    let elems = arg(args, 0)?
        .as_seq()
        .ok_or_else(|| failed("a list of strings is required"))?;
    let kept = elems
        .iter()
        .filter(|v| !v.is_null() && v.as_str() != Some(""))
        .cloned()
        .collect();
    Ok(Value::List(Type::String, kept))
}

fn concat(args: &[Value]) -> Result<Value, FuncError> {
    if args.is_empty() {
        return Err(failed("at least one argument is required"));
    }
    // All lists with a common element type: the result is a list of that type.
    if args.iter().all(|a| matches!(a, Value::List(..))) {
        let types: Vec<Type> = args.iter().map(Value::ty).collect();
        if let Some(ret @ Type::List(_)) = crate::value::unify::unify(&types) {
            let ety = ret.element().cloned().unwrap_or(Type::Dynamic);
            let mut vals = Vec::new();
            for (i, a) in args.iter().enumerate() {
                match convert(a.clone(), &ret).map_err(|m| FuncError::arg(i, m))? {
                    Value::List(_, e) => vals.extend(e),
                    other => {
                        return Err(FuncError::arg(
                            i,
                            format!("list required, got {}", other.type_name()),
                        ));
                    }
                }
            }
            if ety.has_dynamic() && !vals.is_empty() {
                // go-cty's ListVal derives the element type from the elements.
                return Value::list(vals).map_err(failed);
            }
            return Ok(Value::List(ety, vals));
        }
    }
    // Otherwise a tuple of every element in order.
    let mut vals = Vec::new();
    for (i, a) in args.iter().enumerate() {
        match a {
            Value::List(_, e) | Value::Tuple(e) => vals.extend(e.iter().cloned()),
            other => {
                return Err(FuncError::arg(
                    i,
                    format!(
                        "all arguments must be lists or tuples; got {}",
                        other.type_name()
                    ),
                ));
            }
        }
    }
    Ok(Value::Tuple(vals))
}

fn contains(args: &[Value]) -> Result<Value, FuncError> {
    let elems = match arg(args, 0)? {
        Value::List(_, e) | Value::Tuple(e) | Value::Set(_, e) => e,
        _ => return Err(failed("argument must be list, tuple, or set")),
    };
    let value = arg(args, 1)?;
    Ok(Value::Bool(elems.iter().any(|e| cty_equals(value, e))))
}

fn distinct(args: &[Value]) -> Result<Value, FuncError> {
    let (ety, elems) = match arg(args, 0)? {
        Value::List(t, e) => (t, e),
        other => {
            return Err(failed(format!(
                "a list is required, got {}",
                other.type_name()
            )));
        }
    };
    // Candidates are bucketed by their JSON text so the pairwise cty equality
    // check only runs between plausible duplicates.
    let mut seen: HashMap<String, Vec<usize>> = HashMap::new();
    let mut out: Vec<Value> = Vec::new();
    for v in elems {
        let bucket = seen.entry(to_json(v).to_string()).or_default();
        if bucket
            .iter()
            .any(|&i| out.get(i).is_some_and(|o| cty_equals(o, v)))
        {
            continue;
        }
        bucket.push(out.len());
        out.push(v.clone());
    }
    Ok(Value::List(ety.clone(), out))
}

fn element(args: &[Value]) -> Result<Value, FuncError> {
    let elems = match arg(args, 0)? {
        Value::List(_, e) | Value::Tuple(e) => e,
        other => {
            return Err(failed(format!(
                "cannot read elements from {}",
                other.type_name()
            )));
        }
    };
    let index = whole(number(arg(args, 1)?)?).map_err(|e| failed(format!("invalid index: {e}")))?;
    if elems.is_empty() {
        return Err(failed("cannot use element function with an empty list"));
    }
    // Wraps around in both directions (go-cty >= 1.14 accepts negative indices).
    let i = index.rem_euclid(len_i64(elems.len()));
    usize::try_from(i)
        .ok()
        .and_then(|i| elems.get(i))
        .cloned()
        .ok_or_else(|| failed("invalid index"))
}

fn flatten(args: &[Value]) -> Result<Value, FuncError> {
    let elems = match arg(args, 0)? {
        Value::List(_, e) | Value::Set(_, e) | Value::Tuple(e) => e,
        _ => return Err(failed("can only flatten lists, sets and tuples")),
    };
    let mut out = Vec::new();
    flatten_into(elems, &mut out);
    Ok(Value::Tuple(out))
}

/// Nested lists, sets and tuples are spliced in; everything else (including
/// null collections) is kept as an element.
fn flatten_into(elems: &[Value], out: &mut Vec<Value>) {
    for e in elems {
        match e {
            Value::List(_, inner) | Value::Set(_, inner) | Value::Tuple(inner) => {
                flatten_into(inner, out)
            }
            other => out.push(other.clone()),
        }
    }
}

/// cty's `Value.HasIndex` for a list, tuple or map.
fn has_index(collection: &Value, key: &Value) -> Result<bool, FuncError> {
    match collection {
        Value::List(_, e) | Value::Tuple(e) => Ok(match key {
            Value::Number(n) => whole(*n)
                .ok()
                .and_then(|i| usize::try_from(i).ok())
                .is_some_and(|i| i < e.len()),
            _ => false,
        }),
        Value::Map(_, m) => Ok(match key {
            Value::String(s) => m.contains_key(s),
            _ => false,
        }),
        _ => Err(failed("collection must be a list, a map or a tuple")),
    }
}

fn hasindex(args: &[Value]) -> Result<Value, FuncError> {
    has_index(arg(args, 0)?, arg(args, 1)?).map(Value::Bool)
}

fn index(args: &[Value]) -> Result<Value, FuncError> {
    let collection = arg(args, 0)?;
    let key = arg(args, 1)?;
    let (elems, n) = match (collection, key) {
        (Value::Tuple(e), Value::Number(n)) => {
            let i = whole(*n).map_err(|m| failed(format!("invalid key for tuple: {m}")))?;
            if i < 0 || i >= len_i64(e.len()) {
                return Err(failed(format!(
                    "key must be between 0 and {} inclusive",
                    e.len()
                )));
            }
            (e, *n)
        }
        (Value::Tuple(_), _) => return Err(failed("key for tuple must be number")),
        (Value::List(_, e), Value::Number(n)) => (e, *n),
        (Value::List(..), _) => return Err(failed("key for list must be number")),
        (Value::Map(_, m), Value::String(k)) => {
            return m.get(k).cloned().ok_or_else(|| failed("invalid index"));
        }
        (Value::Map(..), _) => return Err(failed("key for map must be string")),
        _ => return Err(failed("collection must be a list, a map or a tuple")),
    };
    whole(n)
        .ok()
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| elems.get(i))
        .cloned()
        .ok_or_else(|| failed("invalid index"))
}

fn indexof(args: &[Value]) -> Result<Value, FuncError> {
    let elems = match arg(args, 0)? {
        Value::List(_, e) | Value::Tuple(e) => e,
        _ => return Err(failed("argument must be a list or tuple")),
    };
    if elems.is_empty() {
        return Err(failed("cannot search an empty list"));
    }
    let value = arg(args, 1)?;
    elems
        .iter()
        .position(|e| cty_equals(e, value))
        .map(|i| Value::Number(i as f64))
        .ok_or_else(|| failed("item not found"))
}

fn length(args: &[Value]) -> Result<Value, FuncError> {
    match arg(args, 0)? {
        v @ (Value::List(..) | Value::Set(..) | Value::Tuple(_) | Value::Map(..)) => {
            Ok(Value::Number(v.len().unwrap_or(0) as f64))
        }
        _ => Err(failed("collection must be a list, a map or a tuple")),
    }
}

fn range(args: &[Value]) -> Result<Value, FuncError> {
    let nums = args.iter().map(number).collect::<Result<Vec<f64>, _>>()?;
    let (start, end, step) = match nums.as_slice() {
        [end] => (0.0, *end, if *end < 0.0 { -1.0 } else { 1.0 }),
        [start, end] => (*start, *end, if end < start { -1.0 } else { 1.0 }),
        [start, end, step] => (*start, *end, *step),
        _ => return Err(failed("must have one, two, or three arguments")),
    };
    // go-cty's `step == cty.Zero` guard compares pointers and never fires for a
    // step written in HCL, so a zero step falls through to the checks below.
    let down = step < 0.0;
    if down && end > start {
        return Err(FuncError::arg(
            1,
            "end must be less than start when step is negative",
        ));
    }
    if !down && end < start {
        return Err(FuncError::arg(
            1,
            "end must be greater than start when step is positive",
        ));
    }
    let mut vals = Vec::new();
    loop {
        // start + i*step rather than repeated addition, to limit f64 drift.
        let num = start + (vals.len() as f64) * step;
        if (down && num <= end) || (!down && num >= end) {
            break;
        }
        if vals.len() >= MAX_RANGE_VALUES {
            return Err(failed(
                "more than 1024 values were generated; either decrease the difference between start and end or use a smaller step",
            ));
        }
        vals.push(Value::Number(num));
    }
    Ok(Value::List(Type::Number, vals))
}

fn reverselist(args: &[Value]) -> Result<Value, FuncError> {
    match arg(args, 0)? {
        Value::Tuple(e) => Ok(Value::Tuple(e.iter().rev().cloned().collect())),
        Value::List(ety, e) | Value::Set(ety, e) => {
            Ok(Value::List(ety.clone(), e.iter().rev().cloned().collect()))
        }
        other => Err(FuncError::arg(
            0,
            format!(
                "can only reverse list or tuple values, not {}",
                other.type_name()
            ),
        )),
    }
}

fn slice(args: &[Value]) -> Result<Value, FuncError> {
    let list = arg(args, 0)?;
    let elems = match list {
        Value::Set(..) => {
            return Err(FuncError::arg(
                0,
                "cannot slice a set, because its elements do not have indices; explicitly convert to a list if the ordering of the result is not important",
            ));
        }
        Value::List(_, e) | Value::Tuple(e) => e,
        _ => return Err(FuncError::arg(0, "must be a list or tuple value")),
    };
    let len = len_i64(elems.len());
    let start = whole(number(arg(args, 1)?)?)
        .map_err(|e| FuncError::arg(1, format!("invalid start index: {e}")))?;
    if start < 0 {
        return Err(FuncError::arg(1, "start index must not be less than zero"));
    }
    if start > len {
        return Err(FuncError::arg(
            1,
            "start index must not be greater than the length of the list",
        ));
    }
    let end = whole(number(arg(args, 2)?)?)
        .map_err(|e| FuncError::arg(2, format!("invalid end index: {e}")))?;
    if end < 0 {
        return Err(FuncError::arg(2, "end index must not be less than zero"));
    }
    if end > len {
        return Err(FuncError::arg(
            2,
            "end index must not be greater than the length of the list",
        ));
    }
    if start > end {
        return Err(FuncError::arg(
            1,
            "start index must not be greater than end index",
        ));
    }
    let (s, e) = (
        usize::try_from(start).unwrap_or(0),
        usize::try_from(end).unwrap_or(0),
    );
    let sub = elems.get(s..e).unwrap_or(&[]).to_vec();
    Ok(match list {
        Value::List(ety, _) => Value::List(ety.clone(), sub),
        _ => Value::Tuple(sub),
    })
}

fn sort(args: &[Value]) -> Result<Value, FuncError> {
    let elems = arg(args, 0)?
        .as_seq()
        .ok_or_else(|| failed("a list of strings is required"))?;
    let mut strs = Vec::with_capacity(elems.len());
    for (i, v) in elems.iter().enumerate() {
        match v.as_str() {
            Some(s) => strs.push(s.to_string()),
            None => {
                return Err(failed(format!(
                    "given list element {i} is null; a null string cannot be sorted"
                )));
            }
        }
    }
    strs.sort();
    Ok(Value::List(
        Type::String,
        strs.into_iter().map(Value::String).collect(),
    ))
}

// ------------------------------------------------------------------ maps and objects

fn keys(args: &[Value]) -> Result<Value, FuncError> {
    match arg(args, 0)? {
        Value::Map(_, m) => Ok(Value::List(
            Type::String,
            m.keys().cloned().map(Value::String).collect(),
        )),
        Value::Object(m) => Ok(Value::Tuple(m.keys().cloned().map(Value::String).collect())),
        _ => Err(FuncError::arg(0, "must have map or object type")),
    }
}

fn values(args: &[Value]) -> Result<Value, FuncError> {
    match arg(args, 0)? {
        Value::Map(ety, m) => Ok(Value::List(ety.clone(), m.values().cloned().collect())),
        Value::Object(m) => Ok(Value::Tuple(m.values().cloned().collect())),
        _ => Err(failed("values() requires a map as the first argument")),
    }
}

fn lookup(args: &[Value]) -> Result<Value, FuncError> {
    let key = arg(args, 1)?
        .as_str()
        .ok_or_else(|| FuncError::arg(1, "a string is required"))?;
    let default = arg(args, 2)?;
    match arg(args, 0)? {
        Value::Object(attrs) => Ok(attrs.get(key).cloned().unwrap_or_else(|| default.clone())),
        Value::Map(ety, entries) => {
            let default = convert(default.clone(), ety).map_err(|_| {
                FuncError::arg(
                    2,
                    "the default value must have the same type as the map elements",
                )
            })?;
            Ok(entries.get(key).cloned().unwrap_or(default))
        }
        _ => Err(FuncError::arg(
            0,
            "lookup() requires a map as the first argument",
        )),
    }
}

fn merge(args: &[Value]) -> Result<Value, FuncError> {
    let not_mapping = |t: &Type| {
        failed(format!(
            "arguments must be maps or objects, got {:?}",
            t.friendly_name()
        ))
    };
    // go-cty's type function: a dynamic (untyped null) argument stops the checks
    // and makes the result an object; identical argument types keep that type.
    let mut first: Option<Type> = None;
    let mut matching = true;
    let mut dynamic = false;
    for a in args {
        let ty = a.ty();
        if ty == Type::Dynamic {
            dynamic = true;
            break;
        }
        if !matches!(ty, Type::Map(_) | Type::Object(_)) {
            return Err(not_mapping(&ty));
        }
        match &first {
            None => first = Some(ty),
            Some(f) if *f != ty => matching = false,
            Some(_) => {}
        }
    }
    let mut out = BTreeMap::new();
    for a in args {
        match a {
            Value::Null(_) => {}
            Value::Map(_, m) | Value::Object(m) => {
                out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            other => return Err(not_mapping(&other.ty())),
        }
    }
    match first {
        Some(Type::Map(ety)) if matching && !dynamic => Ok(Value::Map(*ety, out)),
        _ => Ok(Value::Object(out)),
    }
}

fn zipmap(args: &[Value]) -> Result<Value, FuncError> {
    let keys = arg(args, 0)?
        .as_seq()
        .ok_or_else(|| failed("a list of strings is required"))?;
    let (vals, ety) = match arg(args, 1)? {
        Value::List(ety, v) => (v, Some(ety)),
        Value::Tuple(v) => (v, None),
        _ => return Err(failed("values argument must be a list or tuple value")),
    };
    if keys.len() != vals.len() {
        return Err(failed(format!(
            "number of keys ({}) does not match number of values ({})",
            keys.len(),
            vals.len()
        )));
    }
    let mut out = BTreeMap::new();
    for (i, (k, v)) in keys.iter().zip(vals).enumerate() {
        let k = k
            .as_str()
            .ok_or_else(|| failed(format!("keys list has null value at index {i}")))?;
        out.insert(k.to_string(), v.clone());
    }
    Ok(match ety {
        Some(ety) => Value::Map(ety.clone(), out),
        None => Value::Object(out),
    })
}

// ------------------------------------------------------------------ sets

fn sethaselement(args: &[Value]) -> Result<Value, FuncError> {
    let (ety, elems) = match arg(args, 0)? {
        Value::Set(t, e) => (t, e),
        other => {
            return Err(failed(format!(
                "a set is required, got {}",
                other.type_name()
            )));
        }
    };
    let elem = arg(args, 1)?;
    // cty's HasElement: the element type must match the set's exactly.
    Ok(Value::Bool(
        elem.ty() == *ety && sorted_contains(elems, elem),
    ))
}

#[derive(Clone, Copy)]
enum SetOp {
    Union,
    Intersection,
    Subtract,
    SymmetricDifference,
}

/// go-cty's `setOperationReturnType` + `setOperationImpl`: unify the element types
/// (ignoring empty sets of unknown element type), convert every argument to that
/// set type, then fold the operation left to right.
fn set_operation(args: &[Value], op: SetOp) -> Result<Value, FuncError> {
    let mut etys = Vec::new();
    for a in args {
        match a {
            Value::Set(ety, e) => {
                if !(e.is_empty() && *ety == Type::Dynamic) {
                    etys.push(ety.clone());
                }
            }
            other => {
                return Err(failed(format!(
                    "a set is required, got {}",
                    other.type_name()
                )));
            }
        }
    }
    let ety = if etys.is_empty() {
        Type::Dynamic
    } else {
        crate::value::unify::unify(&etys)
            .ok_or_else(|| failed("given sets must all have compatible element types"))?
    };
    let set_ty = Type::set(ety.clone());
    let mut acc: Option<Vec<Value>> = None;
    for (i, a) in args.iter().enumerate() {
        let elems = match convert(a.clone(), &set_ty).map_err(|m| FuncError::arg(i, m))? {
            Value::Set(t, e) => set_elems(&t, e),
            other => {
                return Err(FuncError::arg(
                    i,
                    format!("a set is required, got {}", other.type_name()),
                ));
            }
        };
        acc = Some(match acc {
            None => elems,
            Some(cur) => {
                let next = match op {
                    SetOp::Union => cur.into_iter().chain(elems).collect(),
                    SetOp::Intersection => cur
                        .into_iter()
                        .filter(|v| sorted_contains(&elems, v))
                        .collect(),
                    SetOp::Subtract => cur
                        .into_iter()
                        .filter(|v| !sorted_contains(&elems, v))
                        .collect(),
                    SetOp::SymmetricDifference => {
                        let only_new: Vec<Value> = elems
                            .iter()
                            .filter(|v| !sorted_contains(&cur, v))
                            .cloned()
                            .collect();
                        cur.into_iter()
                            .filter(|v| !sorted_contains(&elems, v))
                            .chain(only_new)
                            .collect()
                    }
                };
                set_elems(&ety, next)
            }
        });
    }
    Ok(Value::set_of(ety, acc.unwrap_or_default()))
}

fn setunion(args: &[Value]) -> Result<Value, FuncError> {
    set_operation(args, SetOp::Union)
}

fn setintersection(args: &[Value]) -> Result<Value, FuncError> {
    set_operation(args, SetOp::Intersection)
}

fn setsubtract(args: &[Value]) -> Result<Value, FuncError> {
    set_operation(args, SetOp::Subtract)
}

fn setsymmetricdifference(args: &[Value]) -> Result<Value, FuncError> {
    set_operation(args, SetOp::SymmetricDifference)
}

fn setproduct(args: &[Value]) -> Result<Value, FuncError> {
    if args.len() < 2 {
        return Err(failed("at least two arguments are required"));
    }
    let mut list_count = 0;
    let mut elem_tys = Vec::with_capacity(args.len());
    let mut seqs: Vec<&[Value]> = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        match a {
            Value::Set(ety, e) => {
                elem_tys.push(ety.clone());
                seqs.push(e);
            }
            Value::List(ety, e) => {
                elem_tys.push(ety.clone());
                seqs.push(e);
                list_count += 1;
            }
            Value::Tuple(e) => {
                let ety = if e.is_empty() {
                    Type::Dynamic
                } else {
                    let tys: Vec<Type> = e.iter().map(Value::ty).collect();
                    crate::value::unify::unify(&tys)
                        .ok_or_else(|| FuncError::arg(i, "all elements must be of the same type"))?
                };
                elem_tys.push(ety);
                seqs.push(e);
                list_count += 1;
            }
            _ => return Err(FuncError::arg(i, "a set or a list is required")),
        }
    }
    let all_lists = list_count == args.len();
    let tuple_ty = Type::Tuple(elem_tys.clone());

    let mut total: usize = 1;
    if seqs.iter().any(|s| s.is_empty()) {
        total = 0;
    } else {
        for s in &seqs {
            total = total.saturating_mul(s.len());
        }
    }
    if total.saturating_mul(args.len()) > MAX_PRODUCT_VALUES {
        return Err(failed(format!(
            "the cartesian product has too many elements: more than {MAX_PRODUCT_VALUES} values would be generated"
        )));
    }

    // Convert tuple elements to the unified element type up front.
    let mut columns: Vec<Vec<Value>> = Vec::with_capacity(seqs.len());
    for (j, (s, ty)) in seqs.iter().zip(&elem_tys).enumerate() {
        let mut col = Vec::with_capacity(s.len());
        for (k, v) in s.iter().enumerate() {
            if v.ty() == *ty {
                col.push(v.clone());
            } else {
                col.push(convert(v.clone(), ty).map_err(|_| {
                    failed(format!(
                        "failed to convert argVals[{j}][{k}] to {}; this is a bug in cty",
                        ty.friendly_name()
                    ))
                })?);
            }
        }
        columns.push(col);
    }

    let mut product = Vec::with_capacity(total);
    let mut counters = vec![0usize; columns.len()];
    for _ in 0..total {
        let tuple = columns
            .iter()
            .zip(&counters)
            .filter_map(|(col, &n)| col.get(n).cloned())
            .collect();
        product.push(Value::Tuple(tuple));
        for j in (0..counters.len()).rev() {
            counters[j] += 1;
            if counters[j] < columns.get(j).map_or(0, Vec::len) {
                break;
            }
            counters[j] = 0;
        }
    }

    if all_lists {
        return Ok(Value::List(tuple_ty, product));
    }
    // Same order as `Value::set_of` (tuples compare by JSON text), but with the
    // sort key computed once per element.
    let mut keyed: Vec<(String, Value)> = product
        .into_iter()
        .map(|v| (to_json(&v).to_string(), v))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.dedup_by(|a, b| a.0 == b.0 && a.1.raw_equal(&b.1));
    Ok(Value::Set(
        tuple_ty,
        keyed.into_iter().map(|(_, v)| v).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::{FuncError, call_by_name, lookup as lookup_fn};
    use super::cty_equals;
    use crate::value::unify::compare_types;
    use crate::value::{Type, Value};

    const NAMES: [&str; 28] = [
        "chunklist",
        "coalesce",
        "coalescelist",
        "compact",
        "concat",
        "contains",
        "distinct",
        "element",
        "flatten",
        "hasindex",
        "index",
        "indexof",
        "keys",
        "length",
        "lookup",
        "merge",
        "range",
        "reverselist",
        "sethaselement",
        "setintersection",
        "setproduct",
        "setsubtract",
        "setsymmetricdifference",
        "setunion",
        "slice",
        "sort",
        "values",
        "zipmap",
    ];

    fn s(x: &str) -> Value {
        Value::string(x)
    }
    fn n(x: f64) -> Value {
        Value::Number(x)
    }
    fn b(x: bool) -> Value {
        Value::Bool(x)
    }
    fn null() -> Value {
        Value::null()
    }
    fn tup(v: Vec<Value>) -> Value {
        Value::Tuple(v)
    }
    fn list(ety: Type, v: Vec<Value>) -> Value {
        Value::List(ety, v)
    }
    fn strs(xs: &[&str]) -> Vec<Value> {
        xs.iter().map(|x| s(x)).collect()
    }
    fn nums(xs: &[f64]) -> Vec<Value> {
        xs.iter().map(|x| n(*x)).collect()
    }
    fn slist(xs: &[&str]) -> Value {
        list(Type::String, strs(xs))
    }
    fn nlist(xs: &[f64]) -> Value {
        list(Type::Number, nums(xs))
    }
    fn stup(xs: &[&str]) -> Value {
        tup(strs(xs))
    }
    fn set(ety: Type, v: Vec<Value>) -> Value {
        Value::set_of(ety, v)
    }
    fn sset(xs: &[&str]) -> Value {
        set(Type::String, strs(xs))
    }
    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }
    fn map(ety: Type, pairs: &[(&str, Value)]) -> Value {
        Value::Map(
            ety,
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        )
    }
    fn tuple_ty(ts: Vec<Type>) -> Type {
        Type::Tuple(ts)
    }
    fn obj_ty(pairs: &[(&str, Type)]) -> Type {
        Type::Object(
            pairs
                .iter()
                .map(|(k, t)| (k.to_string(), t.clone()))
                .collect(),
        )
    }

    #[track_caller]
    fn call(name: &str, args: Vec<Value>) -> Value {
        match call_by_name(name, args) {
            Ok(v) => v,
            Err(e) => panic!("{name} failed: {e:?}"),
        }
    }

    /// The value and its exact type must match.
    #[track_caller]
    fn check(name: &str, args: Vec<Value>, want: Value) {
        let got = call(name, args);
        assert_eq!(got.ty(), want.ty(), "{name}: wrong type for {got:?}");
        assert!(got.raw_equal(&want), "{name}: got {got:?}, want {want:?}");
    }

    /// Calls an implementation directly with already-converted arguments. Used
    /// where the call machinery's conversion would lose the element type of an
    /// empty typed collection (`set(string)` converted to `set(dynamic)`).
    #[track_caller]
    fn check_impl(f: super::super::FuncImpl, args: Vec<Value>, want: Value) {
        let got = match f(&args) {
            Ok(v) => v,
            Err(e) => panic!("call failed: {e:?}"),
        };
        assert_eq!(got.ty(), want.ty(), "wrong type for {got:?}");
        assert!(got.raw_equal(&want), "got {got:?}, want {want:?}");
    }

    #[track_caller]
    fn failed(name: &str, args: Vec<Value>) -> String {
        match call_by_name(name, args) {
            Err(FuncError::Failed(m)) => m,
            other => panic!("{name}: expected a call failure, got {other:?}"),
        }
    }

    #[track_caller]
    fn arg_err(name: &str, args: Vec<Value>) -> (usize, String) {
        match call_by_name(name, args) {
            Err(FuncError::Arg { index, msg }) => (index, msg),
            other => panic!("{name}: expected an argument error, got {other:?}"),
        }
    }

    const WHOLE: &str =
        "value must be a whole number, between -9223372036854775808 and 9223372036854775807";

    #[test]
    fn all_functions_registered() {
        for name in NAMES {
            assert!(lookup_fn(name).is_some(), "{name} is not registered");
        }
    }

    #[test]
    fn helpers_equality_is_type_sensitive() {
        assert!(cty_equals(
            &Value::Null(Type::String),
            &Value::Null(Type::Number)
        ));
        assert!(!cty_equals(&Value::Null(Type::String), &s("")));
        assert!(!cty_equals(&n(1.0), &s("1")));
        assert!(!cty_equals(&slist(&["a"]), &stup(&["a"])));
        assert!(cty_equals(&stup(&["a"]), &stup(&["a"])));
        assert!(cty_equals(&sset(&["a", "b"]), &sset(&["b", "a"])));
        assert!(!cty_equals(
            &map(Type::Number, &[("a", n(1.0))]),
            &obj(&[("a", n(1.0))])
        ));
        assert!(cty_equals(&n(0.0), &n(-0.0)));
    }

    #[test]
    fn helpers_unify_follows_cty() {
        assert_eq!(crate::value::unify::unify(&[]), None);
        assert_eq!(
            crate::value::unify::unify(&[Type::Number, Type::Bool]),
            None
        );
        assert_eq!(
            crate::value::unify::unify(&[Type::Number, Type::String]),
            Some(Type::String)
        );
        assert_eq!(
            crate::value::unify::unify(&[Type::Bool, Type::String]),
            Some(Type::String)
        );
        assert_eq!(
            crate::value::unify::unify(&[Type::Dynamic, Type::String]),
            Some(Type::Dynamic)
        );
        assert_eq!(
            crate::value::unify::unify(&[Type::list(Type::String), tuple_ty(vec![Type::Number])]),
            Some(Type::list(Type::String))
        );
        assert_eq!(
            crate::value::unify::unify(&[
                tuple_ty(vec![Type::String]),
                tuple_ty(vec![Type::Number])
            ]),
            Some(tuple_ty(vec![Type::String]))
        );
        assert_eq!(
            crate::value::unify::unify(&[
                tuple_ty(vec![Type::String]),
                tuple_ty(vec![Type::Number, Type::Number])
            ]),
            Some(Type::list(Type::String))
        );
        assert_eq!(
            crate::value::unify::unify(&[
                obj_ty(&[("a", Type::String)]),
                obj_ty(&[("a", Type::Number)])
            ]),
            Some(obj_ty(&[("a", Type::String)]))
        );
        assert_eq!(
            crate::value::unify::unify(&[
                obj_ty(&[("a", Type::String)]),
                obj_ty(&[("b", Type::Number)])
            ]),
            Some(Type::map(Type::String))
        );
        assert_eq!(
            crate::value::unify::unify(&[Type::map(Type::Number), obj_ty(&[("b", Type::Number)])]),
            Some(Type::map(Type::Number))
        );
        assert_eq!(
            crate::value::unify::unify(&[obj_ty(&[]), tuple_ty(vec![])]),
            None,
            "objects and tuples never unify"
        );
        assert_eq!(
            crate::value::unify::unify(&[Type::list(Type::Number), Type::list(Type::Bool)]),
            None
        );
        assert_eq!(
            crate::value::unify::unify(&[Type::String, Type::list(Type::String)]),
            None
        );
        assert_eq!(
            compare_types(&Type::Dynamic, &Type::String),
            std::cmp::Ordering::Less
        );
    }

    #[test]
    fn chunklist_splits() {
        let l = slist(&["a", "b", "c", "d", "e", "f"]);
        check(
            "chunklist",
            vec![l, n(2.0)],
            list(
                Type::list(Type::String),
                vec![slist(&["a", "b"]), slist(&["c", "d"]), slist(&["e", "f"])],
            ),
        );
        // A tuple argument is converted to a list first; the last chunk is short.
        check(
            "chunklist",
            vec![stup(&["a", "b", "c"]), s("2")],
            list(
                Type::list(Type::String),
                vec![slist(&["a", "b"]), slist(&["c"])],
            ),
        );
        // Size zero means a single chunk.
        check(
            "chunklist",
            vec![slist(&["a"]), n(0.0)],
            list(Type::list(Type::String), vec![slist(&["a"])]),
        );
        check_impl(
            super::chunklist,
            vec![slist(&[]), n(2.0)],
            list(Type::list(Type::String), vec![]),
        );
        check(
            "chunklist",
            vec![slist(&["a", "b"]), n(1e18)],
            list(Type::list(Type::String), vec![slist(&["a", "b"])]),
        );
    }

    #[test]
    fn chunklist_errors() {
        assert_eq!(
            failed("chunklist", vec![slist(&[]), n(-1.0)]),
            "the size argument must be positive"
        );
        assert_eq!(
            failed("chunklist", vec![slist(&["a"]), n(1.5)]),
            format!("invalid size: {WHOLE}")
        );
        assert_eq!(
            failed("chunklist", vec![slist(&["a"]), n(1e300)]),
            format!("invalid size: {WHOLE}")
        );
        let (i, m) = arg_err("chunklist", vec![s("x"), n(1.0)]);
        assert_eq!((i, m.as_str()), (0, "list of dynamic required"));
        let (i, _) = arg_err("chunklist", vec![slist(&["a"]), null()]);
        assert_eq!(i, 1);
    }

    #[test]
    fn coalesce_returns_first_non_null_converted() {
        check("coalesce", vec![null(), s("a"), s("b")], s("a"));
        // Mixed primitives unify to string.
        check("coalesce", vec![n(1.0), s("a")], s("1"));
        check("coalesce", vec![Value::Null(Type::String), n(2.0)], s("2"));
        // An untyped null makes the unified type dynamic: no conversion.
        check("coalesce", vec![null(), n(1.0), s("2")], n(1.0));
        check(
            "coalesce",
            vec![stup(&["a"]), stup(&["b", "c"])],
            slist(&["a"]),
        );
        check("coalesce", vec![s("")], s(""));
    }

    #[test]
    fn coalesce_errors() {
        assert_eq!(
            failed("coalesce", vec![n(1.0), b(true)]),
            "all arguments must have the same type"
        );
        assert_eq!(
            failed("coalesce", vec![]),
            "all arguments must have the same type"
        );
        assert_eq!(
            failed("coalesce", vec![null(), null()]),
            "no non-null arguments"
        );
        assert_eq!(
            failed("coalesce", vec![s("a"), slist(&["b"])]),
            "all arguments must have the same type"
        );
    }

    #[test]
    fn coalescelist_returns_first_non_empty() {
        check(
            "coalescelist",
            vec![slist(&["a", "b"]), slist(&["c", "d"])],
            slist(&["a", "b"]),
        );
        check(
            "coalescelist",
            vec![slist(&[]), slist(&["c", "d"])],
            slist(&["c", "d"]),
        );
        check(
            "coalescelist",
            vec![slist(&[]), nlist(&[3.0, 4.0])],
            nlist(&[3.0, 4.0]),
        );
        check(
            "coalescelist",
            vec![tup(vec![]), stup(&["c", "d"])],
            stup(&["c", "d"]),
        );
        check(
            "coalescelist",
            vec![Value::Null(Type::list(Type::String)), slist(&["c", "d"])],
            slist(&["c", "d"]),
        );
    }

    #[test]
    fn coalescelist_errors() {
        assert_eq!(
            failed("coalescelist", vec![]),
            "at least one argument is required"
        );
        assert_eq!(
            failed(
                "coalescelist",
                vec![map(Type::Bool, &[("a", b(true))]), obj(&[("b", b(false))])]
            ),
            "coalescelist arguments must be lists or tuples"
        );
        assert_eq!(
            failed("coalescelist", vec![null(), slist(&["a"])]),
            "coalescelist arguments must be lists or tuples"
        );
        assert_eq!(
            failed(
                "coalescelist",
                vec![
                    Value::Null(Type::list(Type::String)),
                    Value::Null(Type::list(Type::String))
                ]
            ),
            "no non-null arguments"
        );
        assert_eq!(
            failed("coalescelist", vec![slist(&[]), tup(vec![])]),
            "no non-null arguments"
        );
    }

    #[test]
    fn compact_drops_empty_and_null() {
        check(
            "compact",
            vec![tup(vec![s("a"), s(""), null(), s("b")])],
            slist(&["a", "b"]),
        );
        check("compact", vec![stup(&["", ""])], slist(&[]));
        check("compact", vec![tup(vec![n(1.0), s("")])], slist(&["1"]));
        let (i, _) = arg_err("compact", vec![s("a")]);
        assert_eq!(i, 0);
    }

    #[test]
    fn concat_lists_and_tuples() {
        check(
            "concat",
            vec![nlist(&[1.0]), nlist(&[2.0, 3.0])],
            nlist(&[1.0, 2.0, 3.0]),
        );
        check("concat", vec![nlist(&[])], nlist(&[]));
        // Lists of different element types unify to a list of strings.
        check(
            "concat",
            vec![
                nlist(&[1.0]),
                slist(&["foo"]),
                list(Type::Bool, vec![b(true)]),
            ],
            slist(&["1", "foo", "true"]),
        );
        // An empty list of unknown element type adopts the others' type.
        check(
            "concat",
            vec![list(Type::Dynamic, vec![]), nlist(&[2.0, 3.0])],
            nlist(&[2.0, 3.0]),
        );
        // Lists whose element types do not unify become a tuple.
        check(
            "concat",
            vec![
                nlist(&[1.0]),
                list(Type::list(Type::Bool), vec![list(Type::Bool, vec![])]),
            ],
            tup(vec![n(1.0), list(Type::Bool, vec![])]),
        );
        check("concat", vec![tup(vec![])], tup(vec![]));
        check(
            "concat",
            vec![tup(vec![n(1.0)]), tup(vec![b(true), n(3.0)])],
            tup(vec![n(1.0), b(true), n(3.0)]),
        );
        check(
            "concat",
            vec![nlist(&[1.0]), tup(vec![b(true), n(3.0)])],
            tup(vec![n(1.0), b(true), n(3.0)]),
        );
        check(
            "concat",
            vec![stup(&["a", "b"]), stup(&["c"])],
            stup(&["a", "b", "c"]),
        );
    }

    #[test]
    fn concat_errors() {
        assert_eq!(
            failed("concat", vec![]),
            "at least one argument is required"
        );
        assert_eq!(
            arg_err("concat", vec![stup(&["a"]), s("b")]),
            (
                1,
                "all arguments must be lists or tuples; got string".to_string()
            )
        );
        assert_eq!(
            arg_err("concat", vec![sset(&["a"]), stup(&["b"])]),
            (
                0,
                "all arguments must be lists or tuples; got set of string".to_string()
            )
        );
    }

    #[test]
    fn contains_is_type_strict() {
        let words = slist(&["the", "quick", "brown", "fox"]);
        check("contains", vec![words.clone(), s("the")], b(true));
        check("contains", vec![words, s("penguin")], b(false));
        let ints = nlist(&[1.0, 2.0, 3.0, 4.0]);
        check("contains", vec![ints.clone(), n(1.0)], b(true));
        check("contains", vec![ints.clone(), n(42.0)], b(false));
        check("contains", vec![ints, s("1")], b(false));
        check(
            "contains",
            vec![sset(&["quick", "brown", "fox"]), s("quick")],
            b(true),
        );
        check(
            "contains",
            vec![tup(vec![s("quick"), s("brown"), n(3.0)]), n(3.0)],
            b(true),
        );
        check("contains", vec![tup(vec![]), s("a")], b(false));
        check(
            "contains",
            vec![tup(vec![stup(&["a"])]), stup(&["a"])],
            b(true),
        );
        check(
            "contains",
            vec![
                list(Type::list(Type::String), vec![slist(&["a"])]),
                stup(&["a"]),
            ],
            b(false),
        );
        assert_eq!(
            failed("contains", vec![s("abc"), s("a")]),
            "argument must be list, tuple, or set"
        );
        assert_eq!(
            arg_err("contains", vec![stup(&["a"]), null()]),
            (1, "argument must not be null".to_string())
        );
    }

    #[test]
    fn distinct_keeps_first_occurrences() {
        check(
            "distinct",
            vec![stup(&["a", "b", "a", "c", "b"])],
            slist(&["a", "b", "c"]),
        );
        check(
            "distinct",
            vec![tup(nums(&[1.0, 2.0, 1.0, 1.0]))],
            nlist(&[1.0, 2.0]),
        );
        check_impl(super::distinct, vec![slist(&[])], slist(&[]));
        check(
            "distinct",
            vec![tup(vec![stup(&["a"]), stup(&["a"]), stup(&["b"])])],
            list(
                tuple_ty(vec![Type::String]),
                vec![stup(&["a"]), stup(&["b"])],
            ),
        );
        check(
            "distinct",
            vec![tup(vec![s("a"), n(1.0), s("1")])],
            slist(&["a", "1"]),
        );
        let (i, _) = arg_err("distinct", vec![s("a")]);
        assert_eq!(i, 0);
    }

    #[test]
    fn element_wraps_around() {
        let words = slist(&["the", "quick", "brown", "fox"]);
        check("element", vec![words.clone(), n(2.0)], s("brown"));
        check("element", vec![words.clone(), n(5.0)], s("quick"));
        check("element", vec![words.clone(), n(-1.0)], s("fox"));
        check("element", vec![words.clone(), n(-5.0)], s("fox"));
        check("element", vec![words.clone(), s("0")], s("the"));
        check(
            "element",
            vec![
                list(Type::list(Type::String), vec![words.clone(), words.clone()]),
                n(0.0),
            ],
            words,
        );
        check(
            "element",
            vec![tup(vec![b(true), s("hello")]), n(1.0)],
            s("hello"),
        );
        check(
            "element",
            vec![tup(vec![b(true), s("hello")]), n(2.0)],
            b(true),
        );
    }

    #[test]
    fn element_errors() {
        let words = slist(&["the", "quick"]);
        assert_eq!(
            failed("element", vec![slist(&[]), n(0.0)]),
            "cannot use element function with an empty list"
        );
        assert_eq!(
            failed("element", vec![tup(vec![]), n(0.0)]),
            "cannot use element function with an empty list"
        );
        assert_eq!(
            failed("element", vec![words.clone(), n(1.5)]),
            format!("invalid index: {WHOLE}")
        );
        assert_eq!(
            failed("element", vec![map(Type::String, &[]), n(0.0)]),
            "cannot read elements from map of string"
        );
        assert_eq!(
            failed("element", vec![sset(&["a"]), n(0.0)]),
            "cannot read elements from set of string"
        );
        assert_eq!(
            failed("element", vec![s("abc"), n(0.0)]),
            "cannot read elements from string"
        );
        let (i, _) = arg_err("element", vec![words, s("brown")]);
        assert_eq!(i, 1);
    }

    #[test]
    fn flatten_nested_sequences() {
        check(
            "flatten",
            vec![tup(vec![
                s("a"),
                slist(&["b"]),
                tup(vec![slist(&["c"]), slist(&["d", "e"])]),
            ])],
            stup(&["a", "b", "c", "d", "e"]),
        );
        check("flatten", vec![slist(&[])], tup(vec![]));
        check(
            "flatten",
            vec![tup(vec![stup(&["a", "b"]), null(), stup(&["c"])])],
            tup(vec![s("a"), s("b"), null(), s("c")]),
        );
        check(
            "flatten",
            vec![list(
                Type::set(Type::String),
                vec![sset(&["b", "a"]), sset(&[])],
            )],
            stup(&["a", "b"]),
        );
        // A null collection is an element, not something to splice.
        check(
            "flatten",
            vec![tup(vec![
                Value::Null(Type::list(Type::String)),
                slist(&["x"]),
            ])],
            tup(vec![Value::Null(Type::list(Type::String)), s("x")]),
        );
        check(
            "flatten",
            vec![tup(vec![obj(&[("a", slist(&["x"]))])])],
            tup(vec![obj(&[("a", slist(&["x"]))])]),
        );
        assert_eq!(
            failed("flatten", vec![map(Type::String, &[])]),
            "can only flatten lists, sets and tuples"
        );
    }

    #[test]
    fn hasindex_vectors() {
        let t = |coll: Value, key: Value, want: bool| check("hasindex", vec![coll, key], b(want));
        t(nlist(&[]), n(2.0), false);
        t(list(Type::Bool, vec![b(true)]), n(0.0), true);
        t(list(Type::Bool, vec![b(true)]), s("hello"), false);
        t(list(Type::Bool, vec![b(true)]), s("0"), false);
        t(list(Type::Bool, vec![b(true)]), n(0.5), false);
        t(list(Type::Bool, vec![b(true)]), n(-1.0), false);
        t(map(Type::Bool, &[]), s("hello"), false);
        t(map(Type::Bool, &[("hello", b(true))]), s("hello"), true);
        t(map(Type::Bool, &[("hello", b(true))]), n(1.0), false);
        t(tup(vec![]), s("hello"), false);
        t(tup(vec![]), n(0.0), false);
        t(tup(vec![b(true)]), n(0.0), true);
        assert_eq!(
            failed("hasindex", vec![obj(&[("a", n(1.0))]), s("a")]),
            "collection must be a list, a map or a tuple"
        );
        assert_eq!(
            failed("hasindex", vec![sset(&["a"]), n(0.0)]),
            "collection must be a list, a map or a tuple"
        );
    }

    #[test]
    fn index_vectors() {
        check(
            "index",
            vec![list(Type::Bool, vec![b(true)]), n(0.0)],
            b(true),
        );
        check(
            "index",
            vec![map(Type::Bool, &[("hello", b(true))]), s("hello")],
            b(true),
        );
        check(
            "index",
            vec![tup(vec![b(true), s("hello")]), n(0.0)],
            b(true),
        );
        check(
            "index",
            vec![tup(vec![b(true), s("hello")]), n(1.0)],
            s("hello"),
        );
    }

    #[test]
    fn index_errors() {
        let t = tup(vec![b(true), s("hello")]);
        assert_eq!(
            failed("index", vec![t.clone(), n(2.0)]),
            "key must be between 0 and 2 inclusive"
        );
        assert_eq!(
            failed("index", vec![t.clone(), n(-1.0)]),
            "key must be between 0 and 2 inclusive"
        );
        assert_eq!(
            failed("index", vec![t.clone(), s("0")]),
            "key for tuple must be number"
        );
        assert_eq!(
            failed("index", vec![t, n(0.5)]),
            format!("invalid key for tuple: {WHOLE}")
        );
        let l = slist(&["a"]);
        assert_eq!(failed("index", vec![l.clone(), n(5.0)]), "invalid index");
        assert_eq!(failed("index", vec![l.clone(), n(0.5)]), "invalid index");
        assert_eq!(
            failed("index", vec![l, s("0")]),
            "key for list must be number"
        );
        let m = map(Type::String, &[("a", s("x"))]);
        assert_eq!(failed("index", vec![m.clone(), s("b")]), "invalid index");
        assert_eq!(
            failed("index", vec![m, n(1.0)]),
            "key for map must be string"
        );
        assert_eq!(
            failed("index", vec![obj(&[("a", s("x"))]), s("a")]),
            "collection must be a list, a map or a tuple"
        );
    }

    #[test]
    fn indexof_vectors() {
        // buildx bake/hclparser/stdlib_test.go TestIndexOf.
        let input = tup(vec![s("one"), n(2.0), n(3.0), s("four")]);
        check("indexof", vec![input.clone(), s("one")], n(0.0));
        check("indexof", vec![input.clone(), s("four")], n(3.0));
        check("indexof", vec![input.clone(), n(3.0)], n(2.0));
        assert_eq!(failed("indexof", vec![input, s("3")]), "item not found");
        check(
            "indexof",
            vec![slist(&["1.42.4", "1.42.3"]), s("1.42.3")],
            n(1.0),
        );
        assert_eq!(
            failed("indexof", vec![tup(vec![]), s("a")]),
            "cannot search an empty list"
        );
        assert_eq!(
            failed("indexof", vec![sset(&["a"]), s("a")]),
            "argument must be a list or tuple"
        );
        assert_eq!(
            failed("indexof", vec![s("a"), s("a")]),
            "argument must be a list or tuple"
        );
    }

    #[test]
    fn keys_of_maps_and_objects() {
        check("keys", vec![map(Type::String, &[])], slist(&[]));
        check(
            "keys",
            vec![map(Type::String, &[("hello", s("world"))])],
            slist(&["hello"]),
        );
        check(
            "keys",
            vec![obj(&[("hello", s("world"))])],
            stup(&["hello"]),
        );
        check("keys", vec![obj(&[])], tup(vec![]));
        check(
            "keys",
            vec![obj(&[("b", n(1.0)), ("a", slist(&[]))])],
            stup(&["a", "b"]),
        );
        assert_eq!(
            arg_err("keys", vec![slist(&["a"])]),
            (0, "must have map or object type".to_string())
        );
        assert_eq!(
            arg_err("keys", vec![Value::Null(Type::map(Type::String))]),
            (0, "argument must not be null".to_string())
        );
    }

    #[test]
    fn length_of_collections() {
        check("length", vec![nlist(&[])], n(0.0));
        check("length", vec![list(Type::Bool, vec![b(true)])], n(1.0));
        check(
            "length",
            vec![set(Type::Bool, vec![b(true), b(false)])],
            n(2.0),
        );
        check(
            "length",
            vec![map(Type::Bool, &[("hello", b(true))])],
            n(1.0),
        );
        check("length", vec![tup(vec![])], n(0.0));
        check("length", vec![tup(vec![b(true), s("x")])], n(2.0));
        // go-cty's length accepts neither strings nor objects.
        assert_eq!(
            failed("length", vec![s("abc")]),
            "collection must be a list, a map or a tuple"
        );
        assert_eq!(
            failed("length", vec![obj(&[("a", n(1.0))])]),
            "collection must be a list, a map or a tuple"
        );
        assert_eq!(
            arg_err("length", vec![null()]),
            (0, "argument must not be null".to_string())
        );
    }

    #[test]
    fn lookup_maps_and_objects() {
        check(
            "lookup",
            vec![map(Type::String, &[]), s("baz"), s("foo")],
            s("foo"),
        );
        check(
            "lookup",
            vec![map(Type::String, &[("foo", s("bar"))]), s("foo"), s("nope")],
            s("bar"),
        );
        // The default is converted to the map's element type.
        check(
            "lookup",
            vec![map(Type::String, &[("a", s("b"))]), s("squish"), n(5.0)],
            s("5"),
        );
        check(
            "lookup",
            vec![obj(&[("a", n(1.0)), ("b", s("x"))]), s("a"), s("d")],
            n(1.0),
        );
        check(
            "lookup",
            vec![obj(&[("a", n(1.0))]), s("z"), slist(&["d"])],
            slist(&["d"]),
        );
        check("lookup", vec![obj(&[]), n(1.0), b(false)], b(false));
    }

    #[test]
    fn lookup_errors() {
        assert_eq!(
            arg_err(
                "lookup",
                vec![map(Type::String, &[("a", s("b"))]), s("a"), stup(&["x"])]
            ),
            (
                2,
                "the default value must have the same type as the map elements".to_string()
            )
        );
        assert_eq!(
            arg_err("lookup", vec![slist(&["a"]), s("a"), s("b")]),
            (
                0,
                "lookup() requires a map as the first argument".to_string()
            )
        );
        assert_eq!(
            arg_err("lookup", vec![obj(&[]), s("a"), null()]),
            (2, "argument must not be null".to_string())
        );
        assert!(matches!(
            call_by_name("lookup", vec![obj(&[("a", s("b"))]), s("a")]),
            Err(FuncError::Arity { .. })
        ));
    }

    #[test]
    fn merge_maps_and_objects() {
        let ms = |pairs: &[(&str, &str)]| {
            map(
                Type::String,
                &pairs.iter().map(|(k, v)| (*k, s(v))).collect::<Vec<_>>(),
            )
        };
        check(
            "merge",
            vec![ms(&[("a", "b")]), ms(&[("c", "d")])],
            ms(&[("a", "b"), ("c", "d")]),
        );
        check(
            "merge",
            vec![ms(&[("a", "b"), ("c", "d")]), ms(&[("a", "x")])],
            ms(&[("a", "x"), ("c", "d")]),
        );
        check(
            "merge",
            vec![Value::Null(Type::map(Type::String)), ms(&[("c", "d")])],
            ms(&[("c", "d")]),
        );
        check("merge", vec![ms(&[])], ms(&[]));
        check("merge", vec![ms(&[]), ms(&[])], ms(&[]));
        check("merge", vec![], obj(&[]));
        check(
            "merge",
            vec![
                Value::Null(Type::map(Type::String)),
                Value::Null(obj_ty(&[("a", Type::list(Type::String))])),
            ],
            obj(&[]),
        );
        check(
            "merge",
            vec![
                ms(&[("c", "d")]),
                Value::Null(obj_ty(&[("a", Type::list(Type::String))])),
            ],
            obj(&[("c", s("d"))]),
        );
        // Maps of different element types merge into an object.
        check(
            "merge",
            vec![
                map(Type::list(Type::String), &[("a", slist(&["b", "c"]))]),
                map(Type::map(Type::String), &[("d", ms(&[("e", "f")]))]),
            ],
            obj(&[("a", slist(&["b", "c"])), ("d", ms(&[("e", "f")]))]),
        );
        check(
            "merge",
            vec![
                obj(&[("a", slist(&["b"])), ("b", s("b"))]),
                obj(&[("a", obj(&[("e", s("f"))]))]),
            ],
            obj(&[("a", obj(&[("e", s("f"))])), ("b", s("b"))]),
        );
        check(
            "merge",
            vec![obj(&[("a", s("x"))]), obj(&[("a", s("y"))])],
            obj(&[("a", s("y"))]),
        );
        // An untyped null makes the result an object.
        check(
            "merge",
            vec![null(), ms(&[("a", "b")])],
            obj(&[("a", s("b"))]),
        );
    }

    #[test]
    fn merge_errors() {
        let m = map(Type::String, &[("a", s("b"))]);
        assert_eq!(
            failed("merge", vec![m.clone(), slist(&["a", "x"])]),
            "arguments must be maps or objects, got \"list of string\""
        );
        assert_eq!(
            failed("merge", vec![m.clone(), Value::Null(Type::String)]),
            "arguments must be maps or objects, got \"string\""
        );
        assert_eq!(
            failed("merge", vec![null(), s("x")]),
            "arguments must be maps or objects, got \"string\""
        );
        assert_eq!(
            failed("merge", vec![m, stup(&["a"])]),
            "arguments must be maps or objects, got \"tuple\""
        );
    }

    #[test]
    fn range_vectors() {
        let r = |args: &[f64], want: &[f64]| check("range", nums(args), nlist(want));
        r(&[5.0], &[0.0, 1.0, 2.0, 3.0, 4.0]);
        r(&[-5.0], &[0.0, -1.0, -2.0, -3.0, -4.0]);
        r(&[1.0], &[0.0]);
        r(&[0.0], &[]);
        r(&[5.5], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        r(&[1.0, 5.0], &[1.0, 2.0, 3.0, 4.0]);
        r(&[5.0, 1.0], &[5.0, 4.0, 3.0, 2.0]);
        r(&[1.5, 5.0], &[1.5, 2.5, 3.5, 4.5]);
        r(&[1.0, 2.0], &[1.0]);
        r(&[1.0, 1.0], &[]);
        r(&[0.0, 5.0, 2.0], &[0.0, 2.0, 4.0]);
        r(&[0.0, 5.0, 1.0], &[0.0, 1.0, 2.0, 3.0, 4.0]);
        r(&[0.0, 1.0, 1.0], &[0.0]);
        r(&[0.0, 0.0, 1.0], &[]);
        r(&[5.0, 0.0, -1.0], &[5.0, 4.0, 3.0, 2.0, 1.0]);
        r(
            &[0.0, 5.0, 0.5],
            &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5],
        );
        r(
            &[0.0, 1.0, 0.1],
            &[
                0.0,
                0.1,
                0.2,
                0.30000000000000004,
                0.4,
                0.5,
                0.6000000000000001,
                0.7000000000000001,
                0.8,
                0.9,
            ],
        );
        // A zero step with an empty interval is simply empty.
        r(&[1.0, 1.0, 0.0], &[]);
        check("range", vec![s("3")], nlist(&[0.0, 1.0, 2.0]));
        let big = call("range", vec![n(1024.0)]);
        assert_eq!(big.len(), Some(1024));
    }

    #[test]
    fn range_errors() {
        let too_many = "more than 1024 values were generated; either decrease the difference between start and end or use a smaller step";
        assert_eq!(failed("range", vec![n(1025.0)]), too_many);
        assert_eq!(failed("range", nums(&[0.0, 1e300, 1e-300])), too_many);
        assert_eq!(failed("range", nums(&[0.0, 1.0, 0.0])), too_many);
        assert_eq!(
            failed("range", vec![]),
            "must have one, two, or three arguments"
        );
        assert_eq!(
            failed("range", nums(&[1.0, 2.0, 3.0, 4.0])),
            "must have one, two, or three arguments"
        );
        assert_eq!(
            arg_err("range", nums(&[0.0, 5.0, -1.0])),
            (
                1,
                "end must be less than start when step is negative".to_string()
            )
        );
        assert_eq!(
            arg_err("range", nums(&[5.0, 0.0, 1.0])),
            (
                1,
                "end must be greater than start when step is positive".to_string()
            )
        );
        assert_eq!(arg_err("range", vec![n(1.0), s("x")]).0, 1);
    }

    #[test]
    fn reverselist_vectors() {
        check("reverselist", vec![slist(&[])], slist(&[]));
        check(
            "reverselist",
            vec![slist(&["beep", "bop", "bloop"])],
            slist(&["bloop", "bop", "beep"]),
        );
        check(
            "reverselist",
            vec![tup(vec![s("a"), n(1.0), b(true)])],
            tup(vec![b(true), n(1.0), s("a")]),
        );
        // Sets iterate in order, so the result is the sorted set reversed.
        check(
            "reverselist",
            vec![sset(&["beep", "bop", "bloop"])],
            slist(&["bop", "bloop", "beep"]),
        );
        assert_eq!(
            arg_err("reverselist", vec![s("abc")]),
            (
                0,
                "can only reverse list or tuple values, not string".to_string()
            )
        );
        assert_eq!(
            arg_err("reverselist", vec![map(Type::String, &[])]),
            (
                0,
                "can only reverse list or tuple values, not map of string".to_string()
            )
        );
    }

    #[test]
    fn sethaselement_is_type_strict() {
        check("sethaselement", vec![stup(&["a", "b"]), s("a")], b(true));
        check("sethaselement", vec![stup(&["a", "b"]), s("c")], b(false));
        check(
            "sethaselement",
            vec![tup(nums(&[1.0, 2.0])), n(1.0)],
            b(true),
        );
        check(
            "sethaselement",
            vec![tup(nums(&[1.0, 2.0])), s("1")],
            b(false),
        );
        check("sethaselement", vec![tup(vec![]), s("a")], b(false));
        check(
            "sethaselement",
            vec![tup(vec![stup(&["a"])]), slist(&["a"])],
            b(false),
        );
        check(
            "sethaselement",
            vec![tup(vec![stup(&["a"])]), stup(&["a"])],
            b(true),
        );
        assert_eq!(arg_err("sethaselement", vec![s("a"), s("a")]).0, 0);
        assert_eq!(
            arg_err("sethaselement", vec![stup(&["a"]), null()]),
            (1, "argument must not be null".to_string())
        );
    }

    fn bset(xs: &[bool]) -> Value {
        set(Type::Bool, xs.iter().map(|x| b(*x)).collect())
    }
    fn empty_dyn_set() -> Value {
        set(Type::Dynamic, vec![])
    }

    #[test]
    fn setunion_vectors() {
        check_impl(super::setunion, vec![sset(&[])], sset(&[]));
        check_impl(super::setunion, vec![sset(&[]), sset(&[])], sset(&[]));
        check_impl(
            super::setunion,
            vec![bset(&[true]), sset(&[])],
            sset(&["true"]),
        );
        check_impl(
            super::setunion,
            vec![bset(&[true]), bset(&[true]), bset(&[false])],
            bset(&[true, false]),
        );
        check_impl(
            super::setunion,
            vec![sset(&["a"]), sset(&["b"]), sset(&["b", "c"])],
            sset(&["a", "b", "c"]),
        );
        check_impl(
            super::setunion,
            vec![bset(&[true]), empty_dyn_set()],
            bset(&[true]),
        );
        check_impl(
            super::setunion,
            vec![set(obj_ty(&[]), vec![obj(&[])]), empty_dyn_set()],
            set(obj_ty(&[]), vec![obj(&[])]),
        );
        check_impl(
            super::setunion,
            vec![empty_dyn_set(), empty_dyn_set()],
            empty_dyn_set(),
        );
        // HCL tuples are converted to sets first.
        check(
            "setunion",
            vec![stup(&["a", "b"]), tup(nums(&[1.0])), stup(&[])],
            sset(&["1", "a", "b"]),
        );
        assert_eq!(
            failed("setunion", vec![sset(&["a"]), tup(vec![stup(&["b"])])]),
            "given sets must all have compatible element types"
        );
        assert_eq!(arg_err("setunion", vec![sset(&["a"]), s("b")]).0, 1);
    }

    #[test]
    fn setintersection_vectors() {
        check_impl(super::setintersection, vec![sset(&[])], sset(&[]));
        check_impl(
            super::setintersection,
            vec![sset(&[]), sset(&[])],
            sset(&[]),
        );
        check_impl(
            super::setintersection,
            vec![bset(&[true]), sset(&[])],
            sset(&[]),
        );
        check_impl(
            super::setintersection,
            vec![bset(&[true]), bset(&[true, false]), bset(&[true, false])],
            bset(&[true]),
        );
        check_impl(
            super::setintersection,
            vec![sset(&["a", "b"]), sset(&["b"]), sset(&["b", "c"])],
            sset(&["b"]),
        );
        check_impl(
            super::setintersection,
            vec![bset(&[true]), empty_dyn_set()],
            bset(&[]),
        );
        check_impl(
            super::setintersection,
            vec![set(obj_ty(&[]), vec![obj(&[])]), empty_dyn_set()],
            set(obj_ty(&[]), vec![]),
        );
        check_impl(
            super::setintersection,
            vec![empty_dyn_set(), empty_dyn_set()],
            empty_dyn_set(),
        );
        check(
            "setintersection",
            vec![tup(nums(&[1.0, 2.0])), stup(&["2", "3"])],
            sset(&["2"]),
        );
    }

    #[test]
    fn setsubtract_vectors() {
        check_impl(super::setsubtract, vec![sset(&[]), sset(&[])], sset(&[]));
        check_impl(
            super::setsubtract,
            vec![bset(&[true]), sset(&[])],
            sset(&["true"]),
        );
        check_impl(
            super::setsubtract,
            vec![bset(&[true]), bset(&[false])],
            bset(&[true]),
        );
        check_impl(
            super::setsubtract,
            vec![sset(&["a", "b", "c"]), sset(&["a", "c"])],
            sset(&["b"]),
        );
        check_impl(
            super::setsubtract,
            vec![sset(&["a"]), empty_dyn_set()],
            sset(&["a"]),
        );
        check_impl(
            super::setsubtract,
            vec![set(obj_ty(&[]), vec![obj(&[])]), empty_dyn_set()],
            set(obj_ty(&[]), vec![obj(&[])]),
        );
        check_impl(
            super::setsubtract,
            vec![empty_dyn_set(), empty_dyn_set()],
            empty_dyn_set(),
        );
        assert!(matches!(
            call_by_name("setsubtract", vec![sset(&["a"])]),
            Err(FuncError::Arity { .. })
        ));
    }

    #[test]
    fn setsymmetricdifference_vectors() {
        let t = |a: Value, b: Value, want: Value| {
            check_impl(super::setsymmetricdifference, vec![a, b], want)
        };
        t(sset(&[]), sset(&[]), sset(&[]));
        t(bset(&[true]), sset(&[]), sset(&["true"]));
        t(bset(&[true]), bset(&[false]), bset(&[true, false]));
        t(sset(&["a", "b", "c"]), sset(&["a", "c"]), sset(&["b"]));
        t(sset(&["a"]), empty_dyn_set(), sset(&["a"]));
        t(
            set(obj_ty(&[]), vec![obj(&[])]),
            empty_dyn_set(),
            set(obj_ty(&[]), vec![obj(&[])]),
        );
        t(empty_dyn_set(), empty_dyn_set(), empty_dyn_set());
        // Folded left to right: elements in an odd number of sets survive.
        check_impl(
            super::setsymmetricdifference,
            vec![sset(&["a", "b"]), sset(&["b", "c"]), sset(&["a", "d"])],
            sset(&["c", "d"]),
        );
        check_impl(
            super::setsymmetricdifference,
            vec![sset(&["x"])],
            sset(&["x"]),
        );
    }

    #[test]
    fn setproduct_vectors() {
        let empty_obj = obj_ty(&[]);
        check(
            "setproduct",
            vec![list(empty_obj.clone(), vec![]), slist(&["quick", "fox"])],
            list(tuple_ty(vec![empty_obj.clone(), Type::String]), vec![]),
        );
        check(
            "setproduct",
            vec![set(empty_obj.clone(), vec![]), sset(&["quick", "fox"])],
            set(tuple_ty(vec![empty_obj.clone(), Type::String]), vec![]),
        );
        check(
            "setproduct",
            vec![
                list(Type::list(Type::String), vec![slist(&[])]),
                list(Type::list(Type::String), vec![slist(&[])]),
            ],
            list(
                tuple_ty(vec![Type::list(Type::String), Type::list(Type::String)]),
                vec![tup(vec![slist(&[]), slist(&[])])],
            ),
        );
        // Tuples behave as lists; their elements are unified first.
        let pair_ty = tuple_ty(vec![Type::String, Type::String]);
        check(
            "setproduct",
            vec![stup(&["the", "brown"]), tup(vec![s("fox"), n(3.0)])],
            list(
                pair_ty.clone(),
                vec![
                    stup(&["the", "fox"]),
                    stup(&["the", "3"]),
                    stup(&["brown", "fox"]),
                    stup(&["brown", "3"]),
                ],
            ),
        );
        check(
            "setproduct",
            vec![sset(&["the", "brown"]), sset(&["quick", "fox"])],
            set(
                pair_ty.clone(),
                vec![
                    stup(&["the", "quick"]),
                    stup(&["the", "fox"]),
                    stup(&["brown", "quick"]),
                    stup(&["brown", "fox"]),
                ],
            ),
        );
        check(
            "setproduct",
            vec![slist(&["a"]), tup(vec![]), slist(&["b"])],
            list(
                tuple_ty(vec![Type::String, Type::Dynamic, Type::String]),
                vec![],
            ),
        );
        let three = call(
            "setproduct",
            vec![nlist(&[1.0, 2.0]), nlist(&[3.0, 4.0]), nlist(&[5.0, 6.0])],
        );
        assert_eq!(three.len(), Some(8));
        assert!(
            three
                .as_seq()
                .and_then(|s| s.first())
                .is_some_and(|t| t.raw_equal(&tup(nums(&[1.0, 3.0, 5.0]))))
        );
    }

    #[test]
    fn setproduct_errors() {
        assert_eq!(
            failed("setproduct", vec![slist(&[])]),
            "at least two arguments are required"
        );
        assert_eq!(
            arg_err("setproduct", vec![slist(&["a"]), s("b")]),
            (1, "a set or a list is required".to_string())
        );
        assert_eq!(
            arg_err(
                "setproduct",
                vec![tup(vec![s("a"), stup(&["b"])]), slist(&["c"])]
            ),
            (0, "all elements must be of the same type".to_string())
        );
        assert_eq!(
            arg_err("setproduct", vec![slist(&["a"]), null()]),
            (1, "argument must not be null".to_string())
        );
        // The guard against explosive results.
        let big = nlist(&(0..1024).map(f64::from).collect::<Vec<_>>());
        let msg = failed("setproduct", vec![big.clone(), big]);
        assert!(msg.contains("too many elements"), "{msg}");
    }

    #[test]
    fn slice_vectors() {
        let abc = slist(&["a", "b", "c"]);
        check(
            "slice",
            vec![abc.clone(), n(0.0), n(2.0)],
            slist(&["a", "b"]),
        );
        check("slice", vec![abc.clone(), n(1.0), n(1.0)], slist(&[]));
        check("slice", vec![abc.clone(), n(3.0), n(3.0)], slist(&[]));
        check(
            "slice",
            vec![tup(vec![s("a"), n(1.0), b(true)]), n(1.0), n(3.0)],
            tup(vec![n(1.0), b(true)]),
        );
        check("slice", vec![tup(vec![]), n(0.0), n(0.0)], tup(vec![]));
        check("slice", vec![abc, s("1"), s("2")], slist(&["b"]));
    }

    #[test]
    fn slice_errors() {
        let abc = slist(&["a", "b", "c"]);
        let e = |args: Vec<Value>| arg_err("slice", args);
        assert_eq!(
            e(vec![sset(&["a"]), n(0.0), n(1.0)]),
            (0, "cannot slice a set, because its elements do not have indices; explicitly convert to a list if the ordering of the result is not important".to_string())
        );
        assert_eq!(
            e(vec![s("abc"), n(0.0), n(1.0)]),
            (0, "must be a list or tuple value".to_string())
        );
        assert_eq!(
            e(vec![abc.clone(), n(-1.0), n(1.0)]),
            (1, "start index must not be less than zero".to_string())
        );
        assert_eq!(
            e(vec![abc.clone(), n(4.0), n(4.0)]),
            (
                1,
                "start index must not be greater than the length of the list".to_string()
            )
        );
        assert_eq!(
            e(vec![abc.clone(), n(0.0), n(4.0)]),
            (
                2,
                "end index must not be greater than the length of the list".to_string()
            )
        );
        assert_eq!(
            e(vec![abc.clone(), n(0.0), n(-1.0)]),
            (2, "end index must not be less than zero".to_string())
        );
        assert_eq!(
            e(vec![abc.clone(), n(2.0), n(1.0)]),
            (
                1,
                "start index must not be greater than end index".to_string()
            )
        );
        assert_eq!(
            e(vec![abc.clone(), n(0.5), n(1.0)]),
            (1, format!("invalid start index: {WHOLE}"))
        );
        assert_eq!(
            e(vec![abc, n(0.0), n(1.5)]),
            (2, format!("invalid end index: {WHOLE}"))
        );
    }

    #[test]
    fn sort_is_lexicographic() {
        check(
            "sort",
            vec![stup(&["b", "a", "c"])],
            slist(&["a", "b", "c"]),
        );
        check(
            "sort",
            vec![tup(nums(&[10.0, 9.0, 1.0]))],
            slist(&["1", "10", "9"]),
        );
        check("sort", vec![slist(&[])], slist(&[]));
        check(
            "sort",
            vec![stup(&["é", "z", "Z", "a"])],
            slist(&["Z", "a", "z", "é"]),
        );
        check("sort", vec![sset(&["b", "a"])], slist(&["a", "b"]));
        assert_eq!(
            failed(
                "sort",
                vec![list(Type::String, vec![s("a"), Value::Null(Type::String)])]
            ),
            "given list element 1 is null; a null string cannot be sorted"
        );
        assert_eq!(arg_err("sort", vec![s("a")]).0, 0);
    }

    #[test]
    fn values_of_maps_and_objects() {
        check("values", vec![map(Type::String, &[])], slist(&[]));
        check(
            "values",
            vec![map(Type::String, &[("hello", s("world")), ("a", s("b"))])],
            slist(&["b", "world"]),
        );
        check(
            "values",
            vec![obj(&[("hello", s("world")), ("a", n(1.0))])],
            tup(vec![n(1.0), s("world")]),
        );
        check("values", vec![obj(&[])], tup(vec![]));
        assert_eq!(
            failed("values", vec![slist(&["a"])]),
            "values() requires a map as the first argument"
        );
        assert_eq!(
            arg_err("values", vec![Value::Null(Type::map(Type::String))]),
            (0, "argument must not be null".to_string())
        );
    }

    #[test]
    fn zipmap_vectors() {
        check(
            "zipmap",
            vec![slist(&[]), slist(&[])],
            map(Type::String, &[]),
        );
        check(
            "zipmap",
            vec![slist(&["bleep"]), slist(&["bloop"])],
            map(Type::String, &[("bleep", s("bloop"))]),
        );
        check(
            "zipmap",
            vec![slist(&["bleep", "beep"]), slist(&["bloop", "boop"])],
            map(Type::String, &[("beep", s("boop")), ("bleep", s("bloop"))]),
        );
        check("zipmap", vec![slist(&[]), tup(vec![])], obj(&[]));
        check(
            "zipmap",
            vec![stup(&["bleep", "beep"]), tup(vec![s("bloop"), n(1.0)])],
            obj(&[("beep", n(1.0)), ("bleep", s("bloop"))]),
        );
        // Later duplicates win.
        check(
            "zipmap",
            vec![slist(&["a", "a"]), nlist(&[1.0, 2.0])],
            map(Type::Number, &[("a", n(2.0))]),
        );
    }

    #[test]
    fn zipmap_errors() {
        assert_eq!(
            failed("zipmap", vec![slist(&["boop"]), slist(&[])]),
            "number of keys (1) does not match number of values (0)"
        );
        assert_eq!(
            failed("zipmap", vec![slist(&[]), slist(&["boop"])]),
            "number of keys (0) does not match number of values (1)"
        );
        assert_eq!(
            failed("zipmap", vec![slist(&["boop"]), tup(vec![])]),
            "number of keys (1) does not match number of values (0)"
        );
        assert_eq!(
            failed("zipmap", vec![slist(&["a"]), s("b")]),
            "values argument must be a list or tuple value"
        );
        assert_eq!(
            failed(
                "zipmap",
                vec![
                    list(Type::String, vec![Value::Null(Type::String)]),
                    tup(vec![n(1.0)])
                ]
            ),
            "keys list has null value at index 0"
        );
        assert_eq!(
            failed("zipmap", vec![sset(&["a"]), sset(&["b"])]),
            "values argument must be a list or tuple value"
        );
    }

    #[test]
    fn no_panics_on_odd_inputs() {
        let odd = [
            null(),
            Value::Null(Type::list(Type::String)),
            s(""),
            n(-0.0),
            n(1e308),
            n(-1e308),
            b(true),
            tup(vec![]),
            tup(vec![null(), tup(vec![null()])]),
            slist(&[]),
            sset(&[]),
            empty_dyn_set(),
            map(Type::Dynamic, &[]),
            obj(&[]),
            obj(&[("a", null())]),
        ];
        for name in NAMES {
            for a in &odd {
                let _ = call_by_name(name, vec![a.clone()]);
                for c in &odd {
                    let _ = call_by_name(name, vec![a.clone(), c.clone()]);
                    let _ = call_by_name(name, vec![a.clone(), c.clone(), c.clone()]);
                }
            }
        }
    }
}
