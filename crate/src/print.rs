//! The pretty printer: programs, expressions, types and patterns in the surface syntax the parser
//! reads back, laid out to a width with the `pretty` crate (Wadler-style groups).
//!
//! Printing runs in three passes over the tree:
//! 1. `Occ` numbers every variable occurrence in pre-order and records, for every binder in the
//!    order it meets them, the interval of occurrence numbers its scope spans, and the sorted
//!    occurrences of every name (one list of (id, occurrence) for locals, a list per global text);
//!    "is `x#1` used inside this scope" is then a binary search.
//! 2. `Renamer` walks the binders in scope order and decides the printed text of every local binder:
//!    a binder keeps its text unless that would capture a use of an outer binding (a different id,
//!    or a global / builtin / named primitive of the same text) inside its scope; then it prints as
//!    `text1`, `text2`, ... (the first suffix that is neither in scope nor a global name nor captures).
//! 3. `Printer` builds the document in an arena and renders it.
//!
//! Every pass is linear (up to a log factor) in the size of the tree; the document renderer is
//! iterative. Passes 1–3 recurse on the tree, which the pipeline's big-stack thread allows.

use crate::diag::Span;
use crate::ir::{Def, Expect, ExpectKind, Expr, ExprKind, FunDef, LamKind, Name, Pat, Prim, Program, Text, Type};
use crate::prims::{Assoc, Syntax};
use crate::value::show_real;
use pretty::{Arena, DocAllocator, DocBuilder};
use std::cell::Cell;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// How to print: the line width to fit, Unicode (`λ → ← ⊸`) or ASCII (`\ -> <- -o`) symbols, and
/// whether to print each definition's type scheme as a comment line above it.
#[derive(Clone, Copy, Debug)]
pub struct PrintOptions {
    pub width: usize,
    pub unicode: bool,
    pub types: bool,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions { width: 80, unicode: true, types: false }
    }
}

impl PrintOptions {
    pub fn ascii() -> Self {
        PrintOptions { unicode: false, ..Self::default() }
    }
    pub fn unicode() -> Self {
        PrintOptions { unicode: true, ..Self::default() }
    }
}

/// A whole program: params, `input`, defs, expects; one item per line, or separated by blank lines
/// when some definition needs more than one line. Ends with a newline (empty program: empty string).
pub fn print_program(p: &Program, o: &PrintOptions) -> String {
    print_program_mapped(p, o, false).text
}

/// A printed program with, for each of its lines, the source spans it came from: the outermost
/// expressions with a span that start and end on the line, else the innermost one open where the
/// line starts (empty for a line of generated code only). The page highlights them on hover.
pub struct Mapped {
    pub text: String,
    pub lines: Vec<Vec<Span>>,
}

/// `print_program`, also mapping its lines to source spans when `map` is set (the text is the same).
pub fn print_program_mapped(p: &Program, o: &PrintOptions, map: bool) -> Mapped {
    print_with(p, o, map, stream::FROM)
}

/// The printed text of every local binder of `p` (passes 1 and 2).
fn names_of(p: &Program) -> HashMap<u32, Text> {
    let mut occ = Occ::default();
    for i in p.input.iter().chain(&p.seed) {
        occ.expr(i);
    }
    for d in &p.defs {
        occ.expr(&d.body);
    }
    for x in &p.expects {
        occ.expr(&x.value);
    }
    let occ = occ.sorted();
    let mut reserved: HashSet<Text> = occ.globals.keys().cloned().collect();
    reserved.extend(p.params.iter().map(|q| q.name.text.clone()));
    reserved.extend(p.defs.iter().map(|d| d.name.text.clone()));
    let mut ren = Renamer::new(&occ, reserved);
    for i in p.input.iter().chain(&p.seed) {
        ren.expr(i);
    }
    for d in &p.defs {
        ren.expr(&d.body);
    }
    for x in &p.expects {
        ren.expr(&x.value);
    }
    ren.names
}

/// The `param`, `input` and `seed` lines of `p`, the first item of its text.
fn header_of(p: &Program, pr: &Printer, o: &PrintOptions, map: bool) -> Pieces {
    let mut header = Pieces::default();
    for q in &p.params {
        header.push_plain(format!("param {} = {}\n", q.name.text, q.value));
    }
    if let Some(i) = &p.input {
        header.push_line(pr.render_mapped(pr.keyword_item("input", i), o.width, map));
    }
    if let Some(s) = &p.seed {
        header.push_line(pr.render_mapped(pr.keyword_item("seed", s), o.width, map));
    }
    header
}

/// Definition `d`'s item: its type's comment line where `o.types` asks, then `text`, its layout.
fn def_item(d: &Def, pr: &Printer, o: &PrintOptions, text: Laid) -> Pieces {
    let mut out = Pieces::default();
    if let Some(line) = type_line(d, pr, o) {
        out.push_plain(line);
    }
    out.push_line(text);
    out
}

/// Definition `d`'s type as a comment line (`-- f : τ`), where `o.types` asks and the type is known.
fn type_line(d: &Def, pr: &Printer, o: &PrintOptions) -> Option<String> {
    let s = d.scheme.as_ref().filter(|_| o.types)?;
    Some(format!("-- {} : {}\n", d.name.text, pr.render(pr.ty(&s.ty, 0), usize::MAX / 4)))
}

/// The `expect` lines of `p`, its last item.
fn expects_of(p: &Program, pr: &Printer, o: &PrintOptions, map: bool) -> Pieces {
    let mut expects = Pieces::default();
    for x in &p.expects {
        expects.push_line(pr.render_mapped(pr.expect(x), o.width, map));
    }
    expects
}

/// `print_program_mapped`, laying out link by link each definition whose body has `from` links or more.
fn print_with(p: &Program, o: &PrintOptions, map: bool, from: usize) -> Mapped {
    let names = names_of(p);
    let arena = Arena::new();
    let pr = Printer::new(&arena, *o, &names, None);

    // Each item is a list of pieces (text with its lines' spans), each piece ending in a newline.
    let header = header_of(p, &pr, o, map);
    let mut multi = false;
    let defs: Vec<Pieces> = p
        .defs
        .iter()
        .map(|d| {
            let text = stream::def(d, o, &names, map, from, None);
            multi |= text.chunks.iter().any(|c| c.contains('\n'));
            def_item(d, &pr, o, text)
        })
        .collect();
    let expects = expects_of(p, &pr, o, map);
    let items: Vec<Pieces> = std::iter::once(header)
        .chain(defs)
        .chain(std::iter::once(expects))
        .filter(|s| !s.0.is_empty())
        .collect();
    let mut all = Pieces::default();
    for (k, item) in items.into_iter().enumerate() {
        if k > 0 && multi {
            all.push_plain("\n".to_string());
        }
        all.0.extend(item.0);
    }
    all.finish(map)
}

/// `print_program`'s text handed to `emit` in chunks of whole lines as it is laid out, so that a long
/// program's text need not be held beside its tree (issue 14 item 4: the CLI writes each chunk to
/// stdout; a 10^5-line output's text is ~65 MiB). The chunks join to `print_program`'s text (test
/// `streamed_text_is_the_printed_text`). Where no definition is laid out apart (`stream::apart`), the
/// whole text is made first and handed over as one: whether items are separated by blank lines
/// depends on every definition's layout, and a definition laid out apart is known to need several
/// lines before it is laid out, so from the first such one on, each item goes as it is made.
pub fn print_program_streamed(p: &Program, o: &PrintOptions, emit: &mut dyn FnMut(String)) {
    print_streamed_with(p, o, stream::FROM, emit)
}

/// `print_program_streamed`, laying out apart each definition whose body has `from` links or more.
fn print_streamed_with(p: &Program, o: &PrintOptions, from: usize, emit: &mut dyn FnMut(String)) {
    if !p.defs.iter().any(|d| stream::apart(d, o, false, from)) {
        let text = print_with(p, o, false, from).text;
        if !text.is_empty() {
            emit(text);
        }
        return;
    }
    let names = names_of(p);
    let arena = Arena::new();
    let pr = Printer::new(&arena, *o, &names, None);
    // items separated by blank lines (`print_with`'s `multi`): a definition laid out apart has several
    let mut first = true;
    let mut next_item = |emit: &mut dyn FnMut(String)| {
        if !std::mem::take(&mut first) {
            emit("\n".to_string());
        }
    };
    let header = header_of(p, &pr, o, false);
    if !header.0.is_empty() {
        next_item(emit);
        header.0.into_iter().flat_map(|m| m.chunks).for_each(&mut *emit);
    }
    for d in &p.defs {
        // the separator and the type's line before the definition's first streamed chunk
        next_item(emit);
        if let Some(line) = type_line(d, &pr, o) {
            emit(line);
        }
        let mut rest = stream::def(d, o, &names, false, from, Some(&mut *emit));
        match rest.chunks.last_mut() {
            Some(c) => c.push('\n'),
            None => rest.chunks.push("\n".to_string()),
        }
        rest.chunks.into_iter().for_each(&mut *emit);
    }
    let expects = expects_of(p, &pr, o, false);
    if !expects.0.is_empty() {
        next_item(emit);
        expects.0.into_iter().flat_map(|m| m.chunks).for_each(&mut *emit);
    }
}

/// Laid-out text as whole lines in chunks of about `CHUNK` bytes (one for a short text), and, if
/// mapped, each line's spans. Joined once, at the end (`append`), each chunk let go once copied: a
/// long program's text (kept with the stage's output) is held about once, where one growing buffer
/// (up to twice the text) and its copy held up to three times it (issue 14 item 4).
struct Laid {
    chunks: Vec<String>,
    lines: Vec<Vec<Span>>,
}

/// Bytes after which the sink starts a new chunk at the next line break (in the unit tests, a few
/// lines' worth, so that every test that prints goes through many chunks).
const CHUNK: usize = if cfg!(test) { 64 } else { 1 << 20 };

impl Laid {
    fn text(self) -> String {
        let total = self.chunks.iter().map(String::len).sum();
        let mut text = String::new();
        for c in self.chunks {
            append(&mut text, c, total);
        }
        text
    }
}

/// Appends chunk `c` to `text`, which will hold `total` bytes in the end, and lets `c` go. `text` grows
/// by a quarter at a time (never past `total`), so that the join holds at most a quarter more than
/// the text, where a text of the whole length made before the chunks were let go held it twice at
/// printing's peak (issue 14 item 4: ~70 MiB more on dualrev/staged's output of a 10^5-line
/// program). The copies a growth makes add up to ~5 times the text, a memcpy.
fn append(text: &mut String, c: String, total: usize) {
    let need = text.len() + c.len();
    if need > text.capacity() {
        let want = need.max(text.capacity() + text.capacity() / 4).min(total.max(need));
        text.reserve_exact(want - text.len());
    }
    text.push_str(&c);
}

/// The pieces of a printed program, in order: text and its lines' spans (empty if not mapped).
#[derive(Default)]
struct Pieces(Vec<Laid>);

impl Pieces {
    fn push_plain(&mut self, text: String) {
        self.0.push(Laid { chunks: vec![text], lines: vec![] });
    }
    fn push_line(&mut self, mut m: Laid) {
        match m.chunks.last_mut() {
            Some(c) => c.push('\n'),
            None => m.chunks.push("\n".to_string()),
        }
        self.0.push(m);
    }
    fn finish(self, map: bool) -> Mapped {
        let total = self.0.iter().flat_map(|m| &m.chunks).map(String::len).sum();
        let mut text = String::new();
        let mut lines: Vec<Vec<Span>> = vec![];
        for m in self.0 {
            let at = lines.len();
            let n: usize = m.chunks.iter().map(|c| c.matches('\n').count()).sum();
            for c in m.chunks {
                append(&mut text, c, total);
            }
            if map {
                lines.resize(at + n, vec![]);
                for (k, spans) in m.lines.into_iter().enumerate().take(n) {
                    lines[at + k] = spans;
                }
            }
        }
        Mapped { text, lines }
    }
}

/// An expression on its own (its free variables print by their text). No trailing newline.
pub fn print_expr(e: &Expr, o: &PrintOptions) -> String {
    let mut occ = Occ::default();
    occ.expr(e);
    let occ = occ.sorted();
    let reserved: HashSet<Text> = occ.globals.keys().cloned().collect();
    let mut ren = Renamer::new(&occ, reserved);
    ren.expr(e);
    let names = ren.names;
    let arena = Arena::new();
    let pr = Printer::new(&arena, *o, &names, None);
    pr.render(pr.expr(e, 0), o.width)
}

pub fn print_type(t: &Type, o: &PrintOptions) -> String {
    let mut flat = String::new();
    if flat_type(t, 0, &mut flat) && flat.chars().count() <= o.width {
        return flat;
    }
    laid_out_type(t, o)
}

/// `print_type` through the layout engine.
fn laid_out_type(t: &Type, o: &PrintOptions) -> String {
    let names = HashMap::default();
    let arena = Arena::new();
    let pr = Printer::new(&arena, *o, &names, None);
    pr.render(pr.ty(t, 0), o.width)
}

/// `t` on one line as `Printer::ty` prints it when it fits, without the layout engine, if it is made
/// of names, variables, tuples and applied type constructors only: the common case, and a stack
/// diagram (unf/source) prints a type per slot per row. False (and `out` unfinished) otherwise.
fn flat_type(t: &Type, ctx: u8, out: &mut String) -> bool {
    let lvl = match t {
        Type::Con(c) if !c.args.is_empty() => 2,
        _ => 3,
    };
    let parens = lvl < ctx;
    if parens {
        out.push('(');
    }
    match t {
        Type::Real => out.push('R'),
        Type::Int => out.push('Z'),
        Type::Bool => out.push_str("Bool"),
        Type::Unit => out.push_str("()"),
        Type::Unknown => out.push('?'),
        Type::Var(n) if *n < 26 => out.push((b'a' + *n as u8) as char),
        Type::Var(n) => {
            use std::fmt::Write;
            let _ = write!(out, "t{n}");
        }
        Type::Tuple(ts) if ts.len() == 1 => return flat_type(&ts[0], ctx, out),
        Type::Tuple(ts) => {
            out.push('(');
            for (i, x) in ts.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if !flat_type(x, 0, out) {
                    return false;
                }
            }
            out.push(')');
        }
        Type::Con(c) => {
            out.push_str(&c.name);
            for x in c.args.iter() {
                out.push(' ');
                if !flat_type(x, 3, out) {
                    return false;
                }
            }
        }
        Type::Sum(..) | Type::Fun(..) | Type::Lin(..) => return false,
    }
    if parens {
        out.push(')');
    }
    true
}

pub fn print_pat(p: &Pat, o: &PrintOptions) -> String {
    let names = HashMap::default();
    let arena = Arena::new();
    let pr = Printer::new(&arena, *o, &names, None);
    pr.render(pr.pat(p), o.width)
}

// ---------------------------------------------------------------------------------------------
// Pass 1: occurrences.

#[derive(Default)]
struct Occ {
    /// The half-open interval of occurrence numbers of each binder's scope (a `let` or `case` arm's
    /// body, a lambda's, a recursive group's bodies and body), in the order the binders are met:
    /// the renamer meets them in the same order (`Renamer::next_scope`). 8 bytes a binder (a map by
    /// the body's address was ~30; issue 14: printing's memory per line).
    scopes: Vec<(u32, u32)>,
    /// Every occurrence of a bound local as (id, occurrence number), sorted by `sorted`: whether a
    /// local is used in an interval is a binary search. 8 bytes an occurrence (a `Vec` per local in
    /// a map was ~80 bytes a local; issue 14: printing's memory per line).
    locals: Vec<(u32, u32)>,
    /// Where the counting sort (`sorted`) left each id's occurrences: they end at `ends[id]` and start
    /// where the id before's end (empty where the ids were sorted by comparison). A local's few
    /// occurrences are then searched, not all of them (the search was a twelfth of printing).
    ends: Vec<u32>,
    /// Globals (id 0), free locals, builtins and named primitives, by text.
    globals: HashMap<Text, Vec<u32>>,
    next: u32,
    /// Local ids bound by an enclosing binder (with multiplicity), while walking.
    bound: HashMap<u32, u32>,
}

/// `k` in decimal at the end of `s`.
fn push_decimal(s: &mut String, k: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut k = k;
    loop {
        i -= 1;
        digits[i] = b'0' + (k % 10) as u8;
        k /= 10;
        if k == 0 {
            break;
        }
    }
    s.extend(digits[i..].iter().map(|&d| char::from(d)));
}

fn used_in(v: Option<&Vec<u32>>, (lo, hi): (u32, u32)) -> bool {
    match v {
        None => false,
        Some(v) => {
            let i = v.partition_point(|&x| x < lo);
            i < v.len() && v[i] < hi
        }
    }
}

impl Occ {
    /// A global's occurrence, its text kept by a count where it is a `Text` (a name's, a builtin's:
    /// a stage's builtins are mostly met once, and each made a new text), else made (a primitive's).
    fn global(&mut self, text: &str, kept: Option<&Text>) {
        let i = self.next;
        self.next += 1;
        match self.globals.get_mut(text) {
            Some(at) => at.push(i),
            None => {
                self.globals.insert(kept.map_or_else(|| Text::from(text), Text::clone), vec![i]);
            }
        }
    }

    /// A binder's scope: its interval of occurrence numbers is recorded, the renamer's question.
    /// (No closures on the recursion's path: each is a frame per nesting level, and wasm's stack
    /// in a debug build is what the deep-program browser tests measure.)
    fn body(&mut self, b: &Expr) {
        let k = self.open_scope();
        self.expr(b);
        self.close_scope(k);
    }

    fn open_scope(&mut self) -> usize {
        self.scopes.push((self.next, 0));
        self.scopes.len() - 1
    }

    fn close_scope(&mut self, k: usize) {
        self.scopes[k].1 = self.next;
    }

    fn expr(&mut self, e: &Expr) {
        use ExprKind::*;
        match &e.kind {
            // A local that no enclosing binder binds (an open term) prints by its text, like a global.
            Var(n) if n.is_global() || !self.bound.contains_key(&n.id) => self.global(&n.text, Some(&n.text)),
            Var(n) => {
                let i = self.next;
                self.next += 1;
                self.locals.push((n.id, i));
            }
            Builtin(b) => self.global(b, Some(b)),
            Real(_) | Int(_) | Bool(_) | Unit => {}
            Lam(_, p_b) => {
                let (p, b) = &**p_b;
                self.enter_pat(p);
                self.body(b);
                self.leave_pat(p);
            }
            Fst(b) | Snd(b) | Inl(b) | Inr(b) | Pure(b) => self.expr(b), Ann(b_t) => self.expr(&b_t.0),
            App(a_b) => {
                let (a, b) = &**a_b;
                self.expr(a);
                self.expr(b);
            }
            Let(p_a_b) | Bind(p_a_b) => {
                let (p, a_b) = &**p_a_b;
                let (a, b) = a_b;
                self.expr(a);
                self.enter_pat(p);
                self.body(b);
                self.leave_pat(p);
            }
            // the group's names are in scope in every member's body and in `b`: one interval
            LetRec(fs_b) => {
                let (fs, b) = &**fs_b;
                let ns: Vec<&Name> = fs.iter().map(|f| &f.name).collect();
                self.enter(&ns);
                let k = self.open_scope();
                for f in fs.iter() {
                    self.expr(&f.body);
                }
                self.expr(b);
                self.close_scope(k);
                self.leave(&ns);
            }
            Tuple(es) | Array(es) => {
                for x in es.iter() {
                    self.expr(x);
                }
            }
            Par(a_b) => {
                let (a, b) = &**a_b;
                self.expr(a);
                self.expr(b);
            }
            Case(c) => {
                let (s, p1, a, p2, b) = &**c;
                self.expr(s);
                for (p, x) in [(p1, a), (p2, b)] {
                    self.enter_pat(p);
                    self.body(x);
                    self.leave_pat(p);
                }
            }
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                self.expr(c);
                self.expr(a);
                self.expr(b);
            }
            Prim(p, args) => {
                if p.is_named() {
                    self.global(p.symbol(), None);
                }
                for x in args.iter() {
                    self.expr(x);
                }
            }
        }
    }

    /// `names` bound, for the binder's body (`leave` after it).
    fn enter(&mut self, names: &[&Name]) {
        for n in names {
            self.enter_name(n);
        }
    }

    fn leave(&mut self, names: &[&Name]) {
        for n in names {
            self.leave_name(n);
        }
    }

    /// `enter` for the names of pattern `p` (without collecting them: a binder is most often one
    /// name, and a `Vec` for it was an allocation a binder).
    fn enter_pat(&mut self, p: &Pat) {
        match p {
            Pat::Var(n, _) => self.enter_name(n),
            Pat::Wild(_) | Pat::Unit(_) => {}
            Pat::Tuple(ps, _) => ps.iter().for_each(|q| self.enter_pat(q)),
        }
    }

    fn leave_pat(&mut self, p: &Pat) {
        match p {
            Pat::Var(n, _) => self.leave_name(n),
            Pat::Wild(_) | Pat::Unit(_) => {}
            Pat::Tuple(ps, _) => ps.iter().for_each(|q| self.leave_pat(q)),
        }
    }

    fn enter_name(&mut self, n: &Name) {
        *self.bound.entry(n.id).or_default() += 1;
    }

    fn leave_name(&mut self, n: &Name) {
        if let Some(c) = self.bound.get_mut(&n.id) {
            *c -= 1;
            if *c == 0 {
                self.bound.remove(&n.id);
            }
        }
    }

    /// Once every expression is walked: the occurrences in order of (id, occurrence). They were
    /// met in order of occurrence, so a stable sort by id alone gives that order: a counting sort
    /// where the ids are dense enough (a program's are numbered from 0), linear where the
    /// comparison sort was a tenth of printing.
    fn sorted(mut self) -> Self {
        let max = self.locals.iter().map(|&(id, _)| id as usize).max().unwrap_or(0);
        if max > 4 * self.locals.len() + 4096 {
            self.locals.sort_unstable();
            return self;
        }
        // starts[id]: where id's occurrences begin
        let mut starts = vec![0u32; max + 2];
        for &(id, _) in &self.locals {
            starts[id as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut sorted = vec![(0, 0); self.locals.len()];
        for &(id, k) in &self.locals {
            let at = &mut starts[id as usize];
            sorted[*at as usize] = (id, k);
            *at += 1;
        }
        self.locals = sorted;
        // each id's `at` has moved to its end
        self.ends = starts;
        self
    }

    /// Is local `id` used in the interval of occurrences `[lo, hi)`?
    fn local_used_in(&self, id: u32, (lo, hi): (u32, u32)) -> bool {
        let k = id as usize;
        if let Some(&end) = self.ends.get(k) {
            let start = if k == 0 { 0 } else { self.ends[k - 1] };
            let at = self.locals.get(start as usize..end as usize).unwrap_or(&[]);
            let i = at.partition_point(|&(_, x)| x < lo);
            return at.get(i).is_some_and(|&(_, x)| x < hi);
        }
        let i = self.locals.partition_point(|&x| x < (id, lo));
        self.locals.get(i).is_some_and(|&(j, k)| j == id && k < hi)
    }

}

// ---------------------------------------------------------------------------------------------
// Pass 2: renaming.

/// Whether `s` is a word of the surface syntax: a binder with one of these texts is always renamed
/// (a `match`, which compares lengths first, where a list was searched for every binder).
fn is_keyword(s: &str) -> bool {
    matches!(
        s,
        "let" | "in" | "and" | "def" | "param" | "input" | "seed" | "expect" | "grad" | "primal" | "if" | "then" | "else"
            | "case" | "of" | "inl" | "inr" | "fst" | "snd" | "lin" | "do" | "pure" | "true" | "false" | "mod"
    )
}

struct Renamer<'o> {
    occ: &'o Occ,
    /// Printed text -> the innermost binder bound to it: 1 + its index in `bound`, 0 for none. The
    /// binders of a text form a stack threaded through `bound` (`Bound::under`): no `Vec` a text.
    env: HashMap<Text, u32>,
    /// The binders in scope, innermost last (the scopes nest, so they are let go in reverse).
    bound: Vec<Bound>,
    /// Printed text of every renamed local binder.
    names: HashMap<u32, Text>,
    /// Texts of globals (definitions, params, referenced globals, builtins, named primitives).
    reserved: HashSet<Text>,
    /// Base text -> the smallest suffix that may be free.
    hint: HashMap<Text, u64>,
    /// How many of `occ.scopes` were taken.
    scope: usize,
    /// The candidate text being tried, made in place (`format!` a candidate was most of a renaming).
    cand: String,
}

/// A binder in scope: its printed text and local id, `env`'s entry for the text under it, and the
/// base and suffix it was renamed with.
struct Bound {
    text: Text,
    id: u32,
    under: u32,
    suffix: Option<(Text, u64)>,
}

impl<'o> Renamer<'o> {
    fn new(occ: &'o Occ, reserved: HashSet<Text>) -> Self {
        Renamer { occ, env: HashMap::default(), bound: vec![], names: HashMap::default(), reserved, hint: HashMap::default(), scope: 0, cand: String::new() }
    }

    /// The scope of the next binder, in the order `Occ` met them.
    fn next_scope(&mut self) -> (u32, u32) {
        let s = self.occ.scopes.get(self.scope).copied().unwrap_or((0, 0));
        self.scope += 1;
        s
    }

    /// The local id innermost bound to printed text `text`, if any.
    fn top(&self, text: &str) -> Option<u32> {
        match self.env.get(text) {
            Some(&k) if k > 0 => Some(self.bound[k as usize - 1].id),
            _ => None,
        }
    }

    fn bind(&mut self, n: &Name, scope: (u32, u32)) {
        let at = self.bound.len() as u32 + 1;
        // Most binders keep their text: its entry, looked up once, is both the binder it would shadow
        // (does shadowing it capture a use?) and where the binder goes.
        if !is_keyword(&n.text) && !used_in(self.occ.globals.get(&*n.text), scope) {
            let slot = self.env.entry(n.text.clone()).or_insert(0);
            let shadowed = (*slot > 0).then(|| self.bound[*slot as usize - 1].id);
            if !shadowed.is_some_and(|top| top != n.id && self.occ.local_used_in(top, scope)) {
                let under = std::mem::replace(slot, at);
                self.bound.push(Bound { text: n.text.clone(), id: n.id, under, suffix: None });
                return;
            }
        }
        // Every suffix below the hint is in scope or a global name, so the search starts there
        // (this keeps deep towers of renamed binders linear).
        let mut k = self.hint.get(&n.text).copied().unwrap_or(1);
        let text = loop {
            self.cand.clear();
            self.cand.push_str(&n.text);
            push_decimal(&mut self.cand, k);
            let cand = self.cand.as_str();
            // a candidate neither in scope nor reserved captures nothing: no binder has its text,
            // and every global's text is reserved
            if self.top(cand).is_none() && !self.reserved.contains(cand) {
                self.hint.insert(n.text.clone(), k + 1);
                break Text::from(cand);
            }
            k += 1;
        };
        self.names.insert(n.id, text.clone());
        let under = std::mem::replace(self.env.entry(text.clone()).or_insert(0), at);
        self.bound.push(Bound { text, id: n.id, under, suffix: Some((n.text.clone(), k)) });
    }

    fn bind_pat(&mut self, p: &Pat, scope: (u32, u32)) {
        match p {
            Pat::Var(n, _) => self.bind(n, scope),
            Pat::Wild(_) | Pat::Unit(_) => {}
            Pat::Tuple(ps, _) => ps.iter().for_each(|q| self.bind_pat(q, scope)),
        }
    }

    /// Lets go of the binders bound since `bound` held `mark` of them, innermost first.
    fn unbind(&mut self, mark: usize) {
        while self.bound.len() > mark {
            let Some(b) = self.bound.pop() else { break };
            if let Some(top) = self.env.get_mut(&b.text) {
                *top = b.under;
            }
            if let Some((base, k)) = b.suffix {
                let h = self.hint.entry(base).or_insert(k);
                *h = (*h).min(k);
            }
        }
    }

    fn scoped(&mut self, p: &Pat, body: &Expr) {
        let mark = self.bound.len();
        let scope = self.next_scope();
        self.bind_pat(p, scope);
        self.expr(body);
        self.unbind(mark);
    }

    fn expr(&mut self, e: &Expr) {
        use ExprKind::*;
        match &e.kind {
            Var(_) | Builtin(_) | Real(_) | Int(_) | Bool(_) | Unit => {}
            Lam(_, p_b) => { let (p, b) = &**p_b; self.scoped(p, b) },
            Fst(b) | Snd(b) | Inl(b) | Inr(b) | Pure(b) => self.expr(b), Ann(b_t) => self.expr(&b_t.0),
            App(a_b) => {
                let (a, b) = &**a_b;
                self.expr(a);
                self.expr(b);
            }
            Let(p_a_b) | Bind(p_a_b) => {
                let (p, a_b) = &**p_a_b;
                let (a, b) = a_b;
                self.expr(a);
                self.scoped(p, b);
            }
            LetRec(fs_b) => {
                let (fs, b) = &**fs_b;
                let scope = self.next_scope();
                let mark = self.bound.len();
                for f in fs.iter() {
                    self.bind(&f.name, scope);
                }
                for f in fs.iter() {
                    self.expr(&f.body);
                }
                self.expr(b);
                self.unbind(mark);
            }
            Tuple(es) | Array(es) => es.iter().for_each(|x| self.expr(x)),
            Par(a_b) => {
                let (a, b) = &**a_b;
                self.expr(a);
                self.expr(b);
            }
            Case(c) => {
                let (s, p1, a, p2, b) = &**c;
                self.expr(s);
                self.scoped(p1, a);
                self.scoped(p2, b);
            }
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                self.expr(c);
                self.expr(a);
                self.expr(b);
            }
            Prim(_, args) => args.iter().for_each(|x| self.expr(x)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pass 3: layout.

type D<'a> = DocBuilder<'a, Arena<'a, Span>, Span>;

/// Precedence levels of expressions: an expression of level `l` printed where level `c` is
/// required gets parentheses when `l < c`.
const OPEN: u8 = 0; // let, \, if, case, do: extend as far right as possible
const NEG: u8 = crate::prims::NEG_PREC; // unary minus and negative literals
// (the infix operators take their levels from the table of primitives: 1 `||` up to 7 `**`)
const APP: u8 = crate::prims::MAX_PREC + 1; // f a b, fst e, inl e, pure e, sin x
const ATOM: u8 = APP + 1;

/// The operator of a binary-operator application, with its level and associativity.
fn as_binop(e: &Expr) -> Option<(Prim, u8, Assoc, &Expr, &Expr)> {
    match &e.kind {
        ExprKind::Prim(p, args) if args.len() == 2 => match p.info().syntax {
            Syntax::Infix(l, assoc) => Some((*p, l, assoc, &args[0], &args[1])),
            _ => None,
        },
        _ => None,
    }
}

/// The levels the left and right operands of an operator are printed at: the side an operator
/// associates to may hold the same level without parentheses; comparisons do not associate.
fn operand_ctx(l: u8, assoc: Assoc) -> (u8, u8) {
    match assoc {
        Assoc::Left => (l, l + 1),
        Assoc::Right => (l + 1, l),
        Assoc::None => (l + 1, l + 1),
    }
}

fn is_negative_lit(e: &Expr) -> bool {
    match &e.kind {
        // whether `show_real` starts with `-` (every non-NaN of negative sign, `-0.0` too), without
        // making the text: `level` asks it of every expression printed (test
        // `negative_literals_are_the_ones_shown_with_a_minus`)
        ExprKind::Real(r) => !r.is_nan() && r.is_sign_negative(),
        ExprKind::Int(i) => *i < 0,
        _ => false,
    }
}

fn level(e: &Expr) -> u8 {
    use ExprKind::*;
    match &e.kind {
        _ if is_negative_lit(e) => NEG,
        Var(_) | Real(_) | Int(_) | Bool(_) | Unit | Builtin(_) | Tuple(_) | Array(_) | Ann(..) => ATOM,
        App(..) | Fst(_) | Snd(_) | Inl(_) | Inr(_) | Pure(_) => APP,
        Prim(crate::ir::Prim::Neg, args) if args.len() == 1 => NEG,
        Prim(..) => as_binop(e).map_or(APP, |(_, l, ..)| l),
        Lam(..) | Let(..) | LetRec(..) | If(..) | Case(..) | Bind(..) => OPEN,
        // `e1 ||| e2` binds more loosely than every other infix operator, and does not associate
        Par(..) => 1,
    }
}

/// Whether `e`, printed without parentheses, starts with a `-` (then it needs parentheses as the
/// right operand of an infix operator: `a - (-b)`, never `a - -b`).
fn starts_with_minus(e: &Expr) -> bool {
    if is_negative_lit(e) {
        return true;
    }
    match &e.kind {
        ExprKind::Prim(crate::ir::Prim::Neg, args) if args.len() == 1 => true,
        _ => match as_binop(e) {
            Some((_, l, assoc, lhs, _)) => level(lhs) >= operand_ctx(l, assoc).0 && starts_with_minus(lhs),
            None => false,
        },
    }
}

/// Whether `e`, printed without parentheses, ends with a `case` whose `| inr` arm would swallow
/// text that follows it (so `e` needs parentheses as the `inl` arm of another case).
fn ends_with_case(e: &Expr) -> bool {
    use ExprKind::*;
    match &e.kind {
        Case(..) => true,
        Lam(_, b_x) => ends_with_case(&b_x.1), LetRec(b_x) => ends_with_case(&b_x.1),
        Let(ab_x) => ends_with_case(&ab_x.1 .1), If(ab_x) => ends_with_case(&ab_x.1 .1),
        _ => false,
    }
}

/// Deepest indentation printed, in columns. A program nested n deep would otherwise print O(n²)
/// spaces (10^4 nested lets: 900 MB of text); past this column lines stay at it, so output is linear
/// in the program. Layout decisions see the column the renderer counts, so such lines break
/// eagerly; the renderer's own count stops growing a little past it (`Printer::cap`).
pub const MAX_INDENT: usize = 80;

/// A run of spaces to copy indentation from, a slice at a time.
const BLANK: &str = match str::from_utf8(&[b' '; 1024]) {
    Ok(b) => b,
    Err(_) => "",
};

/// `n` spaces at the end of `out`, copied a slice at a time (a `char` at a time was 2.5 % of
/// printing a long chain's cotangent program).
pub(super) fn push_spaces(out: &mut String, mut n: usize) {
    while n > 0 {
        let k = n.min(BLANK.len());
        out.push_str(&BLANK[..k]);
        n -= k;
    }
}

/// The renderer's sink: caps each line's indentation at `MAX_INDENT` and drops trailing spaces (a
/// break before an empty line leaves some).
struct CappedIndent<'s> {
    /// Chunks of whole lines already laid out (`CHUNK`; not when mapping, whose offsets are in `out`).
    done: Vec<String>,
    /// Where each chunk of whole lines goes once laid out, instead of `done`, when printing streams
    /// (`print_program_streamed`).
    emit: Option<&'s mut dyn FnMut(String)>,
    out: String,
    at_line_start: bool,
    spaces: usize,
    /// Where the annotated expressions (their source spans) were laid out, if asked for.
    map: Option<LineMap>,
    /// Columns of indentation the renderer wrote (what `Printer::cap` bounds per line).
    indented: usize,
    /// Lines until the heap is checked again: a layout's text may be quadratic in its program
    /// (`take_stop`), and the renderer stops at the first write that fails.
    lines_to_check: u32,
}

/// The source spans of the expressions being laid out, recorded line by line.
#[derive(Default)]
struct LineMap {
    line: usize,
    /// Open annotations: span, the line and output offset where each started.
    open: Vec<(Span, usize, usize)>,
    /// Expressions that started and ended on one line: line, output range, span.
    single: Vec<(usize, usize, usize, Span)>,
    /// For each line, the innermost expression open where its text starts.
    first: Vec<Option<Span>>,
}

impl LineMap {
    /// Per line: the outermost one-line expressions, else the one open at its start.
    fn lines(mut self, n: usize) -> Vec<Vec<Span>> {
        let mut out: Vec<Vec<Span>> = vec![vec![]; n];
        self.single.sort_by(|a, b| (a.0, a.1, std::cmp::Reverse(a.2)).cmp(&(b.0, b.1, std::cmp::Reverse(b.2))));
        let mut cur: Option<(usize, usize)> = None; // line and end of the last outermost one
        for (line, from, to, span) in self.single {
            if line >= n {
                continue;
            }
            if matches!(cur, Some((l, end)) if l == line && from < end) {
                continue; // inside the last outermost one
            }
            cur = Some((line, to));
            if !out[line].contains(&span) {
                out[line].push(span);
            }
        }
        for (line, spans) in out.iter_mut().enumerate() {
            if spans.is_empty() {
                if let Some(Some(s)) = self.first.get(line) {
                    spans.push(*s);
                }
            }
        }
        out
    }
}

impl<'s> CappedIndent<'s> {
    fn new(map: bool) -> CappedIndent<'s> {
        CappedIndent { done: vec![], emit: None, out: String::new(), at_line_start: true, spaces: 0, map: map.then(LineMap::default), indented: 0, lines_to_check: LINES_CHECK_EVERY }
    }

    /// A sink (not mapping) that hands each chunk of whole lines to `emit` as soon as it is laid out,
    /// where there is one; what `finish` returns is the rest.
    fn streaming(emit: Option<&'s mut dyn FnMut(String)>) -> CappedIndent<'s> {
        CappedIndent { emit, ..CappedIndent::new(false) }
    }

    /// The text laid out (without trailing spaces) and, if asked for, each line's source spans.
    fn finish(mut self) -> Laid {
        let end = self.out.trim_end_matches(' ').len();
        self.out.truncate(end);
        let lines = match self.map {
            Some(m) => m.lines(self.out.bytes().filter(|&b| b == b'\n').count() + 1),
            None => vec![],
        };
        self.done.push(self.out);
        Laid { chunks: self.done, lines }
    }
}

impl pretty::Render for CappedIndent<'_> {
    type Error = ();

    fn write_str(&mut self, s: &str) -> Result<usize, ()> {
        // The renderer writes indentation in runs of up to a hundred spaces, at most `Printer::cap`
        // + 2 a line: a run is compared at memcmp speed.
        if self.at_line_start && s.len() <= BLANK.len() && s == &BLANK[..s.len()] {
            self.spaces += s.len();
            self.indented += s.len();
            return Ok(s.len());
        }
        // most writes are a token inside a line
        if !self.at_line_start && !s.as_bytes().contains(&b'\n') {
            self.out.push_str(s);
            return Ok(s.len());
        }
        let mut rest = s;
        while !rest.is_empty() {
            if self.at_line_start {
                let n = rest.len() - rest.trim_start_matches(' ').len();
                self.spaces += n;
                self.indented += n;
                rest = &rest[n..];
                match rest.chars().next() {
                    None => break,
                    // a blank line: no indentation written
                    Some('\n') => {
                        self.at_line_start = false;
                        self.spaces = 0;
                    }
                    Some(_) => self.start_line(),
                }
            }
            let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
            let (chunk, tail) = rest.split_at(line_end);
            let line_ends = chunk.ends_with('\n');
            if line_ends {
                self.end_line()?;
            }
            self.out.push_str(chunk);
            // a chunk ends a line before its capacity (a doubling String's is the next power of two
            // above CHUNK / 2, and later chunks are sized CHUNK), so none is grown past it
            if line_ends && self.map.is_none() && self.out.len() >= CHUNK - CHUNK / 16 {
                let next = String::with_capacity(CHUNK);
                let chunk = std::mem::replace(&mut self.out, next);
                match &mut self.emit {
                    Some(emit) => emit(chunk),
                    None => self.done.push(chunk),
                }
            }
            rest = tail;
        }
        Ok(s.len())
    }

    fn fail_doc(&self) -> () {}
}

impl CappedIndent<'_> {
    /// `write_str` of text `s` without line breaks: at a line's start, its leading spaces are the
    /// line's indentation (written, capped, before its first other character).
    fn push_text(&mut self, s: &str) {
        if !self.at_line_start {
            self.out.push_str(s);
            return;
        }
        let n = s.len() - s.trim_start_matches(' ').len();
        self.spaces += n;
        self.indented += n;
        let rest = &s[n..];
        if rest.is_empty() {
            return;
        }
        self.start_line();
        self.out.push_str(rest);
    }

    /// The indentation of a line whose first character comes next.
    fn start_line(&mut self) {
        push_spaces(&mut self.out, self.spaces.min(MAX_INDENT));
        if let Some(m) = &mut self.map {
            let top = m.open.last().map(|o| o.0);
            if m.first.len() <= m.line {
                m.first.resize(m.line + 1, None);
            }
            m.first[m.line] = top;
        }
        self.at_line_start = false;
        self.spaces = 0;
    }

    /// A line ends here (its `\n` is pushed after): the heap checked every `LINES_CHECK_EVERY`
    /// lines (Err where it ran out), the line's trailing spaces dropped, the line map moved on.
    fn end_line(&mut self) -> Result<(), ()> {
        self.lines_to_check -= 1;
        if self.lines_to_check == 0 {
            self.lines_to_check = LINES_CHECK_EVERY;
            if let Some(m) = crate::limits::memory_running_out("printing its output") {
                STOP.with(|s| *s.borrow_mut() = Some(m));
                return Err(());
            }
        }
        self.out.truncate(self.out.trim_end_matches(' ').len());
        self.at_line_start = true;
        if let Some(m) = &mut self.map {
            m.line += 1;
        }
        Ok(())
    }

    /// `write_str("\n")`: the line ends, without its trailing spaces; Err where the heap ran out.
    fn push_break(&mut self) -> Result<(), ()> {
        self.at_line_start = false;
        self.spaces = 0;
        self.end_line()?;
        self.out.push('\n');
        // a chunk ends a line before its capacity (a doubling String's is the next power of two
        // above CHUNK / 2, and later chunks are sized CHUNK), so none is grown past it
        if self.map.is_none() && self.out.len() >= CHUNK - CHUNK / 16 {
            let next = String::with_capacity(CHUNK);
            let chunk = std::mem::replace(&mut self.out, next);
            match &mut self.emit {
                Some(emit) => emit(chunk),
                None => self.done.push(chunk),
            }
        }
        Ok(())
    }

    /// Text laid out apart (`lay::Lay`'s) at the end: each of its lines as `write_str` writes it, a
    /// line break where `breaks` (the offsets of its `\n`s, in order) says, without searching for them.
    fn push_lines(&mut self, s: &str, breaks: &[usize]) {
        let mut from = 0;
        for &b in breaks {
            self.push_text(&s[from..b]);
            // (a heap that ran out has stopped the printing: `take_stop`)
            let _ = self.push_break();
            from = b + 1;
        }
        self.push_text(&s[from..]);
    }
}

impl pretty::RenderAnnotated<'_, Span> for CappedIndent<'_> {
    fn push_annotation(&mut self, span: &Span) -> Result<(), ()> {
        if let Some(m) = &mut self.map {
            m.open.push((*span, m.line, self.out.len()));
        }
        Ok(())
    }

    fn pop_annotation(&mut self) -> Result<(), ()> {
        if let Some(m) = &mut self.map {
            if let Some((span, line, from)) = m.open.pop() {
                // Ended by a line break: its last text was on an earlier line.
                let end = if self.at_line_start && m.line > line { m.line - 1 } else { m.line };
                if end == line {
                    m.single.push((line, from, self.out.len(), span));
                }
            }
        }
        Ok(())
    }
}

struct Printer<'a, 'n> {
    a: &'a Arena<'a, Span>,
    o: PrintOptions,
    names: &'n HashMap<u32, Text>,
    /// Long chains laid out apart, link by link (`stream::def`): the address of each one's first
    /// link and its number, which its marker carries.
    holes: Option<&'n HashMap<usize, usize>>,
    /// The indentation the renderer will give what is being built: the sum of the `nest`s around
    /// it (`open` and `close`; a count that misses one only caps later).
    indent: Cell<usize>,
    /// Where nesting stops growing: past both `MAX_INDENT` (the sink prints no deeper) and the
    /// width (no text fits on a line begun there). Any indentation at least this deep prints and
    /// lays out the same (the layout only asks whether a line's text passes the width), so
    /// leaving out the `nest`s past it changes nothing but the indentation the renderer writes
    /// each line, which would otherwise grow with the program's depth: Θ(depth²) to write and skip.
    cap: usize,
    /// Nodes until the heap is checked again (`out_of_memory`).
    countdown: Cell<u32>,
    /// The heap ran out while this document was built: what is left is not built (each of its
    /// nodes and lists is nil), so that the arena, which grows by doubling, grows no more.
    stopped: Cell<bool>,
    /// The live heap when this printer began (`out_of_memory`).
    began: u64,
}

/// How often a document being built checks the heap: every this many expression nodes.
const MEMORY_CHECK_EVERY: u32 = 4096;
/// How often the text being laid out checks the heap: every this many lines.
const LINES_CHECK_EVERY: u32 = 64;

thread_local! {
    /// The budget stop a document met while being built (`Printer::out_of_memory`), for the
    /// pipeline to take once the printing returns (`take_stop`).
    static STOP: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The budget stop met while the last program was printed, if any (and forgets it). A program
/// whose text is quadratic in its source (pairs-4000's arrays/dual-arrays: `soaGet` paths as long
/// as the nesting, ~135 MB of text in one expression) built its document past the process's last
/// resort (issue 14 item 4); the printer stops building it and the stage stops, located.
pub fn take_stop() -> Option<String> {
    STOP.with(|s| s.borrow_mut().take())
}

/// A `nest` opened around a document being built (`Printer::open`): `None` past the cap.
#[must_use]
struct Nest(Option<(usize, usize)>);

impl<'a, 'n> Printer<'a, 'n> {
    fn new(a: &'a Arena<'a, Span>, o: PrintOptions, names: &'n HashMap<u32, Text>, holes: Option<&'n HashMap<usize, usize>>) -> Self {
        Printer { a, o, names, holes, indent: Cell::new(0), cap: MAX_INDENT.max(o.width.saturating_add(1)), countdown: Cell::new(MEMORY_CHECK_EVERY), stopped: Cell::new(false), began: crate::limits::live_now() }
    }

    /// Opens `k` more columns of indentation for the document built until `close`.
    fn open(&self, k: usize) -> Nest {
        let at = self.indent.get();
        if at >= self.cap {
            return Nest(None);
        }
        self.indent.set(at + k);
        Nest(Some((at, k)))
    }

    /// `d.nest(k)` for the `open` that `n` came from, unless past the cap.
    fn close(&self, n: Nest, d: D<'a>) -> D<'a> {
        match n.0 {
            Some((at, k)) => {
                self.indent.set(at);
                d.nest(k as isize)
            }
            None => d,
        }
    }

    /// `build()` nested `k`: an `open` and `close` around it (for builds outside the recursion).
    fn nested(&self, k: usize, build: impl FnOnce() -> D<'a>) -> D<'a> {
        let n = self.open(k);
        let d = build();
        self.close(n, d)
    }
    fn render(&self, d: D<'a>, width: usize) -> String {
        self.render_mapped(d, width, false).text()
    }

    /// Lays `d` out; with `map`, also the source spans of each of its lines.
    fn render_mapped(&self, d: D<'a>, width: usize, map: bool) -> Laid {
        let mut out = CappedIndent::new(map);
        self.render_into(d, width, &mut out);
        out.finish()
    }

    /// Lays `d` out at the end of what `out` holds (as if from column 0).
    fn render_into(&self, d: D<'a>, width: usize, out: &mut CappedIndent<'_>) {
        // Writing to a String cannot fail.
        let _ = d.into_doc().render_raw(width, out);
    }

    /// `d` annotated with the span of the expression it prints, where it has one.
    fn located(&self, e: &Expr, d: D<'a>) -> D<'a> {
        if e.span.is_none() {
            d
        } else {
            d.annotate(e.span)
        }
    }

    fn t(&self, s: &'static str) -> D<'a> {
        self.a.text(s)
    }

    fn sym(&self, ascii: &'static str, unicode: &'static str) -> D<'a> {
        self.a.text(if self.o.unicode { unicode } else { ascii })
    }

    fn arrow(&self) -> D<'a> {
        self.sym("->", "→")
    }

    fn name(&self, n: &Name) -> D<'a> {
        let text: &str = if n.is_global() { &n.text } else { self.names.get(&n.id).unwrap_or(&n.text) };
        // `to_owned`, not `to_string`: a `Text` would go through `Display` and the formatter
        self.a.text(text.to_owned())
    }

    fn parens(&self, d: D<'a>) -> D<'a> {
        self.t("(").append(d).append(self.t(")"))
    }

    // ----- patterns -----

    fn pat(&self, p: &Pat) -> D<'a> {
        match p {
            Pat::Var(n, _) => self.name(n),
            Pat::Wild(_) => self.t("_"),
            Pat::Unit(_) => self.t("()"),
            Pat::Tuple(ps, _) => {
                let a = self.a;
                self.parens(a.intersperse(ps.iter().map(|p| self.pat(p)), self.t(", ")))
            }
        }
    }

    // ----- types -----

    /// Levels: 0 arrows (right-associative), 1 sums (operands parenthesised unless atoms or
    /// constructor applications), 2 constructor applications, 3 atoms.
    fn ty(&self, t: &Type, ctx: u8) -> D<'a> {
        let a = self.a;
        let (lvl, d) = match t {
            Type::Real => (3, self.t("R")),
            Type::Int => (3, self.t("Z")),
            Type::Bool => (3, self.t("Bool")),
            Type::Unit => (3, self.t("()")),
            Type::Unknown => (3, self.t("?")),
            Type::Var(n) => {
                let s = if *n < 26 { ((b'a' + *n as u8) as char).to_string() } else { format!("t{n}") };
                (3, a.text(s))
            }
            Type::Tuple(ts) if ts.len() == 1 => return self.ty(&ts[0], ctx),
            Type::Tuple(ts) => (3, self.tuple(ts.iter().map(|t| self.ty(t, 0)))),
            Type::Sum(xy) => (1, self.ty(&xy.0, 2).append(self.t(" +")).append(a.line()).append(self.ty(&xy.1, 2)).group()),
            Type::Fun(..) | Type::Lin(..) => {
                // A whole arrow chain is one group: on one line, or one argument per line.
                let mut parts = vec![];
                let mut cur = t;
                loop {
                    let (x, y, arr) = match cur {
                        Type::Fun(xy) => (&xy.0, &xy.1, self.arrow()),
                        Type::Lin(xy) => (&xy.0, &xy.1, self.sym("-o", "⊸")),
                        _ => break,
                    };
                    parts.push(self.ty(x, 1).append(a.space()).append(arr).append(a.line()));
                    cur = y;
                }
                (0, a.concat(parts).append(self.ty(cur, 0)).group())
            }
            Type::Con(c) if c.args.is_empty() => (3, a.text(c.name.to_string())),
            Type::Con(c) => {
                let n = self.open(2);
                let args = self.close(n, a.concat(c.args.iter().map(|t| a.line().append(self.ty(t, 3)))));
                (2, a.text(c.name.to_string()).append(args).group())
            }
        };
        if lvl < ctx {
            self.parens(d)
        } else {
            d
        }
    }

    /// `(a, b, c)`, breaking one component per line when it does not fit.
    fn tuple(&self, items: impl Iterator<Item = D<'a>>) -> D<'a> {
        let a = self.a;
        if self.stopped.get() {
            return a.nil();
        }
        let n = self.open(2);
        let body = self.close(n, a.line_().append(a.intersperse(items, self.t(",").append(a.line()))));
        self.t("(").append(body).append(a.line_()).append(self.t(")")).group()
    }

    fn array(&self, items: impl Iterator<Item = D<'a>>) -> D<'a> {
        let a = self.a;
        if self.stopped.get() {
            return a.nil();
        }
        let n = self.open(2);
        let body = self.close(n, a.line_().append(a.intersperse(items, self.t(",").append(a.line()))));
        self.t("[").append(body).append(a.line_()).append(self.t("]")).group()
    }

    // ----- expressions -----

    fn expr(&self, e: &Expr, ctx: u8) -> D<'a> {
        if self.out_of_memory() {
            return self.a.nil();
        }
        let d = self.expr_inner(e);
        let d = if level(e) < ctx { self.parens(d) } else { d };
        self.located(e, d)
    }

    /// Whether the heap ran out while this document was being built (checked every
    /// `MEMORY_CHECK_EVERY` nodes): from then on each node is left out, and `take_stop` says why.
    fn out_of_memory(&self) -> bool {
        if self.stopped.get() {
            return true;
        }
        let k = self.countdown.get();
        if k > 0 {
            self.countdown.set(k - 1);
            return false;
        }
        self.countdown.set(MEMORY_CHECK_EVERY);
        if let Some(m) = crate::limits::memory_running_out_doubling("printing its output", self.began) {
            STOP.with(|s| *s.borrow_mut() = Some(m));
            self.stopped.set(true);
        }
        self.stopped.get()
    }

    /// The right operand of an infix operator: also parenthesised when it would start with `-`.
    fn operand(&self, e: &Expr, ctx: u8) -> D<'a> {
        if level(e) >= ctx && starts_with_minus(e) {
            self.located(e, self.parens(self.expr_inner(e)))
        } else {
            self.expr(e, ctx)
        }
    }

    /// `head arg1 arg2 ...`, arguments on indented lines when it does not fit.
    fn apply(&self, head: D<'a>, args: impl Iterator<Item = D<'a>>) -> D<'a> {
        let a = self.a;
        if self.stopped.get() {
            return a.nil();
        }
        let n = self.open(2);
        let args = self.close(n, a.concat(args.map(|x| a.line().append(x))));
        head.append(args).group()
    }

    fn expr_inner(&self, e: &Expr) -> D<'a> {
        use ExprKind::*;
        let a = self.a;
        match &e.kind {
            Var(n) => self.name(n),
            Real(r) => a.text(show_real(*r)),
            Int(i) => a.text(i.to_string()),
            Bool(b) => self.t(if *b { "true" } else { "false" }),
            Unit => self.t("()"),
            Builtin(b) => a.text(b.to_string()),
            Tuple(es) => self.tuple(es.iter().map(|x| self.expr(x, 0))),
            Array(es) => self.array(es.iter().map(|x| self.expr(x, 0))),
            Par(x_y) => { let (x, y) = &**x_y; self.expr(x, 2).append(a.line()).append(self.t("||| ")).append(self.operand(y, 2)).group() },
            Fst(x) => self.apply(self.t("fst"), std::iter::once(x).map(|x| self.expr(x, ATOM))),
            Snd(x) => self.apply(self.t("snd"), std::iter::once(x).map(|x| self.expr(x, ATOM))),
            Inl(x) => self.apply(self.t("inl"), std::iter::once(x).map(|x| self.expr(x, ATOM))),
            Inr(x) => self.apply(self.t("inr"), std::iter::once(x).map(|x| self.expr(x, ATOM))),
            Pure(x) => self.apply(self.t("pure"), std::iter::once(x).map(|x| self.expr(x, ATOM))),
            Ann(x_t) => {
                let (x, t) = &**x_t;
                let n = self.open(1);
                let inner = self.expr(x, 0).append(self.t(" :")).append(a.line()).append(self.ty(t, 0));
                self.parens(self.close(n, inner).group())
            }
            App(..) => {
                let mut args = vec![];
                let mut f = e;
                while let App(g_x) = &f.kind {
                    let (g, x) = &**g_x;
                    args.push(x);
                    f = g;
                }
                self.apply(self.expr(f, ATOM), args.into_iter().rev().map(|x| self.expr(x, ATOM)))
            }
            Prim(crate::ir::Prim::Neg, args) if args.len() == 1 => self.t("-").append(self.expr(&args[0], APP)),
            Prim(..) if as_binop(e).is_some() => self.binop(e),
            Prim(p, args) => self.apply(a.text(p.symbol()), args.iter().map(|x| self.expr(x, ATOM))),
            Lam(..) => self.lambda(e),
            Let(..) | LetRec(..) => self.let_chain(e),
            ExprKind::If(c_x_y) => {
                let (c, x_y) = &**c_x_y;
                let (x, y) = x_y;
                let else_part = if matches!(y.kind, If(..)) {
                    a.space().append(self.expr(y, 0))
                } else {
                    let n = self.open(2);
                    self.close(n, a.line().append(self.expr(y, 0)))
                };
                let n = self.open(2);
                let then_part = self.close(n, a.line().append(self.expr(x, 0)));
                self.t("if ")
                    .append(self.expr(c, 0))
                    .append(self.t(" then"))
                    .append(then_part)
                    .append(a.line())
                    .append(self.t("else"))
                    .append(else_part)
                    .group()
            }
            Case(c) => {
                let (s, p1, x, p2, y) = &**c;
                let arms = self.open(2);
                let n = self.open(2);
                let x_doc = if ends_with_case(x) { self.located(x, self.parens(self.expr_inner(x))) } else { self.expr(x, 0) };
                let x_doc = self.close(n, a.line().append(x_doc));
                let arm1 = self.t("inl ").append(self.pat(p1)).append(a.space()).append(self.arrow()).append(x_doc).group();
                let n = self.open(2);
                let y_doc = self.close(n, a.line().append(self.expr(y, 0)));
                let arm2 = self.t("| inr ").append(self.pat(p2)).append(a.space()).append(self.arrow()).append(y_doc).group();
                let arms = self.close(arms, a.line().append(arm1).append(a.line()).append(arm2));
                self.t("case ").append(self.expr(s, 0)).append(self.t(" of")).append(arms).group()
            }
            Bind(..) => self.do_block(e),
        }
    }

    /// A chain of one infix operator level: `a + b - c` (left-nested), `a ** b ** c`
    /// (right-nested), breaking before the operators.
    fn binop(&self, e: &Expr) -> D<'a> {
        let a = self.a;
        // The operands in order, each with the operator before it (None for the first).
        let items = flat::operands(e).expect("a binary operator's chain");
        let mut it = items.into_iter();
        let (_, first, ctx) = it.next().expect("an operand");
        let first = self.expr(first, ctx);
        let n = self.open(2);
        let rest = a.concat(it.map(|(op, r, ctx)| {
            let sym = op.map_or("?", |p| p.symbol());
            a.line().append(a.text(sym)).append(a.space()).append(self.operand(r, ctx))
        }));
        first.append(self.close(n, rest)).group()
    }

    /// Plain lambdas group: `\x y -> e`; a linear lambda takes one parameter: `lin\x -> e`.
    fn lambda(&self, e: &Expr) -> D<'a> {
        let a = self.a;
        let (head, body) = match &e.kind {
            ExprKind::Lam(LamKind::Linear, p_b) => (self.sym("lin\\", "linλ").append(self.pat(&p_b.0)), &p_b.1),
            _ => {
                let (ps, body) = peel(e);
                (self.sym("\\", "λ").append(a.intersperse(ps.into_iter().map(|p| self.pat(p)), a.space())), body)
            }
        };
        let n = self.open(2);
        let body = self.close(n, a.line().append(self.expr(body, 0)));
        head.append(a.space()).append(self.arrow()).append(body).group()
    }

    /// `name p1 p2 = body` (the body's plain lambdas become parameters).
    fn equation(&self, name: &Name, body: &Expr) -> D<'a> {
        let a = self.a;
        let (ps, body) = peel(body);
        let params = a.concat(ps.into_iter().map(|p| a.space().append(self.pat(p))));
        let n = self.open(2);
        let body = self.close(n, a.line().append(self.expr(body, 0)));
        self.name(name).append(params).append(self.t(" =")).append(body).group()
    }

    /// Consecutive lets (and let-rec groups) as one group: on one line if it fits, else one
    /// binding per line, each ending in `in`, all at the same indentation.
    fn let_chain(&self, e: &Expr) -> D<'a> {
        let a = self.a;
        let (links, tail) = let_links(e);
        if let Some(k) = self.hole(e) {
            // links 2..n at the marker (`stream::hole`); the first stays, as what precedes the
            // chain may look at its first line
            let rest = a.line().append(self.marker(k)).append(a.line());
            return self.let_link(links[0]).append(self.t(" in")).append(rest).append(self.expr(tail, 0)).group();
        }
        let parts = links.into_iter().map(|l| self.let_link(l).append(self.t(" in")).append(a.line()));
        a.concat(parts).append(self.expr(tail, 0)).group()
    }

    /// The number of the long chain whose first link is `e`, when it is laid out apart.
    fn hole(&self, e: &Expr) -> Option<usize> {
        self.holes.and_then(|h| h.get(&(e as *const Expr as usize)).copied())
    }

    /// Where hole `k`'s links go: a line of its own, too wide for any line (so every group around it
    /// breaks, as around the chain it stands for), carrying `k` and the indentation of its links.
    fn marker(&self, k: usize) -> D<'a> {
        let (a, width) = (self.a, self.o.width);
        a.nesting(move |n| a.text(stream::marker(k, n, width)).into_doc())
    }

    /// One link of a let chain, without its `in`: `let p = x`, or a let-rec group.
    fn let_link(&self, link: &Expr) -> D<'a> {
        let a = self.a;
        match &link.kind {
            ExprKind::Let(p_x_pair) => {
                let (p, x_pair) = &**p_x_pair;
                let (x, _) = x_pair;
                let n = self.open(2);
                let x = self.close(n, a.line().append(self.expr(x, 0)));
                self.t("let ").append(self.pat(p)).append(self.t(" =")).append(x).group()
            }
            ExprKind::LetRec(fs_x) => {
                let (fs, _) = &**fs_x;
                let mut d = a.nil();
                for (i, f) in fs.iter().enumerate() {
                    if i > 0 {
                        d = d.append(a.line());
                    }
                    d = d.append(self.t(if i == 0 { "let " } else { "and " })).append(self.fundef(f));
                }
                d
            }
            _ => a.nil(),
        }
    }

    fn fundef(&self, f: &FunDef) -> D<'a> {
        self.equation(&f.name, &f.body)
    }

    /// `do { p <- m; ...; e }`, one statement per line inside the braces when it does not fit.
    fn do_block(&self, e: &Expr) -> D<'a> {
        let a = self.a;
        let (links, tail) = bind_links(e);
        if let Some(k) = self.hole(e) {
            // every statement at the marker (`stream::hole`)
            let n = self.open(2);
            let body = self.close(n, a.line().append(self.marker(k)).append(a.line()).append(self.expr(tail, 0)));
            return self.t("do {").append(body).append(a.line()).append(self.t("}")).group();
        }
        let n = self.open(2);
        let stmts = links.into_iter().map(|l| self.bind_stmt(l)).chain(std::iter::once(tail).map(|t| self.expr(t, 0)));
        let body = self.close(n, a.line().append(a.intersperse(stmts, self.t(";").append(a.line()))));
        self.t("do {").append(body).append(a.line()).append(self.t("}")).group()
    }

    /// One statement `p ← m` of a do block (a `Bind`).
    fn bind_stmt(&self, link: &Expr) -> D<'a> {
        let a = self.a;
        let ExprKind::Bind(p_m_pair) = &link.kind else { return a.nil() };
        let (p, m_pair) = &**p_m_pair;
        let (m, _) = m_pair;
        let n = self.open(2);
        let m = self.close(n, a.line().append(self.expr(m, 0)));
        self.pat(p).append(a.space()).append(self.sym("<-", "←")).append(m).group()
    }

    fn def(&self, d: &Def) -> D<'a> {
        self.t("def ").append(self.equation(&d.name, &d.body))
    }

    fn keyword_item(&self, kw: &'static str, e: &Expr) -> D<'a> {
        let a = self.a;
        let n = self.open(2);
        let e = self.close(n, a.line().append(self.expr(e, 0)));
        self.t(kw).append(e).group()
    }

    fn expect(&self, x: &Expect) -> D<'a> {
        let kw = match x.what {
            ExpectKind::Grad => "expect grad",
            ExpectKind::Primal => "expect primal",
        };
        self.keyword_item(kw, &x.value)
    }
}

/// The links of a let chain (`Let`s and non-empty `LetRec`s), and the expression after them.
fn let_links(mut e: &Expr) -> (Vec<&Expr>, &Expr) {
    let mut links = vec![];
    loop {
        let next = match &e.kind {
            ExprKind::Let(b_pair_x) => {
                let (_, b_pair) = &**b_pair_x;
                let (_, b) = b_pair;
                b
            }
            ExprKind::LetRec(fs_b) if !fs_b.0.is_empty() => &fs_b.1,
            _ => return (links, e),
        };
        links.push(e);
        e = next;
    }
}

/// The statements of a do block (its `Bind`s), and the expression after them.
fn bind_links(mut e: &Expr) -> (Vec<&Expr>, &Expr) {
    let mut links = vec![];
    while let ExprKind::Bind(k_pair_x) = &e.kind {
        let (_, k_pair) = &**k_pair_x;
        let (_, k) = k_pair;
        links.push(e);
        e = k;
    }
    (links, e)
}

/// The parameters of nested plain lambdas, and the body under them.
fn peel(mut e: &Expr) -> (Vec<&Pat>, &Expr) {
    let mut ps = vec![];
    while let ExprKind::Lam(LamKind::Plain, p_b) = &e.kind {
        let (p, b) = &**p_b;
        ps.push(p);
        e = b;
    }
    (ps, e)
}

mod flat;
mod later;
mod lay;
mod stream;
#[cfg(test)]
mod tests;

pub use later::Later;
