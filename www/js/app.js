// The Cotangent playground. The core runs in a Web Worker (worker.js, driven by core.js); this file wires
// the page's modules: each renders one part of the page from the one `state` (state.js).
// Rule: text from a program, a link or the core is only ever inserted with textContent (never as HTML);
// the one exception is the Delta-DAG SVG (see dag.js).
import { $, setStatus, showBanner } from './dom.js';
import { state, REFERENCE, FIRST_SCREEN, stageOrder, stageResult, besideOf } from './state.js';
import { Core, Superseded, Stopped } from './core.js';
import * as editor from './editor.js';
import * as inputs from './inputs.js';
import * as stageList from './stagelist.js';
import * as stageInfo from './stageinfo.js';
import * as gradient from './gradient.js';
import * as program from './program.js';
import * as dag from './dag.js';
import * as stepper from './stepper.js';
import * as costs from './costs.js';
import * as complexity from './complexity.js';
import * as session from './session.js';

window.__cot = { state, perf: [], selects: 0 };   // test and debugging hooks (`splitMs`: see SPLIT_MS; `cores`)

// Two workers. The main one runs everything but a long run's other chains; the side one takes some of
// those, balanced by what each chain took on the last run (`plan`), so that on a machine with two cores
// they run at once. A run whose chains took little in all stays on the main worker: a second one repeats
// the front end and the reference, which on small programs costs more than it saves (session 13 measured a
// split of every run: geomean 1.04–1.12 slower, the quaternion only 7–12 % faster, its side unbalanced).
const onRestart = msg => {
  showBanner(msg);
  setStatus(msg, 'bad');
  if (window.__cot) window.__cot.restarts = (window.__cot.restarts || 0) + 1;
};
const core = new Core(onRestart);
let side = null;   // started once the main worker is up
/** Each phase's core time on its last run, by its stage ids. */
const phaseMs = new Map();
/** Below this estimated total (ms of core time), a run stays on one worker. */
const SPLIT_MS = 60;

function renderStage() {
  stageInfo.render(state);
  gradient.render(state);
  program.render(state);
  dag.render(state);
  stepper.render(state);
}

/** `withCosts` false: a streamed run's part (the cost bars are drawn once, when the run is done). */
function renderAll(withCosts = true) {
  $('stage').classList.toggle('stale', !!state.stale);
  $('overview').classList.toggle('stale', !!state.stale);
  editor.render(state);
  inputs.render(state);
  stageList.render(state);
  renderStage();
  if (withCosts) costs.render(state);
  complexity.render(state);
}

function onEdit() {
  session.syncExample(state);
  const seq = ++state.seq;
  performance.mark('cot-edit-' + seq);
  session.persist(state);
  run(seq);
}

function onInput() {
  session.persist(state);
  run();
}

/** The phases of a run: forward (the reference) and the selected stage first, then the rest of its
 *  chain, then each other chain, so that the selected stage shows before the others have run. The core
 *  runs them as one pipeline: what the selected stage's input needs is prepared once. */
function phases() {
  const sel = state.chains.find(c => c.stages.includes(state.selected)) || state.chains[0];
  const first = [...new Set([REFERENCE, ...(sel && sel.stages.includes(state.selected) ? [state.selected] : sel ? sel.stages : [])])];
  const chain = sel ? sel.stages.filter(id => !first.includes(id)) : [];
  const rest = state.chains.filter(c => c !== sel).map(c => c.stages.filter(id => !first.includes(id))).filter(p => p.length);
  const known = new Set([first, chain, ...rest].flat());
  const others = stageOrder().filter(id => !known.has(id));
  const all = [first, ...(chain.length ? [chain] : []), ...rest, ...(others.length ? [others] : [])];
  all.head = chain.length ? 2 : 1;   // the selected stage's chain: always on the main worker
  return all;
}

/** The phases of a run split between the main worker and the side one: the first phases (forward, the
 *  selected stage, the rest of its chain) on the main one, then each other chain to whichever has less to
 *  do by the last run's times (longest first); everything on the main one when the run is short. */
function plan(all) {
  const cost = ph => phaseMs.get(ph.join(' ')) ?? 4 * ph.length;
  const head = all.slice(0, all.head), rest = all.slice(all.head);
  const total = all.reduce((t, ph) => t + cost(ph), 0);
  if (!side || !rest.length || total < (window.__cot.splitMs ?? SPLIT_MS)) return { main: all, side: [] };
  // (the side starts once the selected stage has landed, so that it never slows that one down)
  let a = head.reduce((t, ph) => t + cost(ph), 0), b = cost(all[0]);
  const toSide = new Set();
  for (const ph of rest.slice().sort((x, y) => cost(y) - cost(x))) {
    if (b + cost(ph) < a + cost(ph)) { toSide.add(ph); b += cost(ph); } else a += cost(ph);
  }
  return { main: [...head, ...rest.filter(ph => !toSide.has(ph))], side: rest.filter(ph => toSide.has(ph)) };
}

async function run(seq = ++state.seq) {
  if (!performance.getEntriesByName('cot-edit-' + seq).length) performance.mark('cot-edit-' + seq);
  const text = editor.source();
  inputs.syncParamsFromText(state, text);
  setStatus('running…');
  let merged = null, selectedMs = null;
  const early = [];   // the side's parts that land before the main worker's first
  const order = stageOrder();
  const addStages = part => {
    merged.stages.push(...part.stages);
    merged.stages.sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id));
    merged.elapsed_ms += part.elapsed_ms;
    // a later phase: only what lists every stage changes, unless it brought the selected stage or
    // the one whose graph is drawn beside it
    const beside = besideOf(state.selected)?.stage;
    if (part.stages.some(s => s.id === state.selected || s.id === beside)) apply(merged, seq);
    else stageList.refresh(state, part.stages.map(s => s.id));
  };
  const onPart = (worker, phases) => {
    let k = 0;
    return part => {
      const ph = phases[k++];
      if (ph) phaseMs.set(ph.join(' '), part.phase_ms);
      if (seq !== state.seq) return;
      // each stage remembers which worker holds its kept analysis (its trace, steps and views)
      for (const s of part.stages) s.run = { side: worker === side, id: part.run_id };
      if (worker === side) {
        if (!merged) { early.push(part); return; }
        if (!merged.diagnostics?.length) addStages(part);
        return;
      }
      if (!merged || part.diagnostics?.length) {
        merged = part;
        apply(merged, seq);
        if (!part.diagnostics?.length) early.splice(0).forEach(addStages);
      } else addStages(part);
      startSide();
      if (selectedMs == null) {
        performance.mark('cot-selected-' + seq);
        selectedMs = performance.measure('cot-update-selected', 'cot-edit-' + seq, 'cot-selected-' + seq).duration;
      }
    };
  };
  const p = plan(phases());
  const options = inputs.options(state);
  // the side's run starts when the main worker's first phase (the selected stage) has landed, or at once
  // where there is a core for each worker and one for the page (on two, it slowed the selected stage)
  let sideRun = null;
  const startSide = () => {
    if (!sideRun && p.side.length) {
      sideRun = side.request('analyse-stream', { source: text, options, phases: p.side }, 'main', onPart(side, p.side));
      sideRun.catch(() => {});   // awaited below unless the main run failed; a newer run may supersede it
    }
  };
  const mainRun = core.request('analyse-stream', { source: text, options, phases: p.main }, 'main', onPart(core, p.main));
  if ((window.__cot.cores ?? navigator.hardwareConcurrency ?? 2) >= 3) startSide();
  const settled = [await mainRun.then(() => ({}), reason => ({ reason }))];
  startSide();
  if (sideRun && !settled[0].reason) settled.push(await sideRun.then(() => ({}), reason => ({ reason })));
  const failed = settled.find(r => r.reason);
  if (failed) {
    const e = failed.reason;
    if (e instanceof Superseded) return;
    if (seq !== state.seq) return;
    state.stale = !!state.result;   // keep showing the last result that ran, marked as stale
    state.diagnostics = [{ message: String(e.message || e), from: null, line: null }];
    renderAll();
    setStatus(e instanceof Stopped ? 'stopped after 3 s' : 'error', 'bad');
    return;
  }
  if (seq !== state.seq || !merged) return;   // a newer edit is on its way
  // the cost bars, once the run is done: drawn per part, they took the page's thread 5–10 ms a part
  // while both workers ran (on two cores), and a part's stages alone changed their shape, so they could
  // never be updated in place
  costs.render(state);
  performance.mark('cot-done-' + seq);
  const m = performance.measure('cot-update', 'cot-edit-' + seq, 'cot-done-' + seq);
  window.__cot.perf.push({ seq, ms: m.duration, selected_ms: selectedMs ?? m.duration, core_ms: merged.elapsed_ms, split: p.side.length > 0 });
  window.__cot.lastSeq = seq;
  const nStages = state.result ? state.result.stages.length : 0;
  setStatus(!state.stale && state.result ? `${nStages} stage${nStages === 1 ? '' : 's'} updated in ${m.duration.toFixed(0)} ms` :
    `${state.diagnostics.length} error${state.diagnostics.length === 1 ? '' : 's'}`, !state.stale && state.result ? 'ok' : 'bad');
}

/** Shows a (possibly partial) analysis: the stages that have run so far. */
function apply(res, seq) {
  state.diagnostics = res.diagnostics || [];
  if (!state.diagnostics.length) { state.result = res; state.stale = false; state.paramDefaults = res.params || state.paramDefaults; }
  else state.stale = !!state.result;   // while the program has errors, the last result that ran stays, dimmed
  renderAll(false);   // (the cost bars: when the run is done)
  if (state.pendingStep != null && state.result && state.result.stages.some(s => s.id === state.selected || s.id === REFERENCE)) {
    const p = state.pendingStep;
    state.pendingStep = null;
    select(stageOrder().includes(state.selected) ? state.selected : REFERENCE, 0);
    if (p) stepper.goStep(state, p);
  }
  document.body.dataset.detail = stageResult(state.selected)?.detail ? state.selected : '';
  void seq;
}

/** Selects stage `id`; `reveal` (a click or key in the stage list) also brings its view to the top:
 *  the right pane scrolls back up, and on a narrow screen the page scrolls to it. */
function select(id, step = 0, reveal = false) {
  if (!stageOrder().includes(id)) return;
  window.__cot.selects++;
  stepper.stopPlay(state);
  state.selected = id;
  state.step = step;
  state.zoom = { k: 1, x: 0, y: 0 };
  state.fitPending = true;
  session.persist(state);
  stageList.markSelected(id);
  renderStage();
  costs.markSelected(id);
  complexity.render(state);
  loadDetail(id);
  const b = besideOf(id);
  if (b) loadDetail(b.stage, 'beside');
  if (reveal) {
    $('stage').scrollTop = 0;
    if (window.matchMedia('(max-width: 1100px)').matches) $('stage').scrollIntoView({ block: 'start', behavior: 'smooth' });
  }
}

/** The worker that holds stage result `r`'s kept analysis, and that analysis's id. */
function keptBy(r) {
  return r?.run ? [r.run.side ? side : core, r.run.id] : [core, state.result.run_id];
}

// The trace, graph and program of a stage other than the one a run was made for come from the worker's
// kept analysis (which runs it again, shown, if it ran unshown); `role`: 'beside' for the stage whose
// graph is drawn beside the selected one's, 'base' for the diff's base (neither is marked as the detail shown).
function loadDetail(id, role = null) {
  const r = stageResult(id);
  if (!r || r.detail) { if (!role) document.body.dataset.detail = id; return; }
  const res = state.result, [worker, runId] = keptBy(r);
  worker.request('detail', { run_id: runId, stage: id }, role ? 'detail-' + role : 'detail').then(d => {
    if (state.result !== res) return;   // a newer run has landed
    if (!d) { r.detail_missing = true; }
    else Object.assign(r, d);
    // a stage run again shown brings its program and views too (a rewrite trace view then has its steps)
    if (state.selected === id) { dag.render(state); stepper.render(state); if (d?.views || d?.program !== undefined) program.render(state); document.body.dataset.detail = id; }
    else {
      if (besideOf(state.selected)?.stage === id) dag.render(state);
      if (d?.program !== undefined) program.render(state);
    }
  }).catch(() => {});
}

// A rewrite's step terms and trace view are printed in the worker when shown (`deferred` in the run's
// result): each is asked for once, and the stage is drawn again when it lands.
function loadStepTexts(id, i, step) {
  if (step.loading) return;
  step.loading = true;
  const res = state.result, [worker, runId] = keptBy(stageResult(id));
  worker.request('step', { run_id: runId, stage: id, index: i }).then(t => {
    if (state.result !== res) return;
    step.loading = false;
    if (!t) { stageResult(id).detail_missing = true; return; }
    step.note = t.note;
    step.state = (step.state || []).concat(t.rows);
    step.deferred = [];
    if (state.selected === id) stepper.render(state);
  }).catch(() => { step.loading = false; });
}

function loadViewText(id, view) {
  if (view.loading) return;
  view.loading = true;
  const res = state.result, [worker, runId] = keptBy(stageResult(id));
  worker.request('view', { run_id: runId, stage: id, name: view.name }).then(text => {
    if (state.result !== res) return;
    view.loading = false;
    if (text == null) { stageResult(id).detail_missing = true; }
    else { view.text = text; view.deferred = false; }
    if (state.selected === id) program.render(state);
  }).catch(() => { view.loading = false; });
}

function moveStage(delta) {
  const ids = stageOrder();
  const i = ids.indexOf(state.selected);
  const j = Math.max(0, Math.min(ids.length - 1, i + delta));
  if (j !== i) { select(ids[j]); $('stage').scrollTop = 0; }
}

async function main() {
  setStatus('starting the core…');
  let hello;
  try {
    hello = await core.request('hello');
  } catch (e) {
    showBanner('The core did not start: ' + (e.message || e));
    return;
  }
  // the side worker, for long runs (plan): used once it has loaded the core
  const second = new Core(onRestart);
  second.request('hello').then(() => { side = second; }, () => {});
  state.stages = hello.stages;
  state.chains = hello.chains;
  state.examples = hello.examples;
  $('version').textContent = `Cotangent ${hello.version} · ${hello.stages.length} stages`;
  session.render(state);

  const start = await session.initialView(state);
  // A first visit opens on a stage that has a Delta DAG and a stepper, not on the reference.
  if (typeof start.stage !== 'string') state.selected = FIRST_SCREEN.find(id => hello.stages.some(s => s.id === id)) || REFERENCE;
  editor.init(start.src, onEdit);
  session.syncExample(state);
  inputs.init(onInput);
  stageList.init(id => select(id, 0, true));
  stageInfo.init(state);
  costs.init(id => select(id));
  program.init(state, id => loadDetail(id, 'base'), loadViewText);
  dag.init(state, i => { stepper.stopPlay(state); stepper.goStep(state, i); });
  stepper.init(state, loadStepTexts);
  complexity.init(core);
  session.init(state, { run, moveStage });

  stageList.render(state);
  await run();
  // The default stage refused this program (krawiec/monadic takes no array input): open on the first
  // stage that ran with steps over a graph instead, else forward.
  if (typeof start.stage !== 'string' && !stageResult(state.selected)?.ok) {
    const ok = s => s?.ok && (s.trace_len > 0 || s.traced === false) && s.graph_nodes > 0;
    select(FIRST_SCREEN.find(id => ok(stageResult(id))) || state.result?.stages.find(ok)?.id || REFERENCE);
  }
  session.checkLinkedStage(state, stageOrder(), REFERENCE);
  if (!stageOrder().includes(state.selected)) select(REFERENCE);
  Object.assign(window.__cot, { renderAll, select, goStep: i => stepper.goStep(state, i), source: editor.source, setSource: editor.setSource, core });
  window.__cot.ready = true;
  document.body.dataset.ready = '1';
}

main();
