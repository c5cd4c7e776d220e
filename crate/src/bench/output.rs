//! How bench rows are printed (a table line, or one JSON object per line, each as the row finishes),
//! and the `program-size` family, which times the pipeline's preparation rather than runs.

use super::Row;
use cotangent::interp::{Budget, Builtins};
use cotangent::pipeline::{self, Options};
use cotangent::stage::{Source, Stage};
use cotangent::stages;
use cotangent::value::json_real;

pub fn header() -> String {
    format!(
        "{:<13} {:>7} {:<22} {:>9} {:>10} {:>10} {:>7} {:>9} {:>9} {:>8}  {:<28} counters",
        "family", "n", "stage", "ops", "primal s", "grad s", "ratio", "primal ns", "grad ns", "B/op", "outcome"
    )
}

fn num(x: f64, prec: usize) -> String {
    if x.is_finite() {
        format!("{x:.prec$}")
    } else {
        "-".into()
    }
}

pub fn table_line(r: &Row) -> String {
    let counters: Vec<String> = r.counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let bytes = r.bytes.map_or("-".into(), |b| num(r.per_op(b as f64), 0));
    format!(
        "{:<13} {:>7} {:<22} {:>9} {:>10} {:>10} {:>7} {:>9} {:>9} {:>8}  {:<28} {}",
        r.family,
        r.n,
        r.stage,
        r.ops,
        num(r.primal_secs, 6),
        num(r.grad_secs, 6),
        num(r.ratio(), 2),
        num(r.per_op(r.primal_secs * 1e9), 1),
        num(r.per_op(r.grad_secs * 1e9), 1),
        bytes,
        r.outcome,
        counters.join(" ")
    )
}

/// One row as one JSON object (the fields every row carries, then its counters).
pub fn json_line(r: &Row) -> String {
    let mut o = serde_json::json!({
        "family": r.family, "stage": r.stage, "n": r.n, "ops": r.ops, "outcome": r.outcome,
        "primal_secs": json_real::value(r.primal_secs), "grad_secs": json_real::value(r.grad_secs),
        "primal_ns_per_op": json_real::value(r.per_op(r.primal_secs * 1e9)),
        "grad_ns_per_op": json_real::value(r.per_op(r.grad_secs * 1e9)),
        "ratio": json_real::value(r.ratio()),
        "bytes_per_op": r.bytes.map(|b| json_real::value(r.per_op(b as f64))),
    });
    for (k, v) in &r.counters {
        o[k] = serde_json::json!(v);
    }
    o.to_string()
}

/// The growth exponents of the program-size rows: table lines, or JSON objects with `exponent`.
pub fn exponent_lines(rows: &[Row], json: bool) -> Vec<String> {
    let exps = exponents(rows);
    if json {
        return exps.iter().map(|(f, st, k)| serde_json::json!({ "family": f, "stage": st, "exponent": json_real::value(*k) }).to_string()).collect();
    }
    let mut out = vec![];
    if !exps.is_empty() {
        out.push("\ngrowth exponents (time ∝ n^k, least squares over the sizes run):".to_string());
        for (f, st, k) in exps {
            out.push(format!("  {f:<13} {st:<22} k = {k:.2}"));
        }
    }
    out
}

/// One size of the `program-size` family: a row for the front end (its time as `grad s`), then one
/// per stage with the time of its preparation (transform, print, type check of the output; a stage
/// that follows another is timed on its own, the one before it being prepared first), in seconds on
/// `clock` (the thread's CPU clock with `--cpu`).
pub fn program_size(text: &str, n: usize, chosen: &[&'static dyn Stage], budget: &Budget, clock: fn() -> f64, emit: &mut dyn FnMut(&Row)) {
    let row = |stage: &str, outcome: String, counters: Vec<(String, u64)>, secs: f64| Row {
        family: "program-size".into(),
        n,
        stage: stage.into(),
        outcome,
        counters,
        ops: n as u64,
        primal_secs: f64::NAN,
        grad_secs: secs,
        bytes: None,
    };
    let t0 = clock();
    let (program, s, t) = match pipeline::front_end(text, &[]) {
        Ok(x) => x,
        Err(ds) => return emit(&row("(front end)", format!("refused: {}", ds[0].message), vec![], f64::NAN)),
    };
    emit(&row("(front end)", "ok".into(), vec![("bytes".into(), text.len() as u64)], clock() - t0));
    let no_builtins = Builtins::new();
    let src = Source { program: &program, input_type: &s, output_type: &t, builtins: &no_builtins };
    let opts = Options { trace: false, budget: budget.clone(), ..Options::default() };
    let outputs = pipeline::Outputs::new(&src, &opts);
    for st in chosen {
        if let cotangent::stage::Input::After(before) = st.input() {
            if let Some(prev) = stages::find(before) {
                let _ = outputs.get(prev);
            }
        }
        let t1 = clock();
        let got = outputs.get(*st);
        let secs = clock() - t1;
        emit(&match got {
            Ok(p) => row(st.info().id, "ok".into(), vec![("printed_bytes".into(), p.printed.as_ref().map_or(0, |t| t.len()) as u64)], secs),
            Err(d) => row(st.info().id, format!("refused: {}", d.message.lines().next().unwrap_or("")), vec![], f64::NAN),
        });
    }
}

/// The growth exponent of each (family, stage)'s time in n: the least-squares slope of log time
/// against log n over the sizes it ran at (the program-size family's figure; time ∝ n^k).
fn exponents(rows: &[Row]) -> Vec<(String, String, f64)> {
    let mut keys: Vec<(String, String)> = vec![];
    for r in rows.iter().filter(|r| r.family == "program-size") {
        let k = (r.family.clone(), r.stage.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|(f, st)| {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.family == f && r.stage == st && r.grad_secs.is_finite() && r.grad_secs > 0.0)
                .map(|r| ((r.n as f64).ln(), r.grad_secs.ln()))
                .collect();
            if pts.len() < 2 {
                return None;
            }
            let m = pts.len() as f64;
            let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / m, pts.iter().map(|p| p.1).sum::<f64>() / m);
            let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
            let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
            (sxx > 0.0).then(|| (f, st, sxy / sxx))
        })
        .collect()
}
