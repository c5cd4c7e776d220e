// DOM helpers shared by the page's modules. Rule: text from a program, a link or the core is only ever
// inserted with textContent (never as HTML); these helpers are the way to build elements with text.

export const $ = id => document.getElementById(id);

export const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = String(text);
  return e;
};

export const svgEl = (tag, attrs = {}, text) => {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text != null) e.textContent = String(text);
  return e;
};

/** Text with `code` spans: backticked parts become <code> elements (built with textContent, never HTML). */
export function richText(node, text) {
  node.replaceChildren();
  text.split('`').forEach((part, i) => node.append(i % 2 ? el('code', null, part) : document.createTextNode(part)));
}

export const fmt = x => {
  if (x == null) return '—';
  if (typeof x === 'string') return { NaN: 'nan', Infinity: 'inf', '-Infinity': '-inf' }[x] ?? x; // JSON's names for non-finite reals
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (Number.isInteger(x) && Math.abs(x) < 1e15) return x.toFixed(1);
  const a = Math.abs(x);
  return (a >= 1e-4 && a < 1e9) ? String(+x.toPrecision(12)) : x.toExponential(6);
};

export const fmtCount = n => n >= 1e6 ? (n / 1e6).toPrecision(3) + 'M' : n >= 1e4 ? (n / 1e3).toPrecision(3) + 'k' : String(n);

export function setStatus(text, cls = '') {
  const s = $('status');
  s.textContent = text;
  s.className = 'status ' + cls;
}

export function showBanner(text) {
  $('banner-text').textContent = text;
  $('banner').hidden = false;
}
