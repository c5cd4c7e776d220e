//! The local accumulation monad `EVM Γ τ` (§4.2, §5 Table 2) in direct style: one accumulator per
//! run, a persistent map `EMap Γ` (§4.2) or a mutable stack of cells `EArr Γ` (§5), with `one`,
//! `push0`/`pop` (the two halves of `scope`) and `run`. Every event is a step of the accumulation
//! tape (the stage's trace), with the entries after it.

use super::ops::Op;
use super::runtime::{arg, internal, ir_tuple, log_steps, plus, show_ct, shown, this_op, unit, zero, Acc, Repr, Rt};
use crate::diag::Span;
use crate::interp::{Machine, RunError, Shown, TraceStep};
use crate::value::Value;
use rpds::RedBlackTreeMap;

/// The accumulator's cells as trace rows (absent map entries shown as `·`, meaning 0).
fn rows(rt: &Rt) -> Vec<(String, Shown)> {
    rt.names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let v = match &rt.acc {
                Acc::Map(mp) => mp.get(&i).map(shown).unwrap_or_else(|| Shown::text("·")),
                Acc::Cells(cs) => cs.get(i).map(shown).unwrap_or_default(),
                Acc::None => Shown::default(),
            };
            (n.clone(), v)
        })
        .collect()
}

fn event(m: &mut Machine, kind: &str, note: String, span: Span) {
    if m.tracing() {
        let state = rows(m.state::<Rt>());
        m.trace(TraceStep { kind: kind.into(), node: None, span: Some(span), factor: None, note, state });
    }
}

/// `one_{x:τ∈Γ} v`: `modify_x (v +)` on the map (⌈log2 n⌉ steps) or on x's cell (O(1)).
pub(super) fn b_one_m(m: &mut Machine, mut args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::OneM { pos, var, .. } = &*this_op(m)? else { return Err(internal(span, "one")) };
    let v = arg(&mut args);
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
            (before, after, Acc::Map(mp))
        }
        Acc::Cells(mut cs) => {
            m.count("cell_ops", 1);
            let Some(b) = cs.get(*pos).cloned() else { return Err(internal(span, "one on a cell not in scope")) };
            let after = plus(m, b.clone(), v.clone())?;
            cs[*pos] = after.clone();
            (Some(b), after, Acc::Cells(cs))
        }
        Acc::None => return Err(internal(span, "one outside run")),
    };
    m.state::<Rt>().acc = acc;
    let before = before.map(|b| show_ct(&b)).unwrap_or_else(|| "·".into());
    event(m, "one", format!("one {var} += {} ({before} → {})", show_ct(&v), show_ct(&after)), span);
    Ok(unit())
}

/// `push0`: opens x's entry (a zero cell on the stack; on a map only the type changes, the zero
/// is elided, Fig. 6).
pub(super) fn b_push(m: &mut Machine, _: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::Push { var, ct } = &*this_op(m)? else { return Err(internal(span, "push0")) };
    let z = zero(m, ct, Repr::Sparse);
    let rt = m.state::<Rt>();
    rt.names.push(var.clone());
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
    event(m, "scope-push", format!("scope push {var}"), span);
    Ok(unit())
}

/// `pop`: closes the innermost entry and returns its value (⌈log2 n⌉ map steps, or O(1)).
pub(super) fn b_pop(m: &mut Machine, _: Vec<Value>, span: Span) -> Result<Value, RunError> {
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
    event(m, "scope-pop", format!("scope pop {var} → {}", show_ct(&v)), span);
    Ok(v)
}

/// `run m` from `⟨0_{τ1}, …, 0_{τn}⟩`: the handler (Table 2), returning `⟨result, Γ̄⟩`.
pub(super) fn b_run(m: &mut Machine, mut args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::Run(g) = &*this_op(m)? else { return Err(internal(span, "run")) };
    let thunk = arg(&mut args);
    let mutable = m.state::<Rt>().mutable;
    let acc = if mutable {
        m.count("cell_ops", g.len() as u64);
        Acc::Cells(g.iter().map(|(_, ct)| zero(m, ct, Repr::Sparse)).collect())
    } else {
        Acc::Map(RedBlackTreeMap::new())
    };
    {
        let rt = m.state::<Rt>();
        rt.acc = acc;
        rt.names = g.iter().map(|(n, _)| n.clone()).collect();
    }
    event(m, "run", "run: the accumulator starts at zero".into(), span);
    let r = m.apply(thunk, unit())?;
    let acc = std::mem::take(&mut m.state::<Rt>().acc);
    let mut out = vec![];
    for (i, (_, ct)) in g.iter().enumerate() {
        out.push(match &acc {
            Acc::Map(mp) => match mp.get(&i) {
                Some(v) => v.clone(),
                None => zero(m, ct, Repr::Sparse),
            },
            Acc::Cells(cs) => cs.get(i).cloned().unwrap_or(Value::Unit),
            Acc::None => Value::Unit,
        });
    }
    m.state::<Rt>().acc = acc;
    event(m, "result", format!("result ⟨{}, ⟨{}⟩⟩", show_ct(&r), out.iter().map(show_ct).collect::<Vec<_>>().join(", ")), span);
    Ok(Value::pair(r, ir_tuple(out)))
}

