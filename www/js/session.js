// The page around the views: the examples menu (grouped by the core's chains), share links, the
// program kept in localStorage across reloads, the help, and the keyboard.
import { $, el, setStatus, showBanner } from './dom.js';
import { encodeView, decodeHash } from './share.js';
import { source, setSource } from './editor.js';
import { fields, setFields } from './inputs.js';
import { goStep } from './stepper.js';

const STORE_KEY = 'cotangent.playground.v1';
const FALLBACK_EXAMPLE = {
  name: 'running-example', title: 'The running example (Krawiec et al. 2022, §2)',
  source: '-- The running example (Krawiec et al. 2022, §2): gradient (37, 12) at (12, 13)\n' +
          'input (12.0, 13.0)\ndef main (x, y) = let z = x + y in x * z\nexpect grad (37.0, 12.0)\n',
};
const GENERAL = '';   // the examples named after no chain (never a chain id)
const GENERAL_LABEL = 'Language and shared examples';

let ignoreHash = null;   // the hash the page itself just set (Copy link), which must not reload the view

export function persist(state) {
  try {
    const { at, seed } = fields();
    localStorage.setItem(STORE_KEY, JSON.stringify({ src: source(), at, seed, params: state.params, stage: state.selected }));
  } catch { /* storage full or disabled: not fatal */ }
}

/** The examples menu: the general examples first; then a group per topic, a file-name prefix that is no
 *  chain's but names two examples or more (`arrays-*.cot`: "Arrays (arrays-*)"); then one group per chain
 *  that has examples (a file `<chain id>-*.cot`). */
export function render(state) {
  const sel = $('examples');
  sel.replaceChildren();
  const none = el('option', null, '— choose —'); none.value = ''; sel.append(none);
  const isChain = id => state.chains.some(c => c.id === id);
  const count = new Map();
  for (const e of state.examples) count.set(e.paper, (count.get(e.paper) || 0) + 1);
  const groups = new Map([[GENERAL, []]]);
  for (const e of state.examples) if (!isChain(e.paper) && e.paper !== GENERAL && count.get(e.paper) >= 2) groups.set(e.paper, []);
  for (const c of state.chains) groups.set(c.id, []);
  for (const [i, e] of state.examples.entries()) groups.get(groups.has(e.paper) ? e.paper : GENERAL).push([i, e]);
  for (const [id, list] of groups) {
    if (!list.length) continue;
    const og = document.createElement('optgroup');
    const chain = state.chains.find(c => c.id === id);
    og.label = chain ? `${chain.title} (${chain.id}/*)` : id === GENERAL ? GENERAL_LABEL : `${id[0].toUpperCase()}${id.slice(1)} (${id}-*)`;
    og.dataset.group = id;
    for (const [i, e] of list) { const o = el('option', null, e.title || e.name); o.value = String(i); o.title = e.name; og.append(o); }
    sel.append(og);
  }
}

/** After an edit: the menu shows an example only while the editor holds exactly it. */
export function syncExample(state) {
  const sel = $('examples');
  if (sel.value && state.examples[+sel.value]?.source !== source()) sel.value = '';
}

async function copyLink(state) {
  const view = { src: source(), stage: state.selected, step: state.step };
  const at = fields().at.trim(), seed = fields().seed.trim();
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

function defaultExample(state) {
  return state.examples.find(e => e.name === 'running-example') || state.examples.find(e => /running/.test(e.name)) || state.examples[0] || FALLBACK_EXAMPLE;
}

/** The view a link (`location.hash`) holds: null for none, the default example for a bad one. */
async function viewFromHash(state) {
  const { view, error } = await decodeHash(location.hash);
  if (error) {
    showBanner('This link could not be opened: ' + error + '. Showing the default example instead.');
    return { src: defaultExample(state).source };
  }
  return view || null;
}

/** The view the page opens with (a link, else the saved program, else the default example), applied to
 *  the state and the input fields; returns it (its `src` is for the editor). */
export async function initialView(state) {
  let start = await viewFromHash(state);
  let saved = null;
  try { saved = JSON.parse(localStorage.getItem(STORE_KEY) || 'null'); } catch { saved = null; }
  if (!start && saved && typeof saved.src === 'string') start = saved;
  if (!start) start = { src: defaultExample(state).source };
  setFields(typeof start.at === 'string' ? start.at : '', typeof start.seed === 'string' ? start.seed : '');
  if (start.params && typeof start.params === 'object') for (const [k, v] of Object.entries(start.params)) if (Number.isSafeInteger(v)) state.params[k] = v;
  if (typeof start.stage === 'string') state.selected = start.stage;
  state.pendingStep = Number.isInteger(start.step) ? start.step : 0;
  return start;
}

/** Listeners of the page's chrome; once, at start. `run()` runs the program again, `moveStage(±1)`
 *  selects the next or previous stage. */
export function init(state, { run, moveStage }) {
  const sel = $('examples');
  sel.addEventListener('change', () => {
    const e = state.examples[+sel.value];
    if (!e) return;
    setFields('', ''); state.params = {};
    setSource(e.source);
    sel.value = String(state.examples.indexOf(e));
  });
  $('copy-link').addEventListener('click', () => copyLink(state));
  $('help-btn').addEventListener('click', () => {
    const h = $('help');
    h.hidden = !h.hidden;
    $('help-btn').setAttribute('aria-expanded', String(!h.hidden));
    try { localStorage.setItem(STORE_KEY + '.helpSeen', '1'); } catch { /* ignore */ }
  });
  // The help shows on the first visit only (the ? button brings it back).
  try { if (!localStorage.getItem(STORE_KEY + '.helpSeen')) { $('help').hidden = false; localStorage.setItem(STORE_KEY + '.helpSeen', '1'); } } catch { /* ignore */ }
  $('banner-close').addEventListener('click', () => { $('banner').hidden = true; });
  window.addEventListener('hashchange', async () => {
    if (location.hash === ignoreHash) return;
    const view = await viewFromHash(state);
    if (!view) return;
    setFields(view.at || '', view.seed || '');
    state.params = { ...(view.params || {}) };
    state.selected = view.stage || state.selected;
    state.pendingStep = view.step ?? 0;
    state.paramDefaults = [];
    if (view.src === source()) run(); else setSource(view.src);
  });
  document.addEventListener('keydown', e => {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t.closest?.('.cm-editor') || /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName)) return;
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown' && t.closest?.('.stage-list')) { e.preventDefault(); moveStage(1); }
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp' && t.closest?.('.stage-list')) { e.preventDefault(); moveStage(-1); }
    else if (e.key === '.') goStep(state, state.step + 1);
    else if (e.key === ',') goStep(state, state.step - 1);
  });
}
