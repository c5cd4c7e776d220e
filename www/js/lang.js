// The Cotangent language for CodeMirror (a StreamLanguage), and the same tokenizer for static,
// read-only program views (stage programs, diffs). Static views build DOM with textContent only.
import { StreamLanguage, StringStream, HighlightStyle, syntaxHighlighting, tags as t } from '../codemirror.bundle.js';

const KEYWORDS = new Set(['def', 'let', 'in', 'and', 'if', 'then', 'else', 'case', 'of', 'param', 'input', 'seed', 'expect',
  'grad', 'primal', 'do', 'return', 'where', 'rec', 'λ', 'fun', 'for', 'with']);
const CONSTRUCTORS = new Set(['inl', 'inr', 'true', 'false', 'fst', 'snd', 'not', 'mod', 'Zero', 'Var', 'Add',
  'Scale', 'Let', 'OneHot', 'Contrib', 'Sum', 'Pair']);
// The named primitives (crate/src/prims.rs).
const BUILTINS = new Set(['sin', 'cos', 'tan', 'exp', 'log', 'sqrt', 'tanh', 'atan2', 'abs', 'real', 'atan', 'min',
  'max', 'floor', 'sinh', 'cosh', 'erf', 'log1p', 'expm1', 'sigmoid', 'round']);
const TYPES = new Set(['R', 'Z', 'Bool', 'Delta', 'M', 'Map', 'Array', 'Staged', 'ID']);

/** One token of `stream`; returns a CodeMirror token name or null. */
export function token(stream) {
  if (stream.eatSpace()) return null;
  if (stream.match('--')) { stream.skipToEnd(); return 'comment'; }
  if (stream.match(/^\d+(\.\d*)?([eE][+-]?\d+)?/) || stream.match(/^\.\d+([eE][+-]?\d+)?/)) return 'number';
  if (stream.match(/^(nan|inf)\b/)) return 'number';
  const w = stream.match(/^[A-Za-z_][A-Za-z0-9_']*/);
  if (w) {
    const s = w[0];
    if (KEYWORDS.has(s)) return 'keyword';
    if (CONSTRUCTORS.has(s)) return 'atom';
    if (BUILTINS.has(s)) return 'builtin';
    if (TYPES.has(s) || /^[A-Z]/.test(s)) return 'typeName';
    if (stream.string.slice(0, stream.start).match(/^\s*def\s+$/)) return 'def';
    return 'variableName';
  }
  if (stream.match(/^(->|<-|=>|<=|>=|==|!=|&&|\|\||\*\*|[λ\\⊸⊕⊗←→∘·⊢])/)) return 'operator';
  if (stream.match(/^[+\-*/<>=|:]/)) return 'operator';
  if (stream.match(/^[()[\]{},;]/)) return 'punctuation';
  stream.next();
  return null;
}

export const cotangentLanguage = StreamLanguage.define({
  name: 'cotangent',
  token,
  languageData: { commentTokens: { line: '--' } },
  tokenTable: { def: t.definition(t.variableName), builtin: t.standard(t.variableName), typeName: t.typeName },
});

export const cotangentHighlight = syntaxHighlighting(HighlightStyle.define([
  { tag: t.comment, class: 'tok-comment' },
  { tag: t.keyword, class: 'tok-keyword' },
  { tag: t.atom, class: 'tok-atom' },
  { tag: t.number, class: 'tok-number' },
  { tag: t.standard(t.variableName), class: 'tok-builtin' },
  { tag: t.definition(t.variableName), class: 'tok-def' },
  { tag: t.typeName, class: 'tok-type' },
  { tag: t.operator, class: 'tok-op' },
  { tag: t.punctuation, class: 'tok-punct' },
]));

const CLASS = { comment: 'tok-comment', keyword: 'tok-keyword', atom: 'tok-atom', number: 'tok-number',
  builtin: 'tok-builtin', def: 'tok-def', typeName: 'tok-type', operator: 'tok-op', punctuation: 'tok-punct' };

/** Appends one highlighted line to `parent` (spans with textContent; never HTML). */
export function highlightLine(parent, line) {
  const stream = new StringStream(line, 4, 2);
  while (!stream.eol()) {
    stream.start = stream.pos;
    const tok = token(stream);
    if (stream.pos === stream.start) stream.next();
    const text = line.slice(stream.start, stream.pos);
    if (tok && CLASS[tok]) {
      const span = document.createElement('span');
      span.className = CLASS[tok];
      span.textContent = text;
      parent.appendChild(span);
    } else {
      parent.appendChild(document.createTextNode(text));
    }
  }
}
