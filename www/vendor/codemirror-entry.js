// Entry of the one-time CodeMirror 6 bundle (see bundle.sh); the output codemirror.bundle.js is committed.
export { EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
         highlightSpecialChars, Decoration, ViewPlugin, placeholder } from '@codemirror/view';
export { EditorState, StateField, StateEffect, RangeSetBuilder, Compartment } from '@codemirror/state';
export { StreamLanguage, StringStream, HighlightStyle, syntaxHighlighting, bracketMatching, indentOnInput,
         foldGutter, indentUnit } from '@codemirror/language';
export { tags } from '@lezer/highlight';
export { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
export { searchKeymap, highlightSelectionMatches } from '@codemirror/search';
export { closeBrackets, closeBracketsKeymap } from '@codemirror/autocomplete';
export { linter, lintGutter, setDiagnostics, lintKeymap, forEachDiagnostic } from '@codemirror/lint';
