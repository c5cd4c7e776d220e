//! A long definition laid out link by link (issue 14: a 10^5-line program). A definition whose body
//! is a let chain or a do block too long for one line breaks at every link, and each link's layout
//! then depends only on its own lines: so each link is built and laid out on its own, in an arena
//! dropped after it, into the one sink. Same text as the whole document gives (test
//! `long_chains_print_link_by_link_as_one_document`), in memory proportional to the largest link
//! instead of to the program. Not with `map` (the page's line-to-source map, for its small programs):
//! that keeps the whole document, whose annotations it reads.

use super::{bind_links, let_links, peel, CappedIndent, Mapped, PrintOptions, Printer, D};
use crate::ir::{Def, ExprKind, Text};
use pretty::{Arena, DocAllocator};
use rustc_hash::FxHashMap as HashMap;

/// Links (lets or binds) from which a definition's body is laid out link by link.
pub(super) const FROM: usize = 64;

/// Each link of a broken chain takes at least this many columns when flat (`a <- b; `; a let's
/// `let a = b in ` more): a chain of more links than `width / MIN_LINK` cannot fit on one line.
const MIN_LINK: usize = 7;

/// `d` laid out: link by link when its body (under its parameters) is a let chain or do block of at
/// least `from` links that cannot fit on one line, else as one document.
pub(super) fn def(d: &Def, o: &PrintOptions, names: &HashMap<u32, Text>, map: bool, from: usize) -> Mapped {
    let (ps, body) = peel(&d.body);
    let do_block = matches!(body.kind, ExprKind::Bind(..));
    let (links, tail) = if do_block { bind_links(body) } else { let_links(body) };
    if map || links.len() < from || links.len().saturating_mul(MIN_LINK) <= o.width {
        let arena = Arena::new();
        let pr = Printer { a: &arena, o: *o, names };
        return pr.render_mapped(pr.def(d), o.width, map);
    }
    let mut out = CappedIndent::new(false);
    // `def f p1 … pn =` (Printer::def and equation, whose group breaks before the body)
    piece(o, names, &mut out, |pr| {
        let params = pr.a.concat(ps.iter().map(|p| pr.a.space().append(pr.pat(p))));
        pr.t("def ").append(pr.name(&d.name)).append(params).append(pr.t(" ="))
    });
    // each link on its own line(s), as Printer::let_chain and do_block break them
    let inner = if do_block { 4 } else { 2 };
    if do_block {
        piece(o, names, &mut out, |pr| pr.a.hardline().append(pr.t("do {")).nest(2));
    }
    for l in links {
        piece(o, names, &mut out, |pr| {
            let (link, end) = if do_block { (pr.bind_stmt(l), pr.t(";")) } else { (pr.let_link(l), pr.t(" in")) };
            pr.a.hardline().append(link).append(end).nest(inner)
        });
    }
    piece(o, names, &mut out, |pr| pr.a.hardline().append(pr.expr(tail, 0)).nest(inner));
    if do_block {
        piece(o, names, &mut out, |pr| pr.a.hardline().append(pr.t("}")).nest(2));
    }
    out.finish()
}

/// Builds one piece with its own arena and lays it out at the end of `out`.
fn piece(o: &PrintOptions, names: &HashMap<u32, Text>, out: &mut CappedIndent, build: impl for<'a> FnOnce(&Printer<'a, '_>) -> D<'a>) {
    let arena = Arena::new();
    let pr = Printer { a: &arena, o: *o, names };
    let d = build(&pr);
    pr.render_into(d, o.width, out);
}
