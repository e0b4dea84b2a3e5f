//! The value model of bake's expression language: a small re-creation of go-cty's
//! types and values (what bake's HCL evaluator computes with), with the conversion
//! rules HCL applies when a value meets a declared type.
//!
//! Owns: types, values, equality, ordering of sets, conversion and type unification.
//! Must never: perform I/O or know about bake blocks.

pub mod unify;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// A cty-like type. `Dynamic` is cty's `DynamicPseudoType` (`any`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Type {
    Dynamic,
    String,
    Number,
    Bool,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    Tuple(Vec<Type>),
    Object(BTreeMap<String, Type>),
}

impl Type {
    pub fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }
    pub fn set(t: Type) -> Type {
        Type::Set(Box::new(t))
    }
    pub fn map(t: Type) -> Type {
        Type::Map(Box::new(t))
    }
    pub fn is_primitive(&self) -> bool {
        matches!(self, Type::String | Type::Number | Type::Bool)
    }
    /// The element type of a list, set or map.
    pub fn element(&self) -> Option<&Type> {
        match self {
            Type::List(t) | Type::Set(t) | Type::Map(t) => Some(t),
            _ => None,
        }
    }
    /// Whether the type contains `Dynamic` anywhere.
    pub fn has_dynamic(&self) -> bool {
        match self {
            Type::Dynamic => true,
            Type::List(t) | Type::Set(t) | Type::Map(t) => t.has_dynamic(),
            Type::Tuple(ts) => ts.iter().any(Type::has_dynamic),
            Type::Object(m) => m.values().any(Type::has_dynamic),
            _ => false,
        }
    }
    /// cty's `FriendlyName`, used in messages and `--list=variables`.
    pub fn friendly_name(&self) -> String {
        match self {
            Type::Dynamic => "dynamic".into(),
            Type::String => "string".into(),
            Type::Number => "number".into(),
            Type::Bool => "bool".into(),
            Type::List(t) => format!("list of {}", t.friendly_name()),
            Type::Set(t) => format!("set of {}", t.friendly_name()),
            Type::Map(t) => format!("map of {}", t.friendly_name()),
            Type::Tuple(_) => "tuple".into(),
            Type::Object(_) => "object".into(),
        }
    }
    /// The type-expression spelling (`list(string)`), used in messages.
    pub fn type_expr(&self) -> String {
        match self {
            Type::Dynamic => "any".into(),
            Type::String => "string".into(),
            Type::Number => "number".into(),
            Type::Bool => "bool".into(),
            Type::List(t) => format!("list({})", t.type_expr()),
            Type::Set(t) => format!("set({})", t.type_expr()),
            Type::Map(t) => format!("map({})", t.type_expr()),
            Type::Tuple(ts) => format!(
                "tuple([{}])",
                ts.iter()
                    .map(Type::type_expr)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Type::Object(m) => format!(
                "object({{{}}})",
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.type_expr()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.type_expr())
    }
}

/// A cty-like value. Numbers are `f64` (cty uses arbitrary precision; integers up to
/// 2^53 are exact here, which covers every value bake files use in practice).
/// Maps and objects iterate in key order, as cty does. Sets are kept sorted and
/// free of duplicates.
#[derive(Clone, Debug)]
pub enum Value {
    Null(Type),
    Bool(bool),
    Number(f64),
    String(String),
    /// A list with its element type.
    List(Type, Vec<Value>),
    /// A set with its element type; sorted by [`Value::set_cmp`], deduplicated.
    Set(Type, Vec<Value>),
    /// A map with its element type.
    Map(Type, BTreeMap<String, Value>),
    Tuple(Vec<Value>),
    Object(BTreeMap<String, Value>),
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.raw_equal(other)
    }
}

impl Value {
    pub fn null() -> Value {
        Value::Null(Type::Dynamic)
    }
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }
    pub fn empty_tuple() -> Value {
        Value::Tuple(Vec::new())
    }
    pub fn empty_object() -> Value {
        Value::Object(BTreeMap::new())
    }

    /// Builds a list, unifying element types (cty `ListVal` after conversion).
    /// An empty list of unknown element type is `list(dynamic)`.
    pub fn list(elems: Vec<Value>) -> Result<Value, String> {
        let ety = unify_values(&elems).ok_or("all list elements must have the same type")?;
        let elems = elems
            .into_iter()
            .map(|v| convert(v, &ety))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::List(ety, elems))
    }

    /// A list whose elements all have type `ety` already.
    pub fn list_of(ety: Type, elems: Vec<Value>) -> Value {
        Value::List(ety, elems)
    }

    /// Builds a set (sorted, deduplicated), unifying element types.
    pub fn set(elems: Vec<Value>) -> Result<Value, String> {
        let ety = unify_values(&elems).ok_or("all set elements must have the same type")?;
        let elems = elems
            .into_iter()
            .map(|v| convert(v, &ety))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::set_of(ety, elems))
    }

    /// A set whose elements all have type `ety` already; sorts and deduplicates.
    pub fn set_of(ety: Type, mut elems: Vec<Value>) -> Value {
        elems.sort_by(Value::set_cmp);
        elems.dedup_by(|a, b| a.raw_equal(b));
        Value::Set(ety, elems)
    }

    /// Builds a map, unifying element types.
    pub fn map(entries: BTreeMap<String, Value>) -> Result<Value, String> {
        let vals: Vec<Value> = entries.values().cloned().collect();
        let ety = unify_values(&vals).ok_or("all map elements must have the same type")?;
        let mut out = BTreeMap::new();
        for (k, v) in entries {
            out.insert(k, convert(v, &ety)?);
        }
        Ok(Value::Map(ety, out))
    }

    pub fn ty(&self) -> Type {
        match self {
            Value::Null(t) => t.clone(),
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(t, _) => Type::list(t.clone()),
            Value::Set(t, _) => Type::set(t.clone()),
            Value::Map(t, _) => Type::map(t.clone()),
            Value::Tuple(vs) => Type::Tuple(vs.iter().map(Value::ty).collect()),
            Value::Object(m) => Type::Object(m.iter().map(|(k, v)| (k.clone(), v.ty())).collect()),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null(_))
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Elements of a list, set or tuple.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::List(_, v) | Value::Set(_, v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }

    /// Entries of a map or object.
    pub fn as_entries(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(_, m) | Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// Whether a collection has no elements (primitives and null are not empty).
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Whether this is a list, set or tuple.
    pub fn is_seq(&self) -> bool {
        matches!(self, Value::List(..) | Value::Set(..) | Value::Tuple(_))
    }

    /// Whether this is a map or object.
    pub fn is_mapping(&self) -> bool {
        matches!(self, Value::Map(..) | Value::Object(_))
    }

    /// Number of elements (collections) or attributes (objects); `None` for
    /// primitives and null.
    pub fn len(&self) -> Option<usize> {
        match self {
            Value::List(_, v) | Value::Set(_, v) | Value::Tuple(v) => Some(v.len()),
            Value::Map(_, m) | Value::Object(m) => Some(m.len()),
            _ => None,
        }
    }

    /// cty's `RawEquals`-like equality, but type-insensitive between list/tuple
    /// and map/object shapes of equal content (what HCL `==` reports after
    /// unification in practice).
    pub fn raw_equal(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null(_), Value::Null(_)) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Number(a), Value::Number(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Set(_, a), Value::Set(_, b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.raw_equal(y))
            }
            (Value::List(_, a) | Value::Tuple(a), Value::List(_, b) | Value::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.raw_equal(y))
            }
            (Value::Map(_, a) | Value::Object(a), Value::Map(_, b) | Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((ka, va), (kb, vb))| ka == kb && va.raw_equal(vb))
            }
            _ => false,
        }
    }

    /// A total order used to keep sets sorted: cty orders string sets
    /// lexicographically and number sets numerically; other element kinds are
    /// ordered by their JSON text, which is stable.
    pub fn set_cmp(a: &Value, b: &Value) -> Ordering {
        match (a, b) {
            (Value::String(x), Value::String(y)) => x.cmp(y),
            (Value::Number(x), Value::Number(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
            (Value::Null(_), Value::Null(_)) => Ordering::Equal,
            (Value::Null(_), _) => Ordering::Greater,
            (_, Value::Null(_)) => Ordering::Less,
            _ => to_json(a).to_string().cmp(&to_json(b).to_string()),
        }
    }

    /// Short description of the value's kind for error messages ("string", "list
    /// of string", "object", ...).
    pub fn type_name(&self) -> String {
        self.ty().friendly_name()
    }
}

/// Formats a number the way cty turns it into a string (`big.Float.Text('f', -1)`):
/// no exponent, shortest digits that round-trip.
pub fn format_number(n: f64) -> String {
    if n == 0.0 {
        return "0".into();
    }
    if n.fract() == 0.0 && n.abs() < 1e21 {
        // An integral f64 below 1e21 is exactly an i128: the same digits as
        // `{n:.0}`, without the float formatting machinery.
        return (n as i128).to_string();
    }
    let s = format!("{n}");
    if s.contains('e') {
        // Rust's Display never uses exponents for f64, but keep a guard.
        format!("{n:.20}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        s
    }
}

/// Parses a number literal or numeric string as cty's `ParseNumberVal` does
/// (decimal, optional sign, fraction and exponent; no hex, no NaN/Inf).
pub fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    if body.is_empty()
        || !body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
    {
        return None;
    }
    let n: f64 = t.parse().ok()?;
    n.is_finite().then_some(n)
}

// ------------------------------------------------------------------ conversion

/// Converts a value to a type following cty's `convert.Convert` rules.
/// The error text follows cty's wording ("a number is required", ...).
pub fn convert(v: Value, ty: &Type) -> Result<Value, String> {
    convert_at(v, ty, &Path::ROOT)
}

/// Where a conversion is within the value (for error messages): a chain of
/// steps on the stack, spelled out only when an error needs it.
#[derive(Clone, Copy)]
struct Path<'a> {
    step: Step<'a>,
    parent: Option<&'a Path<'a>>,
    depth: usize,
}

#[derive(Clone, Copy)]
enum Step<'a> {
    Root,
    Index(usize),
    Key(&'a str),
    Attr(&'a str),
}

impl<'a> Path<'a> {
    const ROOT: Path<'static> = Path {
        step: Step::Root,
        parent: None,
        depth: 0,
    };

    fn then(&'a self, step: Step<'a>) -> Path<'a> {
        Path {
            step,
            parent: Some(self),
            depth: self.depth + 1,
        }
    }
}

fn path_prefix(path: &Path) -> String {
    let mut steps = Vec::new();
    let mut at = Some(path);
    while let Some(p) = at {
        match p.step {
            Step::Root => {}
            Step::Index(i) => steps.push(format!("[{i}]")),
            Step::Key(k) => steps.push(format!("[{k:?}]")),
            Step::Attr(k) => steps.push(format!(".{k}")),
        }
        at = p.parent;
    }
    if steps.is_empty() {
        String::new()
    } else {
        steps.reverse();
        format!("{}: ", steps.concat())
    }
}

/// Values nested deeper than this are refused by conversion (each level is a
/// stack frame).
pub const MAX_VALUE_DEPTH: usize = 128;

fn convert_at(v: Value, ty: &Type, path: &Path) -> Result<Value, String> {
    if *ty == Type::Dynamic {
        return Ok(v);
    }
    if path.depth > MAX_VALUE_DEPTH {
        return Err(format!(
            "{}value nests more than {MAX_VALUE_DEPTH} levels deep",
            path_prefix(path)
        ));
    }
    if let Value::Null(vt) = &v {
        if vt == ty || *vt == Type::Dynamic || conversion_possible(vt, ty) {
            return Ok(Value::Null(ty.clone()));
        }
        return Err(format!("{}{} required", path_prefix(path), article(ty)));
    }
    match ty {
        Type::Dynamic => Ok(v),
        Type::String => match v {
            Value::String(_) => Ok(v),
            Value::Number(n) => Ok(Value::String(format_number(n))),
            Value::Bool(b) => Ok(Value::String(b.to_string())),
            _ => Err(format!("{}string required", path_prefix(path))),
        },
        Type::Number => match v {
            Value::Number(_) => Ok(v),
            Value::String(s) => parse_number(&s)
                .map(Value::Number)
                .ok_or_else(|| format!("{}a number is required", path_prefix(path))),
            _ => Err(format!("{}number required", path_prefix(path))),
        },
        Type::Bool => match v {
            Value::Bool(_) => Ok(v),
            Value::String(s) => match s.as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(format!("{}a bool is required", path_prefix(path))),
            },
            _ => Err(format!("{}bool required", path_prefix(path))),
        },
        Type::List(et) | Type::Set(et) => {
            // A typed collection keeps its element type when converted to
            // `list(any)`/`set(any)`, even when empty (as cty does).
            let (source_ety, elems) = match v {
                Value::List(t, e) | Value::Set(t, e) => (Some(t), e),
                Value::Tuple(e) => (None, e),
                _ => {
                    return Err(format!(
                        "{}{} required",
                        path_prefix(path),
                        ty.friendly_name()
                    ));
                }
            };
            let ety = if **et == Type::Dynamic {
                if let Some(t) = source_ety.filter(|t| *t != Type::Dynamic) {
                    t
                } else {
                    unify_values(&elems).ok_or_else(|| {
                        format!(
                            "{}all {} elements must have the same type",
                            path_prefix(path),
                            if matches!(ty, Type::List(_)) {
                                "list"
                            } else {
                                "set"
                            }
                        )
                    })?
                }
            } else {
                (**et).clone()
            };
            let mut out = Vec::with_capacity(elems.len());
            for (i, e) in elems.into_iter().enumerate() {
                out.push(convert_at(e, &ety, &path.then(Step::Index(i)))?);
            }
            Ok(match ty {
                Type::List(_) => Value::List(ety, out),
                _ => Value::set_of(ety, out),
            })
        }
        Type::Map(et) => {
            let (source_ety, entries) = match v {
                Value::Map(t, m) => (Some(t), m),
                Value::Object(m) => (None, m),
                _ => {
                    return Err(format!(
                        "{}map of {} required",
                        path_prefix(path),
                        et.friendly_name()
                    ));
                }
            };
            let ety = if **et == Type::Dynamic {
                if let Some(t) = source_ety.filter(|t| *t != Type::Dynamic) {
                    t
                } else {
                    let vals: Vec<Value> = entries.values().cloned().collect();
                    unify_values(&vals).ok_or_else(|| {
                        format!(
                            "{}all map elements must have the same type",
                            path_prefix(path)
                        )
                    })?
                }
            } else {
                (**et).clone()
            };
            let mut out = BTreeMap::new();
            for (k, e) in entries {
                let c = convert_at(e, &ety, &path.then(Step::Key(&k)))?;
                out.insert(k, c);
            }
            Ok(Value::Map(ety, out))
        }
        Type::Tuple(ts) => {
            let elems = match v {
                Value::List(_, e) | Value::Tuple(e) | Value::Set(_, e) => e,
                _ => return Err(format!("{}tuple required", path_prefix(path))),
            };
            if elems.len() != ts.len() {
                return Err(format!(
                    "{}tuple required with {} elements",
                    path_prefix(path),
                    ts.len()
                ));
            }
            let mut out = Vec::with_capacity(elems.len());
            for (i, (e, t)) in elems.into_iter().zip(ts).enumerate() {
                out.push(convert_at(e, t, &path.then(Step::Index(i)))?);
            }
            Ok(Value::Tuple(out))
        }
        Type::Object(attrs) => {
            let mut entries = match v {
                Value::Map(_, m) | Value::Object(m) => m,
                _ => return Err(format!("{}object required", path_prefix(path))),
            };
            let mut out = BTreeMap::new();
            for (k, t) in attrs {
                let Some(e) = entries.remove(k) else {
                    return Err(format!("{}attribute {k:?} is required", path_prefix(path)));
                };
                let c = convert_at(e, t, &path.then(Step::Attr(k)))?;
                out.insert(k.clone(), c);
            }
            Ok(Value::Object(out))
        }
    }
}

fn article(ty: &Type) -> String {
    match ty {
        Type::Number => "a number is".into(),
        Type::Bool => "a bool is".into(),
        Type::String => "a string is".into(),
        t => format!("{} is", t.friendly_name()),
    }
}

/// Whether a value of type `from` could convert to `to` (ignoring values).
pub fn conversion_possible(from: &Type, to: &Type) -> bool {
    match (from, to) {
        (_, Type::Dynamic) | (Type::Dynamic, _) => true,
        (a, b) if a == b => true,
        (a, b) if a.is_primitive() && b.is_primitive() => !matches!(
            (a, b),
            (Type::Number, Type::Bool) | (Type::Bool, Type::Number)
        ),
        (Type::List(a) | Type::Set(a), Type::List(b) | Type::Set(b)) => conversion_possible(a, b),
        (Type::Tuple(ts), Type::List(b) | Type::Set(b)) => {
            ts.iter().all(|t| conversion_possible(t, b))
        }
        (Type::Map(a), Type::Map(b)) => conversion_possible(a, b),
        (Type::Object(m), Type::Map(b)) => m.values().all(|t| conversion_possible(t, b)),
        (Type::Tuple(a), Type::Tuple(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| conversion_possible(x, y))
        }
        (Type::List(_), Type::Tuple(_)) => true,
        (Type::Object(a), Type::Object(b)) => b
            .iter()
            .all(|(k, t)| a.get(k).is_some_and(|s| conversion_possible(s, t))),
        (Type::Map(a), Type::Object(b)) => b.values().all(|t| conversion_possible(a, t)),
        _ => false,
    }
}

/// Finds a single type that all values can be converted to (go-cty's
/// `convert.Unify`, see [`unify`]); nulls of dynamic type take the
/// others' type. Returns `None` when there is no such type. An empty input
/// unifies to `Dynamic`.
pub fn unify_values(vals: &[Value]) -> Option<Type> {
    let types: Vec<Type> = vals.iter().map(Value::ty).collect();
    unify_types(&types)
}

pub fn unify_types(types: &[Type]) -> Option<Type> {
    // Nulls of unknown type take the type of the others.
    let concrete: Vec<Type> = types
        .iter()
        .filter(|t| **t != Type::Dynamic)
        .cloned()
        .collect();
    if concrete.is_empty() {
        return Some(Type::Dynamic);
    }
    unify::unify(&concrete)
}

// ------------------------------------------------------------------ JSON

/// Converts a value to JSON the way cty's JSON marshaller does (null → null,
/// sets and lists → arrays, maps and objects → objects).
pub fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Null(_) => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Number(n) => number_to_json(*n),
        Value::String(s) => J::String(s.clone()),
        Value::List(_, e) | Value::Set(_, e) | Value::Tuple(e) => {
            J::Array(e.iter().map(to_json).collect())
        }
        Value::Map(_, m) | Value::Object(m) => {
            J::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

pub fn number_to_json(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        serde_json::Value::Number(serde_json::Number::from(n as i64))
    } else {
        serde_json::Number::from_f64(n)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null)
    }
}

/// Converts JSON into a value with the implied type (cty's `ImpliedType`):
/// arrays become tuples and objects become objects.
pub fn from_json(j: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match j {
        J::Null => Value::null(),
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::String(s.clone()),
        J::Array(a) => Value::Tuple(a.iter().map(from_json).collect()),
        J::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect()),
    }
}

/// Decodes JSON into a value of a given type (cty's `ctyjson.Unmarshal`).
pub fn from_json_typed(j: &serde_json::Value, ty: &Type) -> Result<Value, String> {
    let v = from_json(j);
    convert(v, ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formatting_matches_cty() {
        assert_eq!(format_number(3.0), "3");
        assert_eq!(format_number(2.5), "2.5");
        assert_eq!(format_number(-0.125), "-0.125");
        assert_eq!(format_number(1e20), "100000000000000000000");
        // Integral values take a shortcut; it spells them as `{:.0}` does.
        let mut x = 1.0f64;
        while x < 1e21 {
            for n in [x, -x, x + 1.0, x * 3.0 - 1.0, (x * 7.77).floor()] {
                let n = n.floor();
                if n != 0.0 && n.abs() < 1e21 {
                    assert_eq!(format_number(n), format!("{n:.0}"), "{n}");
                }
            }
            x *= 1.7;
        }
        assert_eq!(format_number(0.1), "0.1");
    }

    #[test]
    fn parse_number_rejects_non_numbers() {
        assert_eq!(parse_number("12"), Some(12.0));
        assert_eq!(parse_number("-1.5e2"), Some(-150.0));
        assert_eq!(parse_number("NaN"), None);
        assert_eq!(parse_number("inf"), None);
        assert_eq!(parse_number("0x10"), None);
        assert_eq!(parse_number(""), None);
        assert_eq!(parse_number("abc"), None);
    }

    #[test]
    fn primitive_conversions() {
        assert_eq!(
            convert(Value::Number(5.0), &Type::String).unwrap(),
            Value::string("5")
        );
        assert_eq!(
            convert(Value::string("5"), &Type::Number).unwrap(),
            Value::Number(5.0)
        );
        assert!(convert(Value::string("x"), &Type::Number).is_err());
        assert_eq!(
            convert(Value::string("true"), &Type::Bool).unwrap(),
            Value::Bool(true)
        );
        assert!(convert(Value::string("1"), &Type::Bool).is_err());
        assert!(convert(Value::Bool(true), &Type::Number).is_err());
    }

    #[test]
    fn tuple_to_list_unifies() {
        let t = Value::Tuple(vec![Value::string("a"), Value::Number(1.0)]);
        let l = convert(t, &Type::list(Type::Dynamic)).unwrap();
        assert_eq!(l.ty(), Type::list(Type::String));
        let t = Value::Tuple(vec![Value::string("a"), Value::empty_tuple()]);
        assert!(convert(t, &Type::list(Type::Dynamic)).is_err());
    }

    #[test]
    fn sets_are_sorted_and_unique() {
        let s = Value::set(vec![
            Value::string("b"),
            Value::string("a"),
            Value::string("b"),
        ])
        .unwrap();
        assert_eq!(
            s.as_seq().unwrap(),
            &[Value::string("a"), Value::string("b")]
        );
    }

    #[test]
    fn object_to_object_drops_extra_and_requires_missing() {
        let mut m = BTreeMap::new();
        m.insert("a".to_string(), Value::Number(1.0));
        m.insert("b".to_string(), Value::Number(2.0));
        let mut t = BTreeMap::new();
        t.insert("a".to_string(), Type::String);
        let v = convert(Value::Object(m.clone()), &Type::Object(t.clone())).unwrap();
        assert_eq!(v.as_entries().unwrap().len(), 1);
        t.insert("c".to_string(), Type::String);
        assert!(convert(Value::Object(m), &Type::Object(t)).is_err());
    }

    #[test]
    fn empty_typed_collections_keep_their_element_type() {
        let empty = Value::set_of(Type::String, vec![]);
        let v = convert(empty, &Type::set(Type::Dynamic)).unwrap();
        assert_eq!(v.ty(), Type::set(Type::String));
        let m = Value::Map(Type::Number, BTreeMap::new());
        assert_eq!(
            convert(m, &Type::map(Type::Dynamic)).unwrap().ty(),
            Type::map(Type::Number)
        );
    }

    #[test]
    fn null_converts_to_typed_null() {
        let v = convert(Value::null(), &Type::String).unwrap();
        assert_eq!(v.ty(), Type::String);
        assert!(v.is_null());
    }
}
