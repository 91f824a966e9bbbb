//! The executor's inspection and offline-planning API: the plan, CUDA source, scheduled
//! IR, heuristics and kernel of a call (building its runtime on a GPU), profiled runs,
//! and planning for a described GPU without one.
//!
//! Without the `cuda` feature every device is the CPU: the GPU-only inspections check
//! the arguments and return [`Error::NotAGpu`], as they do on the CPU device of a CUDA
//! build; offline planning works as ever.

#[cfg(feature = "cuda")]
use std::sync::Arc;

#[cfg(feature = "cuda")]
use cudarc::driver::CudaFunction;
use nvfuser_core::codegen::Kernel;
use nvfuser_core::plan::ExecutionPlan;
use nvfuser_core::scheduler::{DeviceInfo, HeuristicParams, RuntimeInfo};

use super::{runtime_info, runtime_info_for, FusionExecutorCache};
use crate::args::Arg;
use crate::profile::KernelProfile;
#[cfg(feature = "cuda")]
use crate::profile::{self, LaunchTimer};
use crate::runtime::InputSignature;
#[cfg(feature = "cuda")]
use crate::runtime::{check_reads, execute, Runtime};
use crate::{Device, Error, Tensor};

impl FusionExecutorCache {
    /// What a GPU-only inspection named `op` returns without `cuda`, where every device
    /// is the CPU: the arguments' error, else [`Error::NotAGpu`].
    #[cfg(not(feature = "cuda"))]
    fn not_a_gpu(&self, op: &'static str, device: &Device, args: &[Arg<'_>]) -> Error {
        let completed = match crate::generator::complete_args(self.fusion(), device, args, false) {
            Ok(c) => c,
            Err(e) => return e,
        };
        match self.check_args(device, completed.as_deref().unwrap_or(args)) {
            Err(e) => e,
            Ok(()) => Error::NotAGpu { op },
        }
    }

    /// The checked kernel arguments and the runtime of a call (GPU devices only).
    #[cfg(feature = "cuda")]
    fn runtime_for(&self, device: &Device, args: &[Arg<'_>]) -> Result<Arc<Runtime>, Error> {
        // An inspection reads the generator's state without moving it on.
        let completed = crate::generator::complete_args(self.fusion(), device, args, false)?;
        let args = completed.as_deref().unwrap_or(args);
        self.check_args(device, args)?;
        let args = &self.kernel_args(args)?[..];
        Ok(self.runtime(device, args, None, None)?.runtime.clone())
    }

    /// The execution plan a GPU call with these arguments runs, building its runtime if
    /// needed (GPU devices only). Print it (`Display`) or serialize it (serde).
    pub fn plan(&self, device: &Device, args: &[Arg<'_>]) -> Result<ExecutionPlan, Error> {
        #[cfg(not(feature = "cuda"))]
        return Err(self.not_a_gpu("FusionExecutorCache::plan", device, args));
        #[cfg(feature = "cuda")]
        Ok(self.runtime_for(device, args)?.plan.clone())
    }

    /// The generated CUDA source of the runtime for these arguments, building it if
    /// needed (for inspection; GPU devices only; a fusion of one kernel).
    pub fn cuda_source(&self, device: &Device, args: &[Arg<'_>]) -> Result<String, Error> {
        #[cfg(not(feature = "cuda"))]
        return Err(self.not_a_gpu("FusionExecutorCache::cuda_source", device, args));
        #[cfg(feature = "cuda")]
        {
            let rt = self.runtime_for(device, args)?;
            Ok(rt.single("cuda_source")?.0.kernel.cuda_source())
        }
    }

    /// The generated kernel and its loaded function for these arguments (building the
    /// runtime if needed; GPU devices only), e.g. to compare with a bare launch.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn kernel_and_function(
        &self,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<(Kernel, CudaFunction), Error> {
        let rt = self.runtime_for(device, args)?;
        let (k, f) = rt.single("kernel_and_function")?;
        Ok((k.kernel.clone(), f.clone()))
    }

    /// The scheduled IR of the runtime for these arguments (GPU devices only).
    pub fn scheduled_ir(&self, device: &Device, args: &[Arg<'_>]) -> Result<String, Error> {
        #[cfg(not(feature = "cuda"))]
        return Err(self.not_a_gpu("FusionExecutorCache::scheduled_ir", device, args));
        #[cfg(feature = "cuda")]
        {
            let rt = self.runtime_for(device, args)?;
            Ok(rt.single("scheduled_ir")?.0.scheduled.scheduled_ir())
        }
    }

    /// The heuristic params the registry picks for these arguments on `device` (GPU
    /// devices only): the scheduler is the params' [`HeuristicParams::kind`]. Edit them
    /// and pass them to [`FusionExecutorCache::run_with_params`]. A fusion that runs as
    /// segments has params per segment: see [`FusionExecutorCache::plan`].
    pub fn heuristics(&self, device: &Device, args: &[Arg<'_>]) -> Result<HeuristicParams, Error> {
        let completed = crate::generator::complete_args(self.fusion(), device, args, false)?;
        let args = completed.as_deref().unwrap_or(args);
        self.check_args(device, args)?;
        let props = device.properties().ok_or(Error::NotAGpu {
            op: "FusionExecutorCache::heuristics",
        })?;
        let args = &self.kernel_args(args)?[..];
        let sig = InputSignature::of(device, args);
        let decided = self.decide(&runtime_info(props, args), None, sig.wide())?;
        let mut segments = decided.segments();
        match (segments.next(), segments.next()) {
            (Some((_, params, _, _)), None) => Ok(params.clone()),
            _ => Err(Error::UnsupportedFusion {
                reason: format!(
                    "heuristics: the fusion runs as {} segments, each with its own params; see FusionExecutorCache::plan",
                    decided.segments().count()
                ),
            }),
        }
    }

    /// Runs the fusion on a GPU like [`FusionExecutorCache::run`] and profiles its kernel
    /// launch: time from CUDA events around the launch, logical bytes read and written,
    /// bandwidth against the device's peak, launch dims, registers and scheduler (see
    /// [`KernelProfile`]). The runtime is built first if needed, so compilation is never
    /// timed.
    ///
    /// Errors: [`Error::NotAGpu`] on the CPU device, [`Error::UnsupportedFusion`]
    /// for a call without exactly one kernel (no expressions, only empty outputs, or
    /// segments), and those of `run`.
    pub fn run_profiled(
        &self,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<(Vec<Tensor>, KernelProfile), Error> {
        self.run_profiled_with(device, args, None)
    }

    /// [`run_profiled`](Self::run_profiled) with optional user params (see
    /// [`run_with_params`](Self::run_with_params)).
    pub fn run_profiled_with(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        params: Option<&HeuristicParams>,
    ) -> Result<(Vec<Tensor>, KernelProfile), Error> {
        const OP: &str = "FusionExecutorCache::run_profiled";
        #[cfg(not(feature = "cuda"))]
        {
            let _ = params;
            Err(self.not_a_gpu(OP, device, args))
        }
        #[cfg(feature = "cuda")]
        self.profile_on_gpu(OP, device, args, params)
    }

    /// [`Self::run_profiled_with`] where a GPU can exist.
    #[cfg(feature = "cuda")]
    fn profile_on_gpu(
        &self,
        op: &'static str,
        device: &Device,
        args: &[Arg<'_>],
        params: Option<&HeuristicParams>,
    ) -> Result<(Vec<Tensor>, KernelProfile), Error> {
        let props = device.properties().ok_or(Error::NotAGpu { op })?;
        let completed = crate::generator::complete_args(self.fusion(), device, args, true)?;
        let args = completed.as_deref().unwrap_or(args);
        self.check_args(device, args)?;
        let args = &self.kernel_args(args)?[..];
        check_reads(&self.planner, args)?;
        if self.kernel_fusion().num_exprs() == 0 {
            return Err(Error::UnsupportedFusion {
                reason: "the fusion has no expressions, so no kernel runs to profile".into(),
            });
        }
        let cached = self.runtime(device, args, params, None)?;
        let (rt, recipe) = (&cached.runtime, &cached.recipe);
        let (k, function) = rt.single("run_profiled")?;
        let mut timer = LaunchTimer::default();
        let outputs = execute(device, rt, recipe, args, self.dump(), Some(&mut timer), &[])?;
        let profile = KernelProfile::new(
            k.kernel.abi.name.clone(),
            rt.scheduler().to_owned(),
            device.to_string(),
            timer.elapsed_ms()?,
            (profile::bytes_read(args), profile::bytes_written(&outputs)),
            props.peak_bandwidth_gb_per_s(),
            (timer.grid, timer.block),
            profile::registers_per_thread(function)?,
        );
        Ok((outputs, profile))
    }

    /// The plan a GPU described by `info` (the fusion's own inputs, as on a call) would
    /// run, with `params` instead of the registry's choice when given: scheduled and
    /// lowered, not compiled. Planning on any machine; the `ir`, `scheduler`, `plan`,
    /// `scheduled` and `cuda` stages are dumped.
    pub fn plan_for(
        &self,
        info: &RuntimeInfo,
        params: Option<&HeuristicParams>,
    ) -> Result<ExecutionPlan, Error> {
        let info = self.planner.kernel_info(info)?;
        let decided = self.decide(&info, params, false)?;
        self.lower(&decided)
    }

    /// Schedules and generates the kernel for `info` (the registry's params, or
    /// `params`) without compiling or loading it (see [`FusionExecutorCache::plan_for`]).
    /// Returns the params and the kernel; `None` for a no-op. A fusion that runs as
    /// segments is an [`Error::UnsupportedFusion`]: its plan has one kernel each.
    pub fn generate_for(
        &self,
        info: &RuntimeInfo,
        params: Option<&HeuristicParams>,
    ) -> Result<(HeuristicParams, Option<Kernel>), Error> {
        let plan = self.plan_for(info, params)?;
        match plan.segments.as_slice() {
            [one] if !plan.segmented => Ok((
                one.params.clone(),
                one.kernel.as_ref().map(|k| k.kernel.clone()),
            )),
            many => Err(Error::UnsupportedFusion {
                reason: format!(
                    "no single kernel takes this fusion: it runs as {} segments (see FusionExecutorCache::plan_for)",
                    many.len()
                ),
            }),
        }
    }

    /// The kernels a GPU described by `device` would run for `args`, planned as
    /// [`run`](Self::run) plans them (host scalars evaluated, one kernel or, when no
    /// scheduler takes the whole fusion, the segments' kernels; none when nothing is
    /// launched), generated but neither compiled nor launched: planning on a machine
    /// without a GPU (the fuzzer's CPU mode). `args` may live on any device.
    pub fn plan_kernels(&self, device: DeviceInfo, args: &[Arg<'_>]) -> Result<Vec<Kernel>, Error> {
        // Without a device, a left-out seed and offset plan with the default state (the
        // kernels do not depend on their values).
        let completed =
            crate::generator::complete_args(self.fusion(), &Device::cpu(), args, false)?;
        let args = completed.as_deref().unwrap_or(args);
        let kargs = self.kernel_args(args)?;
        let kernel = self.kernel_fusion();
        if kernel.outputs().is_empty() || kernel.num_exprs() == 0 {
            return Ok(Vec::new());
        }
        let info = runtime_info_for(device, &kargs);
        let wide = self.planner.needs_wide(&info);
        let decided = self.decide(&info, None, wide)?;
        let plan = self.lower(&decided)?;
        if !plan.segmented {
            for k in plan.kernels() {
                // What the launch would check on these arguments.
                crate::launch::check_planned_requirements(k, kernel, &kargs)?;
            }
        }
        Ok(plan.kernels().cloned().collect())
    }
}
