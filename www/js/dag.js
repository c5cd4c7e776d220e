// The selected stage's Delta DAG: the core's SVG (the one piece of markup the page inserts: every label
// is escaped by the core, and it is parsed as XML with scripts and event attributes refused), with pan,
// zoom, a hover tooltip, and the current backward-pass step highlighted. Beside an array-level Delta
// (arrays/dual-arrays) the same drawing shows the scalar-level Delta of the same program
// (arrays/dual-numbers, `besideOf`), each headed by its node count, so the Delta explosion is seen.
import { $, el, svgEl } from './dom.js';
import { stageResult, trace, besideOf } from './state.js';

let dagKey = null;   // what the view shows, so an unchanged graph keeps its DOM (and the user's pan)
let besideKey = null;
/** The pan and zoom of the graph drawn beside (the selected stage's are `state.zoom`). */
const beside = { zoom: { k: 1, x: 0, y: 0 } };

/** Nodes in a stage's graph, counting those the core left out (as the view's heading says). */
const nodeCount = r => (r.graph ? r.graph.nodes.length + (r.graph.omitted || 0) : (r.graph_nodes || 0) + (r.graph_omitted || 0));

function safeSvg(text) {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const svg = doc.documentElement;
  if (svg.nodeName !== 'svg' || doc.querySelector('parsererror, script, foreignObject')) return null;
  for (const e of doc.querySelectorAll('*')) for (const a of [...e.attributes]) if (/^on/i.test(a.name) || /javascript:/i.test(a.value)) return null;
  return document.importNode(svg, true);
}

export function render(state) {
  // the panel beside first: it halves the selected stage's, which is then fitted again
  const relaid = renderBeside(state);
  renderMain(state, relaid);
}

function renderMain(state, relaid) {
  const r = stageResult(state.selected);
  const box = $('dag');
  const key = JSON.stringify([state.selected, r?.ok, r?.detail, r?.graph_svg ?? null, r?.graph?.nodes?.length ?? 0]);
  if (key === dagKey && box.querySelector('svg')) {
    if (relaid) applyZoom(box, state, true);
    highlightStep(state);
    return;
  }
  dagKey = key;
  const info = $('dag-info');
  info.textContent = '';
  if (!draw(box, r, true)) return;
  const g = r.graph;
  const shared = g.nodes.filter(n => n.shared).length;
  info.textContent = `${nodeCount(r)} nodes · ${g.edges.length} edges · ${shared} shared`;
  const notDrawn = +box.querySelector('svg')?.getAttribute('data-omitted') || 0;
  // A partial drawing says so above the picture, at the page's text size (the SVG's own caption
  // shrinks with the zoom that fits a large graph).
  if (notDrawn) {
    const what = box.querySelector('svg .dag-omitted')?.textContent || `${notDrawn} nodes not drawn.`;
    info.append(' · ', el('strong', 'dag-partial', what));
  }
  // Fit when a stage is opened; after an edit keep the user's pan and zoom.
  applyZoom(box, state, state.fitPending !== false);
  state.fitPending = false;
  highlightStep(state);
}

/** The other stage's graph beside the selected one's, when `besideOf` names one and the toggle is on;
 *  both panels are headed by their node counts. Says whether the panel came or went. */
function renderBeside(state) {
  const b = besideOf(state.selected);
  const r = b && stageResult(b.stage);
  const mine = stageResult(state.selected);
  const can = !!(r?.ok && r.graph_nodes && mine?.ok && mine.graph_nodes);
  const on = can && state.dagBeside !== false;
  $('dag-beside-toggle').hidden = !can;
  if (can) {
    $('dag-beside-label').textContent = b.theirs;
    $('dag-beside-toggle').title = `Draw the ${b.theirs} of ${b.stage} for the same program beside this one`;
    $('dag-beside').checked = on;
  }
  const pair = $('dag-pair');
  const relaid = pair.classList.contains('beside') !== on;
  pair.classList.toggle('beside', on);
  // two drawings need the room: the DAG card takes the whole width, under the program
  pair.closest('.views')?.classList.toggle('wide-dag', on);
  $('dag-beside-pane').hidden = !on;
  $('dag-main-head').hidden = !on;
  const box = $('dag-beside-view');
  if (!on) { if (besideKey) { box.replaceChildren(); besideKey = null; } return relaid; }
  $('dag-beside-head').replaceChildren(el('span', 'dag-count', `${b.theirs}: ${nodeCount(r)} nodes`), el('code', 'muted', b.stage));
  $('dag-main-head').replaceChildren(el('span', 'dag-count', `${b.mine}: ${nodeCount(mine)} nodes`), el('code', 'muted', state.selected));
  const key = JSON.stringify([b.stage, r.detail, r.graph_svg ?? null, state.result?.run_id]);
  if (key === besideKey && box.querySelector('svg')) return relaid;
  besideKey = key;
  if (draw(box, r, false)) applyZoom(box, beside, true);
  return relaid;
}

/** Draws stage result `r`'s graph into `box` (the core's SVG, its legends); false when there is none
 *  to draw yet. `main`: the selected stage's (nodes are buttons to their steps), else a picture. */
function draw(box, r, main) {
  box.replaceChildren();
  if (r && !r.detail && (r.graph_nodes || r.traced === false)) {
    box.append(el('p', 'muted empty', r.detail_missing ? 'The graph is no longer in the worker (it was restarted); edit the program to run again.' : 'loading the graph…'));
    box.classList.add('empty');
    return false;
  }
  if (!r || !r.graph || !r.graph.nodes?.length) {
    box.append(el('p', 'muted empty', r?.ok ? 'This stage builds no graph: its backward pass needs no Delta DAG.' : 'No graph.'));
    box.classList.add('empty');
    return false;
  }
  box.classList.remove('empty');
  const legend = el('div', 'dag-legend');
  const keys = main ? [['shared', 'shared (referenced twice or more)'], ['current', 'current step'], ['done', 'visited']] : [['shared', 'shared (referenced twice or more)']];
  for (const [cls, text] of keys) {
    const item = el('span', 'lg');
    item.append(el('i', 'lg-' + cls));
    item.append(document.createTextNode(text));
    legend.append(item);
  }
  box.append(legend);
  if (!r.graph_svg) { box.append(el('p', 'muted', 'drawing…')); return false; }
  const svg = safeSvg(r.graph_svg);
  if (!svg) { box.append(el('p', 'muted', 'The graph could not be drawn.')); return false; }
  if (main) nameNodes(svg, r);
  else picture(svg, r);
  groupLegend(svg, legend, main);
  const stage = el('div', 'dag-stage');
  stage.append(svg);
  box.append(stage);
  return true;
}

/** The graph drawn beside: one image (its nodes are not steps of the selected stage), named by its
 *  count; its element ids prefixed so that they stay unique in the page. */
function picture(svg, r) {
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `The Delta DAG of ${r.id}: ${nodeCount(r)} nodes`);
  for (const e of svg.querySelectorAll('[id]')) e.id = 'beside-' + e.id;
  for (const e of svg.querySelectorAll('[marker-end]')) e.setAttribute('marker-end', e.getAttribute('marker-end').replace('url(#', 'url(#beside-'));
  for (const g of svg.querySelectorAll('.node')) {
    const d = g.dataset;
    g.prepend(svgEl('title', {}, [d.label && d.label !== d.ctor ? `${d.ctor} ${d.label}` : d.ctor, `node ${d.node}`, d.group && 'group ' + d.group].filter(Boolean).join(', ')));
  }
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
function groupLegend(svg, legend, main = true) {
  const keys = [...svg.querySelectorAll('.dag-group-key')];
  if (!keys.length) return;
  const box = el('div', 'dag-groups');
  if (main) box.setAttribute('data-testid', 'dag-groups');
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

/** Applies `view.zoom` (the selected stage's: `state`) to the drawing in `box`; `fit` first fits it. */
function applyZoom(box, view, fit = false) {
  const stage = box.querySelector('.dag-stage');
  const svg = stage?.querySelector('svg');
  if (!svg) return;
  if (fit) {
    const w = +svg.getAttribute('width'), h = +svg.getAttribute('height');
    // the legend takes the bottom strip; a large graph is shrunk as far as it needs to fit
    // and the groups' legend, where there is one, the top strip
    const top = (box.querySelector('.dag-groups')?.offsetHeight || 0) + (box.querySelector('.dag-groups') ? 6 : 0);
    const bottom = (box.querySelector('.dag-legend')?.offsetHeight || 18) + 8;   // two lines in a narrow panel
    const bw = box.clientWidth || 400, bh = Math.max(60, (box.clientHeight || 300) - bottom - top);
    const k = Math.min(1.4, Math.max(0.02, Math.min(bw / w, bh / h) * 0.95));
    view.zoom = { k, x: (bw - w * k) / 2, y: top + Math.max(4, (bh - h * k) / 2) };
  }
  const z = view.zoom;
  stage.style.transform = `translate(${z.x}px, ${z.y}px) scale(${z.k})`;
}

function zoomBy(box, view, f, cx, cy) {
  if (cx == null) { cx = box.clientWidth / 2; cy = box.clientHeight / 2; }
  const z = view.zoom;
  const k = Math.min(8, Math.max(0.02, z.k * f));
  view.zoom = { k, x: cx - (cx - z.x) * (k / z.k), y: cy - (cy - z.y) * (k / z.k) };
  applyZoom(box, view);
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
  panZoom(box, state, jump);
  panZoom($('dag-beside-view'), beside, null);
  $('dag-beside').addEventListener('change', e => { state.dagBeside = e.target.checked; render(state); });
  $('zoom-in').onclick = () => zoomBy(box, state, 1.25);
  $('zoom-out').onclick = () => zoomBy(box, state, 0.8);
  $('zoom-fit').onclick = () => applyZoom(box, state, true);
  window.addEventListener('resize', () => { applyZoom(box, state, true); applyZoom($('dag-beside-view'), beside, true); });
}

/** Drag to pan, wheel to zoom and a tooltip over the nodes of the drawing in `box`, whose pan and zoom
 *  are `view.zoom`; `jump(node)`, if given, is a click on a node. */
function panZoom(box, view, jump) {
  box.addEventListener('wheel', e => {
    if (!box.querySelector('svg')) return;
    e.preventDefault();
    const r = box.getBoundingClientRect();
    zoomBy(box, view, Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  box.addEventListener('pointerdown', e => {
    if (!box.querySelector('svg')) return;
    drag = { x: e.clientX, y: e.clientY, zx: view.zoom.x, zy: view.zoom.y, node: e.target.closest?.('.node') };
    box.setPointerCapture(e.pointerId);
    box.classList.add('dragging');
  });
  box.addEventListener('pointermove', e => {
    if (drag) { view.zoom.x = drag.zx + e.clientX - drag.x; view.zoom.y = drag.zy + e.clientY - drag.y; applyZoom(box, view); }
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
    // the tip is placed in the card (its positioned ancestor), whatever panel the node is in
    const card = (tip.offsetParent || box.parentElement).getBoundingClientRect();
    tip.style.left = (e.clientX - card.left + 14) + 'px';
    tip.style.top = (e.clientY - card.top + 14) + 'px';
    tip.hidden = false;
  });
  const end = () => { drag = null; box.classList.remove('dragging'); };
  // A press and release on one node without moving is a click on it (the box holds the pointer capture).
  box.addEventListener('pointerup', e => {
    const d = drag;
    end();
    if (jump && d?.node && Math.abs(e.clientX - d.x) + Math.abs(e.clientY - d.y) < 5) { d.node.focus({ preventScroll: true }); jump(d.node); }
  });
  box.addEventListener('pointercancel', end);
  box.addEventListener('pointerleave', () => { $('dag-tip').hidden = true; });
}

/** Pans (never zooms) so that node `e` is wholly in view, centred, when any part of it is outside. */
function panTo(state, e) {
  const box = $('dag');
  const b = box.getBoundingClientRect(), r = e.getBoundingClientRect();
  if (!b.width || (r.left >= b.left + 4 && r.right <= b.right - 4 && r.top >= b.top + 4 && r.bottom <= b.bottom - 4)) return;
  state.zoom.x += (b.left + b.width / 2) - (r.left + r.width / 2);
  state.zoom.y += (b.top + b.height / 2) - (r.top + r.height / 2);
  applyZoom(box, state);
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
