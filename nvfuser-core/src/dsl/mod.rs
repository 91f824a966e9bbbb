//! The `fusion!` language: one grammar for the proc macro and for run-time sources.
//!
//! The `nvfuser-macros` crate calls [`compile_tokens`] on the macro's input at compile
//! time; [`parse_str`] + [`build`] do the same at run time (this is how a printed
//! reproducer, [`crate::ir::Fusion::to_reproducer`], becomes a fusion again). Both parse
//! with syn (modules `parse` and `lower`) into a spanned AST ([`ast`]) and then *interpret* it
//! (module `build`): every statement calls the real [`crate::FusionDefinition`], so compile-time
//! checking and run-time building follow the same rules, and errors carry spans.
//!
//! # Grammar reference
//!
//! ```text
//! block    := item+  |  `fusion!` `{` item+ `}`
//! item     := `///`doc* vis? `fn` NAME `(` param,* `)` `->` ret `{` stmt* tail `}`
//! param    := layout? NAME `:` type
//! type     := `Tensor` `<` dtype `,` `[` dim,* `]` `>`  |  dtype      (scalar)
//! dim      := `_` (symbolic) | NAME (named symbolic) | `1` (broadcast) | INT (static)
//! layout   := `#[layout(` key = value,* `)]`   keys: contiguity = [true, _, false] | false,
//!             stride_order = [0, 1], expanded = [2], static_sizes = true
//! ret      := type | `(` type,* `)`                       (tensor types only)
//! stmt     := `let` pat `=` expr `;`  |  expr `;`
//! pat      := NAME | `_` | `(` pat,* `)`
//! tail     := expr | `(` out,* `)`     out := expr | `inplace(` expr `,` PARAM `)`
//! expr     := literal | NAME | expr BINOP expr | `-`expr | `!`expr | expr `as` dtype
//!           | `(` expr `)` | OP `(` arg,* `)` | expr `.` OP `(` arg,* `)` | expr `.` INT
//! arg      := expr | NAME `=` expr                     (keyword: keepdim = true)
//! dtype    := bool | i32 | i64 | f16 | bf16 | f32 | f64 | f8e4m3 | f8e5m2
//! ```
//!
//! - **Literals** become constants: `2.0` is `f64`, `2` is `i64`, `true` is `bool`; a
//!   suffix types it (`0.5f32`, `3i32`, `1.0bf16`, `2f32`). `-` on a literal is part of
//!   the literal. Typed special values: `f32::NAN`, `f64::INFINITY`, `-f16::INFINITY`,
//!   `i64::MAX`, `i32::MIN`. Like Rust literals, an `f64` constant does not promote an
//!   `f32` tensor (PyTorch's scalar rule). Each literal is its own constant; bind one with
//!   `let c = 2.0;` to share it.
//! - **Operators**: `+ add`, `- sub`, `* mul`, `/ div` (integers truncate), `% fmod`
//!   (C-style like Rust's `%`: the sign of the dividend; use `remainder` for Python's),
//!   `& bitwise_and`, `| bitwise_or`, `^ bitwise_xor`, `<< shift_left`, `>> shift_right`
//!   (arithmetic), `== eq`, `!= ne`, `< lt`, `<= le`, `> gt`, `>= ge`, `&& logical_and`,
//!   `|| logical_or`; prefix `-` is `neg`, `!` is `logical_not` on bool and `bitwise_not`
//!   on integers. Precedence is Rust's.
//! - **Casts**: `x as f32` is `cast` (a no-op when `x` already is `f32`).
//! - **Ops**: every builder op, as `op(x, ...)` or `x.op(...)` (the receiver is the first
//!   argument), positional or by keyword:
//!   all unary ops (`exp(x)`, `x.rsqrt()`, ...); all binary ops by name (`x.pow(2.0)`,
//!   `maximum(a, b)`, `truediv`, `remainder`, `atan2`, `logical_shift_right`, ...);
//!   `where_(cond, a, b)`, `lerp(start, end, weight)`, `clamp(x, min, max)`,
//!   `threshold(x, threshold, value)`, `addcmul(x, t1, t2, value)`; `cast(x, dtype)`,
//!   `set(x)`, `segment_set(x)`; `sum|prod|mean(x, axes, keepdim = false, dtype = ..)`
//!   (`dtype`: compute and return in it, the input cast first, as PyTorch's `dtype=`),
//!   `max|min(x, axes, keepdim = false)`,
//!   `var(x, axes, correction = 1, keepdim = false)`, `var_mean(...)` (returns
//!   `(var, mean)`), `welford(x, axes)` (returns `(mean, var_sum, count)`);
//!   `cumsum|cumprod|cummax|cummin(x, axis)` (inclusive scans along one axis, negative
//!   from the end: `x.cumsum(1)`, `cummax(x, axis = -1)`), `cumsum|cumprod(x, axis,
//!   dtype = ..)` (`x.cumsum(1, dtype = f32)`: as `sum`'s `dtype`);
//!   `broadcast(x, [false, true])`, `unsqueeze(x, axis)`, `squeeze(x, axes)`,
//!   `expand(x, sizes)`, `reshape(x, sizes)`, `permute(x, perm)`,
//!   `broadcast_in_dim(x, sizes, dims)`, `slice(x, ranges)`, `pad(x, widths, value)`
//!   (widths `[(before, after), ..]` of integer literals or integer scalars:
//!   `x.pad([(a, 1), (0, x.size(0) % 2)], 0.0)`),
//!   `cat([a, b], axis)`; `full(sizes, value, dtype)`, `iota(length, start, step, dtype)`,
//!   `uniform(sizes, low, high, seed, offset, dtype)`,
//!   `normal(sizes, mean, std, seed, offset, dtype)`, and without the seed and offset,
//!   from the device's random generator (a new draw each call; `Device::manual_seed`):
//!   `rand_uniform(sizes, low, high, dtype)`, `rand_normal(sizes, mean, std, dtype)`;
//!   `size(x, axis)` (an `i64` scalar);
//!   `index_select(x, axis, index)`, `select(x, axis, index)`, `gather(x, axis, index)`,
//!   `take_along_axis(x, index, axis)`, `scatter(x, axis, index, src)` (`src` a tensor
//!   of x's dtype or a scalar), `scatter_add(x, axis, index, src)`; `triu(x, diagonal = 0)`, `tril(x, diagonal = 0)`
//!   (the triangle of the last two dims, expanded into iota, comparison and `where_`).
//! - **Arguments**: axes, masks, perms and dims are literals (`[1, -1]`, `[false, true]`;
//!   a single integer is one axis). Sizes are integer literals or integer scalars
//!   (`[x.size(0), -1]`, an `i64` parameter). Slice ranges, one per dim: `..`, `a..b`,
//!   `a..`, `..b`, or `(start, stop, step)`; pad widths are `(before, after)` pairs.
//! - **Tuples**: `let (var, mean) = x.var_mean([1]);`, or `x.var_mean([1]).1`.
//! - **Outputs**: the tail is a tensor or a tuple of tensors, matching the declared return
//!   type in count, dtype, rank and dims. `inplace(y, x)` in the tail makes `y` an output
//!   stored into the input tensor `x` (same dtype and rank); it is still returned, and its
//!   declared type is listed in the return type like any other output.
//! - **Named dims** are checked symbolically: dims that meet in an elementwise op (aligned
//!   on the right) or in `cat` must not have different names (`[N, H] + [H]` is fine,
//!   `[N, H] + [M]` an error); a name meeting a static size or `_` is accepted and checked
//!   when the fusion runs. A named dim in the return type must be one a parameter names.
//! - **Layouts**: `#[layout(...)]` on a tensor parameter sets what the default does not
//!   say: `contiguity` (one entry per dim in allocation order, outermost first, as in
//!   nvFuser: the shape's order unless `stride_order` says otherwise; `_` for broadcast
//!   and expanded dims, or one bool for all), `stride_order` (each dim's rank in
//!   allocation order, 0 innermost; default row-major), `expanded` (dims with stride 0 and a real size), `static_sizes`
//!   (size-1 dims are static size-1 dims, not broadcast dims). Printers emit it only when
//!   a layout is not the default.
//! - **Unused inputs** are warnings, not errors: the parameter stays a fusion input (the
//!   signature must not change under the user's feet). A leading `_` silences it.
//!
//! Not in the language, each with an error that says what to write instead: loops, `if`,
//! `match`, closures, `?`, macros, `mut` and assignment, `return`, references, indexing,
//! blocks, nested items, string and char literals, unsupported suffixes (`2u8`).

pub mod ast;
mod build;
mod call;
mod depth;
mod dims;
mod dispatch;
pub mod error;
mod lower;
mod ops;
mod outputs;
mod params;
mod parse;
pub mod signature;

use proc_macro2::TokenStream;

pub use ast::FusionFn;
pub use depth::MAX_NESTING;
pub use error::{to_compile_error, DslError, Severity, SpanRange};
pub use signature::{DimSig, OutputSig, ParamKind, ParamSig, Signature, TensorSig};

use crate::ir::Fusion;

/// Parses `fusion!` source (fn items, optionally inside `fusion! { ... }`).
///
/// Errors print as `line:column: error: message`:
///
/// ```
/// let errs = nvfuser_core::dsl::parse_str("fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {\n    for i in x {}\n    x\n}").unwrap_err();
/// assert_eq!(errs[0].line_column(), (2, 5));
/// assert!(errs[0].to_string().starts_with("2:5: error: loops are not supported"));
/// ```
pub fn parse_str(src: &str) -> Result<Vec<FusionFn>, Vec<DslError>> {
    match src.parse::<TokenStream>() {
        Ok(tokens) => parse_tokens(tokens),
        Err(e) => Err(vec![DslError::new(
            SpanRange::single(e.span()),
            format!("cannot tokenize: {e}"),
        )]),
    }
}

/// Parses a token stream (the proc macro's input).
pub fn parse_tokens(tokens: TokenStream) -> Result<Vec<FusionFn>, Vec<DslError>> {
    let (fns, errors) = parse::parse_partial(tokens);
    if errors.is_empty() {
        Ok(fns)
    } else {
        Err(errors)
    }
}

/// The fusion and signature of one fn, or every error found in it.
pub type BuildResult = Result<(Fusion, Signature), Vec<DslError>>;

/// Builds the fusion of one fn, with its signature. Warnings (unused inputs) are dropped;
/// see [`build_with_warnings`]. (The error list is only ever empty for an AST that holds
/// constructs the parser already reported, which [`parse_str`] never returns.)
pub fn build(f: &FusionFn) -> BuildResult {
    build_with_warnings(f).0
}

/// Builds the fusion of one fn; also returns the warnings.
pub fn build_with_warnings(f: &FusionFn) -> (BuildResult, Vec<DslError>) {
    build::build_fn(f)
}

/// One fn of a compiled block.
#[derive(Clone, Debug)]
pub struct CompiledFn {
    /// The AST (the macro re-emits the name, visibility and docs).
    pub ast: FusionFn,
    /// The fusion.
    pub fusion: Fusion,
    /// Its typed interface.
    pub signature: Signature,
}

/// A compiled block: every fn, plus the warnings.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The fns, in order.
    pub fns: Vec<CompiledFn>,
    /// Warnings of every fn (the block compiled).
    pub warnings: Vec<DslError>,
}

/// Parses and builds a token stream, collecting the errors of every phase and every fn
/// (what the proc macro calls).
pub fn compile_tokens(tokens: TokenStream) -> Result<Compiled, Vec<DslError>> {
    let (fns, mut errors) = parse::parse_partial(tokens);
    let mut warnings = Vec::new();
    let mut out = Vec::new();
    for f in fns {
        let (r, w) = build_with_warnings(&f);
        warnings.extend(w);
        match r {
            Ok((fusion, signature)) => out.push(CompiledFn {
                ast: f,
                fusion,
                signature,
            }),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(Compiled { fns: out, warnings })
    } else {
        Err(errors)
    }
}

/// [`compile_tokens`] on a string.
pub fn compile_str(src: &str) -> Result<Compiled, Vec<DslError>> {
    match src.parse::<TokenStream>() {
        Ok(tokens) => compile_tokens(tokens),
        Err(e) => Err(vec![DslError::new(
            SpanRange::single(e.span()),
            format!("cannot tokenize: {e}"),
        )]),
    }
}

/// Parses and builds every fn of a source: the fusions and signatures, in order.
///
/// ```
/// let src = "fn relu_add(x: Tensor<f32, [N, H]>, b: Tensor<f32, [H]>) -> Tensor<f32, [N, H]> { (x + b).relu() }";
/// let built = nvfuser_core::dsl::build_str(src).unwrap();
/// let (fusion, sig) = &built[0];
/// assert_eq!(sig.params.len(), 2);
/// assert_eq!(fusion.num_exprs(), 3); // broadcast, add, relu
/// ```
pub fn build_str(src: &str) -> Result<Vec<(Fusion, Signature)>, Vec<DslError>> {
    compile_str(src).map(|c| c.fns.into_iter().map(|f| (f.fusion, f.signature)).collect())
}
