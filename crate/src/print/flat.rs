//! A link of a long chain that fits on its line, written straight into the text (issue 14 item 4:
//! building and rendering each link's `pretty` document was most of printing a 10^5-line program).
//!
//! A link laid out apart (`stream::def`, `stream::hole`) is the document `nest(n, hardline · link ·
//! end)`, `end` being ` in` or `;`, rendered on its own. Every `line` of `Printer`'s documents is
//! inside a group, and a group is laid out flat when its text up to the end of the line fits
//! (`pretty`'s `fitting`: `pos` plus the text's width, the width of a text being its bytes when ASCII,
//! else its Unicode display width). So when the whole link, flat, fits after the indentation, every
//! group of it is flat and its text is `Flat`'s: each `line` a space, each `line_` nothing, the
//! same texts in the same order (test `flat_links_print_as_their_documents`). A link that does not
//! fit, or holds a text whose width `Flat` does not know, is left to the document.

use super::{as_binop, bind_links, ends_with_case, level, let_links, operand_ctx, peel, starts_with_minus, CappedIndent, PrintOptions, APP, ATOM};
use crate::ir::{Expr, ExprKind, LamKind, Name, Pat, Prim, Text, Type};
use crate::prims::Assoc;
use crate::value::show_real;
use pretty::Render;
use rustc_hash::FxHashMap as HashMap;

/// Nesting past which `Flat` leaves the link to the document: its recursion stays shallow on any
/// program (a line that fits is at most `width` columns, and a level writes a column or more
/// within a few levels, but a huge width lets a deep expression fit).
const MAX_DEPTH: usize = 256;

/// A link's flat text, built in a buffer kept from link to link.
pub(super) struct Flat<'n> {
    o: PrintOptions,
    names: &'n HashMap<u32, Text>,
    out: String,
    /// Columns written (what `fitting` counts), and the most that fit.
    cols: usize,
    budget: usize,
    depth: usize,
    /// Set when a text of unknown width or too deep a nesting stopped the writer (then whether it
    /// fits is not known, where otherwise a stop means it does not).
    pub(super) unknown: bool,
    /// `real`'s cache: a real's bits and its text, by a hash of the bits.
    reals: Vec<Option<(u64, String)>>,
    /// `Lay`'s buffers, kept from link to link (`Lay::new`, its `drop`).
    pub(super) spare: (String, Vec<usize>),
    /// Groups measured (`measure`), which a test counts.
    pub(super) measured: usize,
}

/// The width of one of the syntax's symbols (ASCII, or with `λ → ← ⊸`, one column each): its
/// characters, counted as the bytes that start one.
pub(super) fn symbol_width(s: &str) -> usize {
    s.bytes().filter(|b| b & 0xC0 != 0x80).count()
}

/// `Flat::real`'s cache holds 2^this texts.
const REALS_BITS: u32 = 6;

/// The display width of `s` as `pretty` counts it, for ASCII and the syntax's own symbols (each
/// one column wide); None for other text (left to the document).
pub(super) fn width(s: &str) -> Option<usize> {
    if s.is_ascii() {
        return Some(s.len());
    }
    s.chars().map(|c| (c.is_ascii() || matches!(c, 'λ' | '→' | '←' | '⊸')).then_some(1)).sum()
}

impl<'n> Flat<'n> {
    pub(super) fn new(o: &PrintOptions, names: &'n HashMap<u32, Text>) -> Self {
        Flat { o: *o, names, out: String::new(), cols: 0, budget: 0, depth: 0, unknown: false, reals: vec![None; 1 << REALS_BITS], spare: (String::new(), vec![]), measured: 0 }
    }

    /// Writes link `l` (a `let`, a one-function `let rec`, or with `bind` a statement `p ← m`) and
    /// `end` at indentation `n` into `out` as its document `nest(n, hardline · link · end)` lays it
    /// out, if it fits on its line; false (and `out` untouched) if not, `unknown` set where whether
    /// it fits is not known.
    pub(super) fn link(&mut self, l: &Expr, bind: bool, end: &str, n: usize, out: &mut CappedIndent<'_>) -> bool {
        self.unknown = false;
        let Some(budget) = self.o.width.checked_sub(n + end.len()) else { return false };
        self.out.clear();
        self.cols = 0;
        self.budget = budget;
        self.depth = 0;
        let fits = if bind { self.bind_stmt(l) } else { self.let_link(l) };
        if fits.is_none() {
            return false;
        }
        self.out.push_str(end);
        // as the renderer writes a hardline: the break, then the indentation in runs (straight to
        // the sink's steps, `write_str` searching each write for line breaks there are none of)
        const RUN: &str = "                                                                ";
        let _ = out.push_break();
        let mut left = n;
        while left > 0 {
            let k = left.min(RUN.len());
            out.push_text(&RUN[..k]);
            left -= k;
        }
        if self.out.as_bytes().contains(&b'\n') {
            let _ = out.write_str(&self.out);
        } else {
            out.push_text(&self.out);
        }
        true
    }

    pub(super) fn options(&self) -> PrintOptions {
        self.o
    }

    pub(super) fn names(&self) -> &'n HashMap<u32, Text> {
        self.names
    }

    /// The flat text `write` makes, if it is at most `budget` columns wide (in `self.out`).
    pub(super) fn measure(&mut self, budget: usize, write: impl FnOnce(&mut Self) -> Option<()>) -> Option<(&str, usize)> {
        self.measured += 1;
        self.out.clear();
        self.cols = 0;
        self.budget = budget;
        self.depth = 0;
        self.unknown = false;
        write(self)?;
        Some((&self.out, self.cols))
    }

    pub(super) fn text(&mut self, s: &str) -> Option<()> {
        if s.is_ascii() {
            return self.put(s, s.len());
        }
        let Some(w) = width(s) else {
            self.unknown = true;
            return None;
        };
        self.put(s, w)
    }

    /// `text` of the syntax's own ASCII text (a keyword, a bracket): its width is its length, not
    /// looked for (a text's width, looked for token by token, was a tenth of printing a long chain).
    #[inline(always)]
    pub(super) fn lit(&mut self, s: &'static str) -> Option<()> {
        debug_assert!(s.is_ascii());
        self.put(s, s.len())
    }

    /// `s`, `w` columns wide, where it fits.
    #[inline(always)]
    fn put(&mut self, s: &str, w: usize) -> Option<()> {
        self.cols += w;
        if self.cols > self.budget {
            return None;
        }
        self.out.push_str(s);
        Some(())
    }

    /// The syntax's symbols: ASCII, or `λ → ← ⊸` (one column each).
    pub(super) fn sym(&mut self, ascii: &'static str, unicode: &'static str) -> Option<()> {
        let s = if self.o.unicode { unicode } else { ascii };
        self.put(s, symbol_width(s))
    }

    /// Real literal `r` as `show_real` prints it, from a small cache of the texts last made (a
    /// program's literals repeat, and each was formatted anew, a twelfth of printing a dualrev
    /// stage's output).
    fn real(&mut self, r: f64) -> Option<()> {
        let bits = r.to_bits();
        let k = (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - REALS_BITS)) as usize;
        let text = match self.reals[k].take() {
            Some((b, t)) if b == bits => t,
            _ => show_real(r),
        };
        let fits = self.text(&text);
        self.reals[k] = Some((bits, text));
        fits
    }

    pub(super) fn name(&mut self, n: &Name) -> Option<()> {
        let names = self.names;
        let text: &str = if n.is_global() { &n.text } else { names.get(&n.id).unwrap_or(&n.text) };
        self.text(text)
    }

    fn deeper(&mut self) -> Option<()> {
        self.depth += 1;
        self.unknown |= self.depth > MAX_DEPTH;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    // ----- links (Printer::let_link, bind_stmt, equation) -----

    pub(super) fn let_link(&mut self, l: &Expr) -> Option<()> {
        match &l.kind {
            ExprKind::Let(p_x) => {
                let (p, (x, _)) = &**p_x;
                self.lit("let ")?;
                self.pat(p)?;
                self.lit(" = ")?;
                self.expr(x, 0)
            }
            // one function: `let ` and its equation's group; a group's `and` breaks outside any group
            ExprKind::LetRec(fs_x) if fs_x.0.len() == 1 => {
                self.lit("let ")?;
                self.equation(&fs_x.0[0].name, &fs_x.0[0].body)
            }
            _ => None,
        }
    }

    pub(super) fn bind_stmt(&mut self, l: &Expr) -> Option<()> {
        let ExprKind::Bind(p_m) = &l.kind else { return None };
        let (p, (m, _)) = &**p_m;
        self.pat(p)?;
        self.lit(" ")?;
        self.sym("<-", "←")?;
        self.lit(" ")?;
        self.expr(m, 0)
    }

    pub(super) fn equation(&mut self, name: &Name, body: &Expr) -> Option<()> {
        let (ps, body) = peel(body);
        self.name(name)?;
        for p in ps {
            self.lit(" ")?;
            self.pat(p)?;
        }
        self.lit(" = ")?;
        self.expr(body, 0)
    }

    // ----- patterns and types (Printer::pat, ty) -----

    pub(super) fn pat(&mut self, p: &Pat) -> Option<()> {
        match p {
            Pat::Var(n, _) => self.name(n),
            Pat::Wild(_) => self.lit("_"),
            Pat::Unit(_) => self.lit("()"),
            Pat::Tuple(ps, _) => {
                self.deeper()?;
                self.lit("(")?;
                for (i, q) in ps.iter().enumerate() {
                    if i > 0 {
                        self.lit(", ")?;
                    }
                    self.pat(q)?;
                }
                self.depth -= 1;
                self.lit(")")
            }
        }
    }

    pub(super) fn ty(&mut self, t: &Type, ctx: u8) -> Option<()> {
        self.deeper()?;
        let lvl = match t {
            Type::Tuple(ts) if ts.len() == 1 => {
                self.ty(&ts[0], ctx)?;
                self.depth -= 1;
                return Some(());
            }
            Type::Sum(..) => 1,
            Type::Fun(..) | Type::Lin(..) => 0,
            Type::Con(c) if !c.args.is_empty() => 2,
            _ => 3,
        };
        let parens = lvl < ctx;
        if parens {
            self.lit("(")?;
        }
        match t {
            Type::Real => self.lit("R")?,
            Type::Int => self.lit("Z")?,
            Type::Bool => self.lit("Bool")?,
            Type::Unit => self.lit("()")?,
            Type::Unknown => self.lit("?")?,
            Type::Var(n) if *n < 26 => self.text(char::from(b'a' + *n as u8).encode_utf8(&mut [0; 4]))?,
            Type::Var(n) => self.text(&format!("t{n}"))?,
            Type::Tuple(ts) => {
                self.lit("(")?;
                for (i, x) in ts.iter().enumerate() {
                    if i > 0 {
                        self.lit(", ")?;
                    }
                    self.ty(x, 0)?;
                }
                self.lit(")")?;
            }
            Type::Sum(xy) => {
                self.ty(&xy.0, 2)?;
                self.lit(" + ")?;
                self.ty(&xy.1, 2)?;
            }
            Type::Fun(..) | Type::Lin(..) => {
                let mut cur = t;
                loop {
                    let (x, y, ascii, unicode) = match cur {
                        Type::Fun(xy) => (&xy.0, &xy.1, "->", "→"),
                        Type::Lin(xy) => (&xy.0, &xy.1, "-o", "⊸"),
                        _ => break,
                    };
                    self.ty(x, 1)?;
                    self.lit(" ")?;
                    self.sym(ascii, unicode)?;
                    self.lit(" ")?;
                    cur = y;
                }
                self.ty(cur, 0)?;
            }
            Type::Con(c) => {
                self.text(&c.name)?;
                for x in c.args.iter() {
                    self.lit(" ")?;
                    self.ty(x, 3)?;
                }
            }
        }
        if parens {
            self.lit(")")?;
        }
        self.depth -= 1;
        Some(())
    }

    // ----- expressions (Printer::expr and what it calls, every group flat) -----

    pub(super) fn expr(&mut self, e: &Expr, ctx: u8) -> Option<()> {
        self.deeper()?;
        let parens = level(e) < ctx;
        if parens {
            self.lit("(")?;
        }
        self.inner(e)?;
        if parens {
            self.lit(")")?;
        }
        self.depth -= 1;
        Some(())
    }

    pub(super) fn parens_inner(&mut self, e: &Expr) -> Option<()> {
        self.deeper()?;
        self.lit("(")?;
        self.inner(e)?;
        self.depth -= 1;
        self.lit(")")
    }

    pub(super) fn operand(&mut self, e: &Expr, ctx: u8) -> Option<()> {
        if level(e) >= ctx && starts_with_minus(e) {
            self.parens_inner(e)
        } else {
            self.expr(e, ctx)
        }
    }

    /// `head a1 a2 …` of `Printer::apply`, the head written.
    fn args<'e>(&mut self, args: impl Iterator<Item = &'e Expr>) -> Option<()> {
        for x in args {
            self.lit(" ")?;
            self.expr(x, ATOM)?;
        }
        Some(())
    }

    /// `open` items separated by `, `, then `close` (`Printer::tuple`, `array`).
    fn items(&mut self, open: &str, es: &[Expr], close: &str) -> Option<()> {
        self.text(open)?;
        for (i, x) in es.iter().enumerate() {
            if i > 0 {
                self.lit(", ")?;
            }
            self.expr(x, 0)?;
        }
        self.text(close)
    }

    pub(super) fn inner(&mut self, e: &Expr) -> Option<()> {
        use ExprKind::*;
        match &e.kind {
            Var(n) => self.name(n),
            Real(r) => self.real(*r),
            Int(i) => self.text(&i.to_string()),
            Bool(b) => self.text(if *b { "true" } else { "false" }),
            Unit => self.lit("()"),
            Builtin(b) => self.text(b),
            Tuple(es) => self.items("(", es, ")"),
            Array(es) => self.items("[", es, "]"),
            Par(x_y) => {
                self.expr(&x_y.0, 2)?;
                self.lit(" ||| ")?;
                self.operand(&x_y.1, 2)
            }
            Fst(x) => self.keyword("fst", x),
            Snd(x) => self.keyword("snd", x),
            Inl(x) => self.keyword("inl", x),
            Inr(x) => self.keyword("inr", x),
            Pure(x) => self.keyword("pure", x),
            Ann(x_t) => {
                self.lit("(")?;
                self.expr(&x_t.0, 0)?;
                self.lit(" : ")?;
                self.ty(&x_t.1, 0)?;
                self.lit(")")
            }
            App(..) => {
                // the arguments last first, the last few in an array (a `Vec` was an allocation an
                // application measured), any before them in `more`
                let mut few = [e; 8];
                let mut more = vec![];
                let mut n = 0;
                let mut f = e;
                while let App(g_x) = &f.kind {
                    match few.get_mut(n) {
                        Some(slot) => *slot = &g_x.1,
                        None => more.push(&g_x.1),
                    }
                    n += 1;
                    f = &g_x.0;
                }
                self.expr(f, ATOM)?;
                let last = few.get(..n).unwrap_or(&few);
                self.args(more.into_iter().rev().chain(last.iter().copied().rev()))
            }
            Prim(crate::ir::Prim::Neg, args) if args.len() == 1 => {
                self.lit("-")?;
                self.expr(&args[0], APP)
            }
            Prim(..) if as_binop(e).is_some() => self.binop(e),
            Prim(p, args) => {
                self.text(p.symbol())?;
                self.args(args.iter())
            }
            Lam(..) => self.lambda(e),
            Let(..) | LetRec(..) => self.let_chain(e),
            ExprKind::If(c_x_y) => {
                let (c, (x, y)) = &**c_x_y;
                self.lit("if ")?;
                self.expr(c, 0)?;
                self.lit(" then ")?;
                self.expr(x, 0)?;
                self.lit(" else ")?;
                self.expr(y, 0)
            }
            Case(c) => {
                let (s, p1, x, p2, y) = &**c;
                self.lit("case ")?;
                self.expr(s, 0)?;
                self.lit(" of inl ")?;
                self.pat(p1)?;
                self.lit(" ")?;
                self.sym("->", "→")?;
                self.lit(" ")?;
                if ends_with_case(x) {
                    self.parens_inner(x)?;
                } else {
                    self.expr(x, 0)?;
                }
                self.lit(" | inr ")?;
                self.pat(p2)?;
                self.lit(" ")?;
                self.sym("->", "→")?;
                self.lit(" ")?;
                self.expr(y, 0)
            }
            Bind(..) => {
                let (links, tail) = bind_links(e);
                self.lit("do { ")?;
                for l in links {
                    self.bind_stmt(l)?;
                    self.lit("; ")?;
                }
                self.expr(tail, 0)?;
                self.lit(" }")
            }
        }
    }

    fn keyword(&mut self, kw: &str, x: &Expr) -> Option<()> {
        self.text(kw)?;
        self.lit(" ")?;
        self.expr(x, ATOM)
    }

    /// `Printer::binop`: the operands of one level in order, the operator before each but the first.
    fn binop(&mut self, e: &Expr) -> Option<()> {
        // one operator between operands of other levels (most), without `operands`' `Vec`
        let (op, l, assoc, lhs, rhs) = as_binop(e)?;
        let chained = |x: &Expr| as_binop(x).is_some_and(|b| b.1 == l);
        if !chained(lhs) && !chained(rhs) {
            let (lctx, rctx) = operand_ctx(l, assoc);
            self.expr(lhs, lctx)?;
            self.lit(" ")?;
            self.text(op.symbol())?;
            self.lit(" ")?;
            return self.operand(rhs, rctx);
        }
        let mut it = operands(e)?.into_iter();
        let (_, first, ctx) = it.next()?;
        self.expr(first, ctx)?;
        for (op, r, ctx) in it {
            self.lit(" ")?;
            self.text(op.map_or("?", |p| p.symbol()))?;
            self.lit(" ")?;
            self.operand(r, ctx)?;
        }
        Some(())
    }

    fn lambda(&mut self, e: &Expr) -> Option<()> {
        let body = match &e.kind {
            ExprKind::Lam(LamKind::Linear, p_b) => {
                self.sym("lin\\", "linλ")?;
                self.pat(&p_b.0)?;
                &p_b.1
            }
            _ => {
                let (ps, body) = peel(e);
                self.sym("\\", "λ")?;
                for (i, p) in ps.into_iter().enumerate() {
                    if i > 0 {
                        self.lit(" ")?;
                    }
                    self.pat(p)?;
                }
                body
            }
        };
        self.lit(" ")?;
        self.sym("->", "→")?;
        self.lit(" ")?;
        self.expr(body, 0)
    }

    fn let_chain(&mut self, e: &Expr) -> Option<()> {
        let (links, tail) = let_links(e);
        for l in links {
            match &l.kind {
                ExprKind::LetRec(fs_x) => {
                    for (i, f) in fs_x.0.iter().enumerate() {
                        self.text(if i == 0 { "let " } else { " and " })?;
                        self.equation(&f.name, &f.body)?;
                    }
                }
                _ => self.let_link(l)?,
            }
            self.lit(" in ")?;
        }
        self.expr(tail, 0)
    }
}

/// The operands of binary-operator application `e` at its level, in order, each with the operator
/// before it (None for the first) and the level it is printed at (`Printer::binop`).
pub(super) fn operands(e: &Expr) -> Option<Vec<(Option<Prim>, &Expr, u8)>> {
    let (_, l, assoc, _, _) = as_binop(e)?;
    let (lctx, rctx) = operand_ctx(l, assoc);
    let mut items: Vec<(Option<Prim>, &Expr, u8)> = vec![];
    match assoc {
        Assoc::Left => {
            let mut cur = e;
            while let Some((op, _, _, lhs, rhs)) = as_binop(cur).filter(|b| b.1 == l) {
                items.push((Some(op), rhs, rctx));
                cur = lhs;
            }
            items.push((None, cur, lctx));
            items.reverse();
        }
        Assoc::Right => {
            let mut cur = e;
            let mut op_before = None;
            while let Some((op, _, _, lhs, rhs)) = as_binop(cur).filter(|b| b.1 == l) {
                items.push((op_before, lhs, lctx));
                op_before = Some(op);
                cur = rhs;
            }
            items.push((op_before, cur, rctx));
        }
        Assoc::None => {
            let (op, _, _, lhs, rhs) = as_binop(e)?;
            items.push((None, lhs, lctx));
            items.push((Some(op), rhs, rctx));
        }
    }
    Some(items)
}
