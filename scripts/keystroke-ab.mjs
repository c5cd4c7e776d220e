// Two or more builds of the page's wasm side by side on every example: every stage per keystroke
// (krawiec/monadic shown, as the e2e keystroke figures do), the builds alternated per example so that a
// shared machine's load hits them alike; prints each build's sum of per-example medians and its
// geometric-mean time ratio to the first build. Session 11 chose the shipped profile with it.
// Usage: copy each `trunk build --release` output (dist/) to its own directory, then
//   node scripts/keystroke-ab.mjs dist-a dist-b [dist-c ...]
// SHOWN=stage picks the stage shown (default krawiec/monadic); ALONE=1 runs that stage only (the
// selected stage's own update, e.g. SHOWN=unf/pe ALONE=1).
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const builds = process.argv.slice(2);
const mods = [];
for (const dir of builds) {
  const glue = await import(pathToFileURL(path.resolve(dir, 'cotangent-web.js')).href + `?${dir}`);
  glue.initSync({ module: await readFile(path.join(dir, 'cotangent-web_bg.wasm')) });
  mods.push(glue);
}
const files = (await readdir('examples')).filter(f => f.endsWith('.cot')).sort();
const shown = process.env.SHOWN || 'krawiec/monadic';
const opts = { svg: [shown], detail: [shown], traced: [shown], keep: true, ...(process.env.ALONE ? { stages: [shown] } : {}) };
const times = builds.map(() => ({}));
for (const f of files) {
  const src = await readFile(path.join('examples', f), 'utf8');
  for (const m of mods) m.analyse_json(src, opts); // warm-up
  for (let r = 0; r < 5; r++) {
    mods.forEach((m, i) => {
      const t = performance.now();
      m.analyse_json(src, opts);
      (times[i][f] ??= []).push(performance.now() - t);
    });
  }
}
const median = xs => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const rows = files.map(f => times.map(t => median(t[f])));
builds.forEach((b, i) => {
  const sum = rows.reduce((a, r) => a + r[i], 0);
  const geo = Math.exp(rows.reduce((a, r) => a + Math.log(r[i] / r[0]), 0) / rows.length);
  const size = n => rows[files.findIndex(f => f.includes(n))]?.[i]?.toFixed(1);
  console.log(`${b}: sum of medians ${sum.toFixed(0)} ms, geomean vs ${builds[0]} ${geo.toFixed(3)}, quaternion ${size('quaternion')} ms, new-primitives ${size('new-primitives')} ms`);
});
