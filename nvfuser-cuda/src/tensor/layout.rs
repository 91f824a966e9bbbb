//! Sizes, strides and offset of a strided view, and every view operation on them.
//!
//! This is the pure index arithmetic behind [`Tensor`](super::Tensor): no storage, no
//! device, so all of it is tested on any machine. Strides and the offset count elements,
//! not bytes, and are never negative (the IR's tensor descriptors reject negative strides,
//! as PyTorch does). Every computation that could overflow is checked: a view whose
//! element count or extent does not fit in `usize` is an error, never a wrapped index.
//!
//! Axis arguments follow the builder's convention (`FusionDefinition::permute`, `slice`,
//! `unsqueeze`): `i64`, negative values counting from the end, so that a view written
//! against a tensor reads the same as the op written against its IR value.

use smallvec::SmallVec;

use crate::error::Error;

/// Per-dim sizes or strides; six dims live inline, without a heap allocation.
pub(crate) type Dims = SmallVec<[usize; 6]>;

/// The row-major (C order) strides of `sizes`, in elements.
///
/// Size-0 and size-1 dims get the stride they would have in a dense layout, as in
/// PyTorch, so `contiguous_strides(&[2, 0, 3]) == [3, 3, 1]`. Saturates instead of
/// overflowing; a shape that large has more elements than fit in memory, and tensor
/// constructors reject it.
///
/// ```
/// assert_eq!(nvfuser_cuda::contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
/// assert_eq!(nvfuser_cuda::contiguous_strides(&[]), Vec::<usize>::new());
/// ```
pub fn contiguous_strides(sizes: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; sizes.len()];
    let mut step = 1usize;
    for (stride, &size) in strides.iter_mut().zip(sizes).rev() {
        *stride = step;
        step = step.saturating_mul(size.max(1));
    }
    strides
}

/// The shape and placement of a strided view into a buffer of elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    sizes: Dims,
    strides: Dims,
    offset: usize,
    /// The product of `sizes`, checked when the layout was built.
    numel: usize,
}

/// The product of `sizes`, or an error naming the operation when it overflows.
fn checked_numel(op: &'static str, sizes: &[usize]) -> Result<usize, Error> {
    sizes
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| {
            Error::tensor(
                op,
                "a shape whose element count fits in usize",
                format!("sizes {sizes:?}"),
            )
        })
}

/// Normalizes an axis in `-rank..rank` to `0..rank`.
fn normalize_axis(op: &'static str, axis: i64, rank: usize) -> Result<usize, Error> {
    let r = i64::try_from(rank).unwrap_or(i64::MAX);
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        // In 0..rank, so it fits in usize.
        Ok(a as usize)
    } else {
        Err(Error::tensor(
            op,
            format!("an axis in {}..{rank} for a rank-{rank} tensor", -r),
            format!("axis {axis}"),
        ))
    }
}

impl Layout {
    /// A dense row-major layout of `sizes` at offset 0.
    pub(crate) fn contiguous(op: &'static str, sizes: &[usize]) -> Result<Layout, Error> {
        let numel = checked_numel(op, sizes)?;
        Ok(Layout {
            sizes: sizes.iter().copied().collect(),
            strides: contiguous_strides(sizes).into_iter().collect(),
            offset: 0,
            numel,
        })
    }

    /// A layout from explicit sizes, strides and offset (all in elements). Only the
    /// element count is checked here; whether the view fits its buffer is the caller's
    /// check ([`Layout::required_elements`]).
    pub(crate) fn strided(
        op: &'static str,
        sizes: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<Layout, Error> {
        if sizes.len() != strides.len() {
            return Err(Error::tensor(
                op,
                format!("one stride per dim ({} for sizes {sizes:?})", sizes.len()),
                format!("{} strides {strides:?}", strides.len()),
            ));
        }
        let numel = checked_numel(op, sizes)?;
        let layout = Layout {
            sizes: sizes.iter().copied().collect(),
            strides: strides.iter().copied().collect(),
            offset,
            numel,
        };
        // The highest addressed element must be representable.
        layout.required_elements(op)?;
        Ok(layout)
    }

    pub(crate) fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    pub(crate) fn strides(&self) -> &[usize] {
        &self.strides
    }

    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    pub(crate) fn rank(&self) -> usize {
        self.sizes.len()
    }

    pub(crate) fn numel(&self) -> usize {
        self.numel
    }

    /// How many elements a buffer needs for this view to stay inside it: one past the
    /// highest addressed element, or just the offset for an empty view (which addresses
    /// nothing).
    pub(crate) fn required_elements(&self, op: &'static str) -> Result<usize, Error> {
        match self.span(op)? {
            Some((_, last)) => Ok(last + 1),
            None => Ok(self.offset),
        }
    }

    /// The lowest and highest addressed element offsets, or `None` for an empty view.
    /// With non-negative strides the lowest is the offset itself.
    pub(crate) fn span(&self, op: &'static str) -> Result<Option<(usize, usize)>, Error> {
        if self.numel == 0 {
            return Ok(None);
        }
        let overflow = || {
            Error::tensor(
                op,
                "a view whose highest element index fits in usize",
                format!(
                    "sizes {:?}, strides {:?}, offset {}",
                    self.sizes, self.strides, self.offset
                ),
            )
        };
        let mut last = self.offset;
        for (&size, &stride) in self.sizes.iter().zip(&self.strides) {
            // size >= 1 here, since numel > 0.
            let extent = (size - 1).checked_mul(stride).ok_or_else(overflow)?;
            last = last.checked_add(extent).ok_or_else(overflow)?;
        }
        Ok(Some((self.offset, last)))
    }

    /// Whether the view is dense and row-major: every dim of size > 1 has the stride of
    /// a C-order layout. Size-1 dims may have any stride; an empty view is contiguous.
    /// An expanded dim (stride 0, size > 1) is not contiguous.
    pub(crate) fn is_contiguous(&self) -> bool {
        if self.numel == 0 {
            return true;
        }
        let mut expected = 1usize;
        for (&size, &stride) in self.sizes.iter().zip(&self.strides).rev() {
            if size == 1 {
                continue;
            }
            if stride != expected {
                return false;
            }
            expected = expected.saturating_mul(size);
        }
        true
    }

    /// The first dim (by position) at which two distinct indices of the view can
    /// address one element, or `None` when every element of the view is its own memory
    /// location. Sufficient test: ordered by stride, each dim of more than one element
    /// steps past everything the smaller-stride dims span. (A layout that interleaves
    /// dims without overlap is reported too: a store into it is refused, never racy.)
    pub(crate) fn overlapping_dim(&self) -> Option<usize> {
        if self.numel <= 1 {
            return None;
        }
        let mut dims: SmallVec<[usize; 6]> =
            (0..self.rank()).filter(|&d| self.sizes[d] > 1).collect();
        dims.sort_by_key(|&d| (self.strides[d], d));
        let mut span = 0usize;
        for d in dims {
            if self.strides[d] <= span {
                return Some(d);
            }
            span = span.saturating_add(self.strides[d].saturating_mul(self.sizes[d] - 1));
        }
        None
    }

    /// Reorders dims: dim `i` of the result is dim `dims[i]` of `self`.
    pub(crate) fn permute(&self, dims: &[i64]) -> Result<Layout, Error> {
        const OP: &str = "Tensor::permute";
        let rank = self.rank();
        if dims.len() != rank {
            return Err(Error::tensor(
                OP,
                format!("a permutation of {rank} dims"),
                format!("{} dims {dims:?}", dims.len()),
            ));
        }
        let mut seen = vec![false; rank];
        let mut sizes = Dims::new();
        let mut strides = Dims::new();
        for &d in dims {
            let a = normalize_axis(OP, d, rank)?;
            if std::mem::replace(&mut seen[a], true) {
                return Err(Error::tensor(
                    OP,
                    format!("each of the {rank} dims exactly once"),
                    format!("dim {a} twice in {dims:?}"),
                ));
            }
            sizes.push(self.sizes[a]);
            strides.push(self.strides[a]);
        }
        Ok(Layout {
            sizes,
            strides,
            offset: self.offset,
            numel: self.numel,
        })
    }

    /// Python-style strided slice of one axis: `start` and `stop` count from the end when
    /// negative and are clamped to `0..=size`; `step` is at least 1.
    pub(crate) fn slice(
        &self,
        axis: i64,
        start: i64,
        stop: i64,
        step: i64,
    ) -> Result<Layout, Error> {
        const OP: &str = "Tensor::slice";
        let a = normalize_axis(OP, axis, self.rank())?;
        if step < 1 {
            return Err(Error::tensor(
                OP,
                "a step of at least 1",
                format!("step {step}"),
            ));
        }
        let size = self.sizes[a];
        let size_i = i64::try_from(size).unwrap_or(i64::MAX);
        let clamp = |index: i64| -> usize {
            let i = if index < 0 {
                index.saturating_add(size_i)
            } else {
                index
            };
            // Clamped to 0..=size, so it fits in usize.
            i.clamp(0, size_i) as usize
        };
        let (start, stop) = (clamp(start), clamp(stop));
        // step >= 1, so it fits in usize.
        let step = step as usize;
        let new_size = stop.saturating_sub(start).div_ceil(step);
        let overflow = || {
            Error::tensor(
                OP,
                "a view whose offsets and strides fit in usize",
                format!(
                    "slice of dim {a} (size {size}, stride {}) from {start} by {step}",
                    self.strides[a]
                ),
            )
        };
        let mut out = self.clone();
        if new_size > 0 {
            let shift = start.checked_mul(self.strides[a]).ok_or_else(overflow)?;
            out.offset = self.offset.checked_add(shift).ok_or_else(overflow)?;
        }
        out.strides[a] = self.strides[a].checked_mul(step).ok_or_else(overflow)?;
        out.sizes[a] = new_size;
        out.numel = checked_numel(OP, &out.sizes)?;
        Ok(out)
    }

    /// Broadcasts size-1 dims to `sizes` with stride 0. `sizes` may be longer than the
    /// rank: new leading dims are added, as in PyTorch's `expand`. `-1` keeps an existing
    /// dim as it is; a dim of size other than 1 may only "expand" to its own size.
    pub(crate) fn expand(&self, sizes: &[i64]) -> Result<Layout, Error> {
        const OP: &str = "Tensor::expand";
        let rank = self.rank();
        if sizes.len() < rank {
            return Err(Error::tensor(
                OP,
                format!("at least {rank} sizes (one per dim, plus any new leading dims)"),
                format!("{} sizes {sizes:?}", sizes.len()),
            ));
        }
        let lead = sizes.len() - rank;
        let mut out_sizes = Dims::new();
        let mut out_strides = Dims::new();
        for (i, &target) in sizes.iter().enumerate() {
            if i < lead {
                let Ok(n) = usize::try_from(target) else {
                    return Err(Error::tensor(
                        OP,
                        format!("a size >= 0 for the new leading dim {i}"),
                        format!("{target}"),
                    ));
                };
                out_sizes.push(n);
                out_strides.push(0);
                continue;
            }
            let d = i - lead;
            let (size, stride) = (self.sizes[d], self.strides[d]);
            let kept = target == -1 || usize::try_from(target).is_ok_and(|t| t == size);
            if kept {
                out_sizes.push(size);
                out_strides.push(stride);
            } else if let (1, Ok(n)) = (size, usize::try_from(target)) {
                out_sizes.push(n);
                out_strides.push(0);
            } else {
                return Err(Error::tensor(
                    OP,
                    format!(
                        "size {size} (or -1) for dim {d}, since only size-1 dims can be expanded"
                    ),
                    format!(
                        "{target} in {sizes:?} for a tensor of sizes {:?}",
                        self.sizes
                    ),
                ));
            }
        }
        let numel = checked_numel(OP, &out_sizes)?;
        Ok(Layout {
            sizes: out_sizes,
            strides: out_strides,
            offset: self.offset,
            numel,
        })
    }

    /// Inserts a size-1 dim at `axis`, in `-(rank + 1)..=rank` (`-1` appends).
    pub(crate) fn unsqueeze(&self, axis: i64) -> Result<Layout, Error> {
        const OP: &str = "Tensor::unsqueeze";
        let a = normalize_axis(OP, axis, self.rank() + 1)?;
        // The stride a dense layout would give the new dim, so contiguity is kept.
        let stride = if a < self.rank() {
            self.sizes[a].saturating_mul(self.strides[a])
        } else {
            1
        };
        let mut out = self.clone();
        out.sizes.insert(a, 1);
        out.strides.insert(a, stride);
        Ok(out)
    }

    /// Calls `f` with the element offset of every element, in row-major order.
    pub(crate) fn for_each_offset(&self, mut f: impl FnMut(usize)) {
        if self.numel == 0 {
            return;
        }
        let rank = self.rank();
        if rank == 0 {
            f(self.offset);
            return;
        }
        // An odometer over all dims but the innermost, with a plain loop inside. The
        // offsets stay within the span checked when the layout was built.
        let inner = rank - 1;
        let (inner_size, inner_stride) = (self.sizes[inner], self.strides[inner]);
        let mut index: Dims = SmallVec::from_elem(0, inner);
        let mut base = self.offset;
        loop {
            let mut pos = base;
            for _ in 0..inner_size {
                f(pos);
                pos = pos.wrapping_add(inner_stride);
            }
            // Advance the outer odometer.
            let mut d = inner;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                index[d] += 1;
                base = base.wrapping_add(self.strides[d]);
                if index[d] < self.sizes[d] {
                    break;
                }
                base = base.wrapping_sub(self.strides[d].wrapping_mul(self.sizes[d]));
                index[d] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(layout: &Layout) -> Vec<usize> {
        let mut out = Vec::new();
        layout.for_each_offset(|o| out.push(o));
        out
    }

    fn dense(sizes: &[usize]) -> Layout {
        Layout::contiguous("test", sizes).unwrap()
    }

    #[test]
    fn contiguous_layouts_visit_every_element_in_order() {
        let l = dense(&[2, 3, 4]);
        assert_eq!(l.strides(), &[12, 4, 1]);
        assert_eq!(offsets(&l), (0..24).collect::<Vec<_>>());
        assert!(l.is_contiguous());
        assert_eq!(l.span("t").unwrap(), Some((0, 23)));
    }

    #[test]
    fn zero_d_and_empty_layouts() {
        let scalar = dense(&[]);
        assert_eq!(scalar.numel(), 1);
        assert_eq!(offsets(&scalar), vec![0]);
        assert!(scalar.is_contiguous());
        let empty = dense(&[3, 0, 2]);
        assert_eq!(empty.numel(), 0);
        assert_eq!(empty.strides(), &[2, 2, 1]);
        assert!(offsets(&empty).is_empty());
        assert_eq!(empty.span("t").unwrap(), None);
        assert_eq!(empty.required_elements("t").unwrap(), 0);
        assert!(empty.is_contiguous());
    }

    /// `overlapping_dim` against brute force: a layout overlaps exactly when two of
    /// its indices share an offset (for the layouts below, none of them interleaved).
    #[test]
    fn overlapping_dims_are_found_where_offsets_repeat() {
        let cases: [(&[usize], &[usize], Option<usize>); 9] = [
            (&[2, 3], &[3, 1], None),
            (&[3, 2], &[1, 3], None),
            (&[2, 3], &[6, 2], None),
            (&[4, 5], &[0, 1], Some(0)),
            (&[1, 5], &[0, 1], None),
            (&[2, 2], &[1, 1], Some(1)),
            (&[3, 4], &[2, 1], Some(0)),
            (&[0, 4], &[0, 0], None),
            (&[2, 1, 3], &[3, 7, 1], None),
        ];
        for (sizes, strides, want) in cases {
            let l = Layout::strided("t", sizes, strides, 0).unwrap();
            assert_eq!(
                l.overlapping_dim(),
                want,
                "sizes {sizes:?} strides {strides:?}"
            );
            let mut seen = offsets(&l);
            let n = seen.len();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(
                seen.len() < n,
                want.is_some(),
                "sizes {sizes:?} strides {strides:?}"
            );
        }
    }

    #[test]
    fn permute_reorders_and_breaks_contiguity() {
        let t = dense(&[2, 3]).permute(&[1, 0]).unwrap();
        assert_eq!(t.sizes(), &[3, 2]);
        assert_eq!(t.strides(), &[1, 3]);
        assert!(!t.is_contiguous());
        assert_eq!(offsets(&t), vec![0, 3, 1, 4, 2, 5]);
        let back = t.permute(&[-1, 0]).unwrap();
        assert_eq!(back, dense(&[2, 3]));
    }

    #[test]
    fn permute_rejects_bad_permutations() {
        let l = dense(&[2, 3]);
        for bad in [&[0][..], &[0, 0], &[0, 2], &[0, 1, 2]] {
            let err = l.permute(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidTensor { .. }), "{err}");
        }
        let text = l.permute(&[1, 1]).unwrap_err().to_string();
        assert!(
            text.contains("expected each of the 2 dims exactly once"),
            "{text}"
        );
    }

    #[test]
    fn slices_follow_python() {
        let l = dense(&[10]);
        let s = l.slice(0, 1, 8, 3).unwrap();
        assert_eq!(
            (s.sizes(), s.strides(), s.offset()),
            (&[3][..], &[3][..], 1)
        );
        assert_eq!(offsets(&s), vec![1, 4, 7]);
        let s = l.slice(-1, -3, i64::MAX, 1).unwrap();
        assert_eq!(offsets(&s), vec![7, 8, 9]);
        let s = l.slice(0, 5, 2, 1).unwrap();
        assert_eq!(s.numel(), 0);
        let s = l.slice(0, -100, 100, 4).unwrap();
        assert_eq!(offsets(&s), vec![0, 4, 8]);
        // Slicing the inner dim of a matrix keeps the outer stride.
        let m = dense(&[3, 5]).slice(1, 1, 4, 2).unwrap();
        assert_eq!(offsets(&m), vec![1, 3, 6, 8, 11, 13]);
        assert!(!m.is_contiguous());
        // A slice of the outer dim of a row-major matrix stays contiguous.
        let rows = dense(&[4, 5]).slice(0, 1, 3, 1).unwrap();
        assert!(rows.is_contiguous());
        assert_eq!(rows.offset(), 5);
    }

    #[test]
    fn slices_reject_bad_steps_and_axes() {
        let l = dense(&[4]);
        assert!(l.slice(0, 0, 4, 0).is_err());
        assert!(l.slice(0, 0, 4, -1).is_err());
        let err = l.slice(1, 0, 4, 1).unwrap_err().to_string();
        assert!(err.contains("expected an axis in -1..1"), "{err}");
    }

    #[test]
    fn expand_broadcasts_size_one_dims_with_stride_zero() {
        let l = dense(&[3, 1]);
        let e = l.expand(&[2, -1, 4]).unwrap();
        assert_eq!(e.sizes(), &[2, 3, 4]);
        assert_eq!(e.strides(), &[0, 1, 0]);
        assert!(!e.is_contiguous());
        assert_eq!(offsets(&e), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2].repeat(2));
        assert_eq!(e.span("t").unwrap(), Some((0, 2)));
        // Expanding to the same size is allowed; any other size of a non-1 dim is not.
        assert!(l.expand(&[3, 1]).is_ok());
        let err = l.expand(&[4, 1]).unwrap_err().to_string();
        assert!(err.contains("size 3 (or -1) for dim 0"), "{err}");
        assert!(l.expand(&[3]).is_err());
        assert!(l.expand(&[-1, 3, 1]).is_err());
        assert!(l.expand(&[1 << 20, 3, 1]).is_ok());
        assert!(
            l.expand(&[i64::MAX, i64::MAX, 3, 1]).is_err(),
            "numel overflow"
        );
    }

    #[test]
    fn unsqueeze_keeps_contiguity() {
        let l = dense(&[2, 3]);
        for axis in [0, 1, 2, -1, -3] {
            let u = l.unsqueeze(axis).unwrap();
            assert_eq!(u.rank(), 3);
            assert!(u.is_contiguous(), "axis {axis}");
            assert_eq!(offsets(&u), (0..6).collect::<Vec<_>>());
        }
        assert_eq!(l.unsqueeze(-1).unwrap().sizes(), &[2, 3, 1]);
        assert_eq!(l.unsqueeze(1).unwrap().strides(), &[3, 3, 1]);
        assert!(l.unsqueeze(3).is_err());
        assert!(l.unsqueeze(-4).is_err());
        assert_eq!(dense(&[]).unsqueeze(0).unwrap().sizes(), &[1]);
    }

    #[test]
    fn strided_layouts_check_their_extent() {
        let l = Layout::strided("t", &[2, 2], &[1, 2], 3).unwrap();
        assert_eq!(l.required_elements("t").unwrap(), 7);
        assert_eq!(offsets(&l), vec![3, 5, 4, 6]);
        assert!(Layout::strided("t", &[2], &[1, 1], 0).is_err());
        assert!(Layout::strided("t", &[3], &[usize::MAX], 0).is_err());
        assert!(Layout::strided("t", &[usize::MAX, 3], &[1, 1], 0).is_err());
    }

    #[test]
    fn strides_of_degenerate_shapes() {
        assert_eq!(contiguous_strides(&[2, 0, 3]), vec![3, 3, 1]);
        assert_eq!(contiguous_strides(&[1, 1]), vec![1, 1]);
    }
}
