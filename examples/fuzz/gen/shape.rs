//! Shape steps: broadcast, expand, permute, slice, pad, cat, reshape (merging or
//! splitting dims) and squeeze. Each has its proposal and its builder call; the calls
//! track the new shape, with a fresh extent for every dim whose size the step changes.

use nvfuser::builder::Slice;
use nvfuser::ir::BinaryOp;
use nvfuser::prelude::*;

use super::pool::{combined, compatible};
use super::{Ax, Gen, Meta, Step};

impl Gen {
    /// A new broadcast dim at a random position of a tensor of rank below 4.
    pub(super) fn propose_broadcast(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dims.len() < 4)?;
        let r = self.metas[a].dims.len();
        let at = self.rng.below(r + 1);
        let mask: Vec<bool> = (0..=r).map(|i| i == at).collect();
        Some(Step::Broadcast(a, mask))
    }

    /// The broadcast dims of a tensor expanded to those of another of its rank.
    pub(super) fn propose_expand_like(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dims.contains(&Ax::B))?;
        let da = self.metas[a].dims.clone();
        let like = self.pick_tensor(|m| {
            m.dims.len() == da.len() && compatible(&m.dims, &da) && m.dims != da
        })?;
        Some(Step::ExpandLike(a, like))
    }

    /// A random permutation (a Fisher-Yates shuffle) of a tensor of rank 2 or more.
    pub(super) fn propose_permute(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dims.len() >= 2)?;
        let r = self.metas[a].dims.len();
        let mut perm: Vec<i64> = (0..r as i64).collect();
        for i in (1..r).rev() {
            let j = self.rng.below(i + 1);
            perm.swap(i, j);
        }
        Some(Step::Permute(a, perm))
    }

    /// A slice of one axis: by constant bounds, or up to a size minus a constant.
    pub(super) fn propose_slice(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| !m.dims.is_empty())?;
        let axis = self.rng.below(self.metas[a].dims.len());
        Some(if self.rng.chance(30) {
            Step::SliceToSize(a, axis, self.rng.below(3) as i64)
        } else {
            let start = self.rng.below(3) as i64;
            let stop = if self.rng.chance(50) {
                i64::MAX
            } else {
                -(self.rng.below(3) as i64) - 1
            };
            Step::Slice(a, axis, start, stop, 1 + self.rng.below(2) as i64)
        })
    }

    /// A pad of one axis by up to two elements on each side.
    pub(super) fn propose_pad(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| !m.dims.is_empty())?;
        let axis = self.rng.below(self.metas[a].dims.len());
        if self.rng.chance(35) {
            return Some(Step::PadScalar(a, axis, self.rng.below(2) as i64));
        }
        Some(Step::Pad(
            a,
            axis,
            self.rng.below(3) as i64,
            self.rng.below(3) as i64,
            0.5,
        ))
    }

    /// A cat of two tensors whose shapes agree except along the axis.
    pub(super) fn propose_cat(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| !m.dims.is_empty())?;
        let da = self.metas[a].dims.clone();
        let axis = self.rng.below(da.len());
        let b = self.pick_tensor(|m| {
            m.dims.len() == da.len()
                && m.dims
                    .iter()
                    .zip(&da)
                    .enumerate()
                    .all(|(i, (x, y))| i == axis || x == y)
        })?;
        Some(Step::Cat(a, b, axis))
    }

    /// A reshape of a tensor of rank 2 or more: two dims merged, or one split.
    pub(super) fn propose_reshape(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dims.len() >= 2)?;
        let r = self.metas[a].dims.len();
        Some(if self.rng.chance(50) {
            Step::MergeDims(a, self.rng.below(r - 1))
        } else {
            Step::SplitDim(a, self.rng.below(r), self.rng.pick(&[1, 2, 4]))
        })
    }

    /// A squeeze of every broadcast dim of a tensor.
    pub(super) fn propose_squeeze(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dims.contains(&Ax::B))?;
        let axes: Vec<i64> = self.metas[a]
            .dims
            .iter()
            .enumerate()
            .filter(|(_, d)| **d == Ax::B)
            .map(|(i, _)| i as i64)
            .collect();
        Some(Step::Squeeze(a, axes))
    }

    pub(super) fn make_broadcast(&mut self, a: usize, mask: &[bool]) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = self.fd.broadcast(x, mask).ok()?;
        let mut it = m.dims.iter();
        let dims = mask
            .iter()
            .map(|&b| {
                if b {
                    Ax::B
                } else {
                    *it.next().unwrap_or(&Ax::B)
                }
            })
            .collect();
        Some((v, Meta { dims, ..m }))
    }

    pub(super) fn make_expand_like(&mut self, a: usize, like: usize) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let (l, ml) = self.operand(like)?;
        if ml.dims.len() != m.dims.len() {
            return None;
        }
        let mut sizes = Vec::new();
        for (i, d) in m.dims.iter().enumerate() {
            if *d == Ax::B && ml.dims[i] != Ax::B {
                sizes.push(Size::Val(self.fd.size(l, i as i64).ok()?));
            } else {
                sizes.push(Size::Const(-1));
            }
        }
        let v = self.fd.expand(x, &sizes).ok()?;
        Some((
            v,
            Meta {
                dims: combined(&m.dims, &ml.dims),
                ..m
            },
        ))
    }

    pub(super) fn make_permute(&mut self, a: usize, perm: &[i64]) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = self.fd.permute(x, perm).ok()?;
        let dims = perm.iter().map(|&p| m.dims[p as usize]).collect();
        Some((v, Meta { dims, ..m }))
    }

    pub(super) fn make_slice(
        &mut self,
        a: usize,
        axis: usize,
        start: i64,
        stop: i64,
        step: i64,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let ranges: Vec<Slice> = (0..m.dims.len())
            .map(|i| {
                if i == axis {
                    Slice::step(start, stop, step)
                } else {
                    Slice::all()
                }
            })
            .collect();
        let v = self.fd.slice(x, &ranges).ok()?;
        let mut dims = m.dims.clone();
        dims[axis] = self.fresh_from(&[m.dims[axis]]);
        Some((v, Meta { dims, ..m }))
    }

    pub(super) fn make_slice_to_size(
        &mut self,
        a: usize,
        axis: usize,
        k: i64,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let n = self.fd.size(x, axis as i64).ok()?;
        let kk = self.fd.constant(k);
        let end = self.fd.sub(n, kk).ok()?;
        let ranges: Vec<Slice> = (0..m.dims.len())
            .map(|i| {
                if i == axis {
                    Slice::range(0i64, Size::Val(end))
                } else {
                    Slice::all()
                }
            })
            .collect();
        let v = self.fd.slice(x, &ranges).ok()?;
        let mut dims = m.dims.clone();
        dims[axis] = self.fresh_from(&[m.dims[axis]]);
        Some((v, Meta { dims, ..m }))
    }

    pub(super) fn make_pad(
        &mut self,
        a: usize,
        axis: usize,
        lo: i64,
        hi: i64,
        value: f64,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let widths: Vec<(i64, i64)> = (0..m.dims.len())
            .map(|i| if i == axis { (lo, hi) } else { (0, 0) })
            .collect();
        let value = self.fd.constant(value);
        let v = self.fd.pad(x, &widths, value).ok()?;
        let mut dims = m.dims.clone();
        dims[axis] = self.fresh_from(&[m.dims[axis]]);
        Some((
            v,
            Meta {
                dims,
                bound: m.bound.max(1.0),
                ..m
            },
        ))
    }

    /// A pad of `axis` by `(size % 3, size % 2 + hi)`: widths that are scalar
    /// expressions over the input's size, computed on the host and read by the kernel.
    pub(super) fn make_pad_scalar(
        &mut self,
        a: usize,
        axis: usize,
        hi: i64,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let n = self.fd.size(x, axis as i64).ok()?;
        let (three, two, h) = (
            self.fd.constant(3i64),
            self.fd.constant(2i64),
            self.fd.constant(hi),
        );
        let lo_w = self.fd.binary(BinaryOp::Remainder, n, three).ok()?;
        let r = self.fd.binary(BinaryOp::Remainder, n, two).ok()?;
        let hi_w = self.fd.add(r, h).ok()?;
        let widths: Vec<(Size, Size)> = (0..m.dims.len())
            .map(|i| {
                if i == axis {
                    (Size::Val(lo_w), Size::Val(hi_w))
                } else {
                    (Size::Const(0), Size::Const(0))
                }
            })
            .collect();
        let value = self.fd.constant(0.25);
        let v = self.fd.pad_sizes(x, &widths, value).ok()?;
        let mut dims = m.dims.clone();
        dims[axis] = self.fresh_from(&[m.dims[axis]]);
        Some((
            v,
            Meta {
                dims,
                bound: m.bound.max(1.0),
                ..m
            },
        ))
    }

    pub(super) fn make_cat(&mut self, a: usize, b: usize, axis: usize) -> Option<(ValId, Meta)> {
        let (x, ma) = self.operand(a)?;
        let (y, mb) = self.operand(b)?;
        let v = self.fd.cat(&[x, y], axis as i64).ok()?;
        let dtype = self.fd.fusion().val(v).dtype;
        let mut dims = combined(&ma.dims, &mb.dims);
        dims[axis] = self.fresh_from(&[ma.dims[axis], mb.dims[axis]]);
        Some((
            v,
            Meta {
                dims,
                dtype,
                scalar: false,
                exact: ma.exact && mb.exact,
                bound: ma.bound.max(mb.bound),
            },
        ))
    }

    pub(super) fn make_merge_dims(&mut self, a: usize, axis: usize) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let mut sizes = Vec::new();
        for i in 0..m.dims.len() {
            if i == axis {
                sizes.push(Size::Const(-1));
            } else if i != axis + 1 {
                sizes.push(Size::Val(self.fd.size(x, i as i64).ok()?));
            }
        }
        let v = self.fd.reshape(x, &sizes).ok()?;
        let mut dims = m.dims.clone();
        let parts = [dims[axis], dims[axis + 1]];
        dims.remove(axis + 1);
        dims[axis] = self.fresh_from(&parts);
        Some((v, Meta { dims, ..m }))
    }

    pub(super) fn make_split_dim(
        &mut self,
        a: usize,
        axis: usize,
        k: i64,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let mut sizes = Vec::new();
        for i in 0..m.dims.len() {
            if i == axis {
                sizes.push(Size::Const(k));
                sizes.push(Size::Const(-1));
            } else {
                sizes.push(Size::Val(self.fd.size(x, i as i64).ok()?));
            }
        }
        let v = self.fd.reshape(x, &sizes).ok()?;
        let mut dims = m.dims.clone();
        let f1 = if k == 1 { Ax::B } else { self.fresh() };
        let f2 = self.fresh_from(&[m.dims[axis]]);
        dims[axis] = f2;
        dims.insert(axis, f1);
        Some((v, Meta { dims, ..m }))
    }

    pub(super) fn make_squeeze(&mut self, a: usize, axes: &[i64]) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = self.fd.squeeze(x, axes).ok()?;
        let dims = m
            .dims
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(&(*i as i64)))
            .map(|(_, d)| *d)
            .collect();
        Some((v, Meta { dims, ..m }))
    }
}
