// The stage list on the left: the stages grouped by the core's chains, each with its verdict badge.
// One click and one keydown listener on the list (event delegation), so re-rendering on every run
// adds no listeners.
import { $, el } from './dom.js';
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
      li.append(el('div', 'group-name', chain ? chain.title : (d.paper || g)));
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
      else { badge = '✓'; cls = 'ok'; tip = id === REFERENCE ? 'reference' : 'agrees with forward'; }
    }
    const b = el('span', 'badge ' + cls, badge);
    b.title = tip;
    item.append(b);
    const text = el('span', 'stage-text');
    text.append(el('span', 'stage-title', d.title || id));
    text.append(el('span', 'stage-sub', [id, d.section].filter(Boolean).join(' · ')));
    item.append(text);
    if (id === state.selected) item.classList.add('selected');
    ol.append(item);
  }
}

/** Marks `id` as selected without rebuilding the list, and scrolls it into view. */
export function markSelected(id) {
  const list = $('stage-list');
  for (const li of list.querySelectorAll('.stage-item')) li.classList.toggle('selected', li.dataset.stage === id);
  list.querySelector(`.stage-item[data-stage="${CSS.escape(id)}"]`)?.scrollIntoView({ block: 'nearest' });
}
