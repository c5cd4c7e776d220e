//! The core language's operations (§3.3) as the chain's runtime builtins, over the language's nested
//! arrays. All are total (§5.2 "never crash", notes §8.1): an index or gather out of range gives a
//! zero shaped like an element, a scatter drops an entry out of range. They are generic in the
//! element (they only move and add values), so forward mode runs them on dual numbers as they are.
//!
//! The zero of unknown shape. The paper's arrays carry their shape in their type (§3.2: `Array sh ρ`,
//! shapes static, "there are no jagged arrays"), so every zero it makes (a `sumOuter` of a 0×k array,
//! an index or gather out of range, Fig. 17's zero cotangents) has a known shape. This language's
//! arrays carry none in their values: a source literal's or input's `[]` does not say what its
//! elements would be (`Value::empty_keeping` keeps it only where the runtime made the empty array
//! from an element), and these builtins are polymorphic, given values, not types. A zero made from
//! such an array is therefore `[]`, a scalar `0.0`, or the program's scalar zero (`ScalarZero`), and
//! the operations that meet it where another shape is meant read it as the zero of that shape:
//! `cond` as false, `add` as nothing added, `scale_by` as a zero, `index` and `sumOuter` as
//! themselves (delta.rs's `eval` and gradient.rs's `restore_empty_dimensions` likewise). Each of
//! these cases is met by the tests (arrays_core, part_c_takes: counted in session 27, all but
//! `add`'s empty-keeping-beside-a-scalar case). To give every such zero its shape where it is made,
//! the lowering would pass the static shape of the term (its type and the `length` terms bot
//! already builds, §5's shape terms) to `sumOuter`, `index`, `gather` and `scatter` as an element
//! template; until then these cases stay.

use super::lang::{gather_name, scatter_name, spine, MAX_DIMS};
use crate::diag::Span;
use crate::interp::{Builtin, Each, Machine, RunError};
use crate::ir::{each_child, Expr, ExprKind, Program, Scheme, Type};
use crate::value::Value;
use std::rc::Rc;

type Res = Result<Value, RunError>;

fn err(span: Span, m: impl Into<String>) -> RunError {
    RunError::runtime(span, m)
}

/// A zero shaped like `v` (reals 0, integers 0, booleans false).
pub fn zero_like(v: &Value) -> Value {
    match v {
        Value::Real(_) => Value::Real(0.0),
        Value::Int(_) => Value::Int(0),
        Value::Bool(_) => Value::Bool(false),
        Value::Tuple(vs) => Value::Tuple(vs.iter().map(zero_like).collect()),
        Value::Array(vs) => Value::Array(vs.iter().map(zero_like).collect()),
        _ => match v.empty_elem() {
            Some(e) => Value::empty_keeping(zero_like(e)),
            None => v.clone(),
        },
    }
}

/// `u + v`, elementwise through arrays and tuples of the same shape.
pub fn add(u: &Value, v: &Value, span: Span) -> Res {
    Ok(match (u, v) {
        (Value::Real(a), Value::Real(b)) => Value::Real(a + b),
        (Value::Int(a), Value::Int(b)) => Value::Int(a.wrapping_add(*b)),
        (Value::Tuple(a), Value::Tuple(b)) if a.len() == b.len() => Value::Tuple(a.iter().zip(b.iter()).map(|(x, y)| add(x, y, span)).collect::<Result<Vec<_>, _>>()?.into()),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => Value::Array(a.iter().zip(b.iter()).map(|(x, y)| add(x, y, span)).collect::<Result<Vec<_>, _>>()?.into()),
        // empty arrays, one of them keeping its elements' shape: that one
        _ if u.elems().is_some_and(|x| x.is_empty()) && v.elems().is_some_and(|x| x.is_empty()) => if u.empty_elem().is_some() { u.clone() } else { v.clone() },
        // An empty array where another shape is meant is the zero that lost its inner dimension
        // (`sumOuter` of a 0×k array is `[]`, not k zeros: gradient.rs, restore_empty_dimensions);
        // adding it adds nothing. (A property-test case: `build 0 (\i -> h)` in the output.)
        (Value::Array(a), w) | (w, Value::Array(a)) if a.is_empty() => w.clone(),
        // (likewise an empty array that keeps its element: a sum of no rows whose elements were
        // scalars, `sum (map f (shift1R [x]))` replicated in a map, a property-test case)
        (e, w) | (w, e) if e.empty_elem().is_some() && w.elems().is_none() => w.clone(),
        // (and a scalar zero where an array is meant: `sumOuter` of a 0×k cotangent whose k an
        // empty value did not carry gives the scalar zero, as `index` reads it (a fold's free array
        // variable in a map over no rows: its vjp part `sumOuter ct`, wide-run seeds 1332 and 2417)
        (Value::Real(z), w) | (w, Value::Real(z)) if *z == 0.0 && w.elems().is_some() => w.clone(),
        _ => return Err(err(span, format!("cannot add {u} and {v}: shapes differ"))),
    })
}

fn arr(v: &Value, what: &str, span: Span) -> Result<Rc<[Value]>, RunError> {
    match v {
        Value::Array(xs) => Ok(xs.clone()),
        _ if v.empty_elem().is_some() => Ok(Rc::from(Vec::new())),
        _ => Err(err(span, format!("{what} expects an array, got {v}"))),
    }
}

fn int(v: &Value, what: &str, span: Span) -> Result<i64, RunError> {
    v.as_int().ok_or_else(|| err(span, format!("{what} expects an integer, got {v}")))
}

/// `index a u`, total: out of range gives a zero shaped like an element. An empty array has no element
/// to shape it: it gives `[]`, the runtime's zero of unknown shape (`add` absorbs it, `length` reads 0).
/// That is what bot's shape terms need: `length (index xs 0)`, the length of `xs`'s rows read at row 0
/// (rule l0), must be 0 rather than fail when `xs` is empty, since nested arrays lose the inner sizes
/// of an empty array (the paper's shapes are static); a real read out of an empty array only occurs in
/// such shape terms, as the source's own `!` out of range is an error.
///
/// Likewise a scalar zero indexes to itself: the reverse pass's zero for rows whose shape an empty
/// cotangent did not carry (the transpose of a gather out of a literal matrix into an empty output:
/// `shift1L [[h, x]]`, a property-test case) is `0.0`, and the literal's transpose indexes it.
pub fn index(a: &Value, u: i64, span: Span) -> Res {
    if matches!(a, Value::Real(r) if *r == 0.0) {
        return Ok(a.clone());
    }
    // out of an empty array that keeps its shape: a zero element of that shape
    if let Some(e) = a.empty_elem() {
        return Ok(zero_like(e));
    }
    let xs = arr(a, "index", span)?;
    Ok(match usize::try_from(u).ok().and_then(|k| xs.get(k)) {
        Some(x) => x.clone(),
        None => xs.first().map(zero_like).unwrap_or_else(|| Value::Array(Rc::from(Vec::new()))),
    })
}

/// The sizes of an m-dimensional `gather`/`scatter`: an Int, or a tuple of Ints.
fn sizes(v: &Value, m: usize, span: Span) -> Result<Vec<usize>, RunError> {
    let vs: Vec<Value> = match v {
        Value::Tuple(vs) if vs.len() == m => vs.to_vec(),
        v if m == 1 => vec![v.clone()],
        _ => return Err(err(span, format!("expected {m} sizes, got {v}"))),
    };
    vs.iter().map(|s| int(s, "a size", span).map(|k| k.max(0) as usize)).collect()
}

/// Every index of an array of `shape`, row-major, as the value an index function takes.
/// Calls `each` on every position of `shape` in row-major order (how many: the shape's product), the
/// position stepped in one buffer: a vector per position was most of a gather's allocations.
fn each_position(shape: &[usize], mut each: impl FnMut(&[i64]) -> Result<(), RunError>) -> Result<(), RunError> {
    let total: usize = shape.iter().product();
    let mut ix = vec![0i64; shape.len()];
    for l in 0..total {
        if l > 0 {
            // the next position: the last index up by one, carrying into the ones before
            for d in (0..shape.len()).rev() {
                ix[d] += 1;
                if (ix[d] as usize) < shape[d] {
                    break;
                }
                ix[d] = 0;
            }
        }
        each(&ix)?;
    }
    Ok(())
}


/// Row-major flat elements back into nested arrays of `shape`. An empty dimension keeps the shape
/// of what is inside it (`Value::empty_keeping`), from `zero`, the element below `shape`: `[4, 0]` is
/// four empty rows, `[0, 4]` an empty array of 4-vectors.
fn nest(flat: Vec<Value>, shape: &[usize], zero: Option<Value>) -> Value {
    let mut level = flat;
    // the element at the current level, as a shape (only needed when a dimension is empty; unknown
    // below an input's `[]`, which gives the plain `[]`)
    let mut tmpl = if shape.contains(&0) { zero } else { None };
    for d in (0..shape.len()).rev() {
        let k = shape[d];
        let groups: usize = shape[..d].iter().product();
        level = if k == 0 {
            let e = tmpl.clone().map_or_else(|| Value::Array(Rc::from(vec![])), Value::empty_keeping);
            vec![e; groups]
        } else {
            // the elements moved into their rows, not copied and dropped (issue 13)
            let mut it = level.into_iter();
            (0..groups).map(|_| Value::Array(it.by_ref().take(k).collect())).collect()
        };
        tmpl = tmpl.map(|t| if k == 0 { Value::empty_keeping(t) } else { Value::Array(vec![t; k].into()) });
    }
    level.into_iter().next().unwrap_or(Value::Array(Rc::from(vec![])))
}

/// The index function `f` at `ix`: its `n` indexes into `out`.
/// `f` is found out once per gather or scatter (`Machine::each`), not per element (issue 13).
fn call_ix(m: &mut Machine, f: &Each<'_>, ix: &[i64], n: usize, span: Span, out: &mut Vec<i64>) -> Result<(), RunError> {
    // (`λi → [i]`'s indexes come straight into `out`)
    let Some(r) = m.apply_ix(f, ix, n, out)? else { return Ok(()) };
    let is = match r.elems() {
        Some(is) => is,
        None => return Err(err(span, format!("an index function's result expects an array, got {r}"))),
    };
    if is.len() != n {
        return Err(err(span, format!("an index function returned {} indexes, not {n}", is.len())));
    }
    out.clear();
    for v in is.iter() {
        out.push(int(v, "an index", span)?);
    }
    Ok(())
}

/// The shape of the first `d` dimensions of `v` (read along its first elements).
fn outer_shape(v: &Value, d: usize) -> Vec<usize> {
    let mut out = vec![];
    let mut cur = v.clone();
    for _ in 0..d {
        match cur {
            Value::Array(xs) => {
                out.push(xs.len());
                cur = xs.first().cloned().unwrap_or(Value::Real(0.0));
            }
            _ => {
                out.push(0);
                if let Some(e) = cur.empty_elem() {
                    cur = e.clone();
                }
            }
        }
    }
    out
}

/// The element of `v` at `ix`, total; None when out of range.
fn at<'v>(v: &'v Value, ix: &[i64]) -> Option<&'v Value> {
    let mut cur = v;
    for &i in ix {
        cur = usize::try_from(i).ok().and_then(|k| cur.elems()?.get(k))?;
    }
    Some(cur)
}

/// A zero element of `v` below its first `d` dimensions, when `v` knows it. An empty array that
/// does not keep its elements' shape (an input's or a literal's `[]`: the source language's arrays
/// carry none) in the last of the d dimensions has scalars below it: the program's scalar zero
/// (`ScalarZero`); anywhere above, what is below is not known.
fn template(m: &mut Machine, v: &Value, d: usize, span: Span) -> Result<Option<Value>, RunError> {
    let mut cur = v.clone();
    for k in 0..d {
        cur = match cur {
            Value::Array(xs) => match xs.first() {
                Some(x) => x.clone(),
                None if k + 1 == d => return scalar_zero(m, span).map(Some),
                None => return Ok(None),
            },
            other => match other.empty_elem() {
                Some(e) => e.clone(),
                None => return Ok(None),
            },
        };
    }
    Ok(Some(zero_like(&cur)))
}

/// The zero of the scalars a program's arrays hold, from its `main`'s type: the element type of
/// the first array in main's input (a real's 0.0; a dual number's (0.0, 0.0) when forward mode
/// runs the program on dual numbers). Static types say what an empty array's elements are, which
/// its value cannot; a program without one gets 0.0. bot's output can be generic in its element
/// type (`sumOuter (tr … m)` does no arithmetic), so when main's own type leaves the element open it
/// is read from the type main is used at (forward mode's wrapper applies it to dual numbers).
/// Still needed after `Value::empty_of` kept tuple elements: a source literal's or input's `[]`
/// keeps none (tests `row_sums_of_a_matrix_without_columns_…`, `rows_of_no_columns_summed_by_bot_…`,
/// `additive_scans_are_masked_prefix_sums_…` fail with a constant 0.0 here).
#[derive(Default)]
struct ScalarZero(Option<Value>);

fn scalar_zero(m: &mut Machine, span: Span) -> Res {
    if let Some(z) = &m.state::<ScalarZero>().0 {
        return Ok(z.clone());
    }
    // a run that let its program go took the zero first (`keep_from_program`): without it the
    // element type is unknown, and a guessed 0.0 would be wrong under forward mode's dual numbers
    let Some(p) = m.program() else {
        debug_assert!(false, "the array chain's run lost its program");
        return Err(err(span, "internal error: the array core's runtime needs its program (the type of main's array elements gives an empty array's zero), and this run was given none"));
    };
    let z = scalar_zero_of(p);
    m.state::<ScalarZero>().0 = Some(z.clone());
    Ok(z)
}

/// The chain's `keep_from_program`: what its runs read of the program they run (the scalar zero
/// above, and a gradient program's size, `gradient::KeptSize`), taken before the pipeline lets the
/// output IR go: one walk or a few of the program, where the run would make them at most once.
pub fn keep_from_program(p: &Program) -> Option<crate::stage::Kept> {
    let z = scalar_zero_of(p);
    let size = super::gradient::gradient_size(p);
    Some(Box::new(move |m: &mut Machine| {
        m.state::<ScalarZero>().0 = Some(z);
        m.state::<super::gradient::KeptSize>().0 = Some(size);
    }))
}

/// `scalar_zero`'s value for program `p`.
fn scalar_zero_of(p: &Program) -> Value {
    let element = |t: &Type| match t {
        Type::Fun(ab) => first_array_element(&ab.0).filter(
|e| !matches!(e, Type::Var(_) | Type::Unknown)),
        _ => None,
    };
    let own = p.def("main").and_then(|d| d.scheme.as_ref()).and_then(|s| element(&s.ty));
    // main's input arrays of tuples, taken apart at the wrapper (boundary.rs): main is then typed
    // `a` through `soaGet`, and the type it is used at names the user's tuple (a pair of dual
    // numbers under forward mode), not the scalar; the component arrays `soaGet` gives hold the
    // scalars themselves (a pair of duals' zero taken for the scalar failed `+` in an empty array
    // of pairs, wide-run seeds 531 and 2791)
    let z = own.or_else(|| {
        let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
        while let Some(e) = stack.pop() {
            if matches!(spine(e), Some((super::boundary::GET, _))) {
                if let Some(t) = first_array_element(&e.ty).filter(|t| !matches!(t, Type::Var(_) | Type::Unknown | Type::Int | Type::Bool)) {
                    return Some(t);
                }
            }
            each_child(e, &mut |c| stack.push(c));
        }
        None
    });
    let z = z.or_else(|| {
        // the instantiated type of a use of main elsewhere in the program
        let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
        while let Some(e) = stack.pop() {
            if let ExprKind::Var(n) = &e.kind {
                if n.is_global() && &*n.text == "main" {
                    if let Some(t) = element(&e.ty) {
                        return Some(t);
                    }
                }
            }
            each_child(e, &mut |c| stack.push(c));
        }
        None
    });
    // a program without arrays in its input (an empty literal inside it): the scalars its arrays
    // hold, read from the types of its array-typed terms (not Int/Bool: iota, index lists); a
    // tuple (forward mode's dual number) only when no array holds a scalar: a gradient program's
    // per-element vjp results for a loop (fold.rs) are tuples beside its arrays of reals, and their
    // (0, 0, 0) taken for the scalar zero failed a scan over an empty array (a property case)
    let z = z.or_else(|| {
        let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
        let mut tuple = None;
        while let Some(e) = stack.pop() {
            match first_array_element(&e.ty) {
                Some(Type::Var(_) | Type::Unknown | Type::Int | Type::Bool) | None => {}
                // (a dual number is a tuple of scalars; a vjp's result tuple of arrays, typed
                // generically in a gradient program, is not: its (0, 0, 0, 0) taken for the scalar
                // zero failed a fold over an empty map's rows, wide-run seeds 1332 and 2417)
                Some(Type::Tuple(ts)) if ts.iter().any(|t| t.as_array().is_some() || matches!(t, Type::Tuple(_))) => {}
                Some(t @ Type::Tuple(_)) => tuple = tuple.or(Some(t)),
                Some(t) => return Some(t),
            }
            each_child(e, &mut |c| stack.push(c));
        }
        tuple
    });
    z.map_or(Value::Real(0.0), |t| zero_of(&t))
}

fn first_array_element(t: &Type) -> Option<Type> {
    if let Some(mut e) = t.as_array() {
        while let Some(x) = e.as_array() {
            e = x;
        }
        return Some(e.clone());
    }
    match t {
        Type::Tuple(ts) => ts.iter().find_map(first_array_element),
        _ => None,
    }
}

fn zero_of(t: &Type) -> Value {
    match t {
        Type::Int => Value::Int(0),
        Type::Bool => Value::Bool(false),
        Type::Tuple(ts) => Value::Tuple(ts.iter().map(zero_of).collect()),
        _ => Value::Real(0.0),
    }
}

/// A zero element of `v` below its first `d` dimensions, for entries out of range. Below an empty
/// array that keeps no shape, the program's scalar zero (`ScalarZero`), not `0.0`: forward mode
/// runs bot's output on dual numbers, where a gather out of range of `[]` (the unused side of a sum
/// in a fold's array, a wide property run's case) must give a dual zero.
fn sub_zero(m: &mut Machine, v: &Value, d: usize, span: Span) -> Res {
    let mut cur = v.clone();
    for _ in 0..d {
        cur = match cur {
            Value::Array(xs) => match xs.first() {
                Some(x) => x.clone(),
                None => return scalar_zero(m, span),
            },
            other => other.empty_elem().cloned().unwrap_or(other),
        };
    }
    Ok(zero_like(&cur))
}

/// `gather [k1..km] a (λis. ix)` = `build [k1..km] (λis. index a ix)` (§3.3).
fn gather(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (md, nd) = dims(m.builtin_name());
    gather_dims(m, md, nd, args, span)
}

fn gather_dims(m: &mut Machine, md: usize, nd: usize, args: &mut Vec<Value>, span: Span) -> Res {
    let f = args.pop().unwrap_or(Value::Unit);
    let a = args.pop().unwrap_or(Value::Unit);
    let sh = sizes(&args.pop().unwrap_or(Value::Unit), md, span)?;
    let zero = sub_zero(m, &a, nd, span)?;
    let total: usize = sh.iter().product();
    m.tick(total as u64)?;
    m.alloc(total as u64)?;
    m.count("gathered", total as u64);
    let mut flat = Vec::with_capacity(total);
    let mut ix = Vec::with_capacity(nd);
    let fe = m.each(&f);
    each_position(&sh, |p| {
        call_ix(m, &fe, p, nd, span, &mut ix)?;
        flat.push(at(&a, &ix).unwrap_or(&zero).clone());
        Ok(())
    })?;
    let tm = template(m, &a, nd, span)?;
    Ok(nest(flat, &sh, tm))
}

/// `scatter [k1..kn] t (λis. ix)`: zeros of shape [k1..kn] ++ the rest, each t[is] added at ix,
/// entries out of range dropped (§3.3, §8.1).
fn scatter(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (md, nd) = dims(m.builtin_name());
    scatter_dims(m, md, nd, args, span)
}

fn scatter_dims(m: &mut Machine, md: usize, nd: usize, args: &mut Vec<Value>, span: Span) -> Res {
    let f = args.pop().unwrap_or(Value::Unit);
    let t = args.pop().unwrap_or(Value::Unit);
    let sh = sizes(&args.pop().unwrap_or(Value::Unit), nd, span)?;
    let zero = sub_zero(m, &t, md, span)?;
    let total: usize = sh.iter().product();
    m.alloc(total as u64)?;
    let mut flat = vec![zero.clone(); total];
    let outer = outer_shape(&t, md);
    let count: usize = outer.iter().product();
    m.tick(count as u64)?;
    m.count("scattered", count as u64);
    let mut ix = Vec::with_capacity(nd);
    let fe = m.each(&f);
    each_position(&outer, |p| {
        call_ix(m, &fe, p, nd, span, &mut ix)?;
        let inside = ix.iter().zip(&sh).all(|(&i, &k)| i >= 0 && (i as usize) < k);
        if inside {
            let l = ix.iter().zip(&sh).fold(0usize, |l, (&i, &k)| l * k + i as usize);
            flat[l] = match at(&t, p) {
                Some(x) => add(&flat[l], x, span)?,
                None => add(&flat[l], &flat[l], span)?,
            };
        }
        Ok(())
    })?;
    let tm = template(m, &t, md, span)?;
    Ok(nest(flat, &sh, tm))
}

/// `(m, n)` of the gather or scatter `name`, at any rank (lang.rs).
fn dims(name: &str) -> (usize, usize) {
    super::lang::rank_of(name).map_or((1, 1), |(_, m, n)| (m, n))
}

/// `sumOuter t`: the sum along the outermost dimension.
fn sum_outer(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    // a scalar zero stands for a zero whose shape a cotangent lost (see `index`): summed, it stays
    // one (a scatter of an empty seed, `shift1L` of a one-row matrix as the output: a property case)
    if matches!(args[0], Value::Real(r) if r == 0.0) {
        return Ok(args[0].clone());
    }
    let xs = arr(&args[0], "sumOuter", span)?;
    m.tick(xs.len() as u64)?;
    let mut acc = match xs.first().or(args[0].empty_elem()) {
        Some(x) => zero_like(x),
        // the builtin sums arrays of rank ≥ 2 (rank 1 is the language's `sum`): an empty outer
        // dimension (a `tr` of k×0 rows, nested arrays cannot keep the k) gives an empty array —
        // the limit of run-time shapes over nested arrays (the paper's are static)
        None => return Ok(Value::Array(Rc::from(vec![]))),
    };
    for x in xs.iter() {
        acc = add(&acc, x, span)?;
    }
    Ok(acc)
}

/// The shape read along first elements, to the first non-array (a tuple, a real).
fn full_shape(t: &Value) -> Vec<usize> {
    let (mut out, mut cur) = (vec![], t);
    while let Value::Array(xs) = cur {
        out.push(xs.len());
        match xs.first() {
            Some(x) => cur = x,
            None => break,
        }
    }
    out
}

/// Where `t` has a row whose length is not `shape`'s (all dimensions are checked, not only the
/// permuted ones: a transposition moves the inner rows whole), with the depth and the two lengths.
/// Reading every row's shape from the first (`outer_shape`), as the paper's static shapes allow,
/// silently drops or invents elements of a ragged array: a wrong dual-arrays gradient on a map whose
/// rows are `if p > 0.5 then [p] else [p, x0]` (bot's B4 stacks the two sides in one literal). A
/// non-array (a cotangent's `0.0` standing for a zero array) fits any shape.
/// A stack, not recursion: a value may nest as deep as its type (the wasm stack is small).
fn ragged(t: &Value, shape: &[usize]) -> Option<(usize, usize, usize)> {
    let mut stack = vec![(t, 0)];
    while let Some((v, depth)) = stack.pop() {
        let (Value::Array(xs), Some(&n)) = (v, shape.get(depth)) else { continue };
        if xs.len() != n {
            return Some((depth, n, xs.len()));
        }
        stack.extend(xs.iter().rev().map(|x| (x, depth + 1)));
    }
    None
}

/// `tr [p0..pm] t`: output dimension q is input dimension p_q.
pub fn transpose(m: &mut Machine, perm: &[usize], t: &Value, span: Span) -> Res {
    let rank = perm.len();
    let shape = outer_shape(t, rank);
    if let Some((depth, a, b)) = ragged(t, &full_shape(t)) {
        return Err(err(
            span,
            &format!("tr: the array is not regular (rows of lengths {a} and {b} at depth {depth}); the paper's arrays are regular (§3: a shape is the same for every index), so a program whose array's rows differ in length per element (`if … then [p] else [p, x0]` inside a map), or a fold or scan inside a map whose accumulator changes length from one step to the next (its states stacked step by step: bot's B-scan; a loop keeps its accumulator's shape, as horde-ad's fold, whose type fixes it), is outside its language"),
        ));
    }
    let out_shape: Vec<usize> = perm.iter().map(|&d| shape.get(d).copied().unwrap_or(0)).collect();
    let mut flat = vec![];
    let mut ix = vec![0; rank];
    each_position(&out_shape, |q| {
        for (o, &d) in perm.iter().enumerate() {
            *ix.get_mut(d).ok_or_else(|| err(span, "tr: not a permutation"))? = q[o];
        }
        flat.push(at(t, &ix).cloned().ok_or_else(|| err(span, "tr: the array is not regular"))?);
        Ok(())
    })?;
    let tm = template(m, t, rank, span)?;
    Ok(nest(flat, &out_shape, tm))
}

fn tr(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let perm: Vec<usize> = arr(&args[0], "tr", span)?.iter().map(|p| int(p, "tr", span).map(|k| k.max(0) as usize)).collect::<Result<_, _>>()?;
    let out = transpose(m, &perm, &args[1], span)?;
    m.tick(1)?;
    Ok(out)
}

fn b_index(_: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    index(&args[0], int(&args[1], "index", span)?, span)
}

/// The runtime's zero of unknown shape: `[]`, a scalar `0.0`, or (forward mode's, checking bot) a
/// dual number of zeros.
fn unknown_zero(v: &Value) -> bool {
    match v {
        Value::Real(z) => *z == 0.0,
        Value::Tuple(vs) => vs.iter().all(unknown_zero),
        _ => v.elems().is_some_and(|x| x.is_empty()),
    }
}

/// Strict `cond` (§5.2): both branches were evaluated; it selects. A condition read out of an
/// empty array of booleans is the runtime's zero of unknown shape (`unknown_zero`: `index`),
/// whose boolean is false, as `zero_like`'s (an array of booleans in a fold's accumulator inside a
/// map over no rows, pack.rs: part_c_takes seed 15).
fn b_cond(_: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    match args[0] {
        Value::Bool(b) => Ok(if b { args[1].clone() } else { args[2].clone() }),
        ref v if unknown_zero(v) => Ok(args[2].clone()),
        ref v => Err(err(span, format!("cond expects a boolean, got {v}"))),
    }
}

fn b_iota(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let k = int(&args[0], "iota", span)?.max(0);
    m.alloc(k as u64)?;
    Ok(Value::Array((0..k).map(Value::Int).collect()))
}

/// `sameLength expected actual` (lang.rs): a packed loop's array component must keep its length
/// (pack.rs); located at the fold or scan (the term's span).
fn b_same_length(_: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (a, b) = (int(&args[0], "sameLength", span)?, int(&args[1], "sameLength", span)?);
    if a != b {
        return Err(err(span, changed_shape(a, b)));
    }
    Ok(Value::Int(a))
}

/// `exactInt k` (lang.rs): k when |k| ≤ 2^53, where a real holds every integer exactly, else an
/// error located at the fold or scan whose integer rides as a real copy (int_reads.rs `rounded`).
fn b_exact_int(m: &mut Machine, k: &Value, span: Span) -> Res {
    m.tick(1)?;
    let k = int(k, "exactInt", span)?;
    if k.unsigned_abs() > 1 << 53 {
        return Err(err(span, format!("this fold or scan's integer component, carried as a real copy beside its real components (its step reads them), was brought back by `round` as {k}, past 2^53: a real holds every integer exactly only up to 2^53 (f64's 53 bits), so the copy may have rounded and `round` of it may not be the integer the source computes")));
    }
    Ok(Value::Int(k))
}

/// The message of a packed loop's array component whose shape changed in a step (`sameLength`, `sameShape`).
fn changed_shape(a: i64, b: i64) -> String {
    format!("this fold or scan's accumulator has an array component of length {a} at the start and of length {b} after a step: a loop keeps its accumulator's shape (its tuple is packed into one array of reals of a fixed length, as horde-ad's fold, whose type fixes the accumulator's shape)")
}

/// `sameShape [d0, .., dr-1] v` (lang.rs): `dr-1` when `v` is regular of those dimensions (below a
/// dimension of no rows any), else an error located at the fold or scan (the term's span): a ragged
/// `v` (every row compared with the first, `ragged`), or a regular one whose shape changed in a step.
/// One walk over v's first r dimensions.
fn b_same_shape(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let ds: Vec<i64> = arr(&args[0], "sameShape", span)?.iter().map(|d| int(d, "sameShape", span)).collect::<Result<_, _>>()?;
    let v = &args[1];
    if ds.is_empty() {
        return regular(m, v, span);
    }
    // v's dimensions read from its first rows, down to the first empty one
    let (mut shape, mut cur) = (vec![], v.clone());
    while shape.len() < ds.len() {
        let Some(xs) = cur.elems() else { break };
        shape.push(xs.len());
        let Some(x) = xs.first().cloned() else { break };
        cur = x;
    }
    if let Some((depth, a, b)) = ragged(v, &shape) {
        return Err(err(
            span,
            format!("this fold or scan reads an array of arrays that is not regular (rows of lengths {a} and {b} at depth {depth}): the paper's arrays are regular (§3.2: a shape is the same for every index, \"there are no jagged arrays\"), and the loop packs its tuple accumulator and its elements into arrays of reals row-major, each row read at the first row's length"),
        ));
    }
    m.tick(1)?;
    for (&d, &n) in ds.iter().zip(&shape) {
        if d != n as i64 {
            return Err(err(span, changed_shape(d, n as i64)));
        }
    }
    Ok(Value::Int(ds.last().copied().unwrap_or(0)))
}

/// `sameShape [] v`: an array-of-arrays literal whose rows are not all literals (lower.rs) is regular
/// at every depth, or an error located at the literal; its result v's length.
fn regular(m: &mut Machine, v: &Value, span: Span) -> Res {
    if let Some((depth, a, b)) = ragged(v, &full_shape(v)) {
        return Err(err(
            span,
            format!("this array literal is not regular (rows of lengths {a} and {b} at depth {depth}): the paper's arrays are regular (§3.2: a shape is the same for every index, \"there are no jagged arrays\"), and its operations read every row at the first row's shape"),
        ));
    }
    m.tick(1)?;
    Ok(Value::Int(v.elems().map_or(0, |xs| xs.len()) as i64))
}

fn b_sum_outer(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    sum_outer(m, args, span)
}

fn mk(name: &'static str, vars: Vec<u32>, ty: Type, arity: usize, run: crate::interp::BuiltinFn) -> Builtin {
    Builtin { name, scheme: Scheme { vars, ty }, arity, lazy_last: false, run }
}

fn nested(t: Type, n: usize) -> Type {
    (0..n).fold(t, |t, _| Type::array(t))
}

fn ints(m: usize) -> Type {
    Type::tuple(vec![Type::Int; m])
}

/// The core operations: `index`, `gather<m><n>`, `scatter<m><n>`, `sumOuter`, `tr`, `cond`, `iota`,
/// and the packed loop's `sameLength` (pack.rs).
pub fn builtins() -> Vec<Builtin> {
    let a = Type::Var(0);
    let f = Type::fun;
    let mut out = vec![
        mk("index", vec![0], f(Type::array(a.clone()), f(Type::Int, a.clone())), 2, b_index),
        mk("sumOuter", vec![0], f(Type::array(a.clone()), a.clone()), 1, b_sum_outer),
        mk("tr", vec![0], f(Type::array(Type::Int), f(a.clone(), a.clone())), 2, tr),
        mk("cond", vec![0], f(Type::Bool, f(a.clone(), f(a.clone(), a.clone()))), 3, b_cond),
        mk("iota", vec![], f(Type::Int, Type::array(Type::Int)), 1, b_iota),
        mk(super::lang::SAME_LENGTH, vec![], f(Type::Int, f(Type::Int, Type::Int)), 2, b_same_length),
        mk(super::lang::SAME_SHAPE, vec![0], f(Type::array(Type::Int), f(a.clone(), Type::Int)), 2, b_same_shape),
        mk(super::lang::EXACT_INT, vec![], f(Type::Int, Type::Int), 1, |m, x, s| b_exact_int(m, &x[0], s)),
        mk(super::lang::PAD_SIZE, vec![], f(Type::Int, Type::Int), 1, |m, x, s| {
            m.tick(1)?;
            Ok(Value::Int(int(&x[0], "padSize", s)?))
        }),
    ];
    for m in 1..=MAX_DIMS {
        for n in 1..=MAX_DIMS {
            out.extend(rank_builtins(m, n));
        }
    }
    // main's arrays of tuples taken apart at the boundary (boundary.rs)
    out.extend(super::boundary::builtins());
    out
}

/// `gather<m><n>` and `scatter<m><n>` (the paper's gather and scatter of one rank, §3.3).
fn rank_builtins(m: usize, n: usize) -> [Builtin; 2] {
    let (a, f) = (Type::Var(0), Type::fun);
    let ixf = f(ints(m), Type::array(Type::Int));
    [
        mk(gather_name(m, n), vec![0], f(ints(m), f(nested(a.clone(), n), f(ixf.clone(), nested(a.clone(), m)))), 3, gather),
        mk(scatter_name(m, n), vec![0], f(ints(n), f(nested(a.clone(), m), f(ixf, nested(a.clone(), n)))), 3, scatter),
    ]
}

/// The gathers and scatters past `MAX_DIMS` that `p` names, each rank with its transpose's (the
/// reverse pass and the symbolic stages transpose a gather<m><n> into a scatter<m><n> and back): bot
/// adds them to its output's builtins, and the stages after it inherit them.
pub fn builtins_for(p: &Program) -> Vec<Builtin> {
    let mut ranks: Vec<(usize, usize)> = vec![];
    for d in &p.defs {
        let mut stack = vec![&d.body];
        while let Some(x) = stack.pop() {
            if let ExprKind::Builtin(name) = &x.kind {
                if let Some((_, m, n)) = super::lang::rank_of(name) {
                    if (m > MAX_DIMS || n > MAX_DIMS) && !ranks.contains(&(m, n)) {
                        ranks.push((m, n));
                    }
                }
            }
            each_child(x, &mut |c| stack.push(c));
        }
    }
    ranks.into_iter().flat_map(|(m, n)| rank_builtins(m, n)).collect()
}

/// Runs `gather<m><n>` or `scatter<m><n>` by name from another runtime (the reverse pass's
/// transposes).
pub fn call_named(m: &mut Machine, name: &'static str, args: &mut Vec<Value>, span: Span) -> Res {
    let (md, nd) = dims(name);
    if name.starts_with("gather") {
        gather_dims(m, md, nd, args, span)
    } else {
        scatter_dims(m, md, nd, args, span)
    }
}

/// The cotangent operations of the gradient programs (§7.2–7.5): `plus` (+→), `times` (·→, a scale
/// that may be a scalar), `oneHot z u c` (zeros shaped like z with c at u), `zerosLike`, and
/// `share i t` / `shared i` (Fig. 19's global sharing: identity on arrays, each ID computed once —
/// the first occurrence, in evaluation order, stores its value and the later ones read it).
pub fn gradient_builtins() -> Vec<Builtin> {
    let a = Type::Var(0);
    let f = Type::fun;
    vec![
        mk("plus", vec![0], f(a.clone(), f(a.clone(), a.clone())), 2, |_, x, s| add(&x[0], &x[1], s)),
        mk("times", vec![0, 1], f(Type::Var(1), f(a.clone(), a.clone())), 2, |_, x, s| times(&x[1], &x[0], s)),
        mk("oneHot", vec![0, 1], f(Type::Var(1), f(Type::Int, f(a.clone(), Type::Var(1)))), 3, |_, x, s| {
            let i = int(&x[1], "oneHot", s)?;
            Ok(match zero_like(&x[0]) {
                Value::Array(zs) => Value::Array(zs.iter().enumerate().map(|(k, z)| if k as i64 == i { x[2].clone() } else { z.clone() }).collect()),
                z => z,
            })
        }),
        mk("zerosLike", vec![0], f(a.clone(), a.clone()), 1, |_, x, _| Ok(zero_reals(&x[0]))),
        mk("share", vec![0], f(Type::Int, f(a.clone(), a.clone())), 2, |m, x, s| {
            let id = int(&x[0], "share", s)?;
            m.state::<ShareMemo>().0.insert(id, x[1].clone());
            m.count("shares_computed", 1);
            Ok(x[1].clone())
        }),
        mk("shared", vec![0], f(Type::Int, a.clone()), 1, |m, x, s| {
            let id = int(&x[0], "shared", s)?;
            m.state::<ShareMemo>().0.get(&id).cloned().ok_or_else(|| err(s, format!("share {id} is read before it is computed")))
        }),
    ]
    .into_iter()
    // the wrapper's conversions of arrays of tuples (boundary.rs)
    .chain(super::boundary::builtins())
    .collect()
}

/// The values of `share` IDs computed so far in a run.
#[derive(Default)]
pub struct ShareMemo(pub rustc_hash::FxHashMap<i64, Value>);

fn zero_reals(v: &Value) -> Value {
    match v {
        Value::Real(_) => Value::Real(0.0),
        Value::Tuple(vs) => Value::Tuple(vs.iter().map(zero_reals).collect()),
        Value::Array(vs) => Value::Array(vs.iter().map(zero_reals).collect()),
        other => other.clone(),
    }
}

/// `c ·→ r`: elementwise, r a scalar or of c's shape.
fn times(c: &Value, r: &Value, s: Span) -> Res {
    scale_by(c, r, "·→", s)
}

/// The elementwise product of a cotangent `c` with a scale `r` (a scalar, or an array of c's
/// shape): `·→` here and the Delta's `Scale` (delta.rs); `what` names it in a message.
pub fn scale_by(c: &Value, r: &Value, what: &str, s: Span) -> Res {
    Ok(match (c, r) {
        (Value::Real(a), Value::Real(b)) => Value::Real(a * b),
        (Value::Array(xs), Value::Array(ys)) if xs.len() == ys.len() => Value::Array(xs.iter().zip(ys.iter()).map(|(x, y)| scale_by(x, y, what, s)).collect::<Result<Vec<_>, _>>()?.into()),
        (Value::Array(xs), Value::Real(_)) => Value::Array(xs.iter().map(|x| scale_by(x, r, what, s)).collect::<Result<Vec<_>, _>>()?.into()),
        // an empty cotangent that lost its inner dimension is a zero: scaled, it stays one (see `add`)
        (Value::Array(xs), _) if xs.is_empty() => c.clone(),
        _ if c.empty_elem().is_some() => c.clone(),
        // a scalar zero where an array cotangent is meant (the rows of a scatter of an empty
        // cotangent, whose rows' shape the empty value did not carry; `add` absorbs it alike):
        // scaled by an array, the zero of that array's shape (`shift1R` of a one-row matrix in
        // the output, property-test seed 618728855218914312)
        (Value::Real(z), Value::Array(_)) if *z == 0.0 => zero_reals(r),
        // (and by an empty array that keeps its rows' shape: that empty array, its zero)
        (Value::Real(z), _) if *z == 0.0 && r.empty_elem().is_some() => r.clone(),
        _ => return Err(err(s, format!("{what}: shapes differ ({c} and {r})"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Budget, Builtins, Cost};

    /// `main arg` of `src` (with this runtime's builtins; type-checked when `typed`) on the walker or
    /// the engine with its regions compiled at once: the value or error, and every count.
    fn run(src: &str, typed: bool, arg: &Value, budget: Budget) -> (String, Cost) {
        let mut bs = Builtins::new();
        bs.extend(builtins());
        let mut p = crate::syntax::parse_program_with(src, &|n| bs.get(n).is_some()).expect("parses");
        if typed {
            crate::types::check_program_at(&mut p, &bs, None).expect("type-checks");
        }
        let mut m = Machine::new(&p, &bs, Budget { regions_after: 0, ..budget }).expect("a machine");
        let r = m.call("main", vec![arg.clone()]);
        (format!("{r:?}"), m.cost())
    }

    /// Index functions `λp → [x1, …, xn]` of variables and constants, their indexes read without
    /// calling them (`Machine::apply_ix`), against the walker calling them: the value or error and
    /// every count, at every steps budget, every allocation budget and every depth budget. 1-D and
    /// 2-D positions, a capture, a constant and a wildcard, a swapped tuple pattern, scatters, an
    /// index function whose body is not such a literal, one returning too many indexes and (untyped)
    /// one whose item is not an integer or whose pattern does not fit the position.
    #[test]
    fn index_functions_of_variables_read_without_a_call_count_and_stop_as_called_ones() {
        let vec = |n: usize| Value::Array((0..n).map(|i| Value::Real(i as f64 * 0.5 - 1.0)).collect());
        let mat = Value::Array((0..3).map(|r| Value::Array((0..4).map(|c| Value::Real((r * 4 + c) as f64)).collect())).collect());
        let cases: &[(&str, &str, bool, Value)] = &[
            ("def main a = sum (gather11 (length a) a (\\i -> [i]))", "Ok(Real(9.0))", true, vec(9)),
            ("def main a = let k = 2 in sum (gather11 (length a + 2) a (\\i -> [k])) + sum (gather11 3 a (\\_ -> [1]))", "Ok(", true, vec(5)),
            ("def main m = sumOuter (sumOuter (gather22 (4, 3) m (\\(i, j) -> [j, i])))", "Ok(", true, mat.clone()),
            ("def main m = sum (sumOuter (sumOuter (gather21 (3, 4) m (\\(i, j) -> [i])))) + sum (gather12 4 m (\\i -> [1, i]))", "Ok(", true, mat.clone()),
            ("def main a = let t = gather11 (length a) a (\\i -> [i]) in sum (scatter11 (length a + 1) t (\\i -> [i])) + sum (scatter11 2 t (\\i -> [i - 1]))", "Ok(", true, vec(7)),
            ("def main m = sumOuter (sumOuter (scatter22 (4, 3) m (\\(i, j) -> [j, i])))", "Ok(", true, mat.clone()),
            ("def main a = sum (gather11 (length a) a (\\i -> [i, i]))", "returned 2 indexes, not 1", true, vec(4)),
            ("def main a = sum (gather11 (length a) a (\\i -> [1.5]))", "an index expects an integer, got 1.5", false, vec(4)),
            ("def main m = sumOuter (gather21 (3, 4) m (\\i -> [i]))", "an index expects an integer, got (0, 0)", false, mat.clone()),
            ("def main a = sum (gather11 (length a) a (\\(i, j) -> [i]))", "a 2-tuple pattern does not match", false, vec(4)),
        ];
        for (src, outcome, typed, arg) in cases {
            let walker = |b: Budget| run(src, *typed, arg, Budget { walker: true, ..b });
            let engine = |b: Budget| run(src, *typed, arg, b);
            let full = engine(Budget::default());
            assert!(full.0.contains(outcome), "{src}: {}", full.0);
            assert_eq!(full, walker(Budget::default()), "{src}");
            for steps in 0..full.1.steps + 2 {
                let b = Budget { steps, ..Budget::default() };
                assert_eq!(engine(b.clone()), walker(b), "{src}: steps {steps}");
            }
            for allocs in 0..full.1.allocs + 2 {
                let b = Budget { allocs, ..Budget::default() };
                assert_eq!(engine(b.clone()), walker(b), "{src}: allocs {allocs}");
            }
            for depth in 0..full.1.max_depth + 2 {
                let b = Budget { depth, ..Budget::default() };
                assert_eq!(engine(b.clone()), walker(b), "{src}: depth {depth}");
            }
        }
    }
}
