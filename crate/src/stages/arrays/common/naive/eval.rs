//! The reverse pass of §2.6 (Fig. 5: eval, backprop, reversePass) lifted to array Deltas: cotangents
//! are reals or (nested) arrays, `accum` holds one per Share ID and `grad` one per input. Two ways to
//! transpose `Index d i` (§4.4):
//! - `OneHot`: as the paper's pure eval must, into a dense one-hot array shaped like `d`'s value,
//!   which is then added to `d`'s accumulator — O(size of d) per index, O(n²) on t_dot;
//! - `InPlace`: the cotangent is added at position i of the accumulator it reaches (the in-place
//!   update that §4.4 names as a way out, "mutable accumulators"), so the only cost left is the
//!   number of Delta nodes (used by `arrays/build1`, whose point is the Delta explosion alone).
//!
//! `ct_cells` counts the reals the reverse pass writes: a one-hot's every cell, every cell of a
//! cotangent added into (or first stored in) an accumulator, a scale, a replicate, a sum.

use super::delta::*;
use crate::diag::Span;
use crate::interp::{Builtin, Graph, GraphEdge, GraphNode, Machine, RunError, Shown, TraceStep};
use crate::ir::*;
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
use rustc_hash::{FxHashSet as HashSet};
use std::rc::Rc;

/// A cotangent: a real, an array of reals (flat: a one-hot and its addition into an accumulator are
/// loops over `f64`s), or an array of cotangents.
#[derive(Clone, Debug)]
pub enum Ct {
    R(f64),
    V(Vec<f64>),
    A(Vec<Ct>),
}

/// A place within a cotangent that `at_mut` finds: a cotangent, or one real of a flat array.
enum Place<'a> {
    Ct(&'a mut Ct),
    Real(&'a mut f64),
}

impl Ct {
    fn of(v: &Value) -> Ct {
        match v {
            Value::Real(r) => Ct::R(*r),
            _ => match v.elems() {
                // (an empty array that keeps its element's shape, value.rs, is one too)
                Some(vs) => match vs.iter().map(|v| if let Value::Real(r) = v { Some(*r) } else { None }).collect() {
                    Some(rs) => Ct::V(rs),
                    None => Ct::A(vs.iter().map(Ct::of).collect()),
                },
                None => Ct::R(0.0),
            },
        }
    }
    fn value(&self) -> Value {
        match self {
            Ct::R(r) => Value::Real(*r),
            Ct::V(rs) => Value::Array(rs.iter().map(|r| Value::Real(*r)).collect::<Vec<_>>().into()),
            Ct::A(cs) => Value::Array(cs.iter().map(Ct::value).collect::<Vec<_>>().into()),
        }
    }
    fn zeros(s: &Shape) -> Ct {
        match s {
            Shape::Scalar => Ct::R(0.0),
            Shape::Arr { items, flat: true, .. } => Ct::V(vec![0.0; items.len()]),
            Shape::Arr { items, .. } => Ct::A(items.iter().map(|s| Ct::zeros(s)).collect()),
        }
    }
    fn size(&self) -> u64 {
        match self {
            Ct::R(_) => 1,
            Ct::V(rs) => rs.len() as u64,
            Ct::A(cs) => cs.iter().map(Ct::size).sum(),
        }
    }
    fn scale(&self, r: f64) -> Ct {
        match self {
            Ct::R(x) => Ct::R(x * r),
            Ct::V(xs) => Ct::V(xs.iter().map(|x| x * r).collect()),
            Ct::A(cs) => Ct::A(cs.iter().map(|c| c.scale(r)).collect()),
        }
    }
    /// `self += c`, elementwise (shapes that differ add what overlaps).
    fn add(&mut self, c: &Ct) {
        match (self, c) {
            (Ct::R(x), Ct::R(y)) => *x += y,
            (Ct::V(xs), Ct::V(ys)) => xs.iter_mut().zip(ys).for_each(|(x, y)| *x += y),
            (Ct::V(xs), Ct::A(ys)) => xs.iter_mut().zip(ys).for_each(|(x, y)| if let Ct::R(y) = y { *x += y }),
            (Ct::A(xs), Ct::V(ys)) => xs.iter_mut().zip(ys).for_each(|(x, y)| x.add(&Ct::R(*y))),
            (Ct::A(xs), Ct::A(ys)) => xs.iter_mut().zip(ys).for_each(|(x, y)| x.add(y)),
            _ => {}
        }
    }
    /// The place at `path` (outermost index first), if it is there.
    fn at_mut(&mut self, path: &[usize]) -> Option<Place<'_>> {
        let mut cur = self;
        for (k, &i) in path.iter().enumerate() {
            cur = match cur {
                Ct::A(cs) => cs.get_mut(i)?,
                Ct::V(rs) if k + 1 == path.len() => return rs.get_mut(i).map(Place::Real),
                _ => return None,
            };
        }
        Some(Place::Ct(cur))
    }
    /// `self[path] += c`.
    fn add_at(&mut self, path: &[usize], c: &Ct) {
        match (self.at_mut(path), c) {
            (Some(Place::Ct(t)), c) => t.add(c),
            (Some(Place::Real(x)), Ct::R(y)) => *x += y,
            _ => {}
        }
    }
    /// Its items as cotangents (a flat array's reals one by one).
    fn into_items(self) -> Vec<Ct> {
        match self {
            Ct::R(_) => vec![],
            Ct::V(rs) => rs.into_iter().map(Ct::R).collect(),
            Ct::A(cs) => cs,
        }
    }
    fn show(&self) -> String {
        let (items, len): (Vec<String>, usize) = match self {
            Ct::R(r) => return show_real(*r),
            Ct::V(rs) => (rs.iter().take(8).map(|r| show_real(*r)).collect(), rs.len()),
            Ct::A(cs) => (cs.iter().take(8).map(Ct::show).collect(), cs.len()),
        };
        format!("[{}{}]", items.join(", "), if len > 8 { ", …" } else { "" })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    OneHot,
    InPlace,
}

/// Fig. 5's `ES { grad, dfrag, accum }`.
pub struct Es {
    pub mode: Mode,
    pub grad: BTreeMap<i64, Ct>,
    pub dfrag: BTreeMap<i64, Rc<Node>>,
    pub accum: BTreeMap<i64, Ct>,
}

pub struct EsVal(pub RefCell<Es>);

impl std::fmt::Debug for EsVal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.show())
    }
}

impl ExtValue for EsVal {
    fn type_name(&self) -> &'static str {
        "ES"
    }
    fn show(&self) -> String {
        let es = self.0.borrow();
        let acc: Vec<String> = es.accum.iter().take(8).map(|(i, c)| format!("{i} ↦ {}", c.show())).collect();
        let grad: Vec<String> = es.grad.iter().take(8).map(|(i, c)| format!("{i} ↦ {}", c.show())).collect();
        format!("ES {{ accum = {{{}}}, grad = {{{}}} }}", acc.join(", "), grad.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

pub fn es_type() -> Type {
    Type::con("ES", vec![])
}

fn es_arg(v: &Value, span: Span, what: &str) -> Result<Rc<dyn ExtValue>, RunError> {
    match v {
        Value::Ext(e) if e.as_any().is::<EsVal>() => Ok(e.clone()),
        other => Err(RunError::runtime(span, format!("{what} expects the reverse pass's state ES, got {other}"))),
    }
}
fn es_of(e: &Rc<dyn ExtValue>) -> &RefCell<Es> {
    &e.as_any().downcast_ref::<EsVal>().expect("checked").0
}

/// `map[k] += c` at `path` within a value of shape `shape` (`add_at`); the cells it writes. An entry
/// that is there is added to where it lies (issue 13: it was taken out of the map and put back).
fn add_into(map: &mut BTreeMap<i64, Ct>, k: i64, shape: &Shape, path: &[usize], c: &Ct) -> u64 {
    if let Some(t) = map.get_mut(&k) {
        t.add_at(path, c);
        return c.size();
    }
    let mut slot = None;
    let cells = add_at(&mut slot, shape, path, c);
    if let Some(t) = slot {
        map.insert(k, t);
    }
    cells
}

/// `slot += c` at `path` within a value of shape `shape`; the cells it writes.
fn add_at(slot: &mut Option<Ct>, shape: &Shape, path: &[usize], c: &Ct) -> u64 {
    let mut cells = c.size();
    if slot.is_none() {
        if path.is_empty() {
            *slot = Some(c.clone());
            return cells;
        }
        cells += shape.size();
        *slot = Some(Ct::zeros(shape));
    }
    if let Some(t) = slot.as_mut() {
        t.add_at(path, c);
    }
    cells
}

/// Fig. 5's eval4 (Fig. 17's rules for the array constructors), iteratively: `eval c d` at `path`
/// (where within d's value c belongs; always empty in `OneHot` mode).
fn eval(m: &mut Machine, es: &mut Es, c: Ct, root: &Rc<Node>) -> Result<(), RunError> {
    let mut stack: Vec<(Ct, Rc<Node>, Vec<usize>)> = vec![(c, root.clone(), vec![])];
    let mut cells = 0u64;
    let mut visits = 0u64;
    let res = (|| {
        while let Some((c, n, path)) = stack.pop() {
            m.tick(1)?;
            visits += 1;
            // (the visits per node are the graph's: none is drawn, none is kept)
            if m.draws_graph() {
                *rt(m).visits.entry(n.serial).or_default() += 1;
            }
            match &n.kind {
                Kind::Zero => {}
                // grad[v] += c
                Kind::Input(v) => cells += add_into(&mut es.grad, *v, &n.shape, &path, &c),
                // eval c d2 ∘ eval c d1: d1 first
                Kind::Add(a, b) => {
                    stack.push((c.clone(), b.clone(), path.clone()));
                    stack.push((c, a.clone(), path));
                }
                Kind::Scale(r, d) => {
                    cells += c.size();
                    stack.push((c.scale(*r), d.clone(), path));
                }
                // accum[i] += c; dfrag[i] = d: sharing in the primal is addition in the dual
                Kind::Share(i, d) => {
                    cells += add_into(&mut es.accum, *i, &n.shape, &path, &c);
                    es.dfrag.insert(*i, d.clone());
                }
                Kind::Index(d, i) => match es.mode {
                    // §4.4: the transpose of Index is a one-hot array shaped like d's value
                    Mode::OneHot => {
                        let mut hot = Ct::zeros(&d.shape);
                        cells += d.shape.size();
                        match hot.at_mut(&[*i]) {
                            Some(Place::Ct(t)) => *t = c,
                            Some(Place::Real(x)) => {
                                if let Ct::R(r) = c {
                                    *x = r
                                }
                            }
                            None => {}
                        }
                        stack.push((hot, d.clone(), vec![]));
                    }
                    Mode::InPlace => {
                        let mut p = vec![*i];
                        p.extend(path);
                        stack.push((c, d.clone(), p));
                    }
                },
                // SumOuter ↔ replicate (its result is a scalar: `sum` is over reals)
                Kind::SumOuter(d) => {
                    let k = match &*d.shape {
                        Shape::Arr { items, .. } => items.len(),
                        Shape::Scalar => 0,
                    };
                    cells += k as u64 * c.size();
                    let spread = match c {
                        Ct::R(r) => Ct::V(vec![r; k]),
                        c => Ct::A(vec![c; k]),
                    };
                    stack.push((spread, d.clone(), vec![]));
                }
                Kind::Build1(ds) | Kind::LitArray(ds) => match path.split_first() {
                    Some((j, rest)) => {
                        if let Some(d) = ds.get(*j) {
                            stack.push((c, d.clone(), rest.to_vec()));
                        }
                    }
                    None => {
                        for (cj, d) in c.into_items().into_iter().zip(ds).rev() {
                            stack.push((cj, d.clone(), vec![]));
                        }
                    }
                },
                // Replicate ↔ sumOuter
                Kind::Replicate(_, d) => match path.split_first() {
                    Some((_, rest)) => stack.push((c, d.clone(), rest.to_vec())),
                    None => {
                        let mut total = Ct::zeros(&d.shape);
                        for x in c.into_items() {
                            cells += x.size();
                            total.add(&x);
                        }
                        stack.push((total, d.clone(), vec![]));
                    }
                },
            }
        }
        Ok(())
    })();
    m.count("eval_visits", visits);
    m.count("ct_cells", cells);
    res
}

/// The rows a trace step shows: `accum` and `grad` after the step.
fn rows(es: &Es) -> Vec<(String, Shown)> {
    let mut out: Vec<(String, Shown)> = vec![];
    for (i, c) in es.accum.iter().rev().take(10) {
        out.push((format!("accum {i}"), shown(c)));
    }
    for (v, c) in es.grad.iter().take(10) {
        out.push((format!("grad {v}"), shown(c)));
    }
    out
}
fn shown(c: &Ct) -> Shown {
    match c {
        Ct::R(r) => (*r).into(),
        c => Shown::text(c.show()),
    }
}

/// `emptyES`: the reverse pass's state, its mode fixed by the stage.
fn empty(mode: Mode) -> Value {
    Value::Ext(Rc::new(EsVal(RefCell::new(Es { mode, grad: BTreeMap::new(), dfrag: BTreeMap::new(), accum: BTreeMap::new() }))))
}
fn b_empty_one_hot(_: &mut Machine, _: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    Ok(empty(Mode::OneHot))
}
fn b_empty_in_place(_: &mut Machine, _: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    Ok(empty(Mode::InPlace))
}

/// `eval c d es`: the wrapper's first eval of an output's Delta with its cotangent (a root of the graph).
fn b_eval(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let c = Ct::of(&args[0]);
    let d = delta_arg(&args[1], span, "eval")?;
    let e = es_arg(&args[2], span, "eval")?;
    rt(m).roots.push(d.clone());
    {
        let mut es = es_of(&e).borrow_mut();
        // (the cotangent kept for the trace only: a dense one is as long as its array)
        let traced = m.tracing().then(|| c.clone());
        eval(m, &mut es, c, &d)?;
        if let Some(c) = traced {
            let state = rows(&es);
            m.trace(TraceStep {
                kind: "eval".into(),
                node: Some(d.serial),
                span: (!d.span.is_none()).then_some(d.span),
                factor: Some(shown(&c)),
                note: format!("eval {} ({})", c.show(), show_delta(&d, 6)),
                state,
                ..TraceStep::default()
            });
        }
    }
    Ok(Value::Ext(e))
}

/// Fig. 5's backprop: while accum has an entry, take the largest ID, evaluate its fragment with it.
fn b_backprop(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let e = es_arg(&args[0], span, "backprop")?;
    {
        let mut es = es_of(&e).borrow_mut();
        while let Some((i, c)) = es.accum.pop_last() {
            let Some(d) = es.dfrag.remove(&i) else { continue };
            let traced = m.tracing().then(|| c.clone());
            eval(m, &mut es, c, &d)?;
            if let Some(c) = traced {
                let state = rows(&es);
                m.trace(TraceStep {
                    kind: "backprop".into(),
                    node: Some(d.serial),
                    span: (!d.span.is_none()).then_some(d.span),
                    factor: Some(shown(&c)),
                    note: format!("pop ID {i} with {}: eval {}", c.show(), show_delta(&d, 6)),
                    state,
                    ..TraceStep::default()
                });
            }
        }
    }
    Ok(Value::Ext(e))
}

/// `gradOf v x es`: grad ! v in the shape of the input's primal x (zeros where it never got one).
fn b_grad_of(_: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let v = int_arg(&args[0], span, "gradOf")?;
    let e = es_arg(&args[2], span, "gradOf")?;
    let es = es_of(&e).borrow();
    Ok(match es.grad.get(&v) {
        Some(c) => c.value(),
        None => Ct::zeros(&Shape::of(&args[1])).value(),
    })
}

/// The reverse pass's builtins, `emptyES` making a state in `mode`.
pub fn eval_builtins(mode: Mode) -> Vec<Builtin> {
    let (d, es, a) = (delta_type(), es_type(), Type::Var(1));
    let f = Type::fun;
    let b = |name, vars: &[u32], ty, arity, run| Builtin { name, scheme: Scheme { vars: vars.to_vec(), ty }, arity, lazy_last: false, run };
    vec![
        b("emptyES", &[], es.clone(), 0, if mode == Mode::OneHot { b_empty_one_hot } else { b_empty_in_place }),
        b("eval", &[1], f(a.clone(), f(d, f(es.clone(), es.clone()))), 3, b_eval),
        b("backprop", &[], f(es.clone(), es.clone()), 1, b_backprop),
        b("gradOf", &[1], f(Type::Int, f(a.clone(), f(es, a))), 3, b_grad_of),
    ]
}

/// Most nodes a graph carries; the rest are counted in `Graph::omitted`.
const GRAPH_LIMIT: usize = 2_000;

/// The Delta DAG the forward pass built (reachable from the outputs' Deltas), every node once, with
/// its sharing and the reverse pass's visits.
pub fn graph(m: &mut Machine) -> Option<Graph> {
    let r = rt(m);
    if r.roots.is_empty() {
        return None;
    }
    // every reachable node once, its in-degree up to 2 (all `shared` needs) in the one map that
    // also says it was seen, and only the first `GRAPH_LIMIT` kept: a list of them all beside a
    // seen set and an in-degree map took more than the run's own heap on the Delta explosion
    // (twice nested 16 deep: 262,144 nodes), past the process's memory budget
    let mut kept: Vec<Rc<Node>> = vec![];
    let mut reached = 0usize;
    let mut indeg: rustc_hash::FxHashMap<u64, u8> = Default::default();
    let mut stack: Vec<Rc<Node>> = r.roots.iter().rev().cloned().collect();
    for n in &stack {
        indeg.insert(n.serial, 0);
    }
    while let Some(n) = stack.pop() {
        for (c, _) in n.children().into_iter().rev() {
            match indeg.entry(c.serial) {
                std::collections::hash_map::Entry::Occupied(mut e) => *e.get_mut() = e.get().saturating_add(1).min(2),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(1);
                    stack.push(c.clone());
                }
            }
        }
        reached += 1;
        if kept.len() < GRAPH_LIMIT {
            kept.push(n);
        }
    }
    let mut g = Graph::default();
    let keep: HashSet<u64> = kept.iter().map(|n| n.serial).collect();
    for n in &kept {
        g.nodes.push(GraphNode {
            id: n.serial,
            ctor: n.ctor().to_string(),
            label: n.label(),
            delta_id: n.id(),
            value: if let Kind::Scale(x, _) = n.kind { Some(x.into()) } else { None },
            shared: indeg.get(&n.serial).copied().unwrap_or(0) > 1,
            visits: Some(r.visits.get(&n.serial).copied().unwrap_or(0)),
            span: (!n.span.is_none()).then_some(n.span),
            ..GraphNode::default()
        });
        for (c, label) in n.children() {
            if keep.contains(&c.serial) {
                g.edges.push(GraphEdge { from: n.serial, to: c.serial, label });
            }
        }
    }
    g.omitted = (reached - g.nodes.len()) as u64;
    Some(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(vs: Vec<Value>) -> Value {
        Value::Array(vs.into())
    }
    fn reals(rs: &[f64]) -> Value {
        arr(rs.iter().map(|r| Value::Real(*r)).collect())
    }
    /// The nested form every cotangent had before flat arrays: an array of reals as `A` of `R`s.
    fn same(a: Value, b: Value) {
        assert!(a.same(&b), "{a} is not {b}");
    }
    fn nested(c: &Ct) -> Ct {
        match c {
            Ct::R(r) => Ct::R(*r),
            Ct::V(rs) => Ct::A(rs.iter().map(|r| Ct::R(*r)).collect()),
            Ct::A(cs) => Ct::A(cs.iter().map(nested).collect()),
        }
    }

    /// A flat array of reals (`V`) behaves as its nested form (`A` of `R`s) under every operation the
    /// reverse pass uses: the values, sizes and shown text are the same whichever form each side has.
    #[test]
    fn a_flat_cotangent_adds_scales_and_shows_as_its_nested_form() {
        let v = arr(vec![reals(&[1.0, 2.0]), reals(&[3.0, 4.0, 5.0]), reals(&[])]);
        let flat = Ct::of(&v);
        assert!(matches!(&flat, Ct::A(cs) if matches!(cs[0], Ct::V(_))), "rows of reals are flat: {flat:?}");
        let deep = nested(&flat);
        same(flat.value(), v.clone());
        same(deep.value(), v.clone());
        assert_eq!((flat.size(), flat.show()), (deep.size(), deep.show()));
        same(flat.scale(2.0).value(), deep.scale(2.0).value());
        // every mix of forms added, whole and at a path (into a row, into one real of a row)
        for (a, b) in [(&flat, &flat), (&flat, &deep), (&deep, &flat), (&deep, &deep)] {
            let mut x = a.clone();
            x.add(b);
            same(x.value(), flat.scale(2.0).value());
            let mut x = a.clone();
            x.add_at(&[1], &Ct::of(&reals(&[10.0, 20.0, 30.0])));
            x.add_at(&[0, 1], &Ct::R(0.5));
            x.add_at(&[0, 7], &Ct::R(9.0)); // outside: nothing
            same(x.value(), arr(vec![reals(&[1.0, 2.5]), reals(&[13.0, 24.0, 35.0]), reals(&[])]));
        }
        // a one-hot: zeros of a flat shape are flat, and a real set at its index
        let shape = Shape::of(&reals(&[7.0, 8.0, 9.0]));
        let mut hot = Ct::zeros(&shape);
        assert!(matches!(hot, Ct::V(_)));
        hot.add_at(&[2], &Ct::R(-1.5));
        same(hot.value(), reals(&[0.0, 0.0, -1.5]));
        assert_eq!(hot.clone().into_items().len(), 3);
        assert_eq!((shape.size(), Shape::of(&v).size()), (3, 5));
    }
}
