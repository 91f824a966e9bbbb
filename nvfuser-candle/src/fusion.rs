//! [`CandleFusion`]: any fusion, run on candle tensors.
//!
//! A `CandleFusion` owns the fusion's [`FusionExecutorCache`] (so repeated calls reuse
//! what it planned and compiled) and the fusion's input declarations, which it checks
//! before anything is copied: the number of arguments, tensor or scalar at each
//! position, dtype and rank, with the argument's name in the error. The library's own
//! checks (equal extents, static sizes, scalar values) follow inside the call.
//!
//! Calls without autograd go through [`CandleFusion::run`] (any number of inputs and
//! outputs); [`FusedOp`](crate::FusedOp) wraps one as a candle custom op with a backward.

use std::borrow::Cow;
use std::fmt;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, Shape, Storage};
use nvfuser::{Arg, DataType, Device, Fusion, FusionExecutorCache, ScalarValue};

use crate::convert::{self, candle_dtype};
use crate::error::{Error, Result};

/// One argument of a [`CandleFusion`] call: a candle tensor or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum FusionArg<'a> {
    /// A tensor input (candle CPU storage, any layout).
    Tensor(&'a candle_core::Tensor),
    /// A scalar input (eps, a scale, an index).
    Scalar(ScalarValue),
}

impl<'a> From<&'a candle_core::Tensor> for FusionArg<'a> {
    fn from(t: &'a candle_core::Tensor) -> Self {
        FusionArg::Tensor(t)
    }
}

macro_rules! scalar_arg {
    ($($t:ty),*) => {
        $(impl From<$t> for FusionArg<'_> {
            fn from(v: $t) -> Self {
                FusionArg::Scalar(ScalarValue::from(v))
            }
        })*
    };
}

scalar_arg!(f32, f64, i32, i64, bool);

impl From<ScalarValue> for FusionArg<'_> {
    fn from(v: ScalarValue) -> Self {
        FusionArg::Scalar(v)
    }
}

/// One argument at the storage level: what a custom op's `cpu_fwd` is handed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum StorageArg<'a> {
    Tensor(&'a CpuStorage, &'a Layout),
    Scalar(ScalarValue),
}

/// What the fusion declares at one input position.
#[derive(Clone, Debug)]
struct InputDecl {
    name: String,
    dtype: DataType,
    /// `Some(rank)` for a tensor, `None` for a scalar.
    rank: Option<usize>,
}

/// A fusion that runs on candle tensors: inputs read from candle's CPU storage (any
/// layout), outputs returned as new candle tensors, on the library's CPU device (the
/// CPU reference evaluator). Build it once and keep it (in an `Arc` or a `static`): it
/// holds the fusion's executor cache.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use nvfuser::prelude::*;
/// use nvfuser_candle::CandleFusion;
///
/// let mut fd = FusionDefinition::new();
/// let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
/// let b = fd.define_tensor(DataType::F32, &[-1])?;
/// let y = fd.add(x, b)?;
/// let y = fd.relu(y)?;
/// fd.add_output(y)?;
/// let bias_relu = CandleFusion::new("bias_relu", fd.finish()?)?.with_input_names(&["x", "b"])?;
///
/// let x = Tensor::new(&[[1f32, -2.0], [3.0, -4.0]], &Device::Cpu)?;
/// let b = Tensor::new(&[0.5f32, 0.5], &Device::Cpu)?;
/// let y = bias_relu.run(&[(&x).into(), (&b).into()])?;
/// assert_eq!(y[0].to_vec2::<f32>()?, [[1.5, 0.0], [3.5, 0.0]]);
///
/// // A wrong dtype is an error naming the argument, never a panic.
/// let bad = b.to_dtype(candle_core::DType::F16)?;
/// let err = bias_relu.run(&[(&x).into(), (&bad).into()]).unwrap_err();
/// assert!(err.to_string().contains("b: expected dtype f32, found f16"), "{err}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CandleFusion {
    name: Cow<'static, str>,
    exec: FusionExecutorCache,
    inputs: Vec<InputDecl>,
    outputs: Vec<DataType>,
    device: Device,
}

impl fmt::Debug for CandleFusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CandleFusion")
            .field("name", &self.name)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

impl CandleFusion {
    /// Wraps `fusion`. Refuses fusions that candle cannot hold the results of: an output
    /// of a dtype candle has no type for (fp8), or an in-place output (`add_output_alias`
    /// would write into a copy of the candle input and be lost).
    pub fn new(name: impl Into<Cow<'static, str>>, fusion: Fusion) -> Result<CandleFusion> {
        let name = name.into();
        let mut outputs = Vec::with_capacity(fusion.outputs().len());
        for (i, out) in fusion.outputs().iter().enumerate() {
            if out.alias_of.is_some() {
                return Err(Error::Unsupported {
                    op: name.to_string(),
                    what: format!(
                        "output {i} is an in-place output; candle tensors are not updated \
                         through this adapter: return it as an ordinary output"
                    ),
                });
            }
            let dtype = fusion.val(out.val).dtype;
            if candle_dtype(dtype).is_none() {
                return Err(Error::Unsupported {
                    op: name.to_string(),
                    what: format!(
                        "output {i} has dtype {dtype}, which candle cannot hold; cast it in the \
                         fusion (f32, f64, f16, bf16, i64, i32 or bool)"
                    ),
                });
            }
            outputs.push(dtype);
        }
        let inputs = fusion
            .inputs()
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let val = fusion.val(id);
                InputDecl {
                    name: format!("input {i}"),
                    dtype: val.dtype,
                    rank: val.tensor().map(|t| t.rank()),
                }
            })
            .collect();
        Ok(CandleFusion {
            name,
            exec: FusionExecutorCache::new(fusion),
            inputs,
            outputs,
            device: Device::cpu(),
        })
    }

    /// Names the inputs (in the fusion's order) for error messages: `x: expected dtype
    /// bf16, found F32` instead of `input 0: ...`.
    pub fn with_input_names(mut self, names: &[&str]) -> Result<CandleFusion> {
        if names.len() != self.inputs.len() {
            return Err(Error::Arity {
                op: self.name.to_string(),
                expected: format!("{} input names (one per fusion input)", self.inputs.len()),
                found: names.len(),
            });
        }
        for (decl, name) in self.inputs.iter_mut().zip(names) {
            decl.name = (*name).to_string();
        }
        Ok(self)
    }

    /// The name given at construction.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fusion.
    pub fn fusion(&self) -> &Fusion {
        self.exec.fusion()
    }

    /// The executor cache (for its statistics or plans).
    pub fn executor(&self) -> &FusionExecutorCache {
        &self.exec
    }

    /// The device the fusion runs on: the library's CPU device, for candle CPU storage.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The number of fusion inputs (tensors and scalars).
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// The number of fusion outputs.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// Whether input `i` is a tensor (`false` for a scalar or past the end).
    pub fn input_is_tensor(&self, i: usize) -> bool {
        self.inputs.get(i).is_some_and(|d| d.rank.is_some())
    }

    /// Runs the fusion on candle tensors and scalars (in the fusion's input order) and
    /// returns its outputs as new candle CPU tensors, without autograd (the outputs track
    /// no gradient). Errors are `candle_core::Error`s carrying this crate's [`Error`].
    pub fn run(&self, args: &[FusionArg<'_>]) -> candle_core::Result<Vec<candle_core::Tensor>> {
        Ok(self.try_run(args)?)
    }

    /// [`run`](Self::run) with this crate's typed [`Error`].
    pub fn try_run(&self, args: &[FusionArg<'_>]) -> Result<Vec<candle_core::Tensor>> {
        self.check_arity(args.len())?;
        let mut fusion_args = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            fusion_args.push(match arg {
                FusionArg::Tensor(t) => {
                    let decl = self.tensor_decl(i, t.dtype(), t.dims())?;
                    if !t.device().is_cpu() {
                        return Err(Error::Device {
                            op: self.name.to_string(),
                            arg: decl.name.clone(),
                            found: format!("{:?}", t.device().location()),
                        });
                    }
                    let (storage, layout) = t.storage_and_layout();
                    let Storage::Cpu(cpu) = &*storage else {
                        return Err(Error::Device {
                            op: self.name.to_string(),
                            arg: decl.name.clone(),
                            found: format!("{:?}", t.device().location()),
                        });
                    };
                    Slot::Tensor(convert::to_fusion_tensor(
                        &self.name,
                        &decl.name,
                        cpu,
                        layout,
                        decl.dtype,
                        &self.device,
                    )?)
                }
                FusionArg::Scalar(s) => Slot::Scalar(self.scalar(i, *s)?),
            });
        }
        self.execute(&fusion_args)?
            .into_iter()
            .map(|(storage, shape)| {
                Ok(candle_core::Tensor::from_storage(
                    Storage::Cpu(storage),
                    shape,
                    candle_core::op::BackpropOp::none(),
                    false,
                ))
            })
            .collect()
    }

    /// Runs the fusion on storage views (a custom op's `cpu_fwd`).
    pub(crate) fn run_storage(&self, args: &[StorageArg<'_>]) -> Result<Vec<(CpuStorage, Shape)>> {
        self.check_arity(args.len())?;
        let mut fusion_args = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            fusion_args.push(match *arg {
                StorageArg::Tensor(storage, layout) => {
                    let decl = self.tensor_decl(i, storage.dtype(), layout.dims())?;
                    Slot::Tensor(convert::to_fusion_tensor(
                        &self.name,
                        &decl.name,
                        storage,
                        layout,
                        decl.dtype,
                        &self.device,
                    )?)
                }
                StorageArg::Scalar(s) => Slot::Scalar(self.scalar(i, s)?),
            });
        }
        self.execute(&fusion_args)
    }

    fn check_arity(&self, found: usize) -> Result<()> {
        if found == self.inputs.len() {
            return Ok(());
        }
        let tensors = self.inputs.iter().filter(|d| d.rank.is_some()).count();
        Err(Error::Arity {
            op: self.name.to_string(),
            expected: format!(
                "{} arguments ({tensors} tensors, {} scalars, in the fusion's order)",
                self.inputs.len(),
                self.inputs.len() - tensors
            ),
            found,
        })
    }

    /// Checks a tensor argument at position `i` against the declaration there.
    fn tensor_decl(
        &self,
        i: usize,
        dtype: candle_core::DType,
        dims: &[usize],
    ) -> Result<&InputDecl> {
        let decl = &self.inputs[i];
        let Some(rank) = decl.rank else {
            return Err(Error::Argument {
                op: self.name.to_string(),
                arg: decl.name.clone(),
                expected: format!("a {} scalar", decl.dtype),
                found: format!("a tensor of shape {dims:?}"),
            });
        };
        if !convert::accepts(decl.dtype, dtype) {
            return Err(Error::Dtype {
                op: self.name.to_string(),
                arg: decl.name.clone(),
                expected: convert::accepted(decl.dtype),
                found: dtype,
            });
        }
        if dims.len() != rank {
            return Err(Error::Shape {
                op: self.name.to_string(),
                arg: decl.name.clone(),
                expected: format!("rank {rank}"),
                found: dims.to_vec(),
            });
        }
        Ok(decl)
    }

    /// Checks a scalar argument at position `i`.
    fn scalar(&self, i: usize, value: ScalarValue) -> Result<ScalarValue> {
        let decl = &self.inputs[i];
        if decl.rank.is_some() {
            return Err(Error::Argument {
                op: self.name.to_string(),
                arg: decl.name.clone(),
                expected: format!("a {} tensor of rank {}", decl.dtype, decl.rank.unwrap_or(0)),
                found: format!("the scalar {value}"),
            });
        }
        Ok(value)
    }

    /// Runs the fusion on converted arguments and reads its outputs back.
    fn execute(&self, args: &[Slot]) -> Result<Vec<(CpuStorage, Shape)>> {
        let args: Vec<Arg<'_>> = args
            .iter()
            .map(|s| match s {
                Slot::Tensor(t) => Arg::Tensor(t),
                Slot::Scalar(v) => Arg::Scalar(*v),
            })
            .collect();
        let outputs = self
            .exec
            .run(&self.device, &args)
            .map_err(|e| Error::fusion(&self.name, e))?;
        outputs
            .iter()
            .enumerate()
            .map(|(i, t)| convert::to_cpu_storage(&self.name, i, t))
            .collect()
    }
}

/// A converted argument.
enum Slot {
    Tensor(nvfuser::Tensor),
    Scalar(ScalarValue),
}
