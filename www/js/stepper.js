// The backward-pass stepper: the selected stage's trace one step at a time, with the state (the
// cotangents) after each step, the step's span marked in the editor and its node lit in the DAG.
import { $, el, fmt, compactValue } from './dom.js';
import { REFERENCE, stageResult, trace } from './state.js';
import { setSpan, docLength } from './editor.js';
import { highlightStep } from './dag.js';

let loadTexts = () => {};   // asks the worker for a step's texts it left to be printed when shown (`deferred`)

/** The step buttons; once, at start. `texts(id, i, step)`: loads step i's deferred texts. */
export function init(state, texts) {
  loadTexts = texts;
  $('step-first').onclick = () => { stopPlay(state); goStep(state, 0); };
  $('step-back').onclick = () => { stopPlay(state); goStep(state, state.step - 1); };
  $('step-next').onclick = () => { stopPlay(state); goStep(state, state.step + 1); };
  $('step-last').onclick = () => { stopPlay(state); goStep(state, trace().length - 1); };
  $('step-play').onclick = () => togglePlay(state);
  $('step-speed').addEventListener('change', () => { if (state.playing) { stopPlay(state); togglePlay(state); } });
  $('step-list').addEventListener('click', e => {
    const li = e.target.closest?.('li[data-step]');
    if (li) { stopPlay(state); goStep(state, +li.dataset.step); }
  });
}

/** Why a stage shows no steps (the stepper says so rather than showing nothing). */
function noStepsReason(r) {
  if (!r) return 'This stage has not run yet.';
  if (!r.ok) return 'No steps: this stage did not run (the reason is above).';
  if ((r.trace_len || r.traced === false) && !r.detail) return r.detail_missing ? 'The steps are no longer in the worker; edit the program to run again.' : 'loading the steps…';
  if (r.id === REFERENCE) return 'Forward mode has no backward pass: it pushes one tangent per input forward, so there is nothing to step through.';
  return 'This stage records no backward-pass steps: its gradient comes from running the program it prints, which is not traced step by step. Read its transformed program instead; the cost counters below count its work.';
}

/** The keys whose value step `i` changed (every key of the first step is new). */
function changedAt(steps, i) {
  const same = v => (v !== null && typeof v === 'object' ? JSON.stringify(v) : v);
  const before = new Map((i > 0 ? steps[i - 1].state || [] : []).map(([k, v]) => [k, same(v)]));
  const out = new Set();
  for (const [k, v] of steps[i].state || []) if (before.get(k) !== same(v)) out.add(k);
  return out;
}

let listKey = null;   // the trace the step list shows
let listJob = null;   // the idle callback that will build it
const MAX_LISTED = 1000;
const idle = window.requestIdleCallback || (f => setTimeout(f, 1));
const cancelIdle = window.cancelIdleCallback || clearTimeout;

/** The list of every step (clickable), each with the cotangents it changed; the current one marked. */
function renderList(state, r, steps) {
  const list = $('step-list');
  const key = JSON.stringify([state.result?.run_id, r?.id, steps.length]);
  if (key !== listKey) {
    // Built when the page is idle (comparing every step's state costs time on a long trace), so that a
    // keystroke's update of the selected stage does not wait for it.
    listKey = key;
    if (listJob) cancelIdle(listJob);
    list.dataset.ready = '';
    listJob = idle(() => { listJob = null; buildList(list, r, steps); markCurrent(state); }, { timeout: 300 });
    return;   // (the list shown is the last trace's until then: it is marked when built)
  }
  markCurrent(state);
}

function buildList(list, r, steps) {
  const nodes = new Map((r?.graph?.nodes || []).map(n => [n.id, n]));
  const items = [];
  for (let i = 0; i < Math.min(steps.length, MAX_LISTED); i++) {
    const s = steps[i];
    const node = s.node != null ? nodes.get(s.node) : null;
    const li = el('li');
    li.dataset.step = String(i);
    li.append(document.createTextNode(`${i + 1}. ${s.kind}${node ? ' at ' + (node.label || node.ctor) : ''}`));
    const ch = [...changedAt(steps, i)];
    if (ch.length) li.append(el('span', 'chg', ` ● ${ch.slice(0, 4).join(', ')}${ch.length > 4 ? ` +${ch.length - 4}` : ''}`));
    li.title = li.textContent + (s.note ? ' — ' + s.note : '');
    items.push(li);
  }
  if (steps.length > MAX_LISTED) items.push(el('li', 'muted', `… ${steps.length - MAX_LISTED} more steps (use next and last)`));
  list.replaceChildren(...items);
  list.dataset.ready = '1';
}

function markCurrent(state) {
  const list = $('step-list');
  const prev = list.querySelector('li[aria-current]');
  prev?.removeAttribute('aria-current');
  const cur = list.querySelector(`li[data-step="${state.step}"]`);
  if (cur) {
    cur.setAttribute('aria-current', 'step');
    // scroll the list only (never the page) to keep the current step in sight; in the next frame,
    // when the page is laid out anyway (reading offsets now forced a layout in the middle of an update)
    if (scrollJob) cancelAnimationFrame(scrollJob);
    scrollJob = requestAnimationFrame(() => {
      scrollJob = null;
      if (!cur.isConnected) return;
      if (cur.offsetTop < list.scrollTop || cur.offsetTop + cur.offsetHeight > list.scrollTop + list.clientHeight)
        list.scrollTop = cur.offsetTop - list.clientHeight / 2;
    });
  }
}
let scrollJob = null;

export function render(state) {
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
    note.textContent = noStepsReason(r);
    renderList(state, r, steps);
    setSpan(null);
    highlightStep(state);
    return;
  }
  const s = steps[state.step];
  // a rewrite step's terms are printed in the worker when the step is shown
  if (s.deferred?.length) loadTexts(state.selected, state.step, s);
  pos.textContent = `step ${state.step + 1} / ${n}${r.trace_dropped ? ` (+${r.trace_dropped} not recorded)` : ''}`;
  note.replaceChildren();
  note.append(el('span', 'step-kind', s.kind));
  const node = s.node != null ? r.graph?.nodes.find(n => n.id === s.node) : null;
  if (node) note.append(el('span', 'step-node', `at ${node.label || node.ctor}`));
  if (s.factor != null) note.append(el('span', 'step-factor', '× ' + (typeof s.factor === 'string' ? compactValue(s.factor) : fmt(s.factor))));
  note.append(el('span', 'step-text', s.note || (s.deferred?.length ? '…' : '')));
  if (s.span) note.append(el('span', 'muted', ` (line ${s.span.line}:${s.span.col})`));
  const caption = el('caption', null, r.graph ? 'cotangents after this step' : 'state after this step');
  table.append(caption);
  if (!s.state?.length) { const tr = el('tr'); tr.append(el('td', 'muted', '(empty)')); table.append(tr); }
  const rows = compactRows(s.state || []).concat((s.deferred || []).map(k => [k, '…', 'printing…', [k], true]));
  const changed = changedAt(steps, state.step);
  for (const [k, text, full, keys, pending] of rows.slice(0, 200)) {
    const tr = el('tr');
    if (keys.some(x => changed.has(x))) { tr.classList.add('changed'); tr.title = 'changed at this step'; }
    tr.append(keyCell(k));
    const td = el('td', pending ? 'num pending' : 'num', text);
    if (full && full !== text) td.title = full.length > 4000 ? full.slice(0, 4000) + ' …' : full;
    tr.append(td);
    table.append(tr);
  }
  if (rows.length > 200) { const tr = el('tr'); tr.append(el('td', 'muted', `… ${rows.length - 200} more entries`)); table.append(tr); }
  setSpan(s.span && s.span.to <= docLength() ? { from: s.span.from, to: s.span.to } : null);
  renderList(state, r, steps);
  highlightStep(state);
}

/** A state row's key. A key `p ▸ fst ▸ snd` is a part of a cotangent drawn as a tree (the CHAD
 *  stages' sparse cotangents, crate/src/stages/chad/common/ct_tree.rs): indented by its depth and
 *  named by its last part, its whole path in the title. */
function keyCell(k) {
  const path = k.split(' ▸ ');
  if (path.length === 1) return el('td', 'key', k);
  const td = el('td', 'key tree-part', '▸ ' + path[path.length - 1]);
  td.style.paddingLeft = `${path.length - 1}em`;
  td.title = k;
  td.dataset.depth = String(path.length - 1);
  return td;
}

/** Entries of one array (`c[0]`, `c[1]`, …) longer than this many share one row. */
const ARRAY_ROW = 8;

/** A step's state as table rows `[key, text, full text, the state's keys in the row]`: a run of more than ARRAY_ROW entries of one
 *  array (the cotangent array of a dualrev stage, 5n+1 entries for a dot product of length n) becomes one
 *  row, `c[0..250]` with `[v0, v1, … (n more)]` (or `m[…]` with `{30: v, 39: v, …}` where the indices
 *  skip), and an array cotangent written as text is shortened the same way. */
export function compactRows(state) {
  const out = [];
  const show = v => typeof v === 'string' ? compactValue(v) : fmt(v);
  for (let i = 0; i < state.length;) {
    const m = /^(.*)\[(\d+)\]$/.exec(state[i][0]);
    let j = i + 1;
    if (m) while (j < state.length && state[j][0].startsWith(m[1] + '[') && /^\d+\]$/.test(state[j][0].slice(m[1].length + 1))) j++;
    if (!m || j - i <= ARRAY_ROW) {
      for (; i < j; i++) out.push([state[i][0], show(state[i][1]), typeof state[i][1] === 'string' ? state[i][1] : null, [state[i][0]]]);
      continue;
    }
    const run = state.slice(i, j).map(([k, v]) => [+k.slice(m[1].length + 1, -1), v]);
    const dense = run.every(([ix], t) => ix === run[0][0] + t);
    const head = run.slice(0, 6).map(([ix, v]) => dense ? show(v) : `${ix}: ${show(v)}`);
    if (run.length > 6) head.push(`… (${run.length - 6} more)`);
    const key = dense ? `${m[1]}[${run[0][0]}..${run[run.length - 1][0]}]` : `${m[1]}[…] (${run.length})`;
    const text = dense ? `[${head.join(', ')}]` : `{${head.join(', ')}}`;
    out.push([key, text, run.map(([ix, v]) => `${ix}: ${fmt(v)}`).join(', '), state.slice(i, j).map(([k]) => k)]);
    i = j;
  }
  return out;
}

export function goStep(state, i) {
  const n = trace().length;
  if (!n) return;
  state.step = Math.max(0, Math.min(n - 1, i));
  render(state);
  highlightStep(state, true);
}

export function stopPlay(state) {
  if (state.playing) { clearInterval(state.playing); state.playing = null; $('step-play').textContent = '▶ play'; $('step-play').setAttribute('aria-label', 'Play'); }
}

function togglePlay(state) {
  if (state.playing) return stopPlay(state);
  if (state.step >= trace().length - 1) state.step = 0;
  $('step-play').textContent = '❚❚ pause';
  $('step-play').setAttribute('aria-label', 'Pause');
  state.playing = setInterval(() => {
    if (state.step >= trace().length - 1) return stopPlay(state);
    goStep(state, state.step + 1);
  }, +$('step-speed').value || 450);
}
