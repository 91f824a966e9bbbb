//! The driver probe: a typed answer on every machine, with or without a GPU.

use nvfuser_cuda::testing::{note, require_gpu};
use nvfuser_cuda::{driver, Error};

#[test]
fn the_driver_probe_answers_without_panicking() {
    match driver::probe() {
        Ok(info) => {
            assert!(info.device_count > 0);
            #[cfg(feature = "cuda")]
            assert!(
                (info.version.major, info.version.minor) >= nvfuser_cuda::CUDA_BINDINGS_VERSION
            );
            note(&format!(
                "CUDA driver {} ({}), {} GPU(s)",
                info.version, info.loaded_as, info.device_count
            ));
        }
        Err(err) => {
            // A build without `cuda` has no driver to probe.
            let disabled = !cfg!(feature = "cuda") && matches!(err, Error::CudaDisabled { .. });
            assert!(
                matches!(
                    err,
                    Error::NoDriver { .. } | Error::NoDevice { .. } | Error::DriverTooOld { .. }
                ) || disabled,
                "{err}"
            );
            note(&format!("driver probe: {err}"));
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: run with --features gpu-tests on a GPU machine"
)]
fn require_gpu_skips_or_finds_a_gpu() {
    let Some(gpu) = require_gpu() else {
        return;
    };
    assert!(gpu.driver.device_count > 0);
}
