//! The array operations of prims.rs, run by the machine like builtins. The functional ones call back
//! into the machine through `Machine::apply` (re-entrant; one nesting level per level of nested
//! array operations, never per element). Every element made counts against the allocation budget
//! and a step; errors (index out of range, lengths that differ, a negative size) are located at the
//! operation's span.

use super::{Machine, RunError};
use crate::diag::Span;
use crate::prims::Prim;
use crate::value::{take_item, Value};
use std::rc::Rc;

type Res = Result<Value, RunError>;

fn arr(v: &Value, what: &str, span: Span) -> Result<Rc<[Value]>, RunError> {
    match v {
        Value::Array(xs) => Ok(xs.clone()),
        // an empty array that keeps its elements' shape (value.rs) is `[]` to every operation here
        _ if v.empty_elem().is_some() => Ok(Rc::from(Vec::new())),
        _ => Err(RunError::runtime(span, format!("{what} expects an array"))),
    }
}

/// `arr` without a second handle on the array: the elements borrowed where the argument lies
/// (`index`, `length`, `sum` read and drop nothing; the Rc's count up and down was a tenth of an index).
fn elems<'a>(v: &'a Value, what: &str, span: Span) -> Result<&'a [Value], RunError> {
    match v {
        Value::Array(xs) => Ok(xs),
        _ if v.empty_elem().is_some() => Ok(&[]),
        _ => Err(RunError::runtime(span, format!("{what} expects an array"))),
    }
}

/// The last two arguments, in place (`two` without moving them out; `()` for one missing, as `two`).
fn two_ref(args: &[Value]) -> (&Value, &Value) {
    match args {
        [.., a, b] => (a, b),
        [b] => (&Value::Unit, b),
        [] => (&Value::Unit, &Value::Unit),
    }
}

/// `arr` of an argument taken by value: the array's handle itself, not a second one, so that where
/// the argument held the array's last handle its elements can be moved out (`value::take_item`).
fn owned(v: Value, what: &str, span: Span) -> Result<Rc<[Value]>, RunError> {
    match v {
        Value::Array(xs) => Ok(xs),
        v => arr(&v, what, span),
    }
}

fn int(v: &Value, what: &str, span: Span) -> Result<i64, RunError> {
    v.as_int().ok_or_else(|| RunError::runtime(span, format!("{what} expects an integer")))
}

/// Counts `n` new elements: one step and one allocation each.
fn made(m: &mut Machine, n: usize) -> Result<(), RunError> {
    m.tick(n as u64)?;
    m.alloc(n as u64)
}

/// A size for `build`/`replicate`: not negative, and its elements are counted against the
/// allocation budget before any is made, so `build 1000000000000 f` stops at once at that budget
/// (not at the steps budget after running `f` for long, nor as "too large" where usize is 32 bits).
fn size(m: &mut Machine, v: &Value, what: &str, span: Span) -> Result<usize, RunError> {
    let n = int(v, what, span)?;
    if n < 0 {
        return Err(RunError::runtime(span, format!("{what}: negative size {n}")));
    }
    m.alloc(n as u64)?;
    usize::try_from(n).map_err(|_| RunError::runtime(span, format!("{what}: size {n} is too large")))
}

fn two(args: &mut Vec<Value>) -> (Value, Value) {
    let b = args.pop().unwrap_or(Value::Unit);
    let a = args.pop().unwrap_or(Value::Unit);
    (a, b)
}

fn three(args: &mut Vec<Value>) -> (Value, Value, Value) {
    let c = args.pop().unwrap_or(Value::Unit);
    let (a, b) = two(args);
    (a, b, c)
}

fn apply2(m: &mut Machine, f: &Value, a: Value, b: Value) -> Res {
    m.apply2(f, a, b)
}

/// `a ! i`
pub fn index(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (a, i) = two_ref(args);
    index_at(m, At::Value(a), i, span)
}

/// Where `index_at` finds its array: an argument, or a slot or capture of the running frame
/// (`fast.rs`'s `a ! i`, run without an argument buffer or a handle on the array).
#[derive(Clone, Copy)]
pub(super) enum At<'a> {
    Value(&'a Value),
    Slot(u32),
    Capture(u32),
}

fn at<'r>(m: &'r Machine, a: &'r At<'_>) -> &'r Value {
    match a {
        At::Value(v) => v,
        At::Slot(s) => &m.locals[m.bp + *s as usize],
        At::Capture(k) => &m.env[*k as usize],
    }
}

/// `index` of the array at `a`: read where it lies, before and after the count (which does not
/// touch it), and only the element copied out.
pub(super) fn index_at(m: &mut Machine, a: At<'_>, i: &Value, span: Span) -> Res {
    let len = elems(at(m, &a), "`!`", span)?.len();
    let i = int(i, "`!`", span)?;
    m.tick(1)?;
    m.charge_array(Prim::Index, 1);
    match usize::try_from(i).ok().filter(|k| *k < len) {
        Some(k) => Ok(elems(at(m, &a), "`!`", span)?.get(k).cloned().unwrap_or(Value::Unit)),
        None => Err(RunError::runtime(span, format!("index {i} is out of range for an array of length {len}"))),
    }
}

pub fn length(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let xs = elems(&args[0], "`length`", span)?;
    m.tick(1)?;
    m.charge_array(Prim::Length, xs.len());
    Ok(Value::Int(xs.len() as i64))
}

/// `sum a`, left to right (as `fold (+) 0.0 a`, which is how the stages translate it).
pub fn sum(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let xs = elems(&args[0], "`sum`", span)?;
    m.tick(xs.len() as u64)?;
    let mut s = 0.0;
    for x in xs.iter() {
        m.real_op();
        s += x.as_real().ok_or_else(|| RunError::runtime(span, "`sum` expects an array of reals"))?;
    }
    m.charge_array(Prim::Sum, xs.len());
    Ok(Value::Real(s))
}

pub fn replicate(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (n, x) = two(args);
    let n = size(m, &n, "`replicate`", span)?;
    m.tick(n as u64)?;
    m.charge_array(Prim::Replicate, n);
    if n == 0 {
        // no copy of x, but x's shape: `replicate 0 x` is 0×(shape of x), not 0×0 (value.rs)
        return Ok(Value::empty_of(x));
    }
    Ok(Value::Array(vec![x; n].into()))
}

pub fn build(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (n, f) = two(args);
    let n = size(m, &n, "`build`", span)?;
    let mut out = Vec::new();
    let f = m.each(&f);
    for i in 0..n {
        m.tick(1)?;
        out.push(m.apply_each(&f, Value::Int(i as i64))?);
    }
    m.charge_array(Prim::Build, n);
    Ok(Value::Array(out.into()))
}

/// `map f` of an empty array that keeps its elements' shape (value.rs: `replicate 0 x`, the array
/// core's gathers and transposes) keeps the shape of f's results: f is applied to the kept element
/// (its value is never read, only its shape), as static shapes would give it. Without this a
/// broadcast op over a k×0×n array lost the n, and a later `tr`/`sumOuter` read the wrong rank
/// (a Part C property case: `map2` over `[[], []]` with `shift1R`). f failing on the stand-in
/// element (e.g. an index into it) gives the plain `[]`, as before; a budget still stops.
fn empty_image(m: &mut Machine, f: &Value, elems: &[Value]) -> Res {
    let r = match elems {
        [x] => m.apply(f.clone(), x.clone()),
        [x, y] => apply2(m, f, x.clone(), y.clone()),
        _ => return Ok(Value::Array(Rc::from(Vec::new()))),
    };
    match r {
        Ok(v) => Ok(Value::empty_of(v)),
        Err(e @ RunError::Budget { .. }) => Err(e),
        Err(_) => Ok(Value::Array(Rc::from(Vec::new()))),
    }
}

pub fn map(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (f, a) = two(args);
    if let Some(e) = a.empty_elem() {
        return empty_image(m, &f, &[e.clone()]);
    }
    let mut xs = owned(a, "`map`", span)?;
    let mut out = Vec::with_capacity(xs.len());
    let f = m.each(&f);
    for k in 0..xs.len() {
        made(m, 1)?;
        out.push(m.apply_each(&f, take_item(&mut xs, k))?);
    }
    m.charge_array(Prim::Map, xs.len());
    Ok(Value::Array(out.into()))
}

pub fn map2(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (f, a, b) = three(args);
    if let (Some(e), Some(g)) = (a.empty_elem(), b.empty_elem()) {
        return empty_image(m, &f, &[e.clone(), g.clone()]);
    }
    let (mut xs, mut ys) = (owned(a, "`map2`", span)?, owned(b, "`map2`", span)?);
    if xs.len() != ys.len() {
        return Err(RunError::runtime(span, format!("`map2` on arrays of different lengths ({} and {})", xs.len(), ys.len())));
    }
    let mut out = Vec::with_capacity(xs.len());
    let f = m.each2(&f);
    for k in 0..xs.len() {
        made(m, 1)?;
        out.push(m.apply2_each(&f, take_item(&mut xs, k), take_item(&mut ys, k))?);
    }
    m.charge_array(Prim::Map2, xs.len());
    Ok(Value::Array(out.into()))
}

/// `fold f z a` (and `reduce`, which is a fold whose `f` is associative with unit `z`).
pub fn fold(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (f, z, a) = three(args);
    let mut xs = owned(a, "`fold`", span)?;
    let mut acc = z;
    let f = m.each2(&f);
    for k in 0..xs.len() {
        m.tick(1)?;
        acc = m.apply2_each(&f, acc, take_item(&mut xs, k))?;
    }
    m.charge_array(Prim::Fold, xs.len());
    Ok(acc)
}

/// `scanl f z a = [z, f z a0, f (f z a0) a1, ...]` (length n + 1).
pub fn scanl(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (f, z, a) = three(args);
    let xs = arr(&a, "`scanl`", span)?;
    made(m, 1)?;
    let mut out = Vec::with_capacity(xs.len() + 1);
    out.push(z.clone());
    let mut acc = z;
    let f = m.each2(&f);
    for x in xs.iter() {
        made(m, 1)?;
        acc = m.apply2_each(&f, acc, x.clone())?;
        out.push(acc.clone());
    }
    m.charge_array(Prim::Scanl, xs.len());
    Ok(Value::Array(out.into()))
}

/// `scanr f z a = [..., f a_{n-2} (f a_{n-1} z), f a_{n-1} z, z]` (length n + 1).
pub fn scanr(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let (f, z, a) = three(args);
    let xs = arr(&a, "`scanr`", span)?;
    made(m, 1)?;
    let mut out = Vec::with_capacity(xs.len() + 1);
    out.push(z.clone());
    let mut acc = z;
    let f = m.each2(&f);
    for x in xs.iter().rev() {
        made(m, 1)?;
        acc = m.apply2_each(&f, x.clone(), acc)?;
        out.push(acc.clone());
    }
    out.reverse();
    m.charge_array(Prim::Scanr, xs.len());
    Ok(Value::Array(out.into()))
}

/// Drops the first element (the empty array stays empty).
pub fn shift1l(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let xs = arr(&args[0], "`shift1L`", span)?;
    let rest: Vec<Value> = xs.iter().skip(1).cloned().collect();
    made(m, rest.len())?;
    m.charge_array(Prim::Shift1L, xs.len());
    Ok(Value::Array(rest.into()))
}

/// Drops the last element (the empty array stays empty).
pub fn shift1r(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Res {
    let xs = arr(&args[0], "`shift1R`", span)?;
    let rest: Vec<Value> = xs.iter().take(xs.len().saturating_sub(1)).cloned().collect();
    made(m, rest.len())?;
    m.charge_array(Prim::Shift1R, xs.len());
    Ok(Value::Array(rest.into()))
}

#[cfg(test)]
mod tests {
    use crate::value::{take_item as take, Value};
    use std::rc::Rc;

    fn pairs() -> Rc<[Value]> {
        (0..3).map(|k| Value::Tuple(Rc::new([Value::Real(k as f64), Value::Int(k)]))).collect()
    }

    #[test]
    fn an_element_is_moved_out_of_an_array_no_one_else_holds_and_copied_out_of_a_shared_one() {
        // held once: the element comes out held once (its tuple pattern can take it apart in place)
        let mut xs = pairs();
        match take(&mut xs, 1) {
            Value::Tuple(t) => assert_eq!((Rc::strong_count(&t), t[1].as_int()), (1, Some(1))),
            v => panic!("{v}"),
        }
        assert!(matches!(xs[1], Value::Unit), "moved out");
        // shared: a copy, and the other holder's array is left whole
        let mut ys = pairs();
        let other = ys.clone();
        match take(&mut ys, 2) {
            Value::Tuple(t) => assert_eq!((Rc::strong_count(&t), t[1].as_int()), (2, Some(2))),
            v => panic!("{v}"),
        }
        assert!(matches!(&other[2], Value::Tuple(_)) && matches!(&ys[2], Value::Tuple(_)));
    }
}
