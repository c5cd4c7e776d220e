//! Located diagnostics: every user-facing error carries a byte span into the source, and renders as
//! `file:line:col: error: message`, the source line, and a caret under the span.

use serde::Serialize;

/// A half-open byte range `[start, end)` into the source text. `Span::NONE` marks generated code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub const NONE: Span = Span { start: u32::MAX, end: u32::MAX };
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }
    pub fn is_none(self) -> bool {
        self.start == u32::MAX
    }
    /// The smallest span covering both; a generated (NONE) side is ignored.
    pub fn to(self, other: Span) -> Span {
        if self.is_none() {
            return other;
        }
        if other.is_none() {
            return self;
        }
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One located message. `stage` names the stage that refused the program, where one did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub span: Span,
    pub message: String,
    pub stage: Option<String>,
    /// Declined by design (the paper's method does not handle the construct), not a failure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
    /// The printed program the error is about, when it is a stage's output that failed its checks.
    #[serde(skip)]
    pub program: Option<String>,
    /// When the span is not into the program but into a text given beside it: its name (`--at`,
    /// `--seed`) and the text, for `render`.
    #[serde(skip)]
    pub origin: Option<(String, String)>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Error, span, message: message.into(), stage: None, refused: false, program: None, origin: None }
    }
    pub fn in_stage(mut self, stage: &str) -> Diagnostic {
        self.stage = Some(stage.to_string());
        self
    }
    /// Marks a stage's located refusal (declined by design).
    pub fn refused(mut self) -> Diagnostic {
        self.refused = true;
        self
    }
    /// Says the span is into `text` (named `name`, e.g. `--at`), not into the program.
    pub fn in_text(mut self, name: &str, text: &str) -> Diagnostic {
        self.origin = Some((name.to_string(), text.to_string()));
        self
    }
    pub fn with_program(mut self, printed: String) -> Diagnostic {
        self.program = Some(printed);
        self
    }
}

/// A line/column position, both 1-based; `col` counts characters, not bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LineCol {
    pub line: usize,
    pub col: usize,
}

pub fn line_col(text: &str, offset: usize) -> LineCol {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    LineCol { line, col: before[line_start..].chars().count() + 1 }
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Renders `file:line:col: error: message`, the offending line, and a caret line under the span.
pub fn render(file: &str, text: &str, d: &Diagnostic) -> String {
    let sev = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let stage = d.stage.as_deref().map(|s| format!("[{s}] ")).unwrap_or_default();
    if d.span.is_none() {
        return format!("{file}: {sev}: {stage}{}\n", d.message);
    }
    let start = (d.span.start as usize).min(text.len());
    let end = (d.span.end as usize).clamp(start, text.len());
    let lc = line_col(text, start);
    let line_start = text[..floor_char_boundary(text, start)].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
    let line = &text[line_start..line_end];
    let width = text[floor_char_boundary(text, start)..floor_char_boundary(text, end.min(line_end).max(start))]
        .chars()
        .count()
        .max(1);
    let pad: String = line[..floor_char_boundary(line, start - line_start)]
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    format!(
        "{file}:{}:{}: {sev}: {stage}{}\n{:>5} | {line}\n      | {pad}{}\n",
        lc.line,
        lc.col,
        d.message,
        lc.line,
        "^".repeat(width)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_span() {
        let text = "def main x =\n  x + y\n";
        let d = Diagnostic::error(Span::new(19, 20), "unknown name `y`");
        let out = render("t.cot", text, &d);
        assert_eq!(out, "t.cot:2:7: error: unknown name `y`\n    2 |   x + y\n      |       ^\n");
    }

    #[test]
    fn span_past_end_does_not_panic() {
        let d = Diagnostic::error(Span::new(100, 200), "eof");
        assert!(render("t", "ab", &d).starts_with("t:1:3: error: eof"));
    }
}
