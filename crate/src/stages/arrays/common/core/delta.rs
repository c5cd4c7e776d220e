//! The array-level Delta of §6.1 (Fig. 12) as runtime values, each node caching a zero of its shape
//! (the paper's O(1) `shapeDelta`, §6.4), and the array reverse pass of §6.4 (Figs. 16–17): `eval`
//! sends a cotangent array down a Delta, stopping at `Share id d` (it adds the cotangent to
//! `accum[id]` and records `dfrag[id] = d`); `backprop` pops the largest ID, whose cotangent is
//! complete (IDs grow bottom-up, Invariant 1), and evaluates its fragment. Its steps are the trace.
//!
//! Decisions: the maps are ordinary ordered maps with run-time shape checks (footnote 29); the Index
//! rule has the trailing `d` the paper omits (notes §8.18); a scatter drops entries out of range so
//! that gather and scatter stay mutual transposes (§8.1); `Scale` takes a scalar or an array of the
//! cotangent's shape.

use super::runtime::{add, index, scale_by, transpose, zero_like};
use crate::diag::Span;
use crate::interp::{Builtin, Machine, RunError, Shown, TraceStep};
use crate::ir::{Scheme, Type};
use crate::value::{ExtValue, Value};
use std::collections::BTreeMap;
use std::rc::Rc;

type Res = Result<Value, RunError>;

#[derive(Debug)]
pub enum Kind {
    Zero,
    /// The k-th input (main's k-th parameter).
    Input(usize),
    Add(Rc<Node>, Rc<Node>),
    Scale(Value, Rc<Node>),
    Share(i64, Rc<Node>),
    Index(Rc<Node>, i64),
    SumOuter(Rc<Node>),
    /// The gather's index function and its bound sizes.
    Gather(Value, Value, Rc<Node>),
    Scatter(Value, Value, Rc<Node>),
    LitArray(Vec<Rc<Node>>),
    Replicate(usize, Rc<Node>),
    Transpose(Vec<usize>, Rc<Node>),
    /// The sequential loop (fold.rs, beyond the paper): the body's vjp, the free dual variables'
    /// primals, the primal accumulators and elements; the Deltas of z, xs and each free variable.
    ScanL(Box<ScanL>),
}

#[derive(Debug)]
pub struct ScanL {
    vjp: Value,
    ctx: Vec<Value>,
    accs: Value,
    xs: Value,
    dz: Rc<Node>,
    dxs: Rc<Node>,
    dvs: Vec<Rc<Node>>,
}

#[derive(Debug)]
pub struct Node {
    pub kind: Kind,
    /// A zero of the node's shape.
    pub zero: Value,
    /// Creation order (the graph's node id).
    pub serial: u64,
}

#[derive(Clone, Debug)]
pub struct DeltaVal(pub Rc<Node>);

impl ExtValue for DeltaVal {
    fn type_name(&self) -> &'static str {
        "Delta"
    }
    fn show(&self) -> String {
        show(&self.0, 3)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn name(k: &Kind) -> &'static str {
    match k {
        Kind::Zero => "Zero",
        Kind::Input(_) => "Input",
        Kind::Add(..) => "Add",
        Kind::Scale(..) => "Scale",
        Kind::Share(..) => "Share",
        Kind::Index(..) => "Index",
        Kind::SumOuter(_) => "SumOuter",
        Kind::Gather(..) => "Gather",
        Kind::Scatter(..) => "Scatter",
        Kind::LitArray(_) => "LitArray",
        Kind::Replicate(..) => "Replicate",
        Kind::Transpose(..) => "Transpose",
        Kind::ScanL(_) => "ScanL",
    }
}

fn children(k: &Kind) -> Vec<&Rc<Node>> {
    match k {
        Kind::Zero | Kind::Input(_) => vec![],
        Kind::Add(a, b) => vec![a, b],
        Kind::Scale(_, d) | Kind::Share(_, d) | Kind::Index(d, _) | Kind::SumOuter(d) | Kind::Gather(_, _, d) | Kind::Scatter(_, _, d) | Kind::Replicate(_, d) | Kind::Transpose(_, d) => vec![d],
        Kind::LitArray(ds) => ds.iter().collect(),
        Kind::ScanL(l) => [&l.dz, &l.dxs].into_iter().chain(l.dvs.iter()).collect(),
    }
}

/// A short rendering, `depth` levels deep (a Share below the top shows only its ID).
pub fn show(n: &Node, depth: usize) -> String {
    let head = match &n.kind {
        Kind::Input(k) => return format!("Input {k}"),
        Kind::Share(id, _) if depth < 3 => return format!("Share{id} …"),
        Kind::Share(id, _) => format!("Share{id}"),
        Kind::Index(_, i) => format!("Index [{i}]"),
        Kind::Transpose(p, _) => format!("Transpose {p:?}"),
        Kind::Replicate(k, _) => format!("Replicate {k}"),
        k => name(k).to_string(),
    };
    if depth == 0 {
        return head;
    }
    let cs: Vec<String> = children(&n.kind).iter().map(|c| format!("({})", show(c, depth - 1))).collect();
    if cs.is_empty() {
        head
    } else {
        format!("{head} {}", cs.join(" "))
    }
}

/// What the chain's runtime keeps between builtins: the ID supply, the node count, the last root.
#[derive(Default)]
pub struct DualState {
    pub next_id: i64,
    pub serial: u64,
    pub root: Option<Rc<Node>>,
}

fn node(m: &mut Machine, kind: Kind, zero: Value) -> Value {
    let st = m.state::<DualState>();
    st.serial += 1;
    let serial = st.serial;
    m.count("delta_nodes", 1);
    Value::Ext(Rc::new(DeltaVal(Rc::new(Node { kind, zero, serial }))))
}

fn d(v: &Value, span: Span) -> Result<Rc<Node>, RunError> {
    v.ext::<DeltaVal>().map(|x| x.0.clone()).ok_or_else(|| RunError::runtime(span, format!("expected a Delta, got {v}")))
}

fn int(v: &Value, span: Span) -> Result<i64, RunError> {
    v.as_int().ok_or_else(|| RunError::runtime(span, format!("expected an integer, got {v}")))
}

fn sizes_of(v: &Value) -> Vec<usize> {
    match v {
        Value::Tuple(vs) => vs.iter().map(|s| s.as_int().unwrap_or(0).max(0) as usize).collect(),
        v => vec![v.as_int().unwrap_or(0).max(0) as usize],
    }
}

fn peel(v: &Value, k: usize) -> Value {
    let mut cur = v.clone();
    for _ in 0..k {
        cur = match cur {
            Value::Array(xs) => xs.first().cloned().unwrap_or(Value::Real(0.0)),
            other => other.empty_elem().cloned().unwrap_or(other),
        };
    }
    cur
}

fn fill(sizes: &[usize], elem: &Value) -> Value {
    // an empty dimension keeps the shape inside it (value.rs)
    sizes.iter().rev().fold(elem.clone(), |acc, &k| if k == 0 { Value::empty_keeping(acc) } else { Value::Array(vec![acc; k].into()) })
}

fn index_dims(f: &Value, m: &mut Machine, sizes: usize) -> Result<usize, RunError> {
    // the number of indexes an index function returns, read by calling it at 0 (its type says it)
    let arg = if sizes == 1 { Value::Int(0) } else { Value::Tuple(vec![Value::Int(0); sizes].into()) };
    match m.apply(f.clone(), arg)? {
        Value::Array(xs) => Ok(xs.len()),
        _ => Ok(1),
    }
}

fn b_zero(m: &mut Machine, a: &mut Vec<Value>, _: Span) -> Res {
    let z = zero_like(&a[0]);
    Ok(node(m, Kind::Zero, z))
}
fn b_input(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let k = int(&a[0], s)?.max(0) as usize;
    let z = zero_like(&a[1]);
    Ok(node(m, Kind::Input(k), z))
}
fn b_add(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let (x, y) = (d(&a[0], s)?, d(&a[1], s)?);
    let z = x.zero.clone();
    Ok(node(m, Kind::Add(x, y), z))
}
fn b_scale(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let x = d(&a[1], s)?;
    let z = x.zero.clone();
    Ok(node(m, Kind::Scale(a[0].clone(), x), z))
}
fn b_share(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let (id, x) = (int(&a[0], s)?, d(&a[1], s)?);
    let z = x.zero.clone();
    Ok(node(m, Kind::Share(id, x), z))
}
fn b_index(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let (x, i) = (d(&a[0], s)?, int(&a[1], s)?);
    let z = index(&x.zero, 0, s)?;
    Ok(node(m, Kind::Index(x, i), z))
}
fn b_sum_outer(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let x = d(&a[0], s)?;
    let z = peel(&x.zero, 1);
    Ok(node(m, Kind::SumOuter(x), z))
}
fn b_gather(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    // Gather sizes d f: shape sizes ++ (d's shape after the n indexes f returns)
    let x = d(&a[1], s)?;
    let sh = sizes_of(&a[0]);
    // An empty gather takes nothing, but its zero's element is still d's shape after the indexes `f`
    // returns (`gather 0 r (\i -> [1 + i])` of a vector is an empty vector of scalars, not of rows:
    // a row there made `sum` of it a row, and its cotangent could not be added to a scalar's). So `f`
    // is read at 0 as for any gather; where that fails at run time (at 0 it may index an empty array:
    // `map (\r -> r ! (length r - 1)) []`, a property-test case) the zero keeps d's whole shape.
    let n = match index_dims(&a[2], m, sh.len()) {
        Ok(n) => n,
        Err(e) if sh.contains(&0) && matches!(e, RunError::Runtime { .. }) => 0,
        Err(e) => return Err(e),
    };
    let z = fill(&sh, &peel(&x.zero, n));
    Ok(node(m, Kind::Gather(a[0].clone(), a[2].clone(), x), z))
}
fn b_scatter(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    // Scatter sizes d f: shape sizes ++ (d's shape after the m bound dims)
    let x = d(&a[1], s)?;
    let sh = sizes_of(&a[0]);
    let mdims = arity_of(&x.zero, &sh, m, &a[2])?;
    let z = fill(&sh, &peel(&x.zero, mdims));
    Ok(node(m, Kind::Scatter(a[0].clone(), a[2].clone(), x), z))
}
/// How many dims a scatter's index function binds: tried at 1, 2, … up to the rank of the array
/// it reads (`zero`'s: it binds no more dims than that array has), with a tuple of that many zeros.
fn arity_of(zero: &Value, _sh: &[usize], m: &mut Machine, f: &Value) -> Result<usize, RunError> {
    for k in 1..=outer(zero).len().max(super::lang::MAX_DIMS) {
        let arg = if k == 1 { Value::Int(0) } else { Value::Tuple(vec![Value::Int(0); k].into()) };
        if m.apply(f.clone(), arg).is_ok() {
            return Ok(k);
        }
    }
    Ok(1)
}
fn b_lit(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let Some(xs) = a[0].elems() else { return Err(RunError::runtime(s, "LitArray expects an array of Deltas")) };
    let ds: Vec<Rc<Node>> = xs.iter().map(|x| d(x, s)).collect::<Result<_, _>>()?;
    let z = Value::Array(ds.iter().map(|x| x.zero.clone()).collect());
    Ok(node(m, Kind::LitArray(ds), z))
}
fn b_replicate(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let (k, x) = (int(&a[0], s)?.max(0) as usize, d(&a[1], s)?);
    let z = fill(&[k], &x.zero);
    Ok(node(m, Kind::Replicate(k, x), z))
}
fn b_transpose(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let Value::Array(ps) = &a[0] else { return Err(RunError::runtime(s, "Transpose expects a permutation")) };
    let p: Vec<usize> = ps.iter().map(|v| v.as_int().unwrap_or(0).max(0) as usize).collect();
    let x = d(&a[1], s)?;
    let z = transpose(m, &p, &x.zero, s)?;
    Ok(node(m, Kind::Transpose(p, x), z))
}

fn b_scanl(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let Some(ds) = a[6].elems() else { return Err(RunError::runtime(s, "ScanL expects an array of Deltas")) };
    let dvs: Vec<Rc<Node>> = ds.iter().map(|x| d(x, s)).collect::<Result<_, _>>()?;
    // the free variables' primals: none, one, or a tuple of them (fold.rs's ctx)
    let ctx = match (&a[1], dvs.len()) {
        (_, 0) => vec![],
        (v, 1) => vec![v.clone()],
        (Value::Tuple(vs), _) => vs.to_vec(),
        _ => return Err(RunError::runtime(s, "ScanL expects the free variables' primals")),
    };
    let z = zero_like(&a[2]);
    let l = ScanL { vjp: a[0].clone(), ctx, accs: a[2].clone(), xs: a[3].clone(), dz: d(&a[4], s)?, dxs: d(&a[5], s)?, dvs };
    Ok(node(m, Kind::ScanL(Box::new(l)), z))
}

/// ScanL's transpose (fold.rs): a reverse fold over the primal accumulators, the body's vjp once
/// per element; what it sends to z, xs and each free variable, in that order.
fn scanl_back(m: &mut Machine, l: &ScanL, c: &Value, s: Span) -> Result<Vec<(Value, Rc<Node>)>, RunError> {
    let (Some(cs), Some(accs)) = (c.elems(), l.accs.elems()) else { return Err(RunError::runtime(s, "ScanL's cotangent is not an array")) };
    let xs = l.xs.elems().unwrap_or(&[]);
    let n = xs.len();
    if cs.len() != n + 1 || accs.len() != n + 1 {
        return Err(RunError::runtime(s, "ScanL: the cotangent's length is not the accumulators'"));
    }
    // An empty cotangent has no entries, but the element it keeps may be another accumulator's: a
    // loop of a map over no rows whose accumulator changes length (`fold (\acc x -> v) (replicate 3
    // …)`, vectorised by bot's B-scan) has each of its accumulators' cotangents shaped by the
    // first, and the body's vjp then sums 3 where v has 2 (wide-run seeds 1332 and 2417). It is
    // read at its own accumulator's shape, which is the same value.
    let conform = |ct: &Value, acc: &Value| match (ct.elems(), acc.elems()) {
        (Some(a), Some(b)) if a.is_empty() && b.is_empty() => zero_like(acc),
        _ => ct.clone(),
    };
    let mut ca = conform(&cs[n], &accs[n]);
    let mut cxs = vec![Value::Unit; n];
    let mut cvs: Vec<Value> = l.dvs.iter().map(|v| v.zero.clone()).collect();
    for i in (0..n).rev() {
        m.tick(1)?;
        let input = Value::tuple([accs[i].clone(), xs[i].clone()].into_iter().chain(l.ctx.iter().cloned()).collect());
        let g = m.apply(l.vjp.clone(), Value::pair(input, ca))?;
        let Value::Tuple(gs) = g else { return Err(RunError::runtime(s, "ScanL: the body's vjp did not return a tuple")) };
        ca = add(&conform(&cs[i], &accs[i]), &gs[0], s)?;
        cxs[i] = gs[1].clone();
        for (cv, gv) in cvs.iter_mut().zip(gs.iter().skip(2)) {
            *cv = add(cv, gv, s)?;
        }
    }
    let cxs = if n == 0 { l.dxs.zero.clone() } else { Value::Array(cxs.into()) };
    let mut out = vec![(ca, l.dz.clone()), (cxs, l.dxs.clone())];
    out.extend(cvs.into_iter().zip(l.dvs.iter().cloned()));
    Ok(out)
}

/// `genID ()`: the next ID (§6.3's IdGen, run in direct style).
fn b_gen_id(m: &mut Machine, _: &mut Vec<Value>, _: Span) -> Res {
    let st = m.state::<DualState>();
    st.next_id += 1;
    Ok(Value::Int(st.next_id))
}

/// `runIds m`: runs the forward pass with the ID supply reset (§6.5's wrapper starts it at 1).
fn b_run_ids(m: &mut Machine, a: &mut Vec<Value>, _: Span) -> Res {
    *m.state::<DualState>() = DualState::default();
    m.apply(a[0].clone(), Value::Unit)
}


/// The reverse pass's state (Fig. 16's ES).
#[derive(Default)]
struct Es {
    grad: BTreeMap<usize, Value>,
    dfrag: BTreeMap<i64, Rc<Node>>,
    accum: BTreeMap<i64, Value>,
}

fn one_hot(zero: &Value, i: i64, c: &Value) -> Value {
    match zero {
        Value::Array(xs) => Value::Array(xs.iter().enumerate().map(|(k, z)| if k as i64 == i { c.clone() } else { z.clone() }).collect()),
        z => z.clone(),
    }
}

/// Fig. 17's `eval c d`, with an explicit work list (no native recursion along the Delta).
fn eval(m: &mut Machine, es: &mut Es, c: Value, d0: &Rc<Node>, s: Span) -> Result<(), RunError> {
    let mut work = vec![(c, d0.clone())];
    while let Some((c, d)) = work.pop() {
        m.tick(1)?;
        m.count("eval_visits", 1);
        // An empty cotangent where the node's zero is not empty lost its inner dimensions (a 0×k
        // array is `[]`, and a transpose or index of it cannot give them back): it is that zero.
        let c = match (&c, &d.zero) {
            (Value::Array(cs), z) if cs.is_empty() && !matches!(z, Value::Array(zs) if zs.is_empty()) => d.zero.clone(),
            _ => c,
        };
        match &d.kind {
            Kind::Zero => {}
            Kind::Input(k) => {
                let v = match es.grad.remove(k) {
                    Some(g) => add(&g, &c, s)?,
                    None => c,
                };
                es.grad.insert(*k, v);
            }
            Kind::Add(a, b) => {
                // eval c d2 ∘ eval c d1: d1 first
                work.push((c.clone(), b.clone()));
                work.push((c, a.clone()));
            }
            Kind::Scale(r, x) => work.push((scale_by(&c, r, "Scale", s)?, x.clone())),
            Kind::Share(id, x) => {
                es.dfrag.insert(*id, x.clone());
                let v = match es.accum.remove(id) {
                    Some(g) => add(&g, &c, s)?,
                    None => c,
                };
                es.accum.insert(*id, v);
            }
            Kind::Index(x, i) => work.push((one_hot(&x.zero, *i, &c), x.clone())),
            Kind::SumOuter(x) => work.push((fill_like(&x.zero, &c), x.clone())),
            Kind::Gather(sh, f, x) => {
                let sc = scatter_back(m, &x.zero, sh, f, &c, s)?;
                work.push((sc, x.clone()))
            }
            Kind::Scatter(sh, f, x) => {
                let g = gather_back(m, &x.zero, sh, f, &c, s)?;
                work.push((g, x.clone()))
            }
            Kind::LitArray(ds) => {
                // index 0 first (Fig. 17)
                for (k, x) in ds.iter().enumerate().rev() {
                    work.push((index(&c, k as i64, s)?, x.clone()));
                }
            }
            Kind::Replicate(_, x) => {
                // the scalar zero where an array is meant is the zero of unknown shape (runtime.rs):
                // no rows to sum (a replicate of no rows whose cotangent lost its shape, wide-run seed 4597)
                let cs = match c.elems() {
                    Some(cs) => cs,
                    None if matches!(&c, Value::Real(z) if *z == 0.0) => Default::default(),
                    None => return Err(RunError::runtime(s, "Replicate's cotangent is not an array")),
                };
                let mut acc = x.zero.clone();
                for ci in cs.iter() {
                    acc = add(&acc, ci, s)?;
                }
                work.push((acc, x.clone()))
            }
            Kind::ScanL(l) => {
                // z first (as the children's order)
                work.extend(scanl_back(m, l, &c, s)?.into_iter().rev());
            }
            Kind::Transpose(p, x) => {
                let mut inv = vec![0; p.len()];
                for (q, &dd) in p.iter().enumerate() {
                    if let Some(slot) = inv.get_mut(dd) {
                        *slot = q;
                    }
                }
                work.push((transpose(m, &inv, &c, s)?, x.clone()))
            }
        }
    }
    Ok(())
}

/// `replicate (head (shapeDelta d)) c`.
fn fill_like(zero: &Value, c: &Value) -> Value {
    match zero {
        Value::Array(xs) => Value::Array(vec![c.clone(); xs.len()].into()),
        _ if zero.empty_elem().is_some() => Value::empty_keeping(c.clone()),
        _ => c.clone(),
    }
}

/// The transpose of a gather: `scatter (shapeDelta d) c f`.
fn scatter_back(m: &mut Machine, zero: &Value, sh: &Value, f: &Value, c: &Value, s: Span) -> Res {
    // an empty gather took nothing: its transpose gives the source's zero, without calling `f`
    let sizes = sizes_of(sh);
    if sizes.contains(&0) {
        return Ok(zero.clone());
    }
    let out_sizes = outer(zero);
    let mdims = sizes.len();
    let n = index_dims(f, m, mdims)?;
    let name = super::lang::scatter_name(mdims.max(1), n.max(1));
    let sizes = sizes_value(&out_sizes, n);
    call_builtin(m, name, &mut vec![sizes, c.clone(), f.clone()], s)
}

/// The transpose of a scatter: `gather (shapeDelta d) c f`.
fn gather_back(m: &mut Machine, zero: &Value, sh: &Value, f: &Value, c: &Value, s: Span) -> Res {
    let n = sizes_of(sh).len();
    let mdims = arity_of(zero, &[], m, f)?;
    let in_sizes = outer(zero);
    let name = super::lang::gather_name(mdims.max(1), n.max(1));
    let sizes = sizes_value(&in_sizes, mdims);
    call_builtin(m, name, &mut vec![sizes, c.clone(), f.clone()], s)
}

/// The first `n` of a zero's outer sizes as a gather's or scatter's sizes (an Int for one). A
/// dimension past the zero's is under an empty one (an empty array keeps no inner shape: `[[], []]`
/// of a packed matrix with no rows, in a map), so its size, never read, is 0.
fn sizes_value(outer: &[usize], n: usize) -> Value {
    let at = |k: usize| Value::Int(outer.get(k).copied().unwrap_or(0) as i64);
    if n == 1 {
        at(0)
    } else {
        Value::Tuple((0..n).map(at).collect())
    }
}

fn outer(v: &Value) -> Vec<usize> {
    let mut out = vec![];
    let mut cur = v.clone();
    loop {
        cur = match cur {
            Value::Array(xs) => {
                out.push(xs.len());
                xs.first().cloned().unwrap_or(Value::Real(0.0))
            }
            other => match other.empty_elem() {
                Some(e) => {
                    out.push(0);
                    e.clone()
                }
                None => return out,
            },
        };
    }
}

fn call_builtin(m: &mut Machine, name: &'static str, args: &mut Vec<Value>, s: Span) -> Res {
    // the gather/scatter runtimes read their dims from the builtin's name: call them by name
    super::runtime::call_named(m, name, args, s)
}

fn show_map<K: std::fmt::Display>(m: &BTreeMap<K, Value>) -> Shown {
    Shown::text(m.iter().map(|(k, v)| format!("{k} ↦ {v}")).collect::<Vec<_>>().join(", "))
}

/// `reversePass c d` (§6.4): eval, then backprop's max-ID loop; returns the gradient map.
fn b_reverse_pass(m: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    // a tuple output: each component's Delta is evaluated with its part of the seed, then one loop
    let mut roots = vec![];
    let mut stack = vec![(a[0].clone(), a[1].clone())];
    while let Some((c, dv)) = stack.pop() {
        match (&c, &dv) {
            (Value::Tuple(cs), Value::Tuple(ds)) if cs.len() == ds.len() => stack.extend(cs.iter().cloned().zip(ds.iter().cloned()).rev()),
            _ => roots.push((c, d(&dv, s)?)),
        }
    }
    m.state::<DualState>().root = roots.first().map(|r| r.1.clone());
    let mut es = Es::default();
    for (c, root) in roots {
        eval(m, &mut es, c, &root, s)?;
    }
    while let Some((id, c)) = es.accum.pop_last() {
        let Some(frag) = es.dfrag.remove(&id) else { continue };
        m.count("backprop_ids", 1);
        if m.tracing() {
            let note = format!("pop ID {id} with cotangent {c}: eval of {}", show(&frag, 2));
            m.trace(TraceStep {
                kind: "backprop".into(),
                node: Some(frag.serial),
                span: None,
                factor: Some(Shown::text(c.to_string())),
                note,
                state: vec![("accum".into(), show_map(&es.accum)), ("grad".into(), show_map(&es.grad))],
                ..TraceStep::default()
            });
        }
        eval(m, &mut es, c, &frag, s)?;
    }
    Ok(Value::Ext(Rc::new(GradMap(es.grad))))
}

#[derive(Debug)]
pub struct GradMap(pub BTreeMap<usize, Value>);

impl ExtValue for GradMap {
    fn type_name(&self) -> &'static str {
        "Grad"
    }
    fn show(&self) -> String {
        self.0.iter().map(|(k, v)| format!("{k} ↦ {v}")).collect::<Vec<_>>().join(", ")
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `gradAt k x g`: the gradient of input k (zeros where nothing reached it; integer and boolean
/// leaves stay as they are, notes §8.13).
fn b_grad_at(_: &mut Machine, a: &mut Vec<Value>, s: Span) -> Res {
    let k = int(&a[0], s)?.max(0) as usize;
    let g = a[2].ext::<GradMap>().ok_or_else(|| RunError::runtime(s, "gradAt expects the gradient map"))?;
    Ok(g.0.get(&k).cloned().unwrap_or_else(|| zero_reals(&a[1])))
}

fn zero_reals(v: &Value) -> Value {
    match v {
        Value::Real(_) => Value::Real(0.0),
        Value::Tuple(vs) => Value::Tuple(vs.iter().map(zero_reals).collect()),
        Value::Array(vs) => Value::Array(vs.iter().map(zero_reals).collect()),
        other => other.clone(),
    }
}

pub fn delta_type() -> Type {
    Type::con("Delta", vec![])
}

/// The Delta constructors, the ID supply and the reverse pass.
pub fn builtins() -> Vec<Builtin> {
    let (a, dt) = (Type::Var(0), delta_type());
    let f = Type::fun;
    let b = |name, vars: Vec<u32>, ty, arity, run| Builtin { name, scheme: Scheme { vars, ty }, arity, lazy_last: false, run };
    let mut out = vec![
        b("Zero", vec![0], f(a.clone(), dt.clone()), 1, b_zero as crate::interp::BuiltinFn),
        b("Input", vec![0], f(Type::Int, f(a.clone(), dt.clone())), 2, b_input),
        b("Add", vec![], f(dt.clone(), f(dt.clone(), dt.clone())), 2, b_add),
        b("Scale", vec![0], f(a.clone(), f(dt.clone(), dt.clone())), 2, b_scale),
        b("Share", vec![], f(Type::Int, f(dt.clone(), dt.clone())), 2, b_share),
        b("Index", vec![], f(dt.clone(), f(Type::Int, dt.clone())), 2, b_index),
        b("SumOuter", vec![], f(dt.clone(), dt.clone()), 1, b_sum_outer),
        b("Gather", vec![0, 1], f(a.clone(), f(dt.clone(), f(Type::Var(1), dt.clone()))), 3, b_gather),
        b("Scatter", vec![0, 1], f(a.clone(), f(dt.clone(), f(Type::Var(1), dt.clone()))), 3, b_scatter),
        b("LitArray", vec![], f(Type::array(dt.clone()), dt.clone()), 1, b_lit),
        b("Replicate", vec![], f(Type::Int, f(dt.clone(), dt.clone())), 2, b_replicate),
        b("Transpose", vec![], f(Type::array(Type::Int), f(dt.clone(), dt.clone())), 2, b_transpose),
        // the sequential loop's Delta (fold.rs): vjp ctx accs xs dz dxs [dv]
        b("ScanL", vec![0, 1, 2, 3], f(a.clone(), f(Type::Var(1), f(Type::Var(2), f(Type::Var(3), f(dt.clone(), f(dt.clone(), f(Type::array(dt.clone()), dt.clone()))))))), 7, b_scanl),
        b("genID", vec![], f(Type::Unit, Type::con("M", vec![Type::Int])), 1, b_gen_id),
        // the Delta, or for a tuple output a tuple of Deltas (one per component, seeded by its part)
        b("reversePass", vec![0, 1], f(a.clone(), f(Type::Var(1), Type::con("Grad", vec![]))), 2, b_reverse_pass),
        b("gradAt", vec![0], f(Type::Int, f(a.clone(), f(Type::con("Grad", vec![]), a.clone()))), 3, b_grad_at),
    ];
    out.push(Builtin { name: "runIds", scheme: Scheme { vars: vec![0], ty: f(Type::con("M", vec![a.clone()]), a) }, arity: 1, lazy_last: true, run: b_run_ids });
    out
}

/// The Delta DAG of the last run, for drawing.
pub fn graph(m: &mut Machine) -> Option<crate::interp::Graph> {
    use crate::interp::{Graph, GraphEdge, GraphNode};
    let root = m.state::<DualState>().root.clone()?;
    let mut g = Graph::default();
    // every reachable node is counted once; the first `GRAPH_LIMIT` met are drawn, with the edges
    // between them (issue 14 item 4: on a 10^5-line program every node's label was ~2.7 KB a line)
    let mut seen = rustc_hash::FxHashSet::default();
    let mut drawn: Vec<Rc<Node>> = vec![];
    let mut reached = 0u64;
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if !seen.insert(n.serial) {
            continue;
        }
        reached += 1;
        stack.extend(children(&n.kind).into_iter().cloned());
        if drawn.len() < crate::kit::delta::graph::GRAPH_LIMIT {
            drawn.push(n);
        }
    }
    let kept: rustc_hash::FxHashSet<u64> = drawn.iter().map(|n| n.serial).collect();
    for n in &drawn {
        let id = match &n.kind {
            Kind::Share(id, _) => Some(*id),
            _ => None,
        };
        g.nodes.push(GraphNode { id: n.serial, ctor: name(&n.kind).into(), label: show(n, 0), delta_id: id, ..GraphNode::default() });
        for c in children(&n.kind) {
            if kept.contains(&c.serial) {
                g.edges.push(GraphEdge { from: n.serial, to: c.serial, label: String::new() });
            }
        }
    }
    g.omitted = reached - g.nodes.len() as u64;
    g.nodes.sort_by_key(|n| n.id);
    Some(g)
}
