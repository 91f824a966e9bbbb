//! Running a segmented fusion: one kernel per segment, intermediates in device memory.
//!
//! [`SegmentedRuntime`] is what runs a fusion that no single scheduler takes. It
//! segments the fusion once ([`SegmentedFusion::new`], which looks at the definition
//! only) and keeps one [`FusionExecutorCache`] per segment, so every segment caches its
//! compiled kernels per input signature like any fusion, and the whole runtime is reused
//! call after call. A call:
//!
//! 1. checks the arguments against the original fusion's declarations;
//! 2. on a GPU, the first time these argument layouts and sizes are seen, generates the
//!    kernels of all segments for the sizes each segment will see (intermediate sizes
//!    follow from the inputs) and compiles them in parallel through the
//!    [`KernelCache`], so the segments' own builds below only load them;
//! 3. runs the segments in order, each on arguments gathered through its input map
//!    (original inputs, earlier segments' outputs, extents of original inputs as `i64`
//!    scalars); intermediates stay in device memory and are dropped right after their
//!    last reader (stream-ordered frees);
//! 4. returns the original fusion's outputs.
//!
//! On the CPU reference device the segments run one by one on the evaluator.
//!
//! ```
//! use nvfuser_core::prelude::*;
//! use nvfuser_cuda::{Device, SegmentedRuntime};
//!
//! // relu, then a forced boundary, then exp: two segments.
//! let mut fd = FusionDefinition::new();
//! let x = fd.define_tensor(DataType::F32, &[-1])?;
//! let y = fd.relu(x)?;
//! let y = fd.segment_set(y)?;
//! let y = fd.neg(y)?;
//! fd.add_output(y)?;
//! let rt = SegmentedRuntime::new(fd.finish()?)?;
//! assert_eq!(rt.segmented().segments().len(), 2);
//! let cpu = Device::cpu();
//! let x = cpu.tensor_from_slice(&[-1.0f32, 2.0], [2])?;
//! let out = rt.run(&cpu, &[(&x).into()])?;
//! assert_eq!(out[0].to_vec::<f32>()?, vec![0.0, -2.0]);
//! # Ok::<(), nvfuser_cuda::CudaError>(())
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use nvfuser_core::ir::ValKind;
use nvfuser_core::scheduler::{DeviceInfo, InputInfo, RuntimeInfo, TensorInfo};
use nvfuser_core::segment::{SegmentValue, SegmentedFusion};
use nvfuser_core::{Fusion, ScalarValue, ValId};

use crate::args::{check_args, Arg};
use crate::dump::{Dump, DumpFlags};
use crate::executor::{device_info, FusionExecutorCache, InputSignature};
use crate::{CudaError, Device, KernelCache, KernelRequest, NvrtcOptions, Tensor};

/// How many argument layouts (signature and sizes) a runtime remembers having compiled
/// ahead for; older ones are forgotten (the segments' executors keep their kernels).
const PREPARED_CAPACITY: usize = 16;

/// Runs a fusion as a sequence of segments (see the module documentation).
#[derive(Debug)]
pub struct SegmentedRuntime {
    segmented: SegmentedFusion,
    executors: Vec<FusionExecutorCache>,
    prepared: Mutex<Vec<(InputSignature, Vec<usize>)>>,
    runs: AtomicU64,
    parallel_compiles: AtomicU64,
    dump: Option<Dump>,
}

/// Counters of a [`SegmentedRuntime`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentedStats {
    /// Calls of [`SegmentedRuntime::run`].
    pub runs: u64,
    /// Kernels compiled ahead, in parallel, on first calls.
    pub parallel_compiles: u64,
}

impl SegmentedRuntime {
    /// Segments `fusion` with the scheduler registry and prepares one executor per
    /// segment. Errors: [`CudaError::UnsupportedFusion`] when some expression cannot be
    /// scheduled even alone, or when an output updates an input in place (the segmented
    /// runtime does not write into inputs).
    pub fn new(fusion: Fusion) -> Result<SegmentedRuntime, CudaError> {
        let segmented =
            SegmentedFusion::new(&fusion).map_err(|e| CudaError::UnsupportedFusion {
                reason: e.to_string(),
            })?;
        Self::from_segmented(segmented)
    }

    /// A runtime for a segmentation made elsewhere (for example with a custom rule).
    pub fn from_segmented(segmented: SegmentedFusion) -> Result<SegmentedRuntime, CudaError> {
        if let Some(o) = segmented
            .original()
            .outputs()
            .iter()
            .find(|o| o.alias_of.is_some())
        {
            return Err(CudaError::UnsupportedFusion {
                reason: format!(
                    "the in-place output {} of a segmented fusion (outputs that update an input are not supported by the segmented runtime)",
                    o.val
                ),
            });
        }
        let executors = segmented
            .segments()
            .iter()
            .map(|s| FusionExecutorCache::new(s.fusion().clone()))
            .collect();
        Ok(SegmentedRuntime {
            segmented,
            executors,
            prepared: Mutex::new(Vec::new()),
            runs: AtomicU64::new(0),
            parallel_compiles: AtomicU64::new(0),
            dump: None,
        })
    }

    /// Gives this runtime (and its segments' executors) its own dump instead of the
    /// process's `NVFUSER_DUMP`. The segmentation is printed under the `ir` stage.
    pub fn with_dump(mut self, dump: Dump) -> Self {
        self.executors = std::mem::take(&mut self.executors)
            .into_iter()
            .map(|e| FusionExecutorCache::new(e.fusion().clone()).with_dump(dump.clone()))
            .collect();
        self.dump = Some(dump);
        self
    }

    fn dump(&self) -> &Dump {
        self.dump.as_ref().unwrap_or_else(|| Dump::from_env())
    }

    /// The segmentation: segments, schedulers, maps.
    pub fn segmented(&self) -> &SegmentedFusion {
        &self.segmented
    }

    /// The original fusion.
    pub fn fusion(&self) -> &Fusion {
        self.segmented.original()
    }

    /// The executor of segment `index` (its kernel cache and stats).
    pub fn executor(&self, index: usize) -> Option<&FusionExecutorCache> {
        self.executors.get(index)
    }

    /// Counters.
    pub fn stats(&self) -> SegmentedStats {
        SegmentedStats {
            runs: self.runs.load(Ordering::Relaxed),
            parallel_compiles: self.parallel_compiles.load(Ordering::Relaxed),
        }
    }

    /// The arguments of segment `index`, in its input order, gathered through its input
    /// map: `lookup` gives an original value (a fusion input, or an earlier segment's
    /// output); an extent is read from the sizes of the original input tensor that
    /// `lookup` returns.
    pub fn segment_args<'a>(
        &self,
        index: usize,
        lookup: &dyn Fn(ValId) -> Option<Arg<'a>>,
    ) -> Result<Vec<Arg<'a>>, CudaError> {
        let seg = self.segment(index)?;
        let missing = |v: ValId| {
            CudaError::InvalidInput {
            kernel: format!("segment {index}"),
            what: format!("the original value {v} is not available (not an input, and no earlier segment computed it)"),
        }
        };
        seg.inputs()
            .iter()
            .map(|x| match x {
                SegmentValue::Val(v) => lookup(*v).ok_or_else(|| missing(*v)),
                SegmentValue::Extent(e) => match lookup(e.tensor) {
                    Some(Arg::Tensor(t)) => t
                        .sizes()
                        .get(e.axis as usize)
                        .map(|&n| Arg::Scalar(ScalarValue::Int(n as i64)))
                        .ok_or_else(|| missing(e.tensor)),
                    _ => Err(missing(e.tensor)),
                },
            })
            .collect()
    }

    /// Runs segment `index` alone on `args` (its own inputs, in order; see
    /// [`SegmentedRuntime::segment_args`]) and returns its outputs (see
    /// `Segment::outputs` for the original values they are).
    pub fn run_segment(
        &self,
        index: usize,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<Vec<Tensor>, CudaError> {
        self.segment(index)?;
        self.executors[index].run(device, args)
    }

    fn segment(&self, index: usize) -> Result<&nvfuser_core::segment::Segment, CudaError> {
        self.segmented
            .segments()
            .get(index)
            .ok_or_else(|| CudaError::InvalidInput {
                kernel: "segmented fusion".into(),
                what: format!(
                    "segment {index} (there are {})",
                    self.segmented.segments().len()
                ),
            })
    }

    /// Checks `args` against the original fusion and runs every segment in order on
    /// `device`; returns the original fusion's outputs.
    pub fn run(&self, device: &Device, args: &[Arg<'_>]) -> Result<Vec<Tensor>, CudaError> {
        let fusion = self.segmented.original();
        check_args(fusion, device, args)?;
        self.runs.fetch_add(1, Ordering::Relaxed);
        if device.is_gpu() {
            self.prepare(device, args)?;
        }
        // Original values by id: inputs first, then every segment's outputs.
        let mut tensors: Vec<Option<Tensor>> = vec![None; fusion.num_vals()];
        let mut scalars: Vec<Option<ScalarValue>> = vec![None; fusion.num_vals()];
        for (&id, arg) in fusion.inputs().iter().zip(args) {
            match arg {
                Arg::Tensor(t) => tensors[id.index()] = Some((*t).clone()),
                Arg::Scalar(s) => scalars[id.index()] = Some(*s),
            }
        }
        for k in 0..self.executors.len() {
            let outputs = {
                let lookup = |v: ValId| match (&tensors[v.index()], scalars[v.index()]) {
                    (Some(t), _) => Some(Arg::Tensor(t)),
                    (None, Some(s)) => Some(Arg::Scalar(s)),
                    (None, None) => None,
                };
                let seg_args = self.segment_args(k, &lookup)?;
                self.executors[k].run(device, &seg_args)?
            };
            for (&v, t) in self.segmented.segments()[k].outputs().iter().zip(outputs) {
                tensors[v.index()] = Some(t);
            }
            for v in self.segmented.release_after(k) {
                tensors[v.index()] = None;
            }
        }
        fusion
            .outputs()
            .iter()
            .map(|o| {
                tensors[o.val.index()]
                    .clone()
                    .ok_or_else(|| CudaError::InvalidInput {
                        kernel: "segmented fusion".into(),
                        what: format!("the output {} was computed by no segment", o.val),
                    })
            })
            .collect()
    }

    /// Generates every segment's kernel for the sizes it will see with `args` and
    /// compiles them in parallel into the [`KernelCache`] (once per argument layout and
    /// sizes); the segments' executors then only load them. Returns how many kernels it
    /// compiled now (0 when this layout was prepared before). A kernel whose sizes cannot
    /// be predicted is left to its executor; failures here are not errors (the run
    /// reports them).
    pub fn compile(&self, device: &Device, args: &[Arg<'_>]) -> Result<usize, CudaError> {
        check_args(self.segmented.original(), device, args)?;
        self.prepare(device, args)
    }

    fn prepare(&self, device: &Device, args: &[Arg<'_>]) -> Result<usize, CudaError> {
        let Some(props) = device.properties() else {
            return Ok(0);
        };
        let key = (
            InputSignature::of(device, args),
            args.iter()
                .flat_map(|a| match a {
                    Arg::Tensor(t) => {
                        let mut v = vec![usize::MAX - t.rank()];
                        v.extend_from_slice(t.sizes());
                        v
                    }
                    Arg::Scalar(_) => Vec::new(),
                })
                .collect::<Vec<usize>>(),
        );
        {
            let prepared = self.lock();
            if prepared.contains(&key) {
                return Ok(0);
            }
        }
        if !self.segmented.is_segmented() {
            self.remember(key);
            return Ok(0);
        }
        let dump = self.dump();
        dump.section(DumpFlags::IR, "ir", "segments", &self.segmented);
        let infos: Vec<Option<RuntimeInfo>> = (0..self.executors.len())
            .map(|k| self.segment_runtime_info(k, device_info(props), args))
            .collect();
        // Generate in parallel (scheduling and lowering take time too), then compile the
        // sources in parallel through the kernel cache.
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(self.executors.len())
            .max(1);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut sources: Vec<(String, String)> = Vec::new();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let k = next.fetch_add(1, Ordering::Relaxed);
                            let Some(info) = infos.get(k) else {
                                break done;
                            };
                            let Some(info) = info else { continue };
                            if let Ok((_, Some(kernel))) =
                                self.executors[k].generate_for(info, None)
                            {
                                done.push((kernel.cuda_source(), kernel.abi.name.clone()));
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                match h.join() {
                    Ok(done) => sources.extend(done),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
        let options = NvrtcOptions::new(props.arch());
        let requests: Vec<KernelRequest<'_>> = sources
            .iter()
            .map(|(src, name)| KernelRequest::new(src, name, &options))
            .collect();
        let compiled = KernelCache::global()
            .compile_many(&requests)
            .into_iter()
            .filter(|r| r.is_ok())
            .count();
        self.parallel_compiles
            .fetch_add(compiled as u64, Ordering::Relaxed);
        self.remember(key);
        Ok(compiled)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(InputSignature, Vec<usize>)>> {
        self.prepared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, key: (InputSignature, Vec<usize>)) {
        let mut prepared = self.lock();
        if !prepared.contains(&key) {
            if prepared.len() >= PREPARED_CAPACITY {
                prepared.remove(0);
            }
            prepared.push(key);
        }
    }

    /// What the heuristics of segment `index` will see when the fusion runs on `args`
    /// on a GPU described by `device`: original inputs as they are, intermediates as
    /// fresh contiguous 16-byte-aligned allocations of their predicted sizes, extents as
    /// integers. `None` when a size cannot be predicted from the inputs (it depends on
    /// a computed scalar) or `index` is out of range. The runtime generates and compiles
    /// every segment's kernel from this ahead of the first run.
    pub fn segment_runtime_info(
        &self,
        index: usize,
        device: DeviceInfo,
        args: &[Arg<'_>],
    ) -> Option<RuntimeInfo> {
        let fusion = self.segmented.original();
        let dim = |t: ValId, axis: usize| -> Option<i64> {
            match args.get(fusion.input_position(t)?)? {
                Arg::Tensor(x) => x.sizes().get(axis).map(|&s| s as i64),
                Arg::Scalar(_) => None,
            }
        };
        let scalar = |v: ValId| -> Option<i64> {
            match args.get(fusion.input_position(v)?)? {
                Arg::Scalar(s) => s.cast(fusion.val(v).dtype).as_i64(),
                Arg::Tensor(_) => None,
            }
        };
        let inputs =
            self.segmented
                .segments()
                .get(index)?
                .inputs()
                .iter()
                .map(|x| match x {
                    SegmentValue::Extent(e) => dim(e.tensor, e.axis as usize)
                        .map(|n| InputInfo::Scalar(ScalarValue::Int(n))),
                    SegmentValue::Val(v) => {
                        if let Some(p) = fusion.input_position(*v) {
                            return args.get(p).map(arg_info);
                        }
                        let val = fusion.val(*v);
                        let ValKind::Tensor(t) = &val.kind else {
                            return None;
                        };
                        let sizes = t
                            .shape()
                            .map(|d| d.extent.eval(&dim, &scalar).map(|n| n.max(0) as usize))
                            .collect::<Option<Vec<usize>>>()?;
                        let strides = crate::contiguous_strides(&sizes)
                            .into_iter()
                            .map(|s| s as i64)
                            .collect();
                        Some(InputInfo::Tensor(TensorInfo {
                            dtype: val.dtype,
                            sizes: sizes.iter().map(|&s| s as i64).collect(),
                            strides,
                            alignment: 16,
                        }))
                    }
                })
                .collect::<Option<Vec<_>>>()?;
        Some(RuntimeInfo { device, inputs })
    }
}

/// One argument as the heuristics see it (as `executor::runtime_info` does).
fn arg_info(arg: &Arg<'_>) -> InputInfo {
    match arg {
        Arg::Tensor(t) => InputInfo::Tensor(TensorInfo {
            dtype: t.dtype(),
            sizes: t.sizes().iter().map(|&s| s as i64).collect(),
            strides: t.strides().iter().map(|&s| s as i64).collect(),
            alignment: t
                .cuda_address()
                .map_or(16, |p| 1u32 << p.trailing_zeros().min(4)),
        }),
        Arg::Scalar(s) => InputInfo::Scalar(*s),
    }
}
