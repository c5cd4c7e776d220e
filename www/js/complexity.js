// The complexity view: every stage's counters against a `param` swept over a range, on a log–log plot.
import { $, el, svgEl, fmtCount, pageWords } from './dom.js';
import { STEP_BUDGET } from './state.js';
import { counterNames, counterOf, counterAbout } from './costs.js';
import { options } from './inputs.js';
import { source } from './editor.js';

let core = null;   // the worker client the sweeps run on

export function init(client) { core = client; }

/** The form (param, range, counter) under the plot, rebuilt when the program's params change. */
export function render(state) {
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
    go.addEventListener('click', () => runComplexity(state));
    ctr.addEventListener('change', () => { state.complexity.counter = ctr.value; draw(state); });
  }
  const ctr = $('cx-counter');
  if (ctr) {
    const names = [...new Set([...counterNames(state), ...state.complexity.runs.flatMap(r => Object.keys(r.costs).flatMap(id => Object.keys(r.costs[id].counters || {})))])];
    if ([...ctr.options].map(o => o.value).join(',') !== names.join(',')) {
      ctr.replaceChildren();
      for (const n of names) { const o = el('option', null, n); o.value = n; o.title = counterAbout(state, n); ctr.append(o); }
      ctr.value = names.includes(state.complexity.counter) ? state.complexity.counter : 'steps';
    }
    ctr.title = counterAbout(state, ctr.value);
  }
}

async function runComplexity(state) {
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
      const res = await core.request('analyse', { source: text, options: options(state, {
        params: { ...state.params, [param]: v }, svg: [], trace: false, traced: [], detail: [], keep: false, stages: alive || [], budget: { steps: STEP_BUDGET } }) });
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
    draw(state);
  }
  render(state);
  draw(state);
}

/** Least-squares slope of log y against log x: the measured exponent k of y ~ x^k. Null with fewer
 *  than two distinct x (no line to fit). */
export function logLogSlope(points) {
  const p = points.filter(([x, y]) => x > 0 && y > 0).map(([x, y]) => [Math.log(x), Math.log(y)]);
  const n = p.length;
  if (n < 2) return null;
  const mx = p.reduce((a, [x]) => a + x, 0) / n, my = p.reduce((a, [, y]) => a + y, 0) / n;
  let sxx = 0, sxy = 0;
  for (const [x, y] of p) { sxx += (x - mx) ** 2; sxy += (x - mx) * (y - my); }
  return sxx > 1e-12 ? sxy / sxx : null;
}

/** The legend: one row a plotted stage, its colour, its id and its measured exponent. */
function legend(state, ids, pts) {
  const { counter, param } = state.complexity;
  const ul = el('ul', 'cx-legend-list');
  ul.setAttribute('aria-label', 'stages plotted, with the measured exponent');
  ids.forEach((id, i) => {
    if (!pts[i].length) return;
    const k = logLogSlope(pts[i]);
    const li = el('li', 'cx-legend' + (id === state.selected ? ' selected' : ''));
    li.dataset.stage = id;
    const sw = el('span', 'cx-swatch');
    sw.style.background = PALETTE[i % PALETTE.length];   // CSSOM, allowed by the CSP (no style attribute)
    li.append(sw, el('span', 'cx-id', id));
    const slope = el('span', 'cx-slope', k == null ? '—' : '~' + param + '^' + k.toFixed(2));
    if (k != null) li.dataset.slope = String(k);
    slope.title = k == null
      ? 'one value of the parameter: no slope to fit'
      : `least-squares slope of log ${counter} against log ${param} over ${pts[i].length} points: ${counter} grows about as ${param}^${k.toFixed(2)}`;
    li.append(slope);
    ul.append(li);
  });
  return ul;
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22',
  '#393b79', '#ad494a', '#637939', '#843c39', '#7b4173', '#3182bd', '#e6550d', '#31a354'];

function draw(state) {
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
  const W = 520, H = 260, L = 52, B = 32, T = 10, R = 10;   // the legend is HTML beside the plot: it wraps, never cut
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
  });
  const wrap = el('div', 'cx-wrap');
  wrap.append(svg, legend(state, ids, pts));
  plot.append(wrap);
  const failed = runs.find(r => r.error);
  if (failed) plot.append(el('p', 'muted', `Stopped at ${param} = ${failed.value}: ${pageWords(failed.error)}`));
  for (const r of runs) if (r.dropped?.length) plot.append(el('p', 'muted', `At ${param} = ${r.value}, ${r.dropped.join(', ')} ran out of the 2M-step budget (or did not run) and left the plot.`));
}
