//! The runtime of Part A's programs: the constructors Input and Share, the IdGen monad (genID,
//! runIdGen; §2.5) run in direct style, and what a run leaves for the graph.

use crate::diag::Span;
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::kit::delta::drev::m_type;
use crate::kit::delta::graph::{delta_graph, Visits};
use crate::kit::delta::{child_arg, delta_arg, delta_ctor_builtins, delta_type, int_arg, mk, real_arg, run_arena, Arena, DeltaRef, Ix, Kind, Reader};
use crate::value::Value;
use rustc_hash::FxHashSet as HashSet;

/// A run's state: the IdGen counter, the Delta the evaluator was given and its visits per node.
#[derive(Default)]
pub struct ScalarState {
    /// Inside runIdGen.
    pub active: bool,
    /// The last ID genID gave.
    pub last_id: i64,
    /// IDs given to Share nodes so far (Invariant 2).
    pub shared: HashSet<i64>,
    pub root: Option<DeltaRef>,
    pub visits: Visits,
}

fn b_input(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let i = int_arg(&args[0], span, "Input")?;
    mk(m, Kind::Input(i))
}

/// `genID :: IdGen ID`, monotonically increasing (§2.5).
fn b_gen_id(m: &mut Machine, _args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.count("ids_generated", 1);
    m.tick(1)?;
    let st = m.state::<ScalarState>();
    if !st.active {
        return Err(RunError::runtime(span, "genID outside runIdGen: there is no counter to draw from"));
    }
    st.last_id += 1;
    Ok(Value::Int(st.last_id))
}

/// `Share id d`, with §2.5's invariants checked as it is built: (1) every ID inside d is smaller than
/// id (it is enough to look down to the nearest Share nodes, whose own insides were checked when they
/// were built), (2) an ID names one node only (with Rc, one ID on one Share node).
fn b_share(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let id = int_arg(&args[0], span, "Share")?;
    let d = child_arg(m, &args[1], span, "Share")?;
    let arena = run_arena(m);
    let Ok(ar) = arena.try_borrow() else { return Err(RunError::runtime(span, "Share: the Delta is being built")) };
    let mut stack: Vec<Ix> = vec![d];
    while let Some(n) = stack.pop() {
        m.tick(1)?;
        match ar.kind(n) {
            Kind::Share(j, _) if j >= id => {
                return Err(RunError::runtime(span, format!("Share {id}: Invariant 1 fails, the inside holds Share {j}")))
            }
            Kind::Share(..) => {}
            k => stack.extend(k.children().into_iter().map(|(c, _)| c)),
        }
    }
    drop(ar);
    if !m.state::<ScalarState>().shared.insert(id) {
        return Err(RunError::runtime(span, format!("Share {id}: Invariant 2 fails, the ID is on another node already")));
    }
    mk(m, Kind::Share(id, d))
}

/// `runIdGen start m` (Fig. 6's `runIdGen (…) 0`, arguments swapped so that the computation, passed
/// unevaluated, comes last): runs m with the counter at start.
fn b_run_id_gen(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let start = int_arg(&args[0], span, "runIdGen")?;
    {
        let st = m.state::<ScalarState>();
        if st.active {
            return Err(RunError::runtime(span, "runIdGen inside runIdGen"));
        }
        st.active = true;
        st.last_id = start;
    }
    let r = m.apply(args[1].clone(), Value::Unit);
    m.state::<ScalarState>().active = false;
    r
}

/// The builtins of the tree program (Fig. 2): Zero, Scale, Add, Input.
pub fn tree_builtins() -> Vec<Builtin> {
    let mut bs = delta_ctor_builtins();
    bs.push(Builtin { name: "Input", scheme: Scheme::mono(Type::fun(Type::Int, delta_type())), arity: 1, lazy_last: false, run: b_input });
    bs
}

/// The builtins of Fig. 3's program: the tree's, Share, genID and runIdGen.
pub fn share_builtins() -> Vec<Builtin> {
    let mut bs = tree_builtins();
    let d = delta_type();
    bs.push(Builtin { name: "genID", scheme: Scheme::mono(m_type(Type::Int)), arity: 0, lazy_last: false, run: b_gen_id });
    bs.push(Builtin {
        name: "Share",
        scheme: Scheme::mono(Type::fun(Type::Int, Type::fun(d.clone(), d))),
        arity: 2,
        lazy_last: false,
        run: b_share,
    });
    let a = Type::Var(0);
    bs.push(Builtin {
        name: "runIdGen",
        scheme: Scheme { vars: vec![0], ty: Type::fun(Type::Int, Type::fun(m_type(a.clone()), a)) },
        arity: 2,
        lazy_last: true,
        run: b_run_id_gen,
    });
    bs
}

/// The arguments of every evaluator, `eval c d n`: the cotangent (or 1), the Delta, the number of inputs.
pub fn eval_args(m: &mut Machine, args: &[Value], span: Span, what: &str) -> Result<(f64, DeltaRef, usize), RunError> {
    let c = real_arg(&args[0], span, what)?;
    let d = delta_arg(&args[1], span, what)?;
    let n = int_arg(&args[2], span, what)?;
    if n < 0 {
        return Err(RunError::runtime(span, format!("{what}: a negative number of inputs ({n})")));
    }
    m.alloc(n as u64)?;
    Ok((c, d, n as usize))
}

/// The slot of `Input i` among n inputs.
pub fn input_slot(i: i64, n: usize, span: Span, what: &str) -> Result<usize, RunError> {
    if i < 0 || i as usize >= n {
        return Err(RunError::runtime(span, format!("{what}: Input {i} is outside the inputs 0..{n}")));
    }
    Ok(i as usize)
}

/// Whether `child`, reached from `parent`, is part of the same node of Fig. 4 rather than a node of its
/// own: the Scales that D builds inside one operation's Add (Fig. 2's ×, and the general rule) carry
/// that operation's span, and no operation's Delta is a Scale at an Add's span otherwise (each
/// primitive's Delta has one fixed outermost constructor). `parent` is an Add (the evaluators ask
/// from their Add arm); the child's kind is read through the evaluator's reader, and the spans
/// (each a search of the arena's span runs) are compared only for a Scale.
pub fn is_part(rd: &mut Reader, ar: &Arena, parent: Ix, child: Ix) -> bool {
    is_part_of(ar, &rd.kind(child), parent, child)
}

/// `is_part` of a child whose kind has been read.
pub fn is_part_of(ar: &Arena, child_kind: &Kind, parent: Ix, child: Ix) -> bool {
    matches!(child_kind, Kind::Scale(..)) && {
        let s = ar.span_id_of(child);
        s != 0 && s == ar.span_id_of(parent)
    }
}

/// Keeps an evaluator's visits for the graph and adds them to the counters.
pub fn record(m: &mut Machine, root: &DeltaRef, mut visits: Visits, op_visits: u64, res: &mut Result<(), RunError>) {
    visits.flush(m, res);
    m.count("op_visits", op_visits);
    if let Err(RunError::Budget { cost, .. }) = res {
        *cost.counters.entry("op_visits".to_string()).or_default() += op_visits;
    }
    let st = m.state::<ScalarState>();
    st.root = Some(root.clone());
    st.visits.merge(visits);
}

/// The Delta the evaluator walked, with its visits.
pub fn graph(m: &mut Machine) -> Option<Graph> {
    let st = m.state::<ScalarState>();
    let root = st.root.clone()?;
    Some(delta_graph(&root, &st.visits, &Default::default()))
}

/// A gradient vector as a value.
pub fn vector_value(g: Vec<f64>) -> Value {
    Value::Array(g.into_iter().map(Value::Real).collect::<Vec<_>>().into())
}


/// `eval : R → Delta → Int → Array R` (or `reversePass`) with the given runtime.
pub fn eval_builtin(name: &'static str, run: crate::interp::BuiltinFn) -> Builtin {
    let ty = Type::fun(Type::Real, Type::fun(delta_type(), Type::fun(Type::Int, super::program::grad_vector_type())));
    Builtin { name, scheme: Scheme::mono(ty), arity: 3, lazy_last: false, run }
}
