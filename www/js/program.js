// The selected stage's transformed program, optionally as a side-by-side line diff against any other
// stage (by default the stage before it: the previous stage of the same chain, else the reference),
// optionally showing the changed lines only.
import { $, el } from './dom.js';
import { REFERENCE, marksShares, stageOrder, stageResult, chainOf } from './state.js';
import { diffLines } from './diff.js';
import { highlightLine } from './lang.js';
import * as editor from './editor.js';

let programKey = null;   // what the view shows, so an unchanged program keeps its DOM
let lineSources = [];    // per line of the plain program view: the source ranges it came from
let litLines = [];       // the lines marked as coming from the source under the mouse
let loadProgram = () => {};   // asks the worker for a stage's program the run left out (`program_omitted`)
let loadView = () => {};      // asks the worker for a view's text it left to be printed when shown (`deferred`)

/** Whether stage result `r` has a program: printed, or left out of the run (not shown) and loaded on demand. */
const hasProgram = r => !!(r?.program || r?.program_omitted);

/** The lines whose source ranges hold `pos` most tightly (the smallest such range, over all lines). */
function linesAt(pos) {
  let best = Infinity;
  const size = lineSources.map(rs => Math.min(...rs.filter(([f, t]) => f <= pos && pos < t).map(([f, t]) => t - f)));
  for (const n of size) best = Math.min(best, n);
  return best === Infinity ? [] : size.flatMap((n, i) => (n === best ? [i] : []));
}

/** `load(id)`: asks for stage `id`'s program (the page then renders again). */
export function init(state, load, view) {
  loadProgram = load;
  loadView = view;
  $('diff-toggle').addEventListener('change', e => { state.diff = e.target.checked; render(state); });
  $('diff-base').addEventListener('change', e => { state.diffBase = e.target.value; state.diff = true; $('diff-toggle').checked = true; render(state); });
  $('diff-changed').addEventListener('change', e => { state.diffChanged = e.target.checked; render(state); });
  // Hovering or focusing one occurrence of a share lights every occurrence of the same ID.
  const pre = $('stage-program');
  const light = (e, on) => {
    const ref = e.target.closest?.('.share-ref');
    if (!ref) return;
    for (const x of pre.querySelectorAll('.share-' + ref.dataset.share)) x.classList.toggle('lit', on);
  };
  pre.addEventListener('mouseover', e => light(e, true));
  pre.addEventListener('mouseout', e => light(e, false));
  pre.addEventListener('focusin', e => light(e, true));
  pre.addEventListener('focusout', e => light(e, false));
  // Hovering a line of the program marks the source it came from in the editor; hovering the source
  // marks the program lines that came from it.
  pre.addEventListener('mouseover', e => {
    const line = e.target.closest?.('.line[data-i]');
    editor.setHover(line ? lineSources[+line.dataset.i] : []);
  });
  pre.addEventListener('mouseleave', () => editor.setHover([]));
  editor.onPoint(pos => {
    const now = pos == null ? [] : linesAt(pos);
    if (now.join() === litLines.join()) return;
    for (const x of pre.querySelectorAll('.line.from-source')) x.classList.remove('from-source');
    for (const i of now) pre.querySelector(`.line[data-i="${i}"]`)?.classList.add('from-source');
    litLines = now;
  });
}

/** `share i`, `shared i` (a reference to it) and `shared<i>` (the variable shareToLet binds for it); the
 *  printer may break a line between `share` and its ID. */
const SHARE = /\b(shared?)(\s+)(\d+)\b|\bshared(\d+)\b/g;
/** Tints for the IDs, in turn (style.css `.share-tint-k`). */
const SHARE_TINTS = 6;

/** Where a program names a share: `[from, to, id, focusable]`, none across a line (a `share` whose ID is
 *  on the next line is two marks, the first focusable). */
function shareMarks(program) {
  const out = [];
  for (const m of program.matchAll(SHARE)) {
    if (m[4] != null) out.push([m.index, m.index + m[0].length, m[4], true]);
    else if (!m[2].includes('\n')) out.push([m.index, m.index + m[0].length, m[3], true]);
    else out.push([m.index, m.index + m[1].length, m[3], true], [m.index + m[0].length - m[3].length, m.index + m[0].length, m[3], false]);
  }
  return out;
}

/** Line `text` (at `start` in the program) with its share marks, from `marks[pos.i]` on: class
 *  `share-<i>` per ID. */
function shareLine(line, text, start, marks, pos) {
  let at = 0;
  for (; pos.i < marks.length && marks[pos.i][1] <= start + text.length; pos.i++) {
    const [from, to, id, focusable] = marks[pos.i];
    if (from - start > at) highlightLine(line, text.slice(at, from - start));
    const span = el('span', `share-ref share-${id} share-tint-${id % SHARE_TINTS}`, text.slice(from - start, to - start));
    span.dataset.share = id;
    if (focusable) {
      span.tabIndex = 0;
      span.title = `share ${id}: every occurrence is marked while this one is hovered or focused`;
    }
    line.append(span);
    at = to - start;
  }
  if (at < text.length) highlightLine(line, text.slice(at));
}

/** The base stage menu: every other stage with a program; the user's pick, else the stage before. */
function renderBase(state, prev) {
  const sel = $('diff-base');
  const ids = stageOrder().filter(x => x !== state.selected && hasProgram(stageResult(x)));
  if ([...sel.options].map(o => o.value).join(',') !== ids.join(',')) {
    sel.replaceChildren(...ids.map(id => { const o = el('option', null, id); o.value = id; return o; }));
  }
  const base = ids.includes(state.diffBase) ? state.diffBase : prev;
  sel.value = base || '';
  sel.disabled = !ids.length;
  return base;
}

/** Rows of a side-by-side diff: [left text | null, right text | null, changed]; a run of removed and
 *  added lines is paired up line by line. */
function sideBySide(a, b) {
  const ops = diffLines(a, b), rows = [];
  for (let i = 0; i < ops.length;) {
    if (ops[i].op === ' ') { rows.push([ops[i].text, ops[i].text, false]); i++; continue; }
    const del = [], add = [];
    for (; i < ops.length && ops[i].op !== ' '; i++) (ops[i].op === '-' ? del : add).push(ops[i].text);
    for (let k = 0; k < Math.max(del.length, add.length); k++) rows.push([del[k] ?? null, add[k] ?? null, true]);
  }
  return rows;
}

function drawDiff(pre, baseId, id, a, b, changedOnly) {
  const table = el('table', 'sbs');
  table.setAttribute('data-testid', 'diff-table');
  const head = el('tr');
  head.append(el('th', null, ''), el('th', null, baseId), el('th', null, ''), el('th', null, id));
  table.append(head);
  let la = 0, lb = 0, skipped = 0;
  const flush = () => {
    if (!skipped) return;
    const tr = el('tr', 'skip');
    const td = el('td', 'muted', `⋯ ${skipped} unchanged line${skipped === 1 ? '' : 's'}`);
    td.colSpan = 4;
    tr.append(td);
    table.append(tr);
    skipped = 0;
  };
  const cell = (text, cls) => {
    const td = el('td', 'code');
    if (text == null) return td;
    const line = el('div', 'line ' + cls);
    highlightLine(line, text);
    td.append(line);
    return td;
  };
  for (const [x, y, changed] of sideBySide(a, b)) {
    if (x != null) la++;
    if (y != null) lb++;
    if (!changed && changedOnly) { skipped++; continue; }
    flush();
    const tr = el('tr', changed ? 'changed' : 'same');
    tr.append(el('td', 'num-col', x != null ? la : ''), cell(x, changed ? 'del' : 'same'), el('td', 'num-col', y != null ? lb : ''), cell(y, changed ? 'add' : 'same'));
    table.append(tr);
  }
  flush();
  pre.append(table);
}

/** The stage `id` is compared with in the diff, or null. */
function previousStage(id) {
  const ids = stageOrder().filter(x => hasProgram(stageResult(x)));
  const i = ids.indexOf(id);
  if (i <= 0) return null;
  const chain = chainOf(id);
  const same = chain ? ids.slice(0, i).filter(x => chain.stages.includes(x)) : [];
  return same.length ? same[same.length - 1] : ids.includes(REFERENCE) && id !== REFERENCE ? REFERENCE : ids[i - 1];
}

const MAX_STACK_ROWS = 300;

/** A stack diagram (UNF, Huot & Shaikhha §4): one row per primitive, the context's slots as columns; the
 *  slots a primitive reads, forgets and pushes are marked. Text goes in with textContent only. */
function drawStack(pre, rows) {
  const width = Math.max(...rows.map(r => Math.max(r.input.length, r.output.length)));
  const table = el('table', 'stack-diagram');
  table.setAttribute('data-testid', 'stack-diagram');
  const head = el('tr');
  head.append(el('th', null, '#'), el('th', null, 'primitive'));
  for (let i = 0; i < width; i++) head.append(el('th', 'slot-col', String(i + 1)));
  table.append(head);
  rows.slice(0, MAX_STACK_ROWS).forEach((r, k) => {
    const tr = el('tr');
    tr.append(el('td', 'muted', String(k + 1)), el('td', 'prim', r.primitive));
    for (let i = 0; i < width; i++) {
      const forgets = r.forgets.includes(i), reads = r.reads.includes(i), pushes = r.pushes === i;
      const text = i < r.output.length ? r.output[i] : forgets && i < r.input.length ? r.input[i] : '';
      const cls = ['slot', reads && 'read', forgets && 'forget', pushes && 'push'].filter(Boolean).join(' ');
      const td = el('td', cls, text);
      if (reads || forgets || pushes) td.title = [reads && 'read', forgets && 'forgotten', pushes && 'pushed'].filter(Boolean).join(', ');
      tr.append(td);
    }
    table.append(tr);
  });
  pre.append(table);
  if (rows.length > MAX_STACK_ROWS) pre.append(el('div', 'muted', `… ${rows.length - MAX_STACK_ROWS} more primitives (the text view has them all)`));
  pre.append(el('div', 'stack-legend muted', 'read · pushed · forgotten (struck through) — each row is the context after the primitive'));
}

/** The view tabs: the program, then the stage's other renderings (a stack diagram, a rewrite trace). */
function renderTabs(state, r) {
  const tabs = $('view-tabs');
  const names = (r?.views || []).map(v => v.name);
  if (!names.includes(state.view)) state.view = 'program';
  tabs.replaceChildren();
  if (!names.length) return;
  for (const name of ['program', ...names]) {
    const b = el('button', '', name);
    b.type = 'button';
    b.setAttribute('role', 'tab');
    b.setAttribute('aria-selected', String(name === state.view));
    b.addEventListener('click', () => { state.view = name; render(state); });
    tabs.append(b);
  }
}

export function render(state) {
  const r = stageResult(state.selected);
  const pre = $('stage-program');
  const prev = previousStage(state.selected);
  renderTabs(state, r);
  const view = (r?.views || []).find(v => v.name === state.view);
  const base = renderBase(state, prev);
  const key = JSON.stringify([state.selected, r?.program, r?.error, r?.detail_missing, state.diff && base ? [base, stageResult(base).program, !!state.diffChanged] : null, view?.text, view?.deferred]);
  if (key === programKey) return;   // unchanged (e.g. an edit inside a comment): keep the DOM
  programKey = key;
  pre.replaceChildren();
  lineSources = [];
  litLines = [];
  editor.setHover([]);
  $('diff-toggle').disabled = !!view;
  $('diff-changed').disabled = !!view || !state.diff;
  if (view?.stack?.length) { drawStack(pre, view.stack); return; }
  if (view?.deferred) {
    // a rewrite trace prints every kept step: printed in the worker when the tab is opened
    pre.append(el('span', 'muted', r.detail_missing ? 'The view is no longer in the worker; edit the program to run again.' : `printing the ${view.name}…`));
    loadView(state.selected, view);
    return;
  }
  if (view) {
    view.text.split('\n').forEach((text, i) => {
      const line = el('div', 'line');
      line.append(el('span', 'gutter', i + 1));
      line.append(document.createTextNode(text));
      pre.append(line);
    });
    return;
  }
  $('diff-toggle').disabled = !base;
  if (r?.program_omitted && !r.program) { pre.append(el('span', 'muted', r.detail_missing ? 'The program is no longer in the worker (it was restarted); edit the program to run again.' : 'loading the program…')); return; }
  if (!r || !r.program) { pre.append(el('span', 'muted', r?.error ? 'No program: ' + r.error : 'No program.')); return; }
  if (state.diff && base && !stageResult(base).program) {
    pre.append(el('span', 'muted', `loading the program of ${base}…`));
    loadProgram(base);
    return;
  }
  if (state.diff && base) {
    drawDiff(pre, base, state.selected, stageResult(base).program, r.program, !!state.diffChanged);
  } else {
    const marks = marksShares(state.selected) ? shareMarks(r.program) : [];
    let start = 0;
    const pos = { i: 0 };
    lineSources = r.program_lines || [];
    r.program.split('\n').forEach((text, i) => {
      const line = el('div', 'line');
      if (lineSources[i]?.length) {
        line.dataset.i = i;
        line.classList.add('has-source');
      }
      line.append(el('span', 'gutter', i + 1));
      if (marks.length) shareLine(line, text, start, marks, pos);
      else highlightLine(line, text);
      start += text.length + 1;
      pre.append(line);
    });
  }
}
