// The stage list on the left: the stages grouped by the core's chains, each with its verdict badge.
// One click and one keydown listener on the list (event delegation), so re-rendering on every run
// adds no listeners.
import { $, el, isNaNish, paperLink } from './dom.js';
import { REFERENCE, stageOrder, stageDesc, stageResult, chainOf } from './state.js';

/** `select(id)` runs when a stage is clicked, or chosen with Enter or Space. */
export function init(select) {
  const list = $('stage-list');
  const itemOf = e => e.target.closest?.('.stage-item');
  list.addEventListener('click', e => {
    const item = itemOf(e);
    if (item) select(item.dataset.stage);
  });
  list.addEventListener('keydown', e => {
    const item = itemOf(e);
    if (item && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); select(item.dataset.stage); }
  });
}

export function render(state) {
  const list = $('stage-list');
  list.replaceChildren();
  let group = null, ol = null;
  for (const id of stageOrder()) {
    const d = stageDesc(id);
    const chain = chainOf(id);
    // A stage in no chain (none today) gets a group of its own descriptor's `group`.
    const g = chain ? chain.id : (d.group ?? id);
    if (g !== group) {
      group = g;
      const li = el('li', 'group');
      li.dataset.chain = g;
      const name = el('div', 'group-name');
      // the heading links to the chain's paper (arXiv or DOI, from the core's chain info)
      if (chain) name.append(paperLink(el('a', 'paper-link'), chain, chain.title));
      else name.textContent = d.paper || g;
      li.append(name);
      ol = el('ol', 'group-stages');
      li.append(ol);
      list.append(li);
    }
    const item = el('li', 'stage-item');
    item.dataset.stage = id;
    // roving tabindex: Tab reaches the selected stage, arrows move from it
    item.tabIndex = id === state.selected ? 0 : -1;
    item.setAttribute('role', 'button');
    if (id === state.selected) item.setAttribute('aria-current', 'true');
    item.append(badgeOf(state, id));
    const text = el('span', 'stage-text');
    text.append(el('span', 'stage-title', d.title || id));
    text.append(el('span', 'stage-sub', [id, d.section].filter(Boolean).join(' · ')));
    item.append(text);
    if (id === state.selected) item.classList.add('selected');
    ol.append(item);
  }
}

/** Stage `id`'s verdict badge: not run, stale, refused, disagrees, NaN, or agrees. */
function badgeOf(state, id) {
  const r = stageResult(id);
  let badge = '·', cls = 'none', tip = 'not run';
  if (r && state.stale) { badge = '·'; cls = 'stale'; tip = 'the program has errors: this is the last version that ran'; }
  else if (r) {
    if (!r.ok) { badge = '–'; cls = 'refused'; tip = r.error || 'did not run'; }
    else if (r.agrees === false) { badge = '✗'; cls = 'bad'; tip = 'disagrees with forward'; }
    else if (r.gradient?.some(isNaNish)) { badge = '?'; cls = 'warn'; tip = 'the gradient has NaN'; }
    else { badge = '✓'; cls = 'ok'; tip = id === REFERENCE ? 'reference' : 'agrees with forward'; }
  }
  const b = el('span', 'badge ' + cls, badge);
  b.title = tip;
  return b;
}

/** Replaces only the badges of stages `ids` (a later part of a streamed run brought them): rebuilding
 *  the whole list for each part was a few ms of the page's thread per part, beside two busy workers. */
export function refresh(state, ids) {
  const list = $('stage-list');
  for (const id of ids) list.querySelector(`.stage-item[data-stage="${CSS.escape(id)}"] > .badge`)?.replaceWith(badgeOf(state, id));
}

/** Marks `id` as selected without rebuilding the list and scrolls it into view; the focus follows the
 *  selection when it was in the list (arrow keys move both). */
export function markSelected(id) {
  const list = $('stage-list');
  const hadFocus = list.contains(document.activeElement);
  for (const li of list.querySelectorAll('.stage-item')) {
    const on = li.dataset.stage === id;
    li.classList.toggle('selected', on);
    li.tabIndex = on ? 0 : -1;
    if (on) li.setAttribute('aria-current', 'true'); else li.removeAttribute('aria-current');
  }
  const item = list.querySelector(`.stage-item[data-stage="${CSS.escape(id)}"]`);
  item?.scrollIntoView({ block: 'nearest' });
  if (hadFocus) item?.focus({ preventScroll: true });
}
