//! Errors (and warnings) of the `fusion!` language, with source spans.
//!
//! Every error carries the narrowest span that explains it (the operator of a bad binary
//! op, the argument holding a bad axis, the dim of a parameter type), a message that says
//! what was expected and what was found, and where possible a hint that says what to write
//! instead. Errors are collected, never short-circuited, so one compile shows them all.
//!
//! A span is kept as its first and last token ([`SpanRange`]): on a stable compiler a
//! proc macro cannot join spans, but `syn::Error::new_spanned` over two tokens still
//! underlines the whole range. At run time (proc-macro2's `span-locations`) spans know
//! their line and column.
//!
//! Spans are `proc_macro2::Span`s, which are neither `Send` nor `Sync`; so are
//! [`DslError`] and the AST. Convert an error to a `String` to move it across threads.

use std::fmt;

use proc_macro2::{Punct, Spacing, Span, TokenStream, TokenTree};
use quote::ToTokens;

/// The first and last token of a syntax node.
#[derive(Clone, Copy, Debug)]
pub struct SpanRange {
    /// The first token's span.
    pub start: Span,
    /// The last token's span.
    pub end: Span,
}

impl SpanRange {
    /// A range of one token.
    pub fn single(span: Span) -> Self {
        SpanRange {
            start: span,
            end: span,
        }
    }

    /// The call site (for nodes that were not parsed from source).
    pub fn call_site() -> Self {
        SpanRange::single(Span::call_site())
    }

    /// The span of a syntax node: its first and last token.
    pub fn of(node: &impl ToTokens) -> Self {
        let mut first = None;
        let mut last = None;
        for tt in node.to_token_stream() {
            let (open, close) = match &tt {
                TokenTree::Group(g) => (g.span_open(), g.span_close()),
                other => (other.span(), other.span()),
            };
            first.get_or_insert(open);
            last = Some(close);
        }
        match (first, last) {
            (Some(start), Some(end)) => SpanRange { start, end },
            _ => SpanRange::call_site(),
        }
    }

    /// From the start of `self` to the end of `other`.
    pub fn to(self, other: SpanRange) -> Self {
        SpanRange {
            start: self.start,
            end: other.end,
        }
    }

    /// One span covering the range where the platform can join spans (at run time it
    /// always can; in a proc macro on a stable compiler this is the first token).
    pub fn joined(self) -> Span {
        self.start.join(self.end).unwrap_or(self.start)
    }
}

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The fusion is not built.
    Error,
    /// The fusion is built; the code is probably not what was meant (an unused input).
    Warning,
}

/// A diagnostic of the `fusion!` language.
#[derive(Clone, Debug)]
pub struct DslError {
    /// Where: the offending tokens (joined where the platform allows).
    pub span: Span,
    /// What is wrong, saying what was expected and what was found.
    pub message: String,
    /// What to write instead, when there is something to suggest.
    pub hint: Option<String>,
    /// Error or warning.
    pub severity: Severity,
    range: SpanRange,
}

impl DslError {
    /// An error over `range`.
    pub fn new(range: SpanRange, message: impl Into<String>) -> Self {
        DslError {
            span: range.joined(),
            message: message.into(),
            hint: None,
            severity: Severity::Error,
            range,
        }
    }

    /// A warning over `range`.
    pub fn warning(range: SpanRange, message: impl Into<String>) -> Self {
        DslError {
            severity: Severity::Warning,
            ..DslError::new(range, message)
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a hint when there is one.
    pub fn with_hint_opt(mut self, hint: Option<String>) -> Self {
        self.hint = hint.or(self.hint);
        self
    }

    /// The first and last token.
    pub fn range(&self) -> SpanRange {
        self.range
    }

    /// 1-based line and 1-based column of the first token (meaningful for sources parsed
    /// at run time, e.g. by [`crate::dsl::parse_str`]).
    pub fn line_column(&self) -> (usize, usize) {
        let lc = self.range.start.start();
        (lc.line, lc.column + 1)
    }

    /// 1-based line and 1-based (exclusive) column of the end of the last token.
    pub fn end_line_column(&self) -> (usize, usize) {
        let lc = self.range.end.end();
        (lc.line, lc.column + 1)
    }

    /// The message with its hint, as a compiler shows it.
    pub fn full_message(&self) -> String {
        match &self.hint {
            Some(h) => format!("{}\n= help: {h}", self.message),
            None => self.message.clone(),
        }
    }

    /// A `syn::Error` underlining the whole range (for the proc macro).
    pub fn to_syn_error(&self) -> syn::Error {
        let mut start = Punct::new('#', Spacing::Alone);
        start.set_span(self.range.start);
        let mut end = Punct::new('#', Spacing::Alone);
        end.set_span(self.range.end);
        let tokens: TokenStream = [TokenTree::Punct(start), TokenTree::Punct(end)]
            .into_iter()
            .collect();
        syn::Error::new_spanned(tokens, self.full_message())
    }

    /// The error with the source line it points at, rustc style:
    ///
    /// ```text
    /// error: unknown op `sqr`
    ///  --> 3:13
    ///   |
    /// 3 |     let y = sqr(x);
    ///   |             ^^^^^^
    ///   = help: did you mean `sqrt`?
    /// ```
    pub fn render(&self, src: &str) -> String {
        let (line, col) = self.line_column();
        let (end_line, end_col) = self.end_line_column();
        let text = src.lines().nth(line.saturating_sub(1)).unwrap_or("");
        let width = if end_line == line && end_col > col {
            end_col - col
        } else {
            text.chars().count().saturating_sub(col - 1).max(1)
        };
        let gutter = " ".repeat(line.to_string().len());
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = format!(
            "{kind}: {}\n{gutter}--> {line}:{col}\n{gutter} |\n{line} | {text}\n{gutter} | {}{}\n",
            self.message,
            " ".repeat(col - 1),
            "^".repeat(width)
        );
        if let Some(h) = &self.hint {
            out.push_str(&format!("{gutter} = help: {h}\n"));
        }
        out
    }
}

impl fmt::Display for DslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (line, col) = self.line_column();
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{line}:{col}: {kind}: {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " (help: {h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for DslError {}

impl From<syn::Error> for DslError {
    fn from(e: syn::Error) -> Self {
        DslError::new(SpanRange::single(e.span()), e.to_string())
    }
}

/// Every error as one `compile_error!` token stream (what the proc macro emits).
pub fn to_compile_error(errors: &[DslError]) -> TokenStream {
    errors
        .iter()
        .map(|e| e.to_syn_error().to_compile_error())
        .collect()
}

/// Converts a syn error (possibly several combined) into DSL errors.
pub(crate) fn from_syn(e: syn::Error) -> Vec<DslError> {
    e.into_iter().map(DslError::from).collect()
}
