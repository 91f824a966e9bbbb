//! Input tensor descriptors: sizes, contiguity and stride order.
//!
//! Rules (as in nvFuser): a size of `-1` is symbolic, `1` is a broadcast dim, any other
//! `n >= 0` is static. The stride order gives each dim's rank in allocation order, 0
//! innermost (default: row-major). Contiguity has one entry per dim **in allocation
//! order** (outermost first; with the default stride order that is the shape's order),
//! `None` for broadcast and expanded dims: a dim is contiguous when its stride equals
//! stride × size of the next inner non-broadcast dim in allocation order (1 for the
//! innermost). The fusion's `TensorType` keeps contiguity by shape dim.

use super::FusionDefinition;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::{Extent, IterDomain, IterKind, TensorType, Val, ValId, ValKind};

/// Contiguity of an input tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Contiguity {
    /// The same for every non-broadcast dim.
    All(bool),
    /// Per dim; `None` exactly for broadcast dims.
    PerDim(Vec<Option<bool>>),
}

/// Everything [`FusionDefinition::define_tensor_spec`] needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Element type.
    pub dtype: DataType,
    /// Per dim: `-1` symbolic, `1` broadcast, `n` static.
    pub sizes: Vec<i64>,
    /// Contiguity (default: all contiguous); per-dim entries are in allocation order
    /// (the shape's order unless a stride order says otherwise), as in nvFuser.
    pub contiguity: Contiguity,
    /// Stride order, 0 innermost (default: row-major).
    pub stride_order: Option<Vec<usize>>,
    /// Dims with a stride of 0 and a real size (expanded); only set by
    /// [`FusionDefinition::define_tensor_from_strides`].
    expanded: Vec<bool>,
    /// Whether size-1 dims are static sizes rather than broadcast dims.
    static_sizes: bool,
}

impl TensorSpec {
    /// A contiguous row-major tensor.
    pub fn new(dtype: DataType, sizes: &[i64]) -> Self {
        TensorSpec {
            dtype,
            sizes: sizes.to_vec(),
            contiguity: Contiguity::All(true),
            stride_order: None,
            expanded: vec![false; sizes.len()],
            static_sizes: false,
        }
    }

    /// Sets the contiguity.
    pub fn contiguity(mut self, c: Contiguity) -> Self {
        self.contiguity = c;
        self
    }

    /// Sets the stride order.
    pub fn stride_order(mut self, order: &[usize]) -> Self {
        self.stride_order = Some(order.to_vec());
        self
    }

    /// Marks dims as expanded (stride 0 with a real size), one flag per dim; a size of
    /// `-1` then gives a symbolic expanded dim, `n` a static one.
    pub fn expanded(mut self, expanded: &[bool]) -> Self {
        self.expanded = expanded.to_vec();
        self
    }

    /// Makes size-1 entries static size-1 dims instead of broadcast dims.
    pub fn static_sizes(mut self, static_sizes: bool) -> Self {
        self.static_sizes = static_sizes;
        self
    }
}

impl FusionDefinition {
    /// Declares an input tensor from a full descriptor.
    pub fn define_tensor_spec(&mut self, spec: TensorSpec) -> Result<ValId> {
        let op = "define_tensor";
        let rank = spec.sizes.len();
        if spec.expanded.len() != rank {
            return Err(Error::arity(
                op,
                "expanded flags (one per dim)",
                rank,
                spec.expanded.len(),
            ));
        }
        self.check_room(op)?;
        let id = ValId::new(self.fusion().num_vals() as u32);
        let mut domain = Vec::with_capacity(rank);
        for (axis, &s) in spec.sizes.iter().enumerate() {
            let dim = Extent::Dim {
                tensor: id,
                axis: axis as u32,
            };
            domain.push(match s {
                -1 if spec.expanded[axis] => IterDomain {
                    extent: dim,
                    kind: IterKind::Expanded,
                },
                -1 => IterDomain::iteration(dim),
                1 if !spec.static_sizes => IterDomain::broadcast(),
                n if n >= 0 && spec.expanded[axis] => IterDomain {
                    extent: Extent::Const(n),
                    kind: IterKind::Expanded,
                },
                n if n >= 0 => IterDomain::iteration(Extent::Const(n)),
                n => {
                    return Err(Error::invalid(
                        op,
                        format!("size {n} of dim {axis}: expected -1 (symbolic), 1 (broadcast) or a static size >= 0"),
                    ))
                }
            });
        }
        let stride_order = match spec.stride_order {
            None => (0..rank).rev().collect::<Vec<usize>>(),
            Some(order) => {
                let mut seen = vec![false; rank];
                if order.len() != rank
                    || !order
                        .iter()
                        .all(|&o| o < rank && !std::mem::replace(&mut seen[o], true))
                {
                    return Err(Error::invalid(
                        op,
                        format!("stride order {order:?}: expected a permutation of 0..{rank}"),
                    ));
                }
                order
            }
        };
        let contiguity = match spec.contiguity {
            Contiguity::All(c) => domain
                .iter()
                .map(|d| (!d.is_broadcast_like()).then_some(c))
                .collect(),
            Contiguity::PerDim(c) => {
                if c.len() != rank {
                    return Err(Error::arity(
                        op,
                        "contiguity entries (one per dim)",
                        rank,
                        c.len(),
                    ));
                }
                // Entry k is the dim at allocation position k (outermost first).
                let logical: Vec<Option<bool>> =
                    (0..rank).map(|d| c[rank - 1 - stride_order[d]]).collect();
                for (axis, (d, c)) in domain.iter().zip(&logical).enumerate() {
                    let at = rank - 1 - stride_order[axis];
                    let entry = if at == axis {
                        String::new()
                    } else {
                        format!(" (contiguity entry {at}: entries are in allocation order)")
                    };
                    match (d.is_broadcast_like(), c) {
                        (true, Some(_)) => {
                            return Err(Error::invalid(
                                op,
                                format!("dim {axis} is a broadcast dim: expected contiguity None, found {c:?}{entry}"),
                            ))
                        }
                        (false, None) => {
                            return Err(Error::invalid(
                                op,
                                format!("dim {axis} is not a broadcast dim: expected contiguity Some(true|false), found None{entry}"),
                            ))
                        }
                        _ => {}
                    }
                }
                logical
            }
        };
        super::check_domain(op, &domain)?;
        let v = self.fusion.push_val(Val {
            dtype: spec.dtype,
            kind: ValKind::Tensor(TensorType {
                domain,
                contiguity,
                stride_order,
            }),
            definition: None,
        });
        debug_assert_eq!(v, id);
        self.fusion.inputs.push(v);
        Ok(self.own(v))
    }

    /// Declares an input tensor from concrete sizes and strides (in elements), deriving
    /// broadcast dims, contiguity and stride order. Size-1 dims become broadcast dims and
    /// other sizes symbolic, unless `static_sizes` keeps every size as given. Stride-0
    /// dims of size > 1 are expanded (contiguity `None`).
    pub fn define_tensor_from_strides(
        &mut self,
        dtype: DataType,
        sizes: &[i64],
        strides: &[i64],
        static_sizes: bool,
    ) -> Result<ValId> {
        let spec = tensor_spec_from_strides(dtype, sizes, strides, static_sizes)?;
        self.define_tensor_spec(spec)
    }
}

/// Derives a [`TensorSpec`] from concrete sizes and strides (see
/// [`FusionDefinition::define_tensor_from_strides`]).
pub fn tensor_spec_from_strides(
    dtype: DataType,
    sizes: &[i64],
    strides: &[i64],
    static_sizes: bool,
) -> Result<TensorSpec> {
    let op = "define_tensor_from_strides";
    let rank = sizes.len();
    if strides.len() != rank {
        return Err(Error::arity(
            op,
            "strides (one per size)",
            rank,
            strides.len(),
        ));
    }
    if let Some((i, s)) = sizes.iter().enumerate().find(|(_, s)| **s < 0) {
        return Err(Error::invalid(
            op,
            format!("size {s} of dim {i}: expected >= 0"),
        ));
    }
    if let Some((i, s)) = strides.iter().enumerate().find(|(_, s)| **s < 0) {
        return Err(Error::invalid(
            op,
            format!("stride {s} of dim {i}: negative strides are not supported"),
        ));
    }
    // Which dims hold no data of their own: size-1 (broadcast) or stride-0 (expanded).
    let broadcast: Vec<bool> = (0..rank).map(|i| sizes[i] == 1 && !static_sizes).collect();
    let expanded: Vec<bool> = (0..rank).map(|i| strides[i] == 0 && sizes[i] > 1).collect();
    // Allocation order (nvFuser's rule): dims with a stride, outermost first by
    // decreasing stride, ties in shape order; each stride-0 dim then keeps its own
    // position in the shape among them (so [8, 4, 0, 2] is row-major, not the stride-0
    // dim outermost).
    let mut alloc: Vec<usize> = (0..rank).filter(|&d| strides[d] != 0).collect();
    alloc.sort_by(|&a, &b| strides[b].cmp(&strides[a]).then(a.cmp(&b)));
    for d in (0..rank).filter(|&d| strides[d] == 0) {
        alloc.insert(d.min(alloc.len()), d);
    }
    let mut stride_order = vec![0; rank];
    for (pos, &d) in alloc.iter().enumerate() {
        stride_order[d] = rank - 1 - pos;
    }
    // Contiguity in allocation order, walking from the innermost dim outwards.
    let mut contiguity = vec![None; rank];
    let mut expected_stride = 1i64;
    for (pos, &d) in alloc.iter().enumerate().rev() {
        if broadcast[d] || expanded[d] {
            continue;
        }
        contiguity[pos] = Some(strides[d] == expected_stride || sizes[d] == 1);
        expected_stride = strides[d].saturating_mul(sizes[d]);
    }
    let spec_sizes = (0..rank)
        .map(|i| {
            if static_sizes || broadcast[i] {
                sizes[i]
            } else {
                -1
            }
        })
        .collect::<Vec<_>>();
    Ok(TensorSpec {
        dtype,
        sizes: spec_sizes,
        contiguity: Contiguity::PerDim(contiguity),
        stride_order: Some(stride_order),
        expanded,
        static_sizes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derive(sizes: &[i64], strides: &[i64]) -> (Vec<i64>, Vec<Option<bool>>, Vec<usize>) {
        let s = tensor_spec_from_strides(DataType::F32, sizes, strides, false).unwrap();
        let Contiguity::PerDim(c) = s.contiguity else {
            unreachable!()
        };
        (s.sizes, c, s.stride_order.unwrap())
    }

    #[test]
    fn row_major_is_contiguous() {
        let (s, c, o) = derive(&[4, 5, 6], &[30, 6, 1]);
        assert_eq!(s, vec![-1, -1, -1]);
        assert_eq!(c, vec![Some(true); 3]);
        assert_eq!(o, vec![2, 1, 0]);
    }

    #[test]
    fn transposed_and_sliced() {
        // A [5, 4] view of a row-major [4, 5] tensor.
        let (_, c, o) = derive(&[5, 4], &[1, 5]);
        assert_eq!(o, vec![0, 1]);
        assert_eq!(c, vec![Some(true), Some(true)]);
        // Every other column of a [4, 10] tensor: inner stride 2 is not contiguous,
        // the outer dim (stride 10 = 2 * 5) is not either (expected 5 * 2 = 10: it is).
        let (_, c, _) = derive(&[4, 5], &[10, 2]);
        assert_eq!(c, vec![Some(true), Some(false)]);
        // A [4, 5] slice of a [4, 8] tensor.
        let (_, c, _) = derive(&[4, 5], &[8, 1]);
        assert_eq!(c, vec![Some(false), Some(true)]);
    }

    #[test]
    fn stride_zero_dims_keep_their_position_and_contiguity_is_in_allocation_order() {
        // nvFuser's example: the expanded dim stays between its neighbours.
        let (s, c, o) = derive(&[2, 2, 2, 2], &[8, 4, 0, 2]);
        assert_eq!(s, vec![-1, -1, -1, -1]);
        assert_eq!(o, vec![3, 2, 1, 0]);
        // dim 1's next inner dim with data is dim 3 (2 * 2 = 4); dim 3 has stride 2.
        assert_eq!(c, vec![Some(true), Some(true), None, Some(false)]);
        // A column-major view with padded columns: allocation order is dim 1, dim 0;
        // contiguity lists dim 1 (stride 8 for 4 rows: not contiguous) first.
        let (_, c, o) = derive(&[4, 5], &[1, 8]);
        assert_eq!(o, vec![0, 1]);
        assert_eq!(c, vec![Some(false), Some(true)]);
        let mut fd = FusionDefinition::new();
        let t = fd
            .define_tensor_from_strides(DataType::F32, &[4, 5], &[1, 8], false)
            .unwrap();
        let tt = fd.fusion().tensor_type(t).unwrap().clone();
        assert_eq!(tt.contiguity, vec![Some(true), Some(false)], "by shape dim");
        assert_eq!(tt.stride_order, vec![0, 1]);
        // The same spec written by hand reads the same way; a broadcast entry in the
        // wrong place names the allocation-order entry.
        let spec = TensorSpec::new(DataType::F32, &[-1, -1])
            .contiguity(Contiguity::PerDim(vec![Some(false), Some(true)]))
            .stride_order(&[0, 1]);
        let u = fd.define_tensor_spec(spec).unwrap();
        assert_eq!(
            fd.fusion().tensor_type(u).unwrap().contiguity,
            tt.contiguity
        );
        let bad = TensorSpec::new(DataType::F32, &[1, -1])
            .contiguity(Contiguity::PerDim(vec![None, Some(true)]))
            .stride_order(&[0, 1]);
        let err = fd.define_tensor_spec(bad).unwrap_err().to_string();
        assert!(
            err.contains("contiguity entry 1: entries are in allocation order"),
            "{err}"
        );
    }

    #[test]
    fn size_one_and_stride_zero_dims() {
        let (s, c, o) = derive(&[4, 1, 6], &[6, 6, 1]);
        assert_eq!(s, vec![-1, 1, -1]);
        assert_eq!(c, vec![Some(true), None, Some(true)]);
        assert_eq!(o, vec![2, 1, 0]);
        // An expanded dim: stride 0, size 8.
        let (s, c, _) = derive(&[8, 6], &[0, 1]);
        assert_eq!(s, vec![-1, -1]);
        assert_eq!(c, vec![None, Some(true)]);
        let spec = tensor_spec_from_strides(DataType::F32, &[8, 6], &[0, 1], false).unwrap();
        assert_eq!(spec.expanded, vec![true, false]);
        // Static sizes keep size-1 dims as real dims.
        let spec = tensor_spec_from_strides(DataType::F32, &[4, 1], &[1, 1], true).unwrap();
        assert_eq!(spec.sizes, vec![4, 1]);
        assert_eq!(
            spec.contiguity,
            Contiguity::PerDim(vec![Some(true), Some(true)])
        );
    }
}
