//! Require-or-skip helpers for tests that need NVRTC or a GPU. Every such test uses them.
//!
//! A test that needs NVRTC starts with
//!
//! ```
//! # fn a_test() {
//! let Some(nvrtc) = nvfuser_cuda::testing::require_nvrtc() else { return };
//! // ... compile with nvfuser_cuda::compile(...)
//! # let _ = nvrtc;
//! # }
//! ```
//!
//! and a test that runs kernels starts with `let Some(gpu) = require_gpu() else { return };`.
//!
//! A skipped test must not count as passed, so such tests are gated by this crate's
//! test-only features:
//! - a whole test that needs NVRTC carries
//!   `#[cfg_attr(not(feature = "nvrtc-tests"), ignore = "...")]`: a plain `cargo test`
//!   reports it as ignored, with the reason; `--features nvrtc-tests` runs it (CI);
//! - the GPU test targets (`tests/gpu_*.rs`) have `required-features = ["gpu-tests"]`,
//!   and a GPU test elsewhere carries the same `cfg_attr` on `gpu-tests`;
//! - under those features the helpers never skip: a missing library or GPU panics, so the
//!   test fails loudly. So do [`REQUIRE_NVRTC_VAR`] and [`REQUIRE_GPU_VAR`] set to `1`.
//!
//! Without the features, a helper that finds nothing prints why (`skipped <test>: ...`,
//! straight to stderr, past the harness's capture) and returns `None`. Only tests that
//! check something on every machine reach that: their NVRTC or GPU part is then left
//! out (for example a plan checked everywhere, and also compiled where NVRTC is).

use std::io::Write;
use std::sync::Mutex;

use crate::driver::DriverInfo;
use crate::error::Error;
use crate::nvrtc::NvrtcLibrary;

/// Set to `1` to make [`require_nvrtc`] (and [`require_gpu`]) fail instead of skip (as
/// the `nvrtc-tests` feature does).
pub const REQUIRE_NVRTC_VAR: &str = "NVFUSER_REQUIRE_NVRTC";

/// Set to `1` to make [`require_gpu`] fail instead of skip (as the `gpu-tests` feature
/// does).
pub const REQUIRE_GPU_VAR: &str = "NVFUSER_REQUIRE_GPU";

/// The NVRTC library, or `None` after printing why the calling test is skipped.
///
/// # Panics
///
/// When NVRTC is missing and the crate is built with `nvrtc-tests` (or
/// `NVFUSER_REQUIRE_NVRTC=1`), or when that variable holds a
/// value that is neither on (`1`, `true`, `yes`, `on`) nor off (`0`, `false`, `no`, `off`,
/// empty).
pub fn require_nvrtc() -> Option<&'static NvrtcLibrary> {
    match crate::nvrtc::probe() {
        Ok(library) => Some(library),
        Err(err) => skip_or_fail(
            &[REQUIRE_NVRTC_VAR],
            cfg!(feature = "nvrtc-tests").then_some("nvrtc-tests"),
            "libnvrtc not found",
            &err,
        ),
    }
}

/// Everything a test that runs kernels needs: a driver with a GPU, and NVRTC.
#[derive(Debug, Clone, Copy)]
pub struct GpuTestEnv {
    /// The driver and the number of GPUs it sees.
    pub driver: &'static DriverInfo,
    /// The NVRTC library.
    pub nvrtc: &'static NvrtcLibrary,
}

/// A driver with at least one GPU and NVRTC, or `None` after printing why the calling test
/// is skipped.
///
/// # Panics
///
/// When either is missing and the crate is built with `gpu-tests` or
/// `NVFUSER_REQUIRE_GPU=1` (or, for a missing NVRTC, `nvrtc-tests` or
/// `NVFUSER_REQUIRE_NVRTC=1`), or when a variable has an unrecognised value.
pub fn require_gpu() -> Option<GpuTestEnv> {
    let driver = match crate::driver::probe() {
        Ok(driver) => driver,
        Err(err) => {
            return skip_or_fail(
                &[REQUIRE_GPU_VAR],
                cfg!(feature = "gpu-tests").then_some("gpu-tests"),
                "no usable GPU",
                &err,
            )
        }
    };
    let nvrtc = match crate::nvrtc::probe() {
        Ok(nvrtc) => nvrtc,
        Err(err) => {
            return skip_or_fail(
                &[REQUIRE_GPU_VAR, REQUIRE_NVRTC_VAR],
                cfg!(feature = "nvrtc-tests").then_some("nvrtc-tests"),
                "libnvrtc not found",
                &err,
            )
        }
    };
    Some(GpuTestEnv { driver, nvrtc })
}

/// Writes `message` to the process's stderr, bypassing the test harness's capture, so
/// that it shows in a plain `cargo test` run (for example compile times or sizes).
pub fn note(message: &str) {
    let mut stderr = std::io::stderr().lock();
    // A failed write to stderr is not worth failing a test for.
    let _ = writeln!(stderr, "{message}");
}

/// Whether the boolean environment variable `var` is on.
///
/// # Panics
///
/// When it holds something other than `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`/empty
/// (any case): a misspelt requirement must not turn into a silent skip.
pub fn env_flag(var: &str) -> bool {
    let Some(value) = std::env::var_os(var) else {
        return false;
    };
    let value = value.to_string_lossy().trim().to_ascii_lowercase();
    match value.as_str() {
        "1" | "true" | "yes" | "on" => true,
        "" | "0" | "false" | "no" | "off" => false,
        other => panic!("{var}={other:?} is not a boolean; use 1 or 0"),
    }
}

/// Whether this process already printed the full reason for a skip, per kind of skip.
static EXPLAINED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// `None` after a note, or a panic when a feature this crate's tests were built with
/// (`required_by`) or one of `require_vars` requires what is missing.
fn skip_or_fail<T>(
    require_vars: &[&str],
    required_by: Option<&str>,
    what: &'static str,
    err: &Error,
) -> Option<T> {
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_owned();
    if let Some(feature) = required_by {
        panic!("{test}: {what}, but the tests were built with the `{feature}` feature, which requires it: {err}");
    }
    if let Some(var) = require_vars.iter().find(|var| env_flag(var)) {
        panic!("{test}: {what}, but {var}=1 requires it: {err}");
    }
    // The full reason is long (it lists every library name tried): print it once per
    // process and kind, and a one-line skip for every test.
    let first = {
        let mut explained = EXPLAINED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let first = !explained.contains(&what);
        if first {
            explained.push(what);
        }
        first
    };
    if first {
        note(&format!(
            "{what}: {err}\n(tests that need it are ignored without the `nvrtc-tests`/`gpu-tests` features; \
             the parts of other tests that need it are left out; set {}=1 to make that a failure)",
            require_vars[0]
        ));
    }
    note(&format!(
        "{test}: {what}; the part of the test that needs it is left out"
    ));
    None
}

/// Device copies of the tensor inputs of a CPU-reference call (`None` for scalars).
pub fn upload_inputs(
    device: &crate::Device,
    inputs: &[nvfuser_core::eval::EvalInput],
) -> Result<Vec<Option<crate::Tensor>>, crate::Error> {
    use nvfuser_core::eval::EvalInput;
    inputs
        .iter()
        .map(|i| match i {
            EvalInput::Tensor(h) => device.tensor_from_host(h).map(Some),
            _ => Ok(None),
        })
        .collect()
}

/// Call arguments for `inputs`: the uploaded tensors (from [`upload_inputs`]) or the
/// scalars.
pub fn input_args<'a>(
    inputs: &[nvfuser_core::eval::EvalInput],
    tensors: &'a [Option<crate::Tensor>],
) -> Vec<crate::Arg<'a>> {
    use nvfuser_core::eval::EvalInput;
    inputs
        .iter()
        .zip(tensors)
        .map(|(i, t)| match (i, t) {
            (_, Some(t)) => crate::Arg::from(t),
            (EvalInput::Scalar(v), None) => crate::Arg::Scalar(*v),
            (EvalInput::Tensor(_), None) => unreachable!("tensor inputs were uploaded"),
        })
        .collect()
}

/// GPU 0 for a test that needs a GPU ([`require_gpu`]: `None` skips, or fails the test
/// under `NVFUSER_REQUIRE_GPU=1`); panics when the driver sees a GPU it cannot open.
pub fn gpu_device() -> Option<crate::Device> {
    require_gpu()?;
    Some(crate::Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// The tolerance of reduction outputs against the CPU reference: f32 results of sums
/// over up to 256K elements accumulate in another order than the f64 reference (2e-4
/// relative to the magnitude); half-precision outputs may round to the neighbour of the
/// reference's value (two units in the last place).
pub fn reduction_tolerance(dtype: nvfuser_core::DataType) -> nvfuser_core::eval::Tolerance {
    use nvfuser_core::eval::Tolerance;
    use nvfuser_core::DataType;
    match dtype {
        DataType::F32 => Tolerance::new(2e-4, 2e-4),
        DataType::F16 => Tolerance::new(2e-3, 1e-3),
        DataType::BF16 => Tolerance::new(1.6e-2, 2e-3),
        other => Tolerance::for_dtype(other),
    }
}

/// Runs `exec` on `device` with `inputs` uploaded (optionally with user heuristic
/// params) and compares every output with the CPU reference evaluator under `tol`.
/// Returns the number of outputs compared, or the first mismatch or error, in words.
pub fn run_and_compare(
    device: &crate::Device,
    exec: &crate::FusionExecutorCache,
    inputs: &[nvfuser_core::eval::EvalInput],
    params: Option<&nvfuser_core::scheduler::HeuristicParams>,
    tol: &dyn Fn(nvfuser_core::DataType) -> nvfuser_core::eval::Tolerance,
) -> Result<usize, String> {
    use nvfuser_core::eval::{compare, evaluate};
    let want = evaluate(exec.fusion(), inputs).map_err(|e| format!("CPU reference: {e}"))?;
    let tensors = upload_inputs(device, inputs).map_err(|e| format!("upload: {e}"))?;
    let args = input_args(inputs, &tensors);
    let got = match params {
        Some(p) => exec.run_with_params(device, &args, p),
        None => exec.run(device, &args),
    }
    .map_err(|e| format!("run: {e}"))?;
    if got.len() != want.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let g = g.to_host_tensor().map_err(|e| format!("download: {e}"))?;
        compare(&g, w, tol(w.dtype())).map_err(|m| format!("output {i}: {m}"))?;
    }
    Ok(want.len())
}

/// The one kernel the registry plans for the `fusion!`-language `src` on an H100 (no GPU
/// needed) with contiguous tensor inputs of `sizes`, one per tensor input in order
/// (scalar inputs are skipped), and the executor that planned it. Panics when `src` does
/// not build or does not plan as one kernel: tests call it.
pub fn plan_one_kernel(
    src: &str,
    sizes: &[&[i64]],
) -> (crate::FusionExecutorCache, nvfuser_core::codegen::Kernel) {
    use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
    let fusion = nvfuser_core::dsl::build_str(src)
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
        .remove(0)
        .0;
    let shapes: Vec<(nvfuser_core::DataType, &[i64])> = fusion
        .inputs()
        .iter()
        .filter(|&&v| fusion.val(v).is_tensor())
        .zip(sizes)
        .map(|(&v, s)| (fusion.val(v).dtype, *s))
        .collect();
    let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes);
    let exec = crate::FusionExecutorCache::new(fusion);
    let (_, kernel) = exec
        .generate_for(&info, None)
        .unwrap_or_else(|e| panic!("{src}: {e}"));
    let kernel = kernel.unwrap_or_else(|| panic!("{src}: planned as more than one kernel"));
    (exec, kernel)
}
