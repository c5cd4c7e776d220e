//! Flat scalar trees: a region's arithmetic on unboxed reals and integers counted per block (issue 13,
//! item 1, "count per basic block at lowering time rather than per step at run time").
//!
//! A subtree that `fast.rs` would compile to unboxed closures all the way down (constants, slots and
//! captures read as reals or integers, `real k`, the reals' and integers' arithmetic, a comparison at
//! the top) is also compiled here to pure closures: each returns its `f64`, `i64` or `bool` (or `None`) in
//! registers, with no step, no counter and no `Miss` to build, and reads its leaves in place. Such a tree has no effect but its counters
//! (a step per node, a real op per real operation), and both are known at lowering.
//!
//! A pure closure returns its bare scalar, and a leaf that misses (or integer arithmetic that fails)
//! raises the machine's `flat_miss` flag instead of returning `None`: wasm has no two-register return,
//! so an `Option<f64>` came back through the shadow stack on every closure call, a store, a load and a
//! stack-pointer bump each (the page's primal ran 2–3× native). The rest of a missed tree still runs,
//! on a stand-in zero; it is pure, so only its result is thrown away. So it runs the
//! pure closures only when the step gate has room for all its steps — none of them would have met the
//! budget, the 4096-step clock check or a cost model (`Machine::step_gate` is 0 under one) — and every
//! leaf holds the scalar its hint says and no checked integer operation fails; then it adds its steps
//! and real ops at once. Otherwise (a budget stop, a wrong hint, an overflow: the walker's message) it
//! has changed nothing and runs the stepwise closures, which stop and fail exactly where the walker does.

use super::fast::Hints;
use super::lower::Code;
use super::Machine;
use crate::prims::{OnInt, OnReal, Prim};
use crate::value::Value;

/// A scalar a pure closure computes.
pub(super) trait Word: Copy + Default + 'static {
    fn of(v: &Value) -> Option<Self>;
    /// `a op b` as the rows of prims.rs compute it (`None`: checked integer arithmetic that fails).
    #[inline(always)]
    fn arith(_op: Arith, _a: Self, _b: Self) -> Option<Self> {
        None
    }
    /// `real k` (only a real tree holds `Pure::FromInt`).
    #[inline(always)]
    fn from_int(_k: i64) -> Self {
        Self::default()
    }
    /// A comparison's result (only a boolean tree holds `Pure::Compare`).
    #[inline(always)]
    fn from_bool(_b: bool) -> Self {
        Self::default()
    }
}

/// The arithmetic a leaf operation computes in place (`Pure::Op`).
#[derive(Clone, Copy)]
pub(super) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

/// The comparisons of prims.rs (`RCmp`, `ZCmp` rows), computed in place on two leaves.
#[derive(Clone, Copy)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cmp {
    fn of(op: Prim) -> Option<Cmp> {
        Some(match op {
            Prim::Lt => Cmp::Lt,
            Prim::Le => Cmp::Le,
            Prim::Gt => Cmp::Gt,
            Prim::Ge => Cmp::Ge,
            Prim::Eq => Cmp::Eq,
            Prim::Ne => Cmp::Ne,
            _ => return None,
        })
    }
    #[inline(always)]
    fn test<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
        }
    }
}

/// Two leaves compared (`Pure::Compare`): reals or integers.
#[derive(Clone, Copy)]
enum Leaves {
    Real(Leaf<f64>, Leaf<f64>),
    Int(Leaf<i64>, Leaf<i64>),
}

impl Word for f64 {
    #[inline(always)]
    fn of(v: &Value) -> Option<f64> {
        v.as_real()
    }
    #[inline(always)]
    fn arith(op: Arith, a: f64, b: f64) -> Option<f64> {
        Some(match op {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Div => a / b,
        })
    }
    #[inline(always)]
    fn from_int(k: i64) -> f64 {
        // prims.rs: `real` is `i as f64`
        k as f64
    }
}
impl Word for i64 {
    #[inline(always)]
    fn of(v: &Value) -> Option<i64> {
        v.as_int()
    }
    #[inline(always)]
    fn arith(op: Arith, a: i64, b: i64) -> Option<i64> {
        match op {
            Arith::Add => a.checked_add(b),
            Arith::Sub => a.checked_sub(b),
            Arith::Mul => a.checked_mul(b),
            // integer division has its own rows (floor division, the zero check): never a leaf op
            Arith::Div => None,
        }
    }
}
impl Word for bool {
    #[inline(always)]
    fn of(v: &Value) -> Option<bool> {
        match v {
            Value::Bool(x) => Some(*x),
            _ => None,
        }
    }
    #[inline(always)]
    fn from_bool(b: bool) -> bool {
        b
    }
}

type PureFn<T> = Box<dyn Fn(&Machine<'_>) -> T>;

/// A leaf of a pure tree, read in place.
#[derive(Clone, Copy)]
enum Leaf<T> {
    Slot(u32),
    Cap(u32),
    Const(T),
}

impl<T: Word> Leaf<T> {
    #[inline(always)]
    fn get(&self, m: &Machine<'_>) -> T {
        match self {
            Leaf::Slot(s) => ok(m, T::of(&m.locals[m.bp + *s as usize])),
            Leaf::Cap(i) => ok(m, T::of(&m.env[*i as usize])),
            Leaf::Const(x) => *x,
        }
    }
}

/// A node of a pure tree: leaves, and arithmetic on two leaves, are computed in place, without a
/// closure call (an indirect call each, dear in wasm: `a * x` of `acc * x + 1.0 / real k` is read by
/// the `+`'s closure directly). A leaf that does not hold its hinted scalar, or checked integer
/// arithmetic that fails, raises `flat_miss` (`ok`).
enum Pure<T> {
    Leaf(Leaf<T>),
    Op(Arith, Leaf<T>, Leaf<T>),
    /// `real k` of an integer leaf, in a real tree.
    FromInt(Leaf<i64>),
    /// A comparison of two leaves, at the top of a boolean tree.
    Compare(Cmp, Leaves),
    Code(PureFn<T>),
}

impl<T: Word> Pure<T> {
    #[inline(always)]
    fn get(&self, m: &Machine<'_>) -> T {
        match self {
            Pure::Leaf(l) => l.get(m),
            Pure::Op(op, a, b) => ok(m, T::arith(*op, a.get(m), b.get(m))),
            Pure::FromInt(k) => T::from_int(k.get(m)),
            Pure::Compare(c, Leaves::Real(a, b)) => T::from_bool(c.test(a.get(m), b.get(m))),
            Pure::Compare(c, Leaves::Int(a, b)) => T::from_bool(c.test(a.get(m), b.get(m))),
            Pure::Code(f) => f(m),
        }
    }
}

/// `a op b` computed in place, when both are leaves.
fn leaf_op<T: Copy>(op: Arith, a: &Pure<T>, b: &Pure<T>) -> Option<Pure<T>> {
    match (a, b) {
        (Pure::Leaf(x), Pure::Leaf(y)) => Some(Pure::Op(op, *x, *y)),
        _ => None,
    }
}

/// `v`'s scalar, or a stand-in zero with `flat_miss` raised.
#[inline(always)]
fn ok<T: Default>(m: &Machine<'_>, v: Option<T>) -> T {
    match v {
        Some(x) => x,
        None => {
            m.flat_miss.set(true);
            T::default()
        }
    }
}

fn code<T>(f: impl Fn(&Machine<'_>) -> T + 'static) -> Option<Pure<T>> {
    Some(Pure::Code(Box::new(f)))
}

/// A tree's pure closures, with the steps and real ops the tree counts.
pub(super) struct Flat<T> {
    tree: Pure<T>,
    steps: u64,
    real_ops: u64,
}

#[derive(Default)]
struct Builder {
    steps: u64,
    real_ops: u64,
}

impl Builder {
    /// `c` as `fast::real` compiles it, if it compiles to unboxed closures all the way down.
    fn real(&mut self, c: &Code, h: &Hints) -> Option<Pure<f64>> {
        if super::fast::spine_len(c) >= super::fast::SPINE_MIN {
            return self.spine(c, h);
        }
        self.steps += 1;
        match c {
            Code::Const(Value::Real(x)) => Some(Pure::Leaf(Leaf::Const(*x))),
            Code::Local(s) | Code::Move(s) => Some(Pure::Leaf(Leaf::Slot(*s))),
            Code::Capture(i) => Some(Pure::Leaf(Leaf::Cap(*i))),
            Code::Prim1(op, a, _) => match (op.info().on_int, op.info().on_real) {
                (Some(OnInt::ZToR(_)), _) if super::fast::is_int(a, h) => {
                    if *op != Prim::ToReal {
                        return None;
                    }
                    match self.int(a, h)? {
                        Pure::Leaf(k) => Some(Pure::FromInt(k)),
                        a => code(move |m| f64::from_int(a.get(m))),
                    }
                }
                (_, Some(OnReal::R1(f))) => {
                    self.real_ops += 1;
                    let a = self.real(a, h)?;
                    code(move |m| f(a.get(m)))
                }
                _ => None,
            },
            Code::Prim2(op, a, b, _) => match op.info().on_real {
                Some(OnReal::R2(f)) => {
                    self.real_ops += 1;
                    let (a, b) = (self.real(a, h)?, self.real(b, h)?);
                    // the rows' own arithmetic (prims.rs), inlined
                    match op {
                        Prim::Add => leaf_op(Arith::Add, &a, &b).or_else(|| code(move |m| a.get(m) + b.get(m))),
                        Prim::Sub => leaf_op(Arith::Sub, &a, &b).or_else(|| code(move |m| a.get(m) - b.get(m))),
                        Prim::Mul => leaf_op(Arith::Mul, &a, &b).or_else(|| code(move |m| a.get(m) * b.get(m))),
                        Prim::Div => leaf_op(Arith::Div, &a, &b).or_else(|| code(move |m| a.get(m) / b.get(m))),
                        _ => code(move |m| f(a.get(m), b.get(m))),
                    }
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// A long left spine of real arithmetic as one loop over its nodes (`fast::spine_real`'s pure
    /// form): native recursion no deeper than its operands', however long the spine.
    fn spine(&mut self, c: &Code, h: &Hints) -> Option<Pure<f64>> {
        let mut levels: Vec<(fn(f64, f64) -> f64, Pure<f64>)> = vec![];
        let mut cur = c;
        while let Code::Prim2(op, a, b, _) = cur {
            let Some(OnReal::R2(f)) = op.info().on_real else { break };
            self.steps += 1;
            self.real_ops += 1;
            levels.push((f, self.real(b, h)?));
            cur = a;
        }
        let leaf = self.real(cur, h)?;
        levels.reverse();
        code(move |m| levels.iter().fold(leaf.get(m), |x, (f, b)| f(x, b.get(m))))
    }

    /// `c` as `fast::int` compiles it, if it compiles to unboxed closures all the way down.
    fn int(&mut self, c: &Code, h: &Hints) -> Option<Pure<i64>> {
        self.steps += 1;
        match c {
            Code::Const(Value::Int(x)) => Some(Pure::Leaf(Leaf::Const(*x))),
            Code::Local(s) | Code::Move(s) => Some(Pure::Leaf(Leaf::Slot(*s))),
            Code::Capture(i) => Some(Pure::Leaf(Leaf::Cap(*i))),
            Code::Prim1(op, a, _) => match op.info().on_int {
                Some(OnInt::Z1(f)) => {
                    let a = self.int(a, h)?;
                    code(move |m| ok(m, f(a.get(m))))
                }
                _ => None,
            },
            Code::Prim2(op, a, b, _) => match op.info().on_int {
                Some(OnInt::Z2(f)) => {
                    let (a, b) = (self.int(a, h)?, self.int(b, h)?);
                    // the rows' checked arithmetic (prims.rs), inlined
                    match op {
                        Prim::Add => leaf_op(Arith::Add, &a, &b).or_else(|| code(move |m| ok(m, a.get(m).checked_add(b.get(m))))),
                        Prim::Sub => leaf_op(Arith::Sub, &a, &b).or_else(|| code(move |m| ok(m, a.get(m).checked_sub(b.get(m))))),
                        Prim::Mul => leaf_op(Arith::Mul, &a, &b).or_else(|| code(move |m| ok(m, a.get(m).checked_mul(b.get(m))))),
                        _ => code(move |m| ok(m, f(a.get(m), b.get(m)).ok())),
                    }
                }
                _ => None,
            },
            _ => None,
        }
    }

    fn done<T>(self, tree: Pure<T>) -> Flat<T> {
        Flat { tree, steps: self.steps, real_ops: self.real_ops }
    }
}

/// Whether a tree is worth it: a leaf is read in place already.
fn worth(c: &Code) -> bool {
    !matches!(c, Code::Const(_) | Code::Local(_) | Code::Move(_) | Code::Capture(_))
}

impl Flat<f64> {
    /// `c` compiled as `fast::real` would compile it, pure.
    pub(super) fn real(c: &Code, h: &Hints) -> Option<Flat<f64>> {
        let mut b = Builder::default();
        let t = if worth(c) { b.real(c, h)? } else { return None };
        Some(b.done(t))
    }
}

impl Flat<i64> {
    /// `c` compiled as `fast::int` would compile it, pure.
    pub(super) fn int(c: &Code, h: &Hints) -> Option<Flat<i64>> {
        let mut b = Builder::default();
        let t = if worth(c) { b.int(c, h)? } else { return None };
        Some(b.done(t))
    }
}

impl Flat<bool> {
    /// A comparison `a op b` of reals (`real`) or integers, as `fast::compare` runs it.
    pub(super) fn compare(a: &Code, b: &Code, op: Prim, real: bool, h: &Hints) -> Option<Flat<bool>> {
        let mut bl = Builder { steps: 1, real_ops: 0 };
        let t = match (real, op.info().on_real, op.info().on_int) {
            (true, Some(OnReal::RCmp(f)), _) => {
                bl.real_ops += 1;
                match ((bl.real(a, h)?, bl.real(b, h)?), Cmp::of(op)) {
                    ((Pure::Leaf(a), Pure::Leaf(b)), Some(c)) => Pure::Compare(c, Leaves::Real(a, b)),
                    ((a, b), _) => code(move |m| f(a.get(m), b.get(m)))?,
                }
            }
            (false, _, Some(OnInt::ZCmp(f))) => match ((bl.int(a, h)?, bl.int(b, h)?), Cmp::of(op)) {
                ((Pure::Leaf(a), Pure::Leaf(b)), Some(c)) => Pure::Compare(c, Leaves::Int(a, b)),
                ((a, b), _) if op == Prim::Eq => code(move |m| a.get(m) == b.get(m))?,
                ((a, b), _) => code(move |m| f(a.get(m), b.get(m)))?,
            },
            _ => return None,
        };
        Some(bl.done(t))
    }
}

impl<T: Word> Flat<T> {
    /// The steps the tree counts.
    pub(super) fn steps(&self) -> u64 {
        self.steps
    }
    /// The real ops the tree counts.
    pub(super) fn real_ops(&self) -> u64 {
        self.real_ops
    }
    /// The tree's result, counting nothing (a loop's round counts its trees' steps at once: `loops.rs`).
    #[inline(always)]
    pub(super) fn get(&self, m: &Machine<'_>) -> Option<T> {
        let r = self.tree.get(m);
        if m.flat_miss.get() {
            m.flat_miss.set(false);
            return None;
        }
        Some(r)
    }
    /// The tree's result, its steps and real ops counted at once; `None` (nothing counted, nothing
    /// changed) when the step gate has no room for them all, a leaf does not hold its hinted scalar,
    /// or integer arithmetic fails.
    #[inline]
    pub(super) fn run(&self, m: &mut Machine<'_>) -> Option<T> {
        if m.steps + self.steps >= m.step_gate {
            return None;
        }
        let r = self.get(m)?;
        m.steps += self.steps;
        m.real_ops += self.real_ops;
        Some(r)
    }
}
