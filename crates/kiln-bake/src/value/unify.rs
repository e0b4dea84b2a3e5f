//! Type unification: go-cty's `convert.UnifyUnsafe` (the type a set of values
//! converts to when they must share one), used by collection constructors,
//! conversions to `list(any)`/`map(any)` and the collection functions.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::value::{Type, conversion_possible};

/// go-cty's `convert.UnifyUnsafe`, returning only the unified type: structural
/// shortcuts for same-kind collections, objects and tuples, then the most general
/// given type (by `sortTypes`) that every other type converts to.
pub fn unify(types: &[Type]) -> Option<Type> {
    if types.is_empty() {
        return None;
    }
    // Only distinct types matter; deduplicating first keeps this linear in the
    // number of values (sort_types below is quadratic in its input).
    let mut distinct: Vec<Type> = Vec::new();
    for t in types {
        if !distinct.contains(t) {
            distinct.push(t.clone());
        }
    }
    if distinct.len() < types.len() {
        return unify(&distinct);
    }
    let (mut maps, mut lists, mut sets, mut objects, mut tuples, mut dynamics) = (0, 0, 0, 0, 0, 0);
    for t in types {
        match t {
            Type::Map(_) => maps += 1,
            Type::List(_) => lists += 1,
            Type::Set(_) => sets += 1,
            Type::Object(_) => objects += 1,
            Type::Tuple(_) => tuples += 1,
            Type::Dynamic => dynamics += 1,
            _ => {}
        }
    }
    let n = types.len();
    let has_dynamic = dynamics > 0;
    if maps > 0 && maps + dynamics == n {
        return unify_collections(types, has_dynamic, Type::map);
    } else if maps > 0 && maps + objects + dynamics == n {
        if let Some(t @ Type::Map(_)) = unify_objects_as_maps(types) {
            return Some(t);
        }
    } else if lists > 0 && lists + dynamics == n {
        return unify_collections(types, has_dynamic, Type::list);
    } else if lists > 0 && lists + tuples + dynamics == n {
        if let Some(t @ Type::List(_)) = unify_tuples_as_list(types) {
            return Some(t);
        }
    } else if sets > 0 && sets + dynamics == n {
        return unify_collections(types, has_dynamic, Type::set);
    } else if objects > 0 && objects + dynamics == n {
        return unify_objects(types, has_dynamic);
    } else if tuples > 0 && tuples + dynamics == n {
        return unify_tuples(types, has_dynamic);
    } else if objects > 0 && tuples > 0 {
        return None;
    }

    'preference: for want_idx in sort_types(types) {
        let Some(want) = types.get(want_idx) else {
            continue;
        };
        for (i, t) in types.iter().enumerate() {
            if i == want_idx || t == want {
                continue;
            }
            if !conversion_possible(t, want) {
                continue 'preference;
            }
        }
        return Some(want.clone());
    }
    None
}

/// Whether every type converts to `target` (the conversion check after each
/// structural unification).
fn all_convert(types: &[Type], target: &Type) -> bool {
    types
        .iter()
        .all(|t| t == target || conversion_possible(t, target))
}

fn unify_collections(types: &[Type], has_dynamic: bool, make: fn(Type) -> Type) -> Option<Type> {
    if has_dynamic {
        return Some(Type::Dynamic);
    }
    let elems: Vec<Type> = types.iter().filter_map(|t| t.element().cloned()).collect();
    let ret = make(unify(&elems)?);
    all_convert(types, &ret).then_some(ret)
}

fn unify_objects_as_maps(types: &[Type]) -> Option<Type> {
    let objects: Vec<Type> = types
        .iter()
        .filter(|t| matches!(t, Type::Object(_)))
        .cloned()
        .collect();
    let map = unify_objects_to_map(&objects)?;
    if !matches!(map, Type::Map(_)) {
        return None;
    }
    let mapped: Vec<Type> = types
        .iter()
        .map(|t| match t {
            Type::Object(_) => map.clone(),
            other => other.clone(),
        })
        .collect();
    unify(&mapped).filter(|t| matches!(t, Type::Map(_)))
}

fn unify_tuples_as_list(types: &[Type]) -> Option<Type> {
    let tuples: Vec<Type> = types
        .iter()
        .filter(|t| matches!(t, Type::Tuple(_)))
        .cloned()
        .collect();
    let list = unify_tuples_to_list(&tuples)?;
    if !matches!(list, Type::List(_)) {
        return None;
    }
    let listed: Vec<Type> = types
        .iter()
        .map(|t| match t {
            Type::Tuple(_) => list.clone(),
            other => other.clone(),
        })
        .collect();
    unify(&listed).filter(|t| matches!(t, Type::List(_)))
}

fn unify_objects(types: &[Type], has_dynamic: bool) -> Option<Type> {
    if has_dynamic {
        return Some(Type::Dynamic);
    }
    let attrs: Vec<&BTreeMap<String, Type>> = types
        .iter()
        .filter_map(|t| match t {
            Type::Object(m) => Some(m),
            _ => None,
        })
        .collect();
    let first = attrs.first()?;
    if attrs.iter().any(|a| !a.keys().eq(first.keys())) {
        return unify_objects_to_map(types);
    }
    let mut out = BTreeMap::new();
    for name in first.keys() {
        let across: Vec<Type> = attrs.iter().filter_map(|a| a.get(name).cloned()).collect();
        out.insert(name.clone(), unify(&across)?);
    }
    let ret = Type::Object(out);
    if all_convert(types, &ret) {
        Some(ret)
    } else {
        unify_objects_to_map(types)
    }
}

fn unify_objects_to_map(types: &[Type]) -> Option<Type> {
    let attr_types: Vec<Type> = types
        .iter()
        .flat_map(|t| match t {
            Type::Object(m) => m.values().cloned().collect(),
            _ => Vec::new(),
        })
        .collect();
    let ret = Type::map(unify(&attr_types)?);
    all_convert(types, &ret).then_some(ret)
}

fn unify_tuples(types: &[Type], has_dynamic: bool) -> Option<Type> {
    if has_dynamic {
        return Some(Type::Dynamic);
    }
    let shapes: Vec<&Vec<Type>> = types
        .iter()
        .filter_map(|t| match t {
            Type::Tuple(ts) => Some(ts),
            _ => None,
        })
        .collect();
    let first = shapes.first()?;
    if shapes.iter().any(|s| s.len() != first.len()) {
        return unify_tuples_to_list(types);
    }
    let mut out = Vec::with_capacity(first.len());
    for i in 0..first.len() {
        let across: Vec<Type> = shapes.iter().filter_map(|s| s.get(i).cloned()).collect();
        out.push(unify(&across)?);
    }
    let ret = Type::Tuple(out);
    if all_convert(types, &ret) {
        Some(ret)
    } else {
        unify_tuples_to_list(types)
    }
}

fn unify_tuples_to_list(types: &[Type]) -> Option<Type> {
    let elem_types: Vec<Type> = types
        .iter()
        .flat_map(|t| match t {
            Type::Tuple(ts) => ts.clone(),
            _ => Vec::new(),
        })
        .collect();
    let ret = Type::list(unify(&elem_types)?);
    all_convert(types, &ret).then_some(ret)
}

/// go-cty's `sortTypes`: a topological order of "more general than", most general
/// first. Positions never reached stay 0, as in go-cty.
fn sort_types(types: &[Type]) -> Vec<usize> {
    let n = types.len();
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        for j in (i + 1)..n {
            let (Some(a), Some(b)) = (types.get(i), types.get(j)) else {
                continue;
            };
            match compare_types(a, b) {
                Ordering::Less => edges[i].push(j),
                Ordering::Greater => edges[j].push(i),
                Ordering::Equal => {}
            }
        }
    }
    let mut in_degree = vec![0usize; n];
    for outs in &edges {
        for &j in outs {
            in_degree[j] += 1;
        }
    }
    let mut result: Vec<usize> = (0..n).filter(|&i| in_degree[i] == 0).collect();
    let mut head = 0;
    while let Some(&i) = result.get(head) {
        head += 1;
        for &j in &edges[i] {
            in_degree[j] -= 1;
            if in_degree[j] == 0 {
                result.push(j);
            }
        }
    }
    result.resize(n, 0);
    result
}

/// go-cty's `compareTypes`: `Less` when `a` is the more general type.
pub(crate) fn compare_types(a: &Type, b: &Type) -> Ordering {
    use Ordering::{Equal, Greater, Less};
    if *a == Type::Dynamic || *b == Type::Dynamic {
        return match (*a == Type::Dynamic, *b == Type::Dynamic) {
            (false, _) => Greater,
            (_, false) => Less,
            _ => Equal,
        };
    }
    if a.is_primitive() && b.is_primitive() && (*a == Type::String || *b == Type::String) {
        return match (*a == Type::String, *b == Type::String) {
            (false, _) => Greater,
            (_, false) => Less,
            _ => Equal,
        };
    }
    match (a, b) {
        (Type::List(x), Type::List(y))
        | (Type::Set(x), Type::Set(y))
        | (Type::Map(x), Type::Map(y)) => return compare_types(x, y),
        _ => {}
    }
    let swapped = matches!(
        (a, b),
        (Type::Tuple(_), Type::List(_))
            | (Type::Object(_), Type::Map(_))
            | (Type::Set(_), Type::Tuple(_))
            | (Type::Set(_), Type::List(_))
    );
    let (a, b) = if swapped { (b, a) } else { (a, b) };
    let oriented = |o: Ordering| if swapped { o.reverse() } else { o };

    if matches!(b, Type::Set(_)) && matches!(a, Type::Tuple(_) | Type::List(_)) {
        return oriented(Less);
    }
    if matches!(
        (a, b),
        (Type::List(_), Type::Tuple(_)) | (Type::Map(_), Type::Object(_))
    ) {
        return oriented(Less);
    }
    let pairs: Vec<(&Type, &Type)> = match (a, b) {
        (Type::Object(x), Type::Object(y)) => {
            if x.len() != y.len() {
                return Equal;
            }
            let mut pairs = Vec::with_capacity(x.len());
            for (k, tx) in x {
                let Some(ty) = y.get(k) else {
                    return Equal;
                };
                pairs.push((tx, ty));
            }
            pairs
        }
        (Type::Tuple(x), Type::Tuple(y)) => {
            if x.len() != y.len() {
                return Equal;
            }
            x.iter().zip(y).collect()
        }
        _ => return Equal,
    };
    let (mut a_super, mut b_super) = (false, false);
    for (x, y) in pairs {
        match compare_types(x, y) {
            Less => a_super = true,
            Greater => b_super = true,
            Equal => {}
        }
    }
    match (a_super, b_super) {
        (true, false) => oriented(Less),
        (false, true) => oriented(Greater),
        _ => Equal,
    }
}
