//! The local accumulation monad `EVM Γ τ` (§4.2, §5 Table 2) in direct style: one accumulator per
//! run, a persistent map `EMap Γ` (§4.2) or a mutable stack of cells `EArr Γ` (§5), with `one`,
//! `push0`/`pop` (the two halves of `scope`) and `run`. Every event is a step of the accumulation
//! tape (the stage's trace), with the entries after it.

use super::ops::Op;
use super::source::CT;
use super::ct_tree::ct_rows;
use super::runtime::{arg, internal, ir_tuple, log_steps, plus, show_ct, this_op, unit, zero, Acc, Repr, Rt};
use crate::diag::Span;
use crate::interp::{Machine, RunError, Shown, TraceStep};
use crate::value::Value;
use crate::kit::pmap::PMap;

/// The accumulator's cells as trace rows (absent map entries shown as `·`, meaning 0), each
/// sparse cotangent followed by its tree (`ct_rows`).
fn rows(rt: &Rt) -> Vec<(String, Shown)> {
    let mut out = vec![];
    for (i, n) in rt.names.iter().enumerate() {
        let v = match &rt.acc {
            Acc::Map(mp) => mp.get(&i),
            Acc::Cells(cs) => cs.get(i),
            Acc::None => None,
        };
        match v {
            Some(v) => ct_rows(n, v, &mut out),
            None if matches!(rt.acc, Acc::Map(_)) => out.push((n.clone(), Shown::text("·"))),
            None => out.push((n.clone(), Shown::default())),
        }
    }
    out
}

pub(super) fn event(m: &mut Machine, kind: &str, note: impl FnOnce() -> String, span: Span) {
    event_at(m, kind, note, span, None);
}

/// An event at a node of the stage's graph (chad/arrays: a BOne, a Tree node, a collect).
/// The note is written only when the run is traced (a bench's or a check's run is not: the note of
/// `run`'s result shows every cotangent, issue 13).
pub(super) fn event_at(m: &mut Machine, kind: &str, note: impl FnOnce() -> String, span: Span, node: Option<u64>) {
    if m.tracing() {
        let node = node.or_else(|| super::bp_tree::current(m));
        let state = rows(m.state::<Rt>());
        m.trace(TraceStep { kind: kind.into(), node, span: Some(span), factor: None, note: note(), state, ..TraceStep::default() });
    }
}

/// `one_{x:τ∈Γ} v`: `modify_x (v +)` on the map (⌈log2 n⌉ steps) or on x's cell (O(1)).
pub(super) fn b_one_m(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::OneM { pos, var, .. } = &*this_op(m)? else { return Err(internal(span, "one")) };
    let v = arg(args);
    let acc = std::mem::take(&mut m.state::<Rt>().acc);
    let (before, after, acc) = match acc {
        Acc::Map(mut mp) => {
            m.count("map_log_steps", log_steps(mp.size()));
            let before = mp.get(pos).cloned();
            let after = match &before {
                Some(b) => plus(m, b.clone(), v.clone())?,
                None => v.clone(),
            };
            mp.insert_mut(*pos, after.clone());
            (before.filter(|_| m.tracing()).map(|b| show_ct(&b)), after, Acc::Map(mp))
        }
        Acc::Cells(mut cs) => {
            m.count("cell_ops", 1);
            // the cell is moved into +, not copied: a Bag in it may then grow in place (§8.1)
            let Some(slot) = cs.get_mut(*pos) else { return Err(internal(span, "one on a cell not in scope")) };
            let b = std::mem::replace(slot, Value::Unit);
            let before = m.tracing().then(|| show_ct(&b));
            let after = plus(m, b, v.clone())?;
            cs[*pos] = after;
            let after = if m.tracing() { cs[*pos].clone() } else { Value::Unit };
            (before, after, Acc::Cells(cs))
        }
        Acc::None => return Err(internal(span, "one outside run")),
    };
    m.state::<Rt>().acc = acc;
    if m.tracing() {
        super::bp_tree::write(m, var);
        let before = before.unwrap_or_else(|| "·".into());
        // a BOne added into a cell is the step at its node in chad/arrays's graph
        let node = match super::bags::as_bag(&v).map(|b| &**b) {
            Some(super::bags::Bag::One(.., serial)) if *serial > 0 => Some(*serial),
            _ => None,
        };
        event_at(m, "one", || format!("one {var} += {} ({before} → {})", show_ct(&v), show_ct(&after)), span, node);
    }
    Ok(unit())
}

/// `push0`: opens x's entry (a zero cell on the stack; on a map only the type changes, the zero
/// is elided, Fig. 6).
pub(super) fn b_push(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::Push { var, ct } = &*this_op(m)? else { return Err(internal(span, "push0")) };
    let z = zero(m, ct, Repr::Sparse);
    let rt = m.state::<Rt>();
    rt.names.push(var.to_string());
    let mutable = match &mut rt.acc {
        Acc::Map(_) => false,
        Acc::Cells(cs) => {
            cs.push(z);
            true
        }
        Acc::None => return Err(internal(span, "push0 outside run")),
    };
    if mutable {
        m.count("cell_ops", 1);
    }
    event(m, "scope-push", || format!("scope push {var}"), span);
    Ok(unit())
}

/// `pop`: closes the innermost entry and returns its value (⌈log2 n⌉ map steps, or O(1)).
pub(super) fn b_pop(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::Pop { var, ct } = &*this_op(m)? else { return Err(internal(span, "pop")) };
    let z = zero(m, ct, Repr::Sparse);
    let acc = std::mem::take(&mut m.state::<Rt>().acc);
    let pos = m.state::<Rt>().names.len().checked_sub(1).ok_or_else(|| internal(span, "pop of no entry"))?;
    let (v, acc) = match acc {
        Acc::Map(mp) => {
            m.count("map_log_steps", log_steps(mp.size()));
            let v = mp.get(&pos).cloned().unwrap_or(z);
            (v, Acc::Map(mp.remove(&pos)))
        }
        Acc::Cells(mut cs) => {
            m.count("cell_ops", 1);
            (cs.pop().unwrap_or(z), Acc::Cells(cs))
        }
        Acc::None => return Err(internal(span, "pop outside run")),
    };
    {
        let rt = m.state::<Rt>();
        rt.acc = acc;
        rt.names.pop();
    }
    event(m, "scope-pop", || format!("scope pop {var} → {}", show_ct(&v)), span);
    Ok(v)
}

/// A fresh accumulator for Γ, at zero: cells (§5) or the empty map (§4.2).
fn fresh_acc(m: &mut Machine, g: &[(String, CT)]) -> Acc {
    if m.state::<Rt>().mutable {
        m.count("cell_ops", g.len() as u64);
        Acc::Cells(g.iter().map(|(_, ct)| zero(m, ct, Repr::Sparse)).collect())
    } else {
        Acc::Map(PMap::new())
    }
}

/// Γ̄: each entry of the accumulator, absent ones as zeros.
fn read_out(m: &mut Machine, acc: &Acc, g: &[(String, CT)]) -> Vec<Value> {
    let mut out = vec![];
    for (i, (_, ct)) in g.iter().enumerate() {
        out.push(match acc {
            Acc::Map(mp) => match mp.get(&i) {
                Some(v) => v.clone(),
                None => zero(m, ct, Repr::Sparse),
            },
            Acc::Cells(cs) => cs.get(i).cloned().unwrap_or(Value::Unit),
            Acc::None => Value::Unit,
        });
    }
    out
}

/// Sets the running accumulator aside and starts one for Γ at zero.
fn open(m: &mut Machine, g: &[(String, CT)]) {
    let acc = fresh_acc(m, g);
    let rt = m.state::<Rt>();
    let outer = (std::mem::replace(&mut rt.acc, acc), std::mem::replace(&mut rt.names, g.iter().map(|(n, _)| n.clone()).collect()));
    rt.saved.push(outer);
}

/// Γ̄ read out of the running accumulator.
fn current(m: &mut Machine, g: &[(String, CT)]) -> Vec<Value> {
    let acc = std::mem::take(&mut m.state::<Rt>().acc);
    let out = read_out(m, &acc, g);
    m.state::<Rt>().acc = acc;
    out
}

/// Restores the accumulator set aside.
fn restore(m: &mut Machine) {
    let rt = m.state::<Rt>();
    let (acc, names) = rt.saved.pop().unwrap_or_default();
    rt.acc = acc;
    rt.names = names;
}

/// `run m` from `⟨0_{τ1}, …, 0_{τn}⟩`: the handler (Table 2), returning `⟨result, Γ̄⟩`.
pub(super) fn b_run(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::Run(g) = &*this_op(m)? else { return Err(internal(span, "run")) };
    let thunk = arg(args);
    open(m, g);
    event(m, "run", || "run: the accumulator starts at zero".into(), span);
    let r = m.apply(thunk, unit())?;
    let out = current(m, g);
    event(m, "result", || format!("result ⟨{}, ⟨{}⟩⟩", show_ct(&r), out.iter().map(show_ct).collect::<Vec<_>>().join(", ")), span);
    restore(m);
    Ok(Value::pair(r, ir_tuple(out)))
}

/// The first half of `run` in a closed function's backpropagator (App. C): its parameter's cells,
/// at zero, on top of the caller's (set aside).
pub(super) fn b_run_open(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::RunOpen(g) = &*this_op(m)? else { return Err(internal(span, "runOpen")) };
    m.count("body_backprops", 1);
    open(m, g);
    event(m, "run", || format!("run: a closed function's backpropagator, its parameter {} at zero", g.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")), span);
    Ok(unit())
}

/// The second half: the parameter's cotangent read out, the caller's accumulator back.
pub(super) fn b_run_close(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::RunClose(g) = &*this_op(m)? else { return Err(internal(span, "runClose")) };
    let out = current(m, g);
    event(m, "result", || format!("the closed function's argument cotangent ⟨{}⟩ returned", out.iter().map(show_ct).collect::<Vec<_>>().join(", ")), span);
    restore(m);
    Ok(ir_tuple(out))
}
