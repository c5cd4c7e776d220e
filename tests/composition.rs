//! Stage composition and contracts: a same-function stage checked by its primal and by forward mode
//! over its output, and a gradient stage whose input is that stage's output (`Input::After`).

use cotangent::diag::Diagnostic;
use cotangent::features::{Feature, Features};
use cotangent::interp::Builtins;
use cotangent::ir::Type;
use cotangent::pipeline::{self, Options, Outputs, Status};
use cotangent::stage::{Contract, Input, Output, Source, Stage, StageInfo};
use cotangent::stages;
use cotangent::value::Value;

/// Every call inlined: computes the same function as its input.
struct InlineAll;
const INLINE_INFO: StageInfo = StageInfo {
    id: "test/inline-all",
    paper: "test",
    section: "",
    title: "every call inlined",
    explanation: "",
    complexity: "",
    accepts: "programs without recursion",
};
impl Stage for InlineAll {
    fn info(&self) -> &'static StageInfo {
        &INLINE
    }
    fn contract(&self) -> Contract {
        Contract::SameFunction
    }
    fn supports(&self) -> Features {
        Features::ALL.without(Feature::Recursion)
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        Ok(Output::from(cotangent::kit::passes::inline_all(src.program, 100_000)?))
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        vec![("main".into(), Type::fun(src.input_type.clone(), src.output_type.clone()))]
    }
}

static INLINE: StageInfo = INLINE_INFO;

/// Forward mode, over the output of `test/inline-all`.
struct ForwardAfterInline;
static AFTER: StageInfo = StageInfo { id: "test/forward-after-inline", ..INLINE_INFO };
impl Stage for ForwardAfterInline {
    fn info(&self) -> &'static StageInfo {
        &AFTER
    }
    fn input(&self) -> Input {
        Input::After("test/inline-all")
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        // the inlined program has only `main` (and nothing the source called by name)
        assert_eq!(src.program.defs.len(), 1, "its input is the inlined program");
        stages::find("forward").unwrap().transform(src)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stages::find("forward").unwrap().stated_types(src)
    }
    fn run(&self, m: &mut cotangent::interp::Machine, cx: &cotangent::stage::RunCtx) -> Result<(Value, Value), cotangent::interp::RunError> {
        stages::find("forward").unwrap().run(m, cx)
    }
}

fn run(text: &str) -> (Vec<pipeline::StageResult>, Vec<f64>) {
    let opts = Options { trace: false, ..Options::default() };
    let (p, s, t) = pipeline::front_end(text, &[]).unwrap();
    let input = cotangent::syntax::value_of(p.input.as_ref().unwrap()).unwrap();
    let b = Builtins::new();
    let src = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
    let primal = pipeline::run_source(&p, &input, &opts.budget).unwrap();
    let seed = primal.with_reals(&mut std::iter::repeat(1.0));
    let outputs = Outputs::new(&src, &opts).with_stages(&[&InlineAll, &ForwardAfterInline]);
    let reference = pipeline::run_stage(stages::find("forward").unwrap(), &outputs, &input, &seed, &opts);
    let rs = [&InlineAll as &'static dyn Stage, &ForwardAfterInline]
        .iter()
        .map(|st| pipeline::run_stage(*st, &outputs, &input, &seed, &opts))
        .collect();
    (rs, reference.gradient)
}

#[test]
fn a_same_function_stage_and_a_stage_after_it_agree_with_forward() {
    let (rs, reference) = run("input (2.0, 3.0)\ndef sq x = x * x\ndef twice f x = f (f x)\ndef main (x, y) = twice sq x * sin y\n");
    assert_eq!(reference.len(), 2);
    for r in &rs {
        assert!(r.ok, "{}: {:?}", r.id, r.error);
        assert_eq!(r.gradient.len(), 2);
        for (a, b) in r.gradient.iter().zip(&reference) {
            assert!(pipeline::close(*a, *b, 1e-12), "{}: {a} vs {b}", r.id);
        }
    }
    assert_eq!(rs[0].contract, "same-function");
    assert_eq!(rs[1].contract, "gradient");
    // the inlined program calls nothing by name
    assert!(!rs[0].program.contains("twice") && !rs[0].program.contains("sq"), "{}", rs[0].program);
    assert!(pipeline::approx_same(rs[0].primal.as_ref().unwrap(), &Value::Real(16.0 * 3f64.sin())));
}

#[test]
fn a_refused_input_stage_makes_the_stage_after_it_fail_with_the_reason() {
    let (rs, _) = run("input 2.0\ndef pow k x = if k == 0 then 1.0 else x * pow (k - 1) x\ndef main x = pow 3 x\n");
    assert!(rs[0].refused && rs[0].error.as_deref().unwrap().contains("recursion"), "{:?}", rs[0].error);
    let why = rs[1].error.as_deref().unwrap();
    assert!(why.contains("its input, the output of test/inline-all") && why.contains("recursion"), "{why}");
    assert_eq!(rs[1].status, Status::Refused, "the stage after a refusal is refused with it");
}
