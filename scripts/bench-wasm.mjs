// The page's engine (the release wasm Trunk ships, run in Node) beside the native one (`cotangent
// bench`), on the peers' programs, alternated in one run: ns per primal operation for the primal and
// for each stage's gradient, and the ratio wasm / native (issue 13: wasm within 1.5× of native).
// A run shorter than a millisecond is timed many to a sample on both sides (`--sample-ms 1` natively,
// `cotangent::timing::best_per_run`): wasm's clock costs about a microsecond a reading.
// Usage (after `trunk build --release` and `cargo build --release -p cotangent`):
//   node scripts/bench-wasm.mjs [--sizes 1000,10000] [--stage dualrev/tape ...] [--repeat 5] [--rounds 2] [--chromium] [--liftoff]
// With --chromium the wasm runs in headless Chromium (the page's engine, a newer V8 than Node's), loaded
// from dist/ by the browser tests' static server (e2e/lib.mjs).
// V8 runs a wasm function first in its baseline tier (Liftoff) and moves it to the optimizing tier
// (TurboFan) after enough calls, never in the middle of one: the interpreter's loop, called once a
// run, ran a whole run in the baseline tier until the calls of earlier runs had warmed it, 2–20× slower
// than later runs (measured in session 35: particle's forward at n = 1,000 from 4,587 to 227 ns an
// operation over eight calls). `--no-liftoff` compiles every function in the optimizing tier at once
// (~2 s), so what is timed is the engine as the page runs it once warm, not V8's warm-up; the page's
// first runs in a fresh tab are slower, and `--liftoff` here measures those.
import v8 from 'node:v8';
import { readFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const many = name => args.flatMap((a, i) => (a === name ? [args[i + 1]] : []));
const sizes = opt('--sizes', '1000,10000').split(',').map(Number);
const stages = many('--stage').length ? many('--stage') : ['forward', 'dualrev/tape', 'dualrev/parallel', 'krawiec/array'];
const repeat = Number(opt('--repeat', '5'));
const rounds = Number(opt('--rounds', '2'));
const inChromium = args.includes('--chromium');
const v8Flags = args.includes('--liftoff') ? [] : ['--no-liftoff'];

// The peers' programs and their operation counts (bench/peers/README.md; crate/src/bench/families.rs).
const FAMILIES = [
  { name: 'particle', file: 'particle.cot', ops: n => 7 * n + 2 },
  { name: 'horner', file: 'horner.cot', ops: n => 2 * n },
  { name: 'peer-doubling', file: 'doubling.cot', ops: n => n + 1 },
  { name: 'quaternion', file: 'quaternion.cot', ops: () => 22, fixed: true },
];
const withN = (text, n) => text.split('\n').map(l => (l.startsWith('param n =') ? `param n = ${n}` : l)).join('\n');

// `timeStages(text, stages, repeat)`: the wasm's `time_stages`, in Node or in a Chromium page.
let timeStages, host = `Node ${process.version}`, close = async () => {};
if (inChromium) {
  const { serve, launch } = await import(pathToFileURL(path.join(root, 'e2e', 'lib.mjs')).href);
  const { server, url } = await serve('/');
  const browser = await launch(v8Flags.length ? [`--js-flags=${v8Flags.join(' ')}`] : []);
  const page = await browser.newPage();
  await page.goto(url + 'favicon.svg');
  await page.evaluate(async base => {
    const glue = await import(base + 'cotangent-web.js');
    await glue.default({ module_or_path: base + 'cotangent-web_bg.wasm' });
    window.__timeStages = (t, s, r) => glue.time_stages(t, s, r);
  }, url);
  host = `Chromium ${browser.version()}`;
  timeStages = (t, s, r) => page.evaluate(([t, s, r]) => window.__timeStages(t, s, r), [t, s, r]);
  close = async () => { await browser.close(); server.close(); };
} else {
  for (const f of v8Flags) v8.setFlagsFromString(f);
  const glue = await import(pathToFileURL(path.join(root, 'dist', 'cotangent-web.js')).href);
  glue.initSync({ module: await readFile(path.join(root, 'dist', 'cotangent-web_bg.wasm')) });
  timeStages = async (t, s, r) => glue.time_stages(t, s, r);
}
const native = path.join(root, 'target', 'release', 'cotangent');
// Warm-up: the first calls run while V8 still compiles the module's hot functions in its top tier.
for (let i = 0; i < 3; i++) await timeStages(withN(await readFile(path.join(root, 'bench', 'peers', 'particle.cot'), 'utf8'), 2000), stages, 1);

const best = {};   // key family/n/stage → { wasm, native } ns per op, best over the rounds
const keep = (key, side, v) => { if (v != null && Number.isFinite(v)) { best[key] ??= {}; best[key][side] = Math.min(best[key][side] ?? Infinity, v); } };
for (let round = 0; round < rounds; round++) {
  for (const fam of FAMILIES) {
    const text = await readFile(path.join(root, 'bench', 'peers', fam.file), 'utf8');
    for (const n of fam.fixed ? [1] : sizes) {
      const ops = fam.ops(n);
      // wasm
      const t = await timeStages(withN(text, n), stages, repeat);
      keep(`${fam.name}/${n}/(primal)`, 'wasm', (t.primal_ms * 1e6) / ops);
      for (const s of t.stages) keep(`${fam.name}/${n}/${s.id}`, 'wasm', s.grad_ms == null ? null : (s.grad_ms * 1e6) / ops);
      // native, the same program at the same size
      const out = execFileSync(native, ['bench', '--family', fam.name, '--sizes', String(n), ...stages.flatMap(s => ['--stage', s]), '--repeat', String(repeat), '--sample-ms', '1', '--json'], { encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'ignore'] });
      for (const line of out.split('\n').filter(l => l.startsWith('{'))) {
        const r = JSON.parse(line);
        keep(`${fam.name}/${n}/(primal)`, 'native', r.primal_ns_per_op);
        keep(`${fam.name}/${n}/${r.stage}`, 'native', r.grad_ns_per_op);
      }
    }
  }
}

console.log(`wasm (${host}${v8Flags.length ? ', ' + v8Flags.join(' ') : ''}) against native, ns per primal operation, best of ${repeat} runs × ${rounds} rounds, alternated:`);
console.log('family/n/stage'.padEnd(40) + 'native'.padStart(10) + 'wasm'.padStart(10) + 'wasm/native'.padStart(13));
const ratios = [];
for (const [key, v] of Object.entries(best)) {
  const r = v.wasm / v.native;
  if (Number.isFinite(r)) ratios.push(r);
  console.log(key.padEnd(40) + (v.native?.toFixed(1) ?? '-').padStart(10) + (v.wasm?.toFixed(1) ?? '-').padStart(10) + (Number.isFinite(r) ? r.toFixed(2) : '-').padStart(13));
}
ratios.sort((a, b) => a - b);
console.log(`wasm/native: median ${ratios[Math.floor(ratios.length / 2)]?.toFixed(2)}, range ${ratios[0]?.toFixed(2)}–${ratios[ratios.length - 1]?.toFixed(2)} over ${ratios.length} rows (goal ≤ 1.5)`);
await close();
