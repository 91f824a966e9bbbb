//! The indexing ops (index_select, select, gather, take_along_axis, scatter, size): axes and
//! index tensors checked against the input, then applied by [`crate::eval::shape`].

use super::{checked_numel, invalid_ir, Evaluator};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::eval::shape as sh;
use crate::eval::tensor::{HostData, HostTensor};
use crate::ir::{Expr, IterKind, SizeArg};
use ndarray::{ArrayD, Dimension, IxDyn};

impl Evaluator<'_> {
    pub(super) fn axis_error(&self, e: &Expr, axis: usize, rank: usize) -> Error {
        Error::AxisOutOfRange {
            op: e.op.name().into(),
            axis: axis as i64,
            rank,
        }
    }

    /// The axis of a gather-like op `e` is in range and its index has the input's rank.
    fn check_full_rank_index(
        &self,
        e: &Expr,
        axis: usize,
        rank: usize,
        index_rank: usize,
    ) -> Result<()> {
        if axis >= rank {
            return Err(self.axis_error(e, axis, rank));
        }
        if index_rank != rank {
            return Err(Error::Rank {
                op: e.op.name().into(),
                expected: format!("{rank} (the input's rank) for the index"),
                found: index_rank,
            });
        }
        Ok(())
    }

    /// `gather` (index no larger than the input in non-axis dims) or `take_along_axis`
    /// (index and input broadcast against each other in non-axis dims).
    pub(super) fn gather(&self, e: &Expr, axis: usize, broadcast: bool) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let idx = self.index_tensor(e, self.arg(e, 1)?)?;
        let rank = x.rank();
        self.check_full_rank_index(e, axis, rank, idx.ndim())?;
        let (xk, ik) = (self.kinds(e, 0), self.kinds(e, 1));
        let mut out_shape = idx.shape().to_vec();
        for d in (0..rank).filter(|&d| d != axis) {
            let (xs, is) = (x.shape()[d], idx.shape()[d]);
            if !broadcast {
                if is > xs {
                    return Err(Error::shape(
                        name,
                        format!("index size <= {xs} at dim {d} (the input's size)"),
                        format!(
                            "{is} (index shape {:?}, input shape {:?})",
                            idx.shape(),
                            x.shape()
                        ),
                    ));
                }
                continue;
            }
            let x_b = xk.get(d) == Some(&IterKind::Broadcast);
            let i_b = ik.get(d) == Some(&IterKind::Broadcast);
            out_shape[d] = match (x_b, i_b) {
                (true, _) => is,
                (false, true) => xs,
                (false, false) if xs == is => xs,
                _ => {
                    return Err(Error::shape(
                        name,
                        format!("index size {xs} at dim {d} (or a broadcast dim)"),
                        format!(
                            "{is} (index shape {:?}, input shape {:?})",
                            idx.shape(),
                            x.shape()
                        ),
                    ))
                }
            };
        }
        checked_numel(name, &out_shape)?;
        sh::check_indices(name, idx, axis, x.shape()[axis])?;
        let view = idx
            .broadcast(IxDyn(&out_shape))
            .ok_or_else(|| invalid_ir(format!("{name}: index does not broadcast")))?;
        // Input dims of size 1 broadcast inside `gather` (stride 0); any other size equals
        // the output's here.
        sh::gather(name, x.data(), axis, view)
    }
    /// `scatter` / `scatter_add`: a copy of input 0 with the index's targets replaced
    /// (or increased) in row-major order of the index, so the last duplicate wins and
    /// adds are made in that order, each rounded to the dtype (integers wrap).
    pub(super) fn scatter(&self, e: &Expr, axis: usize, add: bool) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let out_dt = x.dtype();
        let idx = self.index_tensor(e, self.arg(e, 1)?)?;
        let src_arg = self.arg(e, 2)?;
        let rank = x.rank();
        self.check_full_rank_index(e, axis, rank, idx.ndim())?;
        let src = if src_arg.t.dtype() == out_dt {
            std::borrow::Cow::Borrowed(src_arg.t)
        } else {
            std::borrow::Cow::Owned(src_arg.t.cast(out_dt))
        };
        if !src_arg.scalar && src.rank() != rank {
            return Err(Error::Rank {
                op: name.into(),
                expected: format!("{rank} (the input's rank) for the source"),
                found: src.rank(),
            });
        }
        for d in 0..rank {
            let is = idx.shape()[d];
            let (xs, ss) = (x.shape()[d], (!src_arg.scalar).then(|| src.shape()[d]));
            if d != axis && is > xs {
                return Err(Error::shape(
                    name,
                    format!("index size <= {xs} at dim {d} (the input's size)"),
                    format!(
                        "{is} (index shape {:?}, input shape {:?})",
                        idx.shape(),
                        x.shape()
                    ),
                ));
            }
            if let Some(ss) = ss.filter(|&ss| is > ss) {
                return Err(Error::shape(
                    name,
                    format!("index size <= {ss} at dim {d} (the source's size)"),
                    format!(
                        "{is} (index shape {:?}, source shape {:?})",
                        idx.shape(),
                        src.shape()
                    ),
                ));
            }
        }
        sh::check_indices(name, idx, axis, x.shape()[axis])?;
        let scalar = src_arg.scalar;
        // The source element of index position `pos`.
        fn at(scalar: bool, pos: &[usize]) -> &[usize] {
            if scalar {
                &[]
            } else {
                pos
            }
        }
        let mut q = vec![0usize; rank];
        Ok(match (x.data(), src.data()) {
            (HostData::Float(a), HostData::Float(s)) => {
                let mut out = a.as_standard_layout().into_owned();
                for (pos, &i) in idx.indexed_iter() {
                    q.copy_from_slice(pos.slice());
                    q[axis] = i as usize;
                    let v = s[at(scalar, pos.slice())];
                    let t = &mut out[q.as_slice()];
                    *t = if add {
                        crate::dtype::round_to(*t + v, out_dt)
                    } else {
                        v
                    };
                }
                HostData::Float(out)
            }
            (HostData::Int(a), HostData::Int(s)) => {
                let mut out = a.as_standard_layout().into_owned();
                for (pos, &i) in idx.indexed_iter() {
                    q.copy_from_slice(pos.slice());
                    q[axis] = i as usize;
                    let v = s[at(scalar, pos.slice())];
                    let t = &mut out[q.as_slice()];
                    *t = if add {
                        crate::eval::convert::wrap_int(t.wrapping_add(v), out_dt)
                    } else {
                        v
                    };
                }
                HostData::Int(out)
            }
            (HostData::Bool(a), HostData::Bool(s)) if !add => {
                let mut out = a.as_standard_layout().into_owned();
                for (pos, &i) in idx.indexed_iter() {
                    q.copy_from_slice(pos.slice());
                    q[axis] = i as usize;
                    out[q.as_slice()] = s[at(scalar, pos.slice())];
                }
                HostData::Bool(out)
            }
            (a, _) => {
                return Err(Error::dtype(
                    name,
                    "a numeric input for scatter_add",
                    a.kind_name(),
                ))
            }
        })
    }

    /// `index_select`: a 1-D integer index whose entries are within the axis.
    pub(super) fn index_select(&self, e: &Expr, axis: usize) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let idx = self.index_tensor(e, self.arg(e, 1)?)?;
        let n = *x
            .shape()
            .get(axis)
            .ok_or_else(|| self.axis_error(e, axis, x.rank()))?;
        if idx.ndim() != 1 {
            return Err(Error::Rank {
                op: name.into(),
                expected: "1 for the index".into(),
                found: idx.ndim(),
            });
        }
        sh::check_indices(name, idx, axis, n)?;
        let picks: Vec<usize> = idx.iter().map(|&i| i as usize).collect();
        Ok(sh::index_select(x.data(), axis, &picks))
    }

    /// `select`: one index along `axis` (negative counts from the end), removing the dim.
    pub(super) fn select(&self, e: &Expr, axis: usize, index: SizeArg) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let n = *x
            .shape()
            .get(axis)
            .ok_or_else(|| self.axis_error(e, axis, x.rank()))? as i64;
        let i = self.size_arg(e, index)?;
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(Error::invalid(
                name,
                format!(
                    "index {i} is out of range for dim {axis} of size {n} (expected -{n}..{n})"
                ),
            ));
        }
        Ok(sh::select(x.data(), axis, j as usize))
    }

    /// `size`: the size of one dim of input 0, as a scalar of the output's dtype.
    pub(super) fn dim_size(&self, e: &Expr, axis: usize, out0: DataType) -> Result<HostTensor> {
        let x = self.arg(e, 0)?.t;
        let n = *x
            .shape()
            .get(axis)
            .ok_or_else(|| self.axis_error(e, axis, x.rank()))?;
        Ok(HostTensor::raw(
            DataType::I64,
            HostData::Int(ArrayD::from_elem(IxDyn(&[]), n as i64)),
        )
        .cast(out0))
    }
}
