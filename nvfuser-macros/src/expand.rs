//! The expansion of a `fusion!` block, phase by phase.
//!
//! 1. Parse and check: `dsl::compile_tokens` parses every fn and interprets it through
//!    the real builder, collecting every error of every fn with its span.
//! 2. Names: the generated code's reserved names (`__nvf_*`, `<name>_fusion`).
//! 3. Replay: each checked fusion becomes builder calls, verified here (see `replay`).
//! 4. Emit: per fn, `<name>_fusion()` and the typed entry point (see `entry`), plus one
//!    deprecated-item use per warning (see `diagnostics`).
//!
//! Any error stops the expansion before emitting: every error of phases 1 and 2 becomes a
//! `compile_error!` at its span (all of them at once), next to stubs of the fns.

use nvfuser_core::dsl::{self, DslError, SpanRange};
use proc_macro2::TokenStream;
use quote::quote;

use crate::diagnostics;
use crate::entry;
use crate::replay;

/// Expands a `fusion!` block.
pub(crate) fn expand(tokens: TokenStream) -> TokenStream {
    match try_expand(tokens.clone()) {
        Ok(out) => out,
        Err(errors) => {
            let errors = dsl::to_compile_error(&errors);
            let stubs = diagnostics::stubs(tokens);
            quote!(#errors #stubs)
        }
    }
}

fn try_expand(tokens: TokenStream) -> Result<TokenStream, Vec<DslError>> {
    let compiled = dsl::compile_tokens(tokens)?;
    let asts: Vec<_> = compiled.fns.iter().map(|f| f.ast.clone()).collect();
    let reserved = diagnostics::reserved_names(&asts);
    if !reserved.is_empty() {
        return Err(reserved);
    }
    let mut out = TokenStream::new();
    let mut errors = Vec::new();
    for f in &compiled.fns {
        match replay::replay(&f.fusion) {
            Ok(replayed) => {
                out.extend(entry::fusion_fn(f, &replayed));
                out.extend(entry::entry_fn(f));
            }
            Err(why) => errors.push(DslError::new(
                SpanRange::single(f.ast.name.span.start),
                format!(
                    "internal error in nvfuser-macros: fn `{}` cannot be replayed through the builder: {why}",
                    f.ast.name.text
                ),
            )
            .with_hint("please report this with the fn's source; `nvfuser::dsl::build_str` builds it at run time meanwhile")),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for w in &compiled.warnings {
        out.extend(diagnostics::warning(w));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(src: &str) -> (String, syn::File) {
        let out = expand(src.parse().unwrap());
        let text = out.to_string();
        let file = syn::parse2::<syn::File>(out).unwrap_or_else(|e| panic!("{e}\n{text}"));
        (text, file)
    }

    fn fn_names(file: &syn::File) -> Vec<String> {
        file.items
            .iter()
            .filter_map(|i| match i {
                syn::Item::Fn(f) => Some(f.sig.ident.to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_fn_becomes_its_fusion_fn_and_its_entry_point() {
        let (text, file) = expand_str(
            "/// Doc.\npub fn relu(x: Tensor<f32, [N]>, b: Tensor<f32, [N]>) -> Tensor<f32, [N]> { (x + b).relu() }
             fn two(x: Tensor<f32, [_]>) -> (Tensor<f32, [_]>, Tensor<f32, [_]>) { (x, x.exp()) }",
        );
        assert_eq!(
            fn_names(&file),
            [
                "__nvf_fusion_of_relu",
                "relu_fusion",
                "relu",
                "__nvf_fusion_of_two",
                "two_fusion",
                "two"
            ]
        );
        assert!(
            text.contains("# [doc = \" Doc.\"] # [doc = \"\"]"),
            "{text}"
        );
        assert!(text.contains("check_named_dims (\"relu\""), "{text}");
        // No warnings: nothing deprecated is used.
        assert!(!text.contains("deprecated"));
        // Absolute paths only into `::nvfuser::__private`; no `std`, `core` or prelude paths.
        assert_eq!(
            text.matches(":: nvfuser ::").count(),
            text.matches(":: nvfuser :: __private ::").count()
        );
        for path in [
            "std ::",
            "core ::",
            "alloc ::",
            " Result <",
            " Ok (",
            " Some (",
        ] {
            let bare = text.replace(&format!(":: __private ::{path}"), "");
            assert!(!bare.contains(path), "`{path}` outside __private: {text}");
        }
    }

    #[test]
    fn errors_become_compile_errors_next_to_stubs() {
        let (text, file) =
            expand_str("pub fn relu(x: Tensor<f32, [N]>, s: f32) -> Tensor<f32, [N]> { x.rleu() }");
        assert!(
            text.contains(
                "compile_error ! { \"unknown op `rleu`\\n= help: did you mean `relu`?\" }"
            ),
            "{text}"
        );
        assert_eq!(fn_names(&file), ["relu_fusion", "relu"]);
        assert!(
            text.contains("s : :: nvfuser :: __private :: f32"),
            "{text}"
        );
        // A block that does not parse gets no stubs.
        let (text, file) = expand_str("fn relu(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { x + }");
        assert!(text.contains("compile_error"));
        assert!(fn_names(&file).is_empty());
    }

    #[test]
    fn unused_inputs_warn_through_a_deprecated_constant() {
        let (text, _) = expand_str(
            "fn f(x: Tensor<f32, [N]>, scale: f32, _quiet: f32) -> Tensor<f32, [N]> { x.relu() }",
        );
        assert_eq!(text.matches("# [deprecated").count(), 1, "{text}");
        assert!(
            text.contains("unused input `scale`; help: it stays a fusion input"),
            "{text}"
        );
    }

    #[test]
    fn reserved_names_are_errors() {
        let (text, _) = expand_str(
            "fn f(__NVF_x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { __NVF_x }
             fn f_fusion(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { x }",
        );
        assert!(
            text.contains("are reserved for the code `fusion!` generates"),
            "{text}"
        );
        assert!(
            text.contains("fn `f_fusion` has the name `fusion!` generates"),
            "{text}"
        );
    }

    #[test]
    fn a_parameter_named_device_keeps_its_name() {
        let (text, _) = expand_str("fn f(device: Tensor<f32, [N]>) -> Tensor<f32, [N]> { device }");
        assert!(text.contains("fn f (__nvf_device : & :: nvfuser :: __private :: Device , device : & :: nvfuser :: __private :: Tensor)"), "{text}");
    }
}
