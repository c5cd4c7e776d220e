//! The pipeline: source text → parse → types → each stage's transform → type check of its output
//! → print → interpret → gradient, checked against `forward` and finite differences.

use crate::diag::{Diagnostic, Span};
use crate::interp::{Budget, Builtins, Cost, Graph, Machine, RunError, TraceStep};
use crate::ir::{ExpectKind, Expr, ExprKind, Program, Role, Type};
use crate::print::PrintOptions;
use crate::stage::{Contract, Input, Output, Prepared, RunCtx, Source, Stage, View};
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
    /// The stages shown: they record their traces (with `trace`), are printed, and make their views
    /// and their rewrites' step texts (`stage::showing`); None: every stage. The page shows one stage
    /// (and one beside it) and asks for another's when it is selected.
    pub traced: Option<Vec<String>>,
    /// Map each printed line of a stage's program to the source spans it came from (the page's hover).
    pub lines: bool,
    /// Make the shown stages' views and their rewrites' step texts (`stage::showing`); off, a shown
    /// stage is still printed. The CLI's plain output prints neither, and on a long program making
    /// them is much of a rewrite's time (unf/pe on a tuple nested 200 deep: a sixth).
    pub views: bool,
    /// Leave the texts that views and rewrite steps make when read (`print::Later`) unmade in the
    /// results: the page prints a step's terms when it is shown, not the hundreds of steps of a
    /// rewrite at every keystroke. Off (the CLI, tests), every text is made.
    pub defer_texts: bool,
}

impl Options {
    /// Whether stage `id` records its trace.
    pub fn traces(&self, id: &str) -> bool {
        self.trace && self.listed(id)
    }
    /// Whether `traced` lists stage `id` (or is None): its rewrites keep their steps' text for its
    /// views, even when `trace` is off (a view is part of the stage's output, not of the run's trace).
    pub fn listed(&self, id: &str) -> bool {
        self.traced.as_ref().is_none_or(|ids| ids.iter().any(|i| i == id))
    }
}

impl Default for Options {
    fn default() -> Options {
        Options { at: None, seed: None, params: vec![], stages: vec![], budget: Budget::default(), print: PrintOptions::default(), trace: true, traced: None, lines: false, views: true, defer_texts: false }
    }
}

/// Relative tolerance of the agreement check with `forward` (scale floored at 1).
pub const AGREE_TOL: f64 = 1e-9;

#[derive(Clone, Debug, Serialize)]
pub struct Reference {
    /// `forward`'s gradient: the cotangent of every real leaf of the input, left to right.
    #[serde(serialize_with = "crate::value::json_real::vec")]
    pub gradient: Vec<f64>,
    /// Central finite differences, an independent check.
    #[serde(serialize_with = "crate::value::json_real::vec")]
    pub fd: Vec<f64>,
    /// Whether forward and finite differences agree (to 1e-5 relative; kinks and cancellation can differ).
    pub fd_agrees: bool,
}

/// How a stage's run ended, for `run --json` and the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Ran, and its gradient (and primal) agree with the reference.
    Agrees,
    /// Ran, and disagrees with the reference.
    Disagrees,
    /// Ran, but there is no reference to compare with (forward mode itself failed).
    Unchecked,
    /// Declined by design, with the located reason.
    Refused,
    /// Stopped at a named budget: a run's (with the counts reached), a transform's or a check's.
    Budget,
    /// Failed otherwise (a runtime error of the program, or an internal error).
    Error,
}

#[derive(Clone, Debug, Serialize)]
pub struct StageResult {
    pub id: String,
    pub status: Status,
    /// `gradient` (its wrapper's gradient is compared) or `same-function` (its primal is compared,
    /// and `forward` run over its output gives the gradient).
    pub contract: &'static str,
    /// Extra renderings of its output in the paper's notation.
    pub views: Vec<crate::stage::View>,
    /// Transformed and ran without error.
    pub ok: bool,
    /// The stage refused the program (a construct its method cannot handle), with a located message.
    pub refused: bool,
    pub error: Option<String>,
    pub error_span: Option<Span>,
    pub program: String,
    /// The stage was prepared but not printed (not shown: `Options::traced`); `program` is empty.
    pub program_omitted: bool,
    /// For each line of `program`, the source spans it came from (when `Options::lines` asks).
    #[serde(skip)]
    pub program_lines: Vec<Vec<Span>>,
    #[serde(skip)]
    pub primal: Option<Value>,
    #[serde(skip)]
    pub gradient_value: Option<Value>,
    #[serde(serialize_with = "crate::value::json_real::vec")]
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
    front_end_at(text, params, None)
}

/// `front_end`, where the input point (`at`, the text of `--at`, else the program's `input`) fixes
/// what main's body leaves open in its argument type: `def main (x, n) = x * 2.0` at `(1.0, 3)`
/// takes `(R, Z)`. What neither fixes defaults to R. A point that cannot be read or does not fit
/// is reported by `analyse`, with its location.
pub fn front_end_at(text: &str, params: &[(String, i64)], at: Option<&str>) -> Result<(Program, Type, Type), Vec<Diagnostic>> {
    let mut p = syntax::parse_program(text)?;
    for (name, value) in params {
        match p.params.iter_mut().find(|q| &*q.name.text == name) {
            Some(q) => q.value = *value,
            None => return Err(vec![Diagnostic::error(Span::NONE, format!("the program has no `param {name}`"))]),
        }
    }
    let point = match at {
        Some(text) => syntax::parse_expr(text).ok().and_then(|e| syntax::value_of(&e).ok()),
        None => p.input.as_ref().and_then(|e| syntax::value_of(e).ok()),
    };
    types::check_program_at(&mut p, &Builtins::new(), point.as_ref()).map_err(|d| vec![d])?;
    // Located at the end of the file's last line, where a `def main` would go.
    let end = Span::new(text.trim_end().len(), text.trim_end().len());
    let main = p.def("main").ok_or_else(|| vec![Diagnostic::error(end, "the program has no `def main` (add one, e.g. `def main x = x * x`)")])?;
    let scheme = main.scheme.clone().unwrap_or_else(|| crate::ir::Scheme::mono(Type::Unknown));
    // Unconstrained parts of main's type default to R.
    let ty = types::rename(&scheme.ty, &mut |_| Type::Real);
    let (s, t) = match ty {
        Type::Fun(st) => st.as_ref().clone(),
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
/// checks it has type `ty`. Its messages quote the text, and their spans are into the text, named
/// `arg` (`Diagnostic::in_text`), so the CLI renders `--at:1:5: error: ...` with a caret.
pub fn parse_value(text: &str, ty: &Type, what: &str, arg: &str) -> Result<Value, Vec<Diagnostic>> {
    let outside = |span: Span, m: String| vec![Diagnostic::error(span, format!("the {what} `{}`: {m}", text.trim())).in_text(arg, text)];
    let e = syntax::parse_expr(text).map_err(|ds| match ds.into_iter().next() {
        Some(d) => outside(d.span, d.message),
        None => outside(Span::new(0, text.len()), "cannot be read".into()),
    })?;
    let v = syntax::value_of(&e).map_err(|d| outside(d.span, d.message))?;
    if !fits(&v, ty) {
        if let Some((span, why)) = ragged_row(&e) {
            return Err(outside(span, why));
        }
        return Err(outside(e.span, format!("does not have type {}", types::show(ty))));
    }
    Ok(v)
}

/// Whether a first-order value has the given type.
/// Whether an array of arrays has rows of different lengths (inputs are regular, as the papers'
/// arrays are: a matrix is `Array (Array R)` with rows of one length).
pub fn is_ragged(rows: &[Value]) -> bool {
    let len = |v: &Value| match v {
        Value::Array(xs) => Some(xs.len()),
        _ => None,
    };
    rows.first().and_then(len).is_some_and(|n| rows.iter().any(|r| len(r) != Some(n)))
}

/// The first row of a ragged array literal in a constant (an input point), with why it is refused:
/// "row 1 has length 1, but row 0 has length 2". Walks the literal as `syntax::value_of` does.
pub fn ragged_row(e: &Expr) -> Option<(Span, String)> {
    fn len(e: &Expr) -> Option<usize> {
        match &e.kind {
            ExprKind::Array(es) => Some(es.len()),
            ExprKind::Ann(x_x) => { let (x, _) = &**x_x; len(x) },
            _ => None,
        }
    }
    match &e.kind {
        ExprKind::Array(rows) => {
            if let Some(n) = rows.first().and_then(len) {
                let other = rows.iter().enumerate().find_map(|(k, r)| len(r).filter(|&m| m != n).map(|m| (k, r, m)));
                if let Some((k, r, m)) = other {
                    return Some((r.span, format!("ragged array: row {k} has length {m}, but row 0 has length {n} (the rows of an array of arrays all have one length)")));
                }
            }
            rows.iter().find_map(ragged_row)
        }
        ExprKind::Tuple(es) => es.iter().find_map(ragged_row),
        ExprKind::Inl(x) | ExprKind::Inr(x) => ragged_row(x), ExprKind::Ann(x_x) => ragged_row(&x_x.0),
        _ => None,
    }
}

/// Why a seed of main's output type still cannot weight the output: an array of another length
/// than the output's (types do not say lengths).
fn shape_mismatch(seed: &Value, primal: &Value) -> Option<String> {
    match (seed, primal) {
        (Value::Array(xs), Value::Array(ys)) if xs.len() != ys.len() => {
            let n = |k: usize| if k == 1 { "1 element".to_string() } else { format!("{k} elements") };
            Some(format!("has {} where main's output {primal} has {}", n(xs.len()), ys.len()))
        }
        (Value::Array(xs), Value::Array(ys)) | (Value::Tuple(xs), Value::Tuple(ys)) => {
            xs.iter().zip(ys.iter()).find_map(|(x, y)| shape_mismatch(x, y))
        }
        (Value::Inl(x), Value::Inl(y)) | (Value::Inr(x), Value::Inr(y)) => shape_mismatch(x, y),
        _ => None,
    }
}

pub fn fits(v: &Value, t: &Type) -> bool {
    match (v, t) {
        (Value::Real(_), Type::Real) | (Value::Int(_), Type::Int) | (Value::Bool(_), Type::Bool) | (Value::Unit, Type::Unit) => true,
        (Value::Int(_), Type::Real) => false,
        (Value::Tuple(vs), Type::Tuple(ts)) => vs.len() == ts.len() && vs.iter().zip(ts.iter()).all(|(v, t)| fits(v, t)),
        (Value::Array(vs), t) if t.as_array().is_some() => {
            let e = t.as_array().expect("checked");
            vs.iter().all(|v| fits(v, e)) && !is_ragged(vs)
        }
        (Value::Inl(v), Type::Sum(ab)) => fits(v, &ab.0),
        (Value::Inr(v), Type::Sum(ab)) => fits(v, &ab.1),
        _ => false,
    }
}

/// Runs the whole pipeline.
pub fn analyse(text: &str, opts: &Options) -> Result<Analysis, Vec<Diagnostic>> {
    let mut stages = vec![];
    let mut a = analyse_in_phases(text, opts, std::slice::from_ref(&opts.stages), &mut |_, rs| stages.extend(rs))?;
    a.stages = stages;
    Ok(a)
}

/// Runs the pipeline once over several phases, each a list of stage ids (empty: every stage), and
/// hands each phase's results to `on_phase` as soon as they are ready, with the analysis they belong
/// to (its `stages` empty). The front end, the source run and the reference run once, and a stage's
/// output prepared in one phase serves the later ones (the page shows the selected stage first, then
/// the rest of its chain, then the other chains: `web::analyse_stream`).
pub fn analyse_in_phases(
    text: &str,
    opts: &Options,
    phases: &[Vec<String>],
    on_phase: &mut dyn FnMut(&Analysis, Vec<StageResult>),
) -> Result<Analysis, Vec<Diagnostic>> {
    analyse_streaming(text, opts, phases, on_phase, None)
}

/// Where a running stage's program goes as it is printed, instead of into its result (the CLI's
/// plain output, which writes it to stdout): a 10^5-line program's printed output is ~65 MiB, and
/// held beside its tree it took four stages past the memory budget (issue 14 item 4). The stage's
/// `StageResult::program` is then empty (and not `program_omitted`). Only the stage being run
/// streams, once its output has passed its type check; the outputs of the stages it follows, printed
/// as they are prepared for it, are kept as text as before.
pub trait ProgramSink {
    /// Before any stage is run: the analysis (its input, primal and reference) and forward's error
    /// where forward is one of the stages run.
    fn head(&self, a: &Analysis, forward_error: Option<&str>);
    /// Stage `id`'s program starts.
    fn begin(&self, id: &str);
    /// The next chunk of whole lines of stage `id`'s program.
    fn text(&self, id: &str, chunk: String);
    /// Stage `id`'s program is all given.
    fn end(&self, id: &str);
}

/// `analyse_in_phases`, the program of each stage run going to `sink` as it is printed, where given.
pub fn analyse_streaming(
    text: &str,
    opts: &Options,
    phases: &[Vec<String>],
    on_phase: &mut dyn FnMut(&Analysis, Vec<StageResult>),
    sink: Option<&dyn ProgramSink>,
) -> Result<Analysis, Vec<Diagnostic>> {
    crate::limits::set_phase("source", "reading the program");
    let (program, s, t) = front_end_at(text, &opts.params, opts.at.as_deref())?;
    crate::limits::set_phase("source", "running the program");
    let input = match (&opts.at, &program.input) {
        (Some(at), _) => parse_value(at, &s, "input point", "--at")?,
        (None, Some(e)) => {
            let v = syntax::value_of(e).map_err(|d| vec![d])?;
            if !fits(&v, &s) {
                if let Some((span, why)) = ragged_row(e) {
                    return Err(vec![Diagnostic::error(span, format!("the input {v}: {why}"))]);
                }
                return Err(vec![Diagnostic::error(e.span, format!("the input {v} does not have main's input type {}", types::show(&s)))]);
            }
            v
        }
        (None, None) => {
            // Located at `def main`, whose argument it is.
            let at = at_main(&program);
            return Err(vec![Diagnostic::error(at, "no input point for `main`: add a line `input ...` to the program, or pass one with --at")]);
        }
    };
    let primal = run_source(&program, &input, &opts.budget).map_err(|e| {
        // A budget stop is located at the application that was running, else at `def main`.
        let mut d = run_diag(&e);
        if d.span.is_none() {
            d.span = at_main(&program);
        }
        if matches!(e, RunError::Budget { .. }) {
            d.message = format!("running the program: {}", d.message);
        }
        vec![d]
    })?;
    // `--seed` (or the page's seed box), else the program's `seed` line, else 1.0 on every real leaf.
    let seed = match (&opts.seed, &program.seed) {
        (Some(text), _) => {
            let v = parse_value(text, &t, "output cotangent", "--seed")?;
            if let Some(m) = shape_mismatch(&v, &primal) {
                let whole = Span::new(0, text.len());
                return Err(vec![Diagnostic::error(whole, format!("the output cotangent `{}` {m}", text.trim())).in_text("--seed", text)]);
            }
            v
        }
        (None, Some(e)) => {
            let v = syntax::value_of(e).map_err(|d| vec![d])?;
            if !fits(&v, &t) {
                return Err(vec![Diagnostic::error(e.span, format!("the seed {v} does not have main's output type {}", types::show(&t)))]);
            }
            if let Some(m) = shape_mismatch(&v, &primal) {
                return Err(vec![Diagnostic::error(e.span, format!("the seed {v} {m}"))]);
            }
            v
        }
        (None, None) => primal.with_reals(&mut std::iter::repeat(1.0)),
    };
    let no_builtins = Builtins::new();
    let mut chosen: Vec<&'static dyn Stage> = vec![];
    // where each phase ends in `chosen`
    let mut ends = vec![];
    for phase in phases {
        if phase.is_empty() {
            chosen.extend(stages::all());
        }
        for id in phase {
            match stages::find(id) {
                Some(st) => chosen.push(st),
                None => return Err(vec![Diagnostic::error(Span::NONE, format!("unknown stage `{id}` (see `cotangent stages`)"))]),
            }
        }
        ends.push(chosen.len());
    }
    // forward is the reference: run it even when it was not asked for.
    let forward = stages::find("forward").expect("forward is registered");
    let (reference_run, reference) = {
        let src = Source { program: &program, input_type: &s, output_type: &t, builtins: &no_builtins };
        // (no stage takes this output: its run lets it go as the run starts)
        let once = Outputs::new(&src, opts);
        once.keep_for(vec![]);
        let reference_run = run_stage(forward, &once, &input, &seed, opts);
        let reference = reference_run.ok.then(|| {
            let fd = finite_differences(&program, &input, &seed, &opts.budget);
            let g = reference_run.gradient.clone();
            let fd_agrees = fd.len() == g.len() && fd.iter().zip(&g).all(|(a, b)| close(*a, *b, 1e-5));
            Reference { gradient: g, fd, fd_agrees }
        });
        (reference_run, reference)
    };
    // The reference's run is shown only where forward is chosen: else its printed program (the
    // size of the source's, 16 MB on a 100,000-line program) and graph are let go now.
    let mut reference_run = chosen.iter().any(|s| s.info().id == "forward").then_some(reference_run);
    let a = Analysis { input_type: s, output_type: t, program, input, seed, primal, reference, stages: vec![] };
    if let Some(sink) = sink {
        sink.head(&a, reference_run.as_ref().and_then(|r| r.error.as_deref()));
    }
    let src = Source { program: &a.program, input_type: &a.input_type, output_type: &a.output_type, builtins: &no_builtins };
    let mut outputs = Outputs::new(&src, opts);
    outputs.sink = sink;
    let (input, seed, primal, reference) = (&a.input, &a.seed, &a.primal, &a.reference);
    let mut results: Vec<StageResult> = vec![];
    let mut phase_ends = ends.into_iter().peekable();
    for (k, &st) in chosen.iter().enumerate() {
        // What no later stage transforms further is let go (a long program's outputs are large; a
        // stage that still looks one up prepares it again), `forward`'s too: its run is the reference.
        let later: Vec<&'static str> = chosen[k..].iter().filter_map(|s| match s.input() {
            Input::After(before) => Some(before),
            Input::Source => None,
        }).collect();
        outputs.keep_for(later);
        outputs.forget_unkept();
        let last = !chosen[k + 1..].iter().any(|s| s.info().id == "forward");
        let mut r = match st.info().id {
            // forward's last turn takes the reference's run (not a second copy of its text)
            "forward" if last => reference_run.take(),
            "forward" => reference_run.clone(),
            _ => None,
        }
        .unwrap_or_else(|| run_stage(st, &outputs, input, seed, opts));
        if r.ok {
            let same_primal = r.primal.as_ref().is_none_or(|p| approx_same(p, primal));
            r.agrees = reference.as_ref().map(|rf| {
                same_primal && r.gradient.len() == rf.gradient.len() && r.gradient.iter().zip(&rf.gradient).all(|(a, b)| close(*a, *b, AGREE_TOL))
            });
            r.status = match r.agrees {
                Some(true) => Status::Agrees,
                Some(false) => Status::Disagrees,
                None => Status::Unchecked,
            };
        }
        results.push(r);
        while phase_ends.next_if(|&end| end <= k + 1).is_some() {
            on_phase(&a, std::mem::take(&mut results));
        }
    }
    // phases with no stages left (empty lists after the last stage) still report
    for _ in phase_ends {
        on_phase(&a, vec![]);
    }
    drop(outputs);
    drop(src);
    Ok(a)
}

/// Every stage's typed output, prepared once and kept: a stage whose input is another stage's output
/// (`Input::After`) gets it from here, and so does a run that wants to look at another stage's output.
/// Only the pipeline knows stage order; it follows `Stage::input` here.
pub struct Outputs<'a> {
    src: &'a Source<'a>,
    opts: &'a Options,
    kept: std::cell::RefCell<rustc_hash::FxHashMap<&'static str, Result<std::rc::Rc<Prepared>, Diagnostic>>>,
    /// Each chain's `accepts` on each input its stages take (the source: None; a stage's output):
    /// every stage of a chain asks it of the same program, and it may type-check the program.
    accepted: std::cell::RefCell<rustc_hash::FxHashMap<(&'static str, Option<&'static str>), Result<(), Diagnostic>>>,
    /// Stages known besides the registry's (tests compose stages of their own).
    extra: Vec<&'static dyn Stage>,
    /// The outputs the stages still to run take (`keep_for`; None: every output may be asked for).
    later: std::cell::RefCell<Option<Vec<&'static str>>>,
    /// The stage being run (`run_stage`).
    running: std::cell::Cell<Option<&'static str>>,
    /// Where the program of the stage being run goes as it is printed (`ProgramSink`).
    sink: Option<&'a dyn ProgramSink>,
    /// The outputs a later stage takes that their own run let go (`run_stage`, `lowers_alone`): one
    /// prepared again for another stage is not printed again.
    let_go: std::cell::RefCell<Vec<&'static str>>,
}

impl<'a> Outputs<'a> {
    pub fn new(src: &'a Source<'a>, opts: &'a Options) -> Outputs<'a> {
        Outputs { src, opts, kept: Default::default(), accepted: Default::default(), extra: vec![], later: Default::default(), running: Default::default(), sink: None, let_go: Default::default() }
    }

    /// Also knows `stages` by id (for tests of stage composition).
    pub fn with_stages(mut self, stages: &[&'static dyn Stage]) -> Outputs<'a> {
        self.extra.extend_from_slice(stages);
        self
    }

    /// The user's program.
    pub fn source(&self) -> &'a Source<'a> {
        self.src
    }

    /// A stage by id: the registry's, or one given to `with_stages`.
    pub fn find(&self, id: &str) -> Option<&'static dyn Stage> {
        self.extra.iter().copied().find(|s| s.info().id == id).or_else(|| stages::find(id))
    }

    /// The stage's prepared output (transformed from its input, type-checked, printed), or why not.
    pub fn get(&self, st: &'static dyn Stage) -> Result<std::rc::Rc<Prepared>, Diagnostic> {
        let id = st.info().id;
        if let Some(r) = self.kept.borrow().get(id) {
            return r.clone();
        }
        // a stage whose output is its input's program takes that program, not a copy, where no
        // stage still to run takes it (`Stage::passes_input_through`)
        let moving = matches!(st.input(), Input::After(before) if st.passes_input_through() && self.done_with(before, st));
        let r = self
            .with_input(st, |src| {
                // (the chain's `accepts` may run a pass of its own: chad/arrays lowers the arrays first)
                crate::limits::set_phase(id, "checking what it accepts");
                let chain = self.chain_accepts(st, src);
                if moving {
                    return refusal_with(st, src, chain).map(|()| None);
                }
                transformed(st, src, self.opts, chain).map(Some)
            })
            .and_then(|r| r)
            .and_then(|r| r.map_or_else(|| self.transformed_keeping(st), Ok));
        // its input goes before the check if nothing still to run takes it (issue 14 item 4: on a
        // 10^5-line program arrays/symbolic's input, dual-arrays' output, is 334 MiB)
        if let (Ok(_), Input::After(before)) = (&r, st.input()) {
            if self.done_with(before, st) {
                self.kept.borrow_mut().remove(before);
            }
        }
        let sink = self.sink.filter(|_| self.running.get() == Some(id));
        // printed by its own run already, unless it is that run again
        let print = self.running.get() == Some(id) || !self.let_go.borrow().contains(&id);
        let r = r.and_then(|(p, stated)| checked(st, p, &stated, self.opts, sink, print)).map(std::rc::Rc::new);
        self.kept.borrow_mut().insert(id, r.clone());
        r
    }

    /// `transformed` (past its refusals) for a stage that passes its input's program through, that
    /// program moved out of the kept input, which no stage still to run takes (`get`): a long
    /// program's output is not held twice (issue 14 item 4: chad/mutable copied chad/monadic's
    /// ~430 MiB on a 10^5-line program, and stopped at the process's last resort). Copied after all
    /// where something else still holds the input.
    fn transformed_keeping(&self, st: &'static dyn Stage) -> Result<(Prepared, Vec<(String, Type)>), Diagnostic> {
        let input = match st.input() {
            Input::After(before) => self.kept.borrow_mut().remove(before),
            Input::Source => None,
        };
        let Some(Ok(input)) = input else {
            return Err(Diagnostic::error(Span::NONE, format!("internal error: the input of {} is not kept", st.info().id)));
        };
        match std::rc::Rc::try_unwrap(input) {
            Ok(mut p) => {
                let program = std::mem::take(&mut p.program);
                let src = Source { program: &p.program, input_type: &p.input_type, output_type: &p.output_type, builtins: &p.builtins };
                translated(st, &src, self.opts, Some(program))
            }
            Err(p) => {
                let src = Source { program: &p.program, input_type: &p.input_type, output_type: &p.output_type, builtins: &p.builtins };
                translated(st, &src, self.opts, None)
            }
        }
    }

    /// Whether the output of `before`, `st`'s input, is taken by no stage still to run once `st`
    /// is transformed: `st` itself, if it is the stage running, takes it only if its run reads it.
    fn done_with(&self, before: &str, st: &dyn Stage) -> bool {
        let later = self.later.borrow();
        let Some(later) = later.as_ref() else { return false };
        let takers = later.iter().filter(|&&l| l == before).count();
        takers == 0 || (takers == 1 && self.running.get() == Some(st.info().id) && !self.run_reads_input(st))
    }

    /// Whether `st`'s run reads its input here: `Stage::run_reads_input`, and where the stage reads
    /// it only to name what a trace shows, only when this analysis traces it.
    fn run_reads_input(&self, st: &dyn Stage) -> bool {
        st.run_reads_input() && (!st.run_reads_input_only_traced() || self.opts.traces(st.info().id))
    }

    /// `with_input` for `st`'s run, whose prepared output is `out`: a stage whose run does not read
    /// its input is given a stand-in without a program (its input may be gone: `get`).
    pub fn with_run_input<R>(&self, st: &'static dyn Stage, out: &Prepared, f: impl FnOnce(&Source) -> R) -> Result<R, Diagnostic> {
        match st.input() {
            Input::After(_) if !self.run_reads_input(st) => {
                let none = Program::default();
                Ok(f(&Source { program: &none, input_type: &out.input_type, output_type: &out.output_type, builtins: &out.builtins }))
            }
            _ => self.with_input(st, f),
        }
    }

    /// Whether `id`'s output (or why there is none) is kept already.
    pub fn is_kept(&self, id: &str) -> bool {
        self.kept.borrow().contains_key(id)
    }

    /// `st`'s chain's `accepts` on `src`, `st`'s input, asked once per chain and input.
    fn chain_accepts(&self, st: &dyn Stage, src: &Source) -> Result<(), Diagnostic> {
        let Some(chain) = stages::chain_of(st.info().id) else { return Ok(()) };
        let input = match st.input() {
            Input::Source => None,
            Input::After(before) => Some(before),
        };
        if let Some(r) = self.accepted.borrow().get(&(chain.id, input)) {
            return r.clone();
        }
        let r = (chain.accepts)(src);
        self.accepted.borrow_mut().insert((chain.id, input), r.clone());
        r
    }

    /// Lets go of the kept outputs of the stages `keep` says no (they are prepared again if asked for).
    pub fn keep_only(&self, keep: impl Fn(&str) -> bool) {
        self.kept.borrow_mut().retain(|id, _| keep(id));
    }

    /// Keeps only the outputs the stages still to run take (`later`), and lets each other output go
    /// as soon as its own stage has it (`run_stage`: it then takes the printed text rather than
    /// copying it).
    pub fn keep_for(&self, later: Vec<&'static str>) {
        self.keep_only(|id| later.contains(&id));
        *self.later.borrow_mut() = Some(later);
    }

    /// Lets each chain forget what it keeps outside its outputs where none of them is kept
    /// (`Chain::forget`): chad's table of instances, and the contexts their `Op`s carry, was held
    /// through every stage after the chain's first (issue 14 item 4).
    pub fn forget_unkept(&self) {
        let kept = self.kept.borrow();
        for &chain in stages::CHAINS {
            if !kept.keys().any(|id| stages::chain_of(id).is_some_and(|c| std::ptr::eq(c, chain))) {
                (chain.forget)();
            }
        }
    }

    /// Whether `id`'s output may be asked for again (`keep_for`).
    fn needed(&self, id: &str) -> bool {
        self.later.borrow().as_ref().is_none_or(|later| later.contains(&id))
    }

    /// Calls `f` with the program `st` transforms: the source, or the output of the stage it follows.
    pub fn with_input<R>(&self, st: &'static dyn Stage, f: impl FnOnce(&Source) -> R) -> Result<R, Diagnostic> {
        match st.input() {
            Input::Source => Ok(f(self.src)),
            Input::After(before) => {
                let prev = self.find(before).ok_or_else(|| {
                    Diagnostic::error(Span::NONE, format!("internal error: {} follows `{before}`, which is not registered", st.info().id))
                })?;
                let p = self.get(prev).map_err(|d| {
                    let why = d.message.clone();
                    // where the stage before had no location (a stop in code it made), at `def main`
                    // as its own message is (`run_stage`); it had none ("pairs-1000.cot: error:")
                    let at = if d.span.is_none() { at_main(self.src.program) } else { d.span };
                    let mut nd = Diagnostic::error(at, format!("its input, the output of {before}, is not available: {why}"));
                    // a stage after a refusal is refused with it, for the same reason
                    nd.refused = d.refused;
                    nd
                })?;
                let src = Source { program: &p.program, input_type: &p.input_type, output_type: &p.output_type, builtins: &p.builtins };
                Ok(f(&src))
            }
        }
    }
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

/// Central differences of `seed ⊙ main(x)` in each real input, with step 1e-6·max(1, |x_j|). Each
/// output leaf is differenced before it is weighted by its seed, so an infinite seed scales a slope
/// (∞ · slope) instead of subtracting ∞ from ∞.
pub fn finite_differences(p: &Program, input: &Value, seed: &Value, budget: &Budget) -> Vec<f64> {
    let xs = input.real_leaves();
    let seed = seed.real_leaves();
    let f = |x: &[f64]| -> Option<Vec<f64>> {
        let v = input.with_reals(&mut x.iter().copied());
        run_source(p, &v, budget).ok().map(|out| out.real_leaves()).filter(|out| out.len() == seed.len())
    };
    (0..xs.len())
        .map(|j| {
            let h = 1e-6 * xs[j].abs().max(1.0);
            let (mut lo, mut hi) = (xs.clone(), xs.clone());
            lo[j] -= h;
            hi[j] += h;
            match (f(&hi), f(&lo)) {
                (Some(hi), Some(lo)) => hi.iter().zip(&lo).zip(&seed).map(|((a, b), s)| s * ((a - b) / (2.0 * h))).sum(),
                _ => f64::NAN,
            }
        })
        .collect()
}

/// A stage's output, ready to run: refused by its supported features or `accepts`, or transformed,
/// printed, type-checked with its builtins and checked against the types the paper states.
pub fn prepare(st: &dyn Stage, src: &Source, opts: &Options) -> Result<Prepared, Diagnostic> {
    crate::limits::set_phase(st.info().id, "checking what it accepts");
    let chain = stages::chain_of(st.info().id).map_or(Ok(()), |chain| (chain.accepts)(src));
    prepare_with(st, src, opts, chain)
}

/// `prepare`, given what the stage's chain's `accepts` says of `src` (`Outputs` asks it once per chain).
fn prepare_with(st: &dyn Stage, src: &Source, opts: &Options, chain: Result<(), Diagnostic>) -> Result<Prepared, Diagnostic> {
    let (out, stated) = transformed(st, src, opts, chain)?;
    checked(st, out, &stated, opts, None, true)
}

/// The memory budget's check at the end of a phase of preparing stage `id`.
fn over(id: &str, phase: &str) -> Result<(), Diagnostic> {
    match crate::limits::memory_exceeded(phase) {
        Some(m) => Err(Diagnostic::error(Span::NONE, m).in_stage(id)),
        None => Ok(()),
    }
}

/// `prepare`'s first half: the stage's output, not yet checked nor printed, with the types the
/// paper states for it; what follows needs `src` no more (`Outputs::get` may let it go).
fn transformed(st: &dyn Stage, src: &Source, opts: &Options, chain: Result<(), Diagnostic>) -> Result<(Prepared, Vec<(String, Type)>), Diagnostic> {
    refusal_with(st, src, chain)?;
    translated(st, src, opts, None)
}

/// `transformed` past the refusals; `kept`: the input's program, moved out of `src` (whose program is
/// then empty) for a stage that passes it through (`Stage::transform_keeping`).
fn translated(st: &dyn Stage, src: &Source, opts: &Options, kept: Option<Program>) -> Result<(Prepared, Vec<(String, Type)>), Diagnostic> {
    let id = st.info().id;
    // Each phase is checked against the memory budget when it ends (limits::memory_exceeded).
    crate::limits::set_phase(id, "transforming the program");
    let shown = opts.listed(id);
    let texts = shown && opts.views;
    let moved = kept.is_some();
    let out = crate::stage::showing(texts, || match kept {
        Some(program) => st.transform_keeping(program, src),
        None => st.transform(src),
    })
    .map_err(|d| d.in_stage(id))?;
    over(id, "transforming the program")?;
    // A generated definition (by role) whose name a user definition has: rename the user's, then
    // transform again, so that generated code never captures or clashes with user code. (A moved
    // input is the output's program.)
    let renamed = {
        let input = if moved { &out.program } else { src.program };
        let generated: Vec<&str> = out.program.defs.iter().filter(|d| d.role != Role::User).map(|d| &*d.name.text).collect();
        let clash = input.defs.iter().any(|d| d.role == Role::User && generated.contains(&&*d.name.text))
            || input.params.iter().any(|q| generated.contains(&&*q.name.text));
        clash.then(|| crate::stage::without_reserved(input, &generated))
    };
    let out = match renamed {
        Some(renamed) => {
            let src2 = Source { program: &renamed, ..*src };
            crate::stage::showing(texts, || st.transform(&src2)).map_err(|d| d.in_stage(id))?
        }
        None => out,
    };
    let Output { program: out, builtins: extra, views, steps } = out;
    let mut builtins = src.builtins.clone();
    builtins.extend(st.builtins());
    builtins.fuse(st.fused());
    builtins.set_round_calls(st.round_calls());
    if let Some(family) = st.builtin_family() {
        builtins.set_family(Some(family));
    }
    builtins.extend(extra);
    // The monadic forms of the array operations (`mapM`, ...; kit::arrays) belong to the IR, as `do`
    // and `pure` do: every monadic translation may use them.
    builtins.extend(crate::kit::arrays::monadic_builtins());
    let stated = st.stated_types(src);
    let (input_type, output_type) = (src.input_type.clone(), src.output_type.clone());
    Ok((Prepared { program: out, builtins, printed: None, lines: vec![], views, steps, input_type, output_type }, stated))
}

/// `prepare`'s second half: the output type-checked (and checked against the types the paper
/// states), then printed where it is shown: to `sink` as it is printed, where given (its text is then
/// not kept), unless lines are mapped to the source (`Options::lines`, the page's).
fn checked(st: &dyn Stage, p: Prepared, stated: &[(String, Type)], opts: &Options, sink: Option<&dyn ProgramSink>, print: bool) -> Result<Prepared, Diagnostic> {
    let id = st.info().id;
    let Prepared { program: mut out, builtins, views, steps, input_type, output_type, .. } = p;
    let shown = opts.listed(id) && print;
    // Printed after the type check, so that the check's own memory (its inference variables and
    // memo, ~1.4 KB a line) and the printed text (~0.4 KB) are never live at once (issue 14 item 4):
    // the check fills in types only, so the text is the same either way; an output that fails the
    // check is printed then, so that it can still be inspected. A stage not shown (see
    // `Options::traced`) is printed when it is shown (`Prepared::printed` is None).
    let print = |out: &Program| crate::print::print_program_mapped(out, &opts.print, opts.lines);
    crate::limits::set_phase(id, "type-checking its output");
    let internal = |m: String, out: &Program| {
        Diagnostic::error(Span::NONE, format!("internal error: {m}")).in_stage(id).with_program(print(out).text)
    };
    if let Err(d) = types::check_program(&mut out, &builtins) {
        if d.message.starts_with("stopped: the memory budget") {
            // the check stopped at the memory budget (types.rs): a budget stop, not a wrong output
            return Err(Diagnostic::error(d.span, format!("{} its output", d.message)).in_stage(id));
        }
        if let Some(refusal) = st.refused_by_check(&d) {
            return Err(refusal.in_stage(id));
        }
        // (a failed check leaves the program's text as it was: only types are filled in)
        return Err(internal(format!("the output does not type-check: {}", d.message), &out));
    }
    let disagreement = |out: &Program| {
        stated.iter().find_map(|(name, stated)| match out.def(name).and_then(|d| d.scheme.as_ref()) {
            Some(s) if types::unifiable(&s.ty, stated) => None,
            Some(s) => Some(format!("`{name}` has type {}, but the paper states {}", types::show(&s.ty), types::show(stated))),
            None => Some(format!("the output has no `{name}`")),
        })
    };
    if let Some(m) = disagreement(&out) {
        // An output whose body leaves its types open up to its arithmetic's R or Z defaulted them
        // to R where the source was fitted to its input (`main x = x * x` on an integer input,
        // types::check_program_at): checked again at the types the paper states, it agrees; an
        // output of other types still disagrees, with the message of the first check.
        let fitted = types::check_program_stated(&mut out, &builtins, stated).is_ok() && disagreement(&out).is_none();
        if !fitted {
            return Err(internal(m, &out));
        }
    }
    over(id, "type-checking its output")?;
    let mut printed = None;
    if shown {
        // with the inferred types of the output's definitions where `opts.print.types` asks
        crate::limits::set_phase(id, "printing its output");
        // (a stop left by a printing nobody asked about, a view's, is not this one's)
        let _ = crate::print::take_stop();
        printed = Some(match sink.filter(|_| !opts.lines) {
            Some(sink) => {
                sink.begin(id);
                crate::print::print_program_streamed(&out, &opts.print, &mut |chunk| sink.text(id, chunk));
                sink.end(id);
                crate::print::Mapped { text: String::new(), lines: vec![] }
            }
            None => print(&out),
        });
        if let Some(m) = crate::print::take_stop() {
            return Err(Diagnostic::error(Span::NONE, m).in_stage(id));
        }
        over(id, "printing its output")?;
    }
    let (printed, lines) = match printed {
        Some(m) => (Some(m.text), m.lines),
        None => (None, vec![]),
    };
    Ok(Prepared { program: out, builtins, printed, lines, views, steps, input_type, output_type })
}

/// The located refusal of a program the stage's method does not handle, if any: first by the features
/// it supports (one scan of the program), then by its own `accepts`.
pub fn refusal(st: &dyn Stage, src: &Source) -> Result<(), Diagnostic> {
    let chain = stages::chain_of(st.info().id).map_or(Ok(()), |chain| (chain.accepts)(src));
    refusal_with(st, src, chain)
}

/// `refusal`, given what the stage's chain's `accepts` says of `src`.
fn refusal_with(st: &dyn Stage, src: &Source, chain: Result<(), Diagnostic>) -> Result<(), Diagnostic> {
    let id = st.info().id;
    let restriction = st.info().accepts;
    crate::features::scan(src.program).refuse(st.supports(), restriction).map_err(|d| d.in_stage(id).refused())?;
    chain.map_err(|d| d.in_stage(id).refused())?;
    st.accepts(src).map_err(|d| d.in_stage(id).refused())
}

/// `def` of the program's `main` (a message about `main` as a whole: its input, a stop in code made
/// from nothing nearer).
fn at_main(program: &Program) -> Span {
    program.def("main").map_or(Span::NONE, |m| Span::new(m.span.start as usize, m.span.start as usize + 3))
}

/// One stage: its prepared output, run on `(input, seed)`; a `SameFunction` stage's `main` is run and
/// `forward` over its output gives the gradient.
pub fn run_stage(st: &'static dyn Stage, outputs: &Outputs, input: &Value, seed: &Value, opts: &Options) -> StageResult {
    let id = st.info().id.to_string();
    outputs.running.set(Some(st.info().id));
    let contract = st.contract();
    let mut r = StageResult {
        id: id.clone(),
        status: Status::Error,
        contract: match contract {
            Contract::Gradient => "gradient",
            Contract::SameFunction => "same-function",
        },
        views: vec![],
        ok: false,
        refused: false,
        error: None,
        error_span: None,
        program: String::new(),
        program_omitted: false,
        program_lines: vec![],
        primal: None,
        gradient_value: None,
        gradient: vec![],
        agrees: None,
        cost: Cost::default(),
        trace: vec![],
        trace_dropped: 0,
        graph: None,
    };
    let fail = |mut r: StageResult, mut d: Diagnostic| {
        if d.span.is_none() && d.message.starts_with("stopped: ") {
            // a transform's or a check's stop in code wholly generated (chad/naive-ho's first-order
            // source, its output): at `def main`, whose derivative was being made (issue 14 item 7)
            d.span = at_main(outputs.src.program);
        }
        r.refused = d.refused;
        // a transform's or a check's budget stop ("stopped: the … budget …": limits.rs, the rewrite
        // engine, arrays/symbolic's gradient size) is a budget stop, as a run's is
        r.status = if d.refused {
            Status::Refused
        } else if d.message.starts_with("stopped: ") {
            Status::Budget
        } else {
            Status::Error
        };
        if r.program.is_empty() {
            r.program = d.program.clone().unwrap_or_default();
        }
        r.error_span = (!d.span.is_none()).then_some(d.span);
        r.error = Some(d.message);
        r
    };
    let mut out = match outputs.get(st) {
        Ok(p) => p,
        Err(d) => return fail(r, d),
    };
    // An output no stage still to run takes is this run's alone: its text is taken, not copied.
    // One a later stage takes is let go too where lowering it in place would hold it and its code
    // together on a heap already large (`lowers_alone`); that stage prepares it again.
    let own = !outputs.needed(st.info().id) || lowers_alone(st);
    if own && outputs.needed(st.info().id) {
        outputs.let_go.borrow_mut().push(st.info().id);
    }
    if own {
        outputs.keep_only(|id| id != st.info().id);
    }
    let printed = match std::rc::Rc::get_mut(&mut out).filter(|_| own) {
        Some(p) => p.printed.take(),
        None => out.printed.clone(),
    };
    r.program_omitted = printed.is_none();
    r.program = printed.unwrap_or_default();
    r.program_lines = out.lines.clone();
    r.views = out.views.clone();
    if !opts.defer_texts {
        r.views.iter_mut().for_each(View::materialise);
    }
    let run_err = |mut r: StageResult, e: RunError| {
        if let RunError::Budget { span, .. } = &e {
            r.error = Some(e.message());
            r.status = Status::Budget;
            // where the run stopped, if that node came from the source text, else at `def main`:
            // a stage's run stopping in its wrapper had no line:col (issue 14 item 7)
            r.error_span = Some(if span.is_none() { at_main(outputs.src.program) } else { *span });
            return r;
        }
        fail(r, run_diag(&e))
    };
    let ir = take_ir(st, &mut out, own);
    // what the run reads of its program, taken before the IR goes
    let kept = ir.as_ref().and_then(|p| stages::chain_of(st.info().id).and_then(|c| (c.keep_from_program)(p)));
    crate::limits::set_phase(st.info().id, "lowering its output");
    let made = match ir {
        Some(ir) => Machine::lowered(ir, &out.builtins, opts.budget.clone()),
        None => Machine::new(&out.program, &out.builtins, opts.budget.clone()),
    };
    let mut m = match made {
        Ok(m) => m,
        Err(e) => return run_err(r, e),
    };
    if let Some(keep) = kept {
        keep(&mut m);
    }
    m.set_tracing(opts.traces(st.info().id));
    crate::limits::set_phase(st.info().id, "running");
    // Another stage's output, for a view (dualrev/naive's graph is drawn from dualrev/staged's DAG):
    // prepared here only while the live heap is under half the memory budget, since preparing it may
    // take as much again as this stage's own output did, and past the budget the allocator stops the
    // whole process with this stage's result already computed (issue 14 item 4: on chain-100000
    // dualrev/naive ran, then died preparing dualrev/staged for its graph). Kept outputs are free.
    let lookup = |id: &str| {
        let s = outputs.find(id)?;
        let room = crate::limits::memory_budget().is_none_or(|(live, limit)| live() <= limit / 2);
        (room || outputs.is_kept(id)).then(|| outputs.get(s).ok()).flatten()
    };
    let res = outputs.with_run_input(st, &out, |src| {
        let cx = RunCtx { src, origin: outputs.src, input, seed, outputs: &lookup };
        let res = match contract {
            Contract::Gradient => run_output(st, &mut m, &cx),
            Contract::SameFunction => run_main(st, &mut m, &cx),
        };
        if res.is_ok() {
            if let Some(chain) = stages::chain_of(st.info().id) {
                (chain.after_run)(&mut m, &cx);
            }
        }
        r.cost = m.cost();
        let (run_steps, dropped) = m.take_trace();
        // the transform's own steps (a rewrite) come first, then the run's, each within the trace budget
        let shown = if opts.traces(st.info().id) { out.steps.len().min(opts.budget.trace_steps) } else { 0 };
        r.trace = out.steps[..shown].iter().cloned().chain(run_steps).collect();
        if !opts.defer_texts {
            r.trace.iter_mut().for_each(TraceStep::materialise);
        }
        r.trace_dropped = dropped + (out.steps.len() - shown) as u64;
        crate::limits::set_phase(st.info().id, "drawing its graph");
        // a stage not shown keeps its graph's shape (the page shows node counts) and may leave out
        // the labels' text (`stage::shown`): it is run again, shown, when it is selected.
        // Not drawn once the run has left the live heap past the stage's memory budget: a graph
        // walks every node of its DAG, and past twice the budget the allocator stops the whole
        // process (issue 14 item 4: twice-20's arrays/dual-numbers, 552 MiB live after its run).
        let room = crate::limits::memory_budget().is_none_or(|(live, limit)| live() <= limit);
        r.graph = if room { crate::stage::showing(opts.listed(st.info().id) && opts.views, || st.graph(&mut m, &cx)) } else { None };
        res
    });
    let res = match res {
        Ok(res) => res,
        Err(d) => return fail(r, d),
    };
    match res {
        Ok((primal, grad)) => {
            let grad = if contract == Contract::SameFunction {
                // the gradient of a same-function stage: forward mode over its output
                match same_function_gradient(&out, input, seed, opts) {
                    Ok(Ok(g)) => g,
                    // a budget that runs out in forward mode is the stage's budget outcome
                    Ok(Err(e)) => return run_err(r, e),
                    Err(d) => return fail(r, d),
                }
            } else {
                grad
            };
            r.ok = true;
            r.gradient = grad.real_leaves();
            r.primal = Some(primal);
            r.gradient_value = Some(grad);
        }
        Err(e) => return run_err(r, e),
    }
    r
}

/// The IR of `st`'s prepared output, taken out of `out` to be let go once lowered (`Machine::lowered`),
/// where the output is this run's alone (`own`: no stage still to run takes it), its run does not
/// read it (its chain says so, `Chain::run_reads_program`) and no gradient of a same-function stage
/// transforms it after. Issue 14: a long program's output IR is ~4.5 KB a line, three times its
/// lowered code, and was held through the run.
fn take_ir(st: &dyn Stage, out: &mut std::rc::Rc<Prepared>, own: bool) -> Option<Program> {
    if !own || run_reads_program(st) {
        return None;
    }
    std::rc::Rc::get_mut(out).map(|p| std::mem::take(&mut p.program))
}

/// Whether `st`'s run reads its output's IR (so that it is lowered in place, not taken): its chain
/// says so (`Chain::run_reads_program`), or a same-function stage's gradient transforms it after.
fn run_reads_program(st: &dyn Stage) -> bool {
    stages::chain_of(st.info().id).is_none_or(|c| c.run_reads_program) || st.contract() == Contract::SameFunction
}

/// Whether `st`'s output, which a later stage takes, is let go and lowered as it is taken (the later
/// stage prepares it again) rather than lowered in place: where its run does not read it and the live
/// heap is past a quarter of the memory budget. In place, the IR (~4.5 KB a line) and its lowered
/// code are whole together and the IR stays through the run: issue 14 item 4, every stage on
/// chain-100000 stopped at the process's last resort lowering chad/monadic's 426 MiB output, kept
/// for chad/mutable, where chad/monadic alone peaks at 631 MiB. Preparing it again costs its
/// transform's time, once, on a program that large; below the threshold nothing changes.
fn lowers_alone(st: &dyn Stage) -> bool {
    !run_reads_program(st) && crate::limits::memory_budget().is_some_and(|(live, limit)| live() > limit / 4)
}

/// Runs a gradient stage's prepared output in `m`: its chain's set-up, then `Stage::run`.
pub fn run_output(st: &dyn Stage, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
    if let Some(chain) = stages::chain_of(st.info().id) {
        (chain.before_run)(m, cx);
    }
    st.run(m, cx)
}

/// Runs a same-function stage's `main` on the input in `m`, after its chain's set-up.
pub fn run_main(st: &dyn Stage, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
    if let Some(chain) = stages::chain_of(st.info().id) {
        (chain.before_run)(m, cx);
    }
    m.call("main", vec![cx.input.clone()]).map(|p| (p, Value::Unit))
}

/// `forward` (Krawiec et al. §4) over a same-function stage's output, run on `(input, seed)`.
fn same_function_gradient(out: &Prepared, input: &Value, seed: &Value, opts: &Options) -> Result<Result<Value, RunError>, Diagnostic> {
    let forward = stages::find("forward").expect("forward is registered");
    let src = Source { program: &out.program, input_type: &out.input_type, output_type: &out.output_type, builtins: &out.builtins };
    let fw = prepare(forward, &src, opts).map_err(|d| Diagnostic::error(d.span, format!("forward mode over this output: {}", d.message)))?;
    let mut m = Machine::new(&fw.program, &fw.builtins, opts.budget.clone()).map_err(|e| run_diag(&e))?;
    m.set_tracing(false);
    let no = |_: &str| None;
    let cx = RunCtx { src: &src, origin: &src, input, seed, outputs: &no };
    Ok(run_output(forward, &mut m, &cx).map(|(_, g)| g))
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
        (Value::Tuple(xs), Value::Tuple(ys)) | (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| approx_same(x, y))
        }
        (Value::Inl(x), Value::Inl(y)) | (Value::Inr(x), Value::Inr(y)) => approx_same(x, y),
        (a, b) => a.same(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 14 item 4: chad/mutable's output is chad/monadic's program moved into it, not a copy,
    /// where no later stage takes chad/monadic's (a long program's output was held twice, and
    /// chad/mutable stopped at the process's last resort on a 10^5-line program); where a later
    /// stage does, it is copied and the input kept. The two outputs print the same.
    #[test]
    fn a_stage_passing_its_input_through_takes_its_program() {
        crate::limits::run_with_stack(|| {
            let (p, s, t) = front_end("def main x = let y = x * x in let (a, b) = (sin y, y) in a * b + x", &[]).expect("the program checks");
            let b = Builtins::new();
            let src = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
            let opts = Options::default();
            let (monadic, mutable) = (stages::find("chad/monadic").unwrap(), stages::find("chad/mutable").unwrap());
            let prepared = |later: Vec<&'static str>| {
                let outputs = Outputs::new(&src, &opts);
                outputs.keep_for(later);
                outputs.running.set(Some("chad/mutable"));
                let input = outputs.get(monadic).expect("chad/monadic's output");
                let at = input.program.defs.as_ptr();
                drop(input);
                let out = outputs.get(mutable).expect("chad/mutable's output");
                let input_kept = outputs.kept.borrow().get("chad/monadic").is_some_and(|r| r.as_ref().is_ok_and(|p| !p.program.defs.is_empty()));
                (std::ptr::eq(at, out.program.defs.as_ptr()), input_kept, crate::print::print_program(&out.program, &Default::default()))
            };
            let (moved, input_kept, text) = prepared(vec!["chad/monadic"]);
            assert!(moved && !input_kept, "chad/mutable copied its input's program (moved {moved}, input kept {input_kept})");
            let (moved, input_kept, copied) = prepared(vec!["chad/monadic", "chad/monadic"]);
            assert!(!moved && input_kept, "a later stage takes chad/monadic's output: copied (moved {moved}, input kept {input_kept})");
            assert_eq!(text, copied);
            assert!(!stages::find("chad/monadic").unwrap().passes_input_through() && mutable.passes_input_through());
        })
    }

    /// Issue 14 item 4: chad/cc-chad's output is type-checked once, by the pipeline (its transform
    /// checked it too, to refuse what does not type, and the two checks held 531 and 513 MiB on a
    /// 10^5-line program against the 512 budget); and chad/cc's output, its input, goes before that
    /// check where the run is not traced (its run reads it only for the trace's names).
    #[test]
    fn chad_cc_chad_checks_its_output_once_without_its_input_beside_it() {
        crate::limits::run_with_stack(|| {
            let (p, s, t) = front_end("def main x = let f = \\z -> z * x in f (f x) + sin x", &[]).expect("the program checks");
            let b = Builtins::new();
            let src = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
            let (cc, cc_chad) = (stages::find("chad/cc").unwrap(), stages::find("chad/cc-chad").unwrap());
            // the transform leaves its output unchecked: its wrapper's body has no type yet
            let wrapper_typed = |p: &Program| p.def(crate::stage::WRAPPER).is_some_and(|d| d.body.ty != Type::Unknown);
            let input = Outputs::new(&src, &Options::default()).get(cc).expect("chad/cc's output");
            let cc_src = Source { program: &input.program, input_type: &input.input_type, output_type: &input.output_type, builtins: &input.builtins };
            let out = cc_chad.transform(&cc_src).expect("chad/cc-chad's output");
            assert!(!wrapper_typed(&out.program), "chad/cc-chad's transform checked its output");
            let input_kept = |trace: bool| {
                let opts = Options { trace, ..Options::default() };
                let outputs = Outputs::new(&src, &opts);
                outputs.keep_for(vec!["chad/cc"]);
                outputs.running.set(Some("chad/cc-chad"));
                drop(outputs.get(cc).expect("chad/cc's output"));
                let out = outputs.get(cc_chad).expect("chad/cc-chad's output");
                assert!(wrapper_typed(&out.program), "the pipeline checked it");
                outputs.is_kept("chad/cc")
            };
            assert!(!input_kept(false), "an untraced run: chad/cc's output goes once transformed");
            assert!(input_kept(true), "a traced run names its backpropagators from it: kept");
        })
    }

    /// Issue 14 item 4: chad's table of type-indexed instances (and the contexts their `Op`s carry)
    /// is let go once no output of the chain is kept: it held every chad stage's instances through
    /// every stage after. An output still kept for a later stage keeps them (chad/sparse runs
    /// chad/basic's output, kept through forward's turn).
    #[test]
    fn a_chains_instances_go_once_none_of_its_outputs_is_kept() {
        crate::limits::run_with_stack(|| {
            let text = "input 1.5\ndef main x = let y = x * x in let z = sin y in z * x + y";
            let named = |ids: &[&str]| {
                let opts = Options { stages: ids.iter().map(|s| s.to_string()).collect(), ..Options::default() };
                let a = analyse(text, &opts).expect("analysed");
                for r in &a.stages {
                    assert_eq!(r.status, Status::Agrees, "{}: {:?}", r.id, r.error);
                }
                stages::chad::common::ops::instances()
            };
            assert!(named(&["chad/monadic"]) > 0, "chad/monadic names its instances");
            assert_eq!(named(&["chad/monadic", "forward"]), 0, "chad/monadic's instances kept through forward's turn");
            assert!(named(&["chad/basic", "forward", "chad/sparse"]) > 0);
        })
    }

    /// An output no later stage takes, of a chain whose runs do not read it, is run from its lowered
    /// code alone: its IR is taken out and let go before the run, with the same result as a machine
    /// that keeps it; a chain whose runs read it (chad's `after_run`) keeps it, and so does an output
    /// a later stage still takes.
    #[test]
    fn a_run_lets_its_output_ir_go_once_lowered() {
        crate::limits::run_with_stack(|| {
            let (p, s, t) = front_end("def main x = let y = x * x in sin y + x", &[]).expect("the program checks");
            let b = Builtins::new();
            let src = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
            let opts = Options::default();
            let (input, seed) = (Value::Real(0.5), Value::Real(1.0));
            let forward = stages::find("forward").unwrap();
            let outputs = Outputs::new(&src, &opts);
            let mut out = outputs.get(forward).unwrap();
            assert!(take_ir(forward, &mut out, false).is_none(), "a later stage takes it: kept");
            let kept = Machine::new(&out.program, &out.builtins, opts.budget.clone()).unwrap();
            let no = |_: &str| None;
            let cx = RunCtx { src: &src, origin: &src, input: &input, seed: &seed, outputs: &no };
            let want = run_output(forward, &mut { kept }, &cx).unwrap();
            outputs.keep_only(|_| false);
            let ir = take_ir(forward, &mut out, true).expect("the run's own output: taken");
            assert!(!ir.defs.is_empty() && out.program.defs.is_empty(), "the IR moved out of the prepared output");
            let mut m = Machine::lowered(ir, &out.builtins, opts.budget.clone()).unwrap();
            assert!(m.program().is_none());
            let got = run_output(forward, &mut m, &cx).unwrap();
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
            // chad's runs read only their lowered code (chad/arrays' second run is `Machine::rerun`)
            let chad = stages::find("chad/arrays").unwrap();
            let outputs = Outputs::new(&src, &opts);
            let mut out = outputs.get(chad).unwrap();
            outputs.keep_only(|_| false);
            assert!(take_ir(chad, &mut out, true).is_some(), "chad's run does not read its program: taken");
            // unf's runs read theirs (the continuation line of a trace step)
            let unf = stages::find("unf/back").unwrap();
            let outputs = Outputs::new(&src, &opts);
            let mut out = outputs.get(unf).unwrap();
            outputs.keep_only(|_| false);
            assert!(take_ir(unf, &mut out, true).is_none() && !out.program.defs.is_empty(), "unf's run reads its program: kept");
        })
    }
}
