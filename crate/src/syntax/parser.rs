//! The parser: tokens to IR with unresolved names (every `Name` is `Name::global(text)`; the resolver
//! assigns ids and gives primitives their meaning).
//!
//! Right-nested chains (`let … in`, `\x ->`, `if … else`, `case … | inr y ->`) are parsed with an
//! explicit stack of frames, and binary operators with an operator-precedence (shunting-yard) loop,
//! so long chains do not recurse. Recursion happens only inside brackets and for subexpressions that
//! are not in tail position; it is counted against `limits::max_nesting()`.

use super::lexer::{lex, Tok, Token};
use super::nesting_error;
use crate::diag::{line_col, Diagnostic, Span};
use rustc_hash::FxHashMap as HashMap;
use crate::ir::{Def, Expect, ExpectKind, Expr, ExprKind, FunDef, LamKind, Name, Param, Pat, Prim, Program, Role, Type};
use crate::prims::{self, Assoc};

type PResult<T> = Result<T, Diagnostic>;

/// Parses a program to IR with unresolved names. Reports one error per broken top-level item.
pub fn parse_program_raw(src: &str) -> Result<Program, Vec<Diagnostic>> {
    let mut p = Parser::new(src).map_err(|d| vec![d])?;
    let prog = p.program();
    if !p.errors.is_empty() {
        drop_program(prog);
        return Err(p.errors);
    }
    let max = crate::limits::max_nesting();
    let mut errors = vec![];
    let exprs = prog.defs.iter().map(|d| &d.body).chain(prog.input.iter()).chain(prog.seed.iter()).chain(prog.expects.iter().map(|e| &e.value));
    for e in exprs {
        if let Err(d) = super::check_depth(e, max) {
            errors.push(d);
        }
    }
    if errors.is_empty() {
        Ok(prog)
    } else {
        drop_program(prog);
        Err(errors)
    }
}

fn drop_program(prog: Program) {
    for d in prog.defs {
        super::drop_deep(d.body);
    }
    prog.input.into_iter().for_each(super::drop_deep);
    prog.seed.into_iter().for_each(super::drop_deep);
    prog.expects.into_iter().for_each(|e| super::drop_deep(e.value));
}

/// Parses one expression (the whole input) to IR with unresolved names.
pub fn parse_expr_raw(src: &str) -> Result<Expr, Vec<Diagnostic>> {
    let mut p = Parser::new(src).map_err(|d| vec![d])?;
    let e = p.parse_expr("").map_err(|d| vec![d])?;
    if p.peek() != &Tok::Eof {
        let d = p.junk("expression");
        super::drop_deep(e);
        return Err(vec![d]);
    }
    if let Err(d) = super::check_depth(&e, crate::limits::max_nesting()) {
        super::drop_deep(e);
        return Err(vec![d]);
    }
    Ok(e)
}

/// Parses a type (the whole input).
pub fn parse_type_raw(src: &str) -> Result<Type, Diagnostic> {
    let mut p = Parser::new(src)?;
    if p.peek() == &Tok::Eof {
        return Err(p.expected("a type"));
    }
    let (t, _) = p.parse_type()?;
    if p.peek() != &Tok::Eof {
        return Err(p.junk("type"));
    }
    Ok(t)
}

/// Binary operators: `None` is `|||`, the parallel pair, loosest of all and not associative; the
/// others are the infix primitives of the table (prims.rs).
fn binop(t: &Tok) -> Option<(Option<Prim>, u8, Assoc)> {
    match t {
        Tok::Par3 => Some((None, 0, Assoc::None)),
        Tok::Op(s) => prims::infix_op(s).map(|(p, prec, assoc)| (Some(p), prec, assoc)),
        _ => None,
    }
}

/// A prefix operator (`-`), with its precedence.
fn prefix(t: &Tok) -> Option<(Prim, u8)> {
    match t {
        Tok::Op(s) => prims::prefix_op(s),
        _ => None,
    }
}

fn starts_atom(t: &Tok) -> bool {
    matches!(t, Tok::Ident(_) | Tok::Int(_) | Tok::Real(_) | Tok::True | Tok::False | Tok::LParen | Tok::LBracket | Tok::Do)
}

fn starts_pat(t: &Tok) -> bool {
    matches!(t, Tok::Ident(_) | Tok::Underscore | Tok::LParen)
}

/// An operator waiting for its right operand: `op` None is `|||`.
struct Pending {
    op: Option<Prim>,
    prec: u8,
    span: Span,
    prefix: bool,
}

/// A construct whose last part extends as far right as possible, waiting for that part.
enum Frame {
    Let { pat: Pat, rhs: Expr, start: u32 },
    LetRec { fds: Vec<FunDef>, start: u32 },
    Lam { kind: LamKind, pats: Vec<Pat>, start: u32 },
    If { cond: Expr, then: Expr, start: u32 },
    Case { scrut: Expr, inl_first: bool, p1: Pat, e1: Expr, p2: Pat, start: u32 },
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<Token>,
    pos: usize,
    /// End of the last consumed token.
    prev_end: u32,
    depth: usize,
    max: usize,
    errors: Vec<Diagnostic>,
}

impl<'s> Parser<'s> {
    fn new(src: &'s str) -> PResult<Parser<'s>> {
        let toks = lex(src)?;
        let max = crate::limits::max_nesting();
        // Brackets are where nesting costs native stack: refuse deep ones before recursing at all.
        let max_brackets = crate::limits::max_brackets();
        let mut depth = 0usize;
        for t in &toks {
            match t.tok {
                Tok::LParen | Tok::LBrace => {
                    depth += 1;
                    if depth > max_brackets {
                        return Err(super::bracket_error(t.span));
                    }
                }
                Tok::RParen | Tok::RBrace => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        Ok(Parser { src, toks, pos: 0, prev_end: 0, depth: 0, max, errors: vec![] })
    }

    // ---- token helpers ----

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }
    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }
    fn span(&self) -> Span {
        self.toks[self.pos].span
    }
    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        self.prev_end = t.span.end;
        t
    }
    fn eat(&mut self, t: &Tok) -> Option<Span> {
        if self.peek() == t {
            Some(self.bump().span)
        } else {
            None
        }
    }
    fn line(&self, span: Span) -> usize {
        line_col(self.src, span.start as usize).line
    }
    fn since(&self, start: u32) -> Span {
        Span { start, end: self.prev_end.max(start) }
    }

    /// "expected WHAT, found X" at the current token (or "unexpected end of input: expected WHAT").
    fn expected(&self, what: &str) -> Diagnostic {
        if self.peek() == &Tok::Eof {
            Diagnostic::error(self.span(), format!("unexpected end of input: expected {what}"))
        } else {
            Diagnostic::error(self.span(), format!("expected {what}, found {}", self.peek().describe()))
        }
    }
    fn expect(&mut self, t: &Tok, what: &str) -> PResult<Span> {
        self.eat(t).ok_or_else(|| self.expected(what))
    }
    /// Like `expect`, with a message built only when needed (line numbers cost a scan of the source).
    fn expect_lazy(&mut self, t: &Tok, what: impl FnOnce(&Self) -> String) -> PResult<Span> {
        match self.eat(t) {
            Some(s) => Ok(s),
            None => Err(self.expected(&what(self))),
        }
    }
    fn is_lin_lambda(&self) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == "lin") && self.peek_at(1) == &Tok::Lambda
    }
    fn starts_expr(&self) -> bool {
        starts_atom(self.peek())
            || matches!(self.peek(), Tok::Lambda | Tok::Let | Tok::If | Tok::Case)
            || prefix(self.peek()).is_some()
    }
    /// The message for a token that cannot continue what came before it.
    fn junk(&self, what: &str) -> Diagnostic {
        let msg = match self.peek() {
            Tok::RParen => "unmatched `)`: no `(` is open here".to_string(),
            Tok::RBrace => "unmatched `}`: no `{` is open here".to_string(),
            Tok::RBracket => "unmatched `]`: no `[` is open here".to_string(),
            Tok::In => "unexpected `in` without a matching `let`".to_string(),
            Tok::And => "unexpected `and` without a matching `let f x = ...`".to_string(),
            Tok::Then | Tok::Else => format!("unexpected `{}` without a matching `if`", self.peek().text()),
            Tok::Of => "unexpected `of` without a matching `case`".to_string(),
            t => format!("unexpected {} after the end of the {what}", t.describe()),
        };
        Diagnostic::error(self.span(), msg)
    }
    fn enter(&mut self, span: Span) -> PResult<()> {
        self.depth += 1;
        if self.depth > self.max {
            Err(nesting_error(span))
        } else {
            Ok(())
        }
    }

    // ---- programs ----

    fn program(&mut self) -> Program {
        let mut prog = Program { params: vec![], input: None, seed: None, defs: vec![], expects: vec![], next_id: 0 };
        let mut seen: HashMap<String, Span> = HashMap::default();
        if self.peek() == &Tok::Eof {
            self.errors.push(Diagnostic::error(
                self.span(),
                "the program is empty: expected a definition such as `def main x = ...`",
            ));
        }
        while self.peek() != &Tok::Eof {
            let r = match self.peek() {
                Tok::Def => self.def().and_then(|(d, s)| {
                    self.check_global(&d.name.text, s, &mut seen)?;
                    prog.defs.push(d);
                    Ok(())
                }),
                Tok::Param => self.param().and_then(|(p, s)| {
                    self.check_global(&p.name.text, s, &mut seen)?;
                    prog.params.push(p);
                    Ok(())
                }),
                Tok::Input => {
                    let span = self.span();
                    self.input().and_then(|e| {
                        if prog.input.is_some() {
                            Err(Diagnostic::error(span, "`input` is given twice"))
                        } else {
                            prog.input = Some(e);
                            Ok(())
                        }
                    })
                }
                Tok::Seed => {
                    let span = self.span();
                    self.bump();
                    self.parse_expr("after `seed`").and_then(|e| {
                        if prog.seed.is_some() {
                            Err(Diagnostic::error(span, "`seed` is given twice"))
                        } else {
                            prog.seed = Some(e);
                            Ok(())
                        }
                    })
                }
                Tok::Expect => self.expect_item().map(|e| prog.expects.push(e)),
                t => Err(Diagnostic::error(
                    self.span(),
                    format!(
                        "expected a top-level item (`def`, `param`, `input`, `seed` or `expect`), found {}",
                        t.describe()
                    ),
                )),
            };
            let r = r.and_then(|()| {
                if matches!(self.peek(), Tok::Eof | Tok::Def | Tok::Param | Tok::Input | Tok::Seed | Tok::Expect) {
                    Ok(())
                } else {
                    Err(self.junk("definition"))
                }
            });
            if let Err(d) = r {
                self.errors.push(d);
                // Recover at the next top-level keyword.
                self.bump();
                while !matches!(self.peek(), Tok::Eof | Tok::Def | Tok::Param | Tok::Input | Tok::Seed | Tok::Expect) {
                    self.bump();
                }
            }
            self.depth = 0;
        }
        prog
    }

    /// A top-level name must be new and not a built-in one.
    fn check_global(&self, name: &str, span: Span, seen: &mut HashMap<String, Span>) -> PResult<()> {
        if super::resolve::is_reserved(name) {
            return Err(Diagnostic::error(span, format!("`{name}` is built in and cannot be redefined")));
        }
        if let Some(first) = seen.get(name) {
            let line = self.line(*first);
            return Err(Diagnostic::error(span, format!("`{name}` is defined twice (first at line {line})")));
        }
        seen.insert(name.to_string(), span);
        Ok(())
    }

    fn def(&mut self) -> PResult<(Def, Span)> {
        let start = self.bump().span.start;
        let (name, name_span) = self.ident("a name after `def`")?;
        let mut params = vec![];
        while starts_pat(self.peek()) {
            params.push(self.parse_pat("")?);
        }
        let what = if params.is_empty() {
            format!("`=` or a parameter after `def {name}`")
        } else {
            format!("`=` after the parameters of `{name}`")
        };
        self.expect(&Tok::Eq, &what)?;
        let body = self.parse_expr("after `=`")?;
        let body = lams(LamKind::Plain, params, body, self.prev_end);
        Ok((Def { name: Name::global(&name), body, span: self.since(start), scheme: None, role: Role::User }, name_span))
    }

    fn param(&mut self) -> PResult<(Param, Span)> {
        let start = self.bump().span.start;
        let (name, name_span) = self.ident("a name after `param`")?;
        self.expect(&Tok::Eq, &format!("`=` after `param {name}`"))?;
        let neg = self.eat(&Tok::Op("-")).is_some();
        let value = match *self.peek() {
            Tok::Int(n) => {
                let span = self.bump().span;
                int_value(n, neg, span)?
            }
            _ => return Err(self.expected(&format!("an integer literal after `param {name} =`"))),
        };
        Ok((Param { name: Name::global(&name), value, span: self.since(start) }, name_span))
    }

    fn input(&mut self) -> PResult<Expr> {
        self.bump();
        self.parse_expr("after `input`")
    }

    fn expect_item(&mut self) -> PResult<Expect> {
        let start = self.bump().span.start;
        let what = match self.peek() {
            Tok::Ident(s) if s == "grad" => ExpectKind::Grad,
            Tok::Ident(s) if s == "primal" => ExpectKind::Primal,
            _ => return Err(self.expected("`grad` or `primal` after `expect`")),
        };
        let kw = self.bump();
        let value = self.parse_expr(&format!("after `expect {}`", &self.src[kw.span.start as usize..kw.span.end as usize]))?;
        Ok(Expect { what, value, span: self.since(start) })
    }

    fn ident(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek().clone() {
            Tok::Ident(s) => Ok((s, self.bump().span)),
            _ => Err(self.expected(what)),
        }
    }

    // ---- patterns ----

    fn parse_pat(&mut self, ctx: &str) -> PResult<Pat> {
        match self.peek().clone() {
            Tok::Ident(s) => Ok(Pat::Var(Name::global(&s), self.bump().span)),
            Tok::Underscore => Ok(Pat::Wild(self.bump().span)),
            Tok::LParen => {
                let open = self.bump().span;
                if self.eat(&Tok::RParen).is_some() {
                    return Ok(Pat::Unit(self.since(open.start)));
                }
                self.enter(open)?;
                let mut ps = vec![self.parse_pat("after `(`")?];
                while self.eat(&Tok::Comma).is_some() {
                    ps.push(self.parse_pat("after `,`")?);
                }
                let close = self.close_paren(open);
                self.depth -= 1;
                close?;
                let span = self.since(open.start);
                Ok(if ps.len() == 1 { with_pat_span(ps.pop().unwrap(), span) } else { Pat::Tuple(ps.into(), span) })
            }
            _ => {
                let what = if ctx.is_empty() { "a pattern".to_string() } else { format!("a pattern {ctx}") };
                Err(self.expected(&format!("{what} (a name, `_`, `()` or a tuple of patterns)")))
            }
        }
    }

    fn close_paren(&mut self, open: Span) -> PResult<Span> {
        self.expect_lazy(&Tok::RParen, |p| format!("`)` to close the `(` opened at line {}", p.line(open)))
    }

    // ---- expressions ----

    /// An expression; `ctx` ("after `in`") says where, for the message when none starts here.
    fn parse_expr(&mut self, ctx: &str) -> PResult<Expr> {
        let saved = self.depth;
        let r = self.enter(self.span()).and_then(|()| self.parse_expr_inner(ctx));
        self.depth = saved;
        r
    }

    fn expected_expr(&self, ctx: &str) -> Diagnostic {
        // `!x` as in C: `!` is the infix indexing operator here (issue 9), so say what to write.
        if *self.peek() == Tok::Op("!") {
            return Diagnostic::error(self.span(), "`!` indexes an array (`a ! i`): write `not e` for negation and `!=` for inequality");
        }
        if ctx.is_empty() {
            self.expected("an expression")
        } else {
            self.expected(&format!("an expression {ctx}"))
        }
    }

    fn parse_expr_inner(&mut self, ctx: &str) -> PResult<Expr> {
        let mut frames: Vec<Frame> = vec![];
        let mut ctx = ctx.to_string();
        let tail = loop {
            if !self.starts_expr() {
                return Err(self.expected_expr(&ctx));
            }
            let here = self.span();
            match self.peek() {
                Tok::Let => {
                    let f = self.let_frame()?;
                    frames.push(f);
                    ctx = "after `in`".into();
                }
                Tok::Lambda | Tok::Ident(_) => {
                    // (an identifier here is `lin` of `lin\x -> e`: starts_expr let it through)
                    let start = self.span().start;
                    let kind = if self.is_lin_lambda() {
                        self.bump();
                        LamKind::Linear
                    } else {
                        LamKind::Plain
                    };
                    if !matches!(self.peek(), Tok::Lambda) {
                        // a plain expression starting with a name
                        break self.parse_binary(&ctx)?;
                    }
                    self.bump();
                    let mut pats = vec![self.parse_pat("after `\\`")?];
                    while starts_pat(self.peek()) {
                        pats.push(self.parse_pat("")?);
                    }
                    let arrow = match self.peek() {
                        Tok::Arrow | Tok::Dot => self.bump(),
                        _ => return Err(self.expected("`->` after the parameters of the lambda")),
                    };
                    ctx = format!("after `{}`", &self.src[arrow.span.start as usize..arrow.span.end as usize]);
                    frames.push(Frame::Lam { kind, pats, start });
                }
                Tok::If => {
                    let start = self.bump().span;
                    let cond = self.parse_expr("after `if`")?;
                    self.expect_lazy(&Tok::Then, |p| {
                        format!("`then` after the condition of the `if` at line {}", p.line(start))
                    })?;
                    let then = self.parse_expr("after `then`")?;
                    self.expect_lazy(&Tok::Else, |p| format!("`else` to go with the `if` at line {}", p.line(start)))?;
                    frames.push(Frame::If { cond, then, start: start.start });
                    ctx = "after `else`".into();
                }
                Tok::Case => {
                    let start = self.bump().span;
                    let scrut = self.parse_expr("after `case`")?;
                    self.expect_lazy(&Tok::Of, |p| {
                        format!("`of` after the scrutinee of the `case` at line {}", p.line(start))
                    })?;
                    self.eat(&Tok::Bar);
                    let (inl_first, p1) = self.arm_head(None)?;
                    let e1 = self.parse_expr("after `->`")?;
                    let other = if inl_first { "inr" } else { "inl" };
                    self.expect_lazy(&Tok::Bar, |p| {
                        format!("`|` and the `{other}` arm of the `case` at line {}", p.line(start))
                    })?;
                    let (_, p2) = self.arm_head(Some(!inl_first))?;
                    frames.push(Frame::Case { scrut, inl_first, p1, e1, p2, start: start.start });
                    ctx = "after `->`".into();
                }
                _ => break self.parse_binary(&ctx)?,
            }
            self.enter(here)?;
        };
        // Every waiting construct ends where the tail ends.
        let end = self.prev_end;
        let mut e = tail;
        while let Some(f) = frames.pop() {
            let kind = match f {
                Frame::Let { pat, rhs, start } => {
                    Expr::new(ExprKind::Let(Box::new((pat, (rhs, e)))), Span { start, end })
                }
                Frame::LetRec { fds, start } => Expr::new(ExprKind::LetRec(Box::new((fds, e))), Span { start, end }),
                Frame::Lam { kind, pats, start } => {
                    let mut e = lams(kind, pats, e, end);
                    e.span.start = start;
                    e
                }
                Frame::If { cond, then, start } => {
                    Expr::new(ExprKind::If(Box::new((cond, (then, e)))), Span { start, end })
                }
                Frame::Case { scrut, inl_first, p1, e1, p2, start } => {
                    let (pl, el, pr, er) = if inl_first { (p1, e1, p2, e) } else { (p2, e, p1, e1) };
                    Expr::new(
                        ExprKind::Case(Box::new((scrut, pl, el, pr, er))),
                        Span { start, end },
                    )
                }
            };
            e = kind;
        }
        Ok(e)
    }

    /// `let p = e in`, `let f x = e in`, `let f x = e and g y = e' in`: the frame waiting for the body.
    /// Kept out of `parse_expr_inner`, whose frame is on the native stack once per nesting level.
    #[inline(never)]
    fn let_frame(&mut self) -> PResult<Frame> {
        let start = self.bump().span;
        let in_msg = |p: &Self| format!("`in` to finish the `let` at line {}", p.line(start));
        if let (Tok::Ident(_), true) = (self.peek().clone(), starts_pat(self.peek_at(1))) {
            // `let f x y = e and g z = e' in b`: local (mutually) recursive functions.
            let mut fds = vec![self.fun_def()?];
            while self.eat(&Tok::And).is_some() {
                fds.push(self.fun_def()?);
            }
            self.expect_lazy(&Tok::In, in_msg)?;
            Ok(Frame::LetRec { fds, start: start.start })
        } else {
            let pat = self.parse_pat("after `let`")?;
            self.expect(&Tok::Eq, "`=` after the pattern of `let`")?;
            let rhs = self.parse_expr("after `=`")?;
            match pat {
                // `let f = e and g x = ...`: a group whose first member has no parameters.
                Pat::Var(name, span) if self.peek() == &Tok::And => {
                    let mut fds = vec![FunDef { name, span: span.to(rhs.span), body: rhs }];
                    while self.eat(&Tok::And).is_some() {
                        fds.push(self.fun_def()?);
                    }
                    self.expect_lazy(&Tok::In, in_msg)?;
                    Ok(Frame::LetRec { fds, start: start.start })
                }
                pat => {
                    self.expect_lazy(&Tok::In, in_msg)?;
                    Ok(Frame::Let { pat, rhs, start: start.start })
                }
            }
        }
    }

    /// One equation of a local function group: `f p1 ... pn = e` (n may be 0 after `and`).
    fn fun_def(&mut self) -> PResult<FunDef> {
        let (name, name_span) = self.ident("the name of a local function")?;
        let mut params = vec![];
        while starts_pat(self.peek()) {
            params.push(self.parse_pat("")?);
        }
        let what = if params.is_empty() { format!("`=` or a parameter after `{name}`") } else { format!("`=` after the parameters of `{name}`") };
        self.expect(&Tok::Eq, &what)?;
        let rhs = self.parse_expr("after `=`")?;
        let span = Span { start: name_span.start, end: self.prev_end };
        Ok(FunDef { name: Name::global(&name), body: lams(LamKind::Plain, params, rhs, span.end), span })
    }

    /// `inl p ->` or `inr p ->`; `want`: Some(true) for `inl` only, Some(false) for `inr` only.
    fn arm_head(&mut self, want: Option<bool>) -> PResult<(bool, Pat)> {
        let is_inl = match (self.peek(), want) {
            (Tok::Ident(s), None | Some(true)) if s == "inl" => true,
            (Tok::Ident(s), None | Some(false)) if s == "inr" => false,
            (_, None) => return Err(self.expected("`inl` or `inr` to start a `case` arm")),
            (_, Some(true)) => return Err(self.expected("`inl` to start the second `case` arm")),
            (_, Some(false)) => return Err(self.expected("`inr` to start the second `case` arm")),
        };
        let tag = self.bump();
        let tag_text = if is_inl { "inl" } else { "inr" };
        let _ = tag;
        let pat = self.parse_pat(&format!("after `{tag_text}`"))?;
        match self.peek() {
            Tok::Arrow => {
                self.bump();
            }
            _ => return Err(self.expected("`->` after the pattern of the `case` arm")),
        }
        Ok((is_inl, pat))
    }

    /// Operators by precedence climbing with explicit stacks: the infix primitives and `|||`, and
    /// prefix `-`, which takes in a tighter infix operator on its right (`-x ** 2` is `-(x ** 2)`,
    /// as in Haskell and Python) and stops at a looser one (`-x * y` is `(-x) * y`).
    fn parse_binary(&mut self, ctx: &str) -> PResult<Expr> {
        let mut operands: Vec<Expr> = vec![];
        let mut ops: Vec<Pending> = vec![];
        fn reduce(operands: &mut Vec<Expr>, ops: &mut Vec<Pending>) {
            let p = ops.pop().expect("operator");
            let rhs = operands.pop().expect("rhs");
            if p.prefix {
                let span = p.span.to(rhs.span);
                let op = p.op.expect("a prefix operator is a primitive");
                operands.push(Expr::new(ExprKind::Prim(op, vec![rhs].into()), span));
                return;
            }
            let lhs = operands.pop().expect("lhs");
            let span = lhs.span.to(rhs.span);
            let kind = match p.op {
                Some(op) => ExprKind::Prim(op, vec![lhs, rhs].into()),
                None => ExprKind::Par(Box::new((lhs, rhs))),
            };
            operands.push(Expr::new(kind, span));
        }
        let mut ctx = ctx.to_string();
        loop {
            let mut prefixes = 0;
            while let Some((op, prec)) = prefix(self.peek()) {
                let span = self.bump().span;
                ops.push(Pending { op: Some(op), prec, span, prefix: true });
                prefixes += 1;
                ctx = format!("after `{}`", op.symbol());
            }
            let e = self.parse_operand(&ctx, &mut ops, prefixes)?;
            operands.push(e);
            let Some((op, prec, assoc)) = binop(self.peek()) else { break };
            let op_span = self.bump().span;
            while let Some(&Pending { prec: tprec, span: tspan, prefix, .. }) = ops.last() {
                if tprec > prec || (tprec == prec && (assoc == Assoc::Left || prefix)) {
                    reduce(&mut operands, &mut ops);
                } else if tprec == prec && assoc == Assoc::None && op.is_none() {
                    return Err(Diagnostic::error(op_span, "`|||` does not associate: write `(a ||| b) ||| c` or `a ||| (b ||| c)`"));
                } else if tprec == prec && assoc == Assoc::None {
                    let first = &self.src[tspan.start as usize..tspan.end as usize];
                    let second = op.map_or("|||", |p| p.symbol());
                    return Err(Diagnostic::error(
                        op_span,
                        format!(
                            "comparisons cannot be chained: `a {first} b {second} c` needs parentheses, \
                             or write `a {first} b && b {second} c`"
                        ),
                    ));
                } else {
                    break;
                }
            }
            ops.push(Pending { op, prec, span: op_span, prefix: false });
            ctx = format!("after `{}`", op.map_or("|||", |p| p.symbol()));
        }
        while !ops.is_empty() {
            reduce(&mut operands, &mut ops);
        }
        Ok(operands.pop().expect("operand"))
    }

    /// An application or a block (`\`, `let`, `if`, `case`), after `prefixes` prefix operators
    /// (the last ones on `ops`).
    fn parse_operand(&mut self, ctx: &str, ops: &mut Vec<Pending>, prefixes: usize) -> PResult<Expr> {
        if !self.starts_expr() {
            return Err(self.expected_expr(ctx));
        }
        if matches!(self.peek(), Tok::Lambda | Tok::Let | Tok::If | Tok::Case) || self.is_lin_lambda() {
            return self.parse_expr(ctx);
        }
        let minus = ops.last().filter(|p| prefixes > 0 && p.op == Some(Prim::Neg)).map(|p| p.span);
        if let (Tok::Int(n), Some(m)) = (self.peek().clone(), minus) {
            // `-9223372036854775808` is in range although its digits are not.
            let span = self.bump().span;
            let v = if n > i64::MAX as u128 {
                ops.pop();
                Expr::new(ExprKind::Int(i64::MIN), m.to(span))
            } else {
                Expr::new(ExprKind::Int(n as i64), span)
            };
            return self.parse_app(Some(v));
        }
        self.parse_app(None)
    }

    /// `f a b c`: left-nested applications of atoms.
    fn parse_app(&mut self, head: Option<Expr>) -> PResult<Expr> {
        let mut e = match head {
            Some(e) => e,
            None => self.parse_atom()?,
        };
        while starts_atom(self.peek()) {
            let arg = self.parse_atom()?;
            let span = e.span.to(arg.span);
            e = Expr::new(ExprKind::App(Box::new((e, arg))), span);
        }
        Ok(e)
    }

    fn parse_atom(&mut self) -> PResult<Expr> {
        let t = self.peek().clone();
        let span = self.span();
        let kind = match t {
            Tok::Ident(s) => ExprKind::Var(Name::global(&s)),
            Tok::Int(n) => {
                let v = int_value(n, false, span)?;
                ExprKind::Int(v)
            }
            Tok::Real(r) => ExprKind::Real(r),
            Tok::True => ExprKind::Bool(true),
            Tok::False => ExprKind::Bool(false),
            Tok::LParen => return self.parse_paren(),
            Tok::LBracket => return self.parse_array(),
            Tok::Do => return self.parse_do(),
            _ => return Err(self.expected("an expression")),
        };
        self.bump();
        Ok(Expr::new(kind, span))
    }

    /// `[]`, `[e1, ..., en]`: an array literal (one nesting level, like a parenthesis).
    fn parse_array(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        let saved = self.depth;
        let r = self.enter(open).and_then(|()| {
            let mut items = vec![];
            if self.peek() != &Tok::RBracket {
                let mut ctx = "after `[`";
                loop {
                    let saved = self.depth;
                    let e = self.parse_expr_inner(ctx);
                    self.depth = saved;
                    items.push(e?);
                    if self.eat(&Tok::Comma).is_none() {
                        break;
                    }
                    ctx = "after `,`";
                }
            }
            self.expect_lazy(&Tok::RBracket, |p| format!("`]` to close the `[` opened at line {}", p.line(open)))?;
            Ok(items)
        });
        self.depth = saved;
        Ok(Expr::new(ExprKind::Array(r?.into()), self.since(open.start)))
    }

    /// `()`, `(e)`, `(e : T)`, `(e1, ..., en)`.
    fn parse_paren(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        if self.eat(&Tok::RParen).is_some() {
            return Ok(Expr::new(ExprKind::Unit, self.since(open.start)));
        }
        let saved = self.depth;
        let r = self.enter(open).and_then(|()| self.parse_paren_inner(open));
        self.depth = saved;
        r
    }

    fn parse_paren_inner(&mut self, open: Span) -> PResult<Expr> {
        let mut items = vec![];
        let mut ctx = "after `(`";
        loop {
            // The `(` already counted one nesting level for what it holds: one level per bracket.
            let saved = self.depth;
            let e = self.parse_expr_inner(ctx);
            self.depth = saved;
            let mut e = e?;
            if self.eat(&Tok::Colon).is_some() {
                if !starts_type(self.peek()) {
                    return Err(self.expected("a type after `:`"));
                }
                let (ty, ty_span) = self.parse_type()?;
                let span = e.span.to(ty_span);
                e = Expr::new(ExprKind::Ann(Box::new((e, ty))), span);
            }
            items.push(e);
            if self.eat(&Tok::Comma).is_none() {
                break;
            }
            ctx = "after `,`";
        }
        self.close_paren(open)?;
        let span = self.since(open.start);
        if items.len() == 1 {
            let mut e = items.pop().unwrap();
            e.span = span;
            Ok(e)
        } else {
            Ok(Expr::new(ExprKind::Tuple(items.into()), span))
        }
    }

    /// `do { p <- e; e; ...; e }`.
    fn parse_do(&mut self) -> PResult<Expr> {
        let start = self.bump().span;
        let open = self.expect(&Tok::LBrace, "`{` after `do`")?;
        let saved = self.depth;
        self.enter(open)?;
        let mut stmts: Vec<(Option<Pat>, Expr, u32)> = vec![];
        loop {
            if self.peek() == &Tok::RBrace {
                if stmts.is_empty() {
                    return Err(Diagnostic::error(self.span(), "a `do` block needs at least one expression"));
                }
                break;
            }
            let stmt_start = self.span().start;
            // `p <- e` or `e`: try a pattern followed by `<-`.
            let save = (self.pos, self.prev_end);
            let pat = if starts_pat(self.peek()) {
                match self.parse_pat("") {
                    Ok(p) if self.peek() == &Tok::LArrow => {
                        self.bump();
                        Some(p)
                    }
                    _ => {
                        (self.pos, self.prev_end) = save;
                        self.depth = saved + 1;
                        None
                    }
                }
            } else {
                None
            };
            let ctx = if pat.is_some() { "after `<-`" } else { "in the `do` block" };
            let e = self.parse_expr(ctx)?;
            stmts.push((pat, e, stmt_start));
            if self.eat(&Tok::Semi).is_some() {
                continue;
            }
            if self.peek() != &Tok::RBrace {
                let line = self.line(open);
                return Err(self.expected(&format!("`;` or `}}` in the `do` block opened at line {line}")));
            }
        }
        self.bump();
        self.depth = saved;
        let end = self.prev_end;
        let (last_pat, mut e, last_start) = stmts.pop().expect("statement");
        if let Some(p) = last_pat {
            return Err(Diagnostic::error(
                Span { start: last_start, end: e.span.end },
                format!(
                    "the last statement of a `do` block must be an expression, not a binding `{} <- ...`",
                    &self.src[p.span().start as usize..p.span().end as usize]
                ),
            ));
        }
        while let Some((pat, m, s)) = stmts.pop() {
            let pat = pat.unwrap_or(Pat::Wild(Span::new(s as usize, s as usize)));
            let s = if stmts.is_empty() { start.start } else { s };
            e = Expr::new(ExprKind::Bind(Box::new((pat, (m, e)))), Span { start: s, end });
        }
        if e.span.start != start.start {
            e.span = Span { start: start.start, end };
        }
        Ok(e)
    }

    // ---- types ----

    /// `A -> B`, `A ⊸ B` (right-assoc) over `A + B` (right-assoc) over type applications and atoms.
    fn parse_type(&mut self) -> PResult<(Type, Span)> {
        let mut items: Vec<((Type, Span), bool)> = vec![];
        let last = loop {
            let t = self.parse_sum_type()?;
            match self.peek() {
                Tok::Arrow => items.push((t, false)),
                Tok::Lollipop => items.push((t, true)),
                _ => break t,
            }
            self.bump();
            if !starts_type(self.peek()) {
                return Err(self.expected("a type after the arrow"));
            }
        };
        let (mut ty, mut span) = last;
        while let Some(((a, s), lin)) = items.pop() {
            ty = if lin { Type::lin(a, ty) } else { Type::fun(a, ty) };
            span = s.to(span);
        }
        Ok((ty, span))
    }

    fn parse_sum_type(&mut self) -> PResult<(Type, Span)> {
        let mut items = vec![self.parse_app_type()?];
        while self.eat(&Tok::Op("+")).is_some() {
            if !starts_type(self.peek()) {
                return Err(self.expected("a type after `+`"));
            }
            items.push(self.parse_app_type()?);
        }
        let (mut ty, mut span) = items.pop().expect("type");
        while let Some((a, s)) = items.pop() {
            ty = Type::sum(a, ty);
            span = s.to(span);
        }
        Ok((ty, span))
    }

    fn parse_app_type(&mut self) -> PResult<(Type, Span)> {
        if let Tok::Ident(name) = self.peek().clone() {
            if is_con_name(&name) {
                let start = self.bump().span;
                let mut args = vec![];
                while starts_type(self.peek()) {
                    args.push(self.parse_type_atom()?.0);
                }
                return Ok((Type::con(&name, args), self.since(start.start)));
            }
        }
        self.parse_type_atom()
    }

    fn parse_type_atom(&mut self) -> PResult<(Type, Span)> {
        match self.peek().clone() {
            Tok::Ident(name) => {
                let span = self.span();
                let ty = match name.as_str() {
                    "R" => Type::Real,
                    "Z" => Type::Int,
                    "Bool" => Type::Bool,
                    n if is_con_name(n) => Type::con(n, vec![]),
                    n => {
                        return Err(Diagnostic::error(
                            span,
                            format!(
                                "unknown type `{n}`: types are `R`, `Z`, `Bool`, `()`, tuples, `A + B`, `A -> B` \
                                 and capitalised type names"
                            ),
                        ))
                    }
                };
                self.bump();
                Ok((ty, span))
            }
            Tok::LParen => {
                let open = self.bump().span;
                if self.eat(&Tok::RParen).is_some() {
                    return Ok((Type::Unit, self.since(open.start)));
                }
                let saved = self.depth;
                let r = self.enter(open).and_then(|()| {
                    let mut ts = vec![self.parse_type()?.0];
                    while self.eat(&Tok::Comma).is_some() {
                        ts.push(self.parse_type()?.0);
                    }
                    self.close_paren(open)?;
                    Ok(ts)
                });
                self.depth = saved;
                Ok((Type::tuple(r?), self.since(open.start)))
            }
            _ => Err(self.expected("a type")),
        }
    }
}

fn starts_type(t: &Tok) -> bool {
    matches!(t, Tok::Ident(_) | Tok::LParen)
}

fn is_con_name(n: &str) -> bool {
    n.starts_with(|c: char| c.is_ascii_uppercase()) && !matches!(n, "R" | "Z" | "Bool")
}

fn int_value(n: u128, neg: bool, span: Span) -> PResult<i64> {
    if neg && n == i64::MAX as u128 + 1 {
        return Ok(i64::MIN);
    }
    if n > i64::MAX as u128 {
        return Err(Diagnostic::error(
            span,
            format!("integer literal `{n}` is out of range (the largest integer is {})", i64::MAX),
        ));
    }
    Ok(if neg { -(n as i64) } else { n as i64 })
}

fn with_pat_span(p: Pat, span: Span) -> Pat {
    match p {
        Pat::Var(n, _) => Pat::Var(n, span),
        Pat::Wild(_) => Pat::Wild(span),
        Pat::Unit(_) => Pat::Unit(span),
        Pat::Tuple(ps, _) => Pat::Tuple(ps, span),
    }
}

/// `\p1 -> \p2 -> ... -> body`, each lambda spanning from its pattern to `end`.
fn lams(kind: LamKind, pats: Vec<Pat>, body: Expr, end: u32) -> Expr {
    let mut e = body;
    for p in pats.into_iter().rev() {
        let span = Span { start: p.span().start, end };
        e = Expr::new(ExprKind::Lam(kind, Box::new((p, e))), span);
    }
    e
}
