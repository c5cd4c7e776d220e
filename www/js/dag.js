// The selected stage's Delta DAG: the core's SVG (the one piece of markup the page inserts: every label
// is escaped by the core, and it is parsed as XML with scripts and event attributes refused), with pan,
// zoom, a hover tooltip, and the current backward-pass step highlighted.
import { $, el, svgEl } from './dom.js';
import { stageResult, trace } from './state.js';

let dagKey = null;   // what the view shows, so an unchanged graph keeps its DOM (and the user's pan)

function safeSvg(text) {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const svg = doc.documentElement;
  if (svg.nodeName !== 'svg' || doc.querySelector('parsererror, script, foreignObject')) return null;
  for (const e of doc.querySelectorAll('*')) for (const a of [...e.attributes]) if (/^on/i.test(a.name) || /javascript:/i.test(a.value)) return null;
  return document.importNode(svg, true);
}

export function render(state) {
  const r = stageResult(state.selected);
  const box = $('dag');
  const key = JSON.stringify([state.selected, r?.ok, r?.detail, r?.graph_svg ?? null, r?.graph?.nodes?.length ?? 0]);
  if (key === dagKey && box.querySelector('svg')) { highlightStep(state); return; }
  dagKey = key;
  box.replaceChildren();
  const info = $('dag-info');
  info.textContent = '';
  if (r && !r.detail && r.graph_nodes) {
    box.append(el('p', 'muted empty', r.detail_missing ? 'The graph is no longer in the worker (it was restarted); edit the program to run again.' : 'loading the graph…'));
    box.classList.add('empty');
    return;
  }
  if (!r || !r.graph || !r.graph.nodes?.length) {
    box.append(el('p', 'muted empty', r?.ok ? 'This stage builds no graph: its backward pass needs no Delta DAG.' : 'No graph.'));
    box.classList.add('empty');
    return;
  }
  box.classList.remove('empty');
  const g = r.graph;
  const shared = g.nodes.filter(n => n.shared).length;
  info.textContent = `${g.nodes.length + (g.omitted || 0)} nodes · ${g.edges.length} edges · ${shared} shared`;
  const legend = el('div', 'dag-legend');
  for (const [cls, text] of [['shared', 'shared (referenced twice or more)'], ['current', 'current step'], ['done', 'visited']]) {
    const item = el('span', 'lg');
    item.append(el('i', 'lg-' + cls));
    item.append(document.createTextNode(text));
    legend.append(item);
  }
  box.append(legend);
  if (!r.graph_svg) { box.append(el('p', 'muted', 'drawing…')); return; }
  const svg = safeSvg(r.graph_svg);
  if (!svg) { box.append(el('p', 'muted', 'The graph could not be drawn.')); return; }
  // The cap (dag.rs DRAW_LIMIT, and the core's own limit on what a graph carries) is said in the title too.
  const notDrawn = +svg.getAttribute('data-omitted') || 0;
  if (notDrawn) info.textContent += ` · ${notDrawn} not drawn`;
  nameNodes(svg, r);
  groupLegend(svg, legend);
  const stage = el('div', 'dag-stage');
  stage.append(svg);
  box.append(stage);
  // Fit when a stage is opened; after an edit keep the user's pan and zoom.
  applyZoom(state, state.fitPending !== false);
  state.fitPending = false;
  highlightStep(state);
}

/** Every node is a button: focusable, named by its whole label (the drawing clips long ones, so the
 *  label is also its hover <title>), and a click or Enter jumps to its step (see `init`). */
function nameNodes(svg, r) {
  const steps = r.trace || [];
  const stepsAt = new Map();
  steps.forEach((s, i) => { if (s.node != null) stepsAt.set(String(s.node), (stepsAt.get(String(s.node)) || 0) + 1); });
  for (const g of svg.querySelectorAll('.node')) {
    const d = g.dataset;
    const label = d.label && d.label !== d.ctor ? `${d.ctor} ${d.label}` : d.ctor;
    const bits = [label, `node ${d.node}`];
    if (d.value) bits.push('value ' + d.value);
    if (d.group) bits.push('group ' + d.group);
    const k = stepsAt.get(d.node) || 0;
    bits.push(k ? `${k} step${k === 1 ? '' : 's'}: press Enter to go to it` : 'no step visits it');
    g.setAttribute('tabindex', '0');
    g.setAttribute('role', 'button');
    g.setAttribute('aria-label', bits.join(', '));
    g.prepend(svgEl('title', {}, bits.slice(0, -1).join(', ')));
  }
}

/** The groups' tints (a parallel run's jobs, the array operations) in the legend over the view, which
 *  stays put when the graph is panned; the SVG's own caption names them above the drawing too. */
function groupLegend(svg, legend) {
  const keys = [...svg.querySelectorAll('.dag-group-key')];
  if (!keys.length) return;
  const box = el('div', 'dag-groups');
  box.setAttribute('data-testid', 'dag-groups');
  box.append(el('span', 'dag-groups-title', 'colours:'));
  for (const k of keys) {
    const tint = [...k.querySelector('rect').classList].find(c => /^grp-\d+$/.test(c));
    const item = el('span', 'lg');
    item.append(el('i', 'lg-grp ' + tint));
    item.append(document.createTextNode(k.dataset.group));
    box.append(item);
  }
  legend.before(box);
}

/** The step a click on node `id` goes to: its next step after the current one, else its first. */
function stepOfNode(state, id) {
  const steps = trace();
  const at = [];
  steps.forEach((s, i) => { if (String(s.node) === String(id)) at.push(i); });
  if (!at.length) return null;
  return at.find(i => i > state.step) ?? at[0];
}

function applyZoom(state, fit = false) {
  const box = $('dag');
  const stage = box.querySelector('.dag-stage');
  const svg = stage?.querySelector('svg');
  if (!svg) return;
  if (fit) {
    const w = +svg.getAttribute('width'), h = +svg.getAttribute('height');
    // the legend takes the bottom strip; a large graph is shrunk as far as it needs to fit
    // and the groups' legend, where there is one, the top strip
    const top = (box.querySelector('.dag-groups')?.offsetHeight || 0) + (box.querySelector('.dag-groups') ? 6 : 0);
    const bw = box.clientWidth || 400, bh = Math.max(60, (box.clientHeight || 300) - 26 - top);
    const k = Math.min(1.4, Math.max(0.02, Math.min(bw / w, bh / h) * 0.95));
    state.zoom = { k, x: (bw - w * k) / 2, y: top + Math.max(4, (bh - h * k) / 2) };
  }
  const z = state.zoom;
  stage.style.transform = `translate(${z.x}px, ${z.y}px) scale(${z.k})`;
}

function zoomBy(state, f, cx, cy) {
  const box = $('dag');
  if (cx == null) { cx = box.clientWidth / 2; cy = box.clientHeight / 2; }
  const z = state.zoom;
  const k = Math.min(8, Math.max(0.02, z.k * f));
  state.zoom = { k, x: cx - (cx - z.x) * (k / z.k), y: cy - (cy - z.y) * (k / z.k) };
  applyZoom(state);
}

/** Pan (drag), zoom (wheel, buttons, fit on resize) and the hover tooltip; once, at start. */
export function init(state, goStep) {
  const box = $('dag');
  const jump = node => {
    const i = stepOfNode(state, node.dataset.node);
    if (i == null) { $('step-note').textContent = `No backward-pass step visits node ${node.dataset.node}.`; return; }
    goStep(i);
  };
  // Tab onto a node: the box must not scroll itself (its view is the pan), the node is panned to instead.
  box.addEventListener('focusin', e => {
    const node = e.target.closest?.('.node');
    if (!node) return;
    box.scrollTop = 0; box.scrollLeft = 0;
    panTo(state, node);
  });
  box.addEventListener('keydown', e => {
    const node = e.target.closest?.('.node');
    if (node && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); jump(node); }
  });
  box.addEventListener('wheel', e => {
    if (!box.querySelector('svg')) return;
    e.preventDefault();
    const r = box.getBoundingClientRect();
    zoomBy(state, Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  box.addEventListener('pointerdown', e => {
    if (!box.querySelector('svg')) return;
    drag = { x: e.clientX, y: e.clientY, zx: state.zoom.x, zy: state.zoom.y, node: e.target.closest?.('.node') };
    box.setPointerCapture(e.pointerId);
    box.classList.add('dragging');
  });
  box.addEventListener('pointermove', e => {
    if (drag) { state.zoom.x = drag.zx + e.clientX - drag.x; state.zoom.y = drag.zy + e.clientY - drag.y; applyZoom(state); }
    const node = e.target.closest?.('.node');
    const tip = $('dag-tip');
    if (!node || drag) { tip.hidden = true; return; }
    tip.replaceChildren();
    const row = (k, v) => { if (v == null || v === '') return; const d = el('div'); d.append(el('b', null, k + ' ')); d.append(document.createTextNode(v)); tip.append(d); };
    row('constructor', node.dataset.ctor);
    row('node', node.dataset.node);
    row('label', node.dataset.label);
    row('DeltaId', node.dataset.deltaId);
    row('value', node.dataset.value);
    row('visits', node.dataset.visits);
    row('group', node.dataset.group);
    if (node.classList.contains('shared')) row('shared', 'referenced from more than one place');
    const card = box.parentElement.getBoundingClientRect();
    tip.style.left = (e.clientX - card.left + 14) + 'px';
    tip.style.top = (e.clientY - card.top + 14) + 'px';
    tip.hidden = false;
  });
  const end = () => { drag = null; box.classList.remove('dragging'); };
  // A press and release on one node without moving is a click on it (the box holds the pointer capture).
  box.addEventListener('pointerup', e => {
    const d = drag;
    end();
    if (d?.node && Math.abs(e.clientX - d.x) + Math.abs(e.clientY - d.y) < 5) { d.node.focus({ preventScroll: true }); jump(d.node); }
  });
  box.addEventListener('pointercancel', end);
  box.addEventListener('pointerleave', () => { $('dag-tip').hidden = true; });
  $('zoom-in').onclick = () => zoomBy(state, 1.25);
  $('zoom-out').onclick = () => zoomBy(state, 0.8);
  $('zoom-fit').onclick = () => applyZoom(state, true);
  window.addEventListener('resize', () => applyZoom(state, true));
}

/** Pans (never zooms) so that node `e` is wholly in view, centred, when any part of it is outside. */
function panTo(state, e) {
  const box = $('dag');
  const b = box.getBoundingClientRect(), r = e.getBoundingClientRect();
  if (!b.width || (r.left >= b.left + 4 && r.right <= b.right - 4 && r.top >= b.top + 4 && r.bottom <= b.bottom - 4)) return;
  state.zoom.x += (b.left + b.width / 2) - (r.left + r.width / 2);
  state.zoom.y += (b.top + b.height / 2) - (r.top + r.height / 2);
  applyZoom(state);
}

/** Lights up the current step's node and the visited ones; `pan` brings the current node into view. */
export function highlightStep(state, pan = false) {
  const box = $('dag');
  for (const e of box.querySelectorAll('.node.current, .node.done')) e.classList.remove('current', 'done');
  const steps = trace();
  if (!steps.length) return;
  const done = new Set();
  // After an edit the trace may be shorter than the step we were at (the stepper clamps it after this).
  for (let i = 0; i < Math.min(state.step, steps.length); i++) if (steps[i].node != null) done.add(steps[i].node);
  for (const id of done) box.querySelector(`#dag-n${id}`)?.classList.add('done');
  const cur = steps[state.step]?.node;
  if (cur != null) {
    const e = box.querySelector(`#dag-n${cur}`);
    if (e) {
      e.classList.remove('done');
      e.classList.add('current');
      if (pan) panTo(state, e);
    }
  }
  box.dataset.currentNode = cur ?? '';
}
