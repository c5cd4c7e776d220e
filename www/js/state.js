// The page's state (one object, rendered by every module's `render(state)`) and the queries on it.
// Stages and their grouping come from the core: `stages()` (descriptors) and `chains()` (which stages
// form which paper's chain, and the chain's heading); the page hard-codes no chain.

/** The stage every other one is compared with (the pipeline's reference, forward mode). */
export const REFERENCE = 'forward';
/** The stage a first visit opens on (the first the core has): one with a Delta DAG and a stepper. */
export const FIRST_SCREEN = ['krawiec/monadic', 'dualrev/tape'];
/** Steps per stage per run: krawiec/delta's eval2 runs ~2M budget steps per second in wasm. */
export const STEP_BUDGET = 2_000_000;

export const state = {
  stages: [],           // StageDesc[] from the core, in registry order
  chains: [],           // [{id, paper, citation, title, stages: [id]}] from the core, in registry order
  examples: [],
  result: null,         // the last WebAnalysis with no diagnostics
  diagnostics: [],
  selected: REFERENCE,
  step: 0,
  playing: null,
  diff: false,
  view: 'program',      // the program card's tab: 'program' or the name of one of the stage's views
  params: {},           // param overrides {name: int}
  paramDefaults: [],    // [{name, value}] from the program
  seq: 0,
  zoom: { k: 1, x: 0, y: 0 },
  dagBeside: true,      // the DAG beside the selected one's, where `besideOf` names one
  complexity: { param: null, counter: 'steps', runs: [] },
};

export function stageResult(id) { return state.result?.stages.find(s => s.id === id) || null; }

/** Every stage id: the chains' stages in order, then any the result has beyond them. */
export function stageOrder() {
  const ids = state.chains.flatMap(c => c.stages);
  for (const s of state.stages) if (!ids.includes(s.id)) ids.push(s.id);
  for (const s of state.result?.stages || []) if (!ids.includes(s.id)) ids.push(s.id);
  return ids;
}

export function stageDesc(id) { return state.stages.find(s => s.id === id) || stageResult(id) || { id, title: id }; }

/** The chain a stage belongs to, or null (a stage the core listed in no chain). */
export function chainOf(id) { return state.chains.find(c => c.stages.includes(id)) || null; }

/** What is drawn beside stage `id`'s Delta DAG ({stage, mine, theirs}: the other stage and the two
 *  panels' headings), as the stage declares it (`Stage::page`), if the core has that stage: the array
 *  paper's array-level Delta (§6) beside the scalar-level one of its arrays of dual numbers (§4.1). */
export function besideOf(id) {
  const b = stageDesc(id).page?.beside;
  return b && state.stages.some(s => s.id === b.stage) ? b : null;
}

/** Whether stage `id`'s program names the array paper's global shares (`share i t`, `shared i`, the
 *  variable `shared<i>`; §7.3–7.4), as the stage declares it: the program view marks each ID. */
export function marksShares(id) { return !!stageDesc(id).page?.marks_shares; }

/** The selected stage's backward-pass trace. */
export function trace() { return stageResult(state.selected)?.trace || []; }
