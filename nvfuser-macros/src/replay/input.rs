//! Input declarations: the `TensorSpec` that declares an input exactly as the checked
//! fusion declares it (sizes, broadcast and expanded dims, static sizes, contiguity and
//! stride order), as a value for the compile-time replay and as tokens for the generated
//! code, both from one description.

use nvfuser_core::builder::{Contiguity, TensorSpec};
use nvfuser_core::ir::{IterKind, TensorType};
use nvfuser_core::DataType;
use proc_macro2::TokenStream;
use quote::quote;

use crate::paths::{self, private};

/// What `define_tensor_spec` needs to declare an input as it was declared.
pub(super) struct InputSpec {
    dtype: DataType,
    sizes: Vec<i64>,
    contiguity: Option<Vec<Option<bool>>>,
    stride_order: Option<Vec<usize>>,
    expanded: Option<Vec<bool>>,
    static_sizes: bool,
}

impl InputSpec {
    /// The spec of an input tensor; the parts equal to `TensorSpec::new`'s defaults are
    /// left out (the compile-time replay proves the result equal either way).
    pub(super) fn of(dtype: DataType, t: &TensorType) -> Result<Self, String> {
        let dims = t.shape_dims();
        if dims.len() != t.domain.len() {
            return Err("an input tensor has reduction dims".into());
        }
        let mut sizes = Vec::with_capacity(dims.len());
        let mut expanded = Vec::with_capacity(dims.len());
        let mut static_sizes = false;
        for d in &dims {
            let size = d.extent.as_const();
            sizes.push(match d.kind {
                IterKind::Broadcast => 1,
                _ => size.unwrap_or(-1),
            });
            expanded.push(d.kind == IterKind::Expanded);
            static_sizes |= d.kind == IterKind::Iteration && size == Some(1);
        }
        let rank = dims.len();
        let default_contiguity: Vec<Option<bool>> = dims
            .iter()
            .map(|d| (!d.is_broadcast_like()).then_some(true))
            .collect();
        let row_major: Vec<usize> = (0..rank).rev().collect();
        Ok(InputSpec {
            dtype,
            sizes,
            // A spec lists contiguity in allocation order.
            contiguity: (t.contiguity != default_contiguity)
                .then(|| t.contiguity_in_allocation_order()),
            stride_order: (t.stride_order != row_major).then(|| t.stride_order.clone()),
            expanded: expanded.contains(&true).then_some(expanded),
            static_sizes,
        })
    }

    pub(super) fn spec(&self) -> TensorSpec {
        let mut spec = TensorSpec::new(self.dtype, &self.sizes).static_sizes(self.static_sizes);
        if let Some(c) = &self.contiguity {
            spec = spec.contiguity(Contiguity::PerDim(c.clone()));
        }
        if let Some(o) = &self.stride_order {
            spec = spec.stride_order(o);
        }
        if let Some(e) = &self.expanded {
            spec = spec.expanded(e);
        }
        spec
    }

    pub(super) fn tokens(&self) -> TokenStream {
        let ts = private("TensorSpec");
        let dtype = paths::dtype(self.dtype);
        let sizes = self.sizes.iter().map(|&s| paths::int(s));
        let mut out = quote!(#ts::new(#dtype, &[#(#sizes),*]));
        if self.static_sizes {
            out = quote!(#out.static_sizes(true));
        }
        if let Some(c) = &self.contiguity {
            let (some, none) = (private("Some"), private("None"));
            let entries = c.iter().map(|c| match c {
                Some(b) => quote!(#some(#b)),
                None => quote!(#none),
            });
            let (contiguity, vec) = (private("Contiguity"), private("Vec"));
            out = quote!(#out.contiguity(#contiguity::PerDim(#vec::from([#(#entries),*]))));
        }
        if let Some(o) = &self.stride_order {
            let o = o.iter().map(|&i| paths::index(i));
            out = quote!(#out.stride_order(&[#(#o),*]));
        }
        if let Some(e) = &self.expanded {
            out = quote!(#out.expanded(&[#(#e),*]));
        }
        out
    }
}
