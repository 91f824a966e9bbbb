//! One spelling per input extent that a call must make equal.
//!
//! The builder keeps one operand's extent where operands meet (an elementwise op keeps
//! the first one's), so two tensors of one fusion can name the same size through
//! different inputs: `rm * 0.9 + mean(x, 0) * 0.1` has `rm.size(0)` on one side and
//! `x.size(1)` on the other. Every call checks that they are equal before anything runs
//! ([`super::bind::SizeChecks`]), but a scheduler comparing extents sees two and refuses
//! to bind both to one parallel dim. [`unify_input_dims`] rewrites the kernel fusion so
//! that each class of input dims tied by equality is spelled by one of them: the first
//! by input position, then axis. The fusion as defined, whose size checks run on every
//! call, keeps its own extents.

use super::bind::{Rel, SizeChecks};
use super::{Extent, Fusion, ValKind};

/// An input dim: (input position, axis).
type Key = (usize, u32);

/// The fusion with every input dim spelled by the first dim of its equality class (see
/// the module documentation), or `None` when every class already has one spelling in
/// use.
pub(crate) fn unify_input_dims(fusion: &Fusion) -> Option<Fusion> {
    let key = |e: &Extent| match e {
        Extent::Dim { tensor, axis } => Some((fusion.input_position(*tensor)?, *axis)),
        _ => None,
    };
    let mut parent: Vec<(Key, Key)> = Vec::new();
    for (a, b, rel) in SizeChecks::of(fusion).ties() {
        if rel != Rel::Eq {
            continue;
        }
        let (Some(a), Some(b)) = (key(a), key(b)) else {
            continue;
        };
        let (ra, rb) = (root(&parent, a), root(&parent, b));
        if ra != rb {
            // The smaller key stays the root, so a class's root is its first dim.
            let (low, high) = if ra < rb { (ra, rb) } else { (rb, ra) };
            parent.push((high, low));
        }
    }
    if parent.is_empty() {
        return None;
    }
    let spelled = |k: Key| {
        let (p, axis) = root(&parent, k);
        Extent::Dim {
            tensor: fusion.inputs()[p],
            axis,
        }
    };
    let mut out = fusion.clone();
    let mut changed = false;
    for v in &mut out.vals {
        if let ValKind::Tensor(t) = &mut v.kind {
            for d in &mut t.domain {
                let e = respell(&d.extent, &key, &spelled);
                changed |= e != d.extent;
                d.extent = e;
            }
        }
    }
    changed.then_some(out)
}

/// The root of `k` in the forest `parent` (child → parent pairs).
fn root(parent: &[(Key, Key)], mut k: Key) -> Key {
    while let Some(&(_, p)) = parent.iter().find(|(c, _)| *c == k) {
        k = p;
    }
    k
}

/// `e` with every input dim replaced by its class's spelling.
fn respell(
    e: &Extent,
    key: &dyn Fn(&Extent) -> Option<Key>,
    spelled: &dyn Fn(Key) -> Extent,
) -> Extent {
    match e {
        Extent::Dim { .. } => key(e).map_or_else(|| e.clone(), spelled),
        Extent::Op(op, a, b) => {
            Extent::binary(*op, respell(a, key, spelled), respell(b, key, spelled))
        }
        Extent::Const(_) | Extent::Scalar(_) => e.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::FusionDefinition;
    use crate::dtype::DataType;
    use crate::ir::ValId;

    /// The running mean of batch norm: `rm` (input 1) takes `x`'s (input 0) dim 1.
    #[test]
    fn tied_dims_take_the_first_inputs_spelling() {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
        let rm = fd.define_tensor(DataType::F32, &[-1]).unwrap();
        let s = fd.sum(x, &[0], false).unwrap();
        let y = fd.add(rm, s).unwrap();
        fd.add_output(y).unwrap();
        let f = fd.finish().unwrap();
        let dim = |t: ValId, axis: u32| Extent::Dim { tensor: t, axis };
        assert_eq!(
            f.tensor_type(y).unwrap().shape().next().unwrap().extent,
            dim(rm, 0)
        );
        let u = unify_input_dims(&f).unwrap();
        for v in [y, rm] {
            assert_eq!(
                u.tensor_type(v).unwrap().shape().next().unwrap().extent,
                dim(x, 1)
            );
        }
        assert_eq!(
            u.tensor_type(x).unwrap().shape().next().unwrap().extent,
            dim(x, 0)
        );
        // Nothing left to unify.
        assert!(unify_input_dims(&u).is_none());
    }

    /// Broadcast dims, and sizes that are only bounded (a gather's index), stay apart.
    #[test]
    fn broadcasts_and_bounds_are_not_equalities() {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
        let b = fd.define_tensor(DataType::F32, &[1, -1]).unwrap();
        let y = fd.add(x, b).unwrap();
        fd.add_output(y).unwrap();
        let f = fd.finish().unwrap();
        let u = unify_input_dims(&f).unwrap_or_else(|| f.clone());
        let dims: Vec<Extent> = u
            .tensor_type(b)
            .unwrap()
            .shape()
            .map(|d| d.extent.clone())
            .collect();
        assert_eq!(dims[1], Extent::Dim { tensor: x, axis: 1 });
        assert_ne!(dims[0], Extent::Dim { tensor: x, axis: 0 });
    }
}
