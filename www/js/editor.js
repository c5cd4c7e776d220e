// The program editor (CodeMirror 6): the source text, the current step's span, and the diagnostics,
// listed under the editor and marked in it.
import {
  EditorView, EditorState, StateField, StateEffect, Decoration, keymap, lineNumbers, highlightActiveLine,
  highlightActiveLineGutter, drawSelection, highlightSpecialChars, history, defaultKeymap, historyKeymap,
  indentWithTab, bracketMatching, closeBrackets, closeBracketsKeymap, searchKeymap, highlightSelectionMatches,
  lintGutter, lintKeymap, setDiagnostics,
} from '../codemirror.bundle.js';
import { cotangentLanguage, cotangentHighlight } from './lang.js';
import { $, el, pageWords } from './dom.js';

const spanEffect = StateEffect.define();
const spanField = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    deco = deco.map(tr.changes);
    for (const e of tr.effects) if (e.is(spanEffect)) {
      const { from, to } = e.value || {};
      const len = tr.state.doc.length;
      deco = (e.value && from < to && to <= len)
        ? Decoration.set([Decoration.mark({ class: 'cm-step-span' }).range(from, to)])
        : Decoration.none;
    }
    return deco;
  },
  provide: f => EditorView.decorations.from(f),
});

/** The source ranges the hovered program line came from (`[[from, to], …]`). */
const hoverEffect = StateEffect.define();
const hoverField = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    deco = deco.map(tr.changes);
    for (const e of tr.effects) if (e.is(hoverEffect)) {
      const len = tr.state.doc.length;
      const ranges = (e.value || []).filter(([f, t]) => f < t && t <= len).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      deco = ranges.length ? Decoration.set(ranges.map(([f, t]) => Decoration.mark({ class: 'cm-src-span' }).range(f, t)), true) : Decoration.none;
    }
    return deco;
  },
  provide: f => EditorView.decorations.from(f),
});

let view;
let onPointAt = null;   // called with the text position under the mouse, or null when it leaves

/** The editor's look. It is mounted in a shadow root, where CodeMirror's styles go into a constructed
 *  stylesheet instead of a <style> element: so the page's CSP needs no 'unsafe-inline' for styles. */
const theme = EditorView.theme({
  '&': { flex: '1', height: '100%', minWidth: '0', maxWidth: '100%', fontSize: '13.5px' },
  '.cm-scroller': { fontFamily: 'var(--mono)' },
  // a visible focus ring (Esc then Tab leaves the editor: the hint under it says so)
  '&.cm-focused': { outline: '2px solid var(--accent)', outlineOffset: '-2px' },
  '.cm-gutters': { color: '#5c6470' },
  '.cm-step-span': { background: '#ffe58f', borderRadius: '2px', boxShadow: '0 0 0 1px #f0b400' },
  '.cm-src-span': { background: '#d7e8ff', borderRadius: '2px', boxShadow: '0 0 0 1px #6b9be0' },
});

/** A shadow root on `host` that also has the page's own rules (the syntax colours `tok-*`). */
function shadowOf(host) {
  const root = host.shadowRoot || host.attachShadow({ mode: 'open' });
  const sheet = new CSSStyleSheet();
  const rules = [];
  for (const s of document.styleSheets) { try { for (const r of s.cssRules) rules.push(r.cssText); } catch { /* not ours */ } }
  sheet.replaceSync(rules.join('\n'));
  root.adoptedStyleSheets = [sheet];
  return root;
}
let lastSpanKey = 'null';   // the span last shown, so an unchanged step dispatches nothing
let lastLintKey = '[]';     // the lint markers last set, likewise

/** Creates the editor holding `doc`; `onEdit()` runs after every change to the text. */
export function init(doc, onEdit) {
  const root = shadowOf($('editor'));
  view = new EditorView({
    root,
    parent: root,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), history(), drawSelection(),
        bracketMatching(), closeBrackets(), highlightActiveLine(), highlightSelectionMatches(), lintGutter(),
        cotangentLanguage, cotangentHighlight, spanField, hoverField, theme,
        keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...lintKeymap, indentWithTab]),
        EditorView.updateListener.of(u => {
          if (!u.docChanged) return;
          lastSpanKey = 'stale';   // the step's span decoration moved with the edit
          onEdit();
        }),
        EditorView.contentAttributes.of({ 'aria-label': 'Cotangent program', spellcheck: 'false' }),
        // Typed over a selection that spans highlighted tokens, Chrome's own editing would keep their look
        // with inline styles (refused by the CSP, and logged): the editor makes that change itself.
        EditorView.domEventHandlers({
          mousemove(e, v) { onPointAt?.(v.posAtCoords({ x: e.clientX, y: e.clientY })); return false; },
          mouseleave() { onPointAt?.(null); return false; },
          beforeinput(e, v) {
            if (e.inputType !== 'insertText' || !e.data || /^[([{"']$/.test(e.data) || v.state.selection.ranges.every(r => r.empty)) return false;
            e.preventDefault();
            v.dispatch(v.state.replaceSelection(e.data), { scrollIntoView: true, userEvent: 'input.type' });
            return true;
          },
        }),
      ],
    }),
  });
}

export const source = () => view.state.doc.toString();
export const docLength = () => view.state.doc.length;

export function setSource(text) {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
}

/** Selects [from, to) (clamped to the text), scrolls it into view and focuses the editor. */
export function reveal(from, to = from) {
  const len = view.state.doc.length;
  view.dispatch({ selection: { anchor: Math.min(from, len), head: Math.min(to, len) }, scrollIntoView: true });
  view.focus();
}

let lastHoverKey = '[]';
/** Marks the source ranges a hovered program line came from (`[[from, to], …]`, empty for none). */
export function setHover(ranges) {
  const key = JSON.stringify(ranges || []);
  if (key === lastHoverKey) return;
  lastHoverKey = key;
  view.dispatch({ effects: hoverEffect.of(ranges || []) });
}

/** `f(pos)` is called with the text position under the mouse as it moves over the editor (null when it leaves). */
export function onPoint(f) {
  onPointAt = f;
}

/** Marks the current step's span ({from, to} or null). */
export function setSpan(span) {
  const key = JSON.stringify(span);
  if (key === lastSpanKey) return;
  lastSpanKey = key;
  view.dispatch({ effects: spanEffect.of(span) });
}

/** The diagnostics: listed under the editor (a located one is clickable) and marked in the text. */
export function render(state) {
  const box = $('diagnostics');
  box.replaceChildren();
  const ds = state.diagnostics;
  const cm = [];
  const len = view.state.doc.length;
  for (const d of ds) {
    const item = el('div', 'diag');
    const where = d.line != null ? `${d.line}:${d.col}` : '';
    item.append(el('span', 'diag-sev', d.severity === 'warning' ? 'warning' : 'error'));
    if (where) item.append(el('span', 'diag-pos', where));
    if (d.stage) item.append(el('span', 'diag-stage', d.stage));
    item.append(el('span', 'diag-msg', pageWords(d.message)));
    if (d.from != null) {
      item.classList.add('clickable');
      item.title = 'Show in the editor';
      item.addEventListener('click', () => reveal(d.from));
      const from = Math.min(d.from, len), to = Math.min(Math.max(d.to ?? d.from, from), len);
      cm.push({ from, to: to > from ? to : Math.min(from + 1, len), severity: d.severity === 'warning' ? 'warning' : 'error', message: pageWords(d.message) });
    }
    box.append(item);
  }
  box.hidden = !ds.length;
  const key = JSON.stringify(cm);
  if (key !== lastLintKey) { lastLintKey = key; view.dispatch(setDiagnostics(view.state, cm)); }
}
