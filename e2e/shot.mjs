// Dev tool: screenshots of the built page (dist/). Usage: node e2e/shot.mjs [name] [hash] [stage] [steps]
import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { serve, launch, root } from './lib.mjs';

const [name = 'page', hash = '', stage = '', steps = '0', w = '1600', h = '1000'] = process.argv.slice(2);
const { server, url } = await serve();
const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: +w, height: +h } });
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') console.log('console:', m.type(), m.text()); });
  page.on('pageerror', e => console.log('pageerror:', String(e)));
  await page.goto(url + hash);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  if (stage) await page.click(`[data-stage="${stage}"]`);
  for (let i = 0; i < +steps; i++) await page.click('[data-testid="step-next"]');
  await page.waitForTimeout(300);
  await mkdir(path.join(root, 'e2e', 'out'), { recursive: true });
  await page.screenshot({ path: path.join(root, 'e2e', 'out', name + '.png'), fullPage: false });
  console.log('status:', await page.textContent('#status'));
} finally { await browser.close(); server.close(); }
