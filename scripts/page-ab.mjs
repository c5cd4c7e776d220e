// Two or more builds of the whole page (dist/ directories) side by side in Chromium: keystroke → the
// selected stage and → every stage updated, per example, the builds alternated keystroke by keystroke
// so that a shared machine's load hits them alike. Unlike keystroke-ab.mjs (the wasm alone, in Node) this
// measures what the page does around the core: its workers, rendering and the DAG.
// Usage: node scripts/page-ab.mjs dist-a dist-b [--examples quaternion,new-primitives] [--keys 7]
import http from 'node:http';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { launch } from '../e2e/lib.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args.splice(i, 2)[1] : dflt; };
const only = opt('--examples', '').split(',').filter(Boolean);
const keys = Number(opt('--keys', '7'));
const builds = args;
const MIME = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css', '.svg': 'image/svg+xml' };
function serve(dir) {
  const server = http.createServer(async (req, res) => {
    let p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (p.endsWith('/')) p += 'index.html';
    try { res.writeHead(200, { 'content-type': MIME[path.extname(p)] || 'application/octet-stream' }).end(await readFile(path.join(dir, path.normalize(p)))); }
    catch { res.writeHead(404).end(); }
  });
  return new Promise(r => server.listen(0, '127.0.0.1', () => r({ server, url: `http://127.0.0.1:${server.address().port}/` })));
}
const browser = await launch();
const pages = [];
for (const b of builds) {
  const s = await serve(path.resolve(b));
  const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
  await page.goto(s.url);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  const id = await page.evaluate(() => (window.__cot.state.result.stages.find(s => s.id === 'krawiec/monadic') || { id: 'forward' }).id);
  await page.click(`[data-stage="${id}"]`);
  pages.push({ b, page, s });
}
const examples = (await pages[0].page.evaluate(() => window.__cot.state.examples.map(e => ({ name: e.name, source: e.source }))))
  .filter(e => !only.length || only.some(o => e.name.includes(o)));
const seqOf = page => page.evaluate(() => window.__cot.lastSeq || 0);
const med = a => a.slice().sort((x, y) => x - y)[a.length >> 1];
const sums = builds.map(() => ({ all: 0, sel: 0, logAll: 0 }));
for (const ex of examples) {
  const t = builds.map(() => ({ all: [], sel: [] }));
  for (const p of pages) {
    const before = await seqOf(p.page);
    await p.page.evaluate(src => window.__cot.setSource(src), ex.source);
    await p.page.waitForFunction(s => (window.__cot.lastSeq || 0) > s, before, { timeout: 20000 });
    await p.page.click('.cm-content');
    await p.page.keyboard.press('Control+End');
  }
  for (let k = 0; k < keys; k++) {
    for (const [i, p] of pages.entries()) {
      const before = await seqOf(p.page);
      if (k % 2) await p.page.keyboard.press('Backspace'); else await p.page.keyboard.type(' ');
      await p.page.waitForFunction(s => (window.__cot.lastSeq || 0) > s, before, { timeout: 20000 });
      await p.page.waitForTimeout(30);
      const last = await p.page.evaluate(() => window.__cot.perf[window.__cot.perf.length - 1]);
      t[i].all.push(last.ms); t[i].sel.push(last.selected_ms);
    }
  }
  const row = t.map(x => ({ all: med(x.all), sel: med(x.sel) }));
  row.forEach((r, i) => { sums[i].all += r.all; sums[i].sel += r.sel; sums[i].logAll += Math.log(r.all / row[0].all); });
  console.log(ex.name.padEnd(40) + row.map(r => `${r.sel.toFixed(1).padStart(7)} /${r.all.toFixed(1).padStart(7)}`).join('   '));
}
builds.forEach((b, i) => console.log(`${b}: sum of medians selected ${sums[i].sel.toFixed(0)} ms, all ${sums[i].all.toFixed(0)} ms; geomean (all) vs ${builds[0]} ${Math.exp(sums[i].logAll / examples.length).toFixed(3)}`));
await browser.close();
for (const p of pages) p.s.server.close();
