// The selected stage's gradient against the reference (forward mode) and finite differences, or why
// the stage did not run.
import { $, el, fmt, pageWords, isNaNish } from './dom.js';
import { REFERENCE, stageResult } from './state.js';
import { reveal } from './editor.js';

/** Rows shown before the rest are counted (an array input may have thousands of reals). */
const MAX_ROWS = 300;

function close(a, b) { return a === b || Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b)) || (Number.isNaN(a) && Number.isNaN(b)); }

export function render(state) {
  const r = stageResult(state.selected);
  const box = $('gradient');
  box.replaceChildren();
  const res = state.result;
  if (!res) { box.append(el('p', 'muted', state.diagnostics.length ? 'Fix the errors in the program to see gradients.' : 'No result yet.')); return; }
  if (state.stale) box.append(el('p', 'stale-note', 'The program has errors (see under the editor): this is the last version that ran.'));
  if (!r) { box.append(el('p', 'muted', 'This stage did not run.')); return; }
  const head = el('div', 'grad-head');
  if (!r.ok) {
    head.append(el('span', 'verdict refused', 'did not run'));
    head.append(el('span', 'grad-error', pageWords(r.error || '')));
    if (r.error_span) {
      const at = el('button', 'link', `line ${r.error_span.line}:${r.error_span.col}`);
      at.addEventListener('click', () => reveal(r.error_span.from, r.error_span.to));
      head.append(at);
    }
    box.append(head);
    return;
  }
  const ref = res.reference;
  // NaN agrees with NaN, but a NaN gradient is no success: no green verdict then.
  const nan = [...r.gradient, ...(ref?.gradient || [])].some(isNaNish);
  const fdNan = nan || (ref?.fd || []).some(isNaNish);
  const NAN = ' — but the gradient has NaN';
  if (r.id === REFERENCE) head.append(el('span', 'verdict ' + (nan ? 'warn' : 'ok'), 'reference' + (nan ? ' (its gradient has NaN)' : '')));
  else if (r.agrees === true) head.append(el('span', 'verdict ' + (nan ? 'warn' : 'ok'), 'agrees with forward' + (nan ? NAN : '')));
  else if (r.agrees === false) head.append(el('span', 'verdict bad', 'DISAGREES with forward'));
  if (ref) head.append(el('span', 'verdict ' + (ref.fd_agrees && !fdNan ? 'ok' : 'warn'),
    ref.fd_agrees ? 'forward agrees with finite differences' + (fdNan ? ' — but the values have NaN' : '') : 'forward and finite differences differ (kink or cancellation?)'));
  head.append(el('span', 'muted', 'gradient of ⟨seed, main x⟩ with respect to every real input'));
  box.append(head);
  const table = el('table', 'grad-table');
  const tr0 = el('tr');
  for (const h of ['input', 'value', 'this stage', 'forward', 'finite differences']) tr0.append(el('th', null, h));
  table.append(tr0);
  const xs = res.input_reals || [], labels = res.input_labels || [];
  const n = Math.max(r.gradient.length, ref?.gradient.length || 0);
  // Long arrays: the first MAX_ROWS rows, then a count (the whole gradient is in the JSON and the share link's run).
  for (let i = 0; i < Math.min(n, MAX_ROWS); i++) {
    const tr = el('tr');
    tr.append(el('td', 'muted key', labels[i] ?? 'x' + (i + 1)));
    tr.append(el('td', 'num', fmt(xs[i])));
    const g = r.gradient[i], f = ref?.gradient[i];
    const c = el('td', 'num strong', fmt(g));
    if (f != null && g != null && !close(g, f)) c.classList.add('differs');
    tr.append(c);
    tr.append(el('td', 'num', fmt(f)));
    tr.append(el('td', 'num muted', fmt(ref?.fd[i])));
    table.append(tr);
  }
  if (n > MAX_ROWS) { const tr = el('tr', 'more'); const td = el('td', 'muted', `… (${n - MAX_ROWS} more)`); td.colSpan = 5; tr.append(td); table.append(tr); }
  if (!n) { const tr = el('tr'); const td = el('td', 'muted', 'The input has no real numbers, so the gradient is empty.'); td.colSpan = 5; tr.append(td); table.append(tr); }
  box.append(table);
}
