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

/** Makes `a` a link to `chain`'s paper (its `url`, arXiv or DOI) with `text`, the full citation on hover;
 *  only https URLs become links (the URL comes from the core, but the rule costs nothing). */
export function paperLink(a, chain, text) {
  a.textContent = text;
  const url = chain?.url || '';
  if (/^https:\/\//.test(url)) {
    a.href = url;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    a.title = `${chain.citation} — ${url}`;
  } else {
    a.removeAttribute('href');
    a.removeAttribute('title');
  }
  return a;
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

/** The top-level elements of an array or tuple literal's text (`[1.0, [2.0, 3.0]]` → `1.0`, `[2.0, 3.0]`). */
function elements(inner) {
  const out = [];
  let depth = 0, start = 0;
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i];
    if (c === '[' || c === '(') depth++;
    else if (c === ']' || c === ')') depth--;
    else if (c === ',' && depth === 0) { out.push(inner.slice(start, i).trim()); start = i + 1; }
  }
  if (inner.trim()) out.push(inner.slice(start).trim());
  return out;
}

/** A value's text, compact for a table cell: an array of more than `keep` elements shows its first ones
 *  and `… (n more)` (nested arrays likewise), and long reals inside are shortened as `fmt` does. */
export function compactValue(text, keep = 6) {
  const t = String(text).trim();
  const open = t[0], close = t[t.length - 1];
  if (!((open === '[' && close === ']') || (open === '(' && close === ')'))) return t;
  const xs = elements(t.slice(1, -1));
  const inner = x => /^-?\d/.test(x) && Number.isFinite(Number(x)) ? fmt(Number(x)) : compactValue(x, Math.max(2, keep >> 1));
  const shown = xs.slice(0, keep).map(inner);
  if (xs.length > keep) shown.push(`… (${xs.length - keep} more)`);
  return open + shown.join(', ') + close;
}

/** The core's messages in the page's words: the CLI's flags become the page's fields. */
export const pageWords = m => String(m)
  .replace(/pass one with --at\b/g, 'type one in the Input point field')
  .replace(/--at\b/g, 'the Input point field')
  .replace(/--seed\b/g, 'the Output seed field');

/** NaN, as a number or as the JSON's string. */
export const isNaNish = v => v === 'NaN' || (typeof v === 'number' && Number.isNaN(v));

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
