//! The expression evaluator: HCL semantics over [`crate::ast`] and
//! [`crate::value`], with names resolved lazily through an [`Env`].
//!
//! Owns: operators (via the stdlib functions, as hclsyntax does), templates,
//! traversals and splats, `for` expressions, function calls including user
//! functions and the special forms `try`, `can` and `convert`, and type
//! expressions. Must never: panic on any input (division by zero, deep
//! recursion and huge values are errors).

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::ast::*;
use crate::diag::Diags;
use crate::stdlib::{self, FuncError};
use crate::value::{Type, Value, convert, format_number};

/// A user-defined `function` block.
#[derive(Debug)]
pub struct UserFunc {
    pub name: String,
    pub params: Vec<String>,
    pub variadic: Option<String>,
    pub result: Expr,
}

/// Where names come from.
pub trait Env {
    /// A top-level name (variable, global attribute or built-in); `Ok(None)`
    /// when no such name exists.
    fn var(&mut self, name: &str, span: Span) -> Result<Option<Value>, Diags>;
    /// `target.<name>[.<attr>]` / `group.<name>[.<attr>]`; `Ok(None)` when the
    /// block does not exist.
    fn block(
        &mut self,
        kind: &str,
        name: &str,
        attr: Option<&str>,
        span: Span,
    ) -> Result<Option<Value>, Diags>;
    /// Whether `kind` names a block type that traversals resolve through [`Env::block`].
    fn is_block_kind(&self, kind: &str) -> bool;
    /// A user-defined function.
    fn function(&mut self, name: &str, span: Span) -> Result<Option<Rc<UserFunc>>, Diags>;
    /// The names [`Env::var`] knows, for "did you mean" hints.
    fn var_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// The user-defined functions' names, for "did you mean" hints.
    fn function_names(&self) -> Vec<String> {
        Vec::new()
    }
}

const MAX_DEPTH: usize = 200;

/// Evaluates expressions against an environment plus a stack of local names
/// (matrix values, `for` variables, function parameters).
pub struct Evaluator<'e> {
    pub env: &'e mut dyn Env,
    locals: Vec<(String, Value)>,
    depth: usize,
    /// Iterations done by `for` expressions and template `for` directives;
    /// bounded so nested loops cannot build billions of values.
    work: usize,
}

/// Bound on `for` iterations within one evaluation.
pub const MAX_ITERATIONS: usize = 2_000_000;

fn d(span: Span, summary: &str, detail: impl Into<String>) -> Diags {
    Diags::at(span, summary, detail)
}

impl<'e> Evaluator<'e> {
    pub fn new(env: &'e mut dyn Env) -> Self {
        Evaluator {
            env,
            locals: Vec::new(),
            depth: 0,
            work: 0,
        }
    }

    pub fn with_locals(env: &'e mut dyn Env, locals: Vec<(String, Value)>) -> Self {
        Evaluator {
            env,
            locals,
            depth: 0,
            work: 0,
        }
    }

    fn local(&self, name: &str) -> Option<&Value> {
        self.locals
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    pub fn eval(&mut self, e: &Expr) -> Result<Value, Diags> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.depth -= 1;
            return Err(d(
                e.span(),
                "Expression too deep",
                "The expression nests too deeply (or a function recurses) to evaluate.",
            ));
        }
        let r = self.eval_inner(e);
        self.depth -= 1;
        r
    }

    fn eval_inner(&mut self, e: &Expr) -> Result<Value, Diags> {
        match e {
            Expr::Null(_) => Ok(Value::null()),
            Expr::Bool(b, _) => Ok(Value::Bool(*b)),
            Expr::Number(n, _) => Ok(Value::Number(*n)),
            Expr::Str(s, _) => Ok(Value::String(s.to_string())),
            Expr::Template(parts, span) => self.template(parts, *span),
            Expr::Tuple(items, _) => {
                // Evaluate every element so that all unknown names are reported.
                let mut out = Vec::with_capacity(items.len());
                let mut errs = Vec::new();
                for i in items {
                    match self.eval(i) {
                        Ok(v) => out.push(v),
                        Err(e) => errs.extend(e.0),
                    }
                }
                if errs.is_empty() {
                    Ok(Value::Tuple(out))
                } else {
                    Err(Diags(errs))
                }
            }
            Expr::Object(items, _) => {
                let mut out = BTreeMap::new();
                let mut errs = Vec::new();
                for (k, v) in items {
                    let key = match k {
                        ObjKey::Ident(name, _) => name.to_string(),
                        ObjKey::Expr(ke) => {
                            let kv = self.eval(ke)?;
                            if kv.is_null() {
                                return Err(d(
                                    ke.span(),
                                    "Invalid object key",
                                    "Key expression result must not be null.",
                                ));
                            }
                            match convert(kv, &Type::String) {
                                Ok(Value::String(s)) => s,
                                _ => {
                                    return Err(d(
                                        ke.span(),
                                        "Incorrect key type",
                                        "Can't use this value as a key: string required.",
                                    ));
                                }
                            }
                        }
                    };
                    match self.eval(v) {
                        Ok(val) => {
                            out.insert(key, val);
                        }
                        Err(e) => errs.extend(e.0),
                    }
                }
                if errs.is_empty() {
                    Ok(Value::Object(out))
                } else {
                    Err(Diags(errs))
                }
            }
            Expr::Var(name, span) => self.var(name, *span),
            Expr::Call(c, span) => self.call(&c.name, &c.args, c.expand_final, *span),
            Expr::Traversal(t, span) => self.traversal(&t.root, &t.steps, *span),
            Expr::Cond(c, _) => self.conditional(&c.cond, &c.then, &c.otherwise),
            Expr::Unary { op, expr, span } => {
                let v = self.eval(expr)?;
                let f = match op {
                    UnaryOp::Neg => "negate",
                    UnaryOp::Not => "not",
                };
                self.operator(f, vec![v], &[expr.span()], *span)
            }
            Expr::Binary { op, lhs, rhs, span } => {
                let l = self.eval(lhs)?;
                let r = self.eval(rhs)?;
                let f = match op {
                    BinOp::Eq => "equal",
                    BinOp::NotEq => "notequal",
                    BinOp::Lt => "lessthan",
                    BinOp::LtEq => "lessthanorequalto",
                    BinOp::Gt => "greaterthan",
                    BinOp::GtEq => "greaterthanorequalto",
                    BinOp::Add => "add",
                    BinOp::Sub => "subtract",
                    BinOp::Mul => "multiply",
                    BinOp::Div => "divide",
                    BinOp::Mod => "modulo",
                    BinOp::And => "and",
                    BinOp::Or => "or",
                };
                self.operator(f, vec![l, r], &[lhs.span(), rhs.span()], *span)
            }
            Expr::For(fe) => self.for_expr(fe),
        }
    }

    /// HCL's `ConditionalExpr`: both arms are evaluated and their types
    /// unified with go-cty's `UnifyUnsafe` before the condition is looked
    /// at; the chosen arm is converted to the unified type (so a list arm
    /// next to a set arm becomes a set, and sorts). A literal `null` arm
    /// takes the other arm's type; an arm of unknown type (an arm that
    /// failed) leaves the result unconverted. Errors in the arm that is not
    /// chosen are dropped, as HCL drops its diagnostics.
    fn conditional(&mut self, cond: &Expr, then: &Expr, otherwise: &Expr) -> Result<Value, Diags> {
        let t = self.eval(then);
        let f = self.eval(otherwise);
        let ty_of = |r: &Result<Value, Diags>, e: &Expr| match r {
            Ok(v) => v.ty(),
            Err(_) => failed_type(e),
        };
        let (tt, ft) = (ty_of(&t, then), ty_of(&f, otherwise));
        let dyn_null = |r: &Result<Value, Diags>| matches!(r, Ok(Value::Null(Type::Dynamic)));
        // The conversion to apply to the true and to the false result.
        let (conv_t, conv_f) = if dyn_null(&t) {
            (Some(ft), None)
        } else if dyn_null(&f) {
            (None, Some(tt))
        } else if tt == Type::Dynamic || ft == Type::Dynamic {
            (None, None)
        } else {
            match crate::value::unify::unify(&[tt.clone(), ft.clone()]) {
                Some(u) => (
                    Some(u.clone()).filter(|u| *u != tt),
                    Some(u).filter(|u| *u != ft),
                ),
                None => {
                    return Err(d(
                        then.span().to(otherwise.span()),
                        "Inconsistent conditional result types",
                        format!(
                            "The true and false result expressions must have consistent types. {}.",
                            describe_conditional_mismatch(&tt, &ft)
                        ),
                    ));
                }
            }
        };
        let c = self.eval(cond)?;
        if c.is_null() {
            return Err(d(
                cond.span(),
                "Null condition",
                "The condition value is null. Conditions must either be true or false.",
            ));
        }
        let c = match convert(c, &Type::Bool) {
            Ok(Value::Bool(b)) => b,
            _ => {
                return Err(d(
                    cond.span(),
                    "Incorrect condition type",
                    "The condition expression must be of type bool.",
                ));
            }
        };
        let (result, conv, arm, which) = if c {
            (t, conv_t, then, "true")
        } else {
            (f, conv_f, otherwise, "false")
        };
        let v = result?;
        match conv {
            Some(ty) => convert(v, &ty).map_err(|m| {
                d(
                    arm.span(),
                    "Inconsistent conditional result types",
                    format!("The {which} result value has the wrong type: {m}."),
                )
            }),
            None => Ok(v),
        }
    }

    fn var(&mut self, name: &str, span: Span) -> Result<Value, Diags> {
        if let Some(v) = self.local(name) {
            return Ok(v.clone());
        }
        if self.env.is_block_kind(name) {
            return Err(d(
                span,
                "Invalid expression",
                format!("cannot access {name} as a variable"),
            ));
        }
        match self.env.var(name, span)? {
            Some(v) => Ok(v),
            None => {
                let known = self.env.var_names();
                let names = known
                    .iter()
                    .map(String::as_str)
                    .chain(self.locals.iter().map(|(n, _)| n.as_str()));
                let hint = crate::suggest::suggest(name, names)
                    .map(|s| format!(" Did you mean {s:?}?"))
                    .unwrap_or_default();
                Err(d(
                    span,
                    "Unknown variable",
                    format!("There is no variable named {name:?}.{hint}"),
                ))
            }
        }
    }

    fn operator(
        &mut self,
        f: &str,
        args: Vec<Value>,
        spans: &[Span],
        span: Span,
    ) -> Result<Value, Diags> {
        let Some(func) = stdlib::lookup(f) else {
            return Err(d(
                span,
                "Internal error",
                format!("operator function {f} is missing"),
            ));
        };
        stdlib::call(func, args).map_err(|e| match e {
            FuncError::Arg { index, msg } => {
                let side = if spans.len() == 1 {
                    "operand"
                } else if index == 0 {
                    "left operand"
                } else {
                    "right operand"
                };
                d(
                    spans.get(index).copied().unwrap_or(span),
                    "Invalid operand",
                    format!("Unsuitable value for {side}: {msg}."),
                )
            }
            FuncError::Arity { msg } | FuncError::Failed(msg) => d(
                span,
                "Operation failed",
                format!("Error during operation: {msg}."),
            ),
        })
    }

    fn template(&mut self, parts: &[TPart], span: Span) -> Result<Value, Diags> {
        if let [TPart::Interp(e)] = parts {
            return self.eval(e);
        }
        // Sized for the literal text and a short value per interpolation,
        // which covers most templates without growing.
        let guess = parts
            .iter()
            .map(|p| match p {
                TPart::Lit(s) => s.len(),
                _ => 16,
            })
            .sum();
        let mut out = String::with_capacity(guess);
        self.render_parts(parts, &mut out, span)?;
        Ok(Value::String(out))
    }

    fn render_parts(&mut self, parts: &[TPart], out: &mut String, span: Span) -> Result<(), Diags> {
        let mut errs = Vec::new();
        for p in parts {
            match p {
                TPart::Lit(s) => out.push_str(s),
                TPart::Interp(e) => match self.eval(e).and_then(|v| template_string(v, e.span())) {
                    Ok(s) => out.push_str(&s),
                    Err(e) => errs.extend(e.0),
                },
                TPart::If(dir) => {
                    let TIf {
                        cond,
                        then,
                        otherwise,
                        ..
                    } = &**dir;
                    let c = self.eval(cond)?;
                    let b = match convert(c, &Type::Bool) {
                        Ok(Value::Bool(b)) => b,
                        _ => {
                            return Err(d(
                                cond.span(),
                                "Invalid template if directive",
                                "The condition must be a bool.",
                            ));
                        }
                    };
                    self.render_parts(if b { then } else { otherwise }, out, span)?;
                }
                TPart::For(dir) => {
                    let TFor {
                        key_var,
                        val_var,
                        coll,
                        body,
                        ..
                    } = &**dir;
                    let c = self.eval(coll)?;
                    let items = iter_items(&c, coll.span())?;
                    self.charge(items.len().max(1), coll.span())?;
                    for (k, v) in items {
                        let n = self.locals.len();
                        if let Some(kv) = key_var {
                            self.locals.push((kv.to_string(), k));
                        }
                        self.locals.push((val_var.to_string(), v));
                        let r = self.render_parts(body, out, span);
                        self.locals.truncate(n);
                        r?;
                    }
                }
            }
            if out.len() > 64 << 20 {
                return Err(d(
                    span,
                    "Template too large",
                    "The template result exceeds 64 MiB.",
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(Diags(errs))
        }
    }

    fn call(
        &mut self,
        name: &str,
        args: &[Expr],
        expand_final: bool,
        span: Span,
    ) -> Result<Value, Diags> {
        match name {
            "try" => return self.call_try(args, span),
            "can" => {
                if args.len() != 1 {
                    return Err(d(
                        span,
                        "Invalid function call",
                        "Function \"can\" expects 1 argument.",
                    ));
                }
                return Ok(Value::Bool(self.eval(&args[0]).is_ok()));
            }
            "convert" => {
                if args.len() != 2 {
                    return Err(d(
                        span,
                        "Invalid function call",
                        "Function \"convert\" expects 2 arguments.",
                    ));
                }
                let v = self.eval(&args[0])?;
                let ty = type_expr(&args[1])?;
                return convert(v, &ty).map_err(|m| {
                    d(
                        args[0].span(),
                        "Invalid function argument",
                        format!("Invalid value for \"value\" parameter: {m}."),
                    )
                });
            }
            _ => {}
        }
        let mut vals = Vec::with_capacity(args.len());
        let mut spans = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let v = self.eval(a)?;
            if expand_final && i + 1 == args.len() {
                match v {
                    Value::List(_, items) | Value::Set(_, items) | Value::Tuple(items) => {
                        for it in items {
                            vals.push(it);
                            spans.push(a.span());
                        }
                    }
                    Value::Null(_) => {
                        return Err(d(
                            a.span(),
                            "Invalid expanding argument value",
                            "The expanding argument (indicated by ...) must not be null.",
                        ));
                    }
                    _ => {
                        return Err(d(
                            a.span(),
                            "Invalid expanding argument value",
                            "The expanding argument (indicated by ...) must be of a tuple, list, or set type.",
                        ));
                    }
                }
            } else {
                vals.push(v);
                spans.push(a.span());
            }
        }
        if let Some(uf) = self.env.function(name, span)? {
            return self.call_user(&uf, vals, span);
        }
        let Some(f) = stdlib::lookup(name) else {
            let own = self.env.function_names();
            let names = stdlib::names()
                .into_iter()
                .chain(own.iter().map(String::as_str));
            let hint = crate::suggest::suggest(name, names)
                .map(|s| format!(" Did you mean {s:?}?"))
                .unwrap_or_default();
            return Err(d(
                span,
                "Call to unknown function",
                format!("There is no function named {name:?}.{hint}"),
            ));
        };
        stdlib::call(f, vals).map_err(|e| match e {
            FuncError::Arg { index, msg } => d(
                spans.get(index).copied().unwrap_or(span),
                "Invalid function argument",
                format!(
                    "Invalid value for {:?} parameter: {msg}.",
                    stdlib::param_name(f, index)
                ),
            ),
            FuncError::Arity { msg } => {
                let summary = if msg.contains("Missing") {
                    "Not enough function arguments"
                } else {
                    "Too many function arguments"
                };
                d(span, summary, msg)
            }
            FuncError::Failed(msg) => d(
                span,
                "Error in function call",
                format!("Call to function {name:?} failed: {msg}."),
            ),
        })
    }

    fn call_try(&mut self, args: &[Expr], span: Span) -> Result<Value, Diags> {
        if args.is_empty() {
            return Err(d(
                span,
                "Not enough function arguments",
                "Function \"try\" expects at least one argument.",
            ));
        }
        let mut errs = Vec::new();
        for a in args {
            match self.eval(a) {
                Ok(v) => return Ok(v),
                Err(e) => errs.extend(e.0.into_iter().map(|x| x.message())),
            }
        }
        Err(d(
            span,
            "Error in function call",
            format!(
                "Call to function \"try\" failed: no expression succeeded:\n- {}\nAt least one expression must produce a successful result.",
                errs.join("\n- ")
            ),
        ))
    }

    fn call_user(&mut self, uf: &UserFunc, vals: Vec<Value>, span: Span) -> Result<Value, Diags> {
        let n = uf.params.len();
        if vals.len() < n {
            return Err(d(
                span,
                "Not enough function arguments",
                format!(
                    "Function {:?} expects {} argument(s). Missing value for {:?}.",
                    uf.name,
                    n,
                    uf.params[vals.len()]
                ),
            ));
        }
        if vals.len() > n && uf.variadic.is_none() {
            return Err(d(
                span,
                "Too many function arguments",
                format!("Function {:?} expects only {} argument(s).", uf.name, n),
            ));
        }
        let mut locals = Vec::new();
        let mut it = vals.into_iter();
        for p in &uf.params {
            locals.push((p.clone(), it.next().unwrap_or_else(Value::null)));
        }
        if let Some(vp) = &uf.variadic {
            let rest: Vec<Value> = it.collect();
            locals.push((vp.clone(), Value::Tuple(rest)));
        }
        // A user function sees the globals and its parameters, not the caller's locals.
        let saved = std::mem::replace(&mut self.locals, locals);
        let r = self.eval(&uf.result);
        self.locals = saved;
        // An error without a position points at the call.
        r.map_err(|mut e| {
            if e.0.len() == 1 && e.0[0].span.is_none() {
                e.0[0].span = Some(span);
            }
            e
        })
    }

    fn traversal(&mut self, root: &Expr, steps: &[Step], span: Span) -> Result<Value, Diags> {
        let mut steps = steps;
        let mut cur = match root {
            Expr::Var(name, vspan)
                if self.local(name).is_none() && self.env.is_block_kind(name) =>
            {
                let Some(Step::Attr(bname, bspan)) = steps.first() else {
                    return Err(d(
                        span,
                        "Invalid expression",
                        format!("cannot traverse {name} without attribute"),
                    ));
                };
                let attr = match steps.get(1) {
                    Some(Step::Attr(a, _)) => Some(a.as_str()),
                    _ => None,
                };
                let whole = vspan.to(*bspan);
                match self.env.block(name, bname, attr, whole)? {
                    Some(v) => {
                        steps = &steps[if attr.is_some() { 2 } else { 1 }..];
                        v
                    }
                    None => {
                        return Err(d(
                            whole,
                            "Unsupported attribute",
                            format!("This object does not have an attribute named {bname:?}."),
                        ));
                    }
                }
            }
            _ => self.eval(root)?,
        };
        let mut i = 0;
        while i < steps.len() {
            match &steps[i] {
                Step::Attr(name, sp) => cur = get_attr(cur, name, *sp)?,
                Step::Index(ke, sp) => {
                    let k = self.eval(ke)?;
                    cur = index(cur, k, *sp)?;
                }
                Step::AttrSplat(_) | Step::FullSplat(_) => {
                    let full = matches!(steps[i], Step::FullSplat(_));
                    let mut j = i + 1;
                    while j < steps.len() && (full || matches!(steps[j], Step::Attr(..))) {
                        j += 1;
                    }
                    let rest = &steps[i + 1..j];
                    let (items, was_list) = match cur {
                        Value::Null(_) => (Vec::new(), false),
                        Value::List(_, v) => (v, true),
                        Value::Set(_, v) => (v, true),
                        Value::Tuple(v) => (v, false),
                        other => (vec![other], false),
                    };
                    let mut out = Vec::with_capacity(items.len());
                    for it in items {
                        let mut v = it;
                        for s in rest {
                            v = match s {
                                Step::Attr(name, sp) => get_attr(v, name, *sp)?,
                                Step::Index(ke, sp) => {
                                    let k = self.eval(ke)?;
                                    index(v, k, *sp)?
                                }
                                _ => v,
                            };
                        }
                        out.push(v);
                    }
                    cur = if was_list {
                        Value::list(out.clone()).unwrap_or(Value::Tuple(out))
                    } else {
                        Value::Tuple(out)
                    };
                    i = j;
                    continue;
                }
            }
            i += 1;
        }
        Ok(cur)
    }

    /// Counts `n` loop iterations against [`MAX_ITERATIONS`].
    fn charge(&mut self, n: usize, span: Span) -> Result<(), Diags> {
        self.work = self.work.saturating_add(n);
        if self.work > MAX_ITERATIONS {
            return Err(d(
                span,
                "Expression too expensive",
                format!(
                    "'for' expressions here iterate more than {MAX_ITERATIONS} times in total."
                ),
            ));
        }
        Ok(())
    }

    fn for_expr(&mut self, fe: &ForExpr) -> Result<Value, Diags> {
        let c = self.eval(&fe.coll)?;
        let items = iter_items(&c, fe.coll.span())?;
        self.charge(items.len().max(1), fe.span)?;
        let n = self.locals.len();
        let mut tuple = Vec::new();
        let mut obj: BTreeMap<String, Value> = BTreeMap::new();
        let mut groups: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (k, v) in items {
            self.locals.truncate(n);
            if let Some(kv) = &fe.key_var {
                self.locals.push((kv.to_string(), k));
            }
            self.locals.push((fe.val_var.to_string(), v));
            if let Some(cond) = &fe.cond {
                let cv = self.eval(cond);
                let cv = match cv {
                    Ok(v) => v,
                    Err(e) => {
                        self.locals.truncate(n);
                        return Err(e);
                    }
                };
                match convert(cv, &Type::Bool) {
                    Ok(Value::Bool(true)) => {}
                    Ok(Value::Bool(false)) => continue,
                    _ => {
                        self.locals.truncate(n);
                        return Err(d(
                            cond.span(),
                            "Invalid 'for' condition",
                            "The 'if' clause value is invalid: bool required.",
                        ));
                    }
                }
            }
            let r = (|| -> Result<(), Diags> {
                match &fe.key_expr {
                    None => tuple.push(self.eval(&fe.val_expr)?),
                    Some(ke) => {
                        let kv = self.eval(ke)?;
                        let key = match convert(kv, &Type::String) {
                            Ok(Value::String(s)) => s,
                            _ => {
                                return Err(d(
                                    ke.span(),
                                    "Invalid object key",
                                    "Key expression in 'for' expression must be a string.",
                                ));
                            }
                        };
                        let val = self.eval(&fe.val_expr)?;
                        if fe.grouping {
                            groups.entry(key).or_default().push(val);
                        } else {
                            match obj.entry(key) {
                                std::collections::btree_map::Entry::Occupied(e) => {
                                    return Err(d(
                                        ke.span(),
                                        "Duplicate object key",
                                        format!(
                                            "Two different items produced the key {:?} in this 'for' expression. If duplicates are expected, use the ellipsis (...) after the value expression to enable grouping by key.",
                                            e.key()
                                        ),
                                    ));
                                }
                                std::collections::btree_map::Entry::Vacant(e) => {
                                    e.insert(val);
                                }
                            }
                        }
                    }
                }
                Ok(())
            })();
            if let Err(e) = r {
                self.locals.truncate(n);
                return Err(e);
            }
        }
        self.locals.truncate(n);
        Ok(match &fe.key_expr {
            None => Value::Tuple(tuple),
            Some(_) if fe.grouping => Value::Object(
                groups
                    .into_iter()
                    .map(|(k, v)| (k, Value::Tuple(v)))
                    .collect(),
            ),
            Some(_) => Value::Object(obj),
        })
    }
}

/// Converts an interpolated value to its string form in a template.
/// The type of the (unknown) value hclsyntax returns for an expression that
/// failed: templates still produce a string and operators their result
/// type; everything else is of unknown type.
fn failed_type(e: &Expr) -> Type {
    match e {
        Expr::Template(parts, _) => match &**parts {
            [TPart::Interp(inner)] => failed_type(inner),
            _ => Type::String,
        },
        Expr::Binary { op, .. } => match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => Type::Number,
            _ => Type::Bool,
        },
        Expr::Unary { op, .. } => match op {
            UnaryOp::Neg => Type::Number,
            UnaryOp::Not => Type::Bool,
        },
        _ => Type::Dynamic,
    }
}

/// hclsyntax's `describeConditionalTypeMismatch`.
fn describe_conditional_mismatch(t: &Type, f: &Type) -> String {
    match (t, f) {
        (Type::Object(ta), Type::Object(fa)) => {
            for (name, aty) in ta {
                match fa.get(name) {
                    None => {
                        return format!(
                            "The 'true' value includes object attribute {name:?}, which is absent in the 'false' value"
                        );
                    }
                    Some(faty) if faty != aty => {
                        return format!(
                            "Type mismatch for object attribute {name:?}: {}",
                            describe_conditional_mismatch(aty, faty)
                        );
                    }
                    _ => {}
                }
            }
            if let Some(name) = fa.keys().find(|k| !ta.contains_key(*k)) {
                return format!(
                    "The 'false' value includes object attribute {name:?}, which is absent in the 'true' value"
                );
            }
        }
        (Type::Tuple(te), Type::Tuple(fe)) => {
            if te.len() != fe.len() {
                return format!(
                    "The 'true' tuple has length {}, but the 'false' tuple has length {}",
                    te.len(),
                    fe.len()
                );
            }
            for (i, (a, b)) in te.iter().zip(fe).enumerate() {
                if a != b {
                    return format!(
                        "Type mismatch for tuple element {i}: {}",
                        describe_conditional_mismatch(a, b)
                    );
                }
            }
        }
        (Type::List(a), Type::List(b))
        | (Type::Set(a), Type::Set(b))
        | (Type::Map(a), Type::Map(b))
            if matches!(
                (&**a, &**b),
                (Type::Object(_), Type::Object(_)) | (Type::Tuple(_), Type::Tuple(_))
            ) =>
        {
            let noun = match t {
                Type::List(_) => "list",
                Type::Set(_) => "set",
                _ => "map",
            };
            return format!(
                "Mismatched {noun} element types: {}",
                describe_conditional_mismatch(a, b)
            );
        }
        _ => {}
    }
    let (tn, fname) = (t.friendly_name(), f.friendly_name());
    if tn == fname {
        return "At least one deeply-nested attribute or element is not compatible across both the 'true' and the 'false' value".into();
    }
    format!("The 'true' value is {tn}, but the 'false' value is {fname}")
}

fn template_string(v: Value, span: Span) -> Result<String, Diags> {
    match v {
        Value::Null(_) => Err(d(
            span,
            "Invalid template interpolation value",
            "The expression result is null. Cannot include a null value in a string template.",
        )),
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(format_number(n)),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(d(
            span,
            "Invalid template interpolation value",
            format!(
                "Cannot include the given value in a string template: string required, but have {}.",
                other.type_name()
            ),
        )),
    }
}

/// The (key, value) pairs a `for` iterates: index/element for sequences,
/// key/value for maps and objects.
fn iter_items(c: &Value, span: Span) -> Result<Vec<(Value, Value)>, Diags> {
    match c {
        Value::List(_, v) | Value::Tuple(v) => Ok(v
            .iter()
            .enumerate()
            .map(|(i, x)| (Value::Number(i as f64), x.clone()))
            .collect()),
        Value::Set(_, v) => Ok(v.iter().map(|x| (x.clone(), x.clone())).collect()),
        Value::Map(_, m) | Value::Object(m) => Ok(m
            .iter()
            .map(|(k, x)| (Value::string(k.clone()), x.clone()))
            .collect()),
        Value::Null(_) => Err(d(
            span,
            "Iteration over null value",
            "A null value cannot be used as the collection in a 'for' expression.",
        )),
        other => Err(d(
            span,
            "Iteration over non-iterable value",
            format!(
                "A value of type {} cannot be used as the collection in a 'for' expression.",
                other.type_name()
            ),
        )),
    }
}

pub fn get_attr(v: Value, name: &str, span: Span) -> Result<Value, Diags> {
    match v {
        Value::Object(mut m) | Value::Map(_, mut m) => m.remove(name).ok_or_else(|| {
            d(
                span,
                "Unsupported attribute",
                format!("This object does not have an attribute named {name:?}."),
            )
        }),
        Value::Null(_) => Err(d(
            span,
            "Attempt to get attribute from null value",
            "This value is null, so it does not have any attributes.",
        )),
        other => Err(d(
            span,
            "Unsupported attribute",
            format!(
                "Can't access attributes on a primitive-typed value ({}).",
                other.type_name()
            ),
        )),
    }
}

pub fn index(v: Value, k: Value, span: Span) -> Result<Value, Diags> {
    match v {
        Value::List(_, items) | Value::Tuple(items) => {
            let i = match convert(k, &Type::Number) {
                Ok(Value::Number(n)) if n.fract() == 0.0 => n,
                _ => {
                    return Err(d(
                        span,
                        "Invalid index",
                        "The given key does not identify an element in this collection value: a whole number is required.",
                    ));
                }
            };
            if i < 0.0 || i >= items.len() as f64 {
                return Err(d(
                    span,
                    "Invalid index",
                    "The given key does not identify an element in this collection value: the given index is greater than or equal to the length of the collection.",
                ));
            }
            Ok(items
                .into_iter()
                .nth(i as usize)
                .unwrap_or_else(Value::null))
        }
        Value::Map(_, mut m) | Value::Object(mut m) => {
            let key = match convert(k, &Type::String) {
                Ok(Value::String(s)) => s,
                _ => {
                    return Err(d(
                        span,
                        "Invalid index",
                        "The given key does not identify an element in this collection value: string required.",
                    ));
                }
            };
            m.remove(&key).ok_or_else(|| {
                d(
                    span,
                    "Invalid index",
                    "The given key does not identify an element in this collection value.",
                )
            })
        }
        Value::Set(..) => Err(d(
            span,
            "Invalid index",
            "Elements of a set are identified only by their value and don't have any separate index or key to select with, so it's only possible to perform operations across all elements of the set.",
        )),
        Value::Null(_) => Err(d(
            span,
            "Attempt to index null value",
            "This value is null, so it does not have any indices.",
        )),
        other => Err(d(
            span,
            "Invalid index",
            format!(
                "This value does not have any indices ({}).",
                other.type_name()
            ),
        )),
    }
}

/// Parses a type expression (`string`, `list(number)`, `object({a=string})`, ...).
pub fn type_expr(e: &Expr) -> Result<Type, Diags> {
    let bad = |span: Span, what: &str| {
        Diags::at(
            span,
            "Invalid type specification",
            format!(
                "{what} is not a valid type. Use string, number, bool, any, list(T), set(T), map(T), tuple([...]) or object({{...}})."
            ),
        )
    };
    match e {
        Expr::Var(name, span) => match name.as_str() {
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            "any" => Ok(Type::Dynamic),
            other => Err(bad(*span, &format!("{other:?}"))),
        },
        Expr::Template(_, span) | Expr::Str(_, span) if is_literal_text(e) => {
            // JSON syntax: a string holding a type expression.
            let text = match e {
                Expr::Str(s, _) => s.to_string(),
                _ => match e.template_text() {
                    Some(t) => t,
                    None => return Err(bad(*span, "this expression")),
                },
            };
            let parsed = crate::syntax::parse_expr(&text, span.file, span.start as usize)
                .map_err(|_| bad(*span, &format!("{text:?}")))?;
            if matches!(parsed, Expr::Str(..) | Expr::Template(..)) {
                return Err(bad(*span, &format!("{text:?}")));
            }
            type_expr(&parsed)
        }
        Expr::Call(c, span) => {
            let (name, args): (&Name, &[Expr]) = (&c.name, &c.args);
            let one = |args: &[Expr]| -> Result<Type, Diags> {
                match args {
                    [a] => type_expr(a),
                    _ => Err(Diags::at(
                        *span,
                        "Invalid type specification",
                        format!(
                            "The {name} type constructor requires one argument specifying the element type."
                        ),
                    )),
                }
            };
            match name.as_str() {
                "list" => Ok(Type::list(one(args)?)),
                "set" => Ok(Type::set(one(args)?)),
                "map" => Ok(Type::map(one(args)?)),
                "tuple" => match args {
                    [Expr::Tuple(items, _)] => Ok(Type::Tuple(
                        items.iter().map(type_expr).collect::<Result<_, _>>()?,
                    )),
                    _ => Err(Diags::at(
                        *span,
                        "Invalid type specification",
                        "The tuple type constructor requires a list of element types.",
                    )),
                },
                "object" => match args {
                    [Expr::Object(items, _)] => {
                        let mut m = BTreeMap::new();
                        for (k, v) in items {
                            let key = match k {
                                ObjKey::Ident(n, _) => n.to_string(),
                                ObjKey::Expr(Expr::Var(n, _)) => n.to_string(),
                                ObjKey::Expr(Expr::Str(s, _)) => s.to_string(),
                                ObjKey::Expr(other) => return Err(bad(other.span(), "this key")),
                            };
                            m.insert(key, type_expr(v)?);
                        }
                        Ok(Type::Object(m))
                    }
                    _ => Err(Diags::at(
                        *span,
                        "Invalid type specification",
                        "The object type constructor requires an object of attribute types.",
                    )),
                },
                other => Err(bad(*span, &format!("{other}(...)"))),
            }
        }
        other => Err(bad(other.span(), "this expression")),
    }
}

fn is_literal_text(e: &Expr) -> bool {
    match e {
        Expr::Str(..) => true,
        Expr::Template(parts, _) => parts.iter().all(|p| matches!(p, TPart::Lit(_))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment with a few globals and no blocks or user functions.
    struct TestEnv;

    impl Env for TestEnv {
        fn var(&mut self, name: &str, _span: Span) -> Result<Option<Value>, Diags> {
            Ok(match name {
                "s" => Some(Value::string("hi")),
                "n" => Some(Value::Number(3.0)),
                "nul" => Some(Value::null()),
                "l" => Some(Value::Tuple(vec![
                    Value::Object([("a".to_string(), Value::Number(1.0))].into()),
                    Value::Object([("a".to_string(), Value::Number(2.0))].into()),
                ])),
                _ => None,
            })
        }
        fn block(
            &mut self,
            _: &str,
            _: &str,
            _: Option<&str>,
            _: Span,
        ) -> Result<Option<Value>, Diags> {
            Ok(None)
        }
        fn is_block_kind(&self, kind: &str) -> bool {
            kind == "target"
        }
        fn function(&mut self, _: &str, _: Span) -> Result<Option<Rc<UserFunc>>, Diags> {
            Ok(None)
        }
    }

    fn ev(src: &str) -> Result<Value, String> {
        let e = crate::syntax::parse_expr(src, 0, 0).map_err(|d| d.0[0].message())?;
        let mut env = TestEnv;
        Evaluator::new(&mut env).eval(&e).map_err(|d| {
            d.0.iter()
                .map(crate::diag::Diag::message)
                .collect::<Vec<_>>()
                .join(" | ")
        })
    }

    fn json(src: &str) -> serde_json::Value {
        crate::value::to_json(&ev(src).unwrap())
    }

    #[test]
    fn templates() {
        assert_eq!(json(r#""${s}-${n}""#), "hi-3");
        assert_eq!(json(r#""${n}""#), 3, "a lone interpolation keeps its type");
        assert_eq!(json(r#""$${s}""#), "${s}", "dollar-dollar escapes");
        assert_eq!(json(r#""%{ if n > 2 }big%{ else }small%{ endif }""#), "big");
        assert_eq!(json(r#""%{ for x in [1, 2] }<${x}>%{ endfor }""#), "<1><2>");
        assert_eq!(json(r#""a ${~ s ~} b""#), "ahib");
        assert!(ev(r#""x${nul}""#).unwrap_err().contains("null value"));
        assert!(ev(r#""x${[1]}""#).unwrap_err().contains("string required"));
    }

    #[test]
    fn operators_and_errors() {
        assert_eq!(json("1 + 2 * 3"), 7);
        assert_eq!(json("n == 3 && !false"), true);
        assert!(
            ev("1 / 0").is_err(),
            "division by zero is an error, not a panic"
        );
        assert!(ev("\"a\" + 1").unwrap_err().contains("left operand"));
        assert!(
            ev("nope")
                .unwrap_err()
                .contains("There is no variable named \"nope\"")
        );
        assert!(ev("nul ? 1 : 2").unwrap_err().contains("null"));
        assert!(ev("\"x\" ? 1 : 2").unwrap_err().contains("bool"));
    }

    #[test]
    fn traversals_and_splats() {
        assert_eq!(json("l[*].a"), serde_json::json!([1, 2]));
        assert_eq!(json("l.*.a"), serde_json::json!([1, 2]));
        assert_eq!(json("l[1].a"), 2);
        assert_eq!(json("nul[*]"), serde_json::json!([]));
        assert!(ev("l[5]").unwrap_err().contains("Invalid index"));
        assert!(
            ev("l[0].b")
                .unwrap_err()
                .contains("does not have an attribute named \"b\"")
        );
        assert!(ev("nul.a").unwrap_err().contains("null"));
        assert!(ev("target").unwrap_err().contains("cannot access target"));
    }

    #[test]
    fn for_expressions() {
        assert_eq!(
            json("[for x in [1, 2, 3] : x * 2 if x > 1]"),
            serde_json::json!([4, 6])
        );
        assert_eq!(
            json("{for k, v in {a = 1, b = 2} : v => k}"),
            serde_json::json!({"1": "a", "2": "b"})
        );
        assert_eq!(
            json("{for x in [\"a\", \"a\"] : x => 1...}"),
            serde_json::json!({"a": [1, 1]})
        );
        assert!(
            ev("{for x in [\"a\", \"a\"] : x => 1}")
                .unwrap_err()
                .contains("Duplicate object key")
        );
        assert!(
            ev("[for x in 3 : x]")
                .unwrap_err()
                .contains("cannot be used as the collection")
        );
        assert!(ev("[for x in [1] : x if 1]").unwrap_err().contains("bool"));
    }

    #[test]
    fn special_functions() {
        assert_eq!(json("try(nope, \"fallback\")"), "fallback");
        assert!(
            ev("try(nope, also_nope)")
                .unwrap_err()
                .contains("no expression succeeded")
        );
        assert_eq!(json("can(nope)"), false);
        assert_eq!(json("can(s)"), true);
        assert_eq!(json("convert(\"5\", number)"), 5);
        assert_eq!(
            crate::value::to_json(&ev("convert([1, \"a\"], list(string))").unwrap()),
            serde_json::json!(["1", "a"])
        );
        assert!(ev("convert(\"x\", number)").unwrap_err().contains("number"));
        assert!(
            ev("convert(1, strin)")
                .unwrap_err()
                .contains("not a valid type")
        );
        assert!(
            ev("nosuch(1)")
                .unwrap_err()
                .contains("There is no function named \"nosuch\"")
        );
        assert_eq!(json("concat([[1], [2]]...)"), serde_json::json!([1, 2]));
        assert!(
            ev("concat([1], 2...)")
                .unwrap_err()
                .contains("expanding argument")
        );
    }

    #[test]
    fn type_expressions() {
        let t = |s: &str| type_expr(&crate::syntax::parse_expr(s, 0, 0).unwrap());
        assert_eq!(t("list(string)").unwrap(), Type::list(Type::String));
        assert_eq!(t("map(number)").unwrap(), Type::map(Type::Number));
        assert_eq!(
            t("tuple([bool, any])").unwrap(),
            Type::Tuple(vec![Type::Bool, Type::Dynamic])
        );
        assert!(matches!(
            t("object({a = string})").unwrap(),
            Type::Object(_)
        ));
        assert!(t("boolean").is_err());
        assert!(t("list(string, number)").is_err());
        assert!(
            t("\"string\"").is_ok(),
            "JSON syntax writes types as strings"
        );
    }

    #[test]
    fn conditional_unifies_arm_types_like_hcl() {
        let ty = |src: &str| ev(src).unwrap().ty();
        // A tuple arm next to a set arm becomes a set (sorted, unique), as
        // go-cty's UnifyUnsafe makes it; the arm that is not taken counts.
        assert_eq!(
            json(r#"false ? setsubtract(["x"], []) : ["b", "a", "b"]"#),
            serde_json::json!(["a", "b"])
        );
        assert_eq!(
            ty(r#"false ? setsubtract(["x"], []) : ["b", "a"]"#),
            Type::set(Type::String)
        );
        // list and set: the list is preferred, the set converts to it.
        assert_eq!(
            ty(r#"false ? sort(["a"]) : setunion(["b"])"#),
            Type::list(Type::String)
        );
        // Tuples of different lengths unify to a list, elements to string.
        assert_eq!(json(r#"true ? [1] : ["a", "b"]"#), serde_json::json!(["1"]));
        assert_eq!(ty(r#"true ? [1] : ["a", "b"]"#), Type::list(Type::String));
        // Primitives: string wins.
        assert_eq!(json(r#"true ? 1 : "x""#), "1");
        // Objects with different attributes unify to a map.
        assert_eq!(
            json(r#"true ? { a = 1 } : { b = "x" }"#),
            serde_json::json!({"a": "1"})
        );
        assert_eq!(
            ty(r#"true ? { a = 1 } : { b = "x" }"#),
            Type::map(Type::String)
        );
        // A literal null arm takes the other arm's type.
        let v = ev(r#"true ? null : ["a"]"#).unwrap();
        assert!(v.is_null());
        assert_eq!(v.ty(), Type::Tuple(vec![Type::String]));
        assert_eq!(json(r#"false ? null : ["a"]"#), serde_json::json!(["a"]));
        // Types that do not unify are an error, whatever the condition.
        let e = ev(r#"false ? "a" : ["b"]"#).unwrap_err();
        assert!(e.contains("Inconsistent conditional result types"), "{e}");
        assert!(
            e.contains("The 'true' value is string, but the 'false' value is tuple"),
            "{e}"
        );
        let e = ev(r#"true ? { a = "x" } : { b = ["y"] }"#).unwrap_err();
        assert!(e.contains("Inconsistent conditional result types"), "{e}");
        assert!(e.contains("object attribute \"a\""), "{e}");
        assert!(
            ev("true ? true : 1").is_err(),
            "bool and number do not unify"
        );
        // Errors in the arm that is not taken are dropped; an arm that failed
        // has an unknown type and does not constrain the other.
        assert_eq!(json(r#"false ? nope : ["x"]"#), serde_json::json!(["x"]));
        assert!(ev(r#"true ? nope : ["x"]"#).unwrap_err().contains("nope"));
        // A failed template is still a string: it does not unify with a tuple.
        assert!(
            ev(r#"false ? "${nope}-x" : ["x"]"#)
                .unwrap_err()
                .contains("Inconsistent conditional result types")
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!("{}1{}", "(".repeat(150), ")".repeat(150));
        let _ = ev(&src);
    }
}
