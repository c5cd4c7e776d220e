// The selected stage's heading: its paper and section, title, id, complexity claim, explanation and
// what it accepts, from the core's stage descriptor.
import { $, richText } from './dom.js';
import { stageDesc } from './state.js';

export function render(state) {
  const id = state.selected;
  const d = stageDesc(id);
  $('st-paper').textContent = d.paper || '';
  $('st-section').textContent = d.section || '';
  $('st-title').textContent = d.title || id;
  $('st-id').textContent = id;
  $('st-complexity').textContent = d.complexity ? 'Complexity: ' + d.complexity : '';
  richText($('st-explanation'), d.explanation || '');
  richText($('st-accepts'), d.accepts ? 'Accepts: ' + d.accepts : '');
}
