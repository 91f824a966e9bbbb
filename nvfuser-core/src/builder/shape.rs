//! Shape ops: broadcast, expand, reshape, permute, squeeze/unsqueeze, slice, pad, cat.

use super::{describe_shape, normalize_axes, normalize_axis, FusionDefinition, Size};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::{Extent, IterDomain, IterKind, Op, SizeArg, SliceRange, ValId, MAX_NUMEL};

/// One dim of a slice, as the user gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// First index (negative constants count from the end).
    pub start: Size,
    /// One past the last index (negative constants count from the end).
    pub stop: Size,
    /// Step, at least 1.
    pub step: i64,
}

impl Slice {
    /// The whole dim.
    pub fn all() -> Self {
        Slice {
            start: Size::Const(0),
            stop: Size::Const(i64::MAX),
            step: 1,
        }
    }

    /// `start..stop` with step 1.
    pub fn range(start: impl Into<Size>, stop: impl Into<Size>) -> Self {
        Slice {
            start: start.into(),
            stop: stop.into(),
            step: 1,
        }
    }

    /// `start..stop` with a step.
    pub fn step(start: impl Into<Size>, stop: impl Into<Size>, step: i64) -> Self {
        Slice {
            start: start.into(),
            stop: stop.into(),
            step,
        }
    }
}

impl FusionDefinition {
    /// Inserts size-1 broadcast dims where `mask` is true; the false entries, in order,
    /// are the input's dims.
    pub fn broadcast(&mut self, x: ValId, mask: &[bool]) -> Result<ValId> {
        let op = "broadcast";
        let shape = self.shape(op, x)?;
        let kept = mask.iter().filter(|b| !**b).count();
        if kept != shape.len() {
            return Err(Error::Rank {
                op: op.into(),
                expected: format!("{kept} (the false entries of the mask)"),
                found: shape.len(),
            });
        }
        if !mask.iter().any(|b| *b) {
            return Ok(x);
        }
        let mut dims = shape.into_iter();
        let domain = mask
            .iter()
            .map(|&b| {
                if b {
                    Some(IterDomain::broadcast())
                } else {
                    dims.next()
                }
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::invalid(op, "mask does not match the input's rank"))?;
        let d = self.dtype(op, x)?;
        self.emit_tensor(
            Op::Broadcast {
                mask: mask.to_vec(),
            },
            &[x],
            d,
            domain,
        )
    }

    /// Inserts one broadcast dim at `axis` (`-1` appends).
    pub fn unsqueeze(&mut self, x: ValId, axis: i64) -> Result<ValId> {
        let rank = self.tensor_type("unsqueeze", x)?.rank();
        let axis = normalize_axis("unsqueeze", axis, rank + 1)?;
        let mask: Vec<bool> = (0..=rank).map(|i| i == axis).collect();
        self.broadcast(x, &mask)
    }

    /// JAX/nvFuser `broadcast_in_dim`: input dim `i` becomes output dim
    /// `broadcast_dims[i]`, the other output dims are broadcast, then everything is
    /// expanded to `sizes`.
    pub fn broadcast_in_dim(
        &mut self,
        x: ValId,
        sizes: &[Size],
        broadcast_dims: &[usize],
    ) -> Result<ValId> {
        let op = "broadcast_in_dim";
        let rank = self.tensor_type(op, x)?.rank();
        if broadcast_dims.len() != rank {
            return Err(Error::arity(
                op,
                "broadcast dims (one per input dim)",
                rank,
                broadcast_dims.len(),
            ));
        }
        if broadcast_dims.windows(2).any(|w| w[0] >= w[1])
            || broadcast_dims.iter().any(|&d| d >= sizes.len())
        {
            return Err(Error::invalid(
                op,
                format!(
                    "broadcast dims {broadcast_dims:?}: expected strictly increasing dims below {}",
                    sizes.len()
                ),
            ));
        }
        let mask: Vec<bool> = (0..sizes.len())
            .map(|i| !broadcast_dims.contains(&i))
            .collect();
        let b = self.broadcast(x, &mask)?;
        self.expand(b, sizes)
    }

    /// Expands broadcast dims to `sizes` (`-1` keeps a dim as it is). A non-broadcast
    /// dim may only be "expanded" to its own size.
    pub fn expand(&mut self, x: ValId, sizes: &[Size]) -> Result<ValId> {
        let op = "expand";
        let shape = self.shape(op, x)?;
        if sizes.len() != shape.len() {
            return Err(Error::arity(
                op,
                "sizes (one per dim)",
                shape.len(),
                sizes.len(),
            ));
        }
        let mut inputs = vec![x];
        let (args, extents) = self.size_args(op, sizes, &mut inputs)?;
        let mut domain = Vec::with_capacity(shape.len());
        let mut changed = false;
        for (i, (d, e)) in shape.into_iter().zip(extents).enumerate() {
            match e.as_const() {
                Some(-1) => domain.push(d),
                Some(n) if n < 0 => {
                    return Err(Error::invalid(
                        op,
                        format!("size {n} at dim {i}: expected -1 or a size >= 0"),
                    ))
                }
                _ if d.is_broadcast_like() => {
                    if e.as_const() == Some(1) && d.kind == IterKind::Broadcast {
                        domain.push(d);
                    } else {
                        changed = true;
                        domain.push(IterDomain {
                            extent: e,
                            kind: IterKind::Expanded,
                        });
                    }
                }
                Some(n) => match d.extent.as_const() {
                    Some(m) if m != n => {
                        return Err(Error::shape(
                            op,
                            format!("size {m} at dim {i} (only broadcast dims expand)"),
                            format!("{n}"),
                        ))
                    }
                    Some(_) => domain.push(d),
                    // A symbolic dim must equal `n` at run time: keep the op so that the
                    // evaluator (and the executor) check it instead of ignoring `n`.
                    None => {
                        changed = true;
                        domain.push(d)
                    }
                },
                None => {
                    changed = true;
                    domain.push(d)
                }
            }
        }
        if !changed {
            return Ok(x);
        }
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::Expand { sizes: args }, &inputs, d, domain)
    }

    /// Row-major reshape to `sizes`; at most one `-1`, which is inferred. Size-1 target
    /// dims become broadcast dims.
    pub fn reshape(&mut self, x: ValId, sizes: &[Size]) -> Result<ValId> {
        let op = "reshape";
        let shape = self.shape(op, x)?;
        let mut inputs = vec![x];
        let (args, extents) = self.size_args(op, sizes, &mut inputs)?;
        let infer: Vec<usize> = extents
            .iter()
            .enumerate()
            .filter(|(_, e)| e.as_const() == Some(-1))
            .map(|(i, _)| i)
            .collect();
        if infer.len() > 1 {
            return Err(Error::invalid(
                op,
                format!(
                    "sizes {sizes:?}: at most one -1 may be inferred, found {}",
                    infer.len()
                ),
            ));
        }
        if let Some((i, n)) = extents
            .iter()
            .enumerate()
            .find_map(|(i, e)| e.as_const().filter(|n| *n < -1).map(|n| (i, n)))
        {
            return Err(Error::invalid(
                op,
                format!("size {n} at dim {i}: expected -1 or a size >= 0"),
            ));
        }
        let numel = shape
            .iter()
            .fold(Extent::Const(1), |acc, d| acc * d.extent.clone());
        let known = extents
            .iter()
            .filter(|e| e.as_const() != Some(-1))
            .fold(Extent::Const(1), |acc, e| acc * e.clone());
        let mut extents = extents;
        if let Some(&i) = infer.first() {
            if let (Some(n), Some(k)) = (numel.as_const(), known.as_const()) {
                if k == 0 || n % k != 0 {
                    return Err(Error::shape(
                        op,
                        format!("a shape of {n} elements"),
                        format!("{sizes:?}"),
                    ));
                }
            }
            let dims: Vec<Extent> = shape.iter().map(|d| d.extent.clone()).collect();
            let given: Vec<Extent> = extents
                .iter()
                .filter(|e| e.as_const() != Some(-1))
                .cloned()
                .collect();
            extents[i] = Extent::exact_quotient(&dims, &given);
        } else if let (Some(n), Some(k)) = (numel.as_const(), known.as_const()) {
            if n != k {
                return Err(Error::shape(
                    op,
                    format!("sizes with {n} elements (input {})", describe_shape(&shape)),
                    format!("{sizes:?} ({k} elements)"),
                ));
            }
        }
        let domain = extents
            .into_iter()
            .map(|e| {
                if e.as_const() == Some(1) {
                    IterDomain::broadcast()
                } else {
                    IterDomain::iteration(e)
                }
            })
            .collect();
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::Reshape { sizes: args }, &inputs, d, domain)
    }

    /// Reorders dims: output dim `i` is input dim `perm[i]`.
    pub fn permute(&mut self, x: ValId, perm: &[i64]) -> Result<ValId> {
        let op = "permute";
        let shape = self.shape(op, x)?;
        if perm.len() != shape.len() {
            return Err(Error::arity(
                op,
                "entries in the permutation (one per dim)",
                shape.len(),
                perm.len(),
            ));
        }
        let perm = perm
            .iter()
            .map(|&p| normalize_axis(op, p, shape.len()))
            .collect::<Result<Vec<_>>>()?;
        let mut seen = vec![false; perm.len()];
        for &p in &perm {
            if std::mem::replace(&mut seen[p], true) {
                return Err(Error::invalid(
                    op,
                    format!("{perm:?} is not a permutation: dim {p} appears twice"),
                ));
            }
        }
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        let domain = perm.iter().map(|&p| shape[p].clone()).collect();
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::Permute { perm }, &[x], d, domain)
    }

    /// Removes size-1 dims at `axes`.
    pub fn squeeze(&mut self, x: ValId, axes: &[i64]) -> Result<ValId> {
        let op = "squeeze";
        let shape = self.shape(op, x)?;
        let axes = normalize_axes(op, axes, shape.len())?;
        for &a in &axes {
            let d = &shape[a];
            let size_one = d.kind == IterKind::Broadcast || d.extent.as_const() == Some(1);
            if !size_one {
                return Err(Error::shape(
                    op,
                    format!("a size-1 (broadcast) dim at axis {a}"),
                    format!("a dim of size {}", d.extent),
                ));
            }
        }
        if axes.is_empty() {
            return Ok(x);
        }
        let domain = shape
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, d)| d)
            .collect();
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::Squeeze { axes }, &[x], d, domain)
    }

    /// Strided slice, one range per dim. Constant bounds are clamped like Python's;
    /// scalar-valued bounds must be within `0..=size` at run time.
    pub fn slice(&mut self, x: ValId, ranges: &[Slice]) -> Result<ValId> {
        let op = "slice";
        let shape = self.shape(op, x)?;
        if ranges.len() != shape.len() {
            return Err(Error::arity(
                op,
                "ranges (one per dim)",
                shape.len(),
                ranges.len(),
            ));
        }
        let mut inputs = vec![x];
        let mut out_ranges = Vec::with_capacity(ranges.len());
        let mut domain = Vec::with_capacity(ranges.len());
        for (i, (r, d)) in ranges.iter().zip(&shape).enumerate() {
            if r.step < 1 {
                return Err(Error::invalid(
                    op,
                    format!("step {} at dim {i}: expected >= 1", r.step),
                ));
            }
            let (args, ext) = self.size_args(op, &[r.start, r.stop], &mut inputs)?;
            let size = d.extent.clone();
            let norm = |a: SizeArg, e: &Extent| -> Extent {
                match a {
                    // `i64::MAX` ("to the end") is the size itself, so the extent never
                    // carries a huge constant into 32-bit index math.
                    SizeArg::Const(i64::MAX) => size.clone(),
                    // Sizes are never negative: min(0, size) is 0.
                    SizeArg::Const(0) => Extent::Const(0),
                    SizeArg::Const(c) if c < 0 => {
                        (size.clone() + Extent::Const(c)).max(Extent::Const(0))
                    }
                    _ => e.clone().min(size.clone()),
                }
            };
            let start = norm(args[0], &ext[0]);
            let stop = norm(args[1], &ext[1]);
            let len = (stop - start)
                .max(Extent::Const(0))
                .ceil_div(Extent::Const(r.step));
            out_ranges.push(SliceRange {
                start: args[0],
                stop: args[1],
                step: r.step,
            });
            // A broadcast stays one; an expanded dim has its expanded size (a slice of
            // it to one element is an ordinary dim of size 1, not the expanded size).
            domain.push(
                if d.kind == IterKind::Broadcast && len.as_const() == Some(1) {
                    d.clone()
                } else {
                    IterDomain::iteration(len)
                },
            );
        }
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::Slice { ranges: out_ranges }, &inputs, d, domain)
    }

    /// Pads each dim with `widths[i] = (before, after)` copies of `value`.
    pub fn pad(&mut self, x: ValId, widths: &[(i64, i64)], value: ValId) -> Result<ValId> {
        let w: Vec<(Size, Size)> = widths
            .iter()
            .map(|&(lo, hi)| (Size::Const(lo), Size::Const(hi)))
            .collect();
        self.pad_sizes(x, &w, value)
    }

    /// [`Self::pad`] with widths that may be integer scalars (inputs, or scalar
    /// expressions over inputs and sizes), as nvFuser's pad takes them. A constant width
    /// must be non-negative here; a scalar one is checked when the fusion runs (a typed
    /// error on every device, before any kernel).
    pub fn pad_sizes(&mut self, x: ValId, widths: &[(Size, Size)], value: ValId) -> Result<ValId> {
        let op = "pad";
        let shape = self.shape(op, x)?;
        if widths.len() != shape.len() {
            return Err(Error::arity(
                op,
                "(before, after) pairs (one per dim)",
                shape.len(),
                widths.len(),
            ));
        }
        self.scalar(op, value)?;
        let mut inputs = vec![x, value];
        let flat: Vec<Size> = widths.iter().flat_map(|&(lo, hi)| [lo, hi]).collect();
        let (args, exts) = self.size_args(op, &flat, &mut inputs)?;
        let pairs: Vec<(SizeArg, SizeArg)> = args.chunks(2).map(|p| (p[0], p[1])).collect();
        let konst = |a: SizeArg| match a {
            SizeArg::Const(c) => Some(c),
            SizeArg::Input(_) => None,
        };
        if let Some((i, w)) = pairs
            .iter()
            .enumerate()
            .find(|(_, w)| konst(w.0).is_some_and(|c| c < 0) || konst(w.1).is_some_and(|c| c < 0))
        {
            let show = |a: SizeArg| konst(a).map_or("a scalar".to_string(), |c| c.to_string());
            return Err(Error::invalid(
                op,
                format!(
                    "widths ({}, {}) at dim {i}: expected non-negative widths (use slice to crop)",
                    show(w.0),
                    show(w.1)
                ),
            ));
        }
        let mut domain = Vec::with_capacity(shape.len());
        for (i, (d, &(lo, hi))) in shape.into_iter().zip(&pairs).enumerate() {
            let (lo, hi) = match (konst(lo), konst(hi)) {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => {
                    let e = d.extent + exts[2 * i].clone() + exts[2 * i + 1].clone();
                    domain.push(IterDomain::iteration(e));
                    continue;
                }
            };
            if lo == 0 && hi == 0 {
                domain.push(d);
                continue;
            }
            // Widths above the size limit are refused before their sum can overflow.
            let Some(w) = lo.checked_add(hi).filter(|&w| w <= MAX_NUMEL) else {
                return Err(Error::SizeLimit {
                    op: op.into(),
                    what: format!("total width of dim {i}"),
                    limit: format!("{MAX_NUMEL} (2^48)"),
                    found: format!("{lo} + {hi}"),
                });
            };
            domain.push(IterDomain::iteration(d.extent + Extent::Const(w)));
        }
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::Pad { widths: pairs }, &inputs, d, domain)
    }

    /// Concatenates tensors of one dtype and rank along `axis`.
    pub fn cat(&mut self, tensors: &[ValId], axis: i64) -> Result<ValId> {
        let op = "cat";
        let Some(&first) = tensors.first() else {
            return Err(Error::arity(op, "tensors (at least)", 1, 0));
        };
        let base = self.shape(op, first)?;
        let dtype = self.dtype(op, first)?;
        let axis = normalize_axis(op, axis, base.len())?;
        let mut domain: Vec<IterDomain> = base.clone();
        let mut along = Extent::Const(0);
        for &t in tensors {
            let s = self.shape(op, t)?;
            let d = self.dtype(op, t)?;
            if d != dtype {
                return Err(Error::dtype(
                    op,
                    format!("{dtype} like the first tensor (cast first)"),
                    d,
                ));
            }
            if s.len() != base.len() {
                return Err(Error::Rank {
                    op: op.into(),
                    expected: format!("{} like the first tensor", base.len()),
                    found: s.len(),
                });
            }
            for (i, d) in s.iter().enumerate() {
                if i == axis {
                    continue;
                }
                match (domain[i].extent.as_const(), d.extent.as_const()) {
                    (Some(a), Some(b))
                        if a != b && !d.is_broadcast_like() && !domain[i].is_broadcast_like() =>
                    {
                        return Err(Error::shape(
                            op,
                            format!("size {a} at dim {i}"),
                            format!("{} in another tensor", describe_shape(&s)),
                        ))
                    }
                    _ => {}
                }
                // Prefer a real dim over an expanded one over a size-1 broadcast one.
                let rank = |k: IterKind| match k {
                    IterKind::Broadcast => 0,
                    IterKind::Expanded => 1,
                    _ => 2,
                };
                if rank(d.kind) > rank(domain[i].kind) {
                    domain[i] = d.clone();
                }
            }
            along = along + s[axis].extent.clone();
        }
        if tensors.len() == 1 {
            return Ok(first);
        }
        domain[axis] = IterDomain::iteration(along);
        self.emit_tensor(Op::Cat { axis }, tensors, dtype, domain)
    }

    /// The size of tensor `x` along `axis`, as an i64 scalar.
    pub fn size(&mut self, x: ValId, axis: i64) -> Result<ValId> {
        let rank = self.tensor_type("size", x)?.rank();
        let axis = normalize_axis("size", axis, rank)?;
        let out = self.new_scalar(DataType::I64, None);
        self.emit(Op::Size { axis }, &[x], &[out]);
        Ok(out)
    }
}
