//! The paper's core array language (§3.2, Fig. 7) inside the one IR: how each core construct is
//! written as IR, and a view (`Core`) that the rules of bot and the dual-arrays transform match on.
//!
//! Decisions (notes §2.2, §8):
//! - A rank-n array is the language's nested `Array^n R`; shapes are not types but Int *terms*
//!   (`length a`, `length (index a 0)`), computed when the program runs (the paper's are static).
//! - `build1 k (λi. t)` is the language's `build k (\i -> t)`; `replicate` is the language's.
//! - `index t [u1..un]` is a chain `index (… (index t u1) …) un` of the total builtin `index`
//!   (out of range gives zeros shaped like an element: §8.1).
//! - `gather [k1..km] t (λ[i1..im]. [t1..tn])` is the builtin `gather<m><n>` applied to the sizes
//!   (an Int, or a tuple of m Ints), `t`, and `\(i1, .., im) -> [t1, .., tn]` (the index list is an
//!   array literal of Ints); `scatter<m><n>` likewise with the n output sizes; any m, n ≥ 1 (`MAX_DIMS`).
//! - A broadcast op of rank 0 is the scalar primitive itself; of rank r+1 it is `map`/`map2` of a
//!   lambda whose body is the rank-r op on the lambda's parameters (`map2 (\x y -> x * y) u v`), so
//!   that forward mode, which checks bot's output, differentiates it like any program.
//! - `sumOuter`, `tr [p0, .., pn] t` (output dim q is input dim p_q), strict `cond` and `iota k`
//!   (B1's `[0, .., k-1]`) are builtins. There is no `reshape`: no surface operation lowers to it.

use crate::build::*;
use crate::ir::*;

/// The m and n up to which `gather<m><n>` and `scatter<m><n>` are registered for every stage. The
/// paper's gather and scatter (§3.3, Figs. 9–11) take any rank, and so do ours: a name of a rank past
/// it is made when first asked for (`gather_name`), and bot registers the builtins of the ranks its
/// output uses (`runtime::builtins_for`), which the stages after it inherit. A fold inside three
/// nested maps reads its states with a gather of rank 4, a scan inside four with one of rank 5, folds
/// packed three deep in a map one of rank 6 (Part C seed 180).
pub const MAX_DIMS: usize = 5;

/// `gather<m><n>` and `scatter<m><n>` for 1 ≤ m, n ≤ `MAX_DIMS`, m-major.
static NAMES: std::sync::LazyLock<[Vec<String>; 2]> =
    std::sync::LazyLock::new(|| ["gather", "scatter"].map(|op| (1..=MAX_DIMS).flat_map(|m| (1..=MAX_DIMS).map(move |n| rank_name(op, m, n))).collect()));

/// The names of ranks past `MAX_DIMS` made so far: each made once and kept (a program's ranks are
/// few, bounded by its nesting).
static MORE: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// `gather<m><n>`, or `gather<m>_<n>` where m or n has two digits (the parse is then unambiguous).
fn rank_name(op: &str, m: usize, n: usize) -> String {
    if m < 10 && n < 10 {
        format!("{op}{m}{n}")
    } else {
        format!("{op}{m}_{n}")
    }
}

fn named(op: usize, m: usize, n: usize) -> &'static str {
    if (1..=MAX_DIMS).contains(&m) && (1..=MAX_DIMS).contains(&n) {
        return &NAMES[op][(m - 1) * MAX_DIMS + (n - 1)];
    }
    let name = rank_name(["gather", "scatter"][op], m.max(1), n.max(1));
    let mut more = MORE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = more.iter().find(|s| **s == name) {
        return s;
    }
    let s: &'static str = Box::leak(name.into_boxed_str());
    more.push(s);
    s
}

/// The builtin `gather<m><n>`: `m` dimensions built, `n` indexed (m, n ≥ 1).
pub fn gather_name(m: usize, n: usize) -> &'static str {
    named(0, m, n)
}

/// The builtin `scatter<m><n>`: `m` dimensions read, `n` written (m, n ≥ 1).
pub fn scatter_name(m: usize, n: usize) -> &'static str {
    named(1, m, n)
}

/// Whether `name` is a gather (true) or a scatter (false), and its `(m, n)`, at any rank.
pub fn rank_of(name: &str) -> Option<(bool, usize, usize)> {
    let (is_gather, rest) = match name.strip_prefix("gather") {
        Some(r) => (true, r),
        None => (false, name.strip_prefix("scatter")?),
    };
    let digits = |t: &str| (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse::<usize>().ok()).flatten();
    let (m, n) = match rest.split_once('_') {
        Some((a, b)) => (digits(a)?, digits(b)?),
        None if rest.len() == 2 => (digits(&rest[..1])?, digits(&rest[1..])?),
        None => return None,
    };
    (m >= 1 && n >= 1).then_some((is_gather, m, n))
}

/// Whether `p` is a scalar operation (a broadcast op of rank 0), not an array operation.
pub fn scalar_op(p: Prim) -> bool {
    !matches!(
        p,
        Prim::Index
            | Prim::Length
            | Prim::Sum
            | Prim::Replicate
            | Prim::Build
            | Prim::Map
            | Prim::Map2
            | Prim::Fold
            | Prim::Reduce
            | Prim::Scanl
            | Prim::Scanr
            | Prim::Shift1L
            | Prim::Shift1R
    )
}

/// A core construct, viewed from its IR.
pub enum Core<'a> {
    Build1 { k: &'a Expr, i: &'a Name, body: &'a Expr },
    Index { t: &'a Expr, u: &'a Expr },
    /// gather (m = |is|, n = |ix|) or scatter (m = |is|, n = |ix| = |sizes|).
    Gather { sizes: Vec<&'a Expr>, t: &'a Expr, is: Vec<&'a Name>, ix: Vec<&'a Expr> },
    Scatter { sizes: Vec<&'a Expr>, t: &'a Expr, is: Vec<&'a Name>, ix: Vec<&'a Expr> },
    SumOuter(&'a Expr),
    Tr(Vec<usize>, &'a Expr),
    Cond(&'a Expr, &'a Expr, &'a Expr),
    Iota(&'a Expr),
    Replicate(&'a Expr, &'a Expr),
    Lit(&'a [Expr]),
    Let(&'a Name, &'a Expr, &'a Expr),
    /// A broadcast op: its operands (rank r is the op's map-nesting depth).
    Op(Vec<&'a Expr>),
    Var(&'a Name),
    Length(&'a Expr),
    /// The sequential loop `scanl f z xs` (beyond the paper, §2.3: fold.rs).
    Scanl { f: &'a Expr, z: &'a Expr, xs: &'a Expr },
    /// Int/Real/Bool constants.
    Const,
    Other,
}

/// The head builtin and the arguments of an application spine.
pub fn spine(e: &Expr) -> Option<(&str, Vec<&Expr>)> {
    let mut args = vec![];
    let mut cur = e;
    while let ExprKind::App(f_a) = &cur.kind {
        let (f, a) = &**f_a;
        args.push(a);
        cur = f;
    }
    args.reverse();
    match &cur.kind {
        ExprKind::Builtin(n) => Some((n, args)),
        _ => None,
    }
}

/// `(m, n)` of `gather<m><n>` or `scatter<m><n>` (`prefix`).
fn dims_of(name: &str, prefix: &str) -> Option<(usize, usize)> {
    let (g, m, n) = rank_of(name)?;
    (g == (prefix == "gather")).then_some((m, n))
}

fn components(e: &Expr, n: usize) -> Option<Vec<&Expr>> {
    match (&e.kind, n) {
        (ExprKind::Tuple(es), n) if es.len() == n => Some(es.iter().collect()),
        (_, 1) => Some(vec![e]),
        _ => None,
    }
}

fn index_fun(f: &Expr, m: usize, n: usize) -> Option<(Vec<&Name>, Vec<&Expr>)> {
    let ExprKind::Lam(_, p_body) = &f.kind else { return None };
    let (p, body) = &**p_body;
    let is: Vec<&Name> = match p {
        Pat::Var(x, _) if m == 1 => vec![x],
        Pat::Tuple(ps, _) if ps.len() == m => ps.iter().map(|p| if let Pat::Var(x, _) = p { Some(x) } else { None }).collect::<Option<_>>()?,
        _ => return None,
    };
    let ExprKind::Array(ix) = &body.kind else { return None };
    (ix.len() == n).then(|| (is, ix.iter().collect()))
}

/// The run-time length check of a packed loop's array component (pack.rs, beyond the paper):
/// `sameLength expected actual` is `expected`, or a located error when the two differ. A scalar
/// operation on integers, so bot lifts it as a broadcast op (B5) and D′ keeps it as it is.
pub const SAME_LENGTH: &str = "sameLength";

/// `sameLength expected actual` (see `SAME_LENGTH`).
pub fn same_length(expected: Expr, actual: Expr) -> Expr {
    apps(builtin(SAME_LENGTH), [expected, actual])
}

/// The run-time regularity check of an array of arrays that a packed loop reads row-major (pack.rs,
/// beyond the paper): `sameShape [d0, .., dr-1] v` is `dr-1` when `v` is regular (§3.2: every row of a
/// dimension has one length, "there are no jagged arrays") of dimensions `d0 × .. × dr-1`, or a
/// located error: the packed row's fused reads `v ! (q / w) ! (q mod w)` are total (§5.2), so a short
/// row would be read as zeros. `sameLength`'s dimensions checked on every row, linear in v's size;
/// its result is the innermost dimension, which the packed row's reads use as a bound (pack.rs).
/// Like it an operation on integers (v's shape only): bot lifts it as a broadcast op (B5: each row of
/// the lifted operands checked), and D′ keeps it, reading v's primal. With no dimensions, `sameShape []
/// v` checks an array-of-arrays literal whose rows are not all literals (lower.rs): regular at every
/// depth, located at the literal, its result v's length.
pub const SAME_SHAPE: &str = "sameShape";

/// `sameShape [dims] v` (see `SAME_SHAPE`).
pub fn same_shape(dims: Expr, v: Expr) -> Expr {
    apps(builtin(SAME_SHAPE), [dims, v])
}

/// The size of a masked build (int_reads.rs `masked_sizes`, beyond the paper): `padSize u` is u, a
/// size that any size at least u serves, since its consumer sums the build masked to zero past u.
/// Inside a build1 whose index u reads (a fold with a masked size inside a map: one largest size
/// per row), bot pads it to the largest over the whole build1 (bot.rs `P0`): the paper's shapes are
/// static, or weaker, "all the intermediate values computed in a build1-lambda must have shapes that
/// are independent of the index at which the lambda is called" (§5, Static shapes). An operation on
/// integers: D′ keeps it as it is.
pub const PAD_SIZE: &str = "padSize";

/// `padSize u` (see `PAD_SIZE`).
pub fn pad_size(u: Expr) -> Expr {
    app(builtin(PAD_SIZE), u)
}

/// u of `padSize u`.
pub fn is_pad_size(e: &Expr) -> Option<&Expr> {
    let (h, a) = spine(e)?;
    (h == PAD_SIZE && a.len() == 1).then(|| a[0])
}

/// The run-time exactness check of an integer brought back from its real copy (int_reads.rs
/// `rounded`, beyond the paper): `exactInt k` is k when |k| ≤ 2^53, below which every integer is a
/// real exactly (f64's 53 bits), or an error located at the fold or scan whose integer component
/// rides in its reals' row as a real copy: past 2^53 the copy may have rounded, and §2's `round`
/// of it would not give the source's integer back. A scalar operation on integers, as
/// `sameLength`: bot lifts it as a broadcast op (B5), D′ keeps it.
pub const EXACT_INT: &str = "exactInt";

/// `exactInt k` (see `EXACT_INT`).
pub fn exact_int(k: Expr) -> Expr {
    app(builtin(EXACT_INT), k)
}

/// The operands of a run-time check (`sameLength`, `sameShape` or `exactInt`), and its name.
fn is_check(e: &Expr) -> Option<(&'static str, Vec<&Expr>)> {
    let (h, a) = spine(e)?;
    let (name, arity) = [(SAME_LENGTH, 2), (SAME_SHAPE, 2), (EXACT_INT, 1)].into_iter().find(|n| n.0 == h)?;
    (a.len() == arity).then_some((name, a))
}

fn is_same_length(e: &Expr) -> Option<Vec<&Expr>> {
    is_check(e).map(|(_, a)| a)
}

/// Whether `e` is a broadcast op, and its operands.
pub fn op_operands(e: &Expr) -> Option<Vec<&Expr>> {
    match &e.kind {
        ExprKind::Prim(p, args) if scalar_op(*p) => Some(args.iter().collect()),
        ExprKind::App(..) => is_same_length(e),
        ExprKind::Prim(Prim::Map | Prim::Map2, args) => {
            let (params, body) = lam_params(&args[0])?;
            let inner = op_operands(body)?;
            let ok = inner.len() == params.len() && inner.iter().zip(&params).all(|(o, p)| matches!(&o.kind, ExprKind::Var(x) if x == *p));
            ok.then(|| args[1..].iter().collect())
        }
        _ => None,
    }
}

/// The parameters `x` or `x y` of `\x -> e` / `\x -> \y -> e`, and the body.
pub fn lam_params(f: &Expr) -> Option<(Vec<&Name>, &Expr)> {
    let ExprKind::Lam(_, pat_b) = &f.kind else { return None };
    let (pat, b) = &**pat_b;
    let Pat::Var(x, _) = pat else { return None };
    if let ExprKind::Lam(_, pat_b2) = &b.kind {
        let (pat, b2) = &**pat_b2;
        if let Pat::Var(y, _) = pat {
            return Some((vec![x, y], b2));
        }
    }
    Some((vec![x], b))
}

pub fn view(e: &Expr) -> Core<'_> {
    if let Some(ops) = op_operands(e) {
        return Core::Op(ops);
    }
    match &e.kind {
        ExprKind::Prim(Prim::Build, a) => match &a[1].kind {
            ExprKind::Lam(_, pat_body) => { let (pat, body) = &**pat_body; match pat {
                Pat::Var(i, _) => Core::Build1 { k: &a[0], i, body },
                _ => Core::Other,
            } },
            _ => Core::Other,
        },
        ExprKind::Prim(Prim::Replicate, a) => Core::Replicate(&a[0], &a[1]),
        // the language's `sum : Array R → R` is sumOuter at rank 1 (kept: forward mode, which checks
        // bot, knows its zero on an empty array; the builtin cannot know its element's shape)
        ExprKind::Prim(Prim::Sum, a) => Core::SumOuter(&a[0]),
        ExprKind::Prim(Prim::Length, a) => Core::Length(&a[0]),
        ExprKind::Prim(Prim::Scanl, a) => Core::Scanl { f: &a[0], z: &a[1], xs: &a[2] },
        ExprKind::Array(es) => Core::Lit(es),
        ExprKind::Let(pat_rb) if matches!(pat_rb.0, Pat::Var(..)) => match &**pat_rb { (Pat::Var(x, _), rhs_body) => Core::Let(x, &rhs_body.0, &rhs_body.1), _ => Core::Other },
        ExprKind::Var(x) => Core::Var(x),
        ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) => Core::Const,
        _ => {
            let Some((h, args)) = spine(e) else { return Core::Other };
            match (h, args.len()) {
                ("index", 2) => Core::Index { t: args[0], u: args[1] },
                ("sumOuter", 1) => Core::SumOuter(args[0]),
                ("iota", 1) => Core::Iota(args[0]),
                ("cond", 3) => Core::Cond(args[0], args[1], args[2]),
                ("tr", 2) => match &args[0].kind {
                    ExprKind::Array(ps) => {
                        let perm: Option<Vec<usize>> = ps.iter().map(|p| if let ExprKind::Int(k) = p.kind { usize::try_from(k).ok() } else { None }).collect();
                        perm.map_or(Core::Other, |p| Core::Tr(p, args[1]))
                    }
                    _ => Core::Other,
                },
                (h, 3) => {
                    if let Some((m, n)) = dims_of(h, "gather") {
                        if let (Some(sizes), Some((is, ix))) = (components(args[0], m), index_fun(args[2], m, n)) {
                            return Core::Gather { sizes, t: args[1], is, ix };
                        }
                    }
                    if let Some((m, n)) = dims_of(h, "scatter") {
                        if let (Some(sizes), Some((is, ix))) = (components(args[0], n), index_fun(args[2], m, n)) {
                            return Core::Scatter { sizes, t: args[1], is, ix };
                        }
                    }
                    Core::Other
                }
                _ => Core::Other,
            }
        }
    }
}

// Constructors, in the paper's notation.

pub fn build1(k: Expr, i: &Name, body: Expr) -> Expr {
    prim(Prim::Build, vec![k, lam(pvar(i), body)])
}

pub fn index(t: Expr, u: Expr) -> Expr {
    apps(builtin("index"), [t, u])
}

pub fn index_all(t: Expr, ix: impl IntoIterator<Item = Expr>) -> Expr {
    ix.into_iter().fold(t, index)
}

pub fn sum_outer(t: Expr) -> Expr {
    app(builtin("sumOuter"), t)
}

pub fn iota(k: Expr) -> Expr {
    app(builtin("iota"), k)
}

pub fn cond(b: Expr, u: Expr, v: Expr) -> Expr {
    apps(builtin("cond"), [b, u, v])
}

pub fn replicate(k: Expr, t: Expr) -> Expr {
    prim(Prim::Replicate, vec![k, t])
}

pub fn tr(perm: &[usize], t: Expr) -> Expr {
    apps(builtin("tr"), [Expr::gen(ExprKind::Array(perm.iter().map(|&p| int(p as i64)).collect())), t])
}

fn sizes_expr(mut sizes: Vec<Expr>) -> Expr {
    if sizes.len() == 1 {
        sizes.pop().expect("one size")
    } else {
        tuple(sizes)
    }
}

fn index_lam(is: &[Name], ix: Vec<Expr>) -> Expr {
    let p = if is.len() == 1 { pvar(&is[0]) } else { Pat::Tuple(is.iter().map(pvar).collect(), crate::diag::Span::NONE) };
    lam(p, Expr::gen(ExprKind::Array(ix.into())))
}

/// `gather [sizes] t (λis. ix)`, of any rank (None for no dimension).
pub fn gather(sizes: Vec<Expr>, t: Expr, is: &[Name], ix: Vec<Expr>) -> Option<Expr> {
    let (m, n) = (is.len(), ix.len());
    (m >= 1 && n >= 1 && sizes.len() == m).then_some(())?;
    Some(apps(builtin(gather_name(m, n)), [sizes_expr(sizes), t, index_lam(is, ix)]))
}

/// `scatter [sizes] t (λis. ix)`, of any rank (None for no dimension).
pub fn scatter(sizes: Vec<Expr>, t: Expr, is: &[Name], ix: Vec<Expr>) -> Option<Expr> {
    let (m, n) = (is.len(), ix.len());
    (m >= 1 && n >= 1 && sizes.len() == n).then_some(())?;
    Some(apps(builtin(scatter_name(m, n)), [sizes_expr(sizes), t, index_lam(is, ix)]))
}

/// The op `e` (a broadcast op) with its operands replaced, at the same rank.
pub fn with_operands(e: &Expr, new: Vec<Expr>) -> Expr {
    // Built around the new operands, not by cloning `e` whole: that copied the old operands' subtrees
    // at every level, Θ(n²) on a deep nesting such as sin (sin (... x)) (issue 14).
    let kind = match &e.kind {
        ExprKind::Prim(p, _) if scalar_op(*p) => ExprKind::Prim(*p, new.into()),
        ExprKind::Prim(p, args) => ExprKind::Prim(*p, std::iter::once(args[0].clone()).chain(new).collect()),
        ExprKind::App(..) if is_check(e).is_some() => check_kind(is_check(e).map_or(SAME_LENGTH, |c| c.0), new),
        _ => e.kind.clone(),
    };
    Expr { kind, span: e.span, ty: Type::Unknown }
}

fn check_kind(name: &'static str, new: Vec<Expr>) -> ExprKind {
    apps(builtin(name), new).kind
}

/// The op `e` one rank up, on `new` operands: `map2 (\x y -> e[x, y]) u v`.
pub fn lift_op(e: &Expr, new: Vec<Expr>, fresh: &mut Fresh) -> Expr {
    let params: Vec<Name> = (0..new.len()).map(|k| fresh.name(["x", "y", "z"].get(k).copied().unwrap_or("w"))).collect();
    let inner = with_operands(e, params.iter().map(var).collect());
    let f = params.iter().rev().fold(inner, |b, p| lam(pvar(p), b));
    let p = if new.len() == 1 { Prim::Map } else { Prim::Map2 };
    prim(p, std::iter::once(f).chain(new).collect())
}

/// The op `e` of rank r+1 one rank down, on `new` operands (I5, I6: `index (op t u) j`).
pub fn lower_op(e: &Expr, new: Vec<Expr>) -> Option<Expr> {
    match &e.kind {
        ExprKind::Prim(Prim::Map | Prim::Map2, args) => {
            let (_, body) = lam_params(&args[0])?;
            Some(with_operands(body, new))
        }
        _ => None,
    }
}
