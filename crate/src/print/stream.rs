//! A long definition laid out link by link (issue 14: a 10^5-line program). A definition whose body
//! is a let chain or a do block too long for one line breaks at every link, and each link's layout
//! then depends only on its own lines: so each link is built and laid out on its own, in an arena
//! dropped after it, into the one sink. Same text as the whole document gives (test
//! `long_chains_print_link_by_link_as_one_document`), in memory proportional to the largest link
//! instead of to the program. Not with `map` (the page's line-to-source map, for its small programs):
//! that keeps the whole document, whose annotations it reads.
//!
//! A long chain nested inside the body (a stage's do block under `runIds (let x = … in do { … })`)
//! is laid out the same way (`hole`): the document is built with a marker line where its links go,
//! and each link is laid out on its own at the marker's indentation. Its links always break (it
//! cannot fit on a line), so what surrounds it sees the same first and last lines either way.

use super::flat::Flat;
use super::lay::Lay;
use super::{bind_links, let_links, peel, CappedIndent, Laid, PrintOptions, Printer, D};
use crate::ir::{each_child, Def, Expr, ExprKind, Text};
use pretty::{Arena, DocAllocator, Render};
use rustc_hash::FxHashMap as HashMap;

/// Links (lets or binds) from which a definition's body is laid out link by link.
pub(super) const FROM: usize = 64;

/// Each link of a broken chain takes at least this many columns when flat (`a <- b; `; a let's
/// `let a = b in ` more): a chain of more links than `width / MIN_LINK` cannot fit on one line.
const MIN_LINK: usize = 7;

/// `d` laid out: link by link when its body (under its parameters) is a let chain or do block of at
/// least `from` links that cannot fit on one line, else as one document.
/// With `emit`, the lines of a definition laid out apart go to it as they are laid out (`Laid` holds
/// the rest); one laid out whole is returned whole.
pub(super) fn def(d: &Def, o: &PrintOptions, names: &HashMap<u32, Text>, map: bool, from: usize, emit: Option<&mut dyn FnMut(String)>) -> Laid {
    let (ps, body) = peel(&d.body);
    let do_block = matches!(body.kind, ExprKind::Bind(..));
    let (links, tail) = if do_block { bind_links(body) } else { let_links(body) };
    if map || links.len() < from || links.len().saturating_mul(MIN_LINK) <= o.width {
        let holes = if map { vec![] } else { long_chains(&d.body, o, from) };
        if !holes.is_empty() {
            return hole(d, o, names, &holes, emit);
        }
        let arena = Arena::new();
        let pr = Printer::new(&arena, *o, names, None);
        return pr.render_mapped(pr.def(d), o.width, map);
    }
    let mut out = CappedIndent::streaming(emit);
    // `def f p1 … pn =` (Printer::def and equation, whose group breaks before the body)
    piece(o, names, &mut out, |pr| {
        let params = pr.a.concat(ps.iter().map(|p| pr.a.space().append(pr.pat(p))));
        pr.t("def ").append(pr.name(&d.name)).append(params).append(pr.t(" ="))
    });
    // each link on its own line(s), as Printer::let_chain and do_block break them
    let inner = if do_block { 4 } else { 2 };
    if do_block {
        piece(o, names, &mut out, |pr| pr.nested(2, || pr.a.hardline().append(pr.t("do {"))));
    }
    let mut flat = Flat::new(o, names);
    for l in links {
        link(&mut flat, l, do_block, inner, &mut out);
    }
    piece(o, names, &mut out, |pr| pr.nested(inner, || pr.a.hardline().append(pr.expr(tail, 0))));
    if do_block {
        piece(o, names, &mut out, |pr| pr.nested(2, || pr.a.hardline().append(pr.t("}"))));
    }
    out.finish()
}

/// Whether `def` lays `d` out apart (link by link, or with its long chains laid out apart): then it
/// breaks at every link, so its text has more than one line (`print_program_streamed` needs to know
/// before laying anything out). The same conditions as `def`'s.
pub(super) fn apart(d: &Def, o: &PrintOptions, map: bool, from: usize) -> bool {
    if map {
        return false;
    }
    let (_, body) = peel(&d.body);
    let (links, _) = if matches!(body.kind, ExprKind::Bind(..)) { bind_links(body) } else { let_links(body) };
    !(links.len() < from || links.len().saturating_mul(MIN_LINK) <= o.width) || !long_chains(&d.body, o, from).is_empty()
}

/// Builds one piece with its own arena and lays it out at the end of `out`.
fn piece(o: &PrintOptions, names: &HashMap<u32, Text>, out: &mut CappedIndent<'_>, build: impl for<'a> FnOnce(&Printer<'a, '_>) -> D<'a>) {
    let arena = Arena::new();
    let pr = Printer::new(&arena, *o, names, None);
    let d = build(&pr);
    pr.render_into(d, o.width, out);
}

/// Link `l` of a chain laid out apart (a statement `p ← m;` with `bind`, else `let … in`) on its own
/// line(s) at indentation `n`, as `Printer::let_chain` and `do_block` break them: written flat where
/// it fits (`Flat`), else laid out from its document.
pub(super) fn link(flat: &mut Flat<'_>, l: &Expr, bind: bool, n: usize, out: &mut CappedIndent<'_>) -> Path {
    let end = if bind { ";" } else { " in" };
    if flat.link(l, bind, end, n, out) {
        return Path::Flat;
    }
    // `Flat::link` measured the link's group (a `let`'s or a statement's) as `Lay` would first: where
    // it did not fit, `Lay` breaks it at once; where its width is not known, `Lay` would give up
    if !flat.unknown {
        let mut lay = Lay::new(flat, n);
        let laid = if bind { lay.bind_stmt(l, end.len(), true) } else { lay.let_link(l, end.len(), true) };
        if laid.and_then(|()| lay.text(end)).is_some() {
            out.push_lines(&lay.buf, &lay.breaks);
            return Path::Laid;
        }
    }
    link_doc(&flat.options(), flat.names(), l, bind, n, out);
    Path::Document
}

/// How `link` laid a link out: flat on its line, broken by `Lay`, or from its document.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Path {
    Flat,
    Laid,
    Document,
}

/// `link` laid out from its document: `nest(n, hardline · link · end)`.
pub(super) fn link_doc(o: &PrintOptions, names: &HashMap<u32, Text>, l: &Expr, bind: bool, n: usize, out: &mut CappedIndent<'_>) {
    let end = if bind { ";" } else { " in" };
    // built inside its nest, as `Printer::open` counts the indentation to cap nesting
    piece(o, names, out, |pr| {
        pr.nested(n, || {
            let link = if bind { pr.bind_stmt(l) } else { pr.let_link(l) };
            pr.a.hardline().append(link).append(pr.t(end))
        })
    });
}

/// Whether a chain of `n` links is laid out apart: long enough, and too long for one line.
fn long(n: usize, o: &PrintOptions, from: usize) -> bool {
    n >= from.max(2) && n.saturating_mul(MIN_LINK) > o.width
}

/// The first links of the long chains (lets or binds) in `body`, outermost ones: a chain's other
/// links are laid out apart, each whole; its first link (of a let chain) and its tail are in the
/// document, and their long chains too. A stack, not recursion; each chain's spine is walked once.
pub(super) fn long_chains<'e>(body: &'e Expr, o: &PrintOptions, from: usize) -> Vec<&'e Expr> {
    let mut found = vec![];
    let mut stack = vec![body];
    while let Some(e) = stack.pop() {
        let ((links, tail), lets) = match &e.kind {
            ExprKind::Let(..) => (let_links(e), true),
            ExprKind::LetRec(fs_b) if !fs_b.0.is_empty() => (let_links(e), true),
            ExprKind::Bind(..) => (bind_links(e), false),
            _ => {
                each_child(e, &mut |c| stack.push(c));
                continue;
            }
        };
        let apart = long(links.len(), o, from);
        if apart {
            found.push(e);
        }
        stack.push(tail);
        // a let hole's first link stays in the document
        let kept = if apart { usize::from(lets) } else { links.len() };
        for l in &links[..kept] {
            match &l.kind {
                ExprKind::Let(x_b_x) => { let (_, x_b) = &**x_b_x; stack.push(&x_b.0) },
                ExprKind::Bind(m_k_x) => { let (_, m_k) = &**m_k_x; stack.push(&m_k.0) },
                ExprKind::LetRec(fs_x) => { let (fs, _) = &**fs_x; stack.extend(fs.iter().map(|f| &f.body)) },
                _ => {}
            }
        }
    }
    found
}

/// The marker of hole `k` whose links are indented `n`: `\u{1}k:n` and `\u{2}`s to `width + 1`
/// bytes (control characters, which no printed program holds).
pub(super) fn marker(k: usize, n: usize, width: usize) -> String {
    let mut s = format!("\u{1}{k}:{n}");
    let pad = (width + 1).saturating_sub(s.len()).max(1);
    s.extend(std::iter::repeat_n('\u{2}', pad));
    s
}

/// `d` laid out with the long chains `holes` laid out apart: the document with a marker line for
/// each (`Printer::let_chain`, `do_block`), then, at each marker, the chain's links one by one, as
/// the document would break them (`\n`, the indentation, the link and its `;` or ` in`).
fn hole(d: &Def, o: &PrintOptions, names: &HashMap<u32, Text>, holes: &[&Expr], emit: Option<&mut dyn FnMut(String)>) -> Laid {
    let index: HashMap<usize, usize> = holes.iter().enumerate().map(|(k, e)| (*e as *const Expr as usize, k)).collect();
    let skeleton = {
        let arena = Arena::new();
        let pr = Printer::new(&arena, *o, names, Some(&index));
        pr.render(pr.def(d), o.width)
    };
    let mut out = CappedIndent::streaming(emit);
    let mut flat = Flat::new(o, names);
    let mut rest = skeleton.as_str();
    while let Some(at) = rest.find('\u{1}') {
        // the marker's line break and indentation are the first link's
        let before = rest[..at].trim_end_matches(' ');
        write_lines(&mut out, before.strip_suffix('\n').unwrap_or(before));
        let after = &rest[at + 1..];
        let end = after.find('\u{2}').unwrap_or(after.len());
        let (k, n) = after[..end].split_once(':').unwrap_or(("", ""));
        let (k, n) = (k.parse::<usize>().unwrap_or(usize::MAX), n.parse::<usize>().unwrap_or(0));
        rest = after[end..].trim_start_matches('\u{2}');
        let Some(&e) = holes.get(k) else { continue };
        if matches!(e.kind, ExprKind::Bind(..)) {
            for l in bind_links(e).0 {
                link(&mut flat, l, true, n, &mut out);
            }
        } else {
            for l in let_links(e).0.into_iter().skip(1) {
                link(&mut flat, l, false, n, &mut out);
            }
        }
    }
    write_lines(&mut out, rest);
    out.finish()
}

/// Laid-out text into `out` a line at a time, its line breaks written on their own: the sink drops
/// a line's trailing spaces when its break comes, which in one write with the line would take its
/// indentation (the renderer writes a line's text before its break).
fn write_lines(out: &mut CappedIndent<'_>, s: &str) {
    for line in s.split_inclusive('\n') {
        let text = line.strip_suffix('\n');
        let _ = out.write_str(text.unwrap_or(line));
        if text.is_some() {
            let _ = out.write_str("\n");
        }
    }
}
