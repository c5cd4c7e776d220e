//! The one table of primitives. A row holds everything about one primitive: its surface spelling
//! and syntax (named like `sin x`, prefix like `-x`, or infix with precedence and associativity),
//! arity, typing class, implementation on reals, integers and booleans, and partial derivatives
//! (JAX's `impl_rules` and `jvp_rules`, in one row). The lexer, parser, resolver, type checker,
//! interpreter, printer and `deriv::rule` (which every stage uses) all read it.
//!
//! Adding a primitive is a variant of `Prim` and a row of `PRIMS` (in the same order: a
//! compile-time check below says so). The unit tests iterate the table, so a new row's partials
//! are checked against finite differences, and its spelling against the parser and printer.

use crate::build::*;
use crate::deriv::Partial::{self, *};
use crate::ir::{Expr, Type};

/// Saturated primitive operations of the source language (the papers' `op`s).
/// Arithmetic and comparisons work on R and on Z: which one is read off the arguments' `ty`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prim {
    Add,
    Sub,
    Mul,
    Div,
    /// Integer remainder (`mod`); Z only.
    Mod,
    Neg,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    /// `&&` and `||` evaluate their right operand only when needed.
    And,
    Or,
    Not,
    Sin,
    Cos,
    Tan,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Atan2,
    Abs,
    /// `real : Z -> R`
    ToReal,
    /// `x ** y`, real power.
    Pow,
    Atan,
    Min,
    Max,
    Floor,
    Sinh,
    Cosh,
    Erf,
    Log1p,
    Expm1,
    Sigmoid,
    /// `round : R -> Z`, the nearest integer (ties to even); the array paper's §2 primitive.
    Round,
    // Arrays (the language; Huot & Shaikhha's map2/reduce, Efficient CHAD §7's build/index/fold,
    // and the array paper's operations). Their implementations run in the machine (interp/arrays.rs),
    // where the functional ones call back into it.
    /// `a ! i`
    Index,
    Length,
    /// `sum : Array R -> R`
    Sum,
    Replicate,
    Build,
    Map,
    Map2,
    Fold,
    Reduce,
    Scanl,
    Scanr,
    Shift1L,
    Shift1R,
}

/// How an operator groups with others of its precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assoc {
    Left,
    Right,
    /// `a < b < c` is refused.
    None,
}

/// How a primitive is written. Precedences: higher binds tighter; every operator binds looser than
/// application (`f a b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// Applied like a function: `sin x`, `atan2 y x`.
    Named,
    /// A prefix operator: `-x`.
    Prefix(u8),
    /// An infix operator: `a + b`.
    Infix(u8, Assoc),
}

/// The base types the typing classes speak of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    R,
    Z,
    Bool,
}

#[derive(Clone, Copy, Debug)]
pub enum Typing {
    /// A polymorphic signature: given a supply of fresh type variables, the argument types and the
    /// result type (the array operations).
    Poly(fn(&mut dyn FnMut() -> Type) -> (Vec<Type>, Type)),
    /// Every argument and the result are R, or every one is Z (R when nothing decides).
    Numeric,
    /// The arguments are both R or both Z; the result is Bool.
    Compare,
    /// The arguments are both R, both Z or both Bool; the result is Bool.
    Equality,
    /// Fixed argument types and result type.
    Mono(&'static [Base], Base),
}

/// The implementation on reals (IEEE: NaN and infinities propagate).
#[derive(Clone, Copy)]
pub enum OnReal {
    R1(fn(f64) -> f64),
    R2(fn(f64, f64) -> f64),
    RCmp(fn(f64, f64) -> bool),
    /// R -> Z; None where the real has no integer (NaN, an infinity, beyond i64).
    RToZ(fn(f64) -> Option<i64>),
}

/// Why an integer operation has no result (a located runtime error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntError {
    Overflow,
    DivisionByZero,
}

/// The implementation on integers (checked: overflow is an error, never a wrap).
#[derive(Clone, Copy)]
pub enum OnInt {
    Z1(fn(i64) -> Option<i64>),
    Z2(fn(i64, i64) -> Result<i64, IntError>),
    ZCmp(fn(i64, i64) -> bool),
    /// Z -> R
    ZToR(fn(i64) -> f64),
}

#[derive(Clone, Copy)]
pub enum OnBool {
    B1(fn(bool) -> bool),
    B2(fn(bool, bool) -> bool),
}

/// What a rule's partials may mention: the argument primals and the result, as variable expressions.
pub struct At<'a> {
    pub xs: &'a [Expr],
    pub y: &'a Expr,
}

impl At<'_> {
    pub fn x(&self, i: usize) -> Expr {
        self.xs[i].clone()
    }
    pub fn y(&self) -> Expr {
        self.y.clone()
    }
}

/// Partial derivatives on reals (Krawiec et al. Fig. 14's `df_ij`): whether they mention the
/// result (then a stage binds `let y = op xs` first), and one partial per argument.
#[derive(Clone, Copy)]
pub struct Jvp {
    pub uses_result: bool,
    pub partials: fn(&At) -> Vec<Partial>,
}

/// One primitive.
#[derive(Clone, Copy)]
pub struct Row {
    pub prim: Prim,
    /// The name of a named primitive (`sin`) or the symbol of an operator (`+`, `mod`).
    pub name: &'static str,
    pub syntax: Syntax,
    pub arity: usize,
    pub typing: Typing,
    pub on_real: Option<OnReal>,
    pub on_int: Option<OnInt>,
    pub on_bool: Option<OnBool>,
    /// None when the result on reals is not a differentiable real (comparisons, Z and Bool
    /// operations, `real`): stages pass those through on primals.
    pub jvp: Option<Jvp>,
    /// The implementation of an array operation, run by the machine like a builtin (its functional
    /// arguments are called back through `Machine::apply`).
    pub on_array: Option<crate::interp::BuiltinFn>,
}

const fn row(prim: Prim, name: &'static str, syntax: Syntax, arity: usize, typing: Typing) -> Row {
    Row { prim, name, syntax, arity, typing, on_real: None, on_int: None, on_bool: None, jvp: None, on_array: None }
}
const fn named(prim: Prim, name: &'static str, arity: usize, typing: Typing) -> Row {
    row(prim, name, Syntax::Named, arity, typing)
}
const fn infix(prim: Prim, name: &'static str, prec: u8, assoc: Assoc, typing: Typing) -> Row {
    row(prim, name, Syntax::Infix(prec, assoc), 2, typing)
}

impl Row {
    const fn real(mut self, f: OnReal) -> Row {
        self.on_real = Some(f);
        self
    }
    const fn int(mut self, f: OnInt) -> Row {
        self.on_int = Some(f);
        self
    }
    const fn bool(mut self, f: OnBool) -> Row {
        self.on_bool = Some(f);
        self
    }
    const fn jvp(mut self, uses_result: bool, partials: fn(&At) -> Vec<Partial>) -> Row {
        self.jvp = Some(Jvp { uses_result, partials });
        self
    }
    const fn array(mut self, f: crate::interp::BuiltinFn) -> Row {
        self.on_array = Some(f);
        self
    }
}

const R_R: Typing = Typing::Mono(&[Base::R], Base::R);
const RR_R: Typing = Typing::Mono(&[Base::R, Base::R], Base::R);
const BB_B: Typing = Typing::Mono(&[Base::Bool, Base::Bool], Base::Bool);

use Assoc::{Left, None as NonAssoc, Right};
use IntError::*;
use OnBool::*;
use OnInt::*;
use OnReal::*;
use Typing::*;
use crate::interp::arrays;

/// Precedence of unary minus: tighter than `*`, looser than `**` (`-x ** 2` is `-(x ** 2)`, as in
/// Haskell and Python).
pub const NEG_PREC: u8 = 6;
/// The tightest operator precedence (`!`, indexing, as Haskell's infixl 9 `!`); application binds
/// tighter still.
pub const MAX_PREC: u8 = 8;
/// `**`: looser than `!` (`a ! i ** 2` is `(a ! i) ** 2`).
const POW_PREC: u8 = 7;

fn z_div(a: i64, b: i64) -> Result<i64, IntError> {
    if b == 0 {
        Err(DivisionByZero)
    } else {
        a.checked_div(b).ok_or(Overflow)
    }
}
fn z_mod(a: i64, b: i64) -> Result<i64, IntError> {
    if b == 0 {
        Err(DivisionByZero)
    } else {
        a.checked_rem(b).ok_or(Overflow)
    }
}
/// min and max propagate NaN (like every other real operation; `f64::min` would drop it).
fn r_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || a <= b { a } else { b }
}
fn r_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || a >= b { a } else { b }
}
/// The nearest integer, ties to even (Haskell's `round`, which the array paper's §2 names; Rust's
/// `f64::round` would take ties away from zero). None for NaN and infinities, and beyond i64's range
/// (2^63 is the first f64 past it: `as` would saturate there, silently).
fn r_round(x: f64) -> Option<i64> {
    let r = x.round_ties_even();
    (r.is_finite() && r >= -9_223_372_036_854_775_808.0 && r < 9_223_372_036_854_775_808.0).then_some(r as i64)
}
/// 1 / (1 + e^-x), computed without overflow: for x < 0 as e^x / (1 + e^x).
fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn p1(op: Prim, a: Expr) -> Expr {
    prim(op, vec![a])
}
fn p2(op: Prim, a: Expr, b: Expr) -> Expr {
    prim(op, vec![a, b])
}

/// The table, in the order of `Prim`'s variants.
pub const PRIMS: &[Row] = &[
    infix(Prim::Add, "+", 4, Left, Numeric)
        .real(R2(|a, b| a + b))
        .int(Z2(|a, b| a.checked_add(b).ok_or(Overflow)))
        .jvp(false, |_| vec![One, One]),
    infix(Prim::Sub, "-", 4, Left, Numeric)
        .real(R2(|a, b| a - b))
        .int(Z2(|a, b| a.checked_sub(b).ok_or(Overflow)))
        .jvp(false, |_| vec![One, MinusOne]),
    infix(Prim::Mul, "*", 5, Left, Numeric)
        .real(R2(|a, b| a * b))
        .int(Z2(|a, b| a.checked_mul(b).ok_or(Overflow)))
        .jvp(false, |a| vec![Times(a.x(1)), Times(a.x(0))]),
    // d(a/b) = da / b - (a / b^2) db. On Z, `/` truncates toward zero.
    infix(Prim::Div, "/", 5, Left, Numeric)
        .real(R2(|a, b| a / b))
        .int(Z2(z_div))
        .jvp(false, |a| vec![Times(div(real(1.0), a.x(1))), Times(neg(div(a.x(0), mul(a.x(1), a.x(1)))))]),
    // The truncating remainder (the sign of the dividend): a == (a / b) * b + a mod b.
    infix(Prim::Mod, "mod", 5, Left, Mono(&[Base::Z, Base::Z], Base::Z)).int(Z2(z_mod)),
    row(Prim::Neg, "-", Syntax::Prefix(NEG_PREC), 1, Numeric)
        .real(R1(|x| -x))
        .int(Z1(i64::checked_neg))
        .jvp(false, |_| vec![MinusOne]),
    infix(Prim::Lt, "<", 3, NonAssoc, Compare).real(RCmp(|a, b| a < b)).int(ZCmp(|a, b| a < b)),
    infix(Prim::Le, "<=", 3, NonAssoc, Compare).real(RCmp(|a, b| a <= b)).int(ZCmp(|a, b| a <= b)),
    infix(Prim::Gt, ">", 3, NonAssoc, Compare).real(RCmp(|a, b| a > b)).int(ZCmp(|a, b| a > b)),
    infix(Prim::Ge, ">=", 3, NonAssoc, Compare).real(RCmp(|a, b| a >= b)).int(ZCmp(|a, b| a >= b)),
    infix(Prim::Eq, "==", 3, NonAssoc, Equality)
        .real(RCmp(|a, b| a == b))
        .int(ZCmp(|a, b| a == b))
        .bool(B2(|a, b| a == b)),
    infix(Prim::Ne, "!=", 3, NonAssoc, Equality)
        .real(RCmp(|a, b| a != b))
        .int(ZCmp(|a, b| a != b))
        .bool(B2(|a, b| a != b)),
    // (The machine short-circuits; this is for callers that evaluate both operands themselves.)
    infix(Prim::And, "&&", 2, Right, BB_B).bool(B2(|a, b| a && b)),
    infix(Prim::Or, "||", 1, Right, BB_B).bool(B2(|a, b| a || b)),
    named(Prim::Not, "not", 1, Mono(&[Base::Bool], Base::Bool)).bool(B1(|a| !a)),
    named(Prim::Sin, "sin", 1, R_R).real(R1(f64::sin)).jvp(false, |a| vec![Times(p1(Prim::Cos, a.x(0)))]),
    // Fig. 14 / §10.1: Drev{cos} scales by negateR (sin x)
    named(Prim::Cos, "cos", 1, R_R).real(R1(f64::cos)).jvp(false, |a| vec![Times(neg(p1(Prim::Sin, a.x(0))))]),
    named(Prim::Tan, "tan", 1, R_R).real(R1(f64::tan)).jvp(true, |a| vec![Times(add(real(1.0), mul(a.y(), a.y())))]),
    named(Prim::Exp, "exp", 1, R_R).real(R1(f64::exp)).jvp(true, |a| vec![Times(a.y())]),
    named(Prim::Log, "log", 1, R_R).real(R1(f64::ln)).jvp(false, |a| vec![Times(div(real(1.0), a.x(0)))]),
    named(Prim::Sqrt, "sqrt", 1, R_R).real(R1(f64::sqrt)).jvp(true, |a| vec![Times(div(real(0.5), a.y()))]),
    named(Prim::Tanh, "tanh", 1, R_R).real(R1(f64::tanh)).jvp(true, |a| vec![Times(sub(real(1.0), mul(a.y(), a.y())))]),
    // atan2 y x: d = (x dy - y dx) / (x^2 + y^2)
    named(Prim::Atan2, "atan2", 2, RR_R).real(R2(f64::atan2)).jvp(false, |a| {
        let r2 = || add(mul(a.x(0), a.x(0)), mul(a.x(1), a.x(1)));
        vec![Times(div(a.x(1), r2())), Times(neg(div(a.x(0), r2())))]
    }),
    // abs' is the sign, taking 1 at 0 (the right derivative), in every stage alike.
    named(Prim::Abs, "abs", 1, Numeric)
        .real(R1(f64::abs))
        .int(Z1(i64::checked_abs))
        .jvp(false, |a| vec![Times(if_(p2(Prim::Lt, a.x(0), real(0.0)), real(-1.0), real(1.0)))]),
    named(Prim::ToReal, "real", 1, Mono(&[Base::Z], Base::R)).int(ZToR(|i| i as f64)),
    // x ** y = powf (NaN for x < 0 unless y is an integer). Partials, chosen so that none is NaN
    // where the primal is finite (forward mode multiplies both by tangents, also a constant's 0):
    // d/dx = y x^(y-1), and 0 when y = 0 (x^0 = 1 for every x, also 0 and NaN-free at x = 0);
    // d/dy = log x · x^y for x > 0, and 0 for x <= 0: at x = 0, 0^y = 0 for all y > 0; for x < 0,
    // x^y is real only at integer y, so it has no derivative in y and we take the one of a
    // constant exponent (as JAX does at x = 0). Thus d/dx x**2 at 0 is 0, at -3 is -6.
    infix(Prim::Pow, "**", POW_PREC, Right, RR_R).real(R2(f64::powf)).jvp(true, |a| {
        let (x, y) = (a.x(0), a.x(1));
        let dx = if_(p2(Prim::Eq, y.clone(), real(0.0)), real(0.0), mul(y.clone(), p2(Prim::Pow, x.clone(), sub(y, real(1.0)))));
        let dy = if_(p2(Prim::Gt, x.clone(), real(0.0)), mul(p1(Prim::Log, x), a.y()), real(0.0));
        vec![Times(dx), Times(dy)]
    }),
    named(Prim::Atan, "atan", 1, R_R)
        .real(R1(f64::atan))
        .jvp(false, |a| vec![Times(div(real(1.0), add(real(1.0), mul(a.x(0), a.x(0)))))]),
    // On a tie the left argument is the one taken, and gets the whole derivative.
    named(Prim::Min, "min", 2, Numeric).real(R2(r_min)).int(Z2(|a, b| Ok(a.min(b)))).jvp(false, |a| {
        let left = || p2(Prim::Le, a.x(0), a.x(1));
        vec![Times(if_(left(), real(1.0), real(0.0))), Times(if_(left(), real(0.0), real(1.0)))]
    }),
    named(Prim::Max, "max", 2, Numeric).real(R2(r_max)).int(Z2(|a, b| Ok(a.max(b)))).jvp(false, |a| {
        let left = || p2(Prim::Ge, a.x(0), a.x(1));
        vec![Times(if_(left(), real(1.0), real(0.0))), Times(if_(left(), real(0.0), real(1.0)))]
    }),
    // Piecewise constant: derivative 0 (also at the integers, where it jumps).
    named(Prim::Floor, "floor", 1, R_R).real(R1(f64::floor)).jvp(false, |_| vec![Times(real(0.0))]),
    named(Prim::Sinh, "sinh", 1, R_R).real(R1(f64::sinh)).jvp(false, |a| vec![Times(p1(Prim::Cosh, a.x(0)))]),
    named(Prim::Cosh, "cosh", 1, R_R).real(R1(f64::cosh)).jvp(false, |a| vec![Times(p1(Prim::Sinh, a.x(0)))]),
    // libm's erf (musl's, under 1 ulp); erf' x = 2/sqrt(pi) exp(-x^2)
    named(Prim::Erf, "erf", 1, R_R).real(R1(libm::erf)).jvp(false, |a| {
        vec![Times(mul(real(std::f64::consts::FRAC_2_SQRT_PI), p1(Prim::Exp, neg(mul(a.x(0), a.x(0))))))]
    }),
    named(Prim::Log1p, "log1p", 1, R_R)
        .real(R1(f64::ln_1p))
        .jvp(false, |a| vec![Times(div(real(1.0), add(real(1.0), a.x(0))))]),
    named(Prim::Expm1, "expm1", 1, R_R).real(R1(f64::exp_m1)).jvp(false, |a| vec![Times(p1(Prim::Exp, a.x(0)))]),
    named(Prim::Sigmoid, "sigmoid", 1, R_R).real(R1(sigmoid)).jvp(true, |a| vec![Times(mul(a.y(), sub(real(1.0), a.y())))]),
    // Its derivative is trivial (the array paper §2: the Jacobian R^(0×1) is empty): the integer carries
    // no tangent, so, like a comparison, no jvp, and every stage applies it to primals.
    named(Prim::Round, "round", 1, Mono(&[Base::R], Base::Z)).real(RToZ(r_round)),
    // Arrays. No partials: every stage translates them structurally, as containers of its dual
    // numbers (the array paper's §4.1), except `sum`, which is `fold (+) 0.0` (`kit::arrays`).
    infix(Prim::Index, "!", MAX_PREC, Left, Poly(|v| {
        let a = v();
        (vec![Type::array(a.clone()), Type::Int], a)
    }))
    .array(arrays::index),
    named(Prim::Length, "length", 1, Poly(|v| (vec![Type::array(v())], Type::Int))).array(arrays::length),
    named(Prim::Sum, "sum", 1, Poly(|_| (vec![Type::array(Type::Real)], Type::Real))).array(arrays::sum),
    named(Prim::Replicate, "replicate", 2, Poly(|v| {
        let a = v();
        (vec![Type::Int, a.clone()], Type::array(a))
    }))
    .array(arrays::replicate),
    named(Prim::Build, "build", 2, Poly(|v| {
        let a = v();
        (vec![Type::Int, Type::fun(Type::Int, a.clone())], Type::array(a))
    }))
    .array(arrays::build),
    named(Prim::Map, "map", 2, Poly(|v| {
        let (a, b) = (v(), v());
        (vec![Type::fun(a.clone(), b.clone()), Type::array(a)], Type::array(b))
    }))
    .array(arrays::map),
    named(Prim::Map2, "map2", 3, Poly(|v| {
        let (a, b, c) = (v(), v(), v());
        (vec![Type::fun(a.clone(), Type::fun(b.clone(), c.clone())), Type::array(a), Type::array(b)], Type::array(c))
    }))
    .array(arrays::map2),
    // fold f z a = f (... (f z a0) ...) a_{n-1}
    named(Prim::Fold, "fold", 3, Poly(|v| {
        let (a, b) = (v(), v());
        (vec![Type::fun(b.clone(), Type::fun(a.clone(), b.clone())), b.clone(), Type::array(a)], b)
    }))
    .array(arrays::fold),
    // Huot & Shaikhha's reduce: f associative with unit z; run as a left fold.
    named(Prim::Reduce, "reduce", 3, Poly(|v| {
        let a = v();
        (vec![Type::fun(a.clone(), Type::fun(a.clone(), a.clone())), a.clone(), Type::array(a.clone())], a)
    }))
    .array(arrays::fold),
    named(Prim::Scanl, "scanl", 3, Poly(|v| {
        let (a, b) = (v(), v());
        (vec![Type::fun(b.clone(), Type::fun(a.clone(), b.clone())), b.clone(), Type::array(a)], Type::array(b))
    }))
    .array(arrays::scanl),
    named(Prim::Scanr, "scanr", 3, Poly(|v| {
        let (a, b) = (v(), v());
        (vec![Type::fun(a.clone(), Type::fun(b.clone(), b.clone())), b.clone(), Type::array(a)], Type::array(b))
    }))
    .array(arrays::scanr),
    named(Prim::Shift1L, "shift1L", 1, Poly(|v| {
        let a = Type::array(v());
        (vec![a.clone()], a)
    }))
    .array(arrays::shift1l),
    named(Prim::Shift1R, "shift1R", 1, Poly(|v| {
        let a = Type::array(v());
        (vec![a.clone()], a)
    }))
    .array(arrays::shift1r),
];

// The table is indexed by `Prim`: row i describes variant i.
const _: () = {
    let mut i = 0;
    while i < PRIMS.len() {
        assert!(PRIMS[i].prim as usize == i, "PRIMS must list the rows in the order of Prim's variants");
        i += 1;
    }
    assert!(PRIMS.len() == Prim::Shift1R as usize + 1, "every Prim has a row");
};

impl Prim {
    /// This primitive's row.
    pub fn info(self) -> &'static Row {
        &PRIMS[self as usize]
    }

    pub fn arity(self) -> usize {
        self.info().arity
    }

    /// The surface name of a named primitive (`sin`), or the operator symbol (`+`).
    pub fn symbol(self) -> &'static str {
        self.info().name
    }

    /// Whether this is an array operation (run by the machine, translated structurally).
    pub fn is_array_op(self) -> bool {
        self.info().on_array.is_some()
    }

    /// Whether this primitive is written as a function application rather than an operator.
    pub fn is_named(self) -> bool {
        self.info().syntax == Syntax::Named
    }
}

/// The named primitive spelled `text`.
pub fn named_prim(text: &str) -> Option<Prim> {
    PRIMS.iter().find(|r| r.syntax == Syntax::Named && r.name == text).map(|r| r.prim)
}

/// The infix operator spelled `text`, with its precedence and associativity.
pub fn infix_op(text: &str) -> Option<(Prim, u8, Assoc)> {
    PRIMS.iter().find_map(|r| match r.syntax {
        Syntax::Infix(prec, assoc) if r.name == text => Some((r.prim, prec, assoc)),
        _ => None,
    })
}

/// The prefix operator spelled `text`, with its precedence.
pub fn prefix_op(text: &str) -> Option<(Prim, u8)> {
    PRIMS.iter().find_map(|r| match r.syntax {
        Syntax::Prefix(prec) if r.name == text => Some((r.prim, prec)),
        _ => None,
    })
}

/// The operator symbol (`+`, `**`, `mod`, ...) that `text` spells, with its static lifetime.
pub fn operator(text: &str) -> Option<&'static str> {
    PRIMS.iter().find(|r| r.syntax != Syntax::Named && r.name == text).map(|r| r.name)
}

/// The longest symbolic operator (not a word like `mod`) at the start of `src`.
pub fn operator_prefix_of(src: &str) -> Option<&'static str> {
    PRIMS
        .iter()
        .filter(|r| r.syntax != Syntax::Named && !r.name.starts_with(|c: char| c.is_ascii_alphabetic()))
        .map(|r| r.name)
        .filter(|s| src.starts_with(s))
        .max_by_key(|s| s.len())
}

#[cfg(test)]
mod tests;
