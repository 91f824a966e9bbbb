//! The tokens generated code is made of: paths into `::nvfuser::__private`, literals for
//! dtypes and constants, and hygienic names for generated locals.
//!
//! Generated code names nothing but `::nvfuser::__private::*` (and the user's own
//! parameters), so a user needs no imports and a user's `use` cannot change its meaning:
//! even `f32` and `Result` are spelled through `__private`, since a user may shadow them.
//! Generated locals get `Span::mixed_site()` hygiene and an `__nvf_` prefix, so they never
//! collide with a parameter.

use nvfuser_core::{DataType, ScalarValue};
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

/// `::nvfuser::__private::<name>`.
pub(crate) fn private(name: &str) -> TokenStream {
    let id = Ident::new(name, Span::call_site());
    quote!(::nvfuser::__private::#id)
}

/// A generated local variable (mixed-site hygiene, `__nvf_` prefix).
pub(crate) fn local(name: &str) -> Ident {
    Ident::new(&format!("__nvf_{name}"), Span::mixed_site())
}

/// A user's identifier (a parameter or fn name, possibly raw: `r#type`) at its span.
pub(crate) fn user_ident(text: &str, span: Span) -> Ident {
    match text.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, span),
        None => Ident::new(text, span),
    }
}

/// `::nvfuser::__private::DataType::<Variant>`.
pub(crate) fn dtype(d: DataType) -> TokenStream {
    let ty = private("DataType");
    let variant = Ident::new(&format!("{d:?}"), Span::call_site());
    quote!(#ty::#variant)
}

/// The Rust type of a scalar parameter of dtype `d`.
pub(crate) fn scalar_type(d: DataType) -> TokenStream {
    private(d.name())
}

/// An `i64` expression with exactly the value `v`.
pub(crate) fn int(v: i64) -> TokenStream {
    if v == i64::MIN {
        let min = private("I64_MIN");
        return min;
    }
    let lit = Literal::i64_suffixed(v.abs());
    if v < 0 {
        quote!(-#lit)
    } else {
        quote!(#lit)
    }
}

/// A `usize` literal.
pub(crate) fn index(v: usize) -> Literal {
    Literal::usize_suffixed(v)
}

/// An `f64` expression with exactly the bits of `v` (literals for ordinary values,
/// `from_bits` for NaN, infinities and negative zero).
pub(crate) fn float(v: f64) -> TokenStream {
    if !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
        let from_bits = private("f64_from_bits");
        let bits = Literal::u64_suffixed(v.to_bits());
        return quote!(#from_bits(#bits));
    }
    let lit = Literal::f64_suffixed(v.abs());
    if v < 0.0 {
        quote!(-#lit)
    } else {
        quote!(#lit)
    }
}

/// A `ScalarValue` expression with exactly the value `v`.
pub(crate) fn scalar(v: ScalarValue) -> TokenStream {
    let sv = private("ScalarValue");
    match v {
        ScalarValue::Bool(b) => quote!(#sv::Bool(#b)),
        ScalarValue::Int(i) => {
            let i = int(i);
            quote!(#sv::Int(#i))
        }
        ScalarValue::Float(f) => {
            let f = float(f);
            quote!(#sv::Float(#f))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_keep_their_exact_values() {
        assert_eq!(int(-3).to_string(), "- 3i64");
        assert_eq!(
            int(i64::MIN).to_string(),
            ":: nvfuser :: __private :: I64_MIN"
        );
        assert_eq!(float(0.5).to_string(), "0.5f64");
        assert_eq!(float(-1e-5).to_string(), "- 0.00001f64");
        assert!(float(f64::NAN).to_string().contains("f64_from_bits"));
        assert!(float(-0.0).to_string().contains("f64_from_bits"));
        assert_eq!(
            dtype(DataType::BF16).to_string(),
            ":: nvfuser :: __private :: DataType :: BF16"
        );
        assert_eq!(
            scalar_type(DataType::F32).to_string(),
            ":: nvfuser :: __private :: f32"
        );
        // Every finite float prints as a literal that parses back to the same bits.
        for v in [0.1, 1e-300, 1e300, 3.0e38, f64::MIN_POSITIVE, 123456.789e-7] {
            let text = Literal::f64_suffixed(v).to_string();
            let parsed: f64 = text.trim_end_matches("f64").parse().unwrap();
            assert_eq!(parsed.to_bits(), v.to_bits(), "{text}");
        }
    }
}
