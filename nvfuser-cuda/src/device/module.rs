//! Loading NVRTC's CUBINs onto a GPU, with the checks cudarc leaves out.
//!
//! cudarc's `load_function` panics on a name with a NUL byte, and the driver's answer to
//! a CUBIN built for the wrong architecture is an opaque `CUDA_ERROR_NO_BINARY_FOR_GPU`.
//! Both are checked here first and become typed errors that say what to do.
//!
//! Loading needs `cuda` (the handles are cudarc's); [`cubin_runs_on`] is plain data.

#[cfg(feature = "cuda")]
use std::sync::Arc;

#[cfg(feature = "cuda")]
use cudarc::driver::sys::CUresult;
#[cfg(feature = "cuda")]
use cudarc::driver::{CudaFunction, CudaModule};
#[cfg(feature = "cuda")]
use cudarc::nvrtc::Ptx;

#[cfg(feature = "cuda")]
use super::Device;
#[cfg(feature = "cuda")]
use crate::error::Error;
#[cfg(feature = "cuda")]
use crate::nvrtc::CompiledKernel;
use crate::nvrtc::GpuArch;

/// Whether machine code for `kernel` runs on a GPU of architecture `device`: a CUBIN runs
/// on its own major version at its own or a later minor version (`sm_80` code runs on
/// `sm_86`, never on `sm_90`).
pub fn cubin_runs_on(kernel: GpuArch, device: GpuArch) -> bool {
    kernel.major() == device.major() && kernel.minor() <= device.minor()
}

#[cfg(feature = "cuda")]
impl Device {
    /// Loads a compiled kernel's CUBIN into this GPU's context.
    ///
    /// Errors: [`Error::NotAGpu`] on the CPU device, [`Error::ArchMismatch`] when
    /// the CUBIN cannot run on this GPU (see [`cubin_runs_on`]), and
    /// [`Error::Driver`] when the driver rejects the image.
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn load_module(&self, kernel: &CompiledKernel) -> Result<Arc<CudaModule>, Error> {
        let gpu = self.require_gpu("Device::load_module")?;
        let device_arch = gpu.properties.arch();
        if !cubin_runs_on(kernel.arch, device_arch) {
            return Err(Error::ArchMismatch {
                kernel: kernel.name.clone(),
                kernel_arch: kernel.arch,
                device: gpu.label(),
                device_arch,
            });
        }
        let module = gpu
            .context
            .load_module(Ptx::from_binary(kernel.cubin.clone()))
            .map_err(|e| Error::driver("cuModuleLoadData", e))?;
        let mut loaded = gpu.modules.lock().unwrap_or_else(|p| p.into_inner());
        loaded.retain(|m| m.strong_count() > 0);
        loaded.push(Arc::downgrade(&module));
        Ok(module)
    }

    /// Loads a compiled kernel and looks up its `extern "C" __global__` function
    /// `function` (usually the kernel's own name).
    ///
    /// Errors: those of [`Device::load_module`], [`Error::InvalidInput`] for a name
    /// with a NUL byte, and [`Error::FunctionNotFound`] when the CUBIN has no such
    /// function.
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn load_function(
        &self,
        kernel: &CompiledKernel,
        function: &str,
    ) -> Result<CudaFunction, Error> {
        if function.is_empty() || function.contains('\0') {
            return Err(Error::InvalidInput {
                kernel: kernel.name.clone(),
                what: format!("the function name {function:?} is empty or has a NUL byte"),
            });
        }
        let module = self.load_module(kernel)?;
        module.load_function(function).map_err(|e| {
            if e.0 == CUresult::CUDA_ERROR_NOT_FOUND {
                Error::FunctionNotFound {
                    kernel: kernel.name.clone(),
                    function: function.to_owned(),
                }
            } else {
                Error::driver("cuModuleGetFunction", e)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubins_run_on_later_minors_of_their_major_only() {
        assert!(cubin_runs_on(GpuArch::SM80, GpuArch::SM86));
        assert!(cubin_runs_on(GpuArch::SM90, GpuArch::SM90));
        assert!(!cubin_runs_on(GpuArch::SM86, GpuArch::SM80));
        assert!(!cubin_runs_on(GpuArch::SM80, GpuArch::SM90));
        assert!(!cubin_runs_on(GpuArch::SM90, GpuArch::SM100));
    }
}
