// The backward-pass stepper: the selected stage's trace one step at a time, with the state (the
// cotangents) after each step, the step's span marked in the editor and its node lit in the DAG.
import { $, el, fmt, compactValue } from './dom.js';
import { stageResult, trace } from './state.js';
import { setSpan, docLength } from './editor.js';
import { highlightStep } from './dag.js';

/** The step buttons; once, at start. */
export function init(state) {
  $('step-first').onclick = () => { stopPlay(state); goStep(state, 0); };
  $('step-back').onclick = () => { stopPlay(state); goStep(state, state.step - 1); };
  $('step-next').onclick = () => { stopPlay(state); goStep(state, state.step + 1); };
  $('step-last').onclick = () => { stopPlay(state); goStep(state, trace().length - 1); };
  $('step-play').onclick = () => togglePlay(state);
}

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
    note.textContent = r?.ok ? 'This stage records no backward-pass steps.' : '';
    setSpan(null);
    highlightStep(state);
    return;
  }
  const s = steps[state.step];
  pos.textContent = `step ${state.step + 1} / ${n}${r.trace_dropped ? ` (+${r.trace_dropped} not recorded)` : ''}`;
  note.replaceChildren();
  note.append(el('span', 'step-kind', s.kind));
  const node = s.node != null ? r.graph?.nodes.find(n => n.id === s.node) : null;
  if (node) note.append(el('span', 'step-node', `at ${node.label || node.ctor}`));
  if (s.factor != null) note.append(el('span', 'step-factor', '× ' + (typeof s.factor === 'string' ? compactValue(s.factor) : fmt(s.factor))));
  note.append(el('span', 'step-text', s.note || ''));
  if (s.span) note.append(el('span', 'muted', ` (line ${s.span.line}:${s.span.col})`));
  const caption = el('caption', null, r.graph ? 'cotangents after this step' : 'state after this step');
  table.append(caption);
  if (!s.state?.length) { const tr = el('tr'); tr.append(el('td', 'muted', '(empty)')); table.append(tr); }
  const rows = compactRows(s.state || []);
  for (const [k, text, full] of rows.slice(0, 200)) {
    const tr = el('tr');
    tr.append(el('td', 'key', k));
    const td = el('td', 'num', text);
    if (full && full !== text) td.title = full.length > 4000 ? full.slice(0, 4000) + ' …' : full;
    tr.append(td);
    table.append(tr);
  }
  if (rows.length > 200) { const tr = el('tr'); tr.append(el('td', 'muted', `… ${rows.length - 200} more entries`)); table.append(tr); }
  setSpan(s.span && s.span.to <= docLength() ? { from: s.span.from, to: s.span.to } : null);
  highlightStep(state);
}

/** Entries of one array (`c[0]`, `c[1]`, …) longer than this many share one row. */
const ARRAY_ROW = 8;

/** A step's state as table rows `[key, text, full text]`: a run of more than ARRAY_ROW entries of one
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
      for (; i < j; i++) out.push([state[i][0], show(state[i][1]), typeof state[i][1] === 'string' ? state[i][1] : null]);
      continue;
    }
    const run = state.slice(i, j).map(([k, v]) => [+k.slice(m[1].length + 1, -1), v]);
    const dense = run.every(([ix], t) => ix === run[0][0] + t);
    const head = run.slice(0, 6).map(([ix, v]) => dense ? show(v) : `${ix}: ${show(v)}`);
    if (run.length > 6) head.push(`… (${run.length - 6} more)`);
    const key = dense ? `${m[1]}[${run[0][0]}..${run[run.length - 1][0]}]` : `${m[1]}[…] (${run.length})`;
    const text = dense ? `[${head.join(', ')}]` : `{${head.join(', ')}}`;
    out.push([key, text, run.map(([ix, v]) => `${ix}: ${fmt(v)}`).join(', ')]);
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
  if (state.playing) { clearInterval(state.playing); state.playing = null; $('step-play').textContent = '▶ play'; }
}

function togglePlay(state) {
  if (state.playing) return stopPlay(state);
  if (state.step >= trace().length - 1) state.step = 0;
  $('step-play').textContent = '❚❚ pause';
  state.playing = setInterval(() => {
    if (state.step >= trace().length - 1) return stopPlay(state);
    goStep(state, state.step + 1);
  }, 450);
}
