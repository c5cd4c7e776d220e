//! What the three symbolic stages share: the gradient program from dual-arrays' output (§7.1–7.3),
//! the shareToLet of a gradient program (§7.4–7.5), and the run that reports the program's size.

use super::symbolic::{extract, program, show, tree_size, Reverse};
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Machine, RunError};
use crate::ir::*;
use crate::print::{print_expr, PrintOptions};
use crate::stage::{Output, RunCtx, Source, View, WRAPPER};
use crate::value::Value;

fn wrapper_of<'a>(src: &'a Source) -> Result<&'a Def, Diagnostic> {
    src.program.def(WRAPPER).ok_or_else(|| Diagnostic::error(Span::NONE, "the input has no wrapper `grad`"))
}

/// The gradient program of §7.2 (`share` false) or §7.3 (`share` true), from dual-arrays' `grad`.
pub fn symbolic_output(src: &Source, share: bool) -> Result<Output, Diagnostic> {
    let grad = wrapper_of(src)?;
    let mut fr = Fresh::new(src.program);
    let ex = extract(&grad.body, &mut fr)?;
    let mut rev = Reverse::new(share);
    rev.trace.labels = ex.params.iter().map(|x| x.text.to_string()).collect();
    let grads = rev.run(&ex.roots, ex.params.len(), &mut fr)?;
    // the passes after this one (types, printer, shareToLet) recurse on a term's nesting, which the
    // reverse pass makes as deep as the Delta: refuse what is deeper than the bracket budget
    let deepest = grads.iter().flatten().map(|g| rev.tree_size_depth(g).1).max().unwrap_or(0);
    if deepest > crate::limits::max_brackets() {
        return Err(Diagnostic::error(
            Span::NONE,
            format!("the gradient term nests {deepest} deep, past the bracket budget ({}) that printing and typing it need", crate::limits::max_brackets()),
        )
        .refused());
    }
    let grads = rev.expand_all(grads);
    let body = program(&ex, vec![], grads);
    let mut p = src.program.with_defs(vec![def(WRAPPER, body)]);
    p.next_id = fr.next_id;
    let steps = std::mem::take(&mut rev.trace.kept);
    // (the views only for a stage shown: printing every extracted let is most of a small program's time)
    let views = if crate::stage::shown() {
        let o = PrintOptions::unicode();
        let lets: Vec<String> = ex.binds.iter().map(|(x, t)| format!("let {} = {}", x.text, print_expr(t, &o).split_whitespace().collect::<Vec<_>>().join(" "))).collect();
        let ids: Vec<String> = (1..=ex.ids).map(|i| format!("id{i} ← genID")).collect();
        let text = format!(
            "do {}\n   {}\n   return ({}, {})",
            lets.join("\n   "),
            ids.join("; "),
            print_expr(&ex.primal, &o),
            match ex.roots.as_slice() {
                [(_, d)] => show(d),
                rs => format!("({})", rs.iter().map(|r| show(&r.1)).collect::<Vec<_>>().join(", ")),
            }
        );
        vec![
            View { name: "Delta extraction by simplification (Eq. 6)".into(), text, ..View::default() },
            View { name: "symbolic reverse pass".into(), text: rev.steps.join("\n"), ..View::default() },
        ]
    } else {
        vec![]
    };
    Ok(Output { program: p, builtins: super::runtime::gradient_builtins(), views, steps })
}

/// shareToLet (Fig. 20) of symbolic-share's program and the final wrapper (Fig. 21): every
/// `share i t` / `shared i` becomes a variable `shared_i`, bound once above the gradient tuple.
pub fn share_to_let_output(src: &Source) -> Result<Output, Diagnostic> {
    let grad = wrapper_of(src)?;
    let mut fr = Fresh::new(src.program);
    // grad = \(input, seed) -> let pat = input in let primal lets in (primal, grads)
    let ExprKind::Lam(k, io_body) = &grad.body.kind else { return Err(Diagnostic::error(Span::NONE, "`grad` is not a function")) };
    let (io, body) = &**io_body;
    let mut lets = vec![];
    let mut cur = body;
    while let ExprKind::Let(p_rhs_rest) = &cur.kind {
        let (p, rhs_rest) = &**p_rhs_rest;
        let (rhs, rest) = rhs_rest;
        lets.push((p.clone(), rhs.clone()));
        cur = rest;
    }
    let ExprKind::Tuple(parts) = &cur.kind else { return Err(Diagnostic::error(Span::NONE, "`grad` does not end in (primal, gradient)")) };
    // `shared i` reads the share i bound before it: read it as that share (the map is threaded)
    let mut g = parts[1].clone();
    resolve_shared(&mut g);
    let (binds, gs) = super::symbolic::share_to_let(vec![g], &mut fr);
    let mut out = pair(parts[0].clone(), gs.into_iter().next().unwrap_or_else(unit));
    for (_, x, t) in binds.into_iter().rev() {
        out = let_(pvar(&x), t, out);
    }
    for (p, rhs) in lets.into_iter().rev() {
        out = let_(p, rhs, out);
    }
    let mut p = src.program.with_defs(vec![def(WRAPPER, Expr::gen(ExprKind::Lam(*k, Box::new((io.clone(), out)))))]);
    p.next_id = fr.next_id;
    Ok(Output::from(p))
}

/// Replaces `shared i` by a `share i _` marker that unshare maps to the variable bound for i.
pub fn resolve_shared(t: &mut Expr) {
    let mut stack = vec![t];
    while let Some(y) = stack.pop() {
        if let Some(id) = super::symbolic::shared_id(y) {
            *y = apps(builtin("share"), [int(id), unit()]);
            continue;
        }
        stack.extend(children_mut(y));
    }
}

/// The size of the gradient program (`grad`'s body as a tree: `shared i` counts one node).
pub fn gradient_size(p: &Program) -> u64 {
    p.def(WRAPPER).map(|d| tree_size(&d.body)).unwrap_or(0)
}

/// `gradient_size` of the program a run let go once lowered (`runtime::keep_from_program`).
#[derive(Default)]
pub struct KeptSize(pub Option<u64>);

/// Runs the wrapper and reports the size of the gradient program as the counter `gradient_size`.
pub fn run_reporting_size(m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
    let size = match m.program() {
        Some(p) => gradient_size(p),
        None => m.state::<KeptSize>().0.unwrap_or(0),
    };
    m.count("gradient_size", size);
    run_in_input_shape(m, cx)
}

/// Runs the wrapper; the gradient comes back in the input's shape (`restore_empty_dimensions`).
pub fn run_in_input_shape(m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
    let (primal, grad) = crate::stage::run_wrapper(m, cx.input, cx.seed)?;
    Ok((primal, restore_empty_dimensions(&grad, cx.input)))
}

/// The gradient with the inner dimensions an empty array lost put back as zeros, in the input's
/// shape. Nested arrays cannot represent a k×0 (or 0×k) array: an empty array carries no inner
/// length, so `sumOuter`/`tr` of one cannot give back k (`sumOuter` of a 0×k array is `[]`, not k
/// zeros). Whatever passes through such an array contributes nothing, so the cotangent positions it
/// loses are exactly zero, and only those are filled (a found property-test case: `map (\_ -> …) []`
/// as the output, with a matrix input).
fn restore_empty_dimensions(grad: &Value, input: &Value) -> Value {
    match (grad, input) {
        (Value::Array(gs), Value::Array(xs)) if gs.len() <= xs.len() => Value::Array(
            xs.iter()
                .enumerate()
                .map(|(i, x)| match gs.get(i) {
                    Some(g) => restore_empty_dimensions(g, x),
                    None => x.with_reals(&mut std::iter::repeat(0.0)),
                })
                .collect(),
        ),
        // `sumOuter` of a 0×() array: [] where the scalar 0 is meant
        (Value::Array(gs), x) if gs.is_empty() && !matches!(x, Value::Array(_)) => x.with_reals(&mut std::iter::repeat(0.0)),
        // and the scalar zero where an input array is meant (runtime.rs: the zero of unknown shape):
        // an output that drops all of it, `shift1R [v]` of one row, sends back a cotangent of no rows,
        // whose `scatter` and `sumOuter` cannot know the row's length (wide-run seeds 3442, 3483, 4874)
        (Value::Real(z), x @ Value::Array(_)) if *z == 0.0 => x.with_reals(&mut std::iter::repeat(0.0)),
        // an input array with no reals inside (`[[], [], []]`): its only cotangent is itself, zeroed,
        // whatever shape of zeros the reverse pass made of its lost inner dimension
        (g, x @ Value::Array(_)) if x.real_leaves().is_empty() && g.real_leaves().iter().all(|r| *r == 0.0) => x.clone(),
        (Value::Tuple(gs), Value::Tuple(xs)) if gs.len() == xs.len() => {
            Value::Tuple(gs.iter().zip(xs.iter()).map(|(g, x)| restore_empty_dimensions(g, x)).collect())
        }
        _ => grad.clone(),
    }
}
