// Every stage's cost counters as bars, one block per counter (each scaled to its largest value).
import { $, el, svgEl, fmtCount, pageWords } from './dom.js';

/** The counters the last run reports: the three every stage has, then each stage's own. */
export function counterNames(state) {
  const names = new Set(['steps', 'real_ops', 'allocs']);
  for (const s of state.result?.stages || []) for (const k of Object.keys(s.cost?.counters || {})) names.add(k);
  return [...names];
}
/** What a counter counts, from the chains' declarations (the core's own three are described here). */
const CORE = {
  steps: 'interpreter steps, plus the work units builtins report',
  real_ops: 'arithmetic operations on reals',
  allocs: 'values allocated (tuples, closures, sums, runtime data)',
};
export function counterAbout(state, name) {
  if (CORE[name]) return CORE[name];
  for (const c of state.chains || []) for (const k of c.counters || []) if (k.name === name && k.about) return k.about;
  // a counter no chain describes: say at least whose it is
  const by = (state.result?.stages || []).filter(s => s.cost?.counters?.[name] != null).map(s => s.id);
  return by.length ? `a counter the runtime of ${by.slice(0, 3).join(', ')}${by.length > 3 ? ' …' : ''} reports` : 'a stage\'s own counter';
}
export const counterOf = (cost, name) => name in (cost || {}) && name !== 'counters' ? cost[name] : (cost?.counters?.[name] ?? 0);

/** `select(id)` runs when a stage's bar is clicked (one listener on the view). */
export function init(select) {
  $('costs').addEventListener('click', e => {
    const bar = e.target.closest?.('.bar, .cost-failed-stage');
    if (bar) select(bar.dataset.bar);
  });
}

/** What the bars were last drawn for (stages failed, and per counter the stages with a bar and how
 *  many without): when a run changes only the counts, the drawing is updated in place. */
let shapeKey = null;

export function render(state) {
  const box = $('costs');
  const all = state.result?.stages || [];
  const stages = all.filter(s => s.ok);
  const failed = all.filter(s => !s.ok);
  const names = stages.length ? counterNames(state) : [];
  // Per counter, the stages with a non-zero count (the others are named in one line).
  const blocks = names.map(name => ({ name, rows: stages.filter(s => counterOf(s.cost, name) > 0), zero: stages.filter(s => counterOf(s.cost, name) === 0).length }));
  const key = JSON.stringify([failed.map(s => [s.id, s.error]), blocks.map(b => [b.name, b.rows.map(s => s.id), b.zero])]);
  // (rebuilding ~200 bars of text took 5-15 ms of the page's thread on every keystroke)
  if (key === shapeKey && box.querySelector('svg.bars')) return update(state, box, blocks);
  shapeKey = key;
  box.replaceChildren();
  // Stages that did not run are marked, first, with their reason on hover, rather than left out.
  if (failed.length) {
    const p = el('p', 'cost-failed');
    p.setAttribute('data-testid', 'cost-failed');
    p.append(el('span', 'cost-failed-head', `did not run (${failed.length}), so no counts: `));
    failed.forEach((s, i) => {
      const b = el('button', 'link cost-failed-stage', '✗ ' + s.id);
      b.type = 'button';
      b.dataset.bar = s.id;
      b.title = `${s.id} did not run: ${pageWords(s.error || 'no reason given')}`;
      p.append(b);
      if (i < failed.length - 1) p.append(document.createTextNode(' '));
    });
    box.append(p);
  }
  if (!stages.length) { box.append(el('p', 'muted', 'No stage ran.')); return; }
  const height = blocks.reduce((h, b) => h + 18 + b.rows.length * ROW_H + (b.zero && b.rows.length ? 14 : 0) + GAP, 0);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${height}`, class: 'bars', role: 'img', 'aria-label': 'cost counters per stage' });
  let y = 0;
  for (const { name, rows, zero } of blocks) {
    const head = svgEl('text', { x: 0, y: y + 12, class: 'bar-counter' }, name + (rows.length ? '' : ' — 0 in every stage'));
    const about = counterAbout(state, name);
    head.append(svgEl('title', {}, `${name}: ${about}`));
    svg.append(head);
    y += 18;
    for (const s of rows) {
      const g = svgEl('g', { class: 'bar', 'data-bar': s.id });
      g.append(svgEl('text', { x: LABEL_W - 6, y: y + 11, 'text-anchor': 'end', class: 'bar-label' }, s.id));
      g.append(svgEl('rect', { x: LABEL_W, y: y + 2, height: ROW_H - 4, rx: 2 }));
      g.append(svgEl('text', { y: y + 11, class: 'bar-value' }));
      g.append(svgEl('title'));
      svg.append(g);
      y += ROW_H;
    }
    if (zero && rows.length) {
      svg.append(svgEl('text', { x: LABEL_W, y: y + 10, class: 'bar-zero' }, `0 in the other ${zero} stage${zero === 1 ? '' : 's'}`));
      y += 14;
    }
    y += GAP;
  }
  box.append(svg);
  update(state, box, blocks);
}

const W = 520, LABEL_W = 150, ROW_H = 15, GAP = 10;

/** Sets each bar's length, value and hover text, and marks the selected stage's bars. */
function update(state, box, blocks) {
  const groups = box.querySelectorAll('svg.bars g.bar');
  let i = 0;
  for (const { name, rows } of blocks) {
    const about = counterAbout(state, name);
    const max = Math.max(1, ...rows.map(s => counterOf(s.cost, name)));
    for (const s of rows) {
      const g = groups[i++];
      const v = counterOf(s.cost, name);
      const w = (W - LABEL_W - 60) * v / max;
      g.classList.toggle('selected', s.id === state.selected);
      const [, rect, value, title] = g.children;
      rect.setAttribute('width', Math.max(1, w));
      value.setAttribute('x', LABEL_W + w + 4);
      value.textContent = fmtCount(v);
      title.textContent = `${s.id}: ${name} = ${v} (${about})`;
    }
  }
}

/** Marks the bars of the selected stage (selecting a stage changes no count). */
export function markSelected(id) {
  for (const g of $('costs').querySelectorAll('svg.bars g.bar')) g.classList.toggle('selected', g.dataset.bar === id);
}
