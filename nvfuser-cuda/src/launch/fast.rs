//! The fast path of a cached call: a launch prepared once from the call that recorded
//! a runtime entry's [`LaunchRecipe`](super::LaunchRecipe), replayed on later calls
//! that match it exactly.
//!
//! A runtime entry is keyed by the layout signature and the sizes of the call
//! (`runtime::InputSignature`, `runtime::call_sizes`). What the launcher checks on the
//! slow path (the arguments against the fusion's declarations, the index type, the
//! kernel's requirements, output shapes and launch dims) is a function of the
//! arguments' dtypes, ranks, sizes, strides, devices, alignment class and scalar
//! values. A later call with the same key, the same strides and its tensors on the
//! call's device passes the same checks, so [`FastLaunch::accepts`] compares just
//! those, and [`FastLaunch::launch`] allocates the outputs, copies the parameters
//! packed for the recording call and patches in what changes from call to call: the
//! tensors' addresses, the scalars' values, the work and error buffers. Anything else
//! (other strides, a tensor on another device, a scalar the fusion's rule refuses)
//! takes the slow path, which checks everything and reports the error.
//!
//! Kernels with data-dependent reads (select, slice bounds or reshape sizes from
//! scalars, gathers) and calls whose outputs are inputs or repeat each other are
//! never recorded: the slow path handles them on every call.

use cudarc::driver::CudaFunction;
use nvfuser_core::codegen::abi::{PackedArgs, ParamKind};
use nvfuser_core::codegen::Kernel;
use nvfuser_core::ir::bind;
use nvfuser_core::scheduler::vector_alignment;
use nvfuser_core::{DataType, Fusion, ScalarValue};
use smallvec::SmallVec;

use super::{launch_ordered, LaunchRecipe};
use crate::args::Arg;
use crate::{Device, Error, Tensor};

/// What changes in the packed parameters from one call to the next.
#[derive(Clone, Copy, Debug)]
enum Patch {
    /// The address of tensor argument `arg`.
    Input(usize),
    /// The address of output `k`.
    Output(usize),
    /// Scalar argument `arg`, cast to the fusion input's dtype `cast`, packed as the
    /// parameter's `dtype`.
    Scalar {
        arg: usize,
        cast: DataType,
        dtype: DataType,
    },
    /// Work buffer `k` (allocated per call).
    Work(usize),
    /// The device's error buffer for the kernel's checks.
    Errors,
}

/// One argument of the recording call, as the runtime cache's key sees it.
#[derive(Clone, Copy, Debug)]
enum ArgKey {
    Tensor {
        dtype: DataType,
        /// The vector alignment (bytes, at most 16) its sizes and strides allow
        /// whatever its address.
        strides_align: u32,
        /// Its alignment class ([`vector_alignment`]).
        align: u32,
    },
    Scalar {
        /// The fusion input's dtype (the scalar rule's).
        dtype: DataType,
        /// The value given (its natural dtype is part of the key; its value is when
        /// an extent reads it).
        value: ScalarValue,
    },
}

/// A launch prepared from a recorded call (see the module documentation).
#[derive(Debug)]
pub(crate) struct FastLaunch {
    /// The device ordinal of the recording call.
    ordinal: Option<usize>,
    /// Per argument, in order.
    keys: SmallVec<[ArgKey; 8]>,
    /// The sizes and the strides of every tensor argument of the recording call, in
    /// order (both concatenated).
    sizes: SmallVec<[usize; 16]>,
    strides: SmallVec<[usize; 16]>,
    /// Dtype and shape of every output (each one a new allocation).
    outputs: SmallVec<[(DataType, SmallVec<[usize; 6]>); 4]>,
    /// Work buffers: 32-bit words, and whether they start zeroed.
    work: SmallVec<[(usize, bool); 2]>,
    /// The recording call's parameters.
    template: PackedArgs,
    /// (parameter index, what to write there).
    patches: SmallVec<[(usize, Patch); 12]>,
    grid: [u32; 3],
    block: [u32; 3],
}

impl FastLaunch {
    /// The fast launch of a call that has just passed every check of the slow path
    /// and packed `packed`, or `None` when the kernel or the call cannot take one.
    pub(super) fn record(
        device: &Device,
        fusion: &Fusion,
        kernel: &Kernel,
        args: &[Arg<'_>],
        recipe: &LaunchRecipe,
        work: &[(usize, bool)],
        packed: &PackedArgs,
    ) -> Option<FastLaunch> {
        if !recipe.launches || !kernel.reads.checks().is_empty() {
            return None;
        }
        let outs = fusion.outputs();
        for (k, o) in outs.iter().enumerate() {
            if fusion.input_position(o.val).is_some() || outs[..k].iter().any(|e| e.val == o.val) {
                return None;
            }
        }
        let mut keys = SmallVec::new();
        let mut sizes = SmallVec::new();
        let mut strides = SmallVec::new();
        for (&id, a) in fusion.inputs().iter().zip(args) {
            keys.push(match a {
                Arg::Tensor(t) => {
                    sizes.extend_from_slice(t.sizes());
                    strides.extend_from_slice(t.strides());
                    let elem = t.dtype().size_bytes();
                    ArgKey::Tensor {
                        dtype: t.dtype(),
                        strides_align: vector_alignment(16, t.sizes(), t.strides(), elem),
                        align: vector_alignment(
                            t.data_alignment() as u64,
                            t.sizes(),
                            t.strides(),
                            elem,
                        ),
                    }
                }
                Arg::Scalar(s) => ArgKey::Scalar {
                    dtype: fusion.val(id).dtype,
                    value: *s,
                },
            });
        }
        if keys.len() != args.len() {
            return None;
        }
        let mut patches = SmallVec::new();
        let mut next_work = 0;
        for (i, p) in kernel.abi.params.iter().enumerate() {
            let patch = match &p.kind {
                ParamKind::TensorShape { .. } => continue,
                ParamKind::TensorData { tensor, .. } => match fusion.input_position(*tensor) {
                    Some(a) => Patch::Input(a),
                    None => Patch::Output(outs.iter().position(|o| o.val == *tensor)?),
                },
                ParamKind::Scalar { val, dtype } => {
                    let arg = fusion.input_position(*val)?;
                    let cast = fusion.val(*val).dtype;
                    Patch::Scalar {
                        arg,
                        cast,
                        dtype: *dtype,
                    }
                }
                ParamKind::WorkBuffer { .. } => {
                    next_work += 1;
                    Patch::Work(next_work - 1)
                }
                ParamKind::ErrorFlag { .. } => Patch::Errors,
            };
            patches.push((i, patch));
        }
        if next_work != work.len() {
            return None;
        }
        Some(FastLaunch {
            ordinal: device.ordinal(),
            keys,
            sizes,
            strides,
            outputs: recipe
                .shapes
                .iter()
                .zip(outs)
                .map(|(s, o)| (fusion.val(o.val).dtype, s.clone()))
                .collect(),
            work: work.iter().copied().collect(),
            template: packed.clone(),
            patches,
            grid: recipe.grid,
            block: recipe.block,
        })
    }

    /// True when `args` (of a call whose layout signature and sizes are the recording
    /// call's) also have its strides, every tensor is on `device` and every scalar is
    /// one the fusion takes: then the slow path's checks would all pass.
    pub(crate) fn accepts(&self, device: &Device, args: &[Arg<'_>]) -> bool {
        if args.len() != self.keys.len() {
            return false;
        }
        let mut at = 0;
        for (i, (a, key)) in args.iter().zip(&self.keys).enumerate() {
            match (a, key) {
                (Arg::Tensor(t), ArgKey::Tensor { .. }) => {
                    let s = t.strides();
                    if t.device() != device || self.strides.get(at..at + s.len()) != Some(s) {
                        return false;
                    }
                    at += s.len();
                }
                (Arg::Scalar(s), ArgKey::Scalar { dtype, .. }) => {
                    if bind::check_scalar(i, *dtype, *s).is_err() {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        at == self.strides.len()
    }

    /// True when `args` on `device` have the recording call's runtime cache key (device
    /// ordinal; per tensor its dtype, sizes and alignment class; per scalar its natural
    /// dtype, and its value where `extent_scalars` says an extent reads it) and
    /// [`FastLaunch::accepts`] them: the call would find this entry, and may replay it,
    /// without computing its signature.
    pub(crate) fn repeats(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        extent_scalars: &[bool],
    ) -> bool {
        if device.ordinal() != self.ordinal || args.len() != self.keys.len() {
            return false;
        }
        let mut at = 0;
        for (i, (a, key)) in args.iter().zip(&self.keys).enumerate() {
            match (a, key) {
                (
                    Arg::Tensor(t),
                    ArgKey::Tensor {
                        dtype,
                        strides_align,
                        align,
                    },
                ) => {
                    let n = t.sizes();
                    let addr = (t.data_alignment() as u32).min(16);
                    if t.dtype() != *dtype
                        || self.sizes.get(at..at + n.len()) != Some(n)
                        || addr.min(*strides_align) != *align
                    {
                        return false;
                    }
                    at += n.len();
                }
                (Arg::Scalar(s), ArgKey::Scalar { value, .. }) => {
                    if s.natural_dtype() != value.natural_dtype()
                        || (extent_scalars.get(i) == Some(&true) && s.as_i64() != value.as_i64())
                    {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        self.accepts(device, args)
    }

    /// Launches `function` (the loaded `kernel` this was recorded for) on `args`,
    /// which [`FastLaunch::accepts`]; returns the outputs.
    pub(crate) fn launch(
        &self,
        device: &Device,
        kernel: &Kernel,
        function: &CudaFunction,
        args: &[Arg<'_>],
        into: &[(usize, Tensor)],
    ) -> Result<Vec<Tensor>, Error> {
        const OP: &str = "launch";
        let gpu = device.require_gpu(OP)?;
        let mut outputs = Vec::with_capacity(self.outputs.len());
        for (k, (dtype, shape)) in self.outputs.iter().enumerate() {
            outputs.push(match into.iter().find(|(j, _)| *j == k) {
                Some((_, t)) => t.clone(),
                None => device.uninit(*dtype, shape)?,
            });
        }
        let mut work: SmallVec<[Tensor; 2]> = SmallVec::new();
        for &(words, zeroed) in &self.work {
            work.push(if zeroed {
                device.zeros(DataType::I32, [words])?
            } else {
                device.uninit(DataType::I32, &[words])?
            });
        }
        let address = |t: &Tensor| t.cuda_address().ok_or(Error::NotAGpu { op: OP });
        let mut packed = self.template.clone();
        for &(i, patch) in &self.patches {
            let ok = match patch {
                Patch::Input(a) => match args.get(a) {
                    Some(Arg::Tensor(t)) => packed.set_address(i, address(t)?),
                    _ => false,
                },
                Patch::Output(k) => packed.set_address(i, address(&outputs[k])?),
                Patch::Scalar { arg, cast, dtype } => match args.get(arg) {
                    Some(Arg::Scalar(s)) => packed.set_scalar(i, dtype, s.cast(cast)),
                    _ => false,
                },
                Patch::Work(k) => packed.set_address(i, address(&work[k])?),
                Patch::Errors => {
                    let checks = kernel.abi.error_checks().unwrap_or(&[]);
                    packed.set_address(i, gpu.errors.buffer_for(&gpu.alloc_stream, checks)?)
                }
            };
            if !ok {
                return Err(Error::UnsupportedFusion {
                    reason: format!(
                        "internal: the fast launch of {} could not set parameter {i}",
                        kernel.abi.name
                    ),
                });
            }
        }
        let mut params = packed.kernel_params();
        // SAFETY: the parameters are those the slow path packed through the kernel's ABI
        // for a call with the same dtypes, sizes, strides and alignment class (which
        // passed the argument checks, the index type and the kernel's requirements),
        // with the addresses of this call's live tensors and new buffers and its
        // scalars (checked by `accepts`) patched in at their parameters; the tensors
        // stay allocated until the kernel has run, as in `launch_recorded`.
        unsafe {
            launch_ordered(
                device,
                gpu,
                function,
                (
                    self.grid,
                    self.block,
                    kernel.grid_sync,
                    kernel.dynamic_shared,
                ),
                params.as_mut_slice(),
                args,
                None,
            )?
        };
        drop(work);
        Ok(outputs)
    }
}
