//! The Cotangent core exposed to the playground page (through wasm-bindgen, in a Web Worker).
//!
//! - `analyse(source, options)` runs the pipeline and returns everything the page shows: located
//!   diagnostics, the input and primal, the reference gradient (forward mode and finite differences),
//!   and for every stage its description, program, gradient, agreement, cost counters, trace and
//!   Delta DAG (as data and as SVG).
//! - `stages()` lists the registered stages, `chains()` the papers' chains of them; `examples()` the
//!   embedded `examples/*.cot`.
//! - `draw_graph(graph, limit)` draws a graph the page already holds (for the stage selected later).
//!
//! Offsets handed to the page (`from`, `to`) are UTF-16 code-unit offsets into the source, i.e. JS
//! string indices; `start`/`end` are the core's byte offsets.

pub mod arraygroups;
pub mod dag;
pub mod timing;

use cotangent::diag::{line_col, render, Diagnostic, Span};
use cotangent::interp::{Budget, Cost, Graph};
use cotangent::pipeline::{self, Options, Reference};
use cotangent::stages;
use cotangent::value::{json_real, to_json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wasm_bindgen::prelude::*;

mod examples_data {
    include!(concat!(env!("OUT_DIR"), "/examples.rs"));
}

/// Options from the page; every field is optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct WebOptions {
    /// Overrides the program's `input` (a value in the surface syntax).
    pub at: Option<String>,
    /// The output cotangent (a value in the surface syntax).
    pub seed: Option<String>,
    /// `param` overrides, `{name: int}`.
    pub params: BTreeMap<String, i64>,
    /// Stage ids to run; empty: every stage.
    pub stages: Vec<String>,
    pub budget: Option<WebBudget>,
    /// Record backward-pass traces (default true).
    pub trace: Option<bool>,
    /// Which stages get `graph_svg`: absent = all; a list = those ids only.
    pub svg: Option<Vec<String>>,
    /// Nodes drawn per graph (default `dag::DRAW_LIMIT`).
    pub graph_limit: Option<usize>,
    /// Printed program width (default 80).
    pub width: Option<usize>,
    /// Print programs in ASCII.
    pub ascii: bool,
    /// Stages whose trace and graph are included: absent = all. The others carry only their sizes
    /// (`trace_len`, `graph_nodes`, ...); `stage_detail` fetches the rest from the kept analysis.
    pub detail: Option<Vec<String>>,
    /// Stages that record their traces (and keep their rewrites' steps): absent = all. The others run
    /// untraced (`traced: false`), which is much cheaper for rewrite stages; `stage_detail` runs such a
    /// stage again, traced, when the page asks for it.
    pub traced: Option<Vec<String>>,
    /// Keep this analysis for `stage_detail` (the page's main runs; not its complexity sweeps).
    pub keep: bool,
    /// The run this analysis is a phase of (`analyse_stream`): it takes that run's id, and is kept
    /// beside the run's earlier phases.
    #[serde(skip)]
    pub run: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct WebBudget {
    pub steps: Option<u64>,
    pub allocs: Option<u64>,
    pub depth: Option<u64>,
    pub trace_steps: Option<usize>,
}

/// A located message. `from`/`to` are UTF-16 offsets (null for messages about no particular place).
#[derive(Clone, Debug, Serialize)]
pub struct WebDiag {
    pub message: String,
    pub severity: String,
    pub stage: Option<String>,
    pub line: Option<usize>,
    pub col: Option<usize>,
    pub start: Option<u32>,
    pub end: Option<u32>,
    pub from: Option<usize>,
    pub to: Option<usize>,
    pub rendered: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct WebSpan {
    pub start: u32,
    pub end: u32,
    pub from: usize,
    pub to: usize,
    pub line: usize,
    pub col: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct WebStep {
    pub kind: String,
    pub node: Option<u64>,
    pub span: Option<WebSpan>,
    pub factor: Option<cotangent::interp::Shown>,
    pub note: String,
    pub state: Vec<(String, cotangent::interp::Shown)>,
    /// The names of the rows printed when the step is shown (a rewrite step's terms), which follow
    /// `state`'s: `step_texts` makes them, and the note, from the kept analysis.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<String>,
    #[serde(skip)]
    later: Option<std::rc::Rc<StepLater>>,
}

/// What a step prints when it is shown (`cotangent::print::Later`).
#[derive(Debug)]
struct StepLater {
    note: Option<cotangent::print::Later>,
    rows: Vec<(String, cotangent::print::Later)>,
}

/// A step's texts printed when shown: its note and its deferred rows.
#[derive(Clone, Debug, Serialize)]
pub struct StepTexts {
    pub note: String,
    pub rows: Vec<(String, String)>,
}

/// A stage's view; a rewrite trace's text (`deferred`) comes with `view_text`.
#[derive(Clone, Debug, Serialize)]
pub struct WebView {
    pub name: String,
    pub text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<cotangent::stage::StackRow>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
    #[serde(skip)]
    later: Option<cotangent::print::Later>,
}

impl From<cotangent::stage::View> for WebView {
    fn from(v: cotangent::stage::View) -> WebView {
        WebView { name: v.name, text: v.text, stack: v.stack, deferred: v.later.is_some(), later: v.later }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct StageDesc {
    pub id: &'static str,
    /// The id of its chain (from the registry).
    pub group: &'static str,
    pub paper: &'static str,
    pub section: &'static str,
    pub title: &'static str,
    pub explanation: &'static str,
    pub complexity: &'static str,
    pub accepts: &'static str,
    /// What the page shows beyond the program, graph and steps (a graph beside, share marks).
    pub page: cotangent::stage::PageHints,
}

#[derive(Clone, Debug, Serialize)]
pub struct WebStage {
    #[serde(flatten)]
    pub desc: StageDesc,
    pub ok: bool,
    pub error: Option<String>,
    pub error_span: Option<WebSpan>,
    pub program: String,
    /// The stage ran but was not printed (not shown, see `WebOptions::traced`): its program (and
    /// `program_lines`, `views`) come with `stage_detail`.
    pub program_omitted: bool,
    /// For each line of `program`, the source ranges it came from (`[from, to)` in UTF-16 units of
    /// the editor's text): the page highlights them when the line is hovered, and back.
    pub program_lines: Vec<Vec<[usize; 2]>>,
    /// Other renderings of the output in the paper's notation (a UNF stack diagram, a rewrite trace).
    pub views: Vec<WebView>,
    pub primal: Option<serde_json::Value>,
    #[serde(serialize_with = "json_real::vec")]
    pub gradient: Vec<f64>,
    pub gradient_value: Option<serde_json::Value>,
    pub agrees: Option<bool>,
    pub cost: Cost,
    pub trace: Vec<WebStep>,
    pub trace_dropped: u64,
    pub graph: Option<Graph>,
    pub graph_svg: Option<String>,
    /// Whether `trace`, `graph` and `graph_svg` are included (see `WebOptions::detail`).
    pub detail: bool,
    /// Whether the stage ran traced (see `WebOptions::traced`): if not, `trace_len` is 0 and the steps
    /// come with `stage_detail`.
    pub traced: bool,
    pub trace_len: usize,
    pub graph_nodes: usize,
    pub graph_edges: usize,
    pub graph_shared: usize,
    pub graph_omitted: u64,
}

#[derive(Clone, Debug, Serialize, Default)]
pub struct WebParam {
    pub name: String,
    pub value: i64,
}

#[derive(Clone, Debug, Serialize, Default)]
pub struct WebAnalysis {
    /// Non-empty when the program could not be analysed (then the fields below are empty).
    pub diagnostics: Vec<WebDiag>,
    pub input: Option<serde_json::Value>,
    /// The real leaves of the input, left to right (the coordinates of every gradient).
    #[serde(serialize_with = "json_real::vec")]
    pub input_reals: Vec<f64>,
    /// A label per real leaf of the input, as the gradient table shows it (`a[0]`, `x.1[2]`): see
    /// `input_labels`.
    pub input_labels: Vec<String>,
    pub input_text: Option<String>,
    pub seed: Option<serde_json::Value>,
    /// The seed as the language writes it (the page's, else the program's `seed` line, else ones).
    pub seed_text: Option<String>,
    pub primal: Option<serde_json::Value>,
    pub primal_text: Option<String>,
    pub input_type: Option<String>,
    pub output_type: Option<String>,
    pub params: Vec<WebParam>,
    pub reference: Option<Reference>,
    pub stages: Vec<WebStage>,
    /// Milliseconds the analysis took inside wasm (0 natively).
    pub elapsed_ms: f64,
    /// Identifies a kept analysis for `stage_detail`.
    pub run_id: u64,
    /// What a kept analysis was made from, so that `stage_detail` can run an untraced stage again.
    #[serde(skip)]
    pub source: String,
    #[serde(skip)]
    pub options: WebOptions,
}

thread_local! {
    static KEPT: std::cell::RefCell<Option<WebAnalysis>> = const { std::cell::RefCell::new(None) };
    static RUNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn next_run() -> u64 {
    RUNS.with(|r| {
        r.set(r.get() + 1);
        r.get()
    })
}

/// The trace and graph of one stage of a kept analysis.
#[derive(Clone, Debug, Serialize)]
pub struct StageDetail {
    pub id: String,
    pub detail: bool,
    pub traced: bool,
    pub trace: Vec<WebStep>,
    pub trace_dropped: u64,
    pub trace_len: usize,
    pub graph: Option<Graph>,
    pub graph_svg: Option<String>,
    pub graph_nodes: usize,
    pub graph_edges: usize,
    pub graph_shared: usize,
    pub graph_omitted: u64,
    /// The stage's views, when it was run again traced (a rewrite trace view then has its steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub views: Option<Vec<WebView>>,
    /// Its program and line map, when it was run again because they were omitted (`program_omitted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_lines: Option<Vec<Vec<[usize; 2]>>>,
    pub program_omitted: bool,
}

/// The detail of stage `id` from the analysis kept under `run_id`, drawing its graph if needed.
pub fn detail_of(run_id: u64, id: &str, limit: Option<usize>) -> Option<StageDetail> {
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        let a = k.as_mut().filter(|a| a.run_id == run_id)?;
        let (source, options) = (a.source.clone(), a.options.clone());
        let s = a.stages.iter_mut().find(|s| s.desc.id == id)?;
        let (mut views, mut program) = (None, None);
        if !s.traced && (s.ok || s.program_omitted) {
            // run untraced and not printed with the others: run it again, alone and shown (its inputs
            // are prepared again)
            let again = WebOptions { stages: vec![id.to_string()], traced: None, detail: None, svg: Some(vec![]), keep: false, run: None, ..options };
            let fresh = analyse_text(&source, &again).stages.into_iter().find(|t| t.desc.id == id)?;
            views = Some(fresh.views.clone());
            program = Some((fresh.program.clone(), fresh.program_lines.clone()));
            *s = WebStage { graph_svg: None, ..fresh };
        }
        if s.graph_svg.is_none() {
            s.graph_svg = s.graph.as_ref().and_then(|g| dag::draw(&dag::G::from(g), limit.unwrap_or(dag::DRAW_LIMIT)));
        }
        Some(StageDetail {
            id: id.to_string(),
            detail: true,
            traced: s.traced,
            trace: s.trace.clone(),
            trace_dropped: s.trace_dropped,
            trace_len: s.trace.len(),
            graph: s.graph.clone(),
            graph_svg: s.graph_svg.clone(),
            graph_nodes: s.graph_nodes,
            graph_edges: s.graph_edges,
            graph_shared: s.graph_shared,
            graph_omitted: s.graph_omitted,
            views,
            program_omitted: s.program_omitted,
            program_lines: program.as_ref().map(|p| p.1.clone()),
            program: program.map(|p| p.0),
        })
    })
}

/// The texts step `index` of stage `id` prints when it is shown (its note and deferred rows), from the
/// analysis kept under `run_id`.
pub fn step_texts_of(run_id: u64, id: &str, index: usize) -> Option<StepTexts> {
    KEPT.with(|k| {
        let k = k.borrow();
        let a = k.as_ref().filter(|a| a.run_id == run_id)?;
        let step = a.stages.iter().find(|s| s.desc.id == id)?.trace.get(index)?;
        let later = step.later.as_ref();
        Some(StepTexts {
            note: later.and_then(|l| l.note.as_ref()).map_or_else(|| step.note.clone(), |n| n.text()),
            rows: later.map_or(vec![], |l| l.rows.iter().map(|(k, t)| (k.clone(), t.text())).collect()),
        })
    })
}

/// The text of view `name` of stage `id`, printed now if it was deferred, from the analysis kept under
/// `run_id`.
pub fn view_text_of(run_id: u64, id: &str, name: &str) -> Option<String> {
    KEPT.with(|k| {
        let k = k.borrow();
        let a = k.as_ref().filter(|a| a.run_id == run_id)?;
        let v = a.stages.iter().find(|s| s.desc.id == id)?.views.iter().find(|v| v.name == name)?;
        Some(v.later.as_ref().map_or_else(|| v.text.clone(), |l| l.text()))
    })
}

/// Byte offset → UTF-16 offset, for one source text.
struct Offsets {
    table: Vec<u32>,
}

impl Offsets {
    fn new(text: &str) -> Offsets {
        let mut table = vec![0u32; text.len() + 1];
        let mut u = 0u32;
        for (i, c) in text.char_indices() {
            for k in 0..c.len_utf8() {
                table[i + k] = u;
            }
            u += c.len_utf16() as u32;
        }
        table[text.len()] = u;
        Offsets { table }
    }
    fn at(&self, byte: u32) -> usize {
        let i = (byte as usize).min(self.table.len() - 1);
        self.table[i] as usize
    }
}

fn web_span(text: &str, off: &Offsets, s: Span) -> Option<WebSpan> {
    if s.is_none() {
        return None;
    }
    let lc = line_col(text, s.start as usize);
    Some(WebSpan { start: s.start, end: s.end, from: off.at(s.start), to: off.at(s.end.max(s.start)), line: lc.line, col: lc.col })
}

fn web_diag(text: &str, off: &Offsets, d: &Diagnostic) -> WebDiag {
    // A span into the input point or seed box, not the program: nothing to mark in the editor.
    let sp = if d.origin.is_some() { None } else { web_span(text, off, d.span) };
    WebDiag {
        message: d.message.clone(),
        severity: match d.severity {
            cotangent::diag::Severity::Error => "error".into(),
            cotangent::diag::Severity::Warning => "warning".into(),
        },
        stage: d.stage.clone(),
        line: sp.as_ref().map(|s| s.line),
        col: sp.as_ref().map(|s| s.col),
        start: sp.as_ref().map(|s| s.start),
        end: sp.as_ref().map(|s| s.end),
        from: sp.as_ref().map(|s| s.from),
        to: sp.as_ref().map(|s| s.to),
        rendered: match &d.origin {
            Some((name, arg)) => render(name, arg, d),
            None => render("program.cot", text, d),
        },
    }
}

pub fn stage_descs() -> Vec<StageDesc> {
    stages::all()
        .into_iter()
        .map(|s| {
            let i = s.info();
            StageDesc {
                id: i.id,
                group: stages::chain_of(i.id).map_or("", |c| c.id),
                paper: i.paper,
                section: i.section,
                title: i.title,
                explanation: i.explanation,
                complexity: i.complexity,
                accepts: i.accepts,
                page: s.page(),
            }
        })
        .collect()
}

fn desc_of(id: &str) -> StageDesc {
    stage_descs().into_iter().find(|d| d.id == id).unwrap_or(StageDesc {
        id: "?",
        group: "?",
        paper: "",
        section: "",
        title: "",
        explanation: "",
        complexity: "",
        accepts: "",
        page: Default::default(),
    })
}

/// Milliseconds, from the worker's `Performance` (web-sys) where there is one, else `Date.now()`.
fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        use wasm_bindgen::JsCast;
        match js_sys::global().dyn_into::<web_sys::WorkerGlobalScope>().ok().and_then(|w| w.performance()) {
            Some(p) => p.now(),
            None => js_sys_now(),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        0.0
    }
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    fn js_sys_now() -> f64;
}

/// A label per real leaf of `input` (left to right, as gradients are listed): main's parameter
/// pattern names the leaves it binds, and the rest of the leaf's path follows (`Value::leaf_paths`):
/// `def main (a, b)` at `([1.0, 2.0], 3.0)` gives `a[0]`, `a[1]`, `b`. Where the pattern binds no
/// name, the whole path hangs off `x` (`x.1[2]`).
pub fn input_labels(program: &cotangent::ir::Program, input: &cotangent::value::Value) -> Vec<String> {
    use cotangent::ir::{ExprKind, Pat};
    let pat = program.def("main").and_then(|d| match &d.body.kind {
        ExprKind::Lam(_, p_b) => Some(&p_b.0),
        _ => None,
    });
    input
        .leaf_paths()
        .into_iter()
        .map(|path| {
            let mut rest = path.as_str();
            let mut p = pat;
            // Follow leading tuple components (`.k`) into the pattern while it is a tuple pattern.
            while let Some(Pat::Tuple(ps, _)) = p {
                let digits = rest.strip_prefix('.').map(|r| r.len() - r.trim_start_matches(|c: char| c.is_ascii_digit()).len()).unwrap_or(0);
                match rest[1.min(rest.len())..][..digits].parse::<usize>().ok().and_then(|k| ps.get(k)) {
                    Some(q) if digits > 0 => {
                        p = Some(q);
                        rest = &rest[1 + digits..];
                    }
                    _ => break,
                }
            }
            match p {
                Some(Pat::Var(n, _)) => format!("{}{rest}", n.text),
                _ => format!("x{path}"),
            }
        })
        .collect()
}

/// The whole analysis, as plain Rust data (used natively by the tests, and by `analyse`).
pub fn analyse_text(text: &str, o: &WebOptions) -> WebAnalysis {
    let mut whole = WebAnalysis::default();
    analyse_text_in_phases(text, o, std::slice::from_ref(&o.stages), &mut |w| whole = w);
    whole
}

/// `analyse_text` over phases (lists of stage ids; `o.stages` is not read): one pipeline run
/// (`pipeline::analyse_in_phases`: the front end, the reference and each prepared output once), with
/// each phase's stages handed to `on_phase` as soon as they have run. A program that does not
/// analyse gives one phase, with its diagnostics.
pub fn analyse_text_in_phases(text: &str, o: &WebOptions, phases: &[Vec<String>], on_phase: &mut dyn FnMut(WebAnalysis)) {
    let mut t0 = now_ms();
    let off = Offsets::new(text);
    let run_id = o.run.unwrap_or_else(next_run);
    let mut opts = Options {
        at: o.at.clone().filter(|s| !s.trim().is_empty()),
        seed: o.seed.clone().filter(|s| !s.trim().is_empty()),
        params: o.params.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        lines: true,
        ..Options::default()
    };
    opts.trace = o.trace.unwrap_or(true);
    // a rewrite's step texts and trace view are printed when the page shows them (`step_texts`,
    // `view_text`), not at every keystroke
    opts.defer_texts = true;
    opts.traced = o.traced.clone();
    if let Some(b) = &o.budget {
        let d = Budget::default();
        opts.budget = Budget {
            steps: b.steps.unwrap_or(d.steps),
            allocs: b.allocs.unwrap_or(d.allocs),
            depth: b.depth.unwrap_or(d.depth),
            trace_steps: b.trace_steps.unwrap_or(d.trace_steps),
            ..d
        };
    }
    if let Some(w) = o.width {
        opts.print.width = w.clamp(20, 400);
    }
    opts.print.unicode = !o.ascii;
    let limit = o.graph_limit.unwrap_or(dag::DRAW_LIMIT);
    let mut finish = |mut out: WebAnalysis| {
        finish_phase(&mut out, text, o, run_id);
        out.elapsed_ms = now_ms() - t0;
        on_phase(out);
        t0 = now_ms();
    };
    let res = pipeline::analyse_in_phases(text, &opts, phases, &mut |a, stages| {
        let mut out = WebAnalysis::default();
        {
            out.input = Some(to_json(&a.input));
            out.input_text = Some(a.input.to_string());
            out.input_reals = a.input.real_leaves();
            out.input_labels = input_labels(&a.program, &a.input);
            out.seed = Some(to_json(&a.seed));
            out.seed_text = Some(a.seed.to_string());
            out.primal = Some(to_json(&a.primal));
            out.primal_text = Some(a.primal.to_string());
            out.input_type = Some(cotangent::types::show(&a.input_type));
            out.output_type = Some(cotangent::types::show(&a.output_type));
            out.params = a.program.params.iter().map(|p| WebParam { name: p.name.text.to_string(), value: p.value }).collect();
            out.reference = a.reference.clone();
            let calls = arraygroups::array_calls(&a.program, text);
            for mut r in stages {
                if let Some(g) = r.graph.as_mut() {
                    arraygroups::group_by_array_call(g, &calls);
                }
                let want_svg = o.svg.as_ref().is_none_or(|ids| ids.contains(&r.id));
                // A step without a span of its own points at its node's span, where the node has one.
                let node_span: std::collections::HashMap<u64, Span> = r
                    .graph
                    .iter()
                    .flat_map(|g| g.nodes.iter())
                    .filter_map(|n| n.span.filter(|s| !s.is_none()).map(|s| (n.id, s)))
                    .collect();
                let graph_svg = if want_svg { r.graph.as_ref().and_then(|g| dag::draw(&dag::G::from(g), limit)) } else { None };
                out.stages.push(WebStage {
                    desc: desc_of(&r.id),
                    ok: r.ok,
                    error: r.error.clone(),
                    error_span: r.error_span.and_then(|s| web_span(text, &off, s)),
                    program: r.program,
                    program_omitted: r.program_omitted,
                    program_lines: r
                        .program_lines
                        .iter()
                        .map(|l| {
                            l.iter()
                                .filter(|s| !s.is_none() && (s.end as usize) <= text.len() && s.start <= s.end)
                                .map(|s| [off.at(s.start), off.at(s.end)])
                                .collect()
                        })
                        .collect(),
                    views: r.views.into_iter().map(WebView::from).collect(),
                    primal: r.primal.as_ref().map(to_json),
                    gradient: r.gradient,
                    gradient_value: r.gradient_value.as_ref().map(to_json),
                    agrees: r.agrees,
                    cost: r.cost,
                    trace: r
                        .trace
                        .into_iter()
                        .map(|s| WebStep {
                            kind: s.kind,
                            node: s.node,
                            span: s
                                .span
                                .filter(|sp| !sp.is_none())
                                .or_else(|| s.node.and_then(|n| node_span.get(&n).copied()))
                                .and_then(|sp| web_span(text, &off, sp)),
                            factor: s.factor,
                            note: s.note,
                            state: s.state,
                            deferred: s.state_later.iter().map(|(k, _)| k.clone()).collect(),
                            later: (s.note_later.is_some() || !s.state_later.is_empty())
                                .then(|| std::rc::Rc::new(StepLater { note: s.note_later, rows: s.state_later })),
                        })
                        .collect(),
                    trace_dropped: r.trace_dropped,
                    detail: true,
                    traced: opts.traces(&r.id),
                    trace_len: 0,
                    graph_nodes: r.graph.as_ref().map_or(0, |g| g.nodes.len()),
                    graph_edges: r.graph.as_ref().map_or(0, |g| g.edges.len()),
                    graph_shared: r.graph.as_ref().map_or(0, |g| g.nodes.iter().filter(|n| n.shared).count()),
                    graph_omitted: r.graph.as_ref().map_or(0, |g| g.omitted),
                    graph: r.graph,
                    graph_svg,
                });
            }
        }
        finish(out);
    });
    if let Err(ds) = res {
        let mut out = WebAnalysis::default();
        out.diagnostics = ds.iter().map(|d| web_diag(text, &off, d)).collect();
        if out.diagnostics.is_empty() {
            out.diagnostics.push(web_diag(text, &off, &Diagnostic::error(Span::NONE, "the program could not be analysed")));
        }
        finish(out);
    }
}

/// What every phase's result gets: trace lengths, the run id, the kept analysis, details cut.
fn finish_phase(out: &mut WebAnalysis, text: &str, o: &WebOptions, run_id: u64) {
    for st in &mut out.stages {
        st.trace_len = st.trace.len();
    }
    out.run_id = run_id;
    if o.keep {
        out.source = text.to_string();
        out.options = o.clone();
        KEPT.with(|k| {
            let mut k = k.borrow_mut();
            match k.as_mut() {
                // a later phase of the same run: its stages join the kept ones
                Some(kept) if kept.run_id == out.run_id => kept.stages.extend(out.stages.iter().cloned()),
                _ => *k = Some(out.clone()),
            }
        });
    }
    if let Some(ids) = &o.detail {
        for st in out.stages.iter_mut().filter(|st| !ids.iter().any(|i| i == st.desc.id)) {
            st.detail = false;
            st.trace = vec![];
            st.graph = None;
            st.graph_svg = None;
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Example {
    /// File name without `.cot`.
    pub name: String,
    /// The file-name prefix before the first `-` or `_` (the paper), e.g. `krawiec`.
    pub paper: String,
    /// The first comment line, without `--`.
    pub title: String,
    pub source: String,
}

pub fn example_list() -> Vec<Example> {
    examples_data::EXAMPLES
        .iter()
        .map(|(name, src)| {
            let paper = name.split(['-', '_']).next().unwrap_or(name).to_string();
            let title = src
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("--"))
                .map(|l| l.trim_start_matches('-').trim().to_string())
                .unwrap_or_else(|| name.to_string());
            Example { name: name.to_string(), paper, title, source: src.to_string() }
        })
        .collect()
}

fn to_js<T: Serialize>(v: &T) -> JsValue {
    let ser = serde_wasm_bindgen::Serializer::json_compatible();
    v.serialize(&ser).unwrap_or_else(|e| JsValue::from_str(&format!("serialisation failed: {e}")))
}

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// Runs the pipeline on `source`; see `WebOptions` for `options` and `WebAnalysis` for the result.
#[wasm_bindgen]
pub fn analyse(source: &str, options: JsValue) -> JsValue {
    let opts: WebOptions = if options.is_undefined() || options.is_null() {
        WebOptions::default()
    } else {
        match serde_wasm_bindgen::from_value(options) {
            Ok(o) => o,
            Err(e) => {
                let d = Diagnostic::error(Span::NONE, format!("bad options: {e}"));
                let off = Offsets::new(source);
                return to_js(&WebAnalysis { diagnostics: vec![web_diag(source, &off, &d)], ..WebAnalysis::default() });
            }
        }
    };
    to_js(&analyse_text(source, &opts))
}

/// `analyse` as a JSON string (one `JSON.parse` in the page is much cheaper than building the objects
/// from wasm). NaN and infinities are the strings "NaN", "Infinity", "-Infinity" (`json_real`), as in
/// `analyse`; an empty string only if serialization fails (the caller then uses `analyse`).
#[wasm_bindgen]
pub fn analyse_json(source: &str, options: JsValue) -> String {
    let opts: WebOptions = if options.is_undefined() || options.is_null() {
        WebOptions::default()
    } else {
        match serde_wasm_bindgen::from_value(options) {
            Ok(o) => o,
            Err(_) => return String::new(),
        }
    };
    serde_json::to_string(&analyse_text(source, &opts)).unwrap_or_default()
}

/// Runs the analysis in phases, each a list of stage ids (the page puts `forward` and the selected
/// stage first, then the rest of its chain, then the other chains), and posts each phase's result to
/// the page as soon as it is ready:
/// `{id: request, ok: true, partial: true, result: {json, phase_ms}}` from this worker
/// (`DedicatedWorkerGlobalScope::post_message`), so the selected stage shows before the other chains
/// have run. All phases are one pipeline run (the front end, the reference and each prepared output
/// once), with one run id (and one kept analysis for `stage_detail`). A program that does not analyse
/// posts one phase, with its diagnostics. Returns the number of phases posted.
#[wasm_bindgen]
pub fn analyse_stream(request: f64, source: &str, options: JsValue, phases: JsValue) -> Result<u32, JsValue> {
    use wasm_bindgen::JsCast;
    let opts: WebOptions = if options.is_undefined() || options.is_null() {
        WebOptions::default()
    } else {
        serde_wasm_bindgen::from_value(options).map_err(|e| JsValue::from_str(&format!("bad options: {e}")))?
    };
    let phases: Vec<Vec<String>> = serde_wasm_bindgen::from_value(phases).map_err(|e| JsValue::from_str(&format!("bad phases: {e}")))?;
    let scope: web_sys::DedicatedWorkerGlobalScope = js_sys::global().dyn_into().map_err(|_| JsValue::from_str("analyse_stream runs in a dedicated worker"))?;
    let mut ran = 0;
    let mut posted: Result<(), JsValue> = Ok(());
    let o = WebOptions { run: Some(next_run()), ..opts };
    analyse_text_in_phases(source, &o, &phases, &mut |a| {
        if posted.is_err() {
            return;
        }
        posted = (|| {
            let json = serde_json::to_string(&a).map_err(|e| JsValue::from_str(&e.to_string()))?;
            let result = js_sys::Object::new();
            js_sys::Reflect::set(&result, &"json".into(), &json.into())?;
            js_sys::Reflect::set(&result, &"phase_ms".into(), &a.elapsed_ms.into())?;
            let msg = js_sys::Object::new();
            js_sys::Reflect::set(&msg, &"id".into(), &request.into())?;
            js_sys::Reflect::set(&msg, &"ok".into(), &true.into())?;
            js_sys::Reflect::set(&msg, &"partial".into(), &true.into())?;
            js_sys::Reflect::set(&msg, &"result".into(), &result)?;
            scope.post_message(&msg)
        })();
        ran += 1;
    });
    posted?;
    Ok(ran)
}

/// The trace and graph of stage `id` of the analysis kept under `run_id` (an `analyse` with
/// `keep: true`); `null` when that analysis is no longer kept.
#[wasm_bindgen]
pub fn stage_detail(run_id: f64, id: &str, limit: Option<usize>) -> JsValue {
    match detail_of(run_id as u64, id, limit) {
        Some(d) => to_js(&d),
        None => JsValue::NULL,
    }
}

/// Every registered stage, in order.
/// A step's deferred texts (`step_texts_of`): `{note, rows}`, or null if the run is no longer kept.
#[wasm_bindgen]
pub fn step_texts(run_id: f64, id: &str, index: usize) -> JsValue {
    step_texts_of(run_id as u64, id, index).map_or(JsValue::NULL, |t| to_js(&t))
}

/// A view's text (`view_text_of`), or undefined if the run is no longer kept.
#[wasm_bindgen]
pub fn view_text(run_id: f64, id: &str, name: &str) -> Option<String> {
    view_text_of(run_id as u64, id, name)
}

#[wasm_bindgen]
pub fn stages() -> JsValue {
    to_js(&stage_descs())
}

// ---- Chains: the page's stage groups and headings, from the registry (`stages::CHAINS`).

/// A paper's chain of stages, in the paper's order, with the counters its runtimes report.
#[derive(Clone, Debug, Serialize)]
pub struct ChainDesc {
    pub id: &'static str,
    /// Short citation of the paper, e.g. `Krawiec et al. 2022`.
    pub paper: &'static str,
    pub citation: &'static str,
    pub url: &'static str,
    /// The heading the page shows for the chain.
    pub title: &'static str,
    pub stages: Vec<&'static str>,
    /// `[{name, about}]`: what each of the chain's counters counts (the page's labels).
    pub counters: &'static [cotangent::stage::CounterInfo],
}

pub fn chain_descs() -> Vec<ChainDesc> {
    stages::CHAINS
        .iter()
        .map(|c| ChainDesc {
            id: c.id,
            paper: c.paper,
            citation: c.citation,
            url: c.url,
            title: c.title,
            stages: c.stages.iter().map(|s| s.info().id).collect(),
            counters: c.counters,
        })
        .collect()
}

/// Every chain, in registry order: `[{id, paper, citation, url, title, stages: [stage id], counters}]`.
#[wasm_bindgen]
pub fn chains() -> JsValue {
    to_js(&chain_descs())
}

#[cfg(test)]
mod chain_tests {
    #[test]
    fn chains_cover_every_stage_once_in_registry_order() {
        let chains = super::chain_descs();
        let flat: Vec<&str> = chains.iter().flat_map(|c| c.stages.iter().copied()).collect();
        let ids: Vec<&str> = super::stage_descs().iter().map(|d| d.id).collect();
        assert_eq!(flat, ids);
        assert_eq!(chains[0].id, "forward");
        let k = chains.iter().find(|c| c.id == "krawiec").unwrap();
        assert_eq!(k.paper, "Krawiec et al. 2022");
        assert!(k.stages.contains(&"krawiec/monadic"));
        assert!(k.counters.iter().any(|c| c.name == "eval_visits"));
    }
}

/// The embedded examples (`examples/*.cot`), sorted by file name.
#[wasm_bindgen]
pub fn examples() -> JsValue {
    to_js(&example_list())
}

/// Draws a graph (as returned in `stages[i].graph`) as SVG; `null` for an empty or malformed graph.
#[wasm_bindgen]
pub fn draw_graph(graph: JsValue, limit: Option<usize>) -> Option<String> {
    let g: dag::G = serde_wasm_bindgen::from_value(graph).ok()?;
    dag::draw(&g, limit.unwrap_or(dag::DRAW_LIMIT))
}

/// The crate version, for the page's footer.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_offsets() {
        let o = Offsets::new("aé𝑥b");
        assert_eq!((o.at(0), o.at(1), o.at(3), o.at(7), o.at(8)), (0, 1, 2, 4, 5));
    }

    #[test]
    fn stages_are_listed_with_groups() {
        let d = stage_descs();
        assert!(d.iter().any(|s| s.id == "forward" && s.group == "forward"));
        for s in &d {
            assert_eq!(s.group, s.id.split('/').next().unwrap());
        }
    }

    #[test]
    fn a_seed_line_in_the_program_is_used_when_the_page_gives_none() {
        let src = "input (1.0, 2.0)\nseed (1.0, -2.0)\ndef main (x, y) = (x * y, x + y)\n";
        for blank in [None, Some(String::new()), Some("  ".into())] {
            let a = analyse_text(src, &WebOptions { seed: blank, ..WebOptions::default() });
            assert!(a.diagnostics.is_empty(), "{:?}", a.diagnostics.first().map(|d| &d.message));
            assert_eq!(a.seed_text.as_deref(), Some("(1.0, -2.0)"));
            // d/dx (xy - 2(x + y)) = y - 2 = 0, d/dy = x - 2 = -1
            assert_eq!(a.reference.as_ref().map(|r| r.gradient.clone()), Some(vec![0.0, -1.0]));
        }
        let a = analyse_text(src, &WebOptions { seed: Some("(0.0, 1.0)".into()), ..WebOptions::default() });
        assert_eq!(a.reference.map(|r| r.gradient), Some(vec![1.0, 1.0]));
    }

    #[test]
    fn syntax_error_is_located() {
        let a = analyse_text("def main x = (x +", &WebOptions::default());
        assert!(!a.diagnostics.is_empty());
        assert!(a.stages.is_empty());
        assert!(a.diagnostics[0].rendered.contains("error"));
    }

    #[test]
    fn every_example_analyses_and_every_graph_is_drawn() {
        for e in example_list() {
            let a = analyse_text(&e.source, &WebOptions::default());
            assert!(a.diagnostics.is_empty(), "{}: {:?}", e.name, a.diagnostics.first().map(|d| &d.message));
            for s in &a.stages {
                if let Some(g) = &s.graph {
                    assert_eq!(s.graph_svg.is_some(), !g.nodes.is_empty(), "{} {}", e.name, s.desc.id);
                }
            }
        }
    }

    #[test]
    fn json_result_matches_and_names_non_finite_numbers() {
        let a = analyse_text("input (12.0, 13.0)\ndef main (x, y) = let z = x + y in x * z\n", &WebOptions::default());
        let j: serde_json::Value = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(j["stages"][0]["gradient"], serde_json::json!([37.0, 12.0]));
        // log at 0: primal −∞, gradient 1/0 = ∞ (JSON has no infinities: named strings, not null)
        let b = analyse_text("input 0.0\ndef main x = log x\n", &WebOptions::default());
        let j: serde_json::Value = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        assert_eq!(j["primal"], serde_json::json!("-Infinity"));
        assert_eq!(j["reference"]["gradient"], serde_json::json!(["Infinity"]));
        assert_eq!(j["stages"][0]["gradient"], serde_json::json!(["Infinity"]));
    }

    #[test]
    fn detail_only_for_chosen_stages_and_on_demand() {
        let src = "input (12.0, 13.0)\ndef main (x, y) = let z = x + y in x * z\n";
        let o = WebOptions { detail: Some(vec!["krawiec/delta".into()]), keep: true, svg: Some(vec![]), ..WebOptions::default() };
        let a = analyse_text(src, &o);
        let full = analyse_text(src, &WebOptions::default());
        for (s, f) in a.stages.iter().zip(&full.stages) {
            assert_eq!(s.trace_len, f.trace.len(), "{}", s.desc.id);
            if s.desc.id == "krawiec/delta" {
                assert!(s.detail && s.trace.len() == s.trace_len);
            } else {
                assert!(!s.detail && s.trace.is_empty() && s.graph.is_none());
            }
        }
        // The second analysis was not kept, so the first one answers.
        let d = detail_of(a.run_id, "krawiec/monadic", None).unwrap();
        let f = full.stages.iter().find(|s| s.desc.id == "krawiec/monadic").unwrap();
        assert_eq!(d.trace.len(), f.trace.len());
        assert_eq!(d.graph.as_ref().map(|g| g.nodes.len()), f.graph.as_ref().map(|g| g.nodes.len()));
        assert!(d.graph_svg.is_some());
        assert!(detail_of(a.run_id + 1, "krawiec/monadic", None).is_none());
    }

    #[test]
    fn untraced_stages_are_traced_again_on_demand() {
        // a rewrite stage (unf/pe keeps its rule steps) and a taping stage, run untraced beside a traced one
        let src = "input (3.0, 5.0, 7.0)\ndef main (x, y, z) = x * y * (y + z)\n";
        let ids = ["dualrev/tape", "unf/pe", "krawiec/monadic"];
        let stages: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        let o = WebOptions { stages: stages.clone(), detail: Some(vec!["dualrev/tape".into()]), traced: Some(vec!["dualrev/tape".into()]), keep: true, ..WebOptions::default() };
        let a = analyse_text(src, &o);
        let full = analyse_text(src, &WebOptions { stages, ..WebOptions::default() });
        for (s, f) in a.stages.iter().zip(&full.stages) {
            assert!(s.ok && f.ok && f.traced && f.trace_len > 0, "{}", s.desc.id);
            // the run is the same, traced or not
            assert_eq!((&s.gradient, s.agrees), (&f.gradient, f.agrees), "{}", s.desc.id);
            if s.desc.id == "dualrev/tape" {
                assert!(s.traced && s.trace_len == f.trace_len && s.program == f.program && !s.program_omitted);
            } else {
                // not shown: not traced, not printed, no views
                assert!(!s.traced && s.trace_len == 0 && !s.detail, "{}", s.desc.id);
                assert!(s.program_omitted && s.program.is_empty() && s.program_lines.is_empty() && !f.program.is_empty(), "{}", s.desc.id);
            }
        }
        for id in ["unf/pe", "krawiec/monadic"] {
            let f = full.stages.iter().find(|s| s.desc.id == id).unwrap();
            let d = detail_of(a.run_id, id, None).unwrap();
            assert!(d.traced && d.views.is_some(), "{id}");
            // and printed: the program the full run printed
            assert_eq!(d.program.as_deref(), Some(f.program.as_str()), "{id}");
            assert!(!d.program_omitted && d.program_lines.as_ref().map(|l| l.len()) == Some(f.program_lines.len()), "{id}");
            assert_eq!((d.trace_len, d.trace_dropped, d.graph_nodes), (f.trace_len, f.trace_dropped, f.graph_nodes), "{id}");
            assert_eq!(d.trace.iter().map(|t| &t.kind).collect::<Vec<_>>(), f.trace.iter().map(|t| &t.kind).collect::<Vec<_>>(), "{id}");
            // asked again, the kept stage answers without running (no views sent twice)
            let again = detail_of(a.run_id, id, None).unwrap();
            assert!(again.views.is_none() && again.trace_len == f.trace_len);
        }
        // the rewrite trace view of unf/pe has its steps once traced
        let pe = |v: &Vec<WebView>| v.iter().find(|v| v.name == "rewrite trace").is_some_and(|v| v.later.as_ref().is_some_and(|l| l.text().contains("program after it")));
        let views = |x: &WebAnalysis| x.stages.iter().find(|s| s.desc.id == "unf/pe").map(|s| s.views.clone()).unwrap();
        assert!(!pe(&views(&a)) && pe(&views(&full)));
        // a stage that fails its run unshown (here at a step budget) is printed when it is asked for
        // (the smallest step budget the source and forward mode fit in and unf/pe's output does not)
        let tight = |steps| WebOptions { stages: vec!["unf/pe".into()], traced: Some(vec![]), budget: Some(WebBudget { steps: Some(steps), ..WebBudget::default() }), keep: true, ..WebOptions::default() };
        let b = (1..2000).map(|n| analyse_text(src, &tight(n))).find(|b| b.stages.first().is_some_and(|s| !s.ok)).unwrap();
        let s = &b.stages[0];
        assert!(s.program_omitted && s.error.as_deref().is_some_and(|e| e.contains("budget")), "{:?}", s.error);
        let d = detail_of(b.run_id, "unf/pe", None).unwrap();
        assert!(d.program.as_deref().is_some_and(|p| p.contains("def grad")), "{:?}", d.program);
    }

    /// A rewrite step's terms and its trace view reach the page unprinted (`deferred`), and
    /// `step_texts_of` and `view_text_of` print them as the CLI does.
    #[test]
    fn rewrite_step_texts_and_views_are_printed_when_the_page_asks_as_the_cli_prints_them() {
        let src = "input (3.0, 5.0, 7.0)\ndef main (x, y, z) = x * y * (y + z)\n";
        let o = WebOptions { stages: vec!["unf/pe".into()], keep: true, ..WebOptions::default() };
        let a = analyse_text(src, &o);
        let cli = cotangent::pipeline::analyse(src, &Options { stages: vec!["unf/pe".into()], ..Options::default() }).unwrap();
        let (s, c) = (&a.stages[0], &cli.stages[0]);
        assert_eq!(s.trace.len(), c.trace.len());
        let mut deferred = 0;
        for (i, (w, t)) in s.trace.iter().zip(&c.trace).enumerate() {
            if w.deferred.is_empty() {
                assert_eq!((&w.note, &w.state), (&t.note, &t.state), "step {i}");
                continue;
            }
            deferred += 1;
            assert!(w.note.is_empty() && w.state.len() < t.state.len(), "step {i}: {:?}", w.state);
            let texts = step_texts_of(a.run_id, "unf/pe", i).unwrap();
            assert_eq!(texts.note, t.note, "step {i}");
            let rows: Vec<(String, String)> = w.state.iter().map(|(k, v)| (k.clone(), v.to_string())).chain(texts.rows).collect();
            let want: Vec<(String, String)> = t.state.iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
            assert_eq!(rows, want, "step {i}");
            assert_eq!(w.deferred, ["redex", "becomes", "program after"], "step {i}");
        }
        assert!(deferred > 5, "{deferred}");
        let v = s.views.iter().find(|v| v.name == "rewrite trace").unwrap();
        assert!(v.deferred && v.text.is_empty());
        let json = serde_json::to_string(&a).unwrap();
        assert!(!json.contains("program after it") && json.contains("\"deferred\":[\"redex\""), "the page's JSON carries no step text");
        assert_eq!(view_text_of(a.run_id, "unf/pe", "rewrite trace").as_deref(), Some(c.views[0].text.as_str()));
        assert!(c.views[0].text.contains("program after it"));
        assert!(step_texts_of(a.run_id + 1, "unf/pe", 0).is_none() && step_texts_of(a.run_id, "unf/pe", 1 << 20).is_none());
    }

    #[test]
    fn gradient_rows_are_labelled_by_main_pattern_and_array_index() {
        let labels = |src: &str| analyse_text(src, &WebOptions { stages: vec!["forward".into()], ..WebOptions::default() }).input_labels;
        let dot = "input ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])\ndef main (a, b) = sum (map2 (\\x y -> x * y) a b)\n";
        assert_eq!(labels(dot), ["a[0]", "a[1]", "a[2]", "b[0]", "b[1]", "b[2]"]);
        let a = analyse_text(dot, &WebOptions::default());
        assert_eq!(a.stages[0].gradient, [4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
        // The input point from the page's field, nested arrays and a pattern that names a pair.
        let o = WebOptions { at: Some("[[1.0, 2.0], [3.0, 4.0]]".into()), ..WebOptions::default() };
        let m = analyse_text("input [[0.0]]\ndef main m = sum (map sum m)\n", &o);
        assert!(m.diagnostics.is_empty(), "{:?}", m.diagnostics.first().map(|d| &d.message));
        assert_eq!(m.input_labels, ["m[0][0]", "m[0][1]", "m[1][0]", "m[1][1]"]);
        assert_eq!(labels("input (([1.0], 2), 3.0)\ndef main (p, y) = let (a, k) = p in y * a ! 0 * real k\n"), ["p.0[0]", "y"]);
        assert_eq!(labels("input (1.0, 2.0)\ndef main (_, y) = y\n"), ["x.0", "y"]);
        assert_eq!(labels("input 1.0\ndef main = \\t -> t\n"), ["t"]);
        assert_eq!(labels("input 1.0\ndef main x = x\n"), ["x"]);
    }

    #[test]
    fn dot_product_of_50_groups_its_dag_by_array_operation_and_counts_what_is_not_drawn() {
        let xs: Vec<String> = (1..=50).map(|i| format!("{i}.0")).collect();
        let src = format!("input ([{0}], [{0}])\ndef main (a, b) = sum (map2 (\\x y -> x * y) a b)\n", xs.join(", "));
        let a = analyse_text(&src, &WebOptions::default());
        let s = a.stages.iter().find(|s| s.desc.id == "krawiec/general").unwrap();
        assert!(s.ok && s.agrees == Some(true), "{:?}", s.error);
        let g = s.graph.as_ref().unwrap();
        let in_group = |name: &str| g.nodes.iter().filter(|n| n.group.as_deref() == Some(name)).count();
        let (map2, sum) = (in_group("map2 @ 2:23"), in_group("sum @ 2:19"));
        eprintln!("{} nodes: map2 {map2}, sum {sum}, groups {:?}", g.nodes.len(), g.groups);
        // One product per element inside the map2 (the scaled dual numbers of x * y) and one addition per element in the sum.
        assert!(map2 >= 50 && sum >= 50, "map2 {map2}, sum {sum}");
        assert_eq!(g.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().len(), 2);
        // The dualrev stages' backpropagator graphs are grouped the same way (each ID knows its operation's span).
        for s in a.stages.iter().filter(|s| s.desc.id.starts_with("dualrev/") && s.desc.id != "dualrev/parallel") {
            let g = s.graph.as_ref().unwrap();
            let count = |name: &str| g.nodes.iter().filter(|n| n.group.as_deref() == Some(name)).count();
            // 50 products in the map2 (one ID each), 50 additions in the sum
            assert!(count("map2 @ 2:23") == 50 && count("sum @ 2:19") == 50, "{}: {} {}", s.desc.id, count("map2 @ 2:23"), count("sum @ 2:19"));
        }
        // The drawing (capped at DRAW_LIMIT nodes) tints each group and names it in its legend, with
        // how many of its nodes were drawn, and says how many nodes it left out.
        let svg = s.graph_svg.as_ref().unwrap();
        for (name, total) in [("map2 @ 2:23", map2), ("sum @ 2:19", sum)] {
            let drawn = svg.matches(&format!("data-group=\"{name}\"")).count() - 1; // less the legend's key
            let key = if drawn == total { format!("{name} ({total} nodes)") } else { format!("{name} ({drawn} of {total} nodes drawn)") };
            assert!(drawn > 0 && svg.contains(&key), "no legend {key}");
        }
        let not_drawn = g.nodes.len().saturating_sub(dag::DRAW_LIMIT) + g.omitted as usize;
        assert!(not_drawn > 0 && svg.contains(&format!("{not_drawn} nodes not drawn")), "{}", &svg[..600]);
        // The cap: drawn with a limit of 100 nodes, the SVG says how many were not drawn.
        let small = dag::draw(&dag::G::from(g), 100).unwrap();
        let left = g.nodes.len() - 100 + g.omitted as usize;
        assert!(small.contains(&format!("{left} nodes not drawn (showing the first 50 and the last 50)")), "{}", &small[..600]);
    }

    #[test]
    fn examples_have_papers() {
        for e in example_list() {
            assert!(!e.paper.is_empty() && !e.source.is_empty());
        }
    }

    #[test]
    fn example_titles_are_whole_phrases_for_the_menu() {
        // the menu shows the first comment line: a title, not a sentence cut at the line's end
        for e in example_list() {
            let t = &e.title;
            assert!(t.chars().count() <= 80, "{}: title longer than 80 characters: {t}", e.name);
            let cut = [":", ",", ";", "Ex.", "Fig.", "et al.", "the", "of", "and"].iter().any(|w| t.ends_with(w));
            assert!(!cut, "{}: title cut mid-sentence: {t}", e.name);
            assert!(!t.contains("note"), "{}: title cites an internal note: {t}", e.name);
            assert_eq!(t.matches('(').count(), t.matches(')').count(), "{}: unbalanced title: {t}", e.name);
        }
    }
}

#[cfg(test)]
mod bench {
    use super::*;
    #[test]
    #[ignore]
    fn time_quaternion() {
        let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/krawiec-fig12-quaternion.cot")).unwrap();
        for svg in [vec![], vec!["krawiec/monadic".to_string()]] {
            for trace in [false, true] {
                let o = WebOptions { svg: Some(svg.clone()), trace: Some(trace), ..WebOptions::default() };
                let t = std::time::Instant::now();
                let a = analyse_text(&src, &o);
                eprintln!("svg {svg:?} trace {trace}: {:?} ({} stages)", t.elapsed(), a.stages.len());
            }
        }
        let t = std::time::Instant::now();
        let a = pipeline::analyse(&src, &Options::default()).ok().unwrap();
        eprintln!("pipeline only: {:?}", t.elapsed());
        for r in &a.stages {
            let t = std::time::Instant::now();
            let mut o = Options::default();
            o.stages = vec![r.id.clone()];
            let _ = pipeline::analyse(&src, &o);
            eprintln!("  {}: {:?}", r.id, t.elapsed());
        }
    }
}
