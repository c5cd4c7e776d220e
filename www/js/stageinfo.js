// The selected stage's heading: its paper and section, title, id, complexity claim, explanation and
// what it accepts, from the core's stage descriptor. The explanation shows two lines until "more".
import { $, richText } from './dom.js';
import { stageDesc, chainOf } from './state.js';
import { paperLink } from './dom.js';

let shownKey = null;   // the explanation on screen, so a run that changes nothing measures nothing

/** The "more" toggle; once, at start. */
export function init(state) {
  $('st-more').addEventListener('click', () => {
    state.explainOpen = !state.explainOpen;
    shownKey = null;
    render(state);
  });
}

export function render(state) {
  const id = state.selected;
  const d = stageDesc(id);
  paperLink($('st-paper'), chainOf(id), d.paper || '');
  $('st-section').textContent = d.section || '';
  $('st-title').textContent = d.title || id;
  $('st-id').textContent = id;
  $('st-complexity').textContent = d.complexity ? 'Complexity: ' + d.complexity : '';
  const key = JSON.stringify([id, d.explanation, !!state.explainOpen]);
  if (key === shownKey) return;
  shownKey = key;
  const p = $('st-explanation'), more = $('st-more');
  richText(p, d.explanation || '');
  richText($('st-accepts'), d.accepts ? 'Accepts: ' + d.accepts : '');
  p.classList.toggle('clamped', !state.explainOpen);
  more.textContent = state.explainOpen ? 'less' : 'more';
  more.setAttribute('aria-expanded', String(!!state.explainOpen));
  // "more" only where two lines do not hold the whole text
  more.hidden = !state.explainOpen && p.scrollHeight <= p.clientHeight + 1;
}
