//! The lexer: source text to tokens. ASCII identifiers, numbers, operators, and the few Unicode
//! symbols the printer uses (`λ → ← ⊸`). `--` starts a line comment.

use crate::diag::{Diagnostic, Span};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    /// An integer literal; `u128` so that `-9223372036854775808` can still be read.
    Int(u128),
    Real(f64),
    // keywords
    Def,
    Param,
    Input,
    Seed,
    Expect,
    Let,
    In,
    And,
    If,
    Then,
    Else,
    Case,
    Of,
    Do,
    True,
    False,
    // punctuation
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Semi,
    Colon,
    Dot,
    /// `\` or `λ`
    Lambda,
    /// `->` or `→`
    Arrow,
    /// `<-` or `←`
    LArrow,
    /// `⊸`
    Lollipop,
    Bar,
    Eq,
    /// An operator primitive's symbol (`+`, `-`, `**`, `<=`, `&&`, `mod`, ...): the table of
    /// primitives (prims.rs) lists them, with their precedence.
    Op(&'static str),
    /// `|||`, the parallel pair (Smeding & Vákár §12)
    Par3,
    Underscore,
    Eof,
}

impl Tok {
    /// How a token is named in messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("name `{s}`"),
            Tok::Int(i) => format!("number `{i}`"),
            Tok::Real(r) => format!("number `{}`", crate::value::show_real(*r)),
            Tok::Eof => "end of input".to_string(),
            t => format!("`{}`", t.text()),
        }
    }

    /// The source spelling of a keyword or punctuation token.
    pub fn text(&self) -> &'static str {
        match self {
            Tok::Def => "def",
            Tok::Param => "param",
            Tok::Input => "input",
            Tok::Seed => "seed",
            Tok::Expect => "expect",
            Tok::Let => "let",
            Tok::In => "in",
            Tok::And => "and",
            Tok::If => "if",
            Tok::Then => "then",
            Tok::Else => "else",
            Tok::Case => "case",
            Tok::Of => "of",
            Tok::Do => "do",
            Tok::True => "true",
            Tok::False => "false",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Comma => ",",
            Tok::Semi => ";",
            Tok::Colon => ":",
            Tok::Dot => ".",
            Tok::Lambda => "\\",
            Tok::Arrow => "->",
            Tok::LArrow => "<-",
            Tok::Lollipop => "⊸",
            Tok::Bar => "|",
            Tok::Eq => "=",
            Tok::Op(s) => s,
            Tok::Par3 => "|||",
            Tok::Underscore => "_",
            Tok::Ident(_) | Tok::Int(_) | Tok::Real(_) | Tok::Eof => "",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        "def" => Tok::Def,
        "param" => Tok::Param,
        "input" => Tok::Input,
        "seed" => Tok::Seed,
        "expect" => Tok::Expect,
        "let" => Tok::Let,
        "in" => Tok::In,
        "and" => Tok::And,
        "if" => Tok::If,
        "then" => Tok::Then,
        "else" => Tok::Else,
        "case" => Tok::Case,
        "of" => Tok::Of,
        "do" => Tok::Do,
        "true" => Tok::True,
        "false" => Tok::False,
        "_" => Tok::Underscore,
        // Printed reals read back: `nan`, `inf` (and `-inf` as a negated `inf`).
        "inf" => Tok::Real(f64::INFINITY),
        "nan" => Tok::Real(f64::NAN),
        _ => return crate::prims::operator(s).map(Tok::Op),
    })
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '\''
}

/// Splits `src` into tokens, ending with one `Eof` token. Stops at the first lexical error.
pub fn lex(src: &str) -> Result<Vec<Token>, Diagnostic> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let c = src[i..].chars().next().unwrap_or(' ');
        let start = i;
        if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        if src[i..].starts_with("--") {
            i = src[i..].find('\n').map_or(src.len(), |j| i + j);
            continue;
        }
        let push = |out: &mut Vec<Token>, tok: Tok, len: usize| {
            out.push(Token { tok, span: Span::new(start, start + len) });
        };
        if is_ident_start(c) {
            let mut j = i + 1;
            while j < src.len() && is_ident_char(bytes[j] as char) {
                j += 1;
            }
            let word = &src[i..j];
            let tok = keyword(word).unwrap_or_else(|| Tok::Ident(word.to_string()));
            push(&mut out, tok, j - i);
            i = j;
            continue;
        }
        if c.is_ascii_digit() {
            let (tok, len) = lex_number(src, i)?;
            push(&mut out, tok, len);
            i += len;
            continue;
        }
        if src.get(i..i + 3) == Some("|||") {
            push(&mut out, Tok::Par3, 3);
            i += 3;
            continue;
        }
        let two = src.get(i..i + 2).unwrap_or("");
        let op = crate::prims::operator_prefix_of(&src[i..]);
        let (tok, len) = match (two, op) {
            ("->", _) => (Tok::Arrow, 2),
            ("<-", _) => (Tok::LArrow, 2),
            (_, Some(op)) => (Tok::Op(op), op.len()),
            _ => {
                let tok = match c {
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '{' => Tok::LBrace,
                    '}' => Tok::RBrace,
                    '[' => Tok::LBracket,
                    ']' => Tok::RBracket,
                    ',' => Tok::Comma,
                    ';' => Tok::Semi,
                    ':' => Tok::Colon,
                    '.' => Tok::Dot,
                    '\\' | 'λ' => Tok::Lambda,
                    '→' => Tok::Arrow,
                    '←' => Tok::LArrow,
                    '⊸' => Tok::Lollipop,
                    '|' => Tok::Bar,
                    '=' => Tok::Eq,
                    '&' => {
                        return Err(Diagnostic::error(
                            Span::new(i, i + 1),
                            "unexpected character `&`: logical and is written `&&`",
                        ))
                    }
                    _ => {
                        let shown = if c.is_control() { format!("{:?}", c) } else { format!("`{c}`") };
                        return Err(Diagnostic::error(
                            Span::new(i, i + c.len_utf8()),
                            format!("unexpected character {shown}"),
                        ));
                    }
                };
                (tok, c.len_utf8())
            }
        };
        push(&mut out, tok, len);
        i += len;
    }
    out.push(Token { tok: Tok::Eof, span: Span::new(src.len(), src.len()) });
    Ok(out)
}

/// Lexes a number starting at `start` (a digit). A literal with `.` or an exponent is Real.
fn lex_number(src: &str, start: usize) -> Result<(Tok, usize), Diagnostic> {
    let b = src.as_bytes();
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let mut j = digits(start);
    let mut real = false;
    if j < b.len() && b[j] == b'.' {
        if j + 1 < b.len() && b[j + 1].is_ascii_digit() {
            real = true;
            j = digits(j + 1);
        } else {
            return Err(Diagnostic::error(
                Span::new(start, j + 1),
                format!(
                    "a real literal needs digits after the `.`: write `{}.0`",
                    &src[start..j]
                ),
            ));
        }
    }
    if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
        let mut k = j + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        if k < b.len() && b[k].is_ascii_digit() {
            real = true;
            j = digits(k);
        }
    }
    // A literal glued to a name (`3x`) is almost certainly a typo.
    if j < b.len() && (is_ident_char(b[j] as char)) {
        let mut k = j;
        while k < b.len() && is_ident_char(b[k] as char) {
            k += 1;
        }
        return Err(Diagnostic::error(
            Span::new(start, k),
            format!("malformed number `{}`", &src[start..k]),
        ));
    }
    let text = &src[start..j];
    let span = Span::new(start, j);
    if real {
        match text.parse::<f64>() {
            Ok(r) if r.is_finite() => Ok((Tok::Real(r), j - start)),
            _ => Err(Diagnostic::error(span, format!("real literal `{text}` is out of range for a 64-bit float"))),
        }
    } else {
        match text.parse::<u128>() {
            Ok(n) if n <= i64::MAX as u128 + 1 => Ok((Tok::Int(n), j - start)),
            _ => Err(Diagnostic::error(
                span,
                format!("integer literal `{text}` is out of range (the largest integer is {})", i64::MAX),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(toks("1.5 2.0 1e-3 2.5e+10 3"), vec![
            Tok::Real(1.5),
            Tok::Real(2.0),
            Tok::Real(1e-3),
            Tok::Real(2.5e10),
            Tok::Int(3),
            Tok::Eof
        ]);
        assert!(lex("1.").is_err());
        assert!(lex("99999999999999999999999").is_err());
        assert!(lex("3x").is_err());
    }

    #[test]
    fn unicode_and_comments() {
        assert_eq!(toks("λx → x -- comment\n ← ⊸"), vec![
            Tok::Lambda,
            Tok::Ident("x".into()),
            Tok::Arrow,
            Tok::Ident("x".into()),
            Tok::LArrow,
            Tok::Lollipop,
            Tok::Eof
        ]);
        let t = lex("λx").unwrap();
        assert_eq!(t[1].span, Span::new(2, 3));
    }
}
