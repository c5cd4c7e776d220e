// The page around the views: the examples menu (grouped by the core's chains), share links, the
// program kept in localStorage across reloads, the help, and the keyboard.
// Work is never lost: the saved program remembers the link it started from, so a reload of that link
// brings back the edits made since (the latest edit wins); opening another link, or picking an
// example, first keeps the program it replaces among the recent programs (in the examples menu).
import { $, el, setStatus, showBanner } from './dom.js';
import { encodeView, decodeHash } from './share.js';
import { source, setSource } from './editor.js';
import { fields, setFields } from './inputs.js';
import { goStep } from './stepper.js';

const STORE_KEY = 'cotangent.playground.v1';
const RECENT_KEY = STORE_KEY + '.recent';
const MAX_RECENT = 6;
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
    localStorage.setItem(STORE_KEY, JSON.stringify({ src: source(), at, seed, params: state.params, stage: state.selected, link: state.link || null }));
  } catch { /* storage full or disabled: not fatal */ }
}

function loadJson(key) {
  try { return JSON.parse(localStorage.getItem(key) || 'null'); } catch { return null; }
}

/** The recent programs, newest first (each a saved view: src, at, seed, params, stage, time). */
export function recent() {
  const r = loadJson(RECENT_KEY);
  return Array.isArray(r) ? r.filter(v => v && typeof v.src === 'string') : [];
}

/** Keeps `view` among the recent programs before something replaces it (an example or a link): nothing
 *  is kept twice, and an unedited example is not kept at all (the menu has it). */
function remember(state, view) {
  if (!view || typeof view.src !== 'string' || !view.src.trim()) return;
  if (state.examples.some(e => e.source === view.src)) return;
  const list = [{ src: view.src, at: view.at || '', seed: view.seed || '', params: view.params || {}, stage: view.stage, time: Date.now() },
    ...recent().filter(v => v.src !== view.src)].slice(0, MAX_RECENT);
  try { localStorage.setItem(RECENT_KEY, JSON.stringify(list)); } catch { /* ignore */ }
  render(state);
}

/** The program in the editor now, as a view to remember. */
function current(state) {
  const { at, seed } = fields();
  return { src: source(), at, seed, params: state.params, stage: state.selected };
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
  const mine = recent();
  if (mine.length) {
    const og = document.createElement('optgroup');
    og.label = 'Your recent programs (kept in this browser)';
    og.dataset.group = 'recent';
    for (const [i, v] of mine.entries()) {
      const lines = v.src.split('\n');
      const first = lines.find(l => /^\s*def\s+main\b/.test(l)) || lines.find(l => l.trim() && !l.trim().startsWith('--')) || lines[0];
      const when = new Date(v.time || 0).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' });
      const o = el('option', null, `${when} — ${first.trim().slice(0, 60)}`);
      o.value = 'r' + i;
      og.append(o);
    }
    sel.append(og);
  }
  syncExample(state);
}

/** The menu shows the example the editor holds exactly, else "— choose —". */
export function syncExample(state) {
  const sel = $('examples');
  let src;
  try { src = source(); } catch { return; }   // the editor is not made yet
  const i = state.examples.findIndex(e => e.source === src);
  sel.value = i >= 0 ? String(i) : '';
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
  state.link = hash;   // a reload of this link keeps the edits made after copying it
  persist(state);
  const out = $('link-out');
  out.value = url;
  window.__cot.lastLink = url;
  try {
    // a clipboard that never answers (a permission prompt nobody sees) must not hold the link back
    await Promise.race([navigator.clipboard.writeText(url), new Promise((_, no) => setTimeout(() => no(new Error('no answer')), 2000))]);
    setStatus('link copied to the clipboard', 'ok');
    out.hidden = true;
  } catch {
    out.hidden = false;
    out.select();
    setStatus('copy the link from the box', 'ok');
  }
}

function defaultExample(state) {
  return state.examples.find(e => e.name === 'running-example') || state.examples.find(e => /running/.test(e.name)) || state.examples[0] || FALLBACK_EXAMPLE;
}

/** The view a link (`location.hash`) holds: null for none, the default example for a bad one. A bad
 *  optional field is left out and named. */
async function viewFromHash(state) {
  const { view, error, ignored } = await decodeHash(location.hash);
  if (error) {
    showBanner('This link could not be opened: ' + error + '. Showing the default example instead.');
    return { src: defaultExample(state).source };
  }
  if (ignored?.length) showBanner(`This link opened, but ignored ${ignored.join(', ')}.`);
  if (view) state.linkedStage = view.stage || null;
  return view || null;
}

/** After the first run: a link's stage that does not exist is said so (the page shows forward mode). */
export function checkLinkedStage(state, ids, fallback) {
  const id = state.linkedStage;
  state.linkedStage = null;
  if (id && !ids.includes(id)) showBanner(`This link's stage "${id.slice(0, 80)}" does not exist here; showing ${fallback} instead.`);
}

/** The view the page opens with (a link, else the saved program, else the default example), applied to
 *  the state and the input fields; returns it (its `src` is for the editor). */
export async function initialView(state) {
  const saved = loadJson(STORE_KEY);
  const hasSaved = saved && typeof saved.src === 'string';
  const hash = location.hash && location.hash !== '#' ? location.hash : null;
  let start = null;
  if (hash && hasSaved && saved.link === hash) {
    start = saved;   // this link was opened here before: the edits made since win
    state.link = hash;
  } else if (hash) {
    start = await viewFromHash(state);
    if (hasSaved && saved.src !== start?.src) remember(state, saved);   // the link replaces it: keep it
    state.link = hash;
  } else if (hasSaved) {
    start = saved;
    state.link = saved.link || null;
  }
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
    if (sel.value.startsWith('r')) {
      const v = recent()[+sel.value.slice(1)];
      if (!v) return;
      remember(state, current(state));
      setFields(v.at || '', v.seed || ''); state.params = { ...(v.params || {}) };
      setSource(v.src);
      return;
    }
    const e = state.examples[+sel.value];
    if (!sel.value || !e) return;
    remember(state, current(state));
    setFields('', ''); state.params = {};
    setSource(e.source);
    syncExample(state);
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
  // The language cheat-sheet: a modal dialog (Esc closes it; the focus returns to the opener).
  const cheat = $('cheatsheet');
  for (const id of ['lang-btn', 'help-lang']) $(id).addEventListener('click', () => { if (!cheat.open) cheat.showModal(); });
  $('cheat-close').addEventListener('click', () => cheat.close());
  window.addEventListener('hashchange', async () => {
    if (location.hash === ignoreHash) return;
    const view = await viewFromHash(state);
    if (!view) return;
    if (view.src !== source()) remember(state, current(state));
    state.link = location.hash;
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
    // (a key in the editor reaches here from its shadow root's host, #editor)
    if (t.closest?.('.cm-editor, #editor') || /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName)) return;
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown' && t.closest?.('.stage-list')) { e.preventDefault(); moveStage(1); }
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp' && t.closest?.('.stage-list')) { e.preventDefault(); moveStage(-1); }
    else if (e.key === '.') goStep(state, state.step + 1);
    else if (e.key === ',') goStep(state, state.step - 1);
  });
}
