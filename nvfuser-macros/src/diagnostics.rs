//! Diagnostics beyond the DSL's own errors: warnings on stable Rust, the names the
//! generated code reserves, and stubs emitted next to errors.
//!
//! **Warnings.** A proc macro cannot emit a warning on stable Rust, but the compiler warns
//! about a use of a `#[deprecated]` item, with the item's note, at the span of the use.
//! So each DSL warning (an unused input) becomes a deprecated constant used at the
//! parameter's span:
//!
//! ```text
//! warning: use of deprecated constant `unused_fusion_input`: unused input `b`: it stays a
//!          fusion input; prefix it with an underscore (`_b`) if that is intended
//! ```
//!
//! It is silenced like the DSL says (a leading `_`), or with `#[allow(deprecated)]` on
//! the enclosing item.
//!
//! **Stubs.** When a block has errors, the compiler would also report "cannot find
//! function" at every call of its fns. If the block parsed, each fn still gets its two
//! functions with the real signatures and a body that cannot run, so only the real errors
//! are shown.

use nvfuser_core::dsl::ast::ParamType;
use nvfuser_core::dsl::{self, DslError, FusionFn};
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

use crate::entry::fusion_fn_name;
use crate::paths::{self, private};

/// The generated code's prefix; user names must not start with it.
pub(crate) const RESERVED_PREFIX: &str = "__nvf_";

/// One warning as a use of a deprecated constant at the warning's span.
pub(crate) fn warning(w: &DslError) -> TokenStream {
    let note = Literal::string(&w.full_message().replace("\n= help: ", "; help: "));
    // Both names resolve at the call site (items are not hygienic); the use sits at the
    // user's tokens, so the compiler reports it there, as the user's code.
    let def = Ident::new("unused_fusion_input", Span::call_site());
    let used = Ident::new("unused_fusion_input", w.range().start);
    quote! {
        const _: () = {
            #[deprecated(note = #note)]
            #[allow(non_upper_case_globals)]
            const #def: () = ();
            #used
        };
    }
}

/// Errors for names the generated code needs: parameters with the reserved prefix, and
/// a fn whose generated `<name>_fusion` collides with another fn of the block.
pub(crate) fn reserved_names(fns: &[FusionFn]) -> Vec<DslError> {
    let mut errors = Vec::new();
    for f in fns {
        for p in &f.params {
            if p.name
                .text
                .to_ascii_lowercase()
                .starts_with(RESERVED_PREFIX)
            {
                errors.push(
                    DslError::new(
                        p.name.span,
                        format!(
                            "parameter names starting with `{RESERVED_PREFIX}` are reserved for the code `fusion!` generates"
                        ),
                    )
                    .with_hint("rename the parameter"),
                );
            }
        }
        let generated = format!("{}_fusion", f.name.text);
        if let Some(other) = fns.iter().find(|g| g.name.text == generated) {
            errors.push(
                DslError::new(
                    other.name.span,
                    format!(
                        "fn `{generated}` has the name `fusion!` generates for the fusion of fn `{}`",
                        f.name.text
                    ),
                )
                .with_hint(format!("rename fn `{generated}`")),
            );
        }
    }
    errors
}

/// Stubs for every fn of a block that parsed (see the module docs).
pub(crate) fn stubs(tokens: TokenStream) -> TokenStream {
    let Ok(fns) = dsl::parse_tokens(tokens) else {
        return TokenStream::new();
    };
    let (result, error, fusion, tensor, device, stub) = (
        private("Result"),
        private("Error"),
        private("Fusion"),
        private("Tensor"),
        private("Device"),
        private("stub"),
    );
    // A name is stubbed once (a block may hold `f` and `f_fusion`, which is an error above).
    let mut seen = std::collections::HashSet::new();
    fns.iter()
        .map(|f| {
            let vis = &f.vis;
            let span = f.name.span.start;
            let name = paths::user_ident(&f.name.text, span);
            let fusion_fn = fusion_fn_name(&f.name.text, span);
            let params = f.params.iter().map(|p| {
                let ident = paths::user_ident(&p.name.text, p.name.span.start);
                match &p.ty {
                    ParamType::Scalar { dtype, .. } => {
                        let ty = paths::scalar_type(*dtype);
                        quote!(#ident: #ty)
                    }
                    ParamType::Tensor(_) | ParamType::Invalid(_) => quote!(#ident: &#tensor),
                }
            });
            let ret = if f.ret.tuple {
                let tys = f.ret.types.iter().map(|_| quote!(#tensor));
                quote!((#(#tys,)*))
            } else {
                quote!(#tensor)
            };
            let device_ident = paths::local("device");
            let mut out = TokenStream::new();
            if seen.insert(fusion_fn.to_string()) {
                out.extend(quote! {
                    #[allow(dead_code)]
                    #vis fn #fusion_fn() -> #result<&'static #fusion, #error> {
                        #stub()
                    }
                });
            }
            if seen.insert(name.to_string()) {
                out.extend(quote! {
                    #[allow(unused_variables, dead_code, clippy::too_many_arguments)]
                    #vis fn #name(#device_ident: &#device, #(#params),*) -> #result<#ret, #error> {
                        #stub()
                    }
                });
            }
            out
        })
        .collect()
}
