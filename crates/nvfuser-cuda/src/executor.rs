//! Running a fusion on a [`Device`]: argument checks, then execution.
//!
//! [`FusionExecutorCache`] is the per-definition entry point that the `fusion!` macro and
//! the run-time API share. It checks every argument against the fusion's input
//! declarations (kind, dtype, rank, static and broadcast sizes, and the memory layout
//! the declaration promises: a dim declared contiguous must have exactly the contiguous
//! stride, an expanded dim must have stride 0) before anything runs, so a layout that
//! contradicts the declaration is a typed error on every device, never a silently wrong
//! result.
//!
//! On the CPU reference device the fusion runs on [`nvfuser_core::eval::evaluate`]. On a
//! GPU it needs generated kernels, whose executor is not wired yet: a GPU device gives
//! [`CudaError::GpuExecutionUnavailable`] rather than quietly computing on the host.

use nvfuser_core::eval::{evaluate, EvalInput};
use nvfuser_core::ir::{IterKind, TensorType, ValKind};
use nvfuser_core::{Fusion, ScalarValue};

use crate::{CudaError, Device, Tensor};

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

/// Runs one fusion definition on any device, caching what can be cached.
///
/// ```
/// use nvfuser_core::prelude::*;
/// use nvfuser_cuda::{Device, FusionExecutorCache};
///
/// let mut fd = FusionDefinition::new();
/// let x = fd.define_tensor(DataType::F32, &[-1])?;
/// let y = fd.relu(x)?;
/// fd.add_output(y)?;
/// let exec = FusionExecutorCache::new(fd.finish()?);
/// let cpu = Device::cpu();
/// let input = cpu.tensor_from_slice(&[-1.0f32, 2.0, -3.0], [3])?;
/// let out = exec.run(&cpu, &[(&input).into()])?;
/// assert_eq!(out[0].to_vec::<f32>()?, vec![0.0, 2.0, 0.0]);
/// # Ok::<(), nvfuser_cuda::CudaError>(())
/// ```
#[derive(Debug)]
pub struct FusionExecutorCache {
    fusion: Fusion,
}

impl FusionExecutorCache {
    /// An executor for `fusion`.
    pub fn new(fusion: Fusion) -> Self {
        FusionExecutorCache { fusion }
    }

    /// The fusion this executor runs.
    pub fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    /// Checks `args` against the fusion's inputs and runs it on `device`; returns the
    /// outputs in the fusion's order.
    pub fn run(&self, device: &Device, args: &[Arg<'_>]) -> Result<Vec<Tensor>, CudaError> {
        check_args(&self.fusion, device, args)?;
        if device.is_gpu() {
            return Err(CudaError::GpuExecutionUnavailable {
                what: "running a fusion with generated kernels".into(),
            });
        }
        let inputs = args
            .iter()
            .map(|a| match a {
                Arg::Tensor(t) => t.to_host_tensor().map(EvalInput::Tensor),
                Arg::Scalar(s) => Ok(EvalInput::Scalar(*s)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = evaluate(&self.fusion, &inputs)?;
        outputs.iter().map(|o| device.tensor_from_host(o)).collect()
    }
}

/// Checks arguments against a fusion's input declarations.
pub fn check_args(fusion: &Fusion, device: &Device, args: &[Arg<'_>]) -> Result<(), CudaError> {
    const OP: &str = "fusion call";
    let inputs = fusion.inputs();
    if args.len() != inputs.len() {
        return Err(CudaError::InvalidTensor {
            op: OP,
            expected: format!("{} arguments (the fusion's inputs)", inputs.len()),
            found: format!("{} arguments", args.len()),
        });
    }
    for (i, (&id, arg)) in inputs.iter().zip(args).enumerate() {
        let val = fusion.val(id);
        match (&val.kind, arg) {
            (ValKind::Tensor(tt), Arg::Tensor(t)) => {
                if t.device() != device {
                    return Err(CudaError::DeviceMismatch {
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
            (ValKind::Scalar(_), Arg::Scalar(s)) => {
                if s.natural_dtype().is_float() && !val.dtype.is_float() {
                    return Err(bad(
                        i,
                        format!("a {} scalar", val.dtype),
                        format!("the float {s}"),
                    ));
                }
            }
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
    Ok(())
}

fn bad(index: usize, expected: String, found: String) -> CudaError {
    CudaError::InvalidTensor {
        op: "fusion call",
        expected: format!("argument {index}: {expected}"),
        found,
    }
}

/// Sizes and strides of `t` against the declaration `tt` of input `index`.
fn check_layout(index: usize, tt: &TensorType, t: &Tensor) -> Result<(), CudaError> {
    let dims: Vec<_> = tt.shape().collect();
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
    let mut order: Vec<usize> = (0..dims.len()).collect();
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
