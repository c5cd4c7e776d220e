// Browser checks of the page's teaching and accessibility (issue 15): the first screen, a DAG and stepper
// that teach, the page's messages, and accessibility. Each check opens its own browser context.
import path from 'node:path';
import { mkdir, readFile } from 'node:fs/promises';
import { root } from './lib.mjs';

/** WCAG 2 contrast ratio of two `rgb(...)` colours. */
function contrast(fg, bg) {
  const lum = c => {
    const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map(Number).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}

export async function pageChecks({ check, assert, open, browser, RUNNING }) {
  const shots = path.join(root, 'e2e', 'screenshots');
  await mkdir(shots, { recursive: true });
  const stepsOf = p => p.evaluate(() => window.__cot.state.result.stages.find(s => s.id === window.__cot.state.selected)?.trace || []);
  const setSource = async (p, text) => {
    const before = await p.evaluate(() => window.__cot.lastSeq || 0);
    await p.evaluate(t => window.__cot.setSource(t), text);
    await p.waitForFunction(s => (window.__cot.lastSeq || 0) > s || window.__cot.state.diagnostics.length, before, { timeout: 10000 });
  };
  const beside = p => p.evaluate(() => {
    const a = document.querySelector('.program-card').getBoundingClientRect(), b = document.querySelector('.dag-card').getBoundingClientRect();
    return b.left >= a.right - 1 && Math.abs(b.top - a.top) < 2;
  });

  await check('first screen: a stage with a DAG and steps, the program beside the DAG, a two-line explanation with "more", a short help list, the cheat-sheet', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('', ctx);
    const sel = await p.evaluate(() => window.__cot.state.selected);
    assert(sel !== 'forward', 'the first screen is forward mode');
    await p.waitForSelector('#dag svg .node', { timeout: 10000 });
    await p.waitForSelector(`body[data-detail="${sel}"]`, { timeout: 10000 });
    const steps = (await stepsOf(p)).length;
    assert(steps > 1 && !(await p.$eval('#step-next', b => b.disabled)), `${sel}: ${steps} steps`);
    assert(await beside(p), 'at 1440 px the program and the DAG are stacked');
    // The help: a short list, one phrase a line.
    const items = await p.$$eval('#help li', ls => ls.map(l => l.textContent.replace(/\s+/g, ' ').trim()));
    assert(!(await p.$eval('#help', h => h.hidden)), 'no help on the first visit');
    assert(items.length >= 3 && items.length <= 7 && items.every(t => t.length <= 140), 'help items: ' + JSON.stringify(items));
    await p.screenshot({ path: path.join(shots, 'first-screen-1440.png') });
    // The explanation: two lines, then "more" shows it all, "less" folds it again.
    const ex = () => p.$eval('#st-explanation', e => ({ h: e.clientHeight, full: e.scrollHeight, lh: parseFloat(getComputedStyle(e).lineHeight) }));
    let e = await ex();
    assert(e.h <= 2 * e.lh + 2, `the explanation is ${e.h}px high (line ${e.lh}px)`);
    let note = 'explanation fits in two lines';
    if (e.full > e.h + 1) {
      await p.click('#st-more');
      const open2 = await ex();
      assert(open2.h >= open2.full - 1 && open2.h > e.h, 'more did not unfold the explanation');
      assert((await p.getAttribute('#st-more', 'aria-expanded')) === 'true', 'aria-expanded');
      await p.click('#st-more');
      e = await ex();
      assert(e.h <= 2 * e.lh + 2, 'less did not fold it');
      note = `explanation ${open2.h}px unfolded, ${e.h}px folded`;
    } else assert(await p.$eval('#st-more', b => b.hidden), '"more" shown with nothing more to show');
    // The cheat-sheet: one click, a modal dialog; Esc closes it and the focus goes back.
    await p.click('#lang-btn');
    await p.waitForSelector('#cheatsheet[open]');
    const cheat = await p.textContent('#cheatsheet');
    assert(/def main/.test(cheat) && /map2/.test(cheat) && /case e of/.test(cheat), 'cheat-sheet: ' + cheat.slice(0, 80));
    await p.keyboard.press('Escape');
    assert(!(await p.$eval('#cheatsheet', d => d.open)), 'Esc did not close the cheat-sheet');
    assert((await p.evaluate(() => document.activeElement?.id)) === 'lang-btn', 'the focus did not return');
    // At 1280 px the program is still beside the DAG.
    await p.setViewportSize({ width: 1280, height: 800 });
    assert(await beside(p), 'at 1280 px the program and the DAG are stacked');
    // A program the default stage refuses (an array input): the first screen is a stage that ran, with steps.
    const arr = await open('#src=' + encodeURIComponent('input [1.0, 2.0, 3.0]\ndef main a = sum (map (\\x -> x * x) a)\n'), ctx);
    await arr.waitForSelector('#dag svg .node', { timeout: 10000 });
    const first = await arr.evaluate(() => { const s = window.__cot.state.result.stages.find(s => s.id === window.__cot.state.selected); return { id: s.id, ok: s.ok, steps: s.trace_len }; });
    assert(first.ok && first.steps > 0, 'array program opens on ' + JSON.stringify(first));
    await ctx.close();
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const q = await open('', phone);
    await q.waitForSelector('#dag svg .node', { timeout: 10000 });
    await q.screenshot({ path: path.join(shots, 'first-screen-390.png') });
    await phone.close();
    return `${sel}, ${steps} steps (an array program: ${first.id}), ${items.length} help items; ${note}; screenshots e2e/screenshots/first-screen-1440.png, first-screen-390.png`;
  });

  await check('DAG: nodes are named buttons with their whole label; a click or Enter jumps to the node\'s step; the current node is panned into view', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('#src=' + encodeURIComponent(RUNNING) + '&stage=krawiec/monadic', ctx);
    await p.waitForSelector('body[data-detail="krawiec/monadic"]', { timeout: 10000 });
    await p.waitForSelector('#dag svg .node');
    const nodes = await p.$$eval('#dag .node', ns => ns.map(n => ({ id: n.dataset.node, tab: n.getAttribute('tabindex'), role: n.getAttribute('role'),
      name: n.getAttribute('aria-label') || '', title: n.querySelector('title')?.textContent || '', label: n.dataset.label, ctor: n.dataset.ctor })));
    assert(nodes.length > 1, 'nodes: ' + nodes.length);
    for (const n of nodes) {
      assert(n.tab === '0' && n.role === 'button', `node ${n.id} is not a focusable button`);
      assert(n.name.includes(n.label || n.ctor) && n.title.includes(n.label || n.ctor), `node ${n.id}: name "${n.name}", title "${n.title}"`);
    }
    const steps = await stepsOf(p);
    // Click a node that a later step visits: the stepper goes there and the node is current.
    const target = steps.map((s, i) => [s.node, i]).filter(([n, i]) => n != null && i > 0).pop();
    assert(target, 'no step visits a node');
    await p.click(`#dag-n${target[0]}`);
    let cur = await p.evaluate(() => ({ step: window.__cot.state.step, node: document.querySelector('#dag').dataset.currentNode }));
    assert(String(cur.node) === String(target[0]) && steps[cur.step].node === target[0], `clicked node ${target[0]}, now step ${cur.step} at ${cur.node}`);
    // Keyboard: focus the first step's node, Enter.
    const first = steps.find(s => s.node != null && s.node !== target[0]);
    await p.focus(`#dag-n${first.node}`);
    await p.keyboard.press('Enter');
    const byKey = await p.evaluate(() => document.querySelector('#dag').dataset.currentNode);
    assert(String(byKey) === String(first.node), `Enter on node ${first.node} went to ${byKey}`);
    // Zoom in far and step to the end: the current node is panned into the view.
    for (let i = 0; i < 6; i++) await p.click('#zoom-in');
    await p.click('#step-first');
    await p.click('#step-last');
    const inView = await p.evaluate(() => {
      const b = document.querySelector('#dag').getBoundingClientRect(), r = document.querySelector('#dag .node.current').getBoundingClientRect();
      return r.left >= b.left - 1 && r.right <= b.right + 1 && r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
    });
    assert(inView, 'the current node is outside the view after the last step');
    // Labels the drawing shortens are whole in the node's title (the quaternion example has long ones).
    await ctx.close();
    return `${nodes.length} nodes named; a click went to step ${cur.step + 1}`;
  });

  await check('DAG: the parallel stage\'s job colours have a legend over the view', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('', ctx);
    const ex = await p.evaluate(() => window.__cot.state.examples.find(e => e.name === 'dualrev-parallel')?.source);
    assert(ex, 'no dualrev-parallel example');
    await setSource(p, ex);
    await p.click('[data-stage="dualrev/parallel"]');
    await p.waitForSelector('body[data-detail="dualrev/parallel"]', { timeout: 10000 });
    await p.waitForSelector('#dag svg .node');
    const grouped = await p.$$eval('#dag .node.grp', ns => ns.length);
    const legend = await p.$$eval('[data-testid="dag-groups"] .lg', ls => ls.map(l => ({ text: l.textContent, bg: getComputedStyle(l.querySelector('i')).backgroundColor })));
    assert(grouped > 0, 'the parallel stage draws no job groups');
    assert(legend.length >= 2 && legend.every(l => /job/.test(l.text)), 'legend: ' + JSON.stringify(legend));
    // each swatch has the tint of its group's nodes
    const tints = await p.$$eval('#dag .node.grp', ns => [...new Set(ns.map(n => getComputedStyle(n.querySelector('rect')).fill))]);
    assert(legend.every(l => tints.includes(l.bg)), `swatches ${legend.map(l => l.bg)} vs tints ${tints}`);
    await ctx.close();
    return legend.map(l => l.text).join('; ');
  });

  await check('chad/arrays draws the Bags of the gather (9 BOne\'s) grouped by build, and sparse cotangents step as trees with pruned zeros', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('', ctx);
    const ex = await p.evaluate(() => window.__cot.state.examples.find(e => e.name === 'chad-e10-gather')?.source);
    assert(ex, 'no chad-e10-gather example');
    await setSource(p, ex);
    await p.click('[data-stage="chad/arrays"]');
    await p.waitForSelector('body[data-detail="chad/arrays"]', { timeout: 10000 });
    await p.waitForSelector('#dag svg .node', { timeout: 10000 });
    const ones = await p.$$eval('#dag .node[data-ctor="BOne"]', ns => ns.length);
    assert(ones === 9, `${ones} BOne nodes drawn`);
    // a BOne is a button to the step that added it into its cell
    const one = await p.$eval('#dag .node[data-ctor="BOne"]', n => n.dataset.node);
    await p.click(`#dag-n${one}`);
    const went = await p.evaluate(() => { const s = window.__cot.state; return s.result.stages.find(x => x.id === s.selected).trace[s.step]; });
    assert(String(went?.node) === one && went.kind === 'one', `node ${one} went to ${JSON.stringify(went)}`);
    const legend = await p.$$eval('[data-testid="dag-groups"] .lg', ls => ls.map(l => l.textContent));
    assert(legend.length === 2 && legend.every(t => /^build @/.test(t)), 'legend: ' + JSON.stringify(legend));
    // chad/mutable on a nested pair: the cell's parts as indented rows, the unused pair pruned
    await setSource(p, 'def main p = snd p * fst (fst p)\ninput ((2.0, 5.0), 3.0)\n');
    await p.click('[data-stage="chad/mutable"]');
    await p.waitForSelector('body[data-detail="chad/mutable"]', { timeout: 10000 });
    const at = (await stepsOf(p)).findIndex(s => s.state.some(([k]) => k === 'p ▸ fst') && s.state.some(([, v]) => v === '0 (pruned)'));
    assert(at >= 0, 'no step with a pruned part');
    await p.evaluate(i => window.__cot.goStep(i), at);
    const rows = await p.$$eval('#step-state td.tree-part', tds => tds.map(t => ({ text: t.textContent, depth: t.dataset.depth, pad: parseFloat(getComputedStyle(t).paddingLeft), value: t.nextElementSibling?.textContent })));
    assert(rows.some(r => r.text === '▸ fst' && r.value === '0 (pruned)'), 'rows: ' + JSON.stringify(rows));
    assert(rows.length >= 2 && rows.every(r => r.pad > 0), 'tree rows are not indented: ' + JSON.stringify(rows));
    await ctx.close();
    return `${ones} BOne nodes; groups ${legend.join('; ')}; ${rows.length} tree rows at step ${at + 1}`;
  });

  await check('chad/monadic draws its backpropagator closure tree, with the cells each writes, and a node is a button to its step', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('', ctx);
    await setSource(p, 'def main (x, y) = let z = x * y in z + x\ninput (3.0, 5.0)\n');
    await p.click('[data-stage="chad/monadic"]');
    await p.waitForSelector('body[data-detail="chad/monadic"]', { timeout: 10000 });
    await p.waitForSelector('#dag svg .node', { timeout: 10000 });
    const kinds = await p.$$eval('#dag .node', ns => ns.map(n => n.dataset.ctor));
    const count = k => kinds.filter(c => c === k).length;
    // let z → (+ → z, x), (* → x, y): 7 backpropagators and the cells of x, y and z
    assert(kinds.length === 10 && count('var') === 4 && count('op') === 2 && count('let') === 1 && count('cell') === 3, 'nodes: ' + JSON.stringify(kinds));
    // a variable's backpropagator is a button to its `one x += …` step
    const nodes = await p.$$eval('#dag .node[data-ctor="var"]', ns => ns.map(n => n.dataset.node));
    const last = nodes[nodes.length - 1];
    await p.click(`#dag-n${last}`);
    const went = await p.evaluate(() => { const s = window.__cot.state; return s.result.stages.find(x => x.id === s.selected).trace[s.step]; });
    assert(String(went?.node) === last && went.kind === 'one', `node ${last} went to ${JSON.stringify(went)}`);
    await ctx.close();
    return `${kinds.length} nodes; node ${last} went to "${went.note}"`;
  });

  await check('stepper: a clickable list of every step marking the cotangents each changes, a speed control, and why a stage has no steps', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('#src=' + encodeURIComponent(RUNNING) + '&stage=krawiec/monadic', ctx);
    await p.waitForSelector('body[data-detail="krawiec/monadic"]', { timeout: 10000 });
    const steps = await stepsOf(p);
    await p.waitForSelector('[data-testid="step-list"][data-ready="1"]');
    const items = await p.$$eval('[data-testid="step-list"] li[data-step]', ls => ls.map(l => l.textContent));
    assert(items.length === steps.length, `${items.length} listed of ${steps.length} steps`);
    assert(items.some(t => t.includes('●')), 'no step is marked as changing a cotangent');
    // Click the third step in the list.
    await p.click('[data-testid="step-list"] li[data-step="2"]');
    assert((await p.evaluate(() => window.__cot.state.step)) === 2, 'the list click did not go to step 3');
    assert((await p.getAttribute('[data-testid="step-list"] li[data-step="2"]', 'aria-current')) === 'step', 'current step not marked in the list');
    // The cotangent table marks the rows the step changed, exactly those whose value differs from the step before.
    const want = await p.evaluate(() => {
      const t = window.__cot.state.result.stages.find(s => s.id === 'krawiec/monadic').trace;
      const before = new Map(t[1].state.map(([k, v]) => [k, JSON.stringify(v)]));
      return t[2].state.filter(([k, v]) => before.get(k) !== JSON.stringify(v)).map(([k]) => k);
    });
    const marked = await p.$$eval('#step-state tr.changed td.key', tds => tds.map(t => t.textContent));
    assert(JSON.stringify(marked) === JSON.stringify(want), `marked ${marked} but changed ${want}`);
    // Speed: fast play reaches the end quickly; the select is named.
    assert((await p.getAttribute('#step-speed', 'aria-label')) === 'Play speed', 'speed control unnamed');
    await p.selectOption('#step-speed', '120');
    await p.click('#step-first');
    const t0 = Date.now();
    await p.click('#step-play');
    await p.waitForFunction(n => window.__cot.state.step === n - 1 && !window.__cot.state.playing, steps.length, { timeout: 10000 });
    const fast = Date.now() - t0;
    assert(fast < (steps.length - 1) * 450, `fast play took ${fast} ms for ${steps.length} steps`);
    // A stage without steps says why.
    await p.click('[data-stage="forward"]');
    const why = await p.textContent('#step-note');
    assert(/no backward pass|records no backward-pass steps/.test(why), 'forward says: ' + why);
    const other = await p.evaluate(() => window.__cot.state.result.stages.find(s => s.ok && !s.trace_len && s.id !== 'forward')?.id);
    let why2 = '';
    if (other) {
      await p.click(`[data-stage="${other}"]`);
      why2 = await p.textContent('#step-note');
      assert(why2.length > 30, `${other} says: ${why2}`);
    }
    await ctx.close();
    return `${steps.length} steps listed; fast play ${fast} ms; ${other || 'no other stage'} without steps: "${why2.slice(0, 50)}…"`;
  });

  await check('messages: no CLI wording, the bad Input point field marked, no green verdict on NaN, greyed badges while the program has errors', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('#src=' + encodeURIComponent('def main x = x * x\n') + '&stage=forward', ctx);
    await p.waitForSelector('[data-testid="diagnostics"] .diag');
    const diag = await p.textContent('[data-testid="diagnostics"]');
    assert(!/--at|--seed/.test(diag) && /Input point/.test(diag), 'diagnostic: ' + diag);
    const body = await p.textContent('body');
    assert(!/--at\b/.test(body), 'the page says --at');
    // A bad input point: the field is marked invalid and says why; fixed, the mark goes.
    await setSource(p, RUNNING);
    await p.fill('#in-at', '(1.0, oops)');
    await p.waitForFunction(() => document.querySelector('#in-at').getAttribute('aria-invalid') === 'true', null, { timeout: 10000 });
    const err = await p.evaluate(() => ({ text: document.querySelector('#in-at-error').textContent, shown: !document.querySelector('#in-at-error').hidden,
      border: getComputedStyle(document.querySelector('#in-at')).borderColor, seed: document.querySelector('#in-seed').getAttribute('aria-invalid') }));
    assert(err.shown && /Input point/.test(err.text) && !/--at/.test(err.text), 'field message: ' + JSON.stringify(err));
    assert(err.border === 'rgb(180, 35, 24)', 'the field is not drawn as invalid: ' + err.border);
    assert(err.seed == null, 'the seed field is marked too');
    await p.fill('#in-at', '(1.0, 2.0)');
    await p.waitForFunction(() => !document.querySelector('#in-at').hasAttribute('aria-invalid'), null, { timeout: 10000 });
    await p.fill('#in-at', '');
    // NaN: no green verdict, no ✓.
    await setSource(p, 'input 1.0\ndef main x = x * (0.0 / 0.0)\n');
    await p.waitForFunction(() => /nan/.test(document.querySelector('[data-testid="gradient"]').textContent));
    const greens = await p.$$eval('[data-testid="gradient"] .verdict.ok', vs => vs.map(v => v.textContent));
    assert(greens.length === 0, 'green verdicts on NaN: ' + greens);
    const ticks = await p.$$eval('.badge', bs => bs.filter(b => b.textContent === '✓').length);
    assert(ticks === 0, `${ticks} ✓ badges on a NaN gradient`);
    // While the program has errors: every badge greyed, none ✓.
    await setSource(p, RUNNING);
    await p.waitForFunction(() => [...document.querySelectorAll('.badge')].some(b => b.textContent === '✓'));
    await setSource(p, RUNNING + 'def broken = (\n');
    await p.waitForSelector('[data-testid="diagnostics"] .diag');
    const badges = await p.$$eval('.badge', bs => bs.map(b => [b.textContent, b.className]));
    assert(badges.length > 1 && badges.every(([t, c]) => t !== '✓' && /stale|none/.test(c)), 'badges: ' + JSON.stringify(badges.slice(0, 5)));
    await ctx.close();
    return `"${diag.replace(/\s+/g, ' ').slice(0, 70)}"; field: "${err.text.slice(0, 60)}"`;
  });

  await check('views: a side-by-side diff of any two stages with "changed lines only", every counter explained on hover, failed stages marked in the cost view', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('#src=' + encodeURIComponent(RUNNING) + '&stage=krawiec/monadic', ctx);
    await p.check('#diff-toggle');
    const bases = await p.$$eval('#diff-base option', os => os.map(o => o.value));
    assert(bases.length > 10 && !bases.includes('krawiec/monadic') && bases.includes('dualrev/tape'), 'bases: ' + bases);
    await p.selectOption('#diff-base', 'dualrev/tape');
    // the base ran unshown (not printed): its program is loaded from the worker on demand
    await p.waitForSelector('[data-testid="diff-table"]', { timeout: 15000 });
    const heads = await p.$$eval('[data-testid="diff-table"] th', ths => ths.map(t => t.textContent).filter(Boolean));
    assert(JSON.stringify(heads) === JSON.stringify(['dualrev/tape', 'krawiec/monadic']), 'columns: ' + heads);
    // the two columns hold the two programs, line by line
    const cols = await p.$$eval('[data-testid="diff-table"] tr', trs => trs.slice(1).map(tr => [...tr.querySelectorAll('td.code')].map(td => td.textContent)));
    const progs = await p.evaluate(() => ['dualrev/tape', 'krawiec/monadic'].map(id => window.__cot.state.result.stages.find(s => s.id === id).program));
    const left = cols.filter(c => c.length === 2).map(c => c[0]).filter(x => x !== '');
    assert(left.join('\n') === progs[0].split('\n').filter(x => x !== '').join('\n'), 'the left column is not dualrev/tape');
    const all = cols.length;
    await p.check('#diff-changed');
    const rows = await p.$$eval('[data-testid="diff-table"] tr', trs => trs.slice(1).map(tr => tr.className));
    assert(rows.every(c => c === 'changed' || c === 'skip') && rows.includes('changed'), 'changed-only rows: ' + rows.slice(0, 8));
    assert(rows.length < all || !progs[0].split('\n').some(l => progs[1].split('\n').includes(l)), 'changed lines only hid nothing');
    await p.uncheck('#diff-changed');
    await p.uncheck('#diff-toggle');
    // Every counter heading and bar has a title that explains it.
    const titles = await p.$$eval('#costs .bar-counter', ts => ts.map(t => [t.textContent, t.querySelector('title')?.textContent || '']));
    assert(titles.length >= 3 && titles.every(([n, t]) => t.length > n.split(' ')[0].length + 10), 'counter titles: ' + JSON.stringify(titles.filter(([n, t]) => t.length <= n.length + 10)));
    // The bars are updated in place when only the counts change: each shows its stage's count of the
    // last run, and the selected stage's bars are marked.
    await setSource(p, RUNNING.replace('x * z', 'x * z * z'));
    await p.click('[data-stage="dualrev/tape"]');
    const bars = await p.evaluate(() => {
      const fmt = n => n >= 1e6 ? (n / 1e6).toPrecision(3) + 'M' : n >= 1e4 ? (n / 1e3).toPrecision(3) + 'k' : String(n);
      const stages = new Map(window.__cot.state.result.stages.map(s => [s.id, s]));
      return [...document.querySelectorAll('#costs g.bar')].map(g => {
        const counter = g.querySelector('title').textContent.split(' = ')[0].split(': ')[1];
        const c = stages.get(g.dataset.bar).cost;
        const v = counter in c && counter !== 'counters' ? c[counter] : c.counters?.[counter] ?? 0;
        return [g.dataset.bar, g.querySelector('.bar-value').textContent === fmt(v), g.classList.contains('selected')];
      });
    });
    assert(bars.length > 40 && bars.every(b => b[1]), 'bars whose value is not the last run\'s: ' + JSON.stringify(bars.filter(b => !b[1]).slice(0, 5)));
    assert(bars.every(([id, , sel]) => sel === (id === 'dualrev/tape')) && bars.some(b => b[2]), 'selected bars: ' + JSON.stringify(bars.filter(b => b[2]).slice(0, 5)));
    // A program some stages refuse: they are listed in the cost view with their reason.
    const DOT = 'input ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])\ndef main (a, b) = sum (map2 (\\x y -> x * y) a b)\n';
    await setSource(p, DOT);
    const failed = await p.evaluate(() => window.__cot.state.result.stages.filter(s => !s.ok).map(s => s.id));
    assert(failed.length > 0, 'no stage refused the array program');
    await p.waitForSelector('[data-testid="cost-failed"]');
    const marked = await p.$$eval('[data-testid="cost-failed"] button', bs => bs.map(b => [b.dataset.bar, b.title]));
    assert(JSON.stringify(marked.map(m => m[0]).sort()) === JSON.stringify(failed.slice().sort()) && marked.every(m => /did not run: ./.test(m[1])), 'marked: ' + JSON.stringify(marked).slice(0, 200));
    await p.click(`[data-testid="cost-failed"] button[data-bar="${failed[0]}"]`);
    assert((await p.evaluate(() => window.__cot.state.selected)) === failed[0], 'a click on a failed stage did not select it');
    await ctx.close();
    return `${bases.length} stages to compare with; ${all} rows, changed only ${rows.length}; ${titles.length} counters explained; ${failed.length} failed stages marked`;
  });

  await check('accessibility: editor focus ring and Esc-then-Tab hint, every button named, contrast >= 4.5:1, a CSP without unsafe-inline and no violation', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    await ctx.addInitScript(() => {
      window.__csp = [];
      document.addEventListener('securitypolicyviolation', e => window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`));
    });
    const p = await open('#src=' + encodeURIComponent(RUNNING) + '&stage=krawiec/monadic', ctx);
    const logged = [];
    p.on('console', m => { if (/Content.Security.Policy/i.test(m.text())) logged.push(m.text()); });
    await p.waitForSelector('#dag svg .node');
    const csp = await p.getAttribute('meta[http-equiv="Content-Security-Policy"]', 'content');
    assert(!/unsafe-inline/.test(csp), 'CSP: ' + csp);
    // The editor: a focus ring, and the hint says how to leave it; Esc then Tab leaves it.
    await p.click('.cm-content');
    const ring = await p.$eval('.cm-editor', e => { const s = getComputedStyle(e); return `${s.outlineStyle} ${s.outlineWidth}`; });
    assert(/solid [1-9]/.test(ring), 'editor outline: ' + ring);
    const hint = await p.evaluate(() => { const h = document.querySelector('#editor-hint'); const r = h.getBoundingClientRect(); return { text: h.textContent, visible: r.height > 0 && getComputedStyle(h).visibility !== 'hidden' }; });
    assert(hint.visible && /Esc/.test(hint.text) && /Tab/.test(hint.text), 'hint: ' + JSON.stringify(hint));
    await p.keyboard.press('Escape');
    await p.keyboard.press('Tab');
    const left = await p.evaluate(() => !document.activeElement.closest('#editor'));   // the editor's shadow host
    assert(left, 'Esc then Tab did not leave the editor');
    // Every button (and role=button) has an accessible name with a letter in it.
    const cdp = await ctx.newCDPSession(p);
    const { nodes } = await cdp.send('Accessibility.getFullAXTree');
    const buttons = nodes.filter(n => !n.ignored && ['button', 'PopUpButton', 'combobox', 'tab'].includes(n.role?.value));
    const unnamed = buttons.filter(n => !/\p{L}/u.test(n.name?.value || '')).map(n => `${n.role.value} "${n.name?.value || ''}"`);
    await cdp.detach();
    assert(buttons.length > 10 && unnamed.length === 0, `${unnamed.length} of ${buttons.length} buttons without a name: ${unnamed.slice(0, 6)}`);
    // Contrast of key text against what is behind it.
    await p.click('#diff-toggle'); await p.click('#diff-toggle');
    const samples = await p.evaluate(() => {
      const bgOf = e => {
        for (let x = e; x; x = x.parentElement || x.getRootNode().host) { const c = getComputedStyle(x).backgroundColor; if (c && !/rgba\(.*, 0\)$/.test(c) && c !== 'transparent') return c; }
        return 'rgb(255, 255, 255)';
      };
      const pick = sel => { const e = document.querySelector(sel) || document.querySelector('#editor').shadowRoot.querySelector(sel); return e ? { sel, fg: getComputedStyle(e).color, bg: bgOf(e) } : null; };
      return ['.cm-lineNumbers .cm-gutterElement:not(:first-child)', '.program .gutter', '.muted', '.stage-sub', '.nav .hint', '.editor-hint', '.tagline',
        '.status', '.panel-title', '.card-title', '.badge', '.step-pos', '.foot', '.dag-legend', '.tok-comment', '.stage-title', '.explanation'].map(pick).filter(Boolean);
    });
    const low = samples.map(s => ({ ...s, ratio: contrast(s.fg, s.bg) })).filter(s => s.ratio < 4.5);
    assert(samples.length >= 12 && low.length === 0, 'low contrast: ' + low.map(s => `${s.sel} ${s.fg} on ${s.bg} = ${s.ratio.toFixed(2)}`).join('; '));
    // Use the page a little (typing over a selection and at the caret, a stage with a graph, the complexity
    // plot's legend), then: no violation.
    await p.click('.cm-content');
    await p.keyboard.press('Control+A');
    await p.keyboard.type('input (1.0, 2.0)\ndef main (x, y) = x * y');
    await p.keyboard.press('Home');
    await p.keyboard.type('  ');
    await p.keyboard.press('Shift+End');
    await p.keyboard.insertText('def main (x, y) = y * x');
    await p.waitForFunction(() => window.__cot.source().endsWith('def main (x, y) = y * x'));
    await p.click('[data-stage="dualrev/tape"]');
    await p.waitForSelector('body[data-detail="dualrev/tape"]', { timeout: 10000 });
    await setSource(p, 'param n = 4\ninput 1.5\ndef double k x = if k == 0 then x else double (k - 1) (x + x)\ndef main x = double n x\n');
    await p.fill('#cx-from', '1');
    await p.fill('#cx-to', '4');
    await p.click('#cx-run');
    await p.waitForSelector('#cx-plot .cx-legend .cx-swatch', { timeout: 20000 });
    const legendFill = await p.$eval('#cx-plot .cx-legend .cx-swatch', t => getComputedStyle(t).backgroundColor);
    assert(!/^(rgba\(0, 0, 0, 0\)|transparent|rgb\(0, 0, 0\))$/.test(legendFill), 'the plot legend lost its colour: ' + legendFill);
    const violations = [...(await p.evaluate(() => window.__csp)), ...logged];
    assert(violations.length === 0, 'CSP violations: ' + violations.join('; '));
    const lineNo = samples.find(s => s.sel.startsWith('.cm-lineNumbers'));
    await ctx.close();
    return `${buttons.length} buttons named; ${samples.length} contrasts >= 4.5 (line numbers ${lineNo ? contrast(lineNo.fg, lineNo.bg).toFixed(2) : '?'}:1)`;
  });

  await check('views: every chain heading and the stage\'s paper link to the paper (arXiv or DOI)', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await open('#src=' + encodeURIComponent(RUNNING) + '&stage=krawiec/monadic', ctx);
    const PAPER = /^https:\/\/(arxiv\.org\/abs\/\d{4}\.\d{4,5}|doi\.org\/10\.\d{4,}\/\S+)$/;
    const chains = await p.evaluate(() => window.__cot.state.chains.map(c => ({ id: c.id, url: c.url, citation: c.citation })));
    const heads = await p.$$eval('#stage-list .group', gs => gs.map(g => {
      const a = g.querySelector('.group-name a');
      return { id: g.dataset.chain, href: a?.getAttribute('href') || '', target: a?.target, rel: a?.rel || '', title: a?.title || '' };
    }));
    assert(chains.length >= 6 && heads.length === chains.length, `${heads.length} headings for ${chains.length} chains`);
    for (const c of chains) {
      const h = heads.find(x => x.id === c.id);
      assert(h && h.href === c.url && PAPER.test(h.href), `chain ${c.id}: heading links to ${h?.href}, the core says ${c.url}`);
      assert(h.target === '_blank' && /noopener/.test(h.rel) && h.title.includes(c.citation.slice(0, 20)), `chain ${c.id}: ${JSON.stringify(h)}`);
    }
    // The stage heading's paper follows the selected stage's chain.
    const paperOf = async id => {
      await p.click(`[data-stage="${id}"]`);
      await p.waitForSelector(`body[data-detail="${id}"]`, { timeout: 10000 });
      return p.$eval('#st-paper', a => ({ tag: a.tagName, href: a.getAttribute('href'), text: a.textContent }));
    };
    const notes = [];
    for (const id of ['krawiec/monadic', 'dualrev/tape', 'unf/pe']) {
      const want = await p.evaluate(i => window.__cot.state.chains.find(c => c.stages.includes(i)).url, id);
      const got = await paperOf(id);
      assert(got.tag === 'A' && got.href === want && PAPER.test(got.href) && got.text.length > 3, `${id}: ${JSON.stringify(got)} (want ${want})`);
      notes.push(`${id} → ${got.href}`);
    }
    await ctx.close();
    return `${heads.length} chain headings linked; ` + notes.join('; ');
  });

  await check('complexity: a least-squares slope per stage (the measured exponent) in a legend that is not cut', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    // x used once a step: no stage is exponential, so the sweep is quick and every stage stays
    const LOOP = 'param n = 8\ninput 0.7\ndef loop k x = if k == 0 then x else loop (k - 1) (sin x + 0.5)\ndef main x = loop n x\n';
    const p = await open('#src=' + encodeURIComponent(LOOP) + '&stage=dualrev/tape', ctx);
    await p.waitForSelector('#cx-run');
    await p.fill('#cx-from', '16');
    await p.fill('#cx-to', '256');
    await p.click('#cx-run');
    await p.waitForFunction(() => window.__cot.state.complexity.runs.length >= 8 && document.querySelector('#cx-plot .cx-legend'), null, { timeout: 60000 }).catch(async e => {
      throw new Error(e.message.split('\n')[0] + ': ' + JSON.stringify(await p.evaluate(() => window.__cot.state.complexity.runs.map(r => [r.value, r.error, Object.keys(r.costs).length]))));
    });
    await p.locator('#cx-plot').scrollIntoViewIfNeeded();
    const r = await p.evaluate(() => {
      const { runs, counter } = window.__cot.state.complexity;
      const plot = document.querySelector('#cx-plot').getBoundingClientRect();
      const items = [...document.querySelectorAll('#cx-plot .cx-legend')].map(li => {
        const b = li.getBoundingClientRect();
        const cut = [...li.children].some(c => c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1);
        return { id: li.dataset.stage, slope: li.dataset.slope == null ? null : +li.dataset.slope, text: li.textContent,
          inside: b.left >= plot.left - 1 && b.right <= plot.right + 1 && b.top >= plot.top - 1 && b.bottom <= plot.bottom + 1 && b.right <= innerWidth, cut };
      });
      return { runs, counter, items, lines: document.querySelectorAll('#cx-plot polyline').length };
    });
    assert(r.items.length === r.lines && r.lines >= 10, `${r.items.length} legend rows for ${r.lines} lines`);
    const bad = r.items.filter(i => !i.inside || i.cut);
    assert(bad.length === 0, 'legend rows cut or outside the plot: ' + bad.map(i => i.id).join(', '));
    // The test's own least squares over the same points (log counter against log n).
    const own = id => {
      const pts = r.runs.filter(x => !x.error && x.costs[id]).map(x => [x.value, (r.counter in x.costs[id] && r.counter !== 'counters' ? x.costs[id][r.counter] : x.costs[id].counters?.[r.counter] ?? 0)]).filter(([x, y]) => x > 0 && y > 0).map(([x, y]) => [Math.log(x), Math.log(y)]);
      const mx = pts.reduce((a, q) => a + q[0], 0) / pts.length, my = pts.reduce((a, q) => a + q[1], 0) / pts.length;
      return pts.reduce((a, q) => a + (q[0] - mx) * (q[1] - my), 0) / pts.reduce((a, q) => a + (q[0] - mx) ** 2, 0);
    };
    for (const i of r.items) {
      assert(i.slope != null && Number.isFinite(i.slope) && i.text.includes(i.slope.toFixed(2)), `${i.id}: legend "${i.text}"`);
      const k = own(i.id);
      assert(Math.abs(k - i.slope) < 1e-6, `${i.id}: legend slope ${i.slope}, least squares ${k}`);
    }
    // A loop of n steps: forward mode's steps grow linearly.
    await p.locator('#cx-plot').screenshot({ path: path.join(shots, 'complexity-slopes.png') });
    const fwd = r.items.find(i => i.id === 'forward');
    assert(fwd && fwd.slope > 0.8 && fwd.slope < 1.2, 'forward: ' + JSON.stringify(fwd));
    await ctx.close();
    const range = r.items.map(i => i.slope);
    return `${r.items.length} stages, exponents ${Math.min(...range).toFixed(2)}–${Math.max(...range).toFixed(2)} (forward ${fwd.slope.toFixed(2)})`;
  });

  // Issue 12's page: the array paper's chain (Smeding et al.), on its own examples.
  const example = name => readFile(path.join(root, 'examples', name + '.cot'), 'utf8');
  const openAt = async (ctx, src, stage) => {
    const p = await open('#src=' + encodeURIComponent(src) + '&stage=' + stage, ctx);
    await p.waitForSelector(`body[data-detail="${stage}"]`, { timeout: 10000 });
    return p;
  };
  const pick = (p, stage) => p.click(`[data-testid="stage-list"] [data-stage="${stage}"]`).then(() => p.waitForSelector(`body[data-detail="${stage}"]`, { timeout: 10000 }));

  await check('arrays: the scalar Delta of arrays/dual-numbers beside the array Delta of arrays/dual-arrays, each headed by its node count, with a toggle', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await openAt(ctx, await example('arrays-dot'), 'arrays/dual-arrays');
    await p.waitForSelector('#dag svg .node');
    await p.waitForSelector('#dag-beside-view svg .node', { timeout: 10000 });
    const heads = await p.$$eval('.dag-pane:not([hidden]) .dag-head .dag-count', hs => hs.map(h => h.textContent).join(' · '));
    // n = 3: the scalar Delta's 5n+1 constructors (footnote 18) with its 6 Input nodes and a Zero; the
    // array Delta's 12 nodes (2 of them Inputs) at any n
    assert(heads === 'scalar Delta: 23 nodes · array Delta: 12 nodes', 'headings: ' + heads);
    // the one drawing code: both panels are the core's SVG, every node drawn
    const drawn = await p.evaluate(() => [document.querySelectorAll('#dag-beside-view svg.dag .node').length, document.querySelectorAll('#dag svg.dag .node').length]);
    assert(drawn[0] === 23 && drawn[1] === 12, 'nodes drawn: ' + drawn);
    const layout = () => p.evaluate(() => {
      const a = document.querySelector('#dag-beside-view').getBoundingClientRect(), b = document.querySelector('#dag').getBoundingClientRect();
      const card = document.querySelector('.dag-card').getBoundingClientRect(), prog = document.querySelector('.program-card').getBoundingClientRect();
      return { beside: a.width > 0 && a.right <= b.left + 1 && Math.abs(a.top - b.top) < 2, w: b.width, card: card.width, under: card.top >= prog.bottom - 1 };
    });
    const on = await layout();
    // two drawings side by side, the card under the program to have the width
    assert(on.beside && on.under && on.w > 0.4 * on.card, 'the two DAGs are not side by side: ' + JSON.stringify(on));
    const ids = await p.$$eval('[id]', es => es.map(e => e.id));
    assert(new Set(ids).size === ids.length, 'duplicate element ids: ' + ids.filter((x, i) => ids.indexOf(x) !== i).slice(0, 5));
    // the selected stage's DAG still steps: the current node is lit in it, not in the scalar one
    await p.click('#step-last');
    assert(await p.$('#dag .node.current') && !(await p.$('#dag-beside-view .node.current')), 'the step is not lit in the array DAG only');
    // the toggle: off gives the array DAG the whole width, on brings the scalar one back
    await p.uncheck('#dag-beside');
    assert(await p.$eval('#dag-beside-pane', e => e.hidden) && await p.$eval('#dag-main-head', e => e.hidden), 'the toggle did not hide the scalar DAG');
    const off = await layout();
    assert(off.w > 0.9 * off.card, `the array DAG is ${off.w}px wide alone in a card of ${off.card}px`);
    await p.check('#dag-beside');
    await p.waitForSelector('#dag-beside-view svg .node');
    // a stage with no pair has no toggle
    await pick(p, 'arrays/dual-numbers');
    assert(await p.$eval('#dag-beside-toggle', e => e.hidden) && await p.$eval('#dag-beside-pane', e => e.hidden), 'a toggle on arrays/dual-numbers');
    await pick(p, 'arrays/dual-arrays');
    await p.waitForSelector('#dag-beside-view svg .node', { timeout: 10000 });
    await p.locator('.dag-card').screenshot({ path: path.join(shots, 'arrays-dag-beside.png') });
    await ctx.close();
    return heads;
  });

  await check('arrays: bot\'s rewrite trace and the symbolic reverse pass step rule by rule, with the term after each step', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const p = await openAt(ctx, await example('arrays-dot'), 'arrays/bot');
    const stepAt = async i => {
      await p.click(`[data-testid="step-list"] li[data-step="${i}"]`);
      // a rewrite step's terms are printed in the worker when it is shown
      await p.waitForFunction(() => !document.querySelector('#step-state td.pending'), null, { timeout: 10000 });
      return p.evaluate(() => ({ note: document.querySelector('#step-note').textContent,
        rows: Object.fromEntries([...document.querySelectorAll('#step-state tr')].filter(r => r.cells.length === 2).map(r => [r.cells[0].textContent, r.cells[1].textContent])) }));
    };
    // bot: one step per rule application, the redex before and after
    const bot = await stepsOf(p);
    // (the terms come from the worker when the step is shown: the page holds only their names until then)
    assert(bot.length > 2 && bot.every(s => s.state.some(([k]) => k === 'redex') || s.deferred?.includes('redex')), 'bot steps: ' + bot.length);
    await p.waitForSelector('[data-testid="step-list"][data-ready="1"]');
    const b1 = await stepAt(1);
    assert(b1.note.includes(bot[1].kind) && b1.note.includes('⟶') && b1.rows.rule === bot[1].kind.replace(' ≈', '') && b1.rows.becomes?.length > 0 && b1.rows.becomes !== '…', 'bot step 2: ' + JSON.stringify(b1));
    // symbolic-share: Fig. 17's loop on terms, each eval rule a step
    await pick(p, 'arrays/symbolic-share');
    const steps = await stepsOf(p);
    const kinds = steps.map(s => s.kind);
    assert(kinds[0] === 'eval Share' && ['pop ID 4', 'pop ID 3', 'pop ID 2', 'pop ID 1'].every(k => kinds.includes(k)) && kinds.length === 16, 'steps: ' + kinds);
    await p.waitForSelector('[data-testid="step-list"][data-ready="1"]');
    const items = await p.$$eval('[data-testid="step-list"] li[data-step]', ls => ls.length);
    assert(items === steps.length, `${items} listed of ${steps.length}`);
    const add = await stepAt(kinds.indexOf('eval Add'));
    assert(add.note.includes('eval Add') && add.note.includes('share 1'), 'Add step: ' + add.note);
    assert(add.rows['share 1'] === 'replicate (length x3) seed' && add.rows['sent 1'] === 'shared 1', 'Add step rows: ' + JSON.stringify(add.rows));
    await p.click('#step-next');
    const scale = await p.$$eval('#step-state tr', rs => rs.map(r => r.textContent).join(' | '));
    assert(/sent\s*times x2 \(shared 1\)/.test(scale), 'the step after Add: ' + scale);
    await p.click('#step-last');
    const last = await p.$$eval('#step-state tr.changed td.key', ts => ts.map(t => t.textContent));
    const grad = await p.$eval('#step-state', t => t.textContent);
    assert(last.includes('grad a') && /scatter11 \(length a\)/.test(grad), `last step: changed ${last}; ${grad.slice(0, 200)}`);
    // without share: the same walk, the E11 chain's cotangent doubling at each Add
    await setSource(p, await example('arrays-e11-exponential-symbolic-term'));
    await pick(p, 'arrays/symbolic');
    const plain = await stepsOf(p);
    const lastPlain = plain[plain.length - 1].state.find(([k]) => k.startsWith('grad'));
    assert(plain.some(s => s.kind === 'eval Add') && lastPlain && (lastPlain[1].match(/seed/g) || []).length === 8, 'symbolic on E11: ' + JSON.stringify(lastPlain));
    await ctx.close();
    return `bot ${bot.length} rule steps; symbolic-share ${steps.length} steps (${kinds.filter(k => k.startsWith('pop')).length} pops); symbolic on E11 ${plain.length}`;
  });

  await check('arrays: every share i in the gradient programs of symbolic-share and share-to-let is marked by ID; hovering or focusing one marks all of that ID; contrast >= 4.5:1', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const src = await example('arrays-e11-exponential-symbolic-term');
    const p = await openAt(ctx, src, 'arrays/symbolic-share');
    const marks = () => p.evaluate(() => {
      const by = {};
      for (const e of document.querySelectorAll('#stage-program .share-ref')) (by[e.dataset.share] ||= []).push({ text: e.textContent, cls: e.className, tab: e.tabIndex });
      return { by, text: document.querySelector('#stage-program').textContent };
    });
    let m = await marks();
    // every occurrence in the printed program is marked, under its own ID's class
    const want = {};
    for (const x of m.text.matchAll(/\bshared?\s+(\d+)\b/g)) want[x[1]] = (want[x[1]] || 0) + 1;
    const ids = Object.keys(want);
    assert(ids.length >= 2, 'shares in the program: ' + JSON.stringify(want));
    for (const id of ids) {
      const got = m.by[id] || [];
      assert(got.filter(x => x.tab === 0).length === want[id] && got.every(x => x.cls.includes('share-' + id + ' ')), `share ${id}: ${want[id]} in the text, marked ${JSON.stringify(got)}`);
    }
    const lit = () => p.evaluate(() => [...new Set([...document.querySelectorAll('#stage-program .share-ref.lit')].map(e => e.dataset.share))]);
    // keyboard: focus the first mark, then Tab to the next one
    await p.focus('#stage-program .share-ref[tabindex="0"]');
    const first = await p.evaluate(() => document.activeElement.dataset.share);
    let on = await lit();
    const all = await p.$$eval(`#stage-program .share-${first}`, es => es.every(e => e.classList.contains('lit')));
    assert(on.length === 1 && on[0] === first && all, `focus on share ${first} lit ${on}`);
    await p.keyboard.press('Tab');
    const second = await p.evaluate(() => document.activeElement.dataset.share);
    on = await lit();
    assert(second && on.length === 1 && on[0] === second, `Tab to share ${second} lit ${on}`);
    // hover: another ID
    const other = ids.find(id => id !== second);
    await p.hover(`#stage-program .share-${other}`);
    on = await lit();
    assert(on.includes(other), `hover on share ${other} lit ${on}`);
    // contrast of every tint (the text over its own background)
    const cols = await p.$$eval('#stage-program .share-ref', es => es.map(e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]));
    const low = cols.filter(([fg, bg]) => contrast(fg, bg) < 4.5);
    assert(cols.length && !low.length, 'low contrast: ' + JSON.stringify(low));
    // share-to-let: the variables bound for the shares, marked the same way
    await pick(p, 'arrays/share-to-let');
    m = await marks();
    const vars = {};
    for (const x of m.text.matchAll(/\bshared(\d+)\b/g)) vars[x[1]] = (vars[x[1]] || 0) + 1;
    assert(Object.keys(vars).length >= 2 && Object.entries(vars).every(([id, n]) => n >= 2 && (m.by[id] || []).length === n), `share-to-let: ${JSON.stringify(vars)} vs ${JSON.stringify(m.by)}`);
    // a stage without shares marks nothing
    await pick(p, 'arrays/symbolic');
    assert(!(await p.$('#stage-program .share-ref')), 'arrays/symbolic has share marks');
    await ctx.close();
    return `shares ${ids.join(', ')} marked (${Object.values(want).reduce((a, b) => a + b, 0)} occurrences), share-to-let ${Object.keys(vars).length} variables; ${cols.length} contrasts >= 4.5`;
  });

  await check('views: hovering a line of a transformed program marks the source it came from in the editor, and hovering the source marks the lines that came from it', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const src = 'input (0.5, 2.0)\ndef main (x, y) =\n  let z = sin x * y in\n  z * x\n';
    const p = await open('#src=' + encodeURIComponent(src) + '&stage=krawiec/dense', ctx);
    await p.waitForSelector('#stage-program .line[data-i]', { timeout: 10000 });
    const marked = () => p.evaluate(() => [...document.querySelector('#editor').shadowRoot.querySelectorAll('.cm-src-span')].map(e => e.textContent));
    // program → source: the line that computes `sin x`'s derivative
    const lines = await p.$$eval('#stage-program .line[data-i]', ls => ls.map(l => ({ i: l.dataset.i, text: l.textContent })));
    const sinLine = lines.find(l => /\bcos\b/.test(l.text));
    assert(lines.length >= 3 && sinLine, 'mapped lines: ' + JSON.stringify(lines));
    await p.hover(`#stage-program .line[data-i="${sinLine.i}"]`);
    await p.waitForFunction(() => document.querySelector('#editor').shadowRoot.querySelector('.cm-src-span'), null, { timeout: 5000 });
    const m = await marked();
    assert(m.join(' ').includes('sin x'), `hovering "${sinLine.text.trim()}" marked ${JSON.stringify(m)}`);
    // source → program: the mouse over `sin` in the editor
    const at = await p.evaluate(() => {
      const root = document.querySelector('#editor').shadowRoot;
      for (const line of root.querySelectorAll('.cm-line')) {
        const w = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
        for (let n; (n = w.nextNode());) {
          const k = n.textContent.indexOf('sin');
          if (k < 0) continue;
          const r = document.createRange();
          r.setStart(n, k + 1); r.setEnd(n, k + 2);
          const b = r.getBoundingClientRect();
          return { x: b.x + b.width / 2, y: b.y + b.height / 2 };
        }
      }
      return null;
    });
    assert(at, '`sin` not found in the editor');
    await p.mouse.move(at.x, at.y);
    await p.waitForSelector('#stage-program .line.from-source', { timeout: 5000 });
    const lit = await p.$$eval('#stage-program .line.from-source', ls => ls.map(l => l.textContent));
    assert(lit.length >= 1 && lit.every(t => /\b(sin|cos)\b/.test(t)), 'lines lit from `sin`: ' + JSON.stringify(lit));
    // leaving the program clears the editor's marks; leaving the editor clears the lines
    await p.hover(`#stage-program .line[data-i="${sinLine.i}"]`);
    await p.mouse.move(5, 5);
    const after = await marked();
    const still = await p.$$('#stage-program .line.from-source');
    assert(!after.length && !still.length, `after leaving: marks ${JSON.stringify(after)}, ${still.length} lines lit`);
    await ctx.close();
    return `${lines.length} of the stage's lines mapped; "${sinLine.text.trim()}" → ${JSON.stringify(m)}; sin → ${lit.length} lines`;
  });

  await check('dag: a graph drawn in part says so above the picture at the page\'s text size', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const src = await example('dualrev-long-chain');
    const p = await open('#src=' + encodeURIComponent(src) + '&stage=krawiec/monadic&p.n=200', ctx);
    await p.waitForSelector('#dag svg .node', { timeout: 15000 });
    const r = await p.evaluate(() => {
      const svg = document.querySelector('#dag svg');
      const note = document.querySelector('#dag-info .dag-partial');
      return { omitted: +svg.getAttribute('data-omitted'), text: note?.textContent, size: note && parseFloat(getComputedStyle(note).fontSize), shown: note && note.getBoundingClientRect().height > 0 };
    });
    assert(r.omitted > 0 && r.text && r.text.startsWith(`${r.omitted} nodes not drawn`) && r.size >= 12 && r.shown, JSON.stringify(r));
    await ctx.close();
    return r.text;
  });
}
