// The Cotangent playground. The core runs in a Web Worker (worker.js); this file is the page.
// Rule: text from a program, a link or the core is only ever inserted with textContent (never as HTML).
// The one exception is the Delta-DAG SVG, which the core writes with every label escaped; it is parsed
// as XML (not HTML) and scripts and event attributes are refused.
import {
  EditorView, EditorState, StateField, StateEffect, Decoration, keymap, lineNumbers, highlightActiveLine,
  highlightActiveLineGutter, drawSelection, highlightSpecialChars, history, defaultKeymap, historyKeymap,
  indentWithTab, bracketMatching, closeBrackets, closeBracketsKeymap, searchKeymap, highlightSelectionMatches,
  lintGutter, lintKeymap, setDiagnostics,
} from '../codemirror.bundle.js';
import { cotangentLanguage, cotangentHighlight, highlightLine } from './lang.js';
import { diffLines } from './diff.js';
import { encodeView, decodeHash } from './share.js';

const WALL_LIMIT_MS = 3000;
const STEP_BUDGET = 2_000_000;   // krawiec/delta's eval2 runs ~2M budget steps per second in wasm
const STORE_KEY = 'cotangent.playground.v1';
const FALLBACK_EXAMPLE = {
  name: 'running-example', paper: 'krawiec', title: 'The running example (Krawiec et al. 2022, §2)',
  source: '-- The running example (Krawiec et al. 2022, §2): gradient (37, 12) at (12, 13)\n' +
          'input (12.0, 13.0)\ndef main (x, y) = let z = x + y in x * z\nexpect grad (37.0, 12.0)\n',
};
const PAPERS = { general: 'Language and shared examples', forward: 'Reference', krawiec: 'Krawiec et al. 2022', dualrev: 'Smeding & Vákár (dual numbers)',
  huot: 'Huot & Shaikhha', chad: 'Smeding & Vákár (CHAD)', arrays: 'Smeding et al. (arrays)' };

const $ = id => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = String(text);
  return e;
};
const svgEl = (tag, attrs = {}, text) => {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text != null) e.textContent = String(text);
  return e;
};
const fmt = x => {
  if (x == null) return '—';
  if (typeof x === 'string') return { NaN: 'nan', Infinity: 'inf', '-Infinity': '-inf' }[x] ?? x; // JSON's names for non-finite reals
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (Number.isInteger(x) && Math.abs(x) < 1e15) return x.toFixed(1);
  const a = Math.abs(x);
  return (a >= 1e-4 && a < 1e9) ? String(+x.toPrecision(12)) : x.toExponential(6);
};
const fmtCount = n => n >= 1e6 ? (n / 1e6).toPrecision(3) + 'M' : n >= 1e4 ? (n / 1e3).toPrecision(3) + 'k' : String(n);

// ---------------------------------------------------------------------------------------------
// The worker: one request at a time, a wall-time watchdog, restart on timeout or a trap.

class Core {
  constructor(onRestart) {
    this.onRestart = onRestart;
    this.seq = 0;
    this.queue = [];
    this.current = null;
    this.spawn();
  }
  spawn() {
    this.worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    this.worker.onmessage = ev => this.settle(ev.data);
    this.worker.onerror = ev => { ev.preventDefault?.(); this.fail('the core failed to start: ' + (ev.message || 'worker error'), true); };
  }
  /** kind: 'hello' | 'analyse' | 'draw'; a request with a `slot` replaces a queued one of the same slot. */
  request(kind, payload = {}, slot = null) {
    return new Promise((resolve, reject) => {
      const job = { id: ++this.seq, kind, payload, slot, resolve, reject };
      if (slot) {
        const i = this.queue.findIndex(j => j.slot === slot);
        if (i >= 0) { this.queue[i].reject(new Superseded()); this.queue.splice(i, 1); }
      }
      this.queue.push(job);
      this.pump();
    });
  }
  pump() {
    if (this.current || !this.queue.length) return;
    const job = this.current = this.queue.shift();
    job.started = performance.now();
    job.timer = setTimeout(() => {
      this.restart(`stopped: the run took longer than ${WALL_LIMIT_MS / 1000} s, so the core was stopped and restarted`);
    }, WALL_LIMIT_MS);
    this.worker.postMessage({ ...job.payload, id: job.id, kind: job.kind });
  }
  settle(msg) {
    const job = this.current;
    if (!job || msg.id !== job.id) return;
    clearTimeout(job.timer);
    this.current = null;
    if (msg.ok) job.resolve(msg.result && typeof msg.result.json === 'string' ? JSON.parse(msg.result.json) : msg.result);
    else {
      job.reject(new Error(msg.error));
      if (msg.fatal) { this.worker.terminate(); this.spawn(); this.onRestart?.('the core crashed (' + msg.error + ') and was restarted'); }
    }
    this.pump();
  }
  fail(message, respawn) {
    const job = this.current;
    this.current = null;
    if (job) { clearTimeout(job.timer); job.reject(new Error(message)); }
    if (respawn) { this.worker.terminate(); this.spawn(); }
    this.pump();
  }
  restart(message) {
    this.worker.terminate();
    const job = this.current;
    this.current = null;
    this.spawn();
    if (job) job.reject(new Stopped(message));
    this.onRestart?.(message);
    this.pump();
  }
}
class Superseded extends Error { constructor() { super('superseded'); } }
class Stopped extends Error {}

// ---------------------------------------------------------------------------------------------
// State.

const state = {
  stages: [],           // StageDesc[] from the core, in registry order
  examples: [],
  result: null,         // the last WebAnalysis with no diagnostics
  diagnostics: [],
  selected: 'forward',
  step: 0,
  playing: null,
  diff: false,
  params: {},           // param overrides {name: int}
  paramDefaults: [],    // [{name, value}] from the program
  seq: 0,
  zoom: { k: 1, x: 0, y: 0 },
  complexity: { param: null, counter: 'steps', runs: [] },
};
window.__cot = { state, perf: [] };   // test and debugging hooks

const core = new Core(msg => {
  showBanner(msg);
  setStatus(msg, 'bad');
  if (window.__cot) window.__cot.restarts = (window.__cot.restarts || 0) + 1;
});

// ---------------------------------------------------------------------------------------------
// Editor.

const spanEffect = StateEffect.define();
const spanField = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    deco = deco.map(tr.changes);
    for (const e of tr.effects) if (e.is(spanEffect)) {
      const { from, to } = e.value || {};
      const len = tr.state.doc.length;
      deco = (e.value && from < to && to <= len)
        ? Decoration.set([Decoration.mark({ class: 'cm-step-span' }).range(from, to)])
        : Decoration.none;
    }
    return deco;
  },
  provide: f => EditorView.decorations.from(f),
});

let editor;
function makeEditor(doc) {
  editor = new EditorView({
    parent: $('editor'),
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), history(), drawSelection(),
        bracketMatching(), closeBrackets(), highlightActiveLine(), highlightSelectionMatches(), lintGutter(),
        cotangentLanguage, cotangentHighlight, spanField,
        keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...lintKeymap, indentWithTab]),
        EditorView.updateListener.of(u => { if (u.docChanged) onEdit(); }),
        EditorView.contentAttributes.of({ 'aria-label': 'Cotangent program', spellcheck: 'false' }),
      ],
    }),
  });
}
const source = () => editor.state.doc.toString();
function setSource(text) {
  editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: text } });
}

// ---------------------------------------------------------------------------------------------
// Running.

function options(extra = {}) {
  const at = $('in-at').value.trim(), seed = $('in-seed').value.trim();
  // A step budget per run (each stage runs separately): an exponential stage then fails on its own,
  // with the budget named, while the others still show, well inside the 3 s wall-time limit.
  return { at: at || undefined, seed: seed || undefined, params: state.params, svg: [state.selected], budget: { steps: STEP_BUDGET },
    // Only the selected stage's trace and graph travel with each run; the others come on demand.
    detail: [state.selected], keep: true, ...extra };
}

function persist() {
  try {
    localStorage.setItem(STORE_KEY, JSON.stringify({
      src: source(), at: $('in-at').value, seed: $('in-seed').value, params: state.params, stage: state.selected,
    }));
  } catch { /* storage full or disabled: not fatal */ }
}

let lastRun = 0;
function onEdit() {
  const sel = $('examples');
  if (sel.value && state.examples[+sel.value]?.source !== source()) sel.value = '';
  const seq = ++state.seq;
  performance.mark('cot-edit-' + seq);
  lastSpanKey = 'stale';   // the step's span decoration moved with the edit
  persist();
  run(seq);
}

async function run(seq = ++state.seq) {
  if (!performance.getEntriesByName('cot-edit-' + seq).length) performance.mark('cot-edit-' + seq);
  const text = source();
  syncParamsFromText(text);
  setStatus('running…');
  let res;
  try {
    res = await core.request('analyse', { source: text, options: options() }, 'main');
  } catch (e) {
    if (e instanceof Superseded) return;
    if (seq !== state.seq) return;
    state.stale = !!state.result;   // keep showing the last result that ran, marked as stale
    state.diagnostics = [{ message: String(e.message || e), from: null, line: null }];
    renderAll();
    setStatus(e instanceof Stopped ? 'stopped after 3 s' : 'error', 'bad');
    return;
  }
  if (seq !== state.seq) return;   // a newer edit is on its way
  lastRun = seq;
  state.diagnostics = res.diagnostics || [];
  if (!state.diagnostics.length) { state.result = res; state.stale = false; state.paramDefaults = res.params || state.paramDefaults; }
  else state.stale = !!state.result;   // while the program has errors, the last result that ran stays, dimmed
  renderAll();
  if (state.pendingStep != null && state.result) {
    const p = state.pendingStep;
    state.pendingStep = null;
    select(stageOrder().includes(state.selected) ? state.selected : 'forward', 0);
    if (p) goStep(p);
  }
  document.body.dataset.detail = stageResult(state.selected)?.detail ? state.selected : '';
  performance.mark('cot-done-' + seq);
  const m = performance.measure('cot-update', 'cot-edit-' + seq, 'cot-done-' + seq);
  window.__cot.perf.push({ seq, ms: m.duration, core_ms: res.elapsed_ms });
  window.__cot.lastSeq = seq;
  const nStages = state.result ? state.result.stages.length : 0;
  setStatus(!state.stale && state.result ? `${nStages} stage${nStages === 1 ? '' : 's'} updated in ${m.duration.toFixed(0)} ms` :
    `${state.diagnostics.length} error${state.diagnostics.length === 1 ? '' : 's'}`, !state.stale && state.result ? 'ok' : 'bad');
}

// ---------------------------------------------------------------------------------------------
// Rendering.

function setStatus(text, cls = '') {
  const s = $('status');
  s.textContent = text;
  s.className = 'status ' + cls;
}
function showBanner(text) {
  $('banner-text').textContent = text;
  $('banner').hidden = false;
}

function renderAll() {
  $('stage').classList.toggle('stale', !!state.stale);
  $('overview').classList.toggle('stale', !!state.stale);
  renderDiagnostics();
  renderParams();
  renderStageList();
  renderOverview();
  renderStage();
  renderCosts();
  renderComplexityControls();
}

let lastLintKey = '[]';
function renderDiagnostics() {
  const box = $('diagnostics');
  box.replaceChildren();
  const ds = state.diagnostics;
  const cm = [];
  const len = editor.state.doc.length;
  for (const d of ds) {
    const item = el('div', 'diag');
    const where = d.line != null ? `${d.line}:${d.col}` : '';
    item.append(el('span', 'diag-sev', d.severity === 'warning' ? 'warning' : 'error'));
    if (where) item.append(el('span', 'diag-pos', where));
    if (d.stage) item.append(el('span', 'diag-stage', d.stage));
    item.append(el('span', 'diag-msg', d.message));
    if (d.from != null) {
      item.classList.add('clickable');
      item.title = 'Show in the editor';
      item.addEventListener('click', () => {
        editor.dispatch({ selection: { anchor: Math.min(d.from, len) }, scrollIntoView: true });
        editor.focus();
      });
      const from = Math.min(d.from, len), to = Math.min(Math.max(d.to ?? d.from, from), len);
      cm.push({ from, to: to > from ? to : Math.min(from + 1, len), severity: d.severity === 'warning' ? 'warning' : 'error', message: d.message });
    }
    box.append(item);
  }
  box.hidden = !ds.length;
  const key = JSON.stringify(cm);
  if (key !== lastLintKey) { lastLintKey = key; editor.dispatch(setDiagnostics(editor.state, cm)); }
}

function syncParamsFromText(text) {
  // Params are shown as soon as they are typed, before the core has checked the program.
  const found = [];
  for (const m of text.matchAll(/^\s*param\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*(-?\d+)/gm)) found.push({ name: m[1], value: Number(m[2]) });
  const names = found.map(p => p.name).join(',');
  if (names !== state.paramDefaults.map(p => p.name).join(',')) {
    state.paramDefaults = found;
    for (const k of Object.keys(state.params)) if (!found.some(p => p.name === k)) delete state.params[k];
  } else state.paramDefaults = found;
}

function renderParams() {
  const box = $('params');
  const have = [...box.querySelectorAll('input')].map(i => i.dataset.param).join(',');
  const want = state.paramDefaults.map(p => p.name).join(',');
  if (have === want) {
    for (const i of box.querySelectorAll('input')) {
      const p = state.paramDefaults.find(p => p.name === i.dataset.param);
      i.placeholder = String(p.value);
    }
    return;
  }
  box.replaceChildren();
  for (const p of state.paramDefaults) {
    const label = el('label', 'param');
    label.append(el('span', null, 'param ' + p.name));
    const input = el('input');
    input.type = 'number';
    input.step = '1';
    input.dataset.param = p.name;
    input.placeholder = String(p.value);
    if (state.params[p.name] != null) input.value = String(state.params[p.name]);
    input.addEventListener('input', () => {
      const v = input.value.trim();
      if (v === '') delete state.params[p.name];
      else if (/^-?\d+$/.test(v)) state.params[p.name] = Number(v);
      else return;
      persist();
      run();
    });
    label.append(input);
    box.append(label);
  }
}

function groupOf(id) { return id.split('/')[0]; }
function stageResult(id) { return state.result?.stages.find(s => s.id === id) || null; }
function stageOrder() {
  const ids = state.stages.map(s => s.id);
  for (const s of state.result?.stages || []) if (!ids.includes(s.id)) ids.push(s.id);
  return ids;
}
function stageDesc(id) { return state.stages.find(s => s.id === id) || stageResult(id) || { id, title: id }; }

function renderStageList() {
  const list = $('stage-list');
  list.replaceChildren();
  let group = null, ol = null;
  for (const id of stageOrder()) {
    const d = stageDesc(id);
    const g = groupOf(id);
    if (g !== group) {
      group = g;
      const li = el('li', 'group');
      li.append(el('div', 'group-name', g === 'forward' ? 'Reference' : (d.paper || PAPERS[g] || g)));
      ol = el('ol', 'group-stages');
      li.append(ol);
      list.append(li);
    }
    const item = el('li', 'stage-item');
    item.dataset.stage = id;
    item.tabIndex = 0;
    item.setAttribute('role', 'button');
    const r = stageResult(id);
    let badge = '·', cls = 'none', tip = 'not run';
    if (r) {
      if (!r.ok) { badge = '–'; cls = 'refused'; tip = r.error || 'did not run'; }
      else if (r.agrees === false) { badge = '✗'; cls = 'bad'; tip = 'disagrees with forward'; }
      else { badge = '✓'; cls = 'ok'; tip = id === 'forward' ? 'reference' : 'agrees with forward'; }
    }
    const b = el('span', 'badge ' + cls, badge);
    b.title = tip;
    item.append(b);
    const text = el('span', 'stage-text');
    text.append(el('span', 'stage-title', d.title || id));
    text.append(el('span', 'stage-sub', [id, d.section].filter(Boolean).join(' · ')));
    item.append(text);
    if (id === state.selected) item.classList.add('selected');
    item.addEventListener('click', () => select(id));
    item.addEventListener('keydown', e => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); select(id); } });
    ol.append(item);
  }
}

function select(id, step = 0) {
  if (!stageOrder().includes(id)) return;
  stopPlay();
  state.selected = id;
  state.step = step;
  state.zoom = { k: 1, x: 0, y: 0 };
  state.fitPending = true;
  persist();
  for (const li of document.querySelectorAll('.stage-item')) li.classList.toggle('selected', li.dataset.stage === id);
  document.querySelector(`.stage-item[data-stage="${CSS.escape(id)}"]`)?.scrollIntoView({ block: 'nearest' });
  renderStage();
  renderCosts();
  renderComplexityControls();
  loadDetail(id);
}

// The trace and graph of a stage other than the one a run was made for come from the worker's kept analysis.
function loadDetail(id) {
  const r = stageResult(id);
  if (!r || r.detail) { document.body.dataset.detail = id; return; }
  const runId = state.result.run_id;
  core.request('detail', { run_id: runId, stage: id }, 'detail').then(d => {
    if (!state.result || state.result.run_id !== runId) return;   // a newer run has landed
    if (!d) { r.detail_missing = true; }
    else Object.assign(r, d);
    if (state.selected === id) { renderDag(r); renderStep(); document.body.dataset.detail = id; }
  }).catch(() => {});
}

function moveStage(delta) {
  const ids = stageOrder();
  const i = ids.indexOf(state.selected);
  const j = Math.max(0, Math.min(ids.length - 1, i + delta));
  if (j !== i) select(ids[j]);
}

function renderOverview() {
  const box = $('overview');
  box.replaceChildren();
  const r = state.result;
  if (!r) return;
  const t = el('dl', 'facts');
  const add = (k, v) => { t.append(el('dt', null, k)); t.append(el('dd', null, v)); };
  add('main :', `${r.input_type} → ${r.output_type}`);
  add('input', r.input_text ?? JSON.stringify(r.input));
  add('primal', r.primal_text ?? JSON.stringify(r.primal));
  box.append(t);
}

function renderStage() {
  const id = state.selected;
  const d = stageDesc(id);
  const r = stageResult(id);
  $('st-paper').textContent = d.paper || '';
  $('st-section').textContent = d.section || '';
  $('st-title').textContent = d.title || id;
  $('st-id').textContent = id;
  $('st-complexity').textContent = d.complexity ? 'Complexity: ' + d.complexity : '';
  richText($('st-explanation'), d.explanation || '');
  richText($('st-accepts'), d.accepts ? 'Accepts: ' + d.accepts : '');
  renderGradient(r);
  renderProgram(r);
  renderDag(r);
  renderStep();
}

/** Text with `code` spans: backticked parts become <code> elements (built with textContent, never HTML). */
function richText(node, text) {
  node.replaceChildren();
  text.split('`').forEach((part, i) => node.append(i % 2 ? el('code', null, part) : document.createTextNode(part)));
}

function renderGradient(r) {
  const box = $('gradient');
  box.replaceChildren();
  const res = state.result;
  if (!res) { box.append(el('p', 'muted', state.diagnostics.length ? 'Fix the errors in the program to see gradients.' : 'No result yet.')); return; }
  if (state.stale) box.append(el('p', 'stale-note', 'The program has errors (see under the editor): this is the last version that ran.'));
  if (!r) { box.append(el('p', 'muted', 'This stage did not run.')); return; }
  const head = el('div', 'grad-head');
  if (!r.ok) {
    head.append(el('span', 'verdict refused', 'did not run'));
    head.append(el('span', 'grad-error', r.error || ''));
    if (r.error_span) {
      const at = el('button', 'link', `line ${r.error_span.line}:${r.error_span.col}`);
      at.addEventListener('click', () => {
        const len = editor.state.doc.length;
        editor.dispatch({ selection: { anchor: Math.min(r.error_span.from, len), head: Math.min(r.error_span.to, len) }, scrollIntoView: true });
        editor.focus();
      });
      head.append(at);
    }
    box.append(head);
    return;
  }
  const ref = res.reference;
  if (r.id === 'forward') head.append(el('span', 'verdict ok', 'reference'));
  else if (r.agrees === true) head.append(el('span', 'verdict ok', 'agrees with forward'));
  else if (r.agrees === false) head.append(el('span', 'verdict bad', 'DISAGREES with forward'));
  if (ref) head.append(el('span', 'verdict ' + (ref.fd_agrees ? 'ok' : 'warn'),
    ref.fd_agrees ? 'forward agrees with finite differences' : 'forward and finite differences differ (kink or cancellation?)'));
  head.append(el('span', 'muted', 'gradient of ⟨seed, main x⟩ with respect to every real input'));
  box.append(head);
  const table = el('table', 'grad-table');
  const tr0 = el('tr');
  for (const h of ['input', 'x', 'this stage', 'forward', 'finite differences']) tr0.append(el('th', null, h));
  table.append(tr0);
  const xs = res.input_reals || [];
  const n = Math.max(r.gradient.length, ref?.gradient.length || 0);
  for (let i = 0; i < n; i++) {
    const tr = el('tr');
    tr.append(el('td', 'muted', 'x' + (i + 1)));
    tr.append(el('td', 'num', fmt(xs[i])));
    const g = r.gradient[i], f = ref?.gradient[i];
    const c = el('td', 'num strong', fmt(g));
    if (f != null && g != null && !close(g, f)) c.classList.add('differs');
    tr.append(c);
    tr.append(el('td', 'num', fmt(f)));
    tr.append(el('td', 'num muted', fmt(ref?.fd[i])));
    table.append(tr);
  }
  if (!n) { const tr = el('tr'); const td = el('td', 'muted', 'The input has no real numbers, so the gradient is empty.'); td.colSpan = 5; tr.append(td); table.append(tr); }
  box.append(table);
}
function close(a, b) { return a === b || Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b)) || (Number.isNaN(a) && Number.isNaN(b)); }

function previousStage(id) {
  const ids = stageOrder().filter(x => stageResult(x)?.program);
  const i = ids.indexOf(id);
  if (i <= 0) return null;
  const same = ids.slice(0, i).filter(x => groupOf(x) === groupOf(id));
  return same.length ? same[same.length - 1] : ids.includes('forward') && id !== 'forward' ? 'forward' : ids[i - 1];
}

let programKey = null;
function renderProgram(r) {
  const pre = $('stage-program');
  const prev = previousStage(state.selected);
  const key = JSON.stringify([state.selected, r?.program, r?.error, state.diff && prev ? stageResult(prev).program : null]);
  if (key === programKey) return;   // unchanged (e.g. an edit inside a comment): keep the DOM
  programKey = key;
  pre.replaceChildren();
  $('diff-base').textContent = prev ? prev : 'previous stage';
  $('diff-toggle').disabled = !prev;
  if (!r || !r.program) { pre.append(el('span', 'muted', r?.error ? 'No program: ' + r.error : 'No program.')); return; }
  if (state.diff && prev) {
    for (const { op, text } of diffLines(stageResult(prev).program, r.program)) {
      const line = el('div', 'line ' + (op === '+' ? 'add' : op === '-' ? 'del' : 'same'));
      line.append(el('span', 'gutter', op));
      highlightLine(line, text);
      pre.append(line);
    }
  } else {
    r.program.split('\n').forEach((text, i) => {
      const line = el('div', 'line');
      line.append(el('span', 'gutter', i + 1));
      highlightLine(line, text);
      pre.append(line);
    });
  }
}

// --- Delta DAG with pan and zoom --------------------------------------------------------------

function safeSvg(text) {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const svg = doc.documentElement;
  if (svg.nodeName !== 'svg' || doc.querySelector('parsererror, script, foreignObject')) return null;
  for (const e of doc.querySelectorAll('*')) for (const a of [...e.attributes]) if (/^on/i.test(a.name) || /javascript:/i.test(a.value)) return null;
  return document.importNode(svg, true);
}

let dagKey = null;
function renderDag(r) {
  const box = $('dag');
  const key = JSON.stringify([state.selected, r?.ok, r?.detail, r?.graph_svg ?? null, r?.graph?.nodes?.length ?? 0]);
  if (key === dagKey && box.querySelector('svg')) { highlightStep(); return; }
  dagKey = key;
  box.replaceChildren();
  const info = $('dag-info');
  info.textContent = '';
  if (r && !r.detail && r.graph_nodes) {
    box.append(el('p', 'muted empty', r.detail_missing ? 'The graph is no longer in the worker (it was restarted); edit the program to run again.' : 'loading the graph…'));
    box.classList.add('empty');
    return;
  }
  if (!r || !r.graph || !r.graph.nodes?.length) {
    box.append(el('p', 'muted empty', r?.ok ? 'This stage builds no graph: its backward pass needs no Delta DAG.' : 'No graph.'));
    box.classList.add('empty');
    return;
  }
  box.classList.remove('empty');
  const g = r.graph;
  const shared = g.nodes.filter(n => n.shared).length;
  info.textContent = `${g.nodes.length + (g.omitted || 0)} nodes · ${g.edges.length} edges · ${shared} shared`;
  const legend = el('div', 'dag-legend');
  for (const [cls, text] of [['shared', 'shared (referenced twice or more)'], ['current', 'current step'], ['done', 'visited']]) {
    const item = el('span', 'lg');
    item.append(el('i', 'lg-' + cls));
    item.append(document.createTextNode(text));
    legend.append(item);
  }
  box.append(legend);
  if (!r.graph_svg) { box.append(el('p', 'muted', 'drawing…')); return; }
  const svg = safeSvg(r.graph_svg);
  if (!svg) { box.append(el('p', 'muted', 'The graph could not be drawn.')); return; }
  const stage = el('div', 'dag-stage');
  stage.append(svg);
  box.append(stage);
  // Fit when a stage is opened; after an edit keep the user's pan and zoom.
  applyZoom(state.fitPending !== false);
  state.fitPending = false;
  highlightStep();
}

function applyZoom(fit = false) {
  const box = $('dag');
  const stage = box.querySelector('.dag-stage');
  const svg = stage?.querySelector('svg');
  if (!svg) return;
  if (fit) {
    const w = +svg.getAttribute('width'), h = +svg.getAttribute('height');
    const bw = box.clientWidth || 400, bh = box.clientHeight || 300;
    const k = Math.min(1.4, Math.max(0.6, Math.min(bw / w, bh / h) * 0.95));
    state.zoom = { k, x: (bw - w * k) / 2, y: Math.max(4, (bh - h * k) / 2) };
  }
  const z = state.zoom;
  stage.style.transform = `translate(${z.x}px, ${z.y}px) scale(${z.k})`;
}

function zoomBy(f, cx, cy) {
  const box = $('dag');
  if (cx == null) { cx = box.clientWidth / 2; cy = box.clientHeight / 2; }
  const z = state.zoom;
  const k = Math.min(8, Math.max(0.05, z.k * f));
  state.zoom = { k, x: cx - (cx - z.x) * (k / z.k), y: cy - (cy - z.y) * (k / z.k) };
  applyZoom();
}

function setupDagInteractions() {
  const box = $('dag');
  box.addEventListener('wheel', e => {
    if (!box.querySelector('svg')) return;
    e.preventDefault();
    const r = box.getBoundingClientRect();
    zoomBy(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  box.addEventListener('pointerdown', e => {
    if (!box.querySelector('svg')) return;
    drag = { x: e.clientX, y: e.clientY, zx: state.zoom.x, zy: state.zoom.y };
    box.setPointerCapture(e.pointerId);
    box.classList.add('dragging');
  });
  box.addEventListener('pointermove', e => {
    if (drag) { state.zoom.x = drag.zx + e.clientX - drag.x; state.zoom.y = drag.zy + e.clientY - drag.y; applyZoom(); }
    const node = e.target.closest?.('.node');
    const tip = $('dag-tip');
    if (!node || drag) { tip.hidden = true; return; }
    tip.replaceChildren();
    const row = (k, v) => { if (v == null || v === '') return; const d = el('div'); d.append(el('b', null, k + ' ')); d.append(document.createTextNode(v)); tip.append(d); };
    row('constructor', node.dataset.ctor);
    row('node', node.dataset.node);
    row('label', node.dataset.label);
    row('DeltaId', node.dataset.deltaId);
    row('value', node.dataset.value);
    row('visits', node.dataset.visits);
    row('group', node.dataset.group);
    if (node.classList.contains('shared')) row('shared', 'referenced from more than one place');
    const card = box.parentElement.getBoundingClientRect();
    tip.style.left = (e.clientX - card.left + 14) + 'px';
    tip.style.top = (e.clientY - card.top + 14) + 'px';
    tip.hidden = false;
  });
  const end = () => { drag = null; box.classList.remove('dragging'); };
  box.addEventListener('pointerup', end);
  box.addEventListener('pointercancel', end);
  box.addEventListener('pointerleave', () => { $('dag-tip').hidden = true; });
  $('zoom-in').onclick = () => zoomBy(1.25);
  $('zoom-out').onclick = () => zoomBy(0.8);
  $('zoom-fit').onclick = () => applyZoom(true);
}

// --- Stepper ----------------------------------------------------------------------------------

function trace() { return stageResult(state.selected)?.trace || []; }

let lastSpanKey = 'null';
function setSpan(span) {
  const key = JSON.stringify(span);
  if (key === lastSpanKey) return;
  lastSpanKey = key;
  editor.dispatch({ effects: spanEffect.of(span) });
}

function renderStep() {
  const steps = trace();
  const r = stageResult(state.selected);
  const n = steps.length;
  if (state.step >= n) state.step = Math.max(0, n - 1);
  const pos = $('step-pos'), note = $('step-note'), table = $('step-state');
  table.replaceChildren();
  for (const b of ['step-first', 'step-back', 'step-play', 'step-next', 'step-last']) $(b).disabled = n === 0;
  $('stepper').classList.toggle('empty', n === 0);
  if (!n) {
    pos.textContent = '';
    note.textContent = r?.ok ? 'This stage records no backward-pass steps.' : '';
    setSpan(null);
    highlightStep();
    return;
  }
  const s = steps[state.step];
  pos.textContent = `step ${state.step + 1} / ${n}${r.trace_dropped ? ` (+${r.trace_dropped} not recorded)` : ''}`;
  note.replaceChildren();
  note.append(el('span', 'step-kind', s.kind));
  const node = s.node != null ? r.graph?.nodes.find(n => n.id === s.node) : null;
  if (node) note.append(el('span', 'step-node', `at ${node.label || node.ctor}`));
  if (s.factor != null) note.append(el('span', 'step-factor', '× ' + fmt(s.factor)));
  note.append(el('span', 'step-text', s.note || ''));
  if (s.span) note.append(el('span', 'muted', ` (line ${s.span.line}:${s.span.col})`));
  const caption = el('caption', null, r.graph ? 'cotangents after this step' : 'state after this step');
  table.append(caption);
  if (!s.state?.length) { const tr = el('tr'); tr.append(el('td', 'muted', '(empty)')); table.append(tr); }
  const rows = s.state || [];
  for (const [k, v] of rows.slice(0, 200)) {
    const tr = el('tr');
    tr.append(el('td', 'key', k));
    tr.append(el('td', 'num', fmt(v)));
    table.append(tr);
  }
  if (rows.length > 200) { const tr = el('tr'); tr.append(el('td', 'muted', `… ${rows.length - 200} more entries`)); table.append(tr); }
  const len = editor.state.doc.length;
  setSpan(s.span && s.span.to <= len ? { from: s.span.from, to: s.span.to } : null);
  highlightStep();
}

function highlightStep(pan = false) {
  const box = $('dag');
  for (const e of box.querySelectorAll('.node.current, .node.done')) e.classList.remove('current', 'done');
  const steps = trace();
  if (!steps.length) return;
  const done = new Set();
  for (let i = 0; i < state.step; i++) if (steps[i].node != null) done.add(steps[i].node);
  for (const id of done) box.querySelector(`#dag-n${id}`)?.classList.add('done');
  const cur = steps[state.step]?.node;
  if (cur != null) {
    const e = box.querySelector(`#dag-n${cur}`);
    if (e) {
      e.classList.remove('done');
      e.classList.add('current');
      // Keep the current node in view: pan (not zoom) when it is outside the visible area.
      const b = pan && box.getBoundingClientRect(), r = pan && e.getBoundingClientRect();
      if (pan && b.width && (r.right < b.left + 10 || r.left > b.right - 10 || r.bottom < b.top + 10 || r.top > b.bottom - 10)) {
        state.zoom.x += (b.left + b.width / 2) - (r.left + r.width / 2);
        state.zoom.y += (b.top + b.height / 2) - (r.top + r.height / 2);
        applyZoom();
      }
    }
  }
  box.dataset.currentNode = cur ?? '';
}

function goStep(i) {
  const n = trace().length;
  if (!n) return;
  state.step = Math.max(0, Math.min(n - 1, i));
  renderStep();
  highlightStep(true);
}
function stopPlay() {
  if (state.playing) { clearInterval(state.playing); state.playing = null; $('step-play').textContent = '▶ play'; }
}
function togglePlay() {
  if (state.playing) return stopPlay();
  if (state.step >= trace().length - 1) state.step = 0;
  $('step-play').textContent = '❚❚ pause';
  state.playing = setInterval(() => {
    if (state.step >= trace().length - 1) return stopPlay();
    goStep(state.step + 1);
  }, 450);
}

// --- Costs ------------------------------------------------------------------------------------

function counterNames() {
  const names = new Set(['steps', 'real_ops', 'allocs']);
  for (const s of state.result?.stages || []) for (const k of Object.keys(s.cost?.counters || {})) names.add(k);
  return [...names];
}
const counterOf = (cost, name) => name in (cost || {}) && name !== 'counters' ? cost[name] : (cost?.counters?.[name] ?? 0);

function renderCosts() {
  const box = $('costs');
  box.replaceChildren();
  const stages = (state.result?.stages || []).filter(s => s.ok);
  if (!stages.length) { box.append(el('p', 'muted', 'No stage ran.')); return; }
  const W = 520, labelW = 150, rowH = 15, gap = 10;
  const names = counterNames();
  // Per counter, the stages with a non-zero count (the others are named in one line).
  const blocks = names.map(name => ({ name, rows: stages.filter(s => counterOf(s.cost, name) > 0), zero: stages.filter(s => counterOf(s.cost, name) === 0).length }));
  const height = blocks.reduce((h, b) => h + 18 + b.rows.length * rowH + (b.zero && b.rows.length ? 14 : 0) + gap, 0);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${height}`, class: 'bars', role: 'img', 'aria-label': 'cost counters per stage' });
  let y = 0;
  for (const { name, rows, zero } of blocks) {
    svg.append(svgEl('text', { x: 0, y: y + 12, class: 'bar-counter' }, name + (rows.length ? '' : ' — 0 in every stage')));
    y += 18;
    const max = Math.max(1, ...rows.map(s => counterOf(s.cost, name)));
    for (const s of rows) {
      const v = counterOf(s.cost, name);
      const w = (W - labelW - 60) * v / max;
      const g = svgEl('g', { class: 'bar' + (s.id === state.selected ? ' selected' : '') });
      g.append(svgEl('text', { x: labelW - 6, y: y + 11, 'text-anchor': 'end', class: 'bar-label' }, s.id));
      g.append(svgEl('rect', { x: labelW, y: y + 2, width: Math.max(1, w), height: rowH - 4, rx: 2 }));
      g.append(svgEl('text', { x: labelW + w + 4, y: y + 11, class: 'bar-value' }, fmtCount(v)));
      g.append(svgEl('title', {}, `${s.id}: ${name} = ${v}`));
      g.addEventListener('click', () => select(s.id));
      svg.append(g);
      y += rowH;
    }
    if (zero && rows.length) {
      svg.append(svgEl('text', { x: labelW, y: y + 10, class: 'bar-zero' }, `0 in the other ${zero} stage${zero === 1 ? '' : 's'}`));
      y += 14;
    }
    y += gap;
  }
  box.append(svg);
}

// --- Complexity view --------------------------------------------------------------------------

function renderComplexityControls() {
  const box = $('complexity');
  const params = state.paramDefaults;
  if (!box.dataset.built || box.dataset.params !== params.map(p => p.name).join(',')) {
    box.replaceChildren();
    box.dataset.built = '1';
    box.dataset.params = params.map(p => p.name).join(',');
    if (!params.length) {
      box.append(el('p', 'muted', 'Add a size parameter to the program (for example `param n = 10`, used in main) to see how each stage\'s cost grows with it.'));
      return;
    }
    const form = el('div', 'cx-form');
    const sel = el('select'); sel.id = 'cx-param';
    for (const p of params) { const o = el('option', null, p.name); o.value = p.name; sel.append(o); }
    const from = el('input'); from.id = 'cx-from'; from.type = 'number'; from.value = '1';
    const to = el('input'); to.id = 'cx-to'; to.type = 'number'; to.value = String(Math.max(8, Math.min(64, (params[0].value || 8) * 2)));
    const ctr = el('select'); ctr.id = 'cx-counter';
    const go = el('button', null, 'Run'); go.id = 'cx-run';
    const lab = (t, e) => { const l = el('label', null, t + ' '); l.append(e); return l; };
    form.append(lab('param', sel), lab('from', from), lab('to', to), lab('counter', ctr), go);
    box.append(form);
    box.append(el('div', 'cx-note muted', 'Runs every stage at about 8 values of the parameter; a stage that runs out of the 2M-step budget leaves the plot.'));
    const plot = el('div', 'cx-plot'); plot.id = 'cx-plot';
    box.append(plot);
    go.addEventListener('click', runComplexity);
    ctr.addEventListener('change', () => { state.complexity.counter = ctr.value; drawComplexity(); });
  }
  const ctr = $('cx-counter');
  if (ctr) {
    const names = [...new Set([...counterNames(), ...state.complexity.runs.flatMap(r => Object.keys(r.costs).flatMap(id => Object.keys(r.costs[id].counters || {})))])];
    if ([...ctr.options].map(o => o.value).join(',') !== names.join(',')) {
      ctr.replaceChildren();
      for (const n of names) { const o = el('option', null, n); o.value = n; ctr.append(o); }
      ctr.value = names.includes(state.complexity.counter) ? state.complexity.counter : 'steps';
    }
  }
}

async function runComplexity() {
  const param = $('cx-param').value;
  let lo = Math.max(0, parseInt($('cx-from').value, 10) || 1), hi = Math.max(lo, parseInt($('cx-to').value, 10) || lo);
  hi = Math.min(hi, 1_000_000);
  const values = [];
  const n = 8;
  for (let i = 0; i < n; i++) {
    const v = Math.round(lo <= 0 ? lo + (hi - lo) * i / (n - 1) : lo * Math.pow(hi / lo, i / (n - 1)));
    if (!values.includes(v)) values.push(v);
  }
  state.complexity = { param, counter: $('cx-counter').value || 'steps', runs: [] };
  const plot = $('cx-plot');
  plot.replaceChildren(el('p', 'muted', 'running…'));
  const text = source();
  // Each value runs the stages still in the race, under a smaller step budget, so that an exponential
  // stage drops out (its line ends) instead of stopping the whole sweep at the 3 s limit.
  let alive = null;
  for (const v of values) {
    try {
      const res = await core.request('analyse', { source: text, options: options({
        params: { ...state.params, [param]: v }, svg: [], trace: false, detail: [], keep: false, stages: alive || [], budget: { steps: STEP_BUDGET } }) });
      if (res.diagnostics?.length) { state.complexity.runs.push({ value: v, error: res.diagnostics[0].message, costs: {} }); break; }
      const costs = {}, dropped = [];
      for (const s of res.stages) if (s.ok) costs[s.id] = s.cost; else dropped.push(s.id);
      state.complexity.runs.push({ value: v, costs, dropped });
      alive = res.stages.filter(s => s.ok).map(s => s.id);
      if (!alive.length) break;
    } catch (e) {
      state.complexity.runs.push({ value: v, error: String(e.message || e), costs: {} });
      break;   // larger values will not be faster
    }
    drawComplexity();
  }
  renderComplexityControls();
  drawComplexity();
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22',
  '#393b79', '#ad494a', '#637939', '#843c39', '#7b4173', '#3182bd', '#e6550d', '#31a354'];

function drawComplexity() {
  const plot = $('cx-plot');
  if (!plot) return;
  plot.replaceChildren();
  const { runs, counter, param } = state.complexity;
  const ok = runs.filter(r => !r.error);
  const ids = [...new Set(ok.flatMap(r => Object.keys(r.costs)))];
  if (!ok.length) { plot.append(el('p', 'muted', runs.length ? runs[0].error : 'Choose a range and press Run.')); return; }
  const pts = ids.map(id => ok.map(r => [r.value, counterOf(r.costs[id], counter)]).filter(([x, y]) => x > 0 && y > 0));
  const all = pts.flat();
  if (!all.length) { plot.append(el('p', 'muted', `No stage reports ${counter} above zero.`)); return; }
  const W = 520, H = 260, L = 52, B = 32, T = 10, R = 130;
  const lx = x => Math.log10(x), xs = all.map(p => lx(p[0])), ys = all.map(p => lx(p[1]));
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)], [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x1 - x0 < 1e-9) { x0 -= 0.5; x1 += 0.5; }
  if (y1 - y0 < 1e-9) { y0 -= 0.5; y1 += 0.5; }
  const sx = x => L + (lx(x) - x0) / (x1 - x0) * (W - L - R), sy = y => T + (1 - (lx(y) - y0) / (y1 - y0)) * (H - T - B);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, class: 'cx-svg', role: 'img', 'aria-label': `${counter} against ${param}` });
  svg.append(svgEl('rect', { x: L, y: T, width: W - L - R, height: H - T - B, class: 'cx-frame' }));
  const ticks = (a, b) => {
    // Decades, plus 2 and 5 within them when the axis spans few decades.
    const out = [], mult = b - a < 2.5 ? [1, 2, 5] : [1];
    for (let e = Math.floor(a); e <= Math.ceil(b); e++) for (const m of mult) { const v = m * 10 ** e; if (lx(v) >= a - 1e-9 && lx(v) <= b + 1e-9) out.push(v); }
    return out;
  };
  for (const v of ticks(x0, x1)) {
    svg.append(svgEl('line', { x1: sx(v), x2: sx(v), y1: T, y2: H - B, class: 'cx-grid' }));
    svg.append(svgEl('text', { x: sx(v), y: H - B + 14, 'text-anchor': 'middle', class: 'cx-tick' }, fmtCount(v)));
  }
  for (const v of ticks(y0, y1)) {
    svg.append(svgEl('line', { x1: L, x2: W - R, y1: sy(v), y2: sy(v), class: 'cx-grid' }));
    svg.append(svgEl('text', { x: L - 4, y: sy(v) + 4, 'text-anchor': 'end', class: 'cx-tick' }, fmtCount(v)));
  }
  svg.append(svgEl('text', { x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle', class: 'cx-axis' }, `param ${param} (log)`));
  svg.append(svgEl('text', { x: 12, y: (T + H - B) / 2, transform: `rotate(-90 12 ${(T + H - B) / 2})`, 'text-anchor': 'middle', class: 'cx-axis' }, `${counter} (log)`));
  ids.forEach((id, i) => {
    const p = pts[i];
    if (!p.length) return;
    const color = PALETTE[i % PALETTE.length];
    svg.append(svgEl('polyline', { points: p.map(([x, y]) => `${sx(x)},${sy(y)}`).join(' '), fill: 'none', stroke: color, 'stroke-width': id === state.selected ? 3 : 1.6 }));
    for (const [x, y] of p) {
      const c = svgEl('circle', { cx: sx(x), cy: sy(y), r: 2.8, fill: color });
      c.append(svgEl('title', {}, `${id}: ${param} = ${x}, ${counter} = ${y}`));
      svg.append(c);
    }
    svg.append(svgEl('text', { x: W - R + 8, y: T + 12 + i * 14, style: `fill: ${color}`, class: 'cx-legend' }, id));
  });
  plot.append(svg);
  const failed = runs.find(r => r.error);
  if (failed) plot.append(el('p', 'muted', `Stopped at ${param} = ${failed.value}: ${failed.error}`));
  for (const r of runs) if (r.dropped?.length) plot.append(el('p', 'muted', `At ${param} = ${r.value}, ${r.dropped.join(', ')} ran out of the 2M-step budget (or did not run) and left the plot.`));
}

// ---------------------------------------------------------------------------------------------
// Examples, sharing, persistence, keys.

function renderExamples() {
  const sel = $('examples');
  sel.replaceChildren();
  const none = el('option', null, '— choose —'); none.value = ''; sel.append(none);
  // Grouped by the file-name prefix when it names a paper's chain (krawiec-*.cot, dualrev-*.cot, ...).
  const known = new Set([...Object.keys(PAPERS), ...state.stages.map(s => groupOf(s.id))]);
  const groups = new Map([['general', []]]);
  for (const st of state.stages) if (groupOf(st.id) !== 'forward' && !groups.has(groupOf(st.id))) groups.set(groupOf(st.id), []);
  for (const [i, e] of state.examples.entries()) {
    const g = known.has(e.paper) && e.paper !== 'forward' ? e.paper : 'general';
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push([i, e]);
  }
  if (!groups.get('general').length) groups.delete('general');
  for (const [paper, list] of groups) {
    const og = document.createElement('optgroup');
    if (!list.length) continue;
    const first = state.stages.find(s => groupOf(s.id) === paper);
    og.label = first?.paper ? `${first.paper} (${paper}/*)` : (PAPERS[paper] || paper);
    for (const [i, e] of list) { const o = el('option', null, e.title || e.name); o.value = String(i); o.title = e.name; og.append(o); }
    sel.append(og);
  }
  sel.addEventListener('change', () => {
    const e = state.examples[+sel.value];
    if (!e) return;
    $('in-at').value = ''; $('in-seed').value = ''; state.params = {};
    setSource(e.source);
    sel.value = String(state.examples.indexOf(e));
  });
}

async function copyLink() {
  const view = { src: source(), stage: state.selected, step: state.step };
  const at = $('in-at').value.trim(), seed = $('in-seed').value.trim();
  if (at) view.at = at;
  if (seed) view.seed = seed;
  if (Object.keys(state.params).length) view.params = { ...state.params };
  const hash = await encodeView(view);
  const url = location.href.replace(/#.*$/, '') + hash;
  ignoreHash = hash;
  window.history.replaceState(null, '', hash);
  const out = $('link-out');
  out.value = url;
  try {
    await navigator.clipboard.writeText(url);
    setStatus('link copied to the clipboard', 'ok');
    out.hidden = true;
  } catch {
    out.hidden = false;
    out.select();
    setStatus('copy the link from the box', 'ok');
  }
  window.__cot.lastLink = url;
}

let ignoreHash = null;
async function applyView(view) {
  $('in-at').value = view.at || '';
  $('in-seed').value = view.seed || '';
  state.params = { ...(view.params || {}) };
  state.selected = view.stage || state.selected;
  state.pendingStep = view.step ?? 0;
  state.paramDefaults = [];
  if (view.src === source()) run(); else setSource(view.src);
}

function defaultExample() {
  return state.examples.find(e => e.name === 'running-example') || state.examples.find(e => /running/.test(e.name)) || state.examples[0] || FALLBACK_EXAMPLE;
}

async function loadFromHash(initial) {
  const { view, error } = await decodeHash(location.hash);
  if (error) {
    showBanner('This link could not be opened: ' + error + '. Showing the default example instead.');
    const ex = defaultExample();
    if (initial) return { src: ex.source };
    await applyView({ src: ex.source });
    return null;
  }
  if (view) {
    if (initial) return view;
    await applyView(view);
  }
  return null;
}

function setupKeys() {
  document.addEventListener('keydown', e => {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t.closest?.('.cm-editor') || /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName)) return;
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown' && t.closest?.('.stage-list')) { e.preventDefault(); moveStage(1); }
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp' && t.closest?.('.stage-list')) { e.preventDefault(); moveStage(-1); }
    else if (e.key === '.') goStep(state.step + 1);
    else if (e.key === ',') goStep(state.step - 1);
  });
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
  state.stages = hello.stages;
  state.examples = hello.examples;
  $('version').textContent = `Cotangent ${hello.version} · ${hello.stages.length} stages`;
  renderExamples();

  let start = await loadFromHash(true);
  let saved = null;
  try { saved = JSON.parse(localStorage.getItem(STORE_KEY) || 'null'); } catch { saved = null; }
  if (!start && saved && typeof saved.src === 'string') start = saved;
  if (!start) start = { src: defaultExample().source };
  $('in-at').value = typeof start.at === 'string' ? start.at : '';
  $('in-seed').value = typeof start.seed === 'string' ? start.seed : '';
  if (start.params && typeof start.params === 'object') for (const [k, v] of Object.entries(start.params)) if (Number.isSafeInteger(v)) state.params[k] = v;
  if (typeof start.stage === 'string') state.selected = start.stage;
  state.pendingStep = Number.isInteger(start.step) ? start.step : 0;
  makeEditor(start.src);

  setupDagInteractions();
  setupKeys();
  $('copy-link').addEventListener('click', copyLink);
  $('help-btn').addEventListener('click', () => {
    const h = $('help');
    h.hidden = !h.hidden;
    $('help-btn').setAttribute('aria-expanded', String(!h.hidden));
    try { localStorage.setItem(STORE_KEY + '.helpSeen', '1'); } catch { /* ignore */ }
  });
  // The help shows on the first visit only (the ? button brings it back).
  try { if (!localStorage.getItem(STORE_KEY + '.helpSeen')) { $('help').hidden = false; localStorage.setItem(STORE_KEY + '.helpSeen', '1'); } } catch { /* ignore */ }
  $('banner-close').addEventListener('click', () => { $('banner').hidden = true; });
  $('diff-toggle').addEventListener('change', e => { state.diff = e.target.checked; renderProgram(stageResult(state.selected)); });
  $('step-first').onclick = () => { stopPlay(); goStep(0); };
  $('step-back').onclick = () => { stopPlay(); goStep(state.step - 1); };
  $('step-next').onclick = () => { stopPlay(); goStep(state.step + 1); };
  $('step-last').onclick = () => { stopPlay(); goStep(trace().length - 1); };
  $('step-play').onclick = togglePlay;
  for (const id of ['in-at', 'in-seed']) $(id).addEventListener('input', () => { persist(); run(); });
  window.addEventListener('hashchange', () => {
    if (location.hash === ignoreHash) return;
    loadFromHash(false);
  });
  window.addEventListener('resize', () => applyZoom(true));

  renderStageList();
  await run();
  if (!stageOrder().includes(state.selected)) select('forward');
  Object.assign(window.__cot, { renderAll, select, goStep, source, setSource, core });
  window.__cot.ready = true;
  document.body.dataset.ready = '1';
}

main();
