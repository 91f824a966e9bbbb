//! The arguments of a fusion call ([`Arg`]) and their checks against the fusion's input
//! declarations ([`check_args`]), shared by the executor, the segmented runtime and the
//! launcher, on every device.

use nvfuser_core::ir::bind::{self, BoundArg};
use nvfuser_core::ir::{IterKind, TensorType, ValKind};
use nvfuser_core::{Fusion, ScalarValue};
use smallvec::SmallVec;

use crate::{Device, Error, Tensor};

/// One argument of a fusion call: a tensor or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A tensor input.
    Tensor(&'a Tensor),
    /// A scalar input.
    Scalar(ScalarValue),
}

impl<'a> From<&'a Tensor> for Arg<'a> {
    fn from(t: &'a Tensor) -> Self {
        Arg::Tensor(t)
    }
}

macro_rules! scalar_args {
    ($($t:ty),*) => {
        $(impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                Arg::Scalar(ScalarValue::from(v))
            }
        })*
    };
}

scalar_args!(f32, f64, i32, i64, bool);

/// The core's view of call arguments (sizes and scalar values) for `ir::bind` and the
/// host scalar program.
pub(crate) fn bound_args<'a>(args: &'a [Arg<'_>]) -> SmallVec<[BoundArg<'a>; 8]> {
    args.iter()
        .map(|a| match a {
            Arg::Tensor(t) => BoundArg::Tensor(t.sizes()),
            Arg::Scalar(s) => BoundArg::Scalar(*s),
        })
        .collect()
}

/// Checks arguments against a fusion's input declarations: count, kind, device, dtype,
/// rank, static and broadcast sizes, the declared layout, scalar values
/// ([`bind::check_scalar`]) and every extent the fusion equates ([`bind::check_sizes`]).
/// The segmented runtime checks the original fusion's arguments with it too.
pub fn check_args(fusion: &Fusion, device: &Device, args: &[Arg<'_>]) -> Result<(), Error> {
    check_args_with(fusion, &bind::SizeChecks::of(fusion), device, args)
}

/// [`check_args`] with the fusion's size checks found beforehand
/// ([`bind::SizeChecks::of`], kept by the planner): the cached call path.
pub fn check_args_with(
    fusion: &Fusion,
    sizes: &bind::SizeChecks,
    device: &Device,
    args: &[Arg<'_>],
) -> Result<(), Error> {
    const OP: &str = "fusion call";
    let inputs = fusion.inputs();
    if args.len() != inputs.len() {
        let expected = match fusion.generator_inputs() {
            Some(_) => format!(
                "{} arguments (the fusion's inputs), or {} without the random generator's \
                 seed and offset",
                inputs.len(),
                fusion.user_inputs().len()
            ),
            None => format!("{} arguments (the fusion's inputs)", inputs.len()),
        };
        return Err(Error::InvalidTensor {
            op: OP,
            expected,
            found: format!("{} arguments", args.len()),
        });
    }
    for (i, (&id, arg)) in inputs.iter().zip(args).enumerate() {
        let val = fusion.val(id);
        match (&val.kind, arg) {
            (ValKind::Tensor(tt), Arg::Tensor(t)) => {
                if t.device() != device {
                    return Err(Error::DeviceMismatch {
                        op: OP,
                        expected: device.to_string(),
                        found: t.device().to_string(),
                    });
                }
                if t.dtype() != val.dtype {
                    return Err(bad(
                        i,
                        format!("a {} tensor", val.dtype),
                        format!("a {} tensor", t.dtype()),
                    ));
                }
                check_layout(i, tt, t)?;
            }
            // The scalar rule of every device (the CPU reference's too).
            (ValKind::Scalar(_), Arg::Scalar(s)) => bind::check_scalar(i, val.dtype, *s)?,
            (ValKind::Tensor(_), Arg::Scalar(s)) => {
                return Err(bad(
                    i,
                    format!("a {} tensor", val.dtype),
                    format!("the scalar {s}"),
                ))
            }
            (ValKind::Scalar(_), Arg::Tensor(t)) => {
                return Err(bad(
                    i,
                    format!("a {} scalar", val.dtype),
                    format!("a {} tensor", t.dtype()),
                ))
            }
        }
    }
    // Every extent the fusion equates (operands of one elementwise op, cat's other
    // dims, ...): a kernel indexes them all with one extent, so a mismatch would read
    // out of bounds. The same check as the CPU reference's, with the same message.
    sizes.check(fusion, &bound_args(args))?;
    Ok(())
}

/// In-place outputs (`add_output_alias`), on either device: each output that aliases an
/// input is written into that input's buffer (seen through every view of it;
/// [`Tensor::store`]), and the input tensor itself is returned as the output. Other
/// outputs pass through. Runs after every kernel of the call is queued, so the input
/// is written after it was read.
pub(crate) fn store_in_place(
    fusion: &Fusion,
    args: &[Arg<'_>],
    mut outputs: Vec<Tensor>,
) -> Result<Vec<Tensor>, Error> {
    // Outputs that are an input updated by another output, or share its buffer, keep
    // the values from before the call: they are copied before the stores are queued
    // (an in-place output is only ever stored from such a copy, so the order of the
    // stores does not matter either).
    for j in 0..fusion.outputs().len() {
        let shares = fusion.outputs().iter().enumerate().any(|(k, a)| {
            if k == j {
                return false;
            }
            let target = a
                .alias_of
                .and_then(|i| fusion.input_position(i))
                .and_then(|p| args.get(p));
            matches!((target, outputs.get(j)), (Some(Arg::Tensor(t)), Some(out)) if out.shares_buffer(t))
        });
        if shares {
            outputs[j] = outputs[j].duplicate()?;
        }
    }
    for (k, o) in fusion.outputs().iter().enumerate() {
        let Some(input) = o.alias_of else { continue };
        let target = fusion
            .input_position(input)
            .and_then(|p| args.get(p))
            .and_then(|a| match a {
                Arg::Tensor(t) => Some(*t),
                Arg::Scalar(_) => None,
            });
        let (Some(target), Some(value)) = (target, outputs.get(k)) else {
            return Err(Error::UnsupportedFusion {
                reason: format!(
                    "the in-place output {} has no input tensor to store into",
                    o.val
                ),
            });
        };
        target.store(value)?;
        outputs[k] = target.clone();
    }
    Ok(outputs)
}

fn bad(index: usize, expected: String, found: String) -> Error {
    Error::InvalidTensor {
        op: "fusion call",
        expected: format!("argument {index}: {expected}"),
        found,
    }
}

/// Sizes and strides of `t` against the declaration `tt` of input `index`.
fn check_layout(index: usize, tt: &TensorType, t: &Tensor) -> Result<(), Error> {
    let dims: SmallVec<[_; 8]> = tt.shape().collect();
    if dims.len() != t.rank() {
        return Err(bad(
            index,
            format!("a rank-{} tensor", dims.len()),
            format!("rank {} (sizes {:?})", t.rank(), t.sizes()),
        ));
    }
    let (sizes, strides) = (t.sizes(), t.strides());
    for (axis, d) in dims.iter().enumerate() {
        let size = sizes[axis] as i64;
        match d.kind {
            IterKind::Broadcast if size != 1 => {
                return Err(bad(
                    index,
                    format!("size 1 at dim {axis} (declared broadcast)"),
                    format!("size {size} (sizes {sizes:?})"),
                ));
            }
            IterKind::Expanded if size > 1 && strides[axis] != 0 => {
                return Err(bad(
                    index,
                    format!("stride 0 at dim {axis} (declared expanded)"),
                    format!("stride {} (strides {strides:?})", strides[axis]),
                ));
            }
            _ => {}
        }
        if let Some(n) = d.extent.as_const() {
            if d.kind != IterKind::Broadcast && n != size {
                return Err(bad(
                    index,
                    format!("static size {n} at dim {axis}"),
                    format!("size {size} (sizes {sizes:?})"),
                ));
            }
        }
    }
    // Walk the declared allocation order from the innermost dim: a dim declared
    // contiguous must have exactly stride × size of the next inner non-broadcast dim.
    let mut order: SmallVec<[usize; 8]> = (0..dims.len()).collect();
    order.sort_by_key(|&a| tt.stride_order[a]);
    let mut expected = 1usize;
    for &axis in &order {
        let Some(contiguous) = tt.contiguity[axis] else {
            continue;
        };
        if contiguous && sizes[axis] > 1 && strides[axis] != expected {
            return Err(bad(
                index,
                format!("stride {expected} at dim {axis} (declared contiguous)"),
                format!("stride {} (strides {strides:?}); declare it non-contiguous or pass a contiguous tensor", strides[axis]),
            ));
        }
        expected = strides[axis].saturating_mul(sizes[axis]).max(expected);
    }
    Ok(())
}
