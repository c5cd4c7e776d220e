//! The one typed IR. Source programs and the output of every stage are values of `Program`.
//!
//! Conventions every pass relies on:
//! - Lambdas take one pattern and applications one argument; the printer shows `\x y -> e` and `f a b`
//!   for the nested forms, and the parser builds the nested forms from them.
//! - Names are resolved: every binder has a `Name` whose `id` is unique in its program (ids are never
//!   reused; `Name::global` has id 0 and is used for top-level definitions, which are looked up by text).
//! - Primitive operations are saturated (`Prim(op, args)`); an unapplied primitive is eta-expanded.
//! - Every `Expr` carries its `ty`; `Type::Unknown` until the type checker fills it in.
//! - Target constructs (Delta terms, maps, IDs, ...) are `Builtin`s: a name whose type scheme and
//!   runtime implementation a stage registers beside its transform, so the IR grows without new variants.
//! - Arrays are `Type::Con` of `Array` and `[a]` (`Type::array`): passes that walk types see a named
//!   constructor; literals are `ExprKind::Array`, and every array operation is a `Prim` (prims.rs).

use crate::diag::Span;
use std::rc::Rc;

/// A resolved name: `text` is what the printer shows, `id` what makes it unique.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    pub text: Text,
    pub id: u32,
}

impl Name {
    pub fn new(text: &str, id: u32) -> Name {
        Name { text: Text::shared(text), id }
    }
    /// A top-level definition's name (id 0): resolved by its text in `Program::defs`.
    pub fn global(text: &str) -> Name {
        Name { text: Text::shared(text), id: 0 }
    }
    pub fn is_global(&self) -> bool {
        self.id == 0
    }
}

/// A name's text behind one thin pointer: an `Rc<str>` is two words and made a `Name` 24 bytes,
/// so that a variable (`ExprKind::Var`) was the largest variant and every node 56 bytes (issue 14:
/// memory per line). Derefs to `str`; compares, hashes and prints as its text.
///
/// The pointer is an `Rc<Box<str>>`'s (`Rc::into_raw`), kept 4-byte aligned (`packed(4)`), so that
/// a `Name` (text and id) is 12 bytes, not 16, and `ExprKind::Var(Name)` fits beside the tag in
/// 16 bytes: a node 40, not 48 (issue 14 item 4, session 34). The field is only ever copied out,
/// never borrowed (a reference to it could be misaligned).
#[repr(C, packed(4))]
pub struct Text {
    rc: std::ptr::NonNull<Box<str>>,
}

impl Text {
    fn from_rc(rc: Rc<Box<str>>) -> Text {
        // SAFETY: `Rc::into_raw` is never null.
        Text { rc: unsafe { std::ptr::NonNull::new_unchecked(Rc::into_raw(rc).cast_mut()) } }
    }
    fn text(&self) -> &str {
        let rc = self.rc;
        // SAFETY: `self` holds one strong count of the `Rc` this pointer came from, so it is alive
        // as long as `self` is borrowed.
        unsafe { &*rc.as_ptr() }
    }
    /// Whether `a` and `b` are one allocation.
    pub fn ptr_eq(a: &Text, b: &Text) -> bool {
        let (a, b) = (a.rc, b.rc);
        a == b
    }
}

impl Clone for Text {
    fn clone(&self) -> Text {
        let rc = self.rc;
        // SAFETY: the pointer came from `Rc::into_raw` and `self` keeps its count above zero.
        unsafe { Rc::increment_strong_count(rc.as_ptr()) };
        Text { rc }
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        let rc = self.rc;
        // SAFETY: each `Text` holds one strong count, given back once, here.
        unsafe { Rc::decrement_strong_count(rc.as_ptr()) };
    }
}

/// As the `Rc<Box<str>>` it was: equal, ordered and hashed as its text.
impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        Text::ptr_eq(self, other) || **self == **other
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        **self == *other
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (**self).hash(h)
    }
}

impl Text {
    /// The text `s`, shared with the names made recently of the same text: a transform names its
    /// binders from a few texts (`x1`, `d1`, `i`, `z`, …), ~18 fresh names a source line in the
    /// dual-numbers stages, and each name was an allocation of its own (32 bytes and the text's;
    /// issue 14: memory per line). A per-thread table like `interned`'s, but emptied at 4096 texts,
    /// so that the texts made once (a source's `v0` … `v99999`) cost a bounded table, not one
    /// entry each for the process's life.
    pub fn shared(s: &str) -> Text {
        thread_local! {
            static RECENT: TextTable = Default::default();
        }
        RECENT.with(|recent| recent.text(s))
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.text()
    }
}

impl std::borrow::Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::from_rc(Rc::new(s.into()))
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::from_rc(Rc::new(s.into_boxed_str()))
    }
}

impl From<&Text> for Rc<str> {
    fn from(t: &Text) -> Rc<str> {
        Rc::from(&**t)
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// Types. `Bool` is a leaf isomorphic to `() + ()`; no transform looks inside it.
///
/// A type's children are shared (`Rc`), so a clone is O(1) and the nodes of a program share their
/// types instead of each owning a copy: every node carries its type, and a translation's types (a
/// continuation of a context of n variables takes an n-tuple) are as big as its program otherwise.
/// Build types with the helpers below (`Type::fun`, `Type::tuple`, `Type::tup`, …). Every variant
/// is one thin pointer, so a `Type` is 16 bytes (issue 14: one on every node; 24 made a boxed node
/// 80 bytes of heap, 16 makes it 64): a `Sum`'s, `Fun`'s or `Lin`'s two sides are one pair, bound
/// by `Type::Fun(ab)` and split by `let (a, b) = &**ab;`, and a tuple's components are `Types`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Type {
    Real,
    Int,
    Bool,
    Unit,
    /// `(A1, ..., An)`, n >= 2. A 1-tuple is never built; `()` is `Unit`.
    Tuple(Types),
    /// `A + B`
    Sum(Rc<(Type, Type)>),
    /// `A -> B`
    Fun(Rc<(Type, Type)>),
    /// `A ⊸ B`: a synonym of `A -> B` whose argument is used once (the papers' linear functions).
    /// It unifies with `Fun`; it is kept apart only so that printed types say what the paper says.
    Lin(Rc<(Type, Type)>),
    /// A named target type with arguments: `Delta`, `DeltaId`, `M a`, `DeltaMap`, `Array a`, ...
    /// Behind one pointer: its name and arguments inline made every `Type` 40 bytes, not 24, and
    /// every node carries one (issue 14: memory per line).
    Con(Rc<TyCon>),
    /// An inference variable (or, inside a `Scheme`, a quantified one).
    Var(u32),
    /// Not yet inferred.
    Unknown,
}

/// As when the pairs were two fields (`Fun(Real, Int)`): debug output is what it was.
impl std::fmt::Debug for Type {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pair = |f: &mut std::fmt::Formatter<'_>, name: &str, ab: &(Type, Type)| f.debug_tuple(name).field(&ab.0).field(&ab.1).finish();
        match self {
            Type::Real => f.write_str("Real"),
            Type::Int => f.write_str("Int"),
            Type::Bool => f.write_str("Bool"),
            Type::Unit => f.write_str("Unit"),
            Type::Tuple(ts) => f.debug_tuple("Tuple").field(ts).finish(),
            Type::Sum(ab) => pair(f, "Sum", ab),
            Type::Fun(ab) => pair(f, "Fun", ab),
            Type::Lin(ab) => pair(f, "Lin", ab),
            Type::Con(c) => f.debug_tuple("Con").field(c).finish(),
            Type::Var(v) => f.debug_tuple("Var").field(v).finish(),
            Type::Unknown => f.write_str("Unknown"),
        }
    }
}

/// A tuple's components, shared, behind a thin pointer (`Rc<[Type]>` is two words and made every
/// `Type` 24 bytes). Derefs to `[Type]`; collect or convert a `Vec<Type>` into one.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Types(Rc<Box<[Type]>>);

impl Types {
    /// Whether `a` and `b` are one allocation (hash-consed types are: see types.rs).
    pub fn ptr_eq(a: &Types, b: &Types) -> bool {
        Rc::ptr_eq(&a.0, &b.0)
    }
    /// The allocation's address, which identifies it while it is alive.
    pub fn as_ptr(&self) -> *const Box<[Type]> {
        Rc::as_ptr(&self.0)
    }
    /// How many `Types` hold this allocation.
    pub fn strong_count(&self) -> usize {
        Rc::strong_count(&self.0)
    }
}

impl std::ops::Deref for Types {
    type Target = [Type];
    fn deref(&self) -> &[Type] {
        &self.0
    }
}

impl From<Vec<Type>> for Types {
    fn from(ts: Vec<Type>) -> Types {
        Types(Rc::new(ts.into_boxed_slice()))
    }
}

impl FromIterator<Type> for Types {
    fn from_iter<I: IntoIterator<Item = Type>>(it: I) -> Types {
        it.into_iter().collect::<Vec<_>>().into()
    }
}

impl std::fmt::Debug for Types {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One shared text per name, for the names of type constructors and builtins: an allocation each
/// time was one of the three a `Type::con` made, and inference makes one for every `pure` and bind
/// (issue 14: memory per line). Emptied at 4096 names, as `Text::shared`'s table is: the CHAD
/// stages' builtins are one per variable by the paper's notation (`one_{v7@8:R}`, `push0_{v7:R}`),
/// three a source line, and a table never emptied kept every one of them for the process's life
/// (issue 14 item 4: 300,000 names at 10^5 lines, and the page's per keystroke).
pub fn interned(name: &str) -> Rc<str> {
    thread_local! {
        static NAMES: std::cell::RefCell<rustc_hash::FxHashSet<Rc<str>>> = Default::default();
    }
    NAMES.with(|names| {
        let mut names = names.borrow_mut();
        match names.get(name) {
            Some(t) => t.clone(),
            None => {
                if names.len() >= 4096 {
                    names.clear();
                }
                let t: Rc<str> = Rc::from(name);
                names.insert(t.clone());
                t
            }
        }
    })
}

/// `interned` for the names of builtins (`ExprKind::Builtin`), as a thin `Text`: a table of its own,
/// so that the names a transform makes (`Text::shared`'s) do not empty it.
pub fn interned_text(name: &str) -> Text {
    thread_local! {
        static NAMES: TextTable = Default::default();
    }
    NAMES.with(|names| names.text(name))
}

/// A per-thread table of texts shared by their holders, emptied at 4,096 texts (so that texts made
/// once cost a bounded table, not one entry each for the process's life).
#[derive(Default)]
struct TextTable(std::cell::RefCell<rustc_hash::FxHashSet<Text>>);

impl TextTable {
    /// The table's text `s`, made and kept if it has none.
    fn text(&self, s: &str) -> Text {
        let mut texts = self.0.borrow_mut();
        if let Some(t) = texts.get(s) {
            return t.clone();
        }
        if texts.len() >= 4096 {
            texts.clear();
        }
        let t = Text::from(s);
        texts.insert(t.clone());
        t
    }
}

/// A named type constructor applied to its arguments (`Type::Con`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TyCon {
    pub name: Rc<str>,
    pub args: Rc<[Type]>,
}

/// `Con("M", [Real])`, as when the name and arguments were `Con`'s own fields.
impl std::fmt::Debug for TyCon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}, {:?}", self.name, self.args)
    }
}

impl Type {
    pub fn fun(a: Type, b: Type) -> Type {
        Type::Fun(Rc::new((a, b)))
    }
    pub fn lin(a: Type, b: Type) -> Type {
        Type::Lin(Rc::new((a, b)))
    }
    pub fn sum(a: Type, b: Type) -> Type {
        Type::Sum(Rc::new((a, b)))
    }
    pub fn con(name: &str, args: Vec<Type>) -> Type {
        Type::Con(Rc::new(TyCon { name: interned(name), args: args.into() }))
    }
    /// `(A1, ..., An)` from exactly the given components (n >= 2; `tuple` also takes 0 and 1).
    pub fn tup(ts: Vec<Type>) -> Type {
        Type::Tuple(ts.into())
    }
    /// `Array a`
    pub fn array(elem: Type) -> Type {
        Type::con("Array", vec![elem])
    }
    /// The element type of `Array a`.
    pub fn as_array(&self) -> Option<&Type> {
        match self {
            Type::Con(c) if &*c.name == "Array" && c.args.len() == 1 => Some(&c.args[0]),
            _ => None,
        }
    }
    /// `()` for zero types, the type itself for one, a tuple otherwise.
    pub fn tuple(mut ts: Vec<Type>) -> Type {
        match ts.len() {
            0 => Type::Unit,
            1 => ts.pop().unwrap(),
            _ => Type::Tuple(ts.into()),
        }
    }
    /// First-order: no function types anywhere inside (the types `main` may take and return).
    pub fn is_first_order(&self) -> bool {
        match self {
            Type::Real | Type::Int | Type::Bool | Type::Unit => true,
            Type::Tuple(ts) => ts.iter().all(Type::is_first_order),
            Type::Sum(ab) => ab.0.is_first_order() && ab.1.is_first_order(),
            Type::Fun(..) | Type::Lin(..) => false,
            Type::Con(c) => c.args.iter().all(Type::is_first_order),
            Type::Var(_) | Type::Unknown => true,
        }
    }
}

/// A type scheme `∀ vars. ty`, for top-level definitions and builtins.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheme {
    pub vars: Vec<u32>,
    pub ty: Type,
}

impl Scheme {
    pub fn mono(ty: Type) -> Scheme {
        Scheme { vars: vec![], ty }
    }
}

/// Binding patterns: `x`, `_`, `()`, `(p1, ..., pn)`.
///
/// A tuple's components are a thin vector (one pointer, its length beside its elements), so that a
/// pattern is 24 bytes, not 32: every `Let`, `Bind` and `Lam` holds one in its box (a `Vec` made
/// that box 112 and 72 bytes, 104 and 64 now), and a translation's output has about twenty a source
/// line (issue 14 item 4: the budget counts requested bytes; ~0.15 KB a line of dualrev/mutable's
/// output, which stopped at the budget in its check on a 10^5-line program).
#[derive(Clone, Debug, PartialEq)]
pub enum Pat {
    Var(Name, Span),
    Wild(Span),
    Unit(Span),
    Tuple(Pats, Span),
}

/// A tuple pattern's components (see `Pat`). Build it with `.into()` from a `Vec<Pat>` or collect it.
pub type Pats = thin_vec::ThinVec<Pat>;

impl Pat {
    pub fn span(&self) -> Span {
        match self {
            Pat::Var(_, s) | Pat::Wild(s) | Pat::Unit(s) | Pat::Tuple(_, s) => *s,
        }
    }
    /// The names this pattern binds, left to right.
    pub fn names(&self) -> Vec<&Name> {
        let mut out = vec![];
        fn go<'a>(p: &'a Pat, out: &mut Vec<&'a Name>) {
            match p {
                Pat::Var(n, _) => out.push(n),
                Pat::Wild(_) | Pat::Unit(_) => {}
                Pat::Tuple(ps, _) => ps.iter().for_each(|p| go(p, out)),
            }
        }
        go(self, &mut out);
        out
    }
}

/// Primitive operations: one table of rows in `prims.rs` (syntax, typing, implementation, partials).
pub use crate::prims::Prim;

#[derive(Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    pub ty: Type,
}

/// A let/bind spine is cloned link by link, not by recursion down it: a derived clone recursed
/// through five frames a link (the box, the pattern-and-pair tuple, the pair, the node, its kind),
/// and a 390-link chain overflowed V8's stack in a debug wasm build (wasm's stack is small).
impl Clone for Expr {
    fn clone(&self) -> Expr {
        fn link(e: &Expr) -> Option<&(Pat, (Expr, Expr))> {
            match &e.kind {
                ExprKind::Let(x) | ExprKind::Bind(x) => Some(&**x),
                _ => None,
            }
        }
        if link(self).is_none() {
            return Expr { kind: self.kind.clone(), span: self.span, ty: self.ty.clone() };
        }
        let mut links = vec![];
        let mut cur = self;
        while let Some((p, (rhs, body))) = link(cur) {
            links.push((cur, p.clone(), rhs.clone()));
            cur = body;
        }
        let mut out = Expr { kind: cur.kind.clone(), span: cur.span, ty: cur.ty.clone() };
        for (node, p, rhs) in links.into_iter().rev() {
            let x = Box::new((p, (rhs, out)));
            let kind = if matches!(node.kind, ExprKind::Let(_)) { ExprKind::Let(x) } else { ExprKind::Bind(x) };
            out = Expr { kind, span: node.span, ty: node.ty.clone() };
        }
        out
    }
}

/// A local recursive function: `let f x y = e in ...` binds `f` to `\x -> \y -> e` (a `Lam`).
#[derive(Clone, Debug, PartialEq)]
pub struct FunDef {
    pub name: Name,
    pub body: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LamKind {
    /// `\x -> e` (λ)
    Plain,
    /// `linλx. e`: a linear function (Smeding–Vákár's backpropagators); runs like a plain one.
    Linear,
}

/// Every variant's fields fit in 8 bytes beside the tag (a `Var`'s 12-byte name in 12), so an
/// `ExprKind` is 16 bytes and a node (`Expr`) 40: a variant's children are one box (`App(fa)`,
/// split by `let (f, a) = &**fa;`; `Let((p, (rhs, body)))`; `Case`'s five), an n-ary one's a thin
/// vector (its length beside its elements), a pattern, a `Type` and a second vector behind the
/// pointer (issue 14, memory per line: a 10^5-line program's typed outputs are tens of millions of
/// nodes; 48 bytes a node kept the longest outputs over the CLI's budget, session 34).
#[derive(Clone, PartialEq)]
pub enum ExprKind {
    Var(Name),
    Real(f64),
    Int(i64),
    Bool(bool),
    Unit,
    /// `\p -> body` as `(p, body)`.
    Lam(LamKind, Box<(Pat, Expr)>),
    /// `f a` as `(f, a)`.
    App(Box<(Expr, Expr)>),
    /// `let p = rhs in body` as `(p, (rhs, body))`.
    Let(Box<(Pat, (Expr, Expr))>),
    /// A group of local, mutually recursive functions, visible in each other and in the body, as
    /// `(functions, body)`.
    LetRec(Box<(Vec<FunDef>, Expr)>),
    /// n >= 2 components.
    Tuple(Exprs),
    /// `[e1, ..., en]`, n >= 0: an array literal.
    Array(Exprs),
    Fst(Box<Expr>),
    Snd(Box<Expr>),
    Inl(Box<Expr>),
    Inr(Box<Expr>),
    /// `case e of inl p1 -> e1 | inr p2 -> e2` as `(e, p1, e1, p2, e2)`, boxed whole: the largest
    /// variant, which unboxed made every node 152 bytes instead of 112 (issue 14: memory per node).
    Case(Box<(Expr, Pat, Expr, Pat, Expr)>),
    /// `if c then a else b` as `(c, (a, b))`.
    If(Box<(Expr, (Expr, Expr))>),
    Prim(Prim, Exprs),
    /// `(e : A)` as `(e, A)`.
    Ann(Box<(Expr, Type)>),
    /// A target-language builtin by name (`Add`, `deltaLet`, `eval`, ...), typed and run from the
    /// builtin table that the stage registers.
    Builtin(Text),
    /// `do { p ← m; k }`: bind in the monad `M` (state monads in Krawiec et al. and Smeding–Vákár).
    /// The interpreter runs `M` in direct style (effects happen when the bind runs), which is sound
    /// because the translations bind every monadic value exactly once, as it is produced
    /// (Krawiec et al. §7.3 implement `M` with mutable state for the same reason).
    /// As `(p, (m, k))`.
    Bind(Box<(Pat, (Expr, Expr))>),
    /// `pure e` (return of the monad).
    Pure(Box<Expr>),
    /// `e1 ||| e2 : (A, B)`: a parallel pair (Smeding & Vákár §12's fork-join `s ⋆ t`). It means the
    /// pair `(e1, e2)`; the two sides may run in parallel. The interpreter runs them left to right.
    /// As `(e1, e2)`.
    Par(Box<(Expr, Expr)>),
}

/// The components of a `Tuple`, an `Array` or a `Prim`'s arguments: a vector behind one thin
/// pointer (its length and capacity beside its elements), where a `Box<[Expr]>` was two words and
/// made every `ExprKind` 24 bytes. Derefs to `[Expr]`; build it with `.into()` from a `Vec<Expr>`
/// or an array, or collect it.
pub type Exprs = thin_vec::ThinVec<Expr>;

/// As when every child was a field of its own (`App(f, a)`, `Let(p, (rhs, body))`): debug output,
/// and the snapshots of it, are what they were.
impl std::fmt::Debug for ExprKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use ExprKind::*;
        match self {
            Var(n) => f.debug_tuple("Var").field(n).finish(),
            Real(r) => f.debug_tuple("Real").field(r).finish(),
            Int(i) => f.debug_tuple("Int").field(i).finish(),
            Bool(b) => f.debug_tuple("Bool").field(b).finish(),
            Unit => f.write_str("Unit"),
            Lam(k, pb) => f.debug_tuple("Lam").field(k).field(&pb.0).field(&pb.1).finish(),
            App(fa) => f.debug_tuple("App").field(&fa.0).field(&fa.1).finish(),
            Let(l) => f.debug_tuple("Let").field(&l.0).field(&l.1).finish(),
            LetRec(fb) => f.debug_tuple("LetRec").field(&fb.0).field(&fb.1).finish(),
            Tuple(es) => f.debug_tuple("Tuple").field(es).finish(),
            Array(es) => f.debug_tuple("Array").field(es).finish(),
            Fst(e) => f.debug_tuple("Fst").field(e).finish(),
            Snd(e) => f.debug_tuple("Snd").field(e).finish(),
            Inl(e) => f.debug_tuple("Inl").field(e).finish(),
            Inr(e) => f.debug_tuple("Inr").field(e).finish(),
            Case(c) => f.debug_tuple("Case").field(c).finish(),
            If(c) => f.debug_tuple("If").field(&c.0).field(&c.1).finish(),
            Prim(op, es) => f.debug_tuple("Prim").field(op).field(es).finish(),
            Ann(et) => f.debug_tuple("Ann").field(&et.0).field(&et.1).finish(),
            Builtin(b) => f.debug_tuple("Builtin").field(b).finish(),
            Bind(b) => f.debug_tuple("Bind").field(&b.0).field(&b.1).finish(),
            Pure(e) => f.debug_tuple("Pure").field(e).finish(),
            Par(ab) => f.debug_tuple("Par").field(&ab.0).field(&ab.1).finish(),
        }
    }
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span, ty: Type::Unknown }
    }
    /// Generated code: no source span.
    pub fn gen(kind: ExprKind) -> Expr {
        Expr { kind, span: Span::NONE, ty: Type::Unknown }
    }
    pub fn with_ty(mut self, ty: Type) -> Expr {
        self.ty = ty;
        self
    }
}

/// Gives `span` to the span-less nodes of `e` down to its located ones, which keep theirs: code a
/// transform generates from a source node points at that node (its errors, run-time ones too, get
/// the user's line). A stack, not recursion.
pub fn locate(e: &mut Expr, span: Span) {
    if span.is_none() {
        return;
    }
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        if !x.span.is_none() {
            continue;
        }
        x.span = span;
        stack.extend(children_mut(x));
    }
}

/// `param n = 10`: an integer size parameter, bound as a global `Z` in every definition.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Name,
    pub value: i64,
    pub span: Span,
}

/// `expect grad (37.0, 12.0)` and friends: checked by `cotangent check` and the tests.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub what: ExpectKind,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectKind {
    /// `expect grad V`: the gradient, in the shape of the input (integer leaves as they are).
    Grad,
    /// `expect primal V`: the value of `main` at the input.
    Primal,
}

/// A top-level definition: `def f p1 p2 = e` is stored as `f = \p1 -> \p2 -> e`.
#[derive(Clone, Debug, PartialEq)]
pub struct Def {
    pub name: Name,
    pub body: Expr,
    pub span: Span,
    /// Filled in by the type checker.
    pub scheme: Option<Scheme>,
    /// Who wrote it: the user, or a stage (its wrapper, or a helper it generates).
    pub role: Role,
}

/// Who wrote a top-level definition. The pipeline finds a stage's wrapper by role, and renames user
/// definitions whose names a stage's generated definitions take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    /// The stage's wrapper `grad : (S, δT) → (T, δS)`.
    Wrapper,
    /// Any other generated definition (`fwd`, `zip_S`, `interleave`, ...).
    Helper,
}

/// A whole program: its parameters, default input, definitions (mutually recursive), and expectations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    pub params: Vec<Param>,
    /// `input V`: the default input point of `main`, a closed constant expression.
    pub input: Option<Expr>,
    /// `seed V`: the default output cotangent (`--seed` overrides it), a closed constant expression.
    pub seed: Option<Expr>,
    pub defs: Vec<Def>,
    pub expects: Vec<Expect>,
    /// Names starting from `next_id` are fresh: passes that introduce binders take ids from here.
    pub next_id: u32,
}

impl Program {
    /// The program with `defs` in place of its definitions (its parameters, input, seed, expects and
    /// fresh ids kept): a transform that writes new definitions copies the rest, not the old
    /// definitions (issue 14: a 10^5-line stage input is hundreds of MiB).
    pub fn with_defs(&self, defs: Vec<Def>) -> Program {
        Program { params: self.params.clone(), input: self.input.clone(), seed: self.seed.clone(), defs, expects: self.expects.clone(), next_id: self.next_id }
    }
    pub fn def(&self, name: &str) -> Option<&Def> {
        self.defs.iter().find(|d| &*d.name.text == name)
    }
    /// A fresh binder named `text` (the printer disambiguates texts that would be captured).
    pub fn fresh(&mut self, text: &str) -> Name {
        let id = self.next_id.max(1);
        self.next_id = id + 1;
        Name::new(text, id)
    }
}

/// The number of nodes of `e` as a tree (an explicit stack: no native recursion in proportion to
/// the input).
pub fn node_count(e: &Expr) -> u64 {
    let (mut n, mut stack) = (0u64, vec![e]);
    while let Some(x) = stack.pop() {
        n += 1;
        each_child(x, &mut |c| stack.push(c));
    }
    n
}

/// Calls `f` on each direct sub-expression, left to right.
pub fn each_child<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    match &e.kind {
        ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit | ExprKind::Builtin(_) => {}
        ExprKind::Fst(b) | ExprKind::Snd(b) | ExprKind::Inl(b) | ExprKind::Inr(b) | ExprKind::Pure(b) => f(b),
        ExprKind::Lam(_, pb) => f(&pb.1),
        ExprKind::Ann(et) => f(&et.0),
        ExprKind::App(ab) | ExprKind::Par(ab) => {
            f(&ab.0);
            f(&ab.1)
        }
        ExprKind::Let(l) | ExprKind::Bind(l) => {
            f(&l.1 .0);
            f(&l.1 .1)
        }
        ExprKind::LetRec(fb) => {
            fb.0.iter().for_each(|d| f(&d.body));
            f(&fb.1)
        }
        ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Prim(_, es) => es.iter().for_each(f),
        ExprKind::Case(c) => {
            f(&c.0);
            f(&c.2);
            f(&c.4)
        }
        ExprKind::If(c) => {
            f(&c.0);
            f(&c.1 .0);
            f(&c.1 .1)
        }
    }
}

/// Calls `f` on each direct sub-expression, mutably.
pub fn each_child_mut<'a>(e: &'a mut Expr, f: &mut dyn FnMut(&'a mut Expr)) {
    match &mut e.kind {
        ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit | ExprKind::Builtin(_) => {}
        ExprKind::Fst(b) | ExprKind::Snd(b) | ExprKind::Inl(b) | ExprKind::Inr(b) | ExprKind::Pure(b) => f(b),
        ExprKind::Lam(_, pb) => f(&mut pb.1),
        ExprKind::Ann(et) => f(&mut et.0),
        ExprKind::App(ab) | ExprKind::Par(ab) => {
            let (a, b) = &mut **ab;
            f(a);
            f(b)
        }
        ExprKind::Let(l) | ExprKind::Bind(l) => {
            let (_, (a, b)) = &mut **l;
            f(a);
            f(b)
        }
        ExprKind::LetRec(fb) => {
            let (fs, b) = &mut **fb;
            fs.iter_mut().for_each(|d| f(&mut d.body));
            f(b)
        }
        ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Prim(_, es) => es.iter_mut().for_each(f),
        ExprKind::Case(c) => {
            let (s, _, a, _, b) = &mut **c;
            f(s);
            f(a);
            f(b)
        }
        ExprKind::If(c) => {
            let (s, (a, b)) = &mut **c;
            f(s);
            f(a);
            f(b)
        }
    }
}

/// The span of the first parallel pair `e1 ||| e2` in a program, if any: stages that cannot take
/// the construct refuse it with a located message.
pub fn first_par(p: &Program) -> Option<crate::diag::Span> {
    fn go(e: &Expr) -> Option<crate::diag::Span> {
        if let ExprKind::Par(..) = e.kind {
            return Some(e.span);
        }
        let mut found = None;
        each_child(e, &mut |c| {
            if found.is_none() {
                found = go(c)
            }
        });
        found
    }
    p.defs.iter().find_map(|d| go(&d.body))
}

/// The direct sub-expressions, mutably, for passes that keep their own stack (deep programs must
/// not recurse natively: see limits.rs).
pub fn children_mut(e: &mut Expr) -> Vec<&mut Expr> {
    let mut out = vec![];
    each_child_mut(e, &mut |c| out.push(c));
    out
}

/// The direct sub-expressions, for passes that keep their own stack.
pub fn children(e: &Expr) -> Vec<&Expr> {
    let mut out = vec![];
    each_child(e, &mut |c| out.push(c));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory per node bounds how long a program fits the memory budget (issue 14: a 10^5-line
    /// program's typed outputs are tens of millions of nodes): `Case`'s five fields, unboxed, made every
    /// node 152 bytes; `Con`'s name and arguments inline made every `Type` (one per node) 40; the
    /// patterns of `Let`, `Lam` and `Bind` inline made every node 96; a tuple's fat pointer and a
    /// function's two pointers made every `Type` 24 and every node 64 (a boxed node 80 bytes of heap
    /// with glibc's chunk header, 64 at 56); a name's two-word text, three children side by side and
    /// a vector's capacity made every `ExprKind` 32 and every node 56 (mimalloc's size classes are
    /// 8 bytes apart up to 64: 48 is 1/7 less).
    /// Issue 14 (memory per line): inference makes an `M a` for every `pure` and bind; the name
    /// is one allocation shared by all of them, not one each.
    #[test]
    fn constructors_of_one_name_share_its_text() {
        let (Type::Con(a), Type::Con(b), Type::Con(c)) = (Type::con("M", vec![Type::Real]), Type::array(Type::Int), Type::con("M", vec![Type::Int])) else { panic!("constructors") };
        assert!(Rc::ptr_eq(&a.name, &c.name), "each `M` has its own copy of its name");
        assert_eq!((&*a.name, &*b.name), ("M", "Array"));
        // bounded: the names of a long CHAD output (one builtin a variable) do not stay for good;
        // a name met before the table was emptied is made again, once
        let m = interned("M");
        (0..5_000).for_each(|i| drop(interned(&format!("one_{{v{i}@{i}:R}}"))));
        let (n, o) = (interned("M"), interned("M"));
        assert!(!Rc::ptr_eq(&m, &n) && Rc::ptr_eq(&n, &o), "the table of names was never emptied");
    }

    /// Issue 14 (memory per line): the fresh names a transform makes from one text share it (one
    /// allocation each was a tenth of dualrev/staged's output), and the table stays bounded when
    /// every text is new (a source's `v0` … `v99999`).
    #[test]
    fn names_of_one_text_share_it() {
        let (a, b, c) = (Name::new("x1", 7), Name::new("x1", 8), Name::global("x1"));
        assert!(Text::ptr_eq(&a.text, &b.text) && Text::ptr_eq(&a.text, &c.text), "each `x1` has its own copy of its text");
        let texts: Vec<Name> = (0..10_000).map(|i| Name::new(&format!("v{i}"), i + 1)).collect();
        assert_eq!(&*texts[9_999].text, "v9999");
        // emptied at 4096: a text met before the table was emptied is made again, once
        let (d, e) = (Name::new("v0", 1), Name::new("v0", 2));
        assert!(!Text::ptr_eq(&texts[0].text, &d.text) && Text::ptr_eq(&d.text, &e.text));
    }

    /// Session 34: a name's text 4-byte aligned made a `Name` 12 bytes, which fits beside the
    /// tag; each variant's children in one box and the n-ary ones' in a thin vector made every
    /// `ExprKind` 16 and every node 40 (48 before).
    #[test]
    fn a_node_is_at_most_40_bytes() {
        assert!(std::mem::size_of::<Type>() <= 16, "Type is {} bytes", std::mem::size_of::<Type>());
        assert!(std::mem::size_of::<Name>() <= 12, "Name is {} bytes", std::mem::size_of::<Name>());
        assert!(std::mem::size_of::<ExprKind>() <= 16, "ExprKind is {} bytes", std::mem::size_of::<ExprKind>());
        assert!(std::mem::size_of::<Expr>() <= 40, "Expr is {} bytes", std::mem::size_of::<Expr>());
        assert!(std::mem::size_of::<Pat>() <= 24, "Pat is {} bytes", std::mem::size_of::<Pat>());
    }

    /// A text's count goes up with each clone and down with each drop, and its pointer is read
    /// out of its 4-byte-aligned field, not borrowed: a `Name` inside a node is 4-aligned.
    #[test]
    fn texts_count_their_holders() {
        let a = Text::from("a text of its own");
        let b = a.clone();
        let c = Text::from("a text of its own");
        assert!(Text::ptr_eq(&a, &b) && !Text::ptr_eq(&a, &c) && a == c && a.cmp(&c).is_eq());
        let probe = |t: &Text| {
            let rc = t.rc;
            // SAFETY: as in `Text::clone`
            unsafe { Rc::increment_strong_count(rc.as_ptr()); Rc::from_raw(rc.as_ptr()) }
        };
        assert_eq!(Rc::strong_count(&probe(&a)), 3);
        drop(b);
        assert_eq!(Rc::strong_count(&probe(&a)), 2);
        let e = Expr::gen(ExprKind::Var(Name::new("y", 3)));
        let ExprKind::Var(n) = &e.kind else { panic!("a variable") };
        assert_eq!((&*n.text, n.id), ("y", 3));
    }
}
