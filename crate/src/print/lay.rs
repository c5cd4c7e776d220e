//! A link of a long chain that does not fit on its line, laid out without its `pretty` document
//! (issue 14 item 4: a stage's output whose every link breaks, dualrev/cayley's, printed no faster
//! with `Flat` alone). `Lay` walks the link as `Printer` builds its document and makes each group's
//! choice as `pretty`'s renderer does: flat when, from the column it starts at, its flat text and
//! the text after it up to the next line break (`tail`: in `pretty`'s `fitting` every break after a
//! group is in break mode) fit the width, else broken, its `line`s new lines at the indentation of
//! the `nest`s around them (`Printer::open`'s count, capped as it caps). Where a text's width is not
//! known, or a type would break, it gives up and the link is laid out from its document (test
//! `flat_links_print_as_their_documents`).

use super::flat::{operands, symbol_width, width, Flat};
use super::{bind_links, ends_with_case, let_links, level, peel, starts_with_minus, APP, ATOM, MAX_INDENT};
use crate::ir::{Expr, ExprKind, LamKind, Name, Pat};

pub(super) struct Lay<'f, 'n> {
    flat: &'f mut Flat<'n>,
    /// The link's text, with its line breaks and indentation as the renderer writes them.
    pub(super) buf: String,
    /// Where in `buf` its line breaks are (`CappedIndent::push_lines`).
    pub(super) breaks: Vec<usize>,
    width: usize,
    cap: usize,
    /// `Printer::indent`: the indentation of a line break here.
    indent: usize,
    /// The renderer's column.
    pos: usize,
    /// Nesting of `expr`: past `MAX_DEPTH` the link is left to the document (recursion stays shallow).
    depth: usize,
}

/// As `Flat`'s bound on its recursion.
const MAX_DEPTH: usize = 256;

/// Its buffers go back to `Flat` for the next link's `Lay` (each link's new buffers, grown token by
/// token, were a tenth of printing a dualrev stage's output).
impl Drop for Lay<'_, '_> {
    fn drop(&mut self) {
        self.flat.spare = (std::mem::take(&mut self.buf), std::mem::take(&mut self.breaks));
    }
}

impl<'f, 'n> Lay<'f, 'n> {
    /// At the start of a link's line: after a break at indentation `n`.
    pub(super) fn new(flat: &'f mut Flat<'n>, n: usize) -> Self {
        let width = flat.options().width;
        let (mut buf, mut breaks) = std::mem::take(&mut flat.spare);
        buf.clear();
        breaks.clear();
        let mut lay = Lay { flat, buf, breaks, width, cap: MAX_INDENT.max(width.saturating_add(1)), indent: n, pos: 0, depth: 0 };
        lay.nl();
        lay
    }

    pub(super) fn text(&mut self, s: &str) -> Option<()> {
        self.pos += width(s)?;
        self.buf.push_str(s);
        Some(())
    }

    /// `text` of the syntax's own ASCII text (`Flat::lit`).
    fn lit(&mut self, s: &'static str) -> Option<()> {
        debug_assert!(s.is_ascii());
        self.pos += s.len();
        self.buf.push_str(s);
        Some(())
    }

    /// The syntax's symbols: ASCII, or `λ → ← ⊸` (one column each).
    fn sym(&mut self, ascii: &'static str, unicode: &'static str) -> Option<()> {
        let s = if self.flat.options().unicode { unicode } else { ascii };
        self.pos += symbol_width(s);
        self.buf.push_str(s);
        Some(())
    }

    /// A `line` in break mode: a new line at the indentation here.
    fn nl(&mut self) {
        self.breaks.push(self.buf.len());
        self.buf.push('\n');
        super::push_spaces(&mut self.buf, self.indent);
        self.pos = self.indent;
    }

    fn open(&mut self, k: usize) -> Option<usize> {
        let at = self.indent;
        if at >= self.cap {
            return None;
        }
        self.indent = at + k;
        Some(at)
    }

    fn close(&mut self, n: Option<usize>) {
        if let Some(at) = n {
            self.indent = at;
        }
    }

    /// What `write` writes flat (text without breaks, or a group that must be flat to print so).
    fn flat_text(&mut self, write: impl FnOnce(&mut Flat<'n>) -> Option<()>) -> Option<()> {
        let (t, w) = self.flat.measure(usize::MAX / 4, write)?;
        self.buf.push_str(t);
        self.pos += w;
        Some(())
    }

    /// A group followed by `tail` columns before the next break: flat if it fits, else `broken`.
    fn group(&mut self, tail: usize, flat: impl FnOnce(&mut Flat<'n>) -> Option<()>, broken: impl FnOnce(&mut Self) -> Option<()>) -> Option<()> {
        if let Some(budget) = self.width.checked_sub(self.pos + tail) {
            if let Some((t, w)) = self.flat.measure(budget, flat) {
                self.buf.push_str(t);
                self.pos += w;
                return Some(());
            }
            if self.flat.unknown {
                return None;
            }
        }
        broken(self)
    }

    fn pat(&mut self, p: &Pat) -> Option<()> {
        self.flat_text(|f| f.pat(p))
    }

    fn name(&mut self, n: &Name) -> Option<()> {
        self.flat_text(|f| f.name(n))
    }

    // ----- links -----

    /// `Printer::let_link` followed by `tail` columns; with `broken`, a `let`'s group is known not to
    /// fit flat (`Flat::link` measured it so, a link's first group: measured again, it was a tenth
    /// of printing a dualrev stage's output).
    pub(super) fn let_link(&mut self, l: &Expr, tail: usize, broken: bool) -> Option<()> {
        match &l.kind {
            ExprKind::Let(p_x) => {
                let (p, (x, _)) = &**p_x;
                let lay = |s: &mut Self| {
                    s.lit("let ")?;
                    s.pat(p)?;
                    s.lit(" =")?;
                    let n = s.open(2);
                    s.nl();
                    s.expr(x, 0, tail)?;
                    s.close(n);
                    Some(())
                };
                if broken {
                    return lay(self);
                }
                self.group(tail, |f| f.let_link(l), lay)
            }
            ExprKind::LetRec(fs_x) => {
                let fs = &fs_x.0;
                for (i, f) in fs.iter().enumerate() {
                    if i > 0 {
                        self.nl();
                    }
                    self.text(if i == 0 { "let " } else { "and " })?;
                    self.equation(&f.name, &f.body, if i + 1 == fs.len() { tail } else { 0 })?;
                }
                Some(())
            }
            _ => None,
        }
    }

    /// `Printer::bind_stmt` followed by `tail` columns; with `broken`, its group is known not to fit
    /// flat (as `let_link`'s).
    pub(super) fn bind_stmt(&mut self, l: &Expr, tail: usize, broken: bool) -> Option<()> {
        let ExprKind::Bind(p_m) = &l.kind else { return None };
        let (p, (m, _)) = &**p_m;
        let lay = |s: &mut Self| {
            s.pat(p)?;
            s.lit(" ")?;
            s.sym("<-", "←")?;
            let n = s.open(2);
            s.nl();
            s.expr(m, 0, tail)?;
            s.close(n);
            Some(())
        };
        if broken {
            return lay(self);
        }
        self.group(tail, |f| f.bind_stmt(l), lay)
    }

    fn equation(&mut self, name: &Name, body: &Expr, tail: usize) -> Option<()> {
        self.group(tail, |f| f.equation(name, body), |s| {
            let (ps, body) = peel(body);
            s.name(name)?;
            for p in ps {
                s.lit(" ")?;
                s.pat(p)?;
            }
            s.lit(" =")?;
            let n = s.open(2);
            s.nl();
            s.expr(body, 0, tail)?;
            s.close(n);
            Some(())
        })
    }

    // ----- expressions -----

    fn expr(&mut self, e: &Expr, ctx: u8, tail: usize) -> Option<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        if level(e) < ctx {
            self.lit("(")?;
            self.inner(e, tail + 1)?;
            self.lit(")")?;
        } else {
            self.inner(e, tail)?;
        }
        self.depth -= 1;
        Some(())
    }

    fn operand(&mut self, e: &Expr, ctx: u8, tail: usize) -> Option<()> {
        if level(e) >= ctx && starts_with_minus(e) {
            self.lit("(")?;
            self.inner(e, tail + 1)?;
            self.lit(")")
        } else {
            self.expr(e, ctx, tail)
        }
    }

    fn inner(&mut self, e: &Expr, tail: usize) -> Option<()> {
        use ExprKind::*;
        match &e.kind {
            Var(_) | Real(_) | Int(_) | Bool(_) | Unit | Builtin(_) => self.flat_text(|f| f.inner(e)),
            Prim(crate::ir::Prim::Neg, args) if args.len() == 1 => {
                self.lit("-")?;
                self.expr(&args[0], APP, tail)
            }
            // `(` and the group of `e : t`, whose type is left to the document if it would break
            Ann(x_t) => {
                let (x, t) = &**x_t;
                self.lit("(")?;
                self.group(tail + 1, |f| {
                    f.expr(x, 0)?;
                    f.lit(" : ")?;
                    f.ty(t, 0)
                }, |s| {
                    let n = s.open(1);
                    s.expr(x, 0, 2)?;
                    s.lit(" :")?;
                    s.nl();
                    let budget = s.width.checked_sub(s.pos + tail + 1)?;
                    let (ty, w) = s.flat.measure(budget, |f| f.ty(t, 0))?;
                    s.buf.push_str(ty);
                    s.pos += w;
                    s.close(n);
                    Some(())
                })?;
                self.lit(")")
            }
            _ => self.group(tail, |f| f.inner(e), |s| s.broken(e, tail)),
        }
    }

    /// `args` each on a line of its own, nested 2 (`Printer::apply` broken, its head written).
    fn args<'e>(&mut self, args: &[&'e Expr], tail: usize) -> Option<()> {
        let n = self.open(2);
        for (i, x) in args.iter().enumerate() {
            self.nl();
            self.expr(x, ATOM, if i + 1 == args.len() { tail } else { 0 })?;
        }
        self.close(n);
        Some(())
    }

    /// `open` items `,`-separated on lines of their own, nested 2, then `close` (`Printer::tuple`).
    fn items(&mut self, open: &str, es: &[Expr], close: &str) -> Option<()> {
        self.text(open)?;
        let n = self.open(2);
        self.nl();
        for (i, x) in es.iter().enumerate() {
            if i > 0 {
                self.lit(",")?;
                self.nl();
            }
            self.expr(x, 0, if i + 1 == es.len() { 0 } else { 1 })?;
        }
        self.close(n);
        self.nl();
        self.text(close)
    }

    /// Group `e` broken, followed by `tail` columns.
    fn broken(&mut self, e: &Expr, tail: usize) -> Option<()> {
        use ExprKind::*;
        match &e.kind {
            Tuple(es) => self.items("(", es, ")"),
            Array(es) => self.items("[", es, "]"),
            Par(x_y) => {
                self.expr(&x_y.0, 2, 0)?;
                self.nl();
                self.lit("||| ")?;
                self.operand(&x_y.1, 2, tail)
            }
            Fst(x) | Snd(x) | Inl(x) | Inr(x) | Pure(x) => {
                let kw = match &e.kind {
                    Fst(_) => "fst",
                    Snd(_) => "snd",
                    Inl(_) => "inl",
                    Inr(_) => "inr",
                    _ => "pure",
                };
                self.text(kw)?;
                self.args(&[&**x], tail)
            }
            App(..) => {
                let mut args = vec![];
                let mut f = e;
                while let App(g_x) = &f.kind {
                    args.push(&g_x.1);
                    f = &g_x.0;
                }
                args.reverse();
                self.expr(f, ATOM, 0)?;
                self.args(&args, tail)
            }
            Prim(p, args) if operands(e).is_none() => {
                self.text(p.symbol())?;
                let args: Vec<&Expr> = args.iter().collect();
                self.args(&args, tail)
            }
            Prim(..) => {
                let items = operands(e)?;
                let last = items.len() - 1;
                let mut it = items.into_iter().enumerate();
                let (_, (_, first, ctx)) = it.next()?;
                self.expr(first, ctx, 0)?;
                let n = self.open(2);
                for (i, (op, r, ctx)) in it {
                    self.nl();
                    self.text(op.map_or("?", |p| p.symbol()))?;
                    self.lit(" ")?;
                    self.operand(r, ctx, if i == last { tail } else { 0 })?;
                }
                self.close(n);
                Some(())
            }
            Lam(LamKind::Linear, p_b) => {
                self.sym("lin\\", "linλ")?;
                self.pat(&p_b.0)?;
                self.lambda_body(&p_b.1, tail)
            }
            Lam(..) => {
                let (ps, body) = peel(e);
                self.sym("\\", "λ")?;
                for (i, p) in ps.into_iter().enumerate() {
                    if i > 0 {
                        self.lit(" ")?;
                    }
                    self.pat(p)?;
                }
                self.lambda_body(body, tail)
            }
            Let(..) | LetRec(..) => {
                let (links, rest) = let_links(e);
                for l in links {
                    self.let_link(l, 3, false)?;
                    self.lit(" in")?;
                    self.nl();
                }
                self.expr(rest, 0, tail)
            }
            If(c_x_y) => {
                let (c, (x, y)) = &**c_x_y;
                self.lit("if ")?;
                self.expr(c, 0, 5)?;
                self.lit(" then")?;
                let n = self.open(2);
                self.nl();
                self.expr(x, 0, 0)?;
                self.close(n);
                self.nl();
                self.lit("else")?;
                if matches!(y.kind, If(..)) {
                    self.lit(" ")?;
                    self.expr(y, 0, tail)
                } else {
                    let n = self.open(2);
                    self.nl();
                    self.expr(y, 0, tail)?;
                    self.close(n);
                    Some(())
                }
            }
            Case(c) => {
                let (s, p1, x, p2, y) = &**c;
                self.lit("case ")?;
                self.expr(s, 0, 3)?;
                self.lit(" of")?;
                let arms = self.open(2);
                self.nl();
                let parens = ends_with_case(x);
                let arm1 = |f: &mut Flat<'n>| {
                    f.lit("inl ")?;
                    f.pat(p1)?;
                    f.lit(" ")?;
                    f.sym("->", "→")?;
                    f.lit(" ")?;
                    if parens { f.parens_inner(x) } else { f.expr(x, 0) }
                };
                self.group(0, arm1, |s| {
                    s.lit("inl ")?;
                    s.pat(p1)?;
                    s.lit(" ")?;
                    s.sym("->", "→")?;
                    let n = s.open(2);
                    s.nl();
                    if parens {
                        s.lit("(")?;
                        s.inner(x, 1)?;
                        s.lit(")")?;
                    } else {
                        s.expr(x, 0, 0)?;
                    }
                    s.close(n);
                    Some(())
                })?;
                self.nl();
                let arm2 = |f: &mut Flat<'n>| {
                    f.lit("| inr ")?;
                    f.pat(p2)?;
                    f.lit(" ")?;
                    f.sym("->", "→")?;
                    f.lit(" ")?;
                    f.expr(y, 0)
                };
                self.group(tail, arm2, |s| {
                    s.lit("| inr ")?;
                    s.pat(p2)?;
                    s.lit(" ")?;
                    s.sym("->", "→")?;
                    let n = s.open(2);
                    s.nl();
                    s.expr(y, 0, tail)?;
                    s.close(n);
                    Some(())
                })?;
                self.close(arms);
                Some(())
            }
            Bind(..) => {
                let (links, rest) = bind_links(e);
                self.lit("do {")?;
                let n = self.open(2);
                for l in links {
                    self.nl();
                    self.bind_stmt(l, 1, false)?;
                    self.lit(";")?;
                }
                self.nl();
                self.expr(rest, 0, 0)?;
                self.close(n);
                self.nl();
                self.lit("}")
            }
            _ => None,
        }
    }

    /// ` → body`, the body on a line of its own nested 2 (`Printer::lambda` broken).
    fn lambda_body(&mut self, body: &Expr, tail: usize) -> Option<()> {
        self.lit(" ")?;
        self.sym("->", "→")?;
        let n = self.open(2);
        self.nl();
        self.expr(body, 0, tail)?;
        self.close(n);
        Some(())
    }
}
