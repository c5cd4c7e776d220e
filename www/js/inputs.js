// Under the editor: the run's inputs (input point, output seed, `param` overrides), the options a run
// is made with, and the overview of the last run (main's type, the input, the seed, the primal).
import { $, el, compactValue, pageWords } from './dom.js';
import { STEP_BUDGET, besideOf } from './state.js';

let onChange = () => {};

/** `changed()` runs when the user changes an input (the page then saves and runs again). */
export function init(changed) {
  onChange = changed;
  for (const id of ['in-at', 'in-seed']) $(id).addEventListener('input', () => onChange());
}

/** The analyse options of a run of the page's state; `extra` overrides. */
export function options(state, extra = {}) {
  const at = $('in-at').value.trim(), seed = $('in-seed').value.trim();
  // A step budget per run (each stage runs separately): an exponential stage then fails on its own,
  // with the budget named, while the others still show, well inside the 3 s wall-time limit.
  // Only the selected stage's trace and graph travel with each run (and the graph drawn beside it);
  // the others come on demand. Only those are traced, too: the others run untraced (cheaper, most of
  // all for the rewrite stages) and the worker runs one again, traced, when it is selected.
  const shown = [state.selected, besideOf(state.selected)?.stage].filter(Boolean);
  return { at: at || undefined, seed: seed || undefined, params: state.params, svg: shown, budget: { steps: STEP_BUDGET },
    detail: shown, traced: shown, keep: true, ...extra };
}

/** The input and seed fields, as typed. */
export const fields = () => ({ at: $('in-at').value, seed: $('in-seed').value });
export function setFields(at, seed) { $('in-at').value = at; $('in-seed').value = seed; }

/** Params are shown as soon as they are typed, before the core has checked the program. */
export function syncParamsFromText(state, text) {
  const found = [];
  for (const m of text.matchAll(/^\s*param\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*(-?\d+)/gm)) found.push({ name: m[1], value: Number(m[2]) });
  const names = found.map(p => p.name).join(',');
  if (names !== state.paramDefaults.map(p => p.name).join(',')) {
    state.paramDefaults = found;
    for (const k of Object.keys(state.params)) if (!found.some(p => p.name === k)) delete state.params[k];
  } else state.paramDefaults = found;
}

export function render(state) {
  renderFieldErrors(state);
  renderParams(state);
  renderOverview(state);
}

/** A field whose text the core could not read (its message is rendered against `--at` / `--seed`), or the
 *  input point the program lacks, is marked invalid, its message beside it. */
function renderFieldErrors(state) {
  for (const [id, flag, name] of [['in-at', '--at', 'Input point'], ['in-seed', '--seed', 'Output seed']]) {
    const d = state.diagnostics.find(d => d.rendered?.startsWith(flag + ':') || new RegExp(flag + '\\b').test(d.message));
    const input = $(id), msg = $(id + '-error');
    if (d) {
      input.setAttribute('aria-invalid', 'true');
      msg.textContent = `${name}: ${pageWords(d.message)}`;
    } else input.removeAttribute('aria-invalid');
    msg.hidden = !d;
  }
}

function renderParams(state) {
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
      onChange();
    });
    label.append(input);
    box.append(label);
  }
}

function renderOverview(state) {
  const box = $('overview');
  box.replaceChildren();
  const r = state.result;
  if (!r) return;
  const t = el('dl', 'facts');
  const add = (k, v, full) => { t.append(el('dt', null, k)); const d = el('dd', null, v); if (full && full !== v) d.title = full.slice(0, 4000); t.append(d); };
  add('main :', `${r.input_type} → ${r.output_type}`);
  // Long arrays are shown by their first elements and a count (the whole value is the tooltip).
  const input = r.input_text ?? JSON.stringify(r.input), primal = r.primal_text ?? JSON.stringify(r.primal);
  const seed = r.seed_text ?? JSON.stringify(r.seed);
  add('input', compactValue(input, 12), input);
  add('seed', compactValue(seed, 12), seed);
  add('primal', compactValue(primal, 12), primal);
  box.append(t);
}
