// Share links. `#z=<base64url(deflate-raw(JSON))>` holds the whole view (program, input, seed, params,
// stage, step); hand-written links use `#src=<percent-encoded program>&stage=<id>` (also `at`, `seed`,
// `step`, and `p.<name>=<int>` for params). `at` and `seed` are values as typed, arrays included
// (`([1.0, 2.0], 0.5)`). A link without a program is rejected with a message; a bad optional field is
// left out, and the page says which.

const MAX_HASH = 400_000;      // characters of a hash we are willing to look at
const MAX_JSON = 1_000_000;    // bytes a compressed link may expand to
const MAX_SRC = 200_000;       // characters of program text

function b64urlEncode(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function b64urlDecode(s) {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error('the link data is not base64url');
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4));
  const out = new Uint8Array(b.length);
  for (let i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
  return out;
}

async function pump(stream, limit) {
  const reader = stream.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) { reader.cancel(); throw new Error('the link expands to more than 1 MB'); }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.length; }
  return out;
}

async function deflate(text) {
  const s = new Blob([new TextEncoder().encode(text)]).stream().pipeThrough(new CompressionStream('deflate-raw'));
  return pump(s, Infinity);
}

async function inflate(bytes) {
  const s = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  return new TextDecoder('utf-8', { fatal: true }).decode(await pump(s, MAX_JSON));
}

/** Checks and normalises a decoded view. Without a program it throws; a bad optional field is left out
 *  and named in `ignored` (the rest of the link still opens). */
function validate(v) {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('the link does not describe a view');
  const out = {};
  const ignored = [];
  if (typeof v.src !== 'string') throw new Error('the link has no program');
  if (v.src.length > MAX_SRC) throw new Error('the program in the link is too long');
  out.src = v.src;
  const shown = x => JSON.stringify(String(x).slice(0, 40));
  for (const k of ['at', 'seed']) {
    if (v[k] == null || v[k] === '') continue;
    // An array input point is as long as its elements: as much room as a program.
    if (typeof v[k] !== 'string' || v[k].length > MAX_SRC) ignored.push(`"${k}" (not a value)`);
    else out[k] = v[k];
  }
  if (v.stage != null) {
    if (typeof v.stage !== 'string' || !/^[A-Za-z0-9_./-]{1,80}$/.test(v.stage)) ignored.push(`"stage" (${shown(v.stage)} is not a stage id)`);
    else out.stage = v.stage;
  }
  if (v.step != null) {
    const n = Number(v.step);
    if (!Number.isInteger(n) || n < 0 || n > 1e7) ignored.push(`"step" (${shown(v.step)} is not a step number)`);
    else out.step = n;
  }
  if (v.params != null) {
    if (typeof v.params !== 'object' || Array.isArray(v.params)) ignored.push('"params" (not a list of name=integer)');
    else {
      out.params = {};
      for (const [k, x] of Object.entries(v.params)) {
        const n = Number(x);
        if (!/^[A-Za-z_][A-Za-z0-9_']{0,40}$/.test(k) || !Number.isSafeInteger(n)) ignored.push(`"p.${String(k).slice(0, 40)}" (${shown(x)} is not an integer)`);
        else out.params[k] = n;
      }
    }
  }
  return { view: out, ignored };
}

/** The hash (with `#`) of a compressed link to `view`. */
export async function encodeView(view) {
  return '#z=' + b64urlEncode(await deflate(JSON.stringify(view)));
}

/** Parses `location.hash`: `{view, ignored}` for a link (`ignored` names the fields left out), `{}` for
 *  no link, `{error}` for a broken one. */
export async function decodeHash(hash) {
  if (!hash || hash === '#') return {};
  try {
    if (hash.length > MAX_HASH) throw new Error('the link is too long');
    const params = new Map();
    for (const part of hash.replace(/^#/, '').split('&')) {
      if (!part) continue;
      const i = part.indexOf('=');
      const k = i < 0 ? part : part.slice(0, i);
      const v = i < 0 ? '' : part.slice(i + 1);
      params.set(k, v);
    }
    if (params.has('z')) {
      let json;
      try { json = await inflate(b64urlDecode(params.get('z'))); }
      catch (e) { throw new Error('the compressed link is corrupt (' + (e.message || e) + ')'); }
      let v;
      try { v = JSON.parse(json); } catch { throw new Error('the compressed link is not valid JSON'); }
      return validate(v);
    }
    if (params.has('src')) {
      const dec = s => { try { return decodeURIComponent(s.replace(/\+/g, '%20')); } catch { throw new Error('the link is not valid percent-encoding'); } };
      const v = { src: dec(params.get('src')) };
      for (const k of ['stage', 'at', 'seed', 'step']) if (params.has(k)) v[k] = dec(params.get(k));
      for (const [k, x] of params) if (k.startsWith('p.')) (v.params ||= {})[dec(k.slice(2))] = dec(x);
      return validate(v);
    }
    throw new Error('the link has neither `src=` nor `z=`');
  } catch (e) {
    return { error: String(e.message || e) };
  }
}
