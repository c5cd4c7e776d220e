//! How the chain wraps its stages: the check and the run set-up that all of them share.

use super::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::Type;
use crate::stage::{Contract, CounterInfo, Input, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

/// A stage of this chain, with what every stage of the chain does: refuse target constructs in the
/// source (`accepts_source`) and, before a run, set up the runtime's state (`prepare`: the zero of c,
/// the number of inputs). The chain lists its stages wrapped in it, so no stage file repeats either;
/// every other method is the stage's own. A method added to `Stage` must be forwarded here too.
pub struct ChainStage<S>(pub S);

impl<S: Stage> Stage for ChainStage<S> {
    fn info(&self) -> &'static StageInfo {
        self.0.info()
    }
    fn input(&self) -> Input {
        self.0.input()
    }
    fn contract(&self) -> Contract {
        self.0.contract()
    }
    fn supports(&self) -> Features {
        self.0.supports()
    }
    fn builtins(&self) -> Vec<Builtin> {
        self.0.builtins()
    }
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)?;
        self.0.accepts(src)
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        self.0.transform(src)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        self.0.stated_types(src)
    }
    fn counters(&self) -> &'static [CounterInfo] {
        self.0.counters()
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        prepare(m, cx.input);
        self.0.run(m, cx)
    }
    fn graph(&self, m: &mut Machine, cx: &RunCtx) -> Option<Graph> {
        self.0.graph(m, cx)
    }
}
