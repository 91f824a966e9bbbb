//! Running a segmented fusion: one kernel per segment, intermediates in device memory.
//!
//! [`SegmentedRuntime`] runs a fusion as the segments of a given segmentation: made by
//! [`SegmentedFusion::new`] (which looks at the definition only), or elsewhere with a
//! custom rule. It is a view over the one runtime every fusion runs on: a
//! [`FusionExecutorCache`] whose planner keeps this segmentation
//! ([`FusionExecutorCache::with_segmentation`]), so on a GPU a call plans each segment
//! for the sizes it will see (intermediate sizes follow from the inputs), compiles the
//! plan's kernels in parallel on the first call with these layouts and sizes, and runs
//! them in order, each on arguments gathered through its input map (original inputs,
//! earlier segments' outputs, extents of original inputs as `i64` scalars);
//! intermediates stay in device memory and are dropped right after their last reader
//! (stream-ordered frees). A fusion that no single kernel takes is segmented the same
//! way by any [`FusionExecutorCache`]; this type adds the segment-by-segment view
//! ([`SegmentedRuntime::segment_args`], [`SegmentedRuntime::run_segment`]).
//!
//! On the CPU reference device the segments run one by one on the evaluator, through
//! their maps.
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
//! # Ok::<(), nvfuser_cuda::Error>(())
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::segment::SegmentedFusion;
use nvfuser_core::{Fusion, ValId};

use crate::args::{check_args, Arg};
use crate::dump::Dump;
use crate::executor::{runtime_info_for, ExecutorStats, FusionExecutorCache};
use crate::runtime::{gather_segment_args, run_chain};
use crate::{Device, Error, Tensor};

/// Runs a fusion as a sequence of segments (see the module documentation).
#[derive(Debug)]
pub struct SegmentedRuntime {
    segmented: SegmentedFusion,
    /// The whole fusion on the one runtime, planned with this segmentation.
    whole: FusionExecutorCache,
    /// Each segment alone, for [`SegmentedRuntime::run_segment`] and the CPU device.
    executors: Vec<FusionExecutorCache>,
    runs: AtomicU64,
}

/// Counters of a [`SegmentedRuntime`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentedStats {
    /// Calls of [`SegmentedRuntime::run`].
    pub runs: u64,
    /// The runtime cache of the whole fusion (GPU calls: plans built, reused, hit).
    pub runtime: ExecutorStats,
}

impl SegmentedRuntime {
    /// Segments `fusion` with the scheduler registry and prepares its runtime. Errors:
    /// [`Error::UnsupportedFusion`] when some expression cannot be scheduled even
    /// alone. An output that updates an input in place is stored into it on the CPU
    /// device, and refused (typed) on a GPU.
    pub fn new(fusion: Fusion) -> Result<SegmentedRuntime, Error> {
        let segmented = SegmentedFusion::new(&fusion).map_err(|e| Error::UnsupportedFusion {
            reason: e.to_string(),
        })?;
        Self::from_segmented(segmented)
    }

    /// A runtime for a segmentation made elsewhere (for example with a custom rule).
    pub fn from_segmented(segmented: SegmentedFusion) -> Result<SegmentedRuntime, Error> {
        let executors = segmented
            .segments()
            .iter()
            .map(|s| FusionExecutorCache::new(s.fusion().clone()))
            .collect();
        Ok(SegmentedRuntime {
            whole: FusionExecutorCache::with_segmentation(segmented.clone()),
            segmented,
            executors,
            runs: AtomicU64::new(0),
        })
    }

    /// Gives this runtime (and its segments' executors) its own dump instead of the
    /// process's `NVFUSER_DUMP`. The segmentation is printed under the `ir` stage and
    /// the plan under `plan`.
    pub fn with_dump(mut self, dump: Dump) -> Self {
        self.executors = std::mem::take(&mut self.executors)
            .into_iter()
            .map(|e| FusionExecutorCache::new(e.fusion().clone()).with_dump(dump.clone()))
            .collect();
        self.whole = FusionExecutorCache::with_segmentation(self.segmented.clone()).with_dump(dump);
        self
    }

    /// The segmentation: segments, schedulers, maps.
    pub fn segmented(&self) -> &SegmentedFusion {
        &self.segmented
    }

    /// The original fusion.
    pub fn fusion(&self) -> &Fusion {
        self.segmented.original()
    }

    /// The executor of the whole fusion (its runtime cache, plans and stats).
    pub fn whole(&self) -> &FusionExecutorCache {
        &self.whole
    }

    /// The executor of segment `index` run alone (see [`SegmentedRuntime::run_segment`]).
    pub fn executor(&self, index: usize) -> Option<&FusionExecutorCache> {
        self.executors.get(index)
    }

    /// Counters.
    pub fn stats(&self) -> SegmentedStats {
        SegmentedStats {
            runs: self.runs.load(Ordering::Relaxed),
            runtime: self.whole.stats(),
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
    ) -> Result<Vec<Arg<'a>>, Error> {
        gather_segment_args(index, self.segment(index)?.inputs(), lookup)
    }

    /// Runs segment `index` alone on `args` (its own inputs, in order; see
    /// [`SegmentedRuntime::segment_args`]) and returns its outputs (see
    /// `Segment::outputs` for the original values they are).
    pub fn run_segment(
        &self,
        index: usize,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<Vec<Tensor>, Error> {
        self.segment(index)?;
        self.executors[index].run(device, args)
    }

    fn segment(&self, index: usize) -> Result<&nvfuser_core::segment::Segment, Error> {
        self.segmented
            .segments()
            .get(index)
            .ok_or_else(|| Error::InvalidInput {
                kernel: "segmented fusion".into(),
                what: format!(
                    "segment {index} (there are {})",
                    self.segmented.segments().len()
                ),
            })
    }

    /// Checks `args` against the original fusion and runs every segment in order on
    /// `device`; returns the original fusion's outputs.
    pub fn run(&self, device: &Device, args: &[Arg<'_>]) -> Result<Vec<Tensor>, Error> {
        self.runs.fetch_add(1, Ordering::Relaxed);
        if device.is_gpu() {
            return self.whole.run(device, args);
        }
        let fusion = self.segmented.original();
        let completed = crate::generator::complete_args(fusion, device, args, true)?;
        let args = completed.as_deref().unwrap_or(args);
        check_args(fusion, device, args)?;
        let outputs: Vec<ValId> = fusion.outputs().iter().map(|o| o.val).collect();
        let chain = self
            .segmented
            .segments()
            .iter()
            .enumerate()
            .map(|(k, s)| (s.inputs(), s.outputs(), self.segmented.release_after(k)));
        let outputs = run_chain(
            (fusion.inputs(), &outputs),
            fusion.num_vals(),
            chain,
            args,
            &mut |k, seg_args| self.executors[k].run(device, seg_args),
        )?;
        crate::args::store_in_place(fusion, args, outputs)
    }

    /// Plans every segment for the sizes it will see with `args` and compiles their
    /// kernels in parallel (once per argument layout and sizes: the runtime is then
    /// cached). Returns how many kernels it compiled now (0 when the runtime was built
    /// before, or on the CPU device).
    pub fn compile(&self, device: &Device, args: &[Arg<'_>]) -> Result<usize, Error> {
        if !device.is_gpu() {
            check_args(self.fusion(), device, args)?;
            return Ok(0);
        }
        let before = self.whole.stats().misses;
        let plan = self.whole.plan(device, args)?;
        Ok(if self.whole.stats().misses > before {
            plan.kernels().count()
        } else {
            0
        })
    }

    /// What the heuristics of segment `index` will see when the fusion runs on `args`
    /// on a GPU described by `device`: original inputs as they are, intermediates as
    /// fresh contiguous 16-byte-aligned allocations of their predicted sizes, extents as
    /// integers ([`nvfuser_core::plan::segment_info`]). `None` when a size cannot be
    /// predicted from the inputs or `index` is out of range.
    pub fn segment_runtime_info(
        &self,
        index: usize,
        device: DeviceInfo,
        args: &[Arg<'_>],
    ) -> Option<RuntimeInfo> {
        nvfuser_core::plan::segment_info(&self.segmented, index, &runtime_info_for(device, args))
    }
}
