//! Arrays of tuples in main's input, converted at the wrapper (issue 12). The paper's wrapper (§6.5,
//! Fig. 21) takes one array of reals per input and gives back one cotangent array per input; an array
//! of tuples of a first-order program is the tuple of its component arrays (structure of arrays, as
//! soa.rs does inside the program). So the conversion sits at the boundary, outside what is
//! differentiated:
//! - bot's main keeps the user's input type and starts with one `let c = soaGet path x` per component
//!   array of an input `x` (tuples.rs), above the core term bot rewrites;
//! - dual-arrays' wrapper takes those lets as its inputs (each component array its own `Input k`) and
//!   gives the input's gradient back as `soaZip d (g1, …, gn)` of the components' gradients, so the
//!   gradient program of every later stage takes and gives the user's shapes.
//!
//! `soaGet path x`: through x's arrays to its tuples, the component `path[0]`, then through that
//! component's arrays to its tuples, `path[1]`, and so on (an `[(R, [(R, R)])]` has components at
//! `[0]`, `[1, 0]` and `[1, 1]`). `soaZip d (a1, …, an)`: the depth-d array of n-tuples whose
//! component k is `ak` (its inverse on one level of tuples). Both only move values.
//!
//! Arrays of tuples in main's output (and tuples nested in its tuple, `flat_output`) are the mirror: the core main returns the output's leaves as
//! one flat tuple, bot's main ends with `let (y1, …, yn) = core in` the user's shape made of them
//! (`output`), and the wrapper seeds the reverse pass with the seed's leaves (`soaGet path seed`).

use super::lang::spine;
use crate::build::*;
use crate::diag::Span;
use crate::interp::{Builtin, RunError};
use crate::ir::*;
use crate::value::Value;

pub const GET: &str = "soaGet";
pub const ZIP: &str = "soaZip";

/// `soaGet path x`.
pub fn get(path: &[i64], x: Expr) -> Expr {
    apps(builtin(GET), [Expr::gen(ExprKind::Array(path.iter().map(|k| int(*k)).collect())), x])
}

/// A `let c = soaGet path x` right-hand side taken apart: (path, x).
pub fn parse_get(rhs: &Expr) -> Option<(Vec<i64>, &Expr)> {
    let (GET, args) = spine(rhs)? else { return None };
    let [p, x] = args.as_slice() else { return None };
    let ExprKind::Array(ks) = &p.kind else { return None };
    let path = ks.iter().map(|k| if let ExprKind::Int(k) = k.kind { Some(k) } else { None }).collect::<Option<Vec<_>>>()?;
    Some((path, x))
}

/// One `let c = soaGet path x` at the top of a body: the component `c`, its path, the input `x`, and
/// the right-hand side.
pub struct Get<'e> {
    pub name: &'e Name,
    pub path: Vec<i64>,
    pub input: &'e Name,
    pub rhs: &'e Expr,
}

/// The `let c = soaGet path x` lets that start `e` (main's boundary, or the wrapper's), and the rest.
pub fn leading_gets(mut e: &Expr) -> (Vec<Get<'_>>, &Expr) {
    let mut out = vec![];
    while let ExprKind::Let(pat_rhs_rest) = &e.kind {
        let (pat, rhs_rest) = &**pat_rhs_rest;
        let (rhs, rest) = rhs_rest;
        let Pat::Var(name, _) = pat else { break };
        let Some((path, ExprKind::Var(input))) = parse_get(rhs).map(|(p, x)| (p, &x.kind)) else { break };
        out.push(Get { name, path, input, rhs });
        e = rest;
    }
    (out, e)
}

/// `t` without its outer arrays, and how many there were.
fn strip(t: &Type) -> (&Type, usize) {
    let (mut t, mut d) = (t, 0);
    while let Some(e) = t.as_array() {
        t = e;
        d += 1;
    }
    (t, d)
}

fn nest(t: Type, d: usize) -> Type {
    (0..d).fold(t, |t, _| Type::array(t))
}

/// The component arrays of an input of type `t` (an array whose elements hold tuples): each one's
/// path and type, left to right.
pub fn components(t: &Type) -> Vec<(Vec<i64>, Type)> {
    split(t, false)
}

/// The value of type `t` made of its component arrays: `soaZip` nested as the type's tuples are,
/// each component given by `leaf(path)`.
pub fn zip(t: &Type, leaf: &mut impl FnMut(&[i64]) -> Expr) -> Expr {
    join(t, false, leaf)
}

/// The leaves of main's output type `t` where it holds arrays of tuples (issue 12): each one's
/// path, through its tuples and then through its arrays' tuples as `components` goes, and type,
/// left to right. The core main returns them as one flat tuple (symbolic.rs takes a tuple of
/// Deltas, one per output component); `soaGet path seed` reads each one's part of the seed.
pub fn leaves(t: &Type) -> Vec<(Vec<i64>, Type)> {
    split(t, true)
}

/// The output value of type `t` made of its leaves (the inverse of `leaves`): a tuple where `t`
/// has one, `soaZip` under arrays.
pub fn assemble(t: &Type, leaf: &mut impl FnMut(&[i64]) -> Expr) -> Expr {
    join(t, true, leaf)
}

/// Whether main's output of type `t` is returned by the core as one flat tuple of its leaves and
/// put back into the user's shape after bot (`output`): when it holds arrays of tuples (soa.rs), or
/// tuples nested in its tuple (`((sum xs, length xs), 1.0)`): §6.5's wrapper and the symbolic reverse
/// pass (§7.2) seed one Delta per output component, and a component that is itself a tuple has no
/// Delta, so each leaf is a component of its own and the seed is read leaf by leaf (`soaGet path seed`).
pub fn flat_output(t: &Type) -> bool {
    super::soa::soa(t) || matches!(t, Type::Tuple(ts) if ts.iter().any(|c| matches!(c, Type::Tuple(_))))
}

/// `components` (only tuples under arrays are taken apart) or `leaves` (`outer`: tuples outside
/// arrays too).
fn split(t: &Type, outer: bool) -> Vec<(Vec<i64>, Type)> {
    let mut out = vec![];
    // (the nesting of tuples inside arrays is the type's, which the parser bounds)
    fn go(t: &Type, outer: bool, path: &mut Vec<i64>, out: &mut Vec<(Vec<i64>, Type)>) {
        match strip(t) {
            (Type::Tuple(ts), d) if outer || d > 0 => {
                for (k, c) in ts.iter().enumerate() {
                    path.push(k as i64);
                    go(&nest(c.clone(), d), outer, path, out);
                    path.pop();
                }
            }
            _ => out.push((path.clone(), t.clone())),
        }
    }
    go(t, outer, &mut vec![], &mut out);
    out
}

/// The inverse of `split`: a tuple outside arrays (`outer`), `soaZip` under them.
fn join(t: &Type, outer: bool, leaf: &mut impl FnMut(&[i64]) -> Expr) -> Expr {
    fn go(t: &Type, outer: bool, path: &mut Vec<i64>, leaf: &mut impl FnMut(&[i64]) -> Expr) -> Expr {
        match strip(t) {
            (Type::Tuple(ts), d) if outer || d > 0 => {
                let parts = ts
                    .iter()
                    .enumerate()
                    .map(|(k, c)| {
                        path.push(k as i64);
                        let e = go(&nest(c.clone(), d), outer, path, leaf);
                        path.pop();
                        e
                    })
                    .collect();
                if d == 0 {
                    tuple(parts)
                } else {
                    apps(builtin(ZIP), [int(d as i64), tuple(parts)])
                }
            }
            _ => leaf(path),
        }
    }
    go(t, outer, &mut vec![], leaf)
}

/// main's output of type `t` given back in the user's shape from the core's flat tuple of leaves:
/// `let (y1, …, yn) = core in assemble t` (bot's main ends so, and dual-arrays' wrapper reuses it
/// for the primal).
pub fn output(t: &Type, core: Expr, fresh: &mut Fresh) -> Expr {
    let paths: Vec<Vec<i64>> = leaves(t).into_iter().map(|(p, _)| p).collect();
    let ys: Vec<Name> = paths.iter().map(|_| fresh.name("y")).collect();
    let body = assemble(t, &mut |p| paths.iter().position(|q| q == p).map_or_else(unit, |k| var(&ys[k])));
    let_(ptuple(ys.iter().map(pvar).collect()), core, body)
}

/// The end of main's body written by `output`: the core term and the conversion after it.
pub fn parse_output(e: &Expr) -> Option<(&Expr, &Expr)> {
    let ExprKind::Let(pat_core_conv) = &e.kind else { return None };
    let (pat, core_conv) = &**pat_core_conv;
    let (core, conv) = core_conv;
    let Pat::Tuple(..) = pat else { return None };
    Some((core, conv))
}

fn err(span: Span, m: String) -> RunError {
    RunError::runtime(span, m)
}

/// `soaGet`'s value: arrays mapped over until a tuple, whose component the path's next index picks.
fn get_value(v: &Value, path: &[i64], span: Span) -> Result<Value, RunError> {
    let Some((&k, rest)) = path.split_first() else { return Ok(v.clone()) };
    match v {
        Value::Array(xs) => Ok(Value::Array(xs.iter().map(|x| get_value(x, path, span)).collect::<Result<Vec<_>, _>>()?.into())),
        Value::Tuple(cs) => match cs.get(k as usize) {
            Some(c) => get_value(c, rest, span),
            None => Err(err(span, format!("soaGet: no component {k} in {v}"))),
        },
        _ => match v.empty_elem() {
            Some(e) => Ok(Value::empty_keeping(get_value(e, path, span)?)),
            None if v.elems().is_some() => Ok(v.clone()),
            None => Err(err(span, format!("soaGet: {v} is not an array of tuples"))),
        },
    }
}

/// `soaZip`'s value: d levels of arrays walked in step, the elements at depth d made one tuple.
fn zip_value(d: i64, parts: &[Value], span: Span) -> Result<Value, RunError> {
    if d == 0 {
        return Ok(Value::tuple(parts.to_vec()));
    }
    let n = parts.iter().map(|p| p.elems().map(|xs| xs.len())).min().flatten().unwrap_or(0);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let row: Vec<Value> = parts.iter().map(|p| p.elems().map(|xs| xs[i].clone()).unwrap_or(Value::Unit)).collect();
        out.push(zip_value(d - 1, &row, span)?);
    }
    Ok(Value::Array(out.into()))
}

/// The two conversions, typed `[Int] → a → b` and `Int → a → b`: only the generated boundary calls
/// them, and the stated types of main and of the wrapper fix a and b there.
pub fn builtins() -> Vec<Builtin> {
    let (a, b) = (Type::Var(0), Type::Var(1));
    vec![
        Builtin {
            name: GET,
            scheme: Scheme { vars: vec![0, 1], ty: Type::fun(Type::array(Type::Int), Type::fun(a.clone(), b.clone())) },
            arity: 2,
            lazy_last: false,
            run: |_, x, s| {
                let path = x[0].elems().unwrap_or(&[]).iter().map(|k| k.as_int().unwrap_or(-1)).collect::<Vec<_>>();
                get_value(&x[1], &path, s)
            },
        },
        Builtin {
            name: ZIP,
            scheme: Scheme { vars: vec![0, 1], ty: Type::fun(Type::Int, Type::fun(a, b)) },
            arity: 2,
            lazy_last: false,
            run: |_, x, s| {
                let d = x[0].as_int().unwrap_or(0);
                match &x[1] {
                    Value::Tuple(ps) => zip_value(d, ps, s),
                    v => Err(err(s, format!("soaZip: {v} is not a tuple of arrays"))),
                }
            },
        },
    ]
}
