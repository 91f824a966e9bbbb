//! The launch's checks of a call's arguments against a kernel: 32-bit indexing, launch
//! dims that fit, the kernel's own requirements (divisibility of vectorized extents,
//! aligned vector accesses), and extents evaluated on the arguments.

use nvfuser_core::codegen::abi::ArgRef;
#[cfg(feature = "cuda")]
use nvfuser_core::codegen::IndexType;
use nvfuser_core::codegen::{Kernel, Requirement};
use nvfuser_core::ir::reads::{CallValues, ReadChecks};
use nvfuser_core::ir::Extent;
use nvfuser_core::scheduler::vector_access_ok;
use nvfuser_core::Fusion;

use super::read_error;
use crate::args::Arg;
use crate::{Error, Tensor};

/// The furthest element offset a tensor's view reaches, plus one.
pub(crate) fn extent_elements(t: &Tensor) -> u64 {
    if t.numel() == 0 {
        return 0;
    }
    t.sizes()
        .iter()
        .zip(t.strides())
        .map(|(&n, &s)| (n as u64 - 1) * s as u64)
        .sum::<u64>()
        + 1
}

/// A 32-bit kernel cannot index a tensor that reaches 2^31 elements.
#[cfg(feature = "cuda")]
pub(super) fn check_index_type(kernel: &Kernel, t: &Tensor) -> Result<(), Error> {
    if kernel.abi.index_type == IndexType::I32
        && (extent_elements(t) >= 1 << 31 || t.numel() as u64 >= 1 << 31)
    {
        return Err(Error::InvalidTensor {
            op: "launch",
            expected: "tensors of fewer than 2^31 elements for a kernel with 32-bit indexing"
                .into(),
            found: format!("sizes {:?}, strides {:?}", t.sizes(), t.strides()),
        });
    }
    Ok(())
}

#[cfg(feature = "cuda")]
pub(super) fn dims(
    extents: &[Extent; 3],
    eval: &dyn Fn(&Extent) -> Result<i64, Error>,
) -> Result<[u32; 3], Error> {
    let mut out = [1u32; 3];
    for (o, e) in out.iter_mut().zip(extents) {
        let v = eval(e)?;
        *o = u32::try_from(v.max(0)).map_err(|_| Error::InvalidTensor {
            op: "launch",
            expected: "launch dims that fit in 32 bits".into(),
            found: format!("{v} for {e}"),
        })?;
    }
    Ok(out)
}

/// The launch's checks (the data-dependent reads, [`check_requirements`]) of a
/// kernel planned without a GPU (`FusionExecutorCache::plan_kernels`) on the call's
/// arguments, wherever they live: an argument's address is
/// stood for by its alignment ([`Tensor::data_alignment`]), which is all the check reads;
/// outputs (fresh allocations) are not checked. A GPU launch would refuse exactly these.
pub(crate) fn check_planned_requirements(
    kernel: &Kernel,
    fusion: &Fusion,
    args: &[Arg<'_>],
) -> Result<(), Error> {
    let scalar = |v| arg_scalar(fusion, args, v);
    let eval = |e: &Extent| eval_on_args(fusion, args, e);
    let arg = |id: nvfuser_core::ValId| -> Option<ArgRef<'_>> {
        match *args.get(fusion.input_position(id)?)? {
            Arg::Tensor(t) => Some(ArgRef::Tensor {
                ptr: t.data_alignment() as u64,
                sizes: t.sizes(),
                strides: t.strides(),
            }),
            Arg::Scalar(s) => Some(ArgRef::Scalar(s.cast(fusion.val(id).dtype))),
        }
    };
    // The kernel's own checks name the scheduled fusion's values; these are the kernel
    // fusion's.
    let known = |e: &Extent| eval(e).ok();
    let call = CallValues {
        extent: &known,
        scalar: &scalar,
    };
    ReadChecks::of(fusion)
        .check(fusion, &call, true)
        .map_err(read_error)?;
    check_requirements(
        kernel,
        &arg,
        &|id| fusion.get_val(id).map_or(1, |v| v.dtype.size_bytes()),
        &eval,
    )
}

/// Dim `axis` of the kernel fusion's input tensor `t` in `args` (by input position).
fn arg_dim(fusion: &Fusion, args: &[Arg<'_>], t: nvfuser_core::ValId, axis: usize) -> Option<i64> {
    match args.get(fusion.input_position(t)?)? {
        Arg::Tensor(x) => x.sizes().get(axis).map(|&s| s as i64),
        Arg::Scalar(_) => None,
    }
}

/// The integer value of the kernel fusion's scalar input `v` in `args`.
pub(crate) fn arg_scalar(fusion: &Fusion, args: &[Arg<'_>], v: nvfuser_core::ValId) -> Option<i64> {
    match args.get(fusion.input_position(v)?)? {
        Arg::Scalar(s) => s.cast(fusion.val(v).dtype).as_i64(),
        Arg::Tensor(_) => None,
    }
}

/// `e` evaluated on the call's arguments, or why not.
pub(crate) fn eval_on_args(fusion: &Fusion, args: &[Arg<'_>], e: &Extent) -> Result<i64, Error> {
    e.eval(&|t, a| arg_dim(fusion, args, t, a), &|v| {
        arg_scalar(fusion, args, v)
    })
    .ok_or_else(|| Error::InvalidTensor {
        op: "launch",
        expected: format!("an extent computable from the inputs: {e}"),
        found: "an unbound or invalid value".into(),
    })
}

/// The kernel's own launch requirements on the actual arguments. A vector access of
/// `bytes` needs the tensor's address and every row pitch it steps over aligned
/// ([`vector_access_ok`]); the executor's runtime signature holds the same alignment
/// class ([`nvfuser_core::scheduler::vector_alignment`]), so a cached kernel is never
/// reused where this would fail.
pub(super) fn check_requirements<'a>(
    kernel: &Kernel,
    arg: &dyn Fn(nvfuser_core::ValId) -> Option<ArgRef<'a>>,
    elem_bytes: &dyn Fn(nvfuser_core::ValId) -> usize,
    eval: &dyn Fn(&Extent) -> Result<i64, Error>,
) -> Result<(), Error> {
    for r in &kernel.requirements {
        match r {
            Requirement::Divisible { extent, by, why } => {
                let v = eval(extent)?;
                if v % by != 0 {
                    return Err(Error::InvalidTensor {
                        op: "launch",
                        expected: format!("{extent} divisible by {by} ({why})"),
                        found: format!("{v}"),
                    });
                }
            }
            Requirement::Aligned { tensor, bytes } => {
                if let Some(ArgRef::Tensor {
                    ptr,
                    sizes,
                    strides,
                }) = arg(*tensor)
                {
                    let elem = elem_bytes(*tensor);
                    if !vector_access_ok(*bytes as u64, ptr, sizes, strides, elem) {
                        return Err(Error::InvalidTensor {
                            op: "launch",
                            expected: format!(
                                "{tensor} aligned to {bytes} bytes, its address and every \
                                 row pitch (vectorized access)"
                            ),
                            found: format!(
                                "address {ptr:#x}, strides {strides:?} of {elem}-byte elements"
                            ),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}
