//! What a stage is: its paper, section and figure, its explanation, the constructs it accepts, its
//! transform (IR → IR, with its wrapper) and its run. The registry of stages is `stages::all()`.

use crate::diag::Diagnostic;
use crate::ir::{each_child_mut, Expr, ExprKind};
use crate::features::Features;
use crate::interp::{Builtin, Builtins, Graph, Machine, RunError};
use crate::ir::{Program, Type};
use crate::value::Value;

/// Static description of a stage, shown by the CLI and the page.
#[derive(Debug)]
pub struct StageInfo {
    /// `paper/stage`, e.g. `krawiec/monadic`.
    pub id: &'static str,
    /// Short citation of the paper, e.g. `Krawiec et al. 2022`.
    pub paper: &'static str,
    /// Section and figures it implements, e.g. `§7.1–7.2, Figs. 9–11`.
    pub section: &'static str,
    pub title: &'static str,
    /// One paragraph: what changes from the previous stage, and why.
    pub explanation: &'static str,
    /// Its complexity claim.
    pub complexity: &'static str,
    /// The constructs it accepts, in words.
    pub accepts: &'static str,
}

/// A paper's chain of stages: its own folder `stages/<id>/`, whose `mod.rs` exports `CHAIN`.
pub struct Chain {
    /// The folder and the prefix of its stages' ids, e.g. `krawiec`.
    pub id: &'static str,
    /// What the page's stage list shows above the chain.
    pub title: &'static str,
    /// Short citation, e.g. `Krawiec et al. 2022`.
    pub paper: &'static str,
    /// Full citation.
    pub citation: &'static str,
    /// Where the paper is (DOI or arXiv).
    pub url: &'static str,
    /// The stages in the paper's order.
    pub stages: &'static [&'static dyn Stage],
    /// A check every stage of the chain makes of its input, before the stage's own `accepts`.
    pub accepts: fn(&Source) -> Result<(), Diagnostic>,
    /// Set-up every stage of the chain needs before its output runs (a runtime's zero, input count).
    pub before_run: fn(&mut Machine, &RunCtx),
    /// What the chain reports about a finished run, as counters added to its cost (a cost model's
    /// bound beside what was measured); called after the run, outside any timing.
    pub after_run: fn(&mut Machine, &RunCtx),
    /// Whether its runs read the program they run (`Machine::program`: a graph drawn from it, the
    /// program run again in another representation): if not, the pipeline lets a stage's output IR
    /// go once it is lowered, where no later stage takes it (issue 14).
    pub run_reads_program: bool,
    /// What its runs read of the program, taken from the output IR before the pipeline lets it go
    /// (`run_reads_program` false): a set-up for the machine that will run it, e.g. the array
    /// chain's scalar zero. `keep_nothing`: nothing.
    pub keep_from_program: fn(&Program) -> Option<Kept>,
    /// Lets go of what the chain keeps for its outputs outside them (chad's table of type-indexed
    /// instances, which its runtime reads by name): the pipeline calls it when none of the chain's
    /// outputs is kept, so that what one stage made is not live through every stage after it
    /// (issue 14 item 4). `forget_nothing`: the chain keeps nothing.
    pub forget: fn(),
    /// The counters the chain's runtimes add, each with what it counts (the page's labels).
    pub counters: &'static [CounterInfo],
}

thread_local! {
    /// Whether the stage being prepared or run is shown (`showing`).
    static SHOWN: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Runs `f` (a stage's transform) knowing whether anybody will look at what it makes beyond the
/// program it runs: the printed program, its views, its rewrite steps' text. The page shows one stage
/// at a time and runs the others for their gradients only (`pipeline::Options::traced`); what they
/// skip is made when one is selected (it is run again, shown). The CLI and the tests show every stage.
pub fn showing<T>(shown: bool, f: impl FnOnce() -> T) -> T {
    let before = SHOWN.with(|k| k.replace(shown));
    let out = f();
    SHOWN.with(|k| k.set(before));
    out
}

/// Whether the stage being transformed is shown (see `showing`): if not, its transform may leave out
/// views and step texts (never anything its run or counters depend on).
pub fn shown() -> bool {
    SHOWN.with(|k| k.get())
}

/// A chain's `accepts` that accepts every program.
pub fn accept_all(_: &Source) -> Result<(), Diagnostic> {
    Ok(())
}

/// A chain's `before_run` (or `after_run`) that does nothing.
pub fn nothing_before_run(_: &mut Machine, _: &RunCtx) {}

/// A chain's `keep_from_program`: what it read of the program, given to the machine that runs it.
pub type Kept = Box<dyn FnOnce(&mut Machine)>;

/// The `forget` of a chain that keeps nothing outside its outputs.
pub fn forget_nothing() {}

/// The `keep_from_program` of a chain whose runs read nothing of the program, or all of it.
pub fn keep_nothing(_: &Program) -> Option<Kept> {
    None
}

/// The typed program a stage transforms, with `main : S → T`: the source, or the output of the stage
/// it names as its input (`Input::After`), with the builtins that program uses.
pub struct Source<'a> {
    pub program: &'a Program,
    pub input_type: &'a Type,
    pub output_type: &'a Type,
    /// The builtins `program` uses (none for the source itself).
    pub builtins: &'a Builtins,
}

/// What a stage transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The user's program.
    Source,
    /// The typed output of another stage (the pipeline runs that one first and keeps its output).
    After(&'static str),
}

/// What a stage's output promises, and so how the pipeline checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contract {
    /// It defines the wrapper `grad : (S, δT) → (T, δS)`; its gradient is compared with forward mode
    /// and finite differences.
    Gradient,
    /// It computes the same function as its input (UNF, bot, closure conversion, inlining): its `main`
    /// is run and compared with the source's primal, and `forward` run over it gives its gradient.
    SameFunction,
}

/// An extra rendering of a stage's output in the paper's notation (a UNF stack diagram, a rewrite
/// trace, a symbolic Delta term), shown beside the printed program.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    pub name: String,
    /// Its text (empty while it is left for `later`).
    pub text: String,
    /// For a stack diagram, its rows, which the page draws (slots as columns, one row per primitive).
    pub stack: Vec<StackRow>,
    /// A text made when read (a rewrite trace's, printed from its steps): `printed` and serialising
    /// read it.
    pub later: Option<crate::print::Later>,
}

impl View {
    /// A view whose text is made when read.
    pub fn later(name: &str, text: crate::print::Later) -> View {
        View { name: name.into(), later: Some(text), ..View::default() }
    }
    /// Its text, made now if it was left for `later`.
    pub fn printed(&self) -> std::borrow::Cow<'_, str> {
        match &self.later {
            Some(l) => l.text().into(),
            None => self.text.as_str().into(),
        }
    }
    /// Makes a `later` text now.
    pub fn materialise(&mut self) {
        if let Some(l) = self.later.take() {
            self.text = l.text();
        }
    }
}

impl serde::Serialize for View {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("View", 3)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("text", &self.printed())?;
        if !self.stack.is_empty() {
            st.serialize_field("stack", &self.stack)?;
        } else {
            st.skip_field("stack")?;
        }
        st.end()
    }
}

/// One primitive of a stack diagram (Huot & Shaikhha's Unary Normal Form, §4: every primitive takes
/// the whole context and returns it, extended or shrunk).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StackRow {
    /// The primitive in the paper's notation, e.g. `cos_{R,R}`.
    pub primitive: String,
    /// `name:type` of each slot before and after it.
    pub input: Vec<String>,
    pub output: Vec<String>,
    /// Positions, in the input, of the slots it reads and of those it forgets; in the output, of the
    /// slot it pushes.
    pub reads: Vec<usize>,
    pub forgets: Vec<usize>,
    pub pushes: Option<usize>,
}

/// What `transform` produces: the program, the builtins it needs beyond `Stage::builtins` (they may
/// depend on the program and on types: `0_τ`, `one_x`, `EV Γ`), and extra views.
pub struct Output {
    pub program: Program,
    pub builtins: Vec<Builtin>,
    pub views: Vec<View>,
    /// What the transform did, step by step (a rewrite's rule applications: `kit::rewrite::Trace::
    /// stepper`): the stepper shows these before the run's own steps.
    pub steps: Vec<crate::interp::TraceStep>,
}

impl From<Program> for Output {
    fn from(program: Program) -> Output {
        Output { program, builtins: vec![], views: vec![], steps: vec![] }
    }
}

/// What a stage's run can see besides its machine: the program it transformed, the point and seed,
/// and the typed output of any other stage (prepared once by the pipeline and kept).
pub struct RunCtx<'a> {
    pub src: &'a Source<'a>,
    /// The user's program, whatever `src` is (a cost model compares a stage's run with it).
    pub origin: &'a Source<'a>,
    pub input: &'a Value,
    pub seed: &'a Value,
    pub outputs: &'a dyn Fn(&str) -> Option<std::rc::Rc<Prepared>>,
}

impl RunCtx<'_> {
    /// The typed output of stage `id`, transformed and checked by the pipeline (never by hand).
    pub fn output_of(&self, id: &str) -> Option<std::rc::Rc<Prepared>> {
        (self.outputs)(id)
    }
}

/// A stage's output ready to run: type-checked with its builtins at the paper's stated types.
pub struct Prepared {
    pub program: Program,
    pub builtins: Builtins,
    /// The output as printed; None when the stage was prepared not shown (`stage::showing`).
    pub printed: Option<String>,
    /// Per printed line, its source spans (empty unless the pipeline was asked to map lines).
    pub lines: Vec<Vec<crate::diag::Span>>,
    pub views: Vec<View>,
    /// The transform's own steps (`Output::steps`).
    pub steps: Vec<crate::interp::TraceStep>,
    pub input_type: Type,
    pub output_type: Type,
}

/// A counter a stage reports, with what it counts (the page labels counters from these).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct CounterInfo {
    pub name: &'static str,
    pub about: &'static str,
}

/// What the page shows of a stage beyond its program, graph and steps (declared by the stage, so the
/// page names no stage).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PageHints {
    /// Another stage whose graph the page draws beside this one's, for the same program.
    pub beside: Option<Beside>,
    /// Its program names the array paper's global shares (`share i`, `shared i`, `shared<i>`): the
    /// page marks every occurrence of each ID.
    pub marks_shares: bool,
}

/// A graph drawn beside a stage's: the other stage, and the headings of this stage's panel and of it.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Beside {
    pub stage: &'static str,
    pub mine: &'static str,
    pub theirs: &'static str,
}

pub trait Stage: Sync {
    fn info(&self) -> &'static StageInfo;

    /// What the page shows beyond the program, graph and steps (default: nothing more).
    fn page(&self) -> PageHints {
        PageHints::default()
    }

    /// What it transforms: the source (default) or another stage's output.
    fn input(&self) -> Input {
        Input::Source
    }

    /// Whether its run reads the program it transformed (`RunCtx::src`; default yes). A stage whose
    /// input is another stage's output and whose run does not lets the pipeline let that output go
    /// once transformed, when no stage still to run takes it (`pipeline::Outputs::get`).
    fn run_reads_input(&self) -> bool {
        true
    }
    /// Whether its run reads its input only when traced (default no): chad/cc-chad's transforms it
    /// again to name the backpropagators the trace shows (`bp_tree::sites_of`). Untraced, its input
    /// then goes once transformed as for a run that does not read it (issue 14 item 4: chad/cc's
    /// output held beside chad/cc-chad's at its check, 489 → 513 MiB on a 10^5-line program).
    fn run_reads_input_only_traced(&self) -> bool {
        false
    }
    /// How its output is checked (default: it is a gradient program).
    fn contract(&self) -> Contract {
        Contract::Gradient
    }

    /// The language features its paper's method handles; the pipeline refuses the rest with a located
    /// message naming the construct (default: everything).
    fn supports(&self) -> Features {
        Features::ALL
    }

    /// The runtime every output of this stage uses (Delta constructors, eval, maps, ...).
    fn builtins(&self) -> Vec<Builtin> {
        vec![]
    }

    /// A family of builtins its outputs name, made by name when the check or the lowering asks
    /// (`Builtins::get`) rather than listed one by one in `Output::builtins` (default none).
    fn builtin_family(&self) -> Option<crate::interp::BuiltinFamily> {
        None
    }

    /// Pairs of its builtins the engine may run as one function (`interp::Fused`; default none).
    fn fused(&self) -> Vec<crate::interp::Fused> {
        vec![]
    }

    /// Builtins a compiled round may call (`interp::RoundCalls`; default none).
    fn round_calls(&self) -> Option<&'static crate::interp::RoundCalls> {
        None
    }

    /// Refuses, with a located message saying why, what the paper's method cannot handle beyond
    /// what `supports` says (e.g. a wrapper that needs `main : R^a → R`).
    fn accepts(&self, _src: &Source) -> Result<(), Diagnostic> {
        Ok(())
    }

    /// The transformed program: the translated definitions plus the wrapper `WRAPPER`.
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic>;

    /// Whether its output's program is its input's, unchanged (chad/mutable, chad/sparse: the monad's
    /// or the cotangents' implementation changes, not the code). The pipeline then moves its input's
    /// program into `transform_keeping` where no stage still to run takes it (`pipeline::Outputs::get`),
    /// rather than holding a copy beside it (issue 14 item 4: chad/monadic's output is ~430 MiB on a
    /// 10^5-line program, and chad/mutable stopped copying it).
    fn passes_input_through(&self) -> bool {
        false
    }
    /// `transform`, given its input's program to keep (`passes_input_through`); `src` is the input
    /// but for its program, which is `program`.
    fn transform_keeping(&self, program: Program, src: &Source) -> Result<Output, Diagnostic> {
        self.transform(&Source { program: &program, ..*src })
    }

    /// What the pipeline's type check of its output failing says, where that failure is this
    /// stage's refusal of the program rather than an internal error (default: never). A stage whose
    /// refusals show only once its output is typed (chad/cc-chad) lets the pipeline's one check say
    /// so, rather than checking its output itself first: the same program was checked twice, the
    /// first time beside its input (issue 14 item 4).
    fn refused_by_check(&self, _why: &Diagnostic) -> Option<Diagnostic> {
        None
    }

    /// The types the paper states for definitions of the output, given `main : S → T`
    /// (e.g. `main : Drev{S} → M Drev{T}`); the pipeline checks the output has them.
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)>;

    /// The counters its runtime adds to `Cost::counters`, each with what it counts.
    fn counters(&self) -> &'static [CounterInfo] {
        &[]
    }

    /// Runs the output: by default, the wrapper once on `(input, seed)` (a `SameFunction` stage's
    /// `main` is run by the pipeline instead).
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        run_wrapper(m, cx.input, cx.seed)
    }

    /// The graph the forward pass built (the Delta DAG, backpropagators, Contribs), read from the
    /// runtime's state after the run.
    fn graph(&self, _m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        None
    }
}

/// Name of the definition every gradient stage's wrapper is called by: it takes `(input, seed)` — the
/// input point and the output cotangent — and returns `(primal, gradient)`, the gradient in the input's
/// shape. (The papers' wrappers return only the gradient; ours also hands back the primal they compute.)
pub const WRAPPER: &str = "grad";

/// The wrapper's type, `grad : (S, δT) → (T, δS)`, as every gradient stage states it (cotangent types
/// in the input's and output's shapes).
pub fn wrapper_type(src: &Source) -> (String, Type) {
    let (s, t) = (src.input_type.clone(), src.output_type.clone());
    (WRAPPER.into(), Type::fun(Type::tup(vec![s.clone(), t.clone()]), Type::tup(vec![t, s])))
}

/// Calls the wrapper `WRAPPER` on `(input, seed)` and splits its `(primal, gradient)`.
pub fn run_wrapper(m: &mut Machine, input: &Value, seed: &Value) -> Result<(Value, Value), RunError> {
    // found by role, not by name
    let name = m.wrapper_name().ok_or_else(|| RunError::runtime(crate::diag::Span::NONE, "the output has no wrapper definition"))?;
    split_pair(m.call(&name, vec![Value::pair(input.clone(), seed.clone())])?)
}

/// Splits the wrapper's `(primal, gradient)` result.
pub fn split_pair(v: Value) -> Result<(Value, Value), RunError> {
    match v {
        Value::Tuple(vs) if vs.len() == 2 => Ok((vs[0].clone(), vs[1].clone())),
        other => Err(RunError::runtime(crate::diag::Span::NONE, format!("the wrapper returned {other}, not a pair (primal, gradient)"))),
    }
}

/// The program with any top-level definition or parameter named in `reserved` (names a stage's
/// generated definitions take: `grad`, `zero_S`, ...) renamed, with every use: `grad` becomes `grad_1`
/// (the first free suffix). The pipeline calls it when a stage's output has a generated definition
/// (by `Role`) whose name a user definition has.
pub fn without_reserved(p: &Program, reserved: &[&str]) -> Program {
    use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
    let taken: HashSet<String> = p.defs.iter().map(|d| d.name.text.to_string()).chain(p.params.iter().map(|q| q.name.text.to_string())).collect();
    let mut map: HashMap<String, crate::ir::Text> = HashMap::default();
    for r in reserved.iter().filter(|r| taken.contains(**r)) {
        let fresh = (1..).map(|k| format!("{r}_{k}")).find(|c| !taken.contains(c) && !reserved.contains(&c.as_str())).expect("a free name");
        map.insert(r.to_string(), crate::ir::Text::from(fresh));
    }
    let mut out = p.clone();
    if map.is_empty() {
        return out;
    }
    fn go(e: &mut Expr, map: &HashMap<String, crate::ir::Text>) {
        if let ExprKind::Var(n) = &mut e.kind {
            if n.is_global() {
                if let Some(t) = map.get(&*n.text) {
                    n.text = t.clone();
                }
            }
        }
        each_child_mut(e, &mut |c| go(c, map));
    }
    for d in &mut out.defs {
        if let Some(t) = map.get(&*d.name.text) {
            d.name.text = t.clone();
        }
        go(&mut d.body, &map);
    }
    for q in &mut out.params {
        if let Some(t) = map.get(&*q.name.text) {
            q.name.text = t.clone();
        }
    }
    out
}

