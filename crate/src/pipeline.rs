//! The pipeline: source text → parse → types → each stage's transform → type check of its output
//! → print → interpret → gradient, checked against `forward` and finite differences.

use crate::diag::{Diagnostic, Span};
use crate::interp::{Budget, Builtins, Cost, Graph, Machine, RunError, TraceStep};
use crate::ir::{ExpectKind, Program, Type};
use crate::print::{print_program, PrintOptions};
use crate::stage::{Source, Stage};
use crate::value::Value;
use crate::{stages, syntax, types};
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct Options {
    /// Overrides the program's `input`.
    pub at: Option<String>,
    /// The output cotangent; default 1.0 on every real leaf of the output.
    pub seed: Option<String>,
    /// `param` overrides.
    pub params: Vec<(String, i64)>,
    /// Stage ids to run; empty means every stage that accepts the program.
    pub stages: Vec<String>,
    pub budget: Budget,
    pub print: PrintOptions,
    /// Record backward-pass traces.
    pub trace: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { at: None, seed: None, params: vec![], stages: vec![], budget: Budget::default(), print: PrintOptions::default(), trace: true }
    }
}

/// Relative tolerance of the agreement check with `forward` (scale floored at 1).
pub const AGREE_TOL: f64 = 1e-9;

#[derive(Clone, Debug, Serialize)]
pub struct Reference {
    /// `forward`'s gradient: the cotangent of every real leaf of the input, left to right.
    pub gradient: Vec<f64>,
    /// Central finite differences, an independent check.
    pub fd: Vec<f64>,
    /// Whether forward and finite differences agree (to 1e-5 relative; kinks and cancellation can differ).
    pub fd_agrees: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct StageResult {
    pub id: String,
    /// Transformed and ran without error.
    pub ok: bool,
    /// The stage refused the program (a construct its method cannot handle), with a located message.
    pub refused: bool,
    pub error: Option<String>,
    pub error_span: Option<Span>,
    pub program: String,
    #[serde(skip)]
    pub primal: Option<Value>,
    #[serde(skip)]
    pub gradient_value: Option<Value>,
    pub gradient: Vec<f64>,
    pub agrees: Option<bool>,
    pub cost: Cost,
    pub trace: Vec<TraceStep>,
    pub trace_dropped: u64,
    pub graph: Option<Graph>,
}

pub struct Analysis {
    pub program: Program,
    pub input_type: Type,
    pub output_type: Type,
    pub input: Value,
    pub seed: Value,
    pub primal: Value,
    pub reference: Option<Reference>,
    pub stages: Vec<StageResult>,
}

/// Parses and type-checks a source program, and finds `main : S → T` with S, T first-order.
pub fn front_end(text: &str, params: &[(String, i64)]) -> Result<(Program, Type, Type), Vec<Diagnostic>> {
    let mut p = syntax::parse_program(text)?;
    for (name, value) in params {
        match p.params.iter_mut().find(|q| &*q.name.text == name) {
            Some(q) => q.value = *value,
            None => return Err(vec![Diagnostic::error(Span::NONE, format!("the program has no `param {name}`"))]),
        }
    }
    let mut p = crate::stage::without_reserved(&p, crate::stage::RESERVED);
    types::check_program(&mut p, &Builtins::new()).map_err(|d| vec![d])?;
    let main = p.def("main").ok_or_else(|| vec![Diagnostic::error(Span::NONE, "the program has no `def main`")])?;
    let scheme = main.scheme.clone().unwrap_or_else(|| crate::ir::Scheme::mono(Type::Unknown));
    // Unconstrained parts of main's type default to R.
    let ty = types::rename(&scheme.ty, &mut |_| Type::Real);
    let (s, t) = match ty {
        Type::Fun(s, t) => (*s, *t),
        other => {
            return Err(vec![Diagnostic::error(
                main.span,
                format!("`main` must be a function of one argument, but has type {}", types::show(&other)),
            )])
        }
    };
    if !s.is_first_order() || !t.is_first_order() {
        return Err(vec![Diagnostic::error(
            main.span,
            format!(
                "`main` must take and return first-order values (no functions inside), but has type {}",
                types::show(&Type::fun(s, t))
            ),
        )]);
    }
    Ok((p, s, t))
}

/// Parses a constant value given outside the program (`--at`, `--seed`, the page's input box) and
/// checks it has type `ty`. Its messages quote the text, since their spans are not in the program.
pub fn parse_value(text: &str, ty: &Type, what: &str) -> Result<Value, Vec<Diagnostic>> {
    let outside = |m: String| vec![Diagnostic::error(Span::NONE, format!("the {what} `{}`: {m}", text.trim()))];
    let e = syntax::parse_expr(text).map_err(|ds| outside(ds.first().map(|d| d.message.clone()).unwrap_or_default()))?;
    let v = syntax::value_of(&e).map_err(|d| outside(d.message))?;
    if !fits(&v, ty) {
        return Err(outside(format!("does not have type {}", types::show(ty))));
    }
    Ok(v)
}

/// Whether a first-order value has the given type.
pub fn fits(v: &Value, t: &Type) -> bool {
    match (v, t) {
        (Value::Real(_), Type::Real) | (Value::Int(_), Type::Int) | (Value::Bool(_), Type::Bool) | (Value::Unit, Type::Unit) => true,
        (Value::Int(_), Type::Real) => false,
        (Value::Tuple(vs), Type::Tuple(ts)) => vs.len() == ts.len() && vs.iter().zip(ts).all(|(v, t)| fits(v, t)),
        (Value::Inl(v), Type::Sum(a, _)) => fits(v, a),
        (Value::Inr(v), Type::Sum(_, b)) => fits(v, b),
        _ => false,
    }
}

/// Runs the whole pipeline.
pub fn analyse(text: &str, opts: &Options) -> Result<Analysis, Vec<Diagnostic>> {
    let (program, s, t) = front_end(text, &opts.params)?;
    let input = match (&opts.at, &program.input) {
        (Some(at), _) => parse_value(at, &s, "input point (--at)")?,
        (None, Some(e)) => {
            let v = syntax::value_of(e).map_err(|d| vec![d])?;
            if !fits(&v, &s) {
                return Err(vec![Diagnostic::error(e.span, format!("the input {v} does not have main's input type {}", types::show(&s)))]);
            }
            v
        }
        (None, None) => {
            return Err(vec![Diagnostic::error(Span::NONE, "no input point: add a line `input ...` to the program, or pass one with --at")])
        }
    };
    let primal = run_source(&program, &input, &opts.budget).map_err(|e| vec![run_diag(&e)])?;
    let seed = match &opts.seed {
        Some(text) => parse_value(text, &t, "output cotangent (--seed)")?,
        None => primal.with_reals(&mut std::iter::repeat(1.0)),
    };
    let src = Source { program: &program, input_type: &s, output_type: &t };

    let mut results: Vec<StageResult> = vec![];
    let chosen: Vec<&'static dyn Stage> = if opts.stages.is_empty() {
        stages::all()
    } else {
        let mut v = vec![];
        for id in &opts.stages {
            match stages::find(id) {
                Some(st) => v.push(st),
                None => return Err(vec![Diagnostic::error(Span::NONE, format!("unknown stage `{id}` (see `cotangent stages`)"))]),
            }
        }
        v
    };
    // forward is the reference: run it even when it was not asked for.
    let forward = stages::find("forward").expect("forward is registered");
    let reference_run = run_stage(forward, &src, &input, &seed, opts);
    let reference = reference_run.ok.then(|| {
        let fd = finite_differences(&program, &input, &seed, &opts.budget);
        let g = reference_run.gradient.clone();
        let fd_agrees = fd.len() == g.len() && fd.iter().zip(&g).all(|(a, b)| close(*a, *b, 1e-5));
        Reference { gradient: g, fd, fd_agrees }
    });
    for st in chosen {
        let mut r = if st.info().id == "forward" { reference_run.clone() } else { run_stage(st, &src, &input, &seed, opts) };
        if let (Some(rf), true) = (&reference, r.ok) {
            r.agrees = Some(r.gradient.len() == rf.gradient.len() && r.gradient.iter().zip(&rf.gradient).all(|(a, b)| close(*a, *b, AGREE_TOL)));
        }
        results.push(r);
    }
    Ok(Analysis { input_type: s.clone(), output_type: t.clone(), program, input, seed, primal, reference, stages: results })
}

/// `|a - b| <= tol · max(1, |a|, |b|)`; NaNs agree with NaNs.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * 1f64.max(a.abs()).max(b.abs())
}

pub fn run_diag(e: &RunError) -> Diagnostic {
    Diagnostic::error(e.span(), e.message())
}

/// Runs the source program's `main` on `input`.
pub fn run_source(p: &Program, input: &Value, budget: &Budget) -> Result<Value, RunError> {
    let mut m = Machine::new(p, &Builtins::new(), budget.clone())?;
    m.set_tracing(false);
    m.call("main", vec![input.clone()])
}

/// Central differences of `seed ⊙ main(x)` in each real input, with step 1e-6·max(1, |x_j|).
pub fn finite_differences(p: &Program, input: &Value, seed: &Value, budget: &Budget) -> Vec<f64> {
    let xs = input.real_leaves();
    let seed = seed.real_leaves();
    let f = |x: &[f64]| -> f64 {
        let v = input.with_reals(&mut x.iter().copied());
        match run_source(p, &v, budget) {
            Ok(out) if out.real_leaves().len() == seed.len() => out.real_leaves().iter().zip(&seed).map(|(a, b)| a * b).sum(),
            _ => f64::NAN,
        }
    };
    (0..xs.len())
        .map(|j| {
            let h = 1e-6 * xs[j].abs().max(1.0);
            let (mut lo, mut hi) = (xs.clone(), xs.clone());
            lo[j] -= h;
            hi[j] += h;
            (f(&hi) - f(&lo)) / (2.0 * h)
        })
        .collect()
}

/// A stage's output, ready to run: accepted, transformed, printed into `printed`, type-checked with
/// the stage's builtins and checked against the types the paper states.
pub fn prepare(st: &dyn Stage, src: &Source, opts: &Options, printed: &mut String) -> Result<(Program, Builtins), Diagnostic> {
    let id = st.info().id;
    st.accepts(src).map_err(|d| d.in_stage(id))?;
    let mut out = st.transform(src).map_err(|d| d.in_stage(id))?;
    let mut builtins = Builtins::new();
    builtins.extend(st.builtins());
    // Printed before the type check, so that an ill-typed output can still be inspected.
    *printed = print_program(&out, &opts.print);
    let internal = |m: String| Diagnostic::error(Span::NONE, format!("internal error: {m}")).in_stage(id);
    types::check_program(&mut out, &builtins).map_err(|d| internal(format!("the output does not type-check: {}", d.message)))?;
    for (name, stated) in st.stated_types(src) {
        match out.def(&name).and_then(|d| d.scheme.clone()) {
            Some(s) if types::unifiable(&s.ty, &stated) => {}
            Some(s) => {
                return Err(internal(format!("`{name}` has type {}, but the paper states {}", types::show(&s.ty), types::show(&stated))))
            }
            None => return Err(internal(format!("the output has no `{name}`"))),
        }
    }
    if opts.print.types {
        // now with the inferred types of the output's definitions
        *printed = print_program(&out, &opts.print);
    }
    Ok((out, builtins))
}

/// One stage: accept, transform, type-check the output at the paper's stated types, print, run.
pub fn run_stage(st: &dyn Stage, src: &Source, input: &Value, seed: &Value, opts: &Options) -> StageResult {
    let id = st.info().id.to_string();
    let mut r = StageResult {
        id: id.clone(),
        ok: false,
        refused: false,
        error: None,
        error_span: None,
        program: String::new(),
        primal: None,
        gradient_value: None,
        gradient: vec![],
        agrees: None,
        cost: Cost::default(),
        trace: vec![],
        trace_dropped: 0,
        graph: None,
    };
    let fail = |mut r: StageResult, d: Diagnostic| {
        r.error_span = (!d.span.is_none()).then_some(d.span);
        r.error = Some(d.message);
        r
    };
    if let Err(d) = st.accepts(src) {
        r.refused = true;
        return fail(r, d.in_stage(&id));
    }
    let (out, builtins) = match prepare(st, src, opts, &mut r.program) {
        Ok(x) => x,
        Err(d) => return fail(r, d),
    };
    let mut m = match Machine::new(&out, &builtins, opts.budget.clone()) {
        Ok(m) => m,
        Err(e) => return fail(r, run_diag(&e)),
    };
    m.set_tracing(opts.trace);
    let res = st.run(&mut m, src, input, seed);
    r.cost = m.cost();
    (r.trace, r.trace_dropped) = m.take_trace();
    r.graph = st.graph(&mut m);
    match res {
        Ok((primal, grad)) => {
            r.ok = true;
            r.gradient = grad.real_leaves();
            r.primal = Some(primal);
            r.gradient_value = Some(grad);
        }
        Err(e) => return fail(r, run_diag(&e)),
    }
    r
}

/// Checks `expect` directives against every stage that ran; returns one line per failure.
pub fn check_expects(a: &Analysis) -> Vec<String> {
    let mut failures = vec![];
    for ex in &a.program.expects {
        let want = match syntax::value_of(&ex.value) {
            Ok(v) => v,
            Err(d) => {
                failures.push(d.message);
                continue;
            }
        };
        for r in a.stages.iter().filter(|r| r.ok) {
            let got = match ex.what {
                ExpectKind::Grad => r.gradient_value.as_ref(),
                ExpectKind::Primal => r.primal.as_ref(),
            };
            if let Some(got) = got {
                if !approx_same(got, &want) {
                    let what = if ex.what == ExpectKind::Grad { "grad" } else { "primal" };
                    failures.push(format!("{}: expect {what} {want}, got {got}", r.id));
                }
            }
        }
    }
    failures
}

/// Same shape, reals equal to 1e-9 relative (integers in the expectation match reals too).
pub fn approx_same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Real(a), Value::Real(b)) => close(*a, *b, 1e-9),
        (Value::Real(a), Value::Int(b)) => close(*a, *b as f64, 1e-9),
        (Value::Tuple(xs), Value::Tuple(ys)) => xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| approx_same(x, y)),
        (Value::Inl(x), Value::Inl(y)) | (Value::Inr(x), Value::Inr(y)) => approx_same(x, y),
        (a, b) => a.same(b),
    }
}
