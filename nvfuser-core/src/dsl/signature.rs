//! The typed interface of a fusion fn, for the macro's generated entry point.
//!
//! A [`Signature`] is plain data (no spans): the parameters in order (each is one fusion
//! input, in the same order), their dtypes, named dims and layouts, and the outputs with
//! their declared dtypes and dims and, for in-place outputs, the parameter they update.
//! The macro uses it to emit a typed function and the run-time checks that bind named
//! dims (`N` must be the same size in every input that names it).

use crate::dtype::DataType;

/// The interface of one fusion fn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The fn's name.
    pub name: String,
    /// Its doc comment lines.
    pub docs: Vec<String>,
    /// Parameters, in order; parameter `i` is fusion input `i`.
    pub params: Vec<ParamSig>,
    /// Outputs, in order; output `i` is fusion output `i`.
    pub outputs: Vec<OutputSig>,
    /// Whether the return type is written as a tuple.
    pub returns_tuple: bool,
}

/// One parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSig {
    /// Its name as written.
    pub name: String,
    /// Tensor or scalar, with its type.
    pub kind: ParamKind,
}

/// What a parameter is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A tensor.
    Tensor(TensorSig),
    /// A scalar of a dtype.
    Scalar(DataType),
}

/// A tensor parameter or output type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSig {
    /// Element type.
    pub dtype: DataType,
    /// One entry per dim.
    pub dims: Vec<DimSig>,
    /// Per dim, whether it is expanded (stride 0 with a real size); inputs only.
    pub expanded: Vec<bool>,
    /// Per dim, the contiguity (`None` for broadcast and expanded dims); inputs only.
    pub contiguity: Vec<Option<bool>>,
    /// Per dim, its rank in allocation order (0 innermost); inputs only.
    pub stride_order: Vec<usize>,
}

/// A dim of a declared tensor type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DimSig {
    /// `_`: any size.
    Any,
    /// `N`: a size shared by every dim named `N`.
    Named(String),
    /// `1`: a broadcast dim (size 1).
    Broadcast,
    /// A static size (a size-1 dim under `static_sizes` is `Static(1)`).
    Static(i64),
}

/// One output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSig {
    /// The declared type (layout fields are empty).
    pub ty: TensorSig,
    /// For an in-place output, the index of the parameter it is written into.
    pub alias_of: Option<usize>,
}

impl Signature {
    /// The indices of the tensor parameters.
    pub fn tensor_params(&self) -> impl Iterator<Item = usize> + '_ {
        self.params
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.kind, ParamKind::Tensor(_)))
            .map(|(i, _)| i)
    }

    /// Every named dim, with the `(param, axis)` places that name it, in order of first
    /// appearance (what the macro checks for agreement at run time).
    pub fn named_dims(&self) -> Vec<(String, Vec<(usize, usize)>)> {
        let mut out: Vec<(String, Vec<(usize, usize)>)> = Vec::new();
        for (pi, p) in self.params.iter().enumerate() {
            let ParamKind::Tensor(t) = &p.kind else {
                continue;
            };
            for (axis, d) in t.dims.iter().enumerate() {
                if let DimSig::Named(n) = d {
                    match out.iter_mut().find(|(name, _)| name == n) {
                        Some((_, places)) => places.push((pi, axis)),
                        None => out.push((n.clone(), vec![(pi, axis)])),
                    }
                }
            }
        }
        out
    }
}
