//! §7's runtime: array cotangents as `Bag (Z × D[τ]2)` (BEmpty | BOne | BPlus, and §8.1's BArray),
//! the recorded reduction `Tree` of Fig. 10, and the target's array operations of Fig. 9 (`unzip`,
//! `zipWith`, `collect`, `scatter`, `sequence`, `fromList`, `getA`, `unTree`) as builtins.
//!
//! Monadic actions run in direct style (as `monad.rs`'s do): `zipWith` of a backpropagator runs
//! its effects, so `sequence` hands its array back. Bags and trees are walked, shown and dropped
//! with explicit stacks: a Bag built by n `+`s is n deep, a left fold's Tree too.

use super::graph;
use super::monad::{event, event_at};
use super::runtime::{arg, internal, plus, show_ct, Rt};
use crate::diag::Span;
use crate::interp::{Builtin, BuiltinFn, Machine, RunError};
use crate::ir::{Scheme, Type};
use crate::value::{ExtValue, Value};
use std::cell::RefCell;
use std::rc::Rc;

/// `data Bag τ = BEmpty | BOne τ | BPlus (Bag τ) (Bag τ)` (§7) `| BArray (Array τ)` (§8.1), at
/// `τ = Z × D[σ]2`. A BArray holds the cotangent of positions 0, 1, …; a shorter one than its
/// array means zeros after it, and a cell may hold the universal sparse zero (`inl ()`). A BOne
/// keeps the span of the indexing (or fold) that made it and its serial, for the stage's graph.
#[derive(Debug)]
pub enum Bag {
    Empty,
    One(i64, Value, Span, u64),
    Plus(Rc<Bag>, Rc<Bag>),
    Array(RefCell<Vec<Value>>),
}

impl Drop for Bag {
    /// Unlinks a deep BPlus tree with a stack (the default drop would recurse once per level).
    fn drop(&mut self) {
        let Bag::Plus(a, b) = self else { return };
        let mut stack = vec![std::mem::replace(a, Rc::new(Bag::Empty)), std::mem::replace(b, Rc::new(Bag::Empty))];
        while let Some(rc) = stack.pop() {
            if let Ok(mut inner) = Rc::try_unwrap(rc) {
                if let Bag::Plus(a, b) = &mut inner {
                    stack.push(std::mem::replace(a, Rc::new(Bag::Empty)));
                    stack.push(std::mem::replace(b, Rc::new(Bag::Empty)));
                }
            }
        }
    }
}

/// A Bag as a value.
#[derive(Debug, Clone)]
pub struct BagVal(pub Rc<Bag>);

/// How many characters a shown Bag or array may take before it is cut (`…`).
const SHOW: usize = 160;

impl ExtValue for BagVal {
    fn type_name(&self) -> &'static str {
        "Bag"
    }
    /// `BPlus (BOne ⟨0, 2⟩) (BOne ⟨1, 2⟩)`, written with a stack and cut after `SHOW` characters.
    fn show(&self) -> String {
        enum Item<'a> {
            Bag(&'a Bag),
            Text(&'static str),
        }
        let mut out = String::new();
        let mut stack = vec![Item::Bag(&self.0)];
        while let Some(item) = stack.pop() {
            if out.chars().count() > SHOW {
                out.push('…');
                break;
            }
            match item {
                Item::Text(t) => out.push_str(t),
                Item::Bag(Bag::Empty) => out.push_str("BEmpty"),
                Item::Bag(Bag::One(i, v, ..)) => out.push_str(&format!("BOne ⟨{i}, {}⟩", show_ct(v))),
                Item::Bag(Bag::Array(xs)) => out.push_str(&format!("BArray {}", show_cells(&xs.borrow()))),
                Item::Bag(Bag::Plus(a, b)) => {
                    out.push_str("BPlus (");
                    stack.extend([Item::Text(")"), Item::Bag(b), Item::Text(") ("), Item::Bag(a)]);
                }
            }
        }
        out
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// An array of cotangents, cut after `SHOW` characters.
fn show_cells(xs: &[Value]) -> String {
    let mut out = String::from("[");
    for (k, x) in xs.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        if out.chars().count() > SHOW {
            out.push_str(&format!("… ({} more)", xs.len() - k));
            break;
        }
        out.push_str(&show_ct(x));
    }
    out.push(']');
    out
}

pub fn bag(b: Bag) -> Value {
    Value::Ext(Rc::new(BagVal(Rc::new(b))))
}

pub fn empty() -> Value {
    bag(Bag::Empty)
}

/// The Bag a value holds, if it is one.
pub fn as_bag(v: &Value) -> Option<&Rc<Bag>> {
    match v {
        Value::Ext(e) => e.as_any().downcast_ref::<BagVal>().map(|b| &b.0),
        _ => None,
    }
}

fn is_zero(v: &Value) -> bool {
    matches!(v, Value::Inl(u) if matches!(**u, Value::Unit))
}

/// Every ⟨i, d⟩ of a Bag, left to right (a stack walk); BArray cells that hold zero are left out.
pub fn entries(b: &Bag) -> Vec<(i64, Value)> {
    let mut out = vec![];
    let mut stack = vec![b];
    while let Some(b) = stack.pop() {
        match b {
            Bag::Empty => {}
            Bag::One(i, v, ..) => out.push((*i, v.clone())),
            Bag::Plus(x, y) => {
                stack.push(y);
                stack.push(x);
            }
            Bag::Array(xs) => out.extend(xs.borrow().iter().enumerate().filter(|(_, v)| !is_zero(v)).map(|(i, v)| (i as i64, v.clone()))),
        }
    }
    out
}

/// `a + b` on Bags. §7: `BPlus a b`, O(1) (BEmpty is the unit). With §8.1's BArray on, a second
/// entry turns a Bag into a BArray and every further BOne is added into it in place: the gather's
/// n BOne's and their BPlus tree become one array (`Rt::absorbed` counts the BOne's it took in).
pub fn plus_bags(m: &mut Machine, a: Rc<Bag>, b: Rc<Bag>) -> Result<Value, RunError> {
    if matches!(*a, Bag::Empty) {
        return Ok(Value::Ext(Rc::new(BagVal(b))));
    }
    if matches!(*b, Bag::Empty) {
        return Ok(Value::Ext(Rc::new(BagVal(a))));
    }
    if !m.state::<Rt>().barray {
        m.alloc(1)?;
        return Ok(bag(Bag::Plus(a, b)));
    }
    // the BArray side (the larger one when both are), updated in place when no one else holds it
    let (into, from) = match (&*a, &*b) {
        (Bag::Array(x), Bag::Array(y)) if y.borrow().len() > x.borrow().len() => (b, a),
        (Bag::Array(_), _) => (a, b),
        (_, Bag::Array(_)) => (b, a),
        _ => {
            m.state::<Rt>().barrays += 1;
            (Rc::new(Bag::Array(RefCell::new(vec![]))), Rc::new(Bag::Plus(a, b)))
        }
    };
    let into = if Rc::strong_count(&into) == 1 { into } else { Rc::new(Bag::Array(RefCell::new(cells(&into)))) };
    let Bag::Array(xs) = &*into else { return Err(internal(m.current_span(), "BArray expected")) };
    let items = entries(&from);
    let ones = count_ones(&from);
    m.state::<Rt>().absorbed += ones;
    m.tick(items.len() as u64)?;
    for (i, v) in items {
        let i = usize::try_from(i).map_err(|_| internal(m.current_span(), "a negative index in a Bag"))?;
        let mut cells = xs.borrow_mut();
        if cells.len() <= i {
            m.alloc((i + 1 - cells.len()) as u64)?;
            cells.resize(i + 1, Value::Inl(Rc::new(Value::Unit)));
        }
        let old = std::mem::replace(&mut cells[i], Value::Unit);
        drop(cells);
        let new = plus(m, old, v)?;
        xs.borrow_mut()[i] = new;
    }
    Ok(Value::Ext(Rc::new(BagVal(into))))
}

fn cells(b: &Bag) -> Vec<Value> {
    match b {
        Bag::Array(xs) => xs.borrow().clone(),
        _ => vec![],
    }
}

/// The BOne nodes of a Bag.
fn count_ones(b: &Bag) -> u64 {
    let mut n = 0;
    let mut stack = vec![b];
    while let Some(b) = stack.pop() {
        match b {
            Bag::One(..) => n += 1,
            Bag::Plus(x, y) => stack.extend([&**x, &**y]),
            _ => {}
        }
    }
    n
}

/// An array of cotangents as a Bag: BArray with §8.1 on, else BPlus of BOne ⟨i, d_i⟩ (each counted
/// when `made` by the backward pass).
pub fn from_cells(m: &mut Machine, ds: Vec<Value>, made: bool) -> Result<Value, RunError> {
    m.alloc(ds.len() as u64)?;
    if m.state::<Rt>().barray {
        m.state::<Rt>().barrays += 1;
        return Ok(bag(Bag::Array(RefCell::new(ds))));
    }
    if made {
        m.state::<Rt>().made += ds.len() as u64;
    }
    let span = m.current_span();
    let mut acc = Rc::new(Bag::Empty);
    for (i, d) in ds.into_iter().enumerate() {
        let one = Rc::new(Bag::One(i as i64, d, span, graph::serial(m)));
        acc = if matches!(*acc, Bag::Empty) { one } else { Rc::new(Bag::Plus(acc, one)) };
    }
    if !made {
        // the output's cotangent (toLin): the graph draws it as one node, not as BOne's the run made
        if let Some(r) = graph::recording(m) {
            r.seed(&acc);
        }
    }
    Ok(Value::Ext(Rc::new(BagVal(acc))))
}

/// A Bag's entries added into `len` cells (`collect` then `scatter` into zeros): the dense
/// cotangent of an array of that length. Cells nothing reached hold the sparse zero.
pub fn densify(m: &mut Machine, b: &Bag, len: usize) -> Result<Vec<Value>, RunError> {
    let mut out = vec![Value::Inl(Rc::new(Value::Unit)); len];
    for (i, v) in entries(b) {
        let Some(slot) = usize::try_from(i).ok().filter(|&i| i < len) else { return Err(internal(m.current_span(), "a Bag index past its array")) };
        let old = std::mem::replace(&mut out[slot], Value::Unit);
        out[slot] = plus(m, old, v)?;
    }
    Ok(out)
}

/// `data Tree a f = Node (Tree a f) a f (Tree a f) | Leaf a` (Fig. 10).
#[derive(Debug)]
pub enum Tree {
    Leaf(Value),
    Node(Rc<Tree>, Value, Value, Rc<Tree>),
}

impl Drop for Tree {
    /// A left fold's Tree is n deep: unlinked with a stack.
    fn drop(&mut self) {
        let Tree::Node(l, _, _, r) = self else { return };
        let leaf = || Rc::new(Tree::Leaf(Value::Unit));
        let mut stack = vec![std::mem::replace(l, leaf()), std::mem::replace(r, leaf())];
        while let Some(rc) = stack.pop() {
            if let Ok(mut inner) = Rc::try_unwrap(rc) {
                if let Tree::Node(l, _, _, r) = &mut inner {
                    stack.push(std::mem::replace(l, leaf()));
                    stack.push(std::mem::replace(r, leaf()));
                }
            }
        }
    }
}

impl Tree {
    /// `getA`
    fn value(&self) -> &Value {
        match self {
            Tree::Leaf(x) | Tree::Node(_, x, _, _) => x,
        }
    }
}

#[derive(Debug, Clone)]
pub struct TreeVal(pub Rc<Tree>, pub usize);

impl ExtValue for TreeVal {
    fn type_name(&self) -> &'static str {
        "Tree"
    }
    fn show(&self) -> String {
        format!("Tree ({} leaves, root {})", self.1, self.0.value())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn array(v: &Value, span: Span, what: &str) -> Result<Rc<[Value]>, RunError> {
    // through `elems`: an empty array may keep its element's shape (value.rs, `EmptyArray`)
    match v.elems() {
        Some(xs) => Ok(xs.into()),
        None => Err(internal(span, &format!("{what} of a non-array"))),
    }
}

fn pair(v: Value, span: Span) -> Result<(Value, Value), RunError> {
    match v {
        Value::Tuple(vs) if vs.len() == 2 => Ok((vs[0].clone(), vs[1].clone())),
        _ => Err(internal(span, "a pair expected")),
    }
}

/// `BOne ⟨i, d⟩`: the index rule's one-hot array cotangent (Fig. 9), counted.
fn b_one(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (i, d) = pair(arg(args), span)?;
    let Value::Int(i) = i else { return Err(internal(span, "BOne of a non-integer index")) };
    m.alloc(1)?;
    m.state::<Rt>().made += 1;
    Ok(bag(Bag::One(i, d, span, graph::serial(m))))
}

/// `collect : Bag τ → Array τ`, in left-to-right order.
fn b_collect(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let b = arg(args);
    let Some(bg) = as_bag(&b) else { return Err(internal(span, "collect of a non-Bag")) };
    let node = graph::recording(m).map(|r| r.collect(bg, span));
    let items = entries(bg);
    m.tick(items.len() as u64)?;
    m.alloc(items.len() as u64)?;
    let out: Vec<Value> = items.into_iter().map(|(i, v)| Value::pair(Value::Int(i), v)).collect();
    if m.tracing() {
        // (the first few: the note is cut after SHOW characters anyway)
        let shown: Vec<Value> = out.iter().take(64).map(|p| match p {
            Value::Tuple(v) => Value::Ext(Rc::new(Shown(format!("⟨{}, {}⟩", v[0], show_ct(&v[1]))))),
            v => v.clone(),
        }).collect();
        event_at(m, "collect", || format!("collect {} = {}", b, show_cells(&shown)), span, node);
    }
    Ok(Value::Array(out.into()))
}

/// Text shown as it is (in a trace's array of pairs).
#[derive(Debug)]
struct Shown(String);
impl ExtValue for Shown {
    fn type_name(&self) -> &'static str {
        "text"
    }
    fn show(&self) -> String {
        self.0.clone()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `scatter : Array τ → Array (Z × τ) → Array τ`: adds each ⟨i, d⟩ into position i (linear).
fn b_scatter(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let pairs = array(&arg(args), span, "scatter")?;
    let mut out = array(&arg(args), span, "scatter")?.to_vec();
    m.tick(pairs.len() as u64)?;
    for p in pairs.iter() {
        let (i, d) = pair(p.clone(), span)?;
        let Some(i) = (match i {
            Value::Int(i) => usize::try_from(i).ok().filter(|&i| i < out.len()),
            _ => None,
        }) else {
            return Err(internal(span, "scatter to a position past the array"));
        };
        let old = std::mem::replace(&mut out[i], Value::Unit);
        out[i] = plus(m, old, d)?;
    }
    if m.tracing() {
        event(m, "scatter", || format!("scatter = {}", show_cells(&out)), span);
    }
    Ok(Value::Array(out.into()))
}

/// `unzip : Array (τ × σ) → Array τ × Array σ`.
fn b_unzip(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let xs = array(&arg(args), span, "unzip")?;
    m.alloc(2 * xs.len() as u64)?;
    let (mut a, mut b) = (Vec::with_capacity(xs.len()), Vec::with_capacity(xs.len()));
    for x in xs.iter() {
        let (p, q) = pair(x.clone(), span)?;
        a.push(p);
        b.push(q);
    }
    Ok(Value::pair(Value::Array(a.into()), Value::Array(b.into())))
}

/// `zipWith f s t`: f on each pair of elements, in order (a backpropagator's effects run here).
fn b_zip_with(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let ys = array(&arg(args), span, "zipWith")?;
    let xs = array(&arg(args), span, "zipWith")?;
    let f = arg(args);
    if xs.len() != ys.len() {
        return Err(internal(span, "zipWith of arrays of different lengths"));
    }
    let mut out = Vec::with_capacity(xs.len());
    for (x, y) in xs.iter().zip(ys.iter()) {
        m.alloc(1)?;
        out.push(m.apply2(&f, x.clone(), y.clone())?);
    }
    Ok(Value::Array(out.into()))
}

/// `sequence : Array (EVM Γ τ) → EVM Γ (Array τ)`: in direct style the actions already ran.
fn b_sequence(_: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    Ok(arg(args))
}

/// `fromList` (of the leaves' cotangents): a Bag of ⟨i, d_i⟩ (the note's O5: Fig. 9 hands `s2` a
/// list where it takes a Bag).
fn b_from_list(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let xs = array(&arg(args), span, "fromList")?;
    from_cells(m, xs.to_vec(), true)
}

/// A Tree node, numbered for the graph when the run records one.
fn made(m: &mut Machine, t: Tree) -> Rc<Tree> {
    let t = Rc::new(t);
    if let Some(r) = graph::recording(m) {
        r.tree_node(&t);
    }
    t
}

/// The primal fold of Fig. 9, recording its reduction `Tree`: the leaves are `z :: s` (footnote
/// 16's initial value), each Node `f ⟨getA l, getA r⟩ = ⟨y, y'⟩` keeps y and the backpropagator y'.
/// Left to right for `fold` (any f), or balanced pairwise for `reduce` (f associative: §7 leaves
/// the order unspecified).
fn tree_fold(m: &mut Machine, args: &mut Vec<Value>, span: Span, balanced: bool) -> Result<Value, RunError> {
    let xs = array(&arg(args), span, "fold")?;
    let z = arg(args);
    let f = arg(args);
    let node = |m: &mut Machine, l: Rc<Tree>, r: Rc<Tree>| -> Result<Rc<Tree>, RunError> {
        m.alloc(1)?;
        let (y, yb) = pair(m.apply(f.clone(), Value::pair(l.value().clone(), r.value().clone()))?, span)?;
        Ok(made(m, Tree::Node(l, y, yb, r)))
    };
    let mut level: Vec<Rc<Tree>> = std::iter::once(z).chain(xs.iter().cloned()).map(|x| made(m, Tree::Leaf(x))).collect();
    let leaves = level.len();
    if balanced {
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len() / 2 + 1);
            let mut it = level.into_iter();
            while let Some(l) = it.next() {
                match it.next() {
                    Some(r) => next.push(node(m, l, r)?),
                    None => next.push(l),
                }
            }
            level = next;
        }
    } else {
        let mut it = level.into_iter();
        let mut acc = it.next().ok_or_else(|| internal(span, "a fold of no leaves"))?;
        for r in it {
            acc = node(m, acc, r)?;
        }
        level = vec![acc];
    }
    let root = level.pop().ok_or_else(|| internal(span, "a fold of no leaves"))?;
    let node = graph::recording(m).map(|r| r.tree(&root, balanced, leaves, span));
    if m.tracing() {
        event_at(m, "fold", || format!("fold recorded its reduction Tree: {leaves} leaves, root {}", root.value()), span, node);
    }
    Ok(Value::Ext(Rc::new(TreeVal(root, leaves))))
}

fn b_tree_fold(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    tree_fold(m, args, span, true)
}
fn b_tree_foldl(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    tree_fold(m, args, span, false)
}

fn tree(v: &Value, span: Span) -> Result<Rc<Tree>, RunError> {
    match v {
        Value::Ext(e) => e.as_any().downcast_ref::<TreeVal>().map(|t| t.0.clone()).ok_or_else(|| internal(span, "a Tree expected")),
        _ => Err(internal(span, "a Tree expected")),
    }
}

/// `getA` (Fig. 10).
fn b_get_a(_: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    Ok(tree(&arg(args), span)?.value().clone())
}

/// `unTree g d tree` (Fig. 10): from the root down, each Node's `g d f` gives its children's
/// cotangents; the leaves' cotangents come out left to right (the difference list `lf` applied
/// to `[]`). A stack instead of the figure's recursion (a left fold's Tree is n deep).
fn b_un_tree(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let t = tree(&arg(args), span)?;
    let d = arg(args);
    let g = arg(args);
    let mut out = vec![];
    let mut stack = vec![(t, d)];
    while let Some((t, d)) = stack.pop() {
        let node = graph::recording(m).and_then(|r| r.untree(&t, &d));
        match &*t {
            Tree::Leaf(_) => out.push(d),
            Tree::Node(l, y, f, r) => {
                let shown = m.tracing().then(|| show_ct(&d));
                let h = m.apply(g.clone(), d)?;
                let (d1, d2) = pair(m.apply(h, f.clone())?, span)?;
                if let Some(d) = shown {
                    event_at(m, "unTree", || format!("unTree: node {y} gets {d} → ⟨{}, {}⟩", show_ct(&d1), show_ct(&d2)), span, node);
                }
                stack.push((r.clone(), d2));
                stack.push((l.clone(), d1));
            }
        }
    }
    m.alloc(out.len() as u64)?;
    Ok(Value::Array(out.into()))
}

pub const B_ONE: &str = "BOne";
pub const COLLECT: &str = "collect";
pub const SCATTER: &str = "scatter";
pub const UNZIP: &str = "unzip";
pub const ZIP_WITH: &str = "zipWith";
pub const SEQUENCE: &str = "sequence";
pub const FROM_LIST: &str = "fromList";
/// The primal fold recording its Tree: balanced (`reduce`) and left to right (`fold`).
pub const TREE_FOLD: &str = "foldTree";
pub const TREE_FOLDL: &str = "foldTreeL";
pub const GET_A: &str = "getA";
pub const UN_TREE: &str = "unTree";

/// §7's builtins with their types (`Bag t`, `Tree a f`, `M t` as type constructors).
pub fn builtins() -> Vec<Builtin> {
    let v = Type::Var;
    let (f, arr, tup) = (Type::fun, Type::array, |a: Type, b: Type| Type::tup(vec![a, b]));
    let bag = |t: Type| Type::con("Bag", vec![t]);
    let tree = |a: Type, b: Type| Type::con("Tree", vec![a, b]);
    let m = |t: Type| Type::con("M", vec![t]);
    let b = |name: &'static str, vars: Vec<u32>, ty: Type, arity: usize, run: BuiltinFn| Builtin { name, scheme: Scheme { vars, ty }, arity, lazy_last: false, run };
    let zt = tup(Type::Int, v(0));
    let node = f(tup(v(0), v(0)), tup(v(0), v(1)));
    vec![
        b(B_ONE, vec![0], f(zt.clone(), bag(zt.clone())), 1, b_one),
        b(COLLECT, vec![0], f(bag(v(0)), arr(v(0))), 1, b_collect),
        b(SCATTER, vec![0], f(arr(v(0)), f(arr(zt.clone()), arr(v(0)))), 2, b_scatter),
        b(UNZIP, vec![0, 1], f(arr(tup(v(0), v(1))), tup(arr(v(0)), arr(v(1)))), 1, b_unzip),
        b(ZIP_WITH, vec![0, 1, 2], f(f(v(0), f(v(1), v(2))), f(arr(v(0)), f(arr(v(1)), arr(v(2))))), 3, b_zip_with),
        b(SEQUENCE, vec![0], f(arr(m(v(0))), m(arr(v(0)))), 1, b_sequence),
        b(FROM_LIST, vec![0], f(arr(v(0)), bag(zt)), 1, b_from_list),
        b(TREE_FOLD, vec![0, 1], f(node.clone(), f(v(0), f(arr(v(0)), tree(v(0), v(1))))), 3, b_tree_fold),
        b(TREE_FOLDL, vec![0, 1], f(node, f(v(0), f(arr(v(0)), tree(v(0), v(1))))), 3, b_tree_foldl),
        b(GET_A, vec![0, 1], f(tree(v(0), v(1)), v(0)), 1, b_get_a),
        b(UN_TREE, vec![0, 1, 2], f(f(v(2), f(v(1), m(tup(v(2), v(2))))), f(v(2), f(tree(v(0), v(1)), m(arr(v(2)))))), 3, b_un_tree),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BPlus chain as deep as n `+`s of BOne's.
    fn chain(n: usize) -> Rc<Bag> {
        let mut acc = Rc::new(Bag::Empty);
        for i in 0..n {
            acc = Rc::new(Bag::Plus(acc, Rc::new(Bag::One(i as i64, Value::Real(i as f64), Span::NONE, 0))));
        }
        acc
    }

    #[test]
    fn deep_bags_are_walked_shown_and_dropped_without_recursion() {
        let b = chain(300_000);
        let es = entries(&b);
        assert_eq!(es.len(), 300_000);
        assert_eq!(es[0].0, 0);
        assert_eq!(es[299_999].0, 299_999);
        assert_eq!(count_ones(&b), 300_000);
        let shown = BagVal(b.clone()).show();
        assert!(shown.starts_with("BPlus (BPlus (") && shown.ends_with('…') && shown.chars().count() < 400, "{shown}");
        drop(b);
    }

    #[test]
    fn deep_trees_drop_without_recursion() {
        let mut t = Rc::new(Tree::Leaf(Value::Real(0.0)));
        for i in 0..300_000 {
            t = Rc::new(Tree::Node(t, Value::Real(i as f64), Value::Unit, Rc::new(Tree::Leaf(Value::Real(1.0)))));
        }
        assert_eq!(t.value().as_real(), Some(299_999.0));
        drop(t);
    }

    #[test]
    fn a_barray_lists_its_nonzero_cells_in_order() {
        let zero = Value::Inl(Rc::new(Value::Unit));
        let b = Bag::Array(RefCell::new(vec![Value::Real(2.0), zero, Value::Real(4.0)]));
        let es: Vec<(i64, String)> = entries(&b).into_iter().map(|(i, v)| (i, v.to_string())).collect();
        assert_eq!(es, [(0, "2.0".to_string()), (2, "4.0".to_string())]);
    }
}
