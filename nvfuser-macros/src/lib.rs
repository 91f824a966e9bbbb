//! The `fusion!` procedural macro of nvfuser-rs.
//!
//! Use it through the facade crate (`nvfuser::fusion!`); the generated code names only
//! `::nvfuser::__private` paths. The language (grammar, type rules, error messages) is
//! `nvfuser_core::dsl`, shared with the run-time parser of reproducers; this crate turns
//! what that module accepts into Rust:
//!
//! - `expand`: the orchestration. The block is parsed and type-checked by
//!   `dsl::compile_tokens` (which interprets every statement through the real builder);
//!   errors become `compile_error!`s at their spans, all at once.
//! - `replay`: a checked fusion becomes ordinary builder calls, one per expression in
//!   arena order. The same calls run here at compile time, and the result must be
//!   structurally equal to the checked fusion, or the macro reports an internal error.
//! - `entry`: the two generated functions per fn, `<name>_fusion()` and the typed
//!   entry point `<name>(device, ...)`.
//! - `diagnostics`: warnings on stable Rust, reserved names, and the stubs emitted next
//!   to errors so that one mistake does not also break every caller.
//!
//! Architecture invariant: nothing here decides what a program means. A program is
//! accepted, rejected or warned about by `nvfuser_core::dsl` alone; this crate never adds
//! type rules of its own (it only reserves the `__nvf_` prefix its generated code uses).
#![deny(missing_docs)]

use proc_macro::TokenStream;

mod diagnostics;
mod entry;
mod expand;
mod paths;
mod replay;

/// Defines fusions in Rust syntax, checked at compile time.
///
/// ```ignore
/// use nvfuser::prelude::*;
///
/// fusion! {
///     /// LayerNorm over the last dim, bf16 in and out, f32 math.
///     pub fn layer_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, eps: f32)
///         -> Tensor<bf16, [N, H]>
///     {
///         let x = x as f32;
///         let mean = x.mean([1]).unsqueeze(1);
///         let xc = x - mean;
///         let var = (xc * xc).mean([1]).unsqueeze(1);
///         let y = xc * rsqrt(var + eps) * (w as f32) + (b as f32);
///         y as bf16
///     }
/// }
///
/// let y = layer_norm(&device, &x, &w, &b, 1e-5)?;  // Result<Tensor, nvfuser::Error>
/// let fusion: &'static Fusion = layer_norm_fusion()?;
/// ```
///
/// Each `fn` of the block becomes two functions with its visibility and docs:
///
/// - `<name>_fusion() -> Result<&'static Fusion, nvfuser::Error>`: the fusion, built
///   once per process by builder calls that replay the checked fusion expression by
///   expression, then compared (by structural hash) with the fusion checked at compile
///   time.
/// - `<name>(device: &Device, <tensors>: &Tensor, <scalars>) -> Result<Tensor, Error>`
///   (a tuple of tensors for several outputs): checks every tensor's dtype and rank and
///   that named dims (`N`, `H`) have one size across the inputs, then runs through a
///   process-wide `FusionExecutorCache` of this fusion. Scalar parameters take the Rust
///   type of their dtype (`f32`, `f64`, `i32`, `i64`, `bool`, `half::f16`,
///   `half::bf16`).
///
/// The language is documented in `nvfuser::dsl` (grammar reference). Every error is
/// reported at once, each at the narrowest span, with a hint. An unused input is a
/// warning (shown as a use of a deprecated item, the only warning a proc macro can raise
/// on stable Rust); it stays a fusion input, and a leading underscore (`_x`) silences it.
/// Names starting with `__nvf_` are reserved for the generated code.
#[proc_macro]
pub fn fusion(input: TokenStream) -> TokenStream {
    expand::expand(input.into()).into()
}
