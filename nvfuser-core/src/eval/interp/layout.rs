//! The shape ops (broadcast, expand, reshape, permute, squeeze, slice, pad, cat): their
//! IR arguments resolved against the actual sizes and checked, then applied by
//! [`crate::eval::shape`].

use std::borrow::Cow;

use super::{checked_numel, invalid_ir, Evaluator};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::eval::convert::cast_data;
use crate::eval::shape as sh;
use crate::eval::tensor::{HostData, HostTensor};
use crate::ir::{Expr, IterKind, SizeArg};

impl Evaluator<'_> {
    /// `broadcast`: the mask must keep exactly the input's dims.
    pub(super) fn broadcast(&self, e: &Expr, mask: &[bool]) -> Result<HostData> {
        let x = self.moved(e)?;
        if mask.iter().filter(|m| !**m).count() != x.rank() {
            return Err(invalid_ir(format!(
                "broadcast: mask {mask:?} does not fit rank {}",
                x.rank()
            )));
        }
        Ok(sh::broadcast(x.data(), mask))
    }

    /// `permute`: `perm` must be a permutation of the input's dims.
    pub(super) fn permute(&self, e: &Expr, perm: &[usize]) -> Result<HostData> {
        let x = self.moved(e)?;
        let mut seen = vec![false; x.rank()];
        let ok = perm.len() == x.rank()
            && perm
                .iter()
                .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
        if !ok {
            return Err(invalid_ir(format!(
                "permute: {perm:?} is not a permutation of 0..{}",
                x.rank()
            )));
        }
        Ok(sh::permute(x.data(), perm))
    }

    /// `squeeze`: every squeezed axis must exist and have size 1.
    pub(super) fn squeeze(&self, e: &Expr, axes: &[usize]) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let mut sorted = axes.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for &a in &sorted {
            match x.shape().get(a) {
                None => {
                    return Err(Error::AxisOutOfRange {
                        op: name.into(),
                        axis: a as i64,
                        rank: x.rank(),
                    })
                }
                Some(&n) if n != 1 => {
                    return Err(Error::shape(
                        name,
                        format!("size 1 at dim {a}"),
                        format!("size {n}"),
                    ))
                }
                _ => {}
            }
        }
        Ok(sh::squeeze(x.data(), &sorted))
    }

    pub(super) fn expand(&self, e: &Expr, sizes: &[SizeArg]) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        if sizes.len() != x.rank() {
            return Err(Error::arity(
                name,
                "sizes (one per dim)",
                x.rank(),
                sizes.len(),
            ));
        }
        let kinds = self.kinds(e, 0);
        let mut shape = Vec::with_capacity(sizes.len());
        for (d, (&a, &n)) in sizes.iter().zip(x.shape()).enumerate() {
            let v = self.size_arg(e, a)?;
            let broadcast = kinds.get(d) == Some(&IterKind::Broadcast);
            shape.push(match v {
                -1 => n,
                v if v < -1 => {
                    return Err(Error::invalid(
                        name,
                        format!("size {v} at dim {d}: expected -1 or a size >= 0"),
                    ))
                }
                v if v as usize == n => n,
                v if broadcast && n == 1 => v as usize,
                v => {
                    return Err(Error::shape(
                        name,
                        format!("size {n} at dim {d} (only broadcast dims expand)"),
                        format!("{v}"),
                    ))
                }
            });
        }
        checked_numel(name, &shape)?;
        sh::expand(name, x.data(), &shape)
    }

    pub(super) fn reshape(&self, e: &Expr, sizes: &[SizeArg]) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let numel = x.numel();
        let mut vals = Vec::with_capacity(sizes.len());
        for &a in sizes {
            vals.push(self.size_arg(e, a)?);
        }
        let mut infer = None;
        let mut known: usize = 1;
        for (d, &v) in vals.iter().enumerate() {
            match v {
                -1 if infer.is_some() => {
                    return Err(Error::invalid(
                        name,
                        format!("sizes {vals:?}: at most one -1 may be inferred"),
                    ))
                }
                -1 => infer = Some(d),
                v if v < -1 => {
                    return Err(Error::invalid(
                        name,
                        format!("size {v} at dim {d}: expected -1 or a size >= 0"),
                    ))
                }
                v => {
                    known = known
                        .checked_mul(v as usize)
                        .ok_or_else(|| Error::invalid(name, format!("sizes {vals:?} overflow")))?
                }
            }
        }
        let mismatch = || {
            Error::shape(
                name,
                format!("sizes with {numel} elements (input shape {:?})", x.shape()),
                format!("{vals:?}"),
            )
        };
        let mut shape: Vec<usize> = vals.iter().map(|&v| v.max(0) as usize).collect();
        if let Some(d) = infer {
            if known == 0 || numel % known != 0 {
                return Err(mismatch());
            }
            shape[d] = numel / known;
        } else if known != numel {
            return Err(mismatch());
        }
        sh::reshape(x.data(), &shape)
    }

    pub(super) fn slice(&self, e: &Expr, ranges: &[crate::ir::SliceRange]) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        if ranges.len() != x.rank() {
            return Err(Error::arity(
                name,
                "ranges (one per dim)",
                x.rank(),
                ranges.len(),
            ));
        }
        let mut resolved = Vec::with_capacity(ranges.len());
        for (d, (r, &n)) in ranges.iter().zip(x.shape()).enumerate() {
            if r.step < 1 {
                return Err(Error::invalid(
                    name,
                    format!("step {} at dim {d}: expected >= 1", r.step),
                ));
            }
            let size = n as i64;
            let bound = |a: SizeArg, what: &str| -> Result<i64> {
                match a {
                    SizeArg::Const(c) if c < 0 => Ok((size + c).max(0)),
                    SizeArg::Const(c) => Ok(c.min(size)),
                    SizeArg::Input(_) => {
                        let v = self.size_arg(e, a)?;
                        if v < 0 || v > size {
                            return Err(Error::invalid(
                                name,
                                format!(
                                    "{what} {v} at dim {d} is out of range for a dim of size {size} \
                                     (bounds given by scalars must be within 0..={size})"
                                ),
                            ));
                        }
                        Ok(v)
                    }
                }
            };
            let start = bound(r.start, "start")?;
            let stop = bound(r.stop, "stop")?.max(start);
            resolved.push((start as usize, stop as usize, r.step as usize));
        }
        Ok(sh::slice(x.data(), &resolved))
    }

    pub(super) fn cat(&self, e: &Expr, axis: usize) -> Result<HostData> {
        let name = e.op.name();
        let out = self.out_dtype(e, 0)?;
        let n = e.inputs.len();
        let args = (0..n).map(|k| self.arg(e, k)).collect::<Result<Vec<_>>>()?;
        let rank = args.first().map_or(0, |a| a.t.rank());
        if axis >= rank {
            return Err(self.axis_error(e, axis, rank));
        }
        let mut common: Vec<Option<usize>> = vec![None; rank];
        for (k, a) in args.iter().enumerate() {
            if a.t.rank() != rank {
                return Err(Error::Rank {
                    op: name.into(),
                    expected: format!("{rank} like the first tensor"),
                    found: a.t.rank(),
                });
            }
            let kinds = self.kinds(e, k);
            for (d, &s) in a.t.shape().iter().enumerate() {
                if d == axis || kinds.get(d) == Some(&IterKind::Broadcast) {
                    continue;
                }
                match common[d] {
                    None => common[d] = Some(s),
                    Some(c) if c != s => {
                        return Err(Error::shape(
                            name,
                            format!("size {c} at dim {d} (non-axis dims must match)"),
                            format!("size {s} in tensor {k} (shape {:?})", a.t.shape()),
                        ))
                    }
                    _ => {}
                }
            }
        }
        let shapes: Vec<Vec<usize>> = args
            .iter()
            .map(|a| {
                (0..rank)
                    .map(|d| {
                        if d == axis {
                            a.t.shape()[d]
                        } else {
                            common[d].unwrap_or(1)
                        }
                    })
                    .collect()
            })
            .collect();
        let mut total = shapes[0].clone();
        total[axis] = shapes.iter().map(|s| s[axis]).sum();
        checked_numel(name, &total)?;
        let converted: Vec<Cow<'_, HostData>> = args
            .iter()
            .map(|a| {
                if a.t.dtype() == out {
                    Cow::Borrowed(a.t.data())
                } else {
                    Cow::Owned(cast_data(a.t.data(), a.t.dtype(), out))
                }
            })
            .collect();
        let parts: Vec<&HostData> = converted.iter().map(|c| c.as_ref()).collect();
        sh::cat(&parts, &shapes, axis)
    }
    /// `pad`: one non-negative (before, after) pair per dim and a padded shape that
    /// fits; the input is converted to the output's dtype and padded with input 1.
    pub(super) fn pad(
        &self,
        e: &Expr,
        widths: &[(SizeArg, SizeArg)],
        out0: DataType,
    ) -> Result<HostData> {
        let name = e.op.name();
        let x = self.arg(e, 0)?.t;
        if widths.len() != x.rank() {
            return Err(Error::arity(
                name,
                "(before, after) pairs (one per dim)",
                x.rank(),
                widths.len(),
            ));
        }
        let mut w = Vec::with_capacity(widths.len());
        let widths: Vec<(i64, i64)> = widths
            .iter()
            .map(|&(lo, hi)| Ok((self.size_arg(e, lo)?, self.size_arg(e, hi)?)))
            .collect::<Result<_>>()?;
        for (d, &(lo, hi)) in widths.iter().enumerate() {
            if lo < 0 || hi < 0 {
                return Err(Error::invalid(
                    name,
                    format!("widths ({lo}, {hi}) at dim {d}: expected >= 0"),
                ));
            }
            w.push((lo as usize, hi as usize));
        }
        let padded = x
            .shape()
            .iter()
            .zip(&w)
            .map(|(&n, &(lo, hi))| n.checked_add(lo)?.checked_add(hi))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| Error::invalid(name, format!("widths {widths:?} are too large")))?;
        checked_numel(name, &padded)?;
        let fill = HostTensor::from_scalar_value(self.scalar(e, 1)?, out0);
        let xd = if x.dtype() == out0 {
            Cow::Borrowed(x.data())
        } else {
            Cow::Owned(cast_data(x.data(), x.dtype(), out0))
        };
        sh::pad(&xd, &w, fill.data())
    }
}
