//! The nesting limit of the language.
//!
//! syn parses expressions recursively, and so do the lowering (syn to AST), the
//! interpreter and the destructors of both trees: deeply nested input (parentheses,
//! calls, method chains, operator runs) would overflow the stack (about 150 nested
//! parentheses in a debug build on a 2 MiB thread). So the token stream is scanned
//! first, without recursion, and input deeper than [`MAX_NESTING`] is refused with a
//! [`DslError`] before syn sees it. The lowering and the interpreter count their own
//! depth against the same limit, for ASTs that were not parsed from tokens.

use std::cell::Cell;

use proc_macro2::{token_stream, TokenStream, TokenTree};

use super::error::{DslError, SpanRange};

/// The deepest expression nesting accepted: every open group (`(`, `[`, `{`) counts
/// one, and so does every operator, `.` and `as` since the last `,` or `;` of each
/// open group (a method chain or an operator run nests its expression tree as deep as
/// its length). 64 levels run in a debug build on a 2 MiB thread.
pub const MAX_NESTING: usize = 64;

fn too_deep(span: SpanRange) -> DslError {
    DslError::new(
        span,
        format!(
            "expression nested too deeply: expected at most {MAX_NESTING} levels of groups, \
             calls, method calls and operators, found more"
        ),
    )
    .with_hint("split the expression into `let` bindings")
}

fn is_operator(c: char) -> bool {
    matches!(
        c,
        '.' | '+' | '-' | '*' | '/' | '%' | '!' | '&' | '|' | '^' | '<' | '>' | '=' | '?'
    )
}

/// Scans `tokens` iteratively and refuses nesting deeper than [`MAX_NESTING`], at the
/// first token that goes past it.
pub(crate) fn check_tokens(tokens: &TokenStream) -> Result<(), DslError> {
    // One entry per open group: its tokens and the operators since its last separator.
    let mut stack: Vec<(token_stream::IntoIter, usize)> = vec![(tokens.clone().into_iter(), 0)];
    let mut depth = 1usize;
    while let Some((iter, run)) = stack.last_mut() {
        let Some(tt) = iter.next() else {
            depth -= 1 + *run;
            stack.pop();
            continue;
        };
        match tt {
            TokenTree::Group(g) => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_deep(SpanRange {
                        start: g.span_open(),
                        end: g.span_close(),
                    }));
                }
                stack.push((g.stream().into_iter(), 0));
            }
            TokenTree::Punct(p) if matches!(p.as_char(), ',' | ';') => {
                depth -= *run;
                *run = 0;
            }
            TokenTree::Punct(p) if is_operator(p.as_char()) => {
                *run += 1;
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_deep(SpanRange::single(p.span())));
                }
            }
            TokenTree::Ident(i) if i == "as" => {
                *run += 1;
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_deep(SpanRange::single(i.span())));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

thread_local! {
    static LOWER_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One level of the recursive lowering; dropping it leaves the level.
pub(crate) struct LowerLevel(());

impl Drop for LowerLevel {
    fn drop(&mut self) {
        LOWER_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Enters one level of the lowering, or reports the limit at `span`.
pub(crate) fn enter_lower(span: SpanRange) -> Result<LowerLevel, DslError> {
    LOWER_DEPTH.with(|d| {
        if d.get() >= MAX_NESTING {
            Err(too_deep(span))
        } else {
            d.set(d.get() + 1);
            Ok(LowerLevel(()))
        }
    })
}

/// The interpreter's check, against its own counter.
pub(crate) fn check_eval(depth: usize, span: SpanRange) -> Result<(), DslError> {
    if depth >= MAX_NESTING {
        Err(too_deep(span))
    } else {
        Ok(())
    }
}
