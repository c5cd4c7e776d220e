//! The chain of continuations of a continuation-passing gradient (`unf/direct`, `unf/back`): this
//! paper's analogue of the Delta DAG is a line Y, Y1, Y2, … where each continuation calls the one
//! before it, passing the cotangent stack on, identity except in at most two slots (Insight 2,
//! §3.3). The line is read off the printed program (every continuation is `let`-bound to a name
//! `Y<k>`, Lemma 5.1: each is used once); the stepper is the machine's record of the calls
//! (`Machine::trace_calls`), each with the stack it was given.

use crate::interp::{Graph, GraphEdge, GraphNode, Machine, RunError};
use crate::ir::*;
use crate::print::{print_expr, PrintOptions};
use crate::stage::{run_wrapper, RunCtx, WRAPPER};
use crate::value::Value;

/// A continuation-passing stage's run: the wrapper, with every continuation call recorded (the
/// stepper follows the cotangent stack from `Y<k>` down to `Id`).
pub fn run(m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
    m.trace_calls(continuation_node);
    run_wrapper(m, cx.input, cx.seed)
}

/// A continuation-passing stage's graph: its line of continuations, read off the program it ran.
pub fn graph(m: &mut Machine) -> Option<Graph> {
    m.program().map(continuation_line)
}

/// Nodes drawn at most; the rest are counted in `Graph::omitted`.
const MAX_NODES: usize = 2_000;
/// Characters of a slot's update shown in a node's label.
const MAX_UPDATE: usize = 48;

/// The graph node of a continuation, by its name: `Y<k>` is node k, the wrapper's `Id` node 0.
pub fn continuation_node(name: &str) -> Option<u64> {
    if name == "Id" {
        return Some(0);
    }
    name.strip_prefix('Y').filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit())).and_then(|k| k.parse().ok())
}

/// The line of continuations of the wrapper of `p`: one node per continuation, labelled with the
/// slots it changes, and an edge to the continuation it calls.
pub fn continuation_line(p: &Program) -> Graph {
    let mut g = Graph::default();
    let Some(def) = p.defs.iter().find(|d| &*d.name.text == WRAPPER) else { return g };
    let mut seen = rustc_hash::FxHashSet::default();
    let mut stack = vec![&def.body];
    while let Some(e) = stack.pop() {
        if let ExprKind::Let(pat_rhs_pair) = &e.kind {
            let (pat, rhs_pair) = &**pat_rhs_pair;
            let (rhs, _) = rhs_pair;
            let mut pairs = vec![(pat, rhs)];
            while let Some((q, mut r)) = pairs.pop() {
                // `let (x, Y) = (let … in (e, λ…))`: the value is the let chain's last body
                while let ExprKind::Let(body_pair_x) = &r.kind {
                    let (_, body_pair) = &**body_pair_x;
                    let (_, body) = body_pair;
                    r = body;
                }
                match (q, &r.kind) {
                    (Pat::Var(n, _), ExprKind::Lam(_, params_body)) => {
                        let (params, body) = &**params_body;
                        if let Some(id) = continuation_node(&n.text) {
                            if !seen.insert(id) {
                                continue;
                            }
                            if g.nodes.len() >= MAX_NODES {
                                g.omitted += 1;
                                continue;
                            }
                            let (label, calls) = describe(&n.text, params, body);
                            g.nodes.push(GraphNode {
                                id,
                                ctor: "continuation".into(),
                                label,
                                span: (!r.span.is_none()).then_some(r.span),
                                ..GraphNode::default()
                            });
                            if let Some(to) = calls {
                                g.edges.push(GraphEdge { from: id, to, label: "calls".into() });
                            }
                        }
                    }
                    (Pat::Tuple(qs, _), ExprKind::Tuple(rs)) if qs.len() == rs.len() => pairs.extend(qs.iter().zip(rs.iter())),
                    _ => {}
                }
            }
        }
        each_child(e, &mut |c| stack.push(c));
    }
    g.nodes.sort_by_key(|n| std::cmp::Reverse(n.id));
    g
}

/// A continuation's label (its name and the slots it does not pass on unchanged) and the node it calls.
fn describe(name: &str, params: &Pat, body: &Expr) -> (String, Option<u64>) {
    let names: Vec<&str> = match params {
        Pat::Tuple(ps, _) => ps.iter().map(|q| if let Pat::Var(v, _) = q { &*v.text } else { "_" }).collect(),
        Pat::Var(v, _) => vec![&*v.text],
        _ => vec![],
    };
    // `λ(…, y4) → let (z1, z2) = y4 in Y4 (…)`: the call ends the let chain
    let mut body = body;
    while let ExprKind::Let(rest_pair_x) = &body.kind {
        let (_, rest_pair) = &**rest_pair_x;
        let (_, rest) = rest_pair;
        body = rest;
    }
    let ExprKind::App(f_arg) = &body.kind else {
        return (format!("{name}: returns the cotangents"), None);
    };
    let (f, arg) = &**f_arg;
    let ExprKind::Var(callee) = &f.kind else { return (name.to_string(), None) };
    let args: Vec<&Expr> = match &arg.kind {
        ExprKind::Tuple(es) => es.iter().collect(),
        _ => vec![arg],
    };
    if !crate::stage::shown() {
        // not shown (the page draws it when it is selected, run again): the shape, not the text
        return (name.to_string(), continuation_node(&callee.text));
    }
    let o = PrintOptions::default();
    let mut changes = vec![];
    for (i, a) in args.iter().enumerate() {
        let same = matches!(&a.kind, ExprKind::Var(v) if names.get(i) == Some(&&*v.text) && names.len() != i + 1);
        if !same {
            let mut text = print_expr(a, &o).split_whitespace().collect::<Vec<_>>().join(" ");
            if text.chars().count() > MAX_UPDATE {
                text = text.chars().take(MAX_UPDATE - 1).collect::<String>() + "…";
            }
            changes.push(format!("{}: {text}", i + 1));
        }
    }
    (format!("{name} → {}: {}", callee.text, changes.join("; ")), continuation_node(&callee.text))
}
