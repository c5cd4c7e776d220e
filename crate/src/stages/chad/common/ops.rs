//! The type-indexed target operations of Figs. 3, 6 and Table 2 (`0_τ`, `one_{x:τ∈Γ}`,
//! `split_{Γ,τ}`, `lfst`, `lcastl`, `scope`, `run`, ...). Each instance is a builtin whose name shows
//! its index (`0_{(R ×L R)}`, `one_{x∈x:R, y:R}`); one implementation per kind serves every
//! instance, looking up what its name stands for in a table filled when the transform names it.

use super::source::CT;
use crate::interp::Builtin;
use crate::ir::{Name, Scheme, Type};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// A context Γ: its variables with their cotangent types, outermost first (a variable's position
/// is its key in the environment vector: a de Bruijn level).
pub type Ctx = Vec<Entry>;
/// A context as functions read it: Γ or a prefix of it (a let chain's contexts are prefixes of the last).
pub type CtxS = [Entry];

/// A variable of Γ, with what the names of instances need of the prefix of Γ that ends at it
/// (`Gamma`), made from the entry before in O(log |Γ|): a program names Γ at every let, and
/// computed from the whole prefix each time that was O(|Γ|) per let, quadratic in all (issue 14).
#[derive(Clone, Debug)]
pub struct Entry(pub Name, pub CT, Gamma);

/// Γ extended by x : ct (O(log |Γ|)).
pub fn push(g: &mut Ctx, x: &Name, ct: CT) {
    let gamma = gamma(g).push(&x.text, &ct);
    g.push(Entry(x.clone(), ct, gamma));
}

/// Γ from its variables, outermost first.
pub fn ctx_of(vars: impl IntoIterator<Item = (Name, CT)>) -> Ctx {
    let mut g = vec![];
    for (x, ct) in vars {
        push(&mut g, &x, ct);
    }
    g
}

/// What the instances of Γ keep: Γ as a persistent list that an extension shares with every prefix
/// (one node a variable: Γ, x : τ is made in O(1) and stored in O(1)), with the running length and
/// FNV-1a hash of the texts names and types show Γ by. Issue 14: a persistent vector and a hash
/// set of the texts (rpds) cost a path copy per let, ~2.5 KB, and made every `Op` ~270 bytes; a
/// program of 10^5 lets ran out of memory transforming. A thin pointer: `Op`s carrying Γ stay small.
#[derive(Clone, Default)]
pub struct Gamma(Option<Arc<Node>>);

struct Node {
    x: Arc<str>,
    ct: CT,
    /// Γ without x.
    up: Gamma,
    /// A farther ancestor (Myers' skew-binary jumps), so that variable i is found in O(log |Γ|).
    jump: Gamma,
    len: usize,
    /// `x:R, y:R` (names show Γ so; valid while no text occurs twice)
    full: Running,
    /// `R,R` (`EV Γ`'s type shows Γ so)
    cts: Running,
    /// A text occurs twice in Γ: then a name shows its position (`x@3`), and texts are computed
    /// from the whole of Γ as before (a program that repeats a name pays O(|Γ|)).
    dup: bool,
    /// Unique per node: the context being extended is recognised by it (`Scope`).
    serial: u64,
}

/// Dropped one node at a time: a context of 10^5 variables is a list that long, and the derived
/// drop would recurse along it (wasm's stack is small).
impl Drop for Node {
    fn drop(&mut self) {
        if self.up.is_empty() && self.jump.is_empty() {
            return;
        }
        let mut stack = vec![self.up.0.take(), self.jump.0.take()];
        while let Some(g) = stack.pop() {
            if let Some(mut node) = g.and_then(Arc::into_inner) {
                stack.push(node.up.0.take());
                stack.push(node.jump.0.take());
            }
        }
    }
}

impl std::fmt::Debug for Gamma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Γ{}#{:08x}", self.len(), self.node().map_or(Running::EMPTY.hash, |n| n.full.hash))
    }
}

/// Two contexts are equal when they list the same variables with the same cotangent types
/// (compared one by one, not recursively).
impl PartialEq for Gamma {
    fn eq(&self, other: &Gamma) -> bool {
        let (mut a, mut b) = (self, other);
        loop {
            match (&a.0, &b.0) {
                (None, None) => return true,
                (Some(m), Some(n)) if Arc::ptr_eq(m, n) => return true,
                (Some(m), Some(n)) if m.len == n.len && m.x == n.x && m.ct == n.ct => (a, b) = (&m.up, &n.up),
                _ => return false,
            }
        }
    }
}

/// The length in chars and the FNV-1a hash of a text built piece by piece (`abbreviated`'s hash,
/// so the names stay those the whole text gave).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Running {
    chars: usize,
    hash: u32,
}

impl Running {
    const EMPTY: Running = Running { chars: 0, hash: 0x811c_9dc5 };
    fn add(self, s: &str) -> Running {
        Running { chars: self.chars + s.chars().count(), hash: s.bytes().fold(self.hash, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193)) }
    }
}

/// Whether a text is already in the context being extended, in O(1): the transform extends
/// contexts depth first (a let chain's Γ, then a subterm's Γ, x, …, then Γ, y), so the texts of
/// the context extended last are kept with a count each, and extending a prefix of it drops the
/// rest (each text is dropped once after it is added). Extending a context off that path (not
/// done by the transform, but allowed) rebuilds the path from it: O(|Γ|).
#[derive(Default)]
struct Scope {
    path: Vec<(u64, Arc<str>)>,
    count: HashMap<Arc<str>, u32>,
    serial: u64,
}

impl Scope {
    fn pop(&mut self) {
        if let Some((_, x)) = self.path.pop() {
            if let Some(c) = self.count.get_mut(&x) {
                *c -= 1;
                if *c == 0 {
                    self.count.remove(&x);
                }
            }
        }
    }
    fn add(&mut self, serial: u64, x: &Arc<str>) {
        self.path.push((serial, x.clone()));
        *self.count.entry(x.clone()).or_default() += 1;
    }
    /// Makes the path Γ's, and tells whether x is in Γ.
    fn contains(&mut self, g: &Gamma, x: &str) -> bool {
        let l = g.len();
        let on_path = self.path.len() >= l && g.node().is_none_or(|n| self.path[l - 1].0 == n.serial);
        if on_path {
            while self.path.len() > l {
                self.pop();
            }
        } else {
            self.path.clear();
            self.count.clear();
            let mut nodes = vec![];
            let mut cur = g.node();
            while let Some(n) = cur {
                nodes.push(n);
                cur = n.up.node();
            }
            for n in nodes.into_iter().rev() {
                self.add(n.serial, &n.x);
            }
        }
        self.count.contains_key(x)
    }
}

thread_local! {
    static SCOPE: std::cell::RefCell<Scope> = Default::default();
}

/// Lets go of the path (the texts of the context extended last) once a transform is done; a
/// context extended later finds itself off the path and rebuilds it.
pub fn forget_contexts() {
    SCOPE.with(|s| {
        let mut s = s.borrow_mut();
        *s = Scope { serial: s.serial, ..Scope::default() };
    });
}

impl Gamma {
    fn node(&self) -> Option<&Node> {
        self.0.as_deref()
    }
    pub fn len(&self) -> usize {
        self.node().map_or(0, |n| n.len)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
    fn dup(&self) -> bool {
        self.node().is_some_and(|n| n.dup)
    }
    fn full(&self) -> Running {
        self.node().map_or(Running::EMPTY, |n| n.full)
    }
    fn cts_text(&self) -> Running {
        self.node().map_or(Running::EMPTY, |n| n.cts)
    }
    /// Γ, x : ct.
    fn push(&self, x: &str, ct: &CT) -> Gamma {
        let shown = ct.show();
        let sep = |r: Running, s: &str| if self.is_empty() { r } else { r.add(s) };
        let x: Arc<str> = x.into();
        // the jump of Γ, x (Myers 1983): the jump of Γ's jump when the two jumps before span as
        // many variables, else Γ; the empty context's jump is itself
        let jump = match self.node() {
            None => Gamma(None),
            Some(p) => {
                let (j, jj) = p.jump.node().map_or((0, Gamma(None)), |j| (j.len, j.jump.clone()));
                if p.len - j == j - jj.len() { jj } else { self.clone() }
            }
        };
        SCOPE.with(|s| {
            let mut s = s.borrow_mut();
            let dup = self.dup() || s.contains(self, &x);
            s.serial += 1;
            let serial = s.serial;
            s.add(serial, &x);
            Gamma(Some(Arc::new(Node {
                full: sep(self.full(), ", ").add(&x).add(":").add(&shown),
                cts: sep(self.cts_text(), ",").add(&shown),
                x,
                ct: ct.clone(),
                up: self.clone(),
                jump,
                len: self.len() + 1,
                dup,
                serial,
            })))
        })
    }
    /// The node of variable `i` (the prefix of length i + 1), in O(log |Γ|).
    fn get(&self, i: usize) -> Option<&Node> {
        let mut cur = self.node()?;
        if i >= cur.len {
            return None;
        }
        while cur.len > i + 1 {
            cur = match cur.jump.node() {
                Some(j) if j.len > i => j,
                _ => cur.up.node()?,
            };
        }
        Some(cur)
    }
    /// The variables, outermost first.
    fn items(&self) -> Vec<(&str, &CT)> {
        let mut out = vec![];
        let mut cur = self.node();
        while let Some(n) = cur {
            out.push((&*n.x, &n.ct));
            cur = n.up.node();
        }
        out.reverse();
        out
    }
    /// The cotangent types, outermost first.
    pub fn cts(&self) -> impl Iterator<Item = &CT> {
        self.items().into_iter().map(|(_, t)| t)
    }
    /// Variable `i` as traces show it: its text, with its position when the text is not unique in Γ.
    pub fn name(&self, i: usize) -> String {
        let Some(n) = self.get(i) else { return format!("#{i}") };
        if self.dup() && self.items().iter().filter(|(y, _)| **y == *n.x).count() > 1 {
            format!("{}@{i}", n.x)
        } else {
            n.x.to_string()
        }
    }
    /// Γ as names show it: in full when short; a long Γ as its length and a hash of the full text,
    /// so that a name stays short (a program with n variables mentions Γ O(n) times).
    fn show(&self) -> String {
        if self.dup() {
            let items = self.items();
            let names = var_names_of(items.iter().map(|(x, _)| *x));
            let full = names.iter().zip(&items).map(|(v, (_, t))| format!("{v}:{}", t.show())).collect::<Vec<_>>().join(", ");
            return if full.chars().count() <= LONG { full } else { abbreviated(self.len(), &full) };
        }
        if self.full().chars <= LONG {
            self.items().iter().map(|(v, t)| format!("{v}:{}", t.show())).collect::<Vec<_>>().join(", ")
        } else {
            format!("Γ{}#{:08x}", self.len(), self.full().hash)
        }
    }
    /// `EV Γ`: with Γ's cotangent types, or for a long Γ one opaque type named by its abbreviation
    /// (so that typing n uses of it does not cost O(n·|Γ|)). A long Γ's is made once per `evs`:
    /// Fig. 2 names each Γ of a let chain in four instances (`0_{EV Γ}`, `one_{x∈Γ}` and two
    /// `split`s), and each made its own (~0.6 KB a source line; issue 14 item 4).
    fn ev(&self, evs: &mut EvTypes) -> Type {
        if self.cts_text().chars <= LONG {
            Type::con("EV", self.cts().map(CT::ty).collect())
        } else {
            let (len, hash) = (self.len(), self.cts_text().hash);
            evs.entry((len, hash)).or_insert_with(|| Type::con("EV", vec![Type::con(&format!("Γ{len}#{hash:08x}"), vec![])])).clone()
        }
    }
}

/// The `EV Γ` types of long contexts made so far, by Γ's length and hash (what the type's name shows).
type EvTypes = HashMap<(usize, u32), Type>;

/// The `Gamma` of a context (the empty one's for Γ = ·).
fn gamma(ctx: &CtxS) -> Gamma {
    ctx.last().map(|e| e.2.clone()).unwrap_or_default()
}

/// What a type-indexed builtin stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `0_τ` (Fig. 3).
    Zero(CT),
    /// `0_{EV Γ}`: the environment vector of zeros (with Γ's names, for traces).
    ZeroEnv { ctx: Gamma },
    /// `one_{x:τ∈Γ} : τ → EV Γ` (Fig. 3), x at position `pos`.
    OneHot { pos: usize, ctx: Gamma },
    /// `split_{Γ,τ} : EV (Γ, x:τ) → EV Γ × τ` (`whole` is Γ, x:τ).
    Split { ctx: Gamma, ct: CT, whole: Gamma },
    /// `split_{Γ,τ}` at the end of a lambda body's backpropagator (naive higher-order CHAD, §9):
    /// the same as `Split`, and each call is one run of that backpropagator (counted).
    SplitLam { ctx: Gamma, ct: CT, whole: Gamma },
    /// `⟨⟨t1, …, tn⟩⟩` of the given product.
    LTuple(Vec<CT>),
    /// `lfst`, `lsnd` and their n-ary kin: component `i` of the given product.
    LProj(usize, Vec<CT>),
    /// `linl`, `linr` into the given sum.
    LInj(bool, Box<(CT, CT)>),
    /// `lcastl`, `lcastr` out of the given sum.
    LCast(bool, Box<(CT, CT)>),
    /// The environment vector at the end as the tuple of each input's cotangent.
    EnvTuple(Vec<CT>),
    /// Monadic `one_{x:τ∈Γ} : τ → EVM Γ 1` (§4.2, Table 2), x at position `pos`.
    OneM { pos: usize, var: Box<str>, ct: CT },
    /// `push0 : EVM Γ 1` opening x's entry (the first half of `scope_{Γ,τ}`, Table 2).
    Push { var: Box<str>, ct: CT },
    /// `pop : EVM Γ τ` closing x's entry and returning its value (the second half of `scope`).
    Pop { var: Box<str>, ct: CT },
    /// `run : EVM Γ τ → τ × Γ̄`, started from `⟨0_{τ1}, …, 0_{τn}⟩`.
    Run(Vec<(String, CT)>),
    /// The first half of a `run` inside a backward pass (a closed function's backpropagator, App. C):
    /// sets the running accumulator aside and starts Γ's at zero.
    RunOpen(Vec<(String, CT)>),
    /// The second half: Γ̄ read out, the accumulator set aside restored.
    RunClose(Vec<(String, CT)>),
}

/// Names and types of contexts longer than this (in characters) are abbreviated.
const LONG: usize = 48;

/// `Γn#h`: the length and a 32-bit FNV-1a hash of the full text (stable across toolchains, so
/// printed programs and their snapshots are too).
fn abbreviated(len: usize, full: &str) -> String {
    format!("Γ{len}#{:08x}", Running::EMPTY.add(full).hash)
}

/// Variables as traces show them (`Gamma::name` of each, in one pass: per variable it would be
/// quadratic in Γ).
fn var_names_of<'a>(ns: impl Iterator<Item = &'a str> + Clone) -> Vec<String> {
    let mut count: HashMap<&str, usize> = HashMap::default();
    for n in ns.clone() {
        *count.entry(n).or_default() += 1;
    }
    ns.enumerate().map(|(i, n)| if count[n] > 1 { format!("{n}@{i}") } else { n.to_string() }).collect()
}

/// Γ's variables with their cotangent types.
fn vars(ctx: &CtxS) -> Vec<(String, CT)> {
    var_names_of(ctx.iter().map(|e| &*e.0.text)).into_iter().zip(ctx.iter().map(|e| e.1.clone())).collect()
}

fn cts(ctx: &CtxS) -> Vec<CT> {
    ctx.iter().map(|e| e.1.clone()).collect()
}

thread_local! {
    /// The type-indexed builtins named so far on this thread (a pipeline's transforms, checks and
    /// runs are on one): name → meaning. Emptied when no output of the chain is kept
    /// (`forget_instances`): it held every instance of every chad stage (and the contexts their
    /// `Op`s carry) to the end of the process (issue 14 item 4).
    static TABLE: std::cell::RefCell<HashMap<&'static str, Arc<Op>>> = Default::default();
    /// The names of the instances forgotten (a `Builtin`'s name is `&'static str`, allocated once for
    /// the thread's life): a name made again after the table was emptied is found here.
    static NAMES: std::cell::RefCell<rustc_hash::FxHashSet<&'static str>> = Default::default();
}

/// The builtin `name` stands for `op` (the same name always stands for the same op).
fn intern(name: String, op: Op) -> &'static str {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if let Some((k, _)) = t.get_key_value(name.as_str()) {
            return *k;
        }
        let k = NAMES.with(|ns| ns.borrow().get(name.as_str()).copied()).unwrap_or_else(|| Box::leak(name.into_boxed_str()));
        t.insert(k, Arc::new(op));
        k
    })
}

/// What the running builtin (by name) stands for.
pub fn lookup(name: &str) -> Option<Arc<Op>> {
    TABLE.with(|t| t.borrow().get(name).cloned())
}

/// How many instances are named now (the table's entries).
pub fn instances() -> usize {
    TABLE.with(|t| t.borrow().len())
}

/// Lets go of the instances named so far, their `EV Γ` types and the contexts' path (the chain's
/// `forget`: no output that names them is kept; a transform run again names them again).
pub fn forget_instances() {
    TABLE.with(|t| {
        let t = std::mem::take(&mut *t.borrow_mut());
        NAMES.with(|ns| ns.borrow_mut().extend(t.into_keys()));
    });
    forget_ev_types();
    forget_contexts();
}

/// The names of the instances, each interned with its meaning.
pub fn zero(ct: &CT) -> &'static str {
    intern(format!("0_{}", ct.show()), Op::Zero(ct.clone()))
}
pub fn zero_env(ctx: &CtxS) -> &'static str {
    let g = gamma(ctx);
    intern(format!("0_{{EV[{}]}}", g.show()), Op::ZeroEnv { ctx: g })
}
pub fn one_hot(ctx: &CtxS, pos: usize) -> &'static str {
    let g = gamma(ctx);
    intern(format!("one_{{{}∈{}}}", g.name(pos), g.show()), Op::OneHot { pos, ctx: g })
}
/// `split_{Γ,τ}`, with x's entry of Γ, x:τ (whose `Gamma` is the whole: the context's own, not
/// another made per instance, one more node a source line kept by the table; issue 14 item 4).
pub fn split(ctx: &CtxS, x: &Entry) -> &'static str {
    let g = gamma(ctx);
    intern(format!("split_{{[{}],{}:{}}}", g.show(), x.0.text, x.1.show()), Op::Split { ctx: g, ct: x.1.clone(), whole: x.2.clone() })
}
pub fn split_lam(ctx: &CtxS, x: &Entry) -> &'static str {
    let g = gamma(ctx);
    intern(format!("splitλ_{{[{}],{}:{}}}", g.show(), x.0.text, x.1.show()), Op::SplitLam { ctx: g, ct: x.1.clone(), whole: x.2.clone() })
}
pub fn ltuple(ts: &[CT]) -> &'static str {
    intern(format!("lpair_{}", CT::Prod(ts.to_vec()).show()), Op::LTuple(ts.to_vec()))
}
pub fn lproj(i: usize, ts: &[CT]) -> &'static str {
    let what = match (ts.len(), i) {
        (2, 0) => "lfst".to_string(),
        (2, _) => "lsnd".to_string(),
        _ => format!("lproj{}", i + 1),
    };
    intern(format!("{what}_{}", CT::Prod(ts.to_vec()).show()), Op::LProj(i, ts.to_vec()))
}
pub fn linj(right: bool, a: &CT, b: &CT) -> &'static str {
    let what = if right { "linr" } else { "linl" };
    intern(format!("{what}_{}", CT::Sum(Box::new(a.clone()), Box::new(b.clone())).show()), Op::LInj(right, Box::new((a.clone(), b.clone()))))
}
pub fn lcast(right: bool, a: &CT, b: &CT) -> &'static str {
    let what = if right { "lcastr" } else { "lcastl" };
    intern(format!("{what}_{}", CT::Sum(Box::new(a.clone()), Box::new(b.clone())).show()), Op::LCast(right, Box::new((a.clone(), b.clone()))))
}
pub fn env_tuple(ctx: &CtxS) -> &'static str {
    intern(format!("evTuple_{{[{}]}}", gamma(ctx).show()), Op::EnvTuple(cts(ctx)))
}
pub fn one_m(ctx: &CtxS, pos: usize) -> &'static str {
    let var = gamma(ctx).name(pos);
    intern(format!("one_{{{var}@{pos}:{}}}", ctx[pos].1.show()), Op::OneM { pos, var: var.into(), ct: ctx[pos].1.clone() })
}
pub fn push0(x: &Name, ct: &CT) -> &'static str {
    intern(format!("push0_{{{}:{}}}", x.text, ct.show()), Op::Push { var: (*x.text).into(), ct: ct.clone() })
}
pub fn pop(x: &Name, ct: &CT) -> &'static str {
    intern(format!("pop_{{{}:{}}}", x.text, ct.show()), Op::Pop { var: (*x.text).into(), ct: ct.clone() })
}
pub fn run(ctx: &CtxS) -> &'static str {
    let vars = vars(ctx);
    intern(format!("run_{{[{}]}}", gamma(ctx).show()), Op::Run(vars))
}

pub fn run_open(ctx: &CtxS) -> &'static str {
    let vars = vars(ctx);
    intern(format!("runOpen_{{[{}]}}", gamma(ctx).show()), Op::RunOpen(vars))
}
pub fn run_close(ctx: &CtxS) -> &'static str {
    let vars = vars(ctx);
    intern(format!("runClose_{{[{}]}}", gamma(ctx).show()), Op::RunClose(vars))
}

/// `+` on every linear type and on environment vectors (Fig. 4's `+_τ`, `+_{EV Γ}`; Fig. 6's union).
pub const PLUS: &str = "plus";
/// `fold l with ⟨x, d⟩, acc → acc + f ⟨x, d⟩ from z` over an invocation log (§9).
pub const FOLD_LOG: &str = "foldLog";
/// `[⟨x, d⟩]`: the log of one invocation (§9).
pub const LOG_ONE: &str = "logOne";
/// The output cotangent, given in the output's shape, as a value of `D[T]2` (the wrapper's `d`).
pub const TO_LIN: &str = "toLin";
/// The gradient in the input's shape, from the input and the cotangents rebuilt in its pattern.
pub const FROM_LIN: &str = "fromLin";

/// `EV Γ`: with Γ's cotangent types, or for a long Γ one opaque type named by its abbreviation (so
/// that typing n uses of it does not cost O(n·|Γ|)).
fn ev(ctx: &[CT]) -> Type {
    let full: String = ctx.iter().map(CT::show).collect::<Vec<_>>().join(",");
    if full.chars().count() <= LONG {
        Type::con("EV", ctx.iter().map(CT::ty).collect())
    } else {
        Type::con("EV", vec![Type::con(&abbreviated(ctx.len(), &full), vec![])])
    }
}

fn m(t: Type) -> Type {
    Type::con("M", vec![t])
}

/// The scheme of an instance: the paper's typing (Fig. 3, Table 2) at its index.
pub fn scheme(op: &Op) -> Scheme {
    scheme_in(op, &mut EvTypes::default())
}

/// `scheme`, sharing the `EV Γ` types made before in `evs`.
fn scheme_in(op: &Op, evs: &mut EvTypes) -> Scheme {
    let Scheme { vars, ty } = made_scheme(op, evs);
    Scheme { vars, ty: shared(ty) }
}

/// `t`, or an equal type made before: the builtins are one per variable by the paper's notation
/// (`one_{v@k:R}`, `push0_{v:R}`, `pop_{v:R}`), but their types are a few (`R ⊸ M 1`, `M 1`,
/// `M R`), and each made its own (~260 bytes a source line: issue 14 item 4, memory per line).
/// A per-thread set like `ir::Text::shared`'s, emptied at 4096 types so that it stays bounded.
fn shared(t: Type) -> Type {
    thread_local! {
        static MADE: std::cell::RefCell<rustc_hash::FxHashSet<Type>> = Default::default();
    }
    MADE.with(|made| {
        let mut made = made.borrow_mut();
        if let Some(u) = made.get(&t) {
            return u.clone();
        }
        if made.len() >= 4096 {
            made.clear();
        }
        made.insert(t.clone());
        t
    })
}

fn made_scheme(op: &Op, evs: &mut EvTypes) -> Scheme {
    let f = Type::fun;
    let pair = |a, b| Type::tup(vec![a, b]);
    let sum = |a: &CT, b: &CT| CT::Sum(Box::new(a.clone()), Box::new(b.clone())).ty();
    let mono = |t| Scheme::mono(t);
    match op {
        Op::Zero(t) => mono(t.ty()),
        Op::ZeroEnv { ctx } => mono(ctx.ev(evs)),
        Op::OneHot { pos, ctx } => mono(f(ctx.get(*pos).map_or(Type::Unit, |n| n.ct.ty()), ctx.ev(evs))),
        Op::Split { ctx, ct, whole } | Op::SplitLam { ctx, ct, whole } => mono(f(whole.ev(evs), pair(ctx.ev(evs), ct.ty()))),
        Op::LTuple(ts) => mono(f(Type::tuple(ts.iter().map(CT::ty).collect()), CT::Prod(ts.clone()).ty())),
        Op::LProj(i, ts) => mono(f(CT::Prod(ts.clone()).ty(), ts[*i].ty())),
        Op::LInj(right, ab) => mono(f(if *right { ab.1.ty() } else { ab.0.ty() }, sum(&ab.0, &ab.1))),
        Op::LCast(right, ab) => mono(f(sum(&ab.0, &ab.1), if *right { ab.1.ty() } else { ab.0.ty() })),
        Op::EnvTuple(g) => mono(f(ev(g), Type::tuple(g.iter().map(CT::ty).collect()))),
        Op::OneM { ct, .. } => mono(f(ct.ty(), m(Type::Unit))),
        // scope's argument is lazy (run after the push), typed as written: `M σ`, σ free
        Op::Push { .. } => mono(m(Type::Unit)),
        Op::Pop { ct, .. } => mono(m(ct.ty())),
        Op::Run(g) => {
            let gbar = Type::tuple(g.iter().map(|(_, c)| c.ty()).collect());
            Scheme { vars: vec![0], ty: f(m(Type::Var(0)), pair(Type::Var(0), gbar)) }
        }
        Op::RunOpen(_) => mono(m(Type::Unit)),
        Op::RunClose(g) => {
            let gbar = Type::tuple(g.iter().map(|(_, c)| c.ty()).collect());
            Scheme { vars: vec![0], ty: f(m(Type::Var(0)), gbar) }
        }
    }
}

thread_local! {
    /// The long contexts' `EV Γ` types made by `instance`, by Γ's length and hash: a builtin made
    /// by name is made anew at each use the check meets, and Fig. 2 names each Γ four times, the
    /// last (`split`'s) at the far end of the program, so they are kept for the program, not a
    /// bounded window. Emptied as a transform starts (`forget_ev_types`).
    static EVS: std::cell::RefCell<EvTypes> = Default::default();
}

/// Lets go of the `EV Γ` types `instance` made for the program before (a new transform starts).
pub fn forget_ev_types() {
    EVS.with(|e| *e.borrow_mut() = EvTypes::default());
}

/// The type-indexed builtin `name`, made when asked (`interp::BuiltinFamily`): with its scheme when
/// `typed`, else with none (for running), its implementation as `imp` gives it. Not one entry per
/// instance in the output's builtins: ~0.5 KB a source line of Fig. 2's (three instances a line,
/// each a `Builtin`, its `Rc` and slot in the pipeline's table, its function type) that stayed
/// from the transform to the end of the run (issue 14 item 4).
pub fn instance(name: &str, typed: bool, imp: &dyn Fn(&Op) -> (crate::interp::BuiltinFn, usize, bool)) -> Option<Builtin> {
    match typed {
        true => EVS.with(|evs| made(name, Some(&mut evs.borrow_mut()), imp)),
        false => made(name, None, imp),
    }
}

/// The builtin of the type-indexed name `name` (None for another name): its scheme made sharing the
/// `EV Γ` types in `evs`, or none (`Scheme::mono(Unknown)`, for running only) without them.
fn made(name: &str, evs: Option<&mut EvTypes>, imp: &dyn Fn(&Op) -> (crate::interp::BuiltinFn, usize, bool)) -> Option<Builtin> {
    let (name, op) = TABLE.with(|t| t.borrow().get_key_value(name).map(|(k, v)| (*k, v.clone())))?;
    let (run, arity, lazy_last) = imp(&op);
    let scheme = match evs {
        Some(evs) => scheme_in(&op, evs),
        None => Scheme::mono(Type::Unknown),
    };
    Some(Builtin { name, scheme, arity, lazy_last, run })
}

/// The builtins a program uses: each type-indexed name it mentions, with the implementation
/// `imp` gives its kind (function, arity, whether its last argument is a thunk).
/// An instance's scheme is as large as its types: a pair nested n deep names instances whose types
/// are as deep as their level, O(n^2) in all, so the heap is checked at each one, as `Chad::d` checks
/// it at each term (pairs-1000 at `--max-mb 128` met the process's last resort here).
pub fn builtins_for(p: &crate::ir::Program, imp: &dyn Fn(&Op) -> (crate::interp::BuiltinFn, usize, bool)) -> Result<Vec<Builtin>, String> {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut evs = EvTypes::default();
    let mut out = vec![];
    for d in &p.defs {
        let mut stack = vec![&d.body];
        while let Some(e) = stack.pop() {
            if let crate::ir::ExprKind::Builtin(n) = &e.kind {
                if seen.insert(n.clone()) {
                    if let Some(m) = crate::limits::memory_running_out("transforming the program") {
                        return Err(m);
                    }
                    out.extend(made(n, Some(&mut evs), imp));
                }
            }
            crate::ir::each_child(e, &mut |c| stack.push(c));
        }
    }
    // kept through the stage's output check: not the doubling's up to half again (a 10^5-line
    // program names ~3·10^5 instances, 80 bytes each)
    out.shrink_to_fit();
    Ok(out)
}


#[cfg(test)]
mod tests {
    use super::*;

    fn names(g: &Gamma) -> Vec<String> {
        (0..g.len()).map(|i| g.name(i)).collect()
    }

    /// Γ extended depth first and off the path extended last: each context knows whether a text
    /// repeats in it (so names show positions), finds each variable, and an `Op` carrying one
    /// stays a few words (issue 14: ~270 bytes with a persistent vector and set in each).
    #[test]
    fn contexts_share_their_prefixes_and_see_repeated_texts() {
        let e = Gamma::default();
        let a = e.push("a", &CT::R);
        let ab = a.push("b", &CT::R);
        let abc = ab.push("c", &CT::One);
        let aba = ab.push("a", &CT::R); // a prefix of the path extended last: the path is cut back
        assert!(!abc.dup() && aba.dup());
        assert_eq!(names(&aba), ["a@0", "b", "a@2"]);
        assert_eq!(aba.show(), "a@0:R, b:R, a@2:R");
        let abd = ab.push("d", &CT::R);
        assert!(!abd.dup(), "the a of a, b, a is not in a, b");
        // off the path extended last: a, b, c is not a prefix of a, b, d
        let abca = abc.push("a", &CT::R);
        let abcd = abc.push("d", &CT::R);
        assert!(abca.dup() && !abcd.dup());
        assert_eq!(abcd.show(), "a:R, b:R, c:1, d:R");
        assert_eq!(names(&abcd), ["a", "b", "c", "d"]);
        assert_eq!(abcd, ab.push("c", &CT::One).push("d", &CT::R));
        assert_ne!(abcd, abca);
        // the path let go (a transform done): the next extension rebuilds it
        forget_contexts();
        assert!(abc.push("b", &CT::R).dup() && !abc.push("e", &CT::R).dup());
        assert!(std::mem::size_of::<Op>() <= 64, "an Op is {} bytes", std::mem::size_of::<Op>());
    }

    /// Issue 14 item 4 (memory per line): the builtins are one per variable, their types a few;
    /// the builtins of one type share it (each made its own, ~260 bytes a source line).
    #[test]
    fn builtins_of_one_type_share_it() {
        let one = |v: &str, pos| scheme(&Op::OneM { pos, var: v.into(), ct: CT::R }).ty;
        let pop = |v: &str| scheme(&Op::Pop { var: v.into(), ct: CT::R }).ty;
        let (Type::Fun(a), Type::Fun(b)) = (one("v0", 1), one("v1", 2)) else { panic!("one_ is a function") };
        assert!(std::rc::Rc::ptr_eq(&a, &b), "each one_ has its own copy of its type");
        let (Type::Con(c), Type::Con(d)) = (pop("v0"), pop("v1")) else { panic!("pop_ is in M") };
        assert!(std::rc::Rc::ptr_eq(&c, &d), "each pop_ has its own copy of its type");
        assert_eq!(crate::types::show(&Type::Con(c)), "M R");
    }

    /// Issue 14 item 4 (memory per line): Fig. 2 names each Γ of a let chain in four instances
    /// (`0_{EV Γ}`, `one_{x∈Γ}`, the `split` of Γ's last variable and of the next); a long Γ's `EV Γ`
    /// is made once for all of them (each made its own), and `split` keeps the context's own Γ, x:τ
    /// (it made another, one more node a line that the table keeps).
    #[test]
    fn instances_of_one_context_share_its_ev_type_and_node() {
        let mut g: Ctx = vec![];
        for i in 0..30 {
            push(&mut g, &Name::new(&format!("v{i}"), i), CT::R);
        }
        let (gamma, prefix) = (g[29].2.clone(), &g[..29]);
        let split_name = split(prefix, &g[29]);
        let Some(op) = lookup(split_name) else { panic!("split is in the table") };
        let Op::Split { whole, .. } = &*op else { panic!("split names a Split") };
        assert!(matches!((&whole.0, &gamma.0), (Some(a), Some(b)) if Arc::ptr_eq(a, b)), "split made its own Γ, x:τ");
        let ev_of = |t: &Type| match t {
            Type::Con(c) => Some(c.clone()),
            Type::Fun(ab) => match &ab.1 {
                Type::Con(c) => Some(c.clone()),
                _ => None,
            },
            _ => None,
        };
        let mut evs = EvTypes::default();
        let zero = scheme_in(&Op::ZeroEnv { ctx: gamma.clone() }, &mut evs).ty;
        let one = scheme_in(&Op::OneHot { pos: 3, ctx: gamma.clone() }, &mut evs).ty;
        let split_ty = scheme_in(&op, &mut evs).ty;
        let (Some(a), Some(b)) = (ev_of(&zero), ev_of(&one)) else { panic!("0_ and one_ are in EV Γ") };
        let Type::Fun(ab) = &split_ty else { panic!("split is a function") };
        let Some(c) = ev_of(&ab.0) else { panic!("split takes EV (Γ, x)") };
        assert_eq!(crate::types::show(&Type::Con(a.clone())), format!("EV Γ30#{:08x}", gamma.cts_text().hash));
        assert!(std::rc::Rc::ptr_eq(&a, &b) && std::rc::Rc::ptr_eq(&a, &c), "each instance made its own EV Γ");
    }

    /// A long Γ: each variable found (by its jumps), and the list dropped without recursion.
    #[test]
    fn a_long_context_finds_each_variable() {
        let n = 200_000;
        let mut g = Gamma::default();
        for i in 0..n {
            g = g.push(&format!("v{i}"), &CT::R);
        }
        assert!(!g.dup());
        for i in [0, 1, 2, 3, 1000, 65_535, 65_536, 123_457, n - 1] {
            assert_eq!(g.name(i), format!("v{i}"));
        }
        assert_eq!(g.name(n), format!("#{n}"));
        assert!(g.show().starts_with("Γ200000#"));
        let t = std::thread::Builder::new().stack_size(64 * 1024).spawn(move || drop(g)).unwrap();
        assert!(t.join().is_ok());
    }
}
