//! Helpers shared by the GPU test files `gpu_args`, `gpu_runtime`, `gpu_default_movement`
//! and `gpu_default_movement_errors`: the GPU (or a skip), dtype-aware tolerances, inputs
//! (random tensors, integer scalars, in-range index tensors), fusions finished with their
//! output, and a tally of outputs compared with the CPU reference evaluator.
//! (`gpu_ops_more` has its own copy of the same structure.)

#![allow(dead_code)]

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::scheduler::HeuristicParams;
use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue, ValId};
use nvfuser_cuda::testing::require_gpu;
use nvfuser_cuda::{Arg, Device, FusionExecutorCache, Tensor};

/// GPU 0, or `None` (the test is skipped; with `NVFUSER_REQUIRE_GPU=1` it fails).
pub fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// Tolerance for an output. Reductions: the GPU accumulates in f32 serially per thread
/// (then across the block for inner reductions), the CPU reference in f64, so f32 gets
/// rtol/atol 1e-4 (reduced lengths here stay below ~1000); f16/bf16 outputs get two
/// units in the last place. Data movement (slice, reshape, gather) copies values and is
/// exact within these tolerances too. Integers and bools are exact.
pub fn tolerance(dtype: DataType) -> Tolerance {
    match dtype {
        DataType::F32 => Tolerance::new(1e-4, 1e-4),
        DataType::F16 => Tolerance::new(2e-3, 1e-4),
        DataType::BF16 => Tolerance::new(1.6e-2, 1e-3),
        other => Tolerance::for_dtype(other),
    }
}

/// Device copies of the tensor inputs (`None` for scalars).
pub fn upload(device: &Device, inputs: &[EvalInput]) -> Vec<Option<Tensor>> {
    nvfuser_cuda::testing::upload_inputs(device, inputs).unwrap()
}

/// Call arguments: the device tensors, or the scalars.
pub fn args<'a>(inputs: &[EvalInput], tensors: &'a [Option<Tensor>]) -> Vec<Arg<'a>> {
    nvfuser_cuda::testing::input_args(inputs, tensors)
}

/// A tensor input of random values (`HostTensor::random` with `seed`).
pub fn rnd(dtype: DataType, shape: &[usize], seed: u64) -> EvalInput {
    EvalInput::Tensor(HostTensor::random(dtype, shape, seed))
}

/// An integer scalar input.
pub fn int(v: i64) -> EvalInput {
    EvalInput::Scalar(ScalarValue::Int(v))
}

/// An index tensor of `shape` with values in `0..bound` (of dtype i64 or i32).
pub fn indices(dtype: DataType, shape: &[usize], bound: usize, seed: u64) -> EvalInput {
    let n: usize = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let values: Vec<i64> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound.max(1) as u64) as i64
        })
        .collect();
    let t = HostTensor::from_vec(values, shape).unwrap();
    EvalInput::Tensor(if dtype == DataType::I64 {
        t
    } else {
        t.cast(dtype)
    })
}

/// The fusion `fd` defines.
pub fn finish(fd: FusionDefinition) -> Fusion {
    fd.finish().unwrap()
}

/// The fusion `fd` defines, with `y` added as its output.
pub fn out1(mut fd: FusionDefinition, y: ValId) -> Fusion {
    fd.add_output(y).unwrap();
    finish(fd)
}

/// Outputs compared with the CPU reference, mismatches and fusions that did not run.
#[derive(Default)]
pub struct Tally {
    pub compared: usize,
    pub mismatches: Vec<String>,
    pub unsupported: Vec<String>,
}

impl Tally {
    /// Compares GPU outputs `got` with the reference `want`.
    pub fn compare(&mut self, name: &str, got: &[Tensor], want: &[HostTensor]) {
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let g = g.to_host_tensor().unwrap();
            self.compared += 1;
            if let Err(m) = compare(&g, w, tolerance(w.dtype())) {
                self.mismatches.push(format!("{name} output {i}: {m}"));
            }
        }
    }

    /// Runs `fusion` through `exec` on the GPU (with `params`, e.g. the default
    /// schedule, or the registry's choice for `None`) and on the CPU reference, and
    /// compares every output.
    pub fn check_with(
        &mut self,
        device: &Device,
        exec: &FusionExecutorCache,
        name: &str,
        inputs: &[EvalInput],
        params: Option<&HeuristicParams>,
    ) {
        let want = evaluate(exec.fusion(), inputs).unwrap();
        let tensors = upload(device, inputs);
        let call = args(inputs, &tensors);
        let got = match params {
            Some(p) => exec.run_with_params(device, &call, p),
            None => exec.run(device, &call),
        };
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                self.unsupported.push(format!("{name}: {e}"));
                return;
            }
        };
        self.compare(name, &got, &want);
    }

    /// [`Tally::check_with`] with a new executor for `fusion`, the registry's choice.
    pub fn check(&mut self, device: &Device, name: &str, fusion: &Fusion, inputs: &[EvalInput]) {
        let exec = FusionExecutorCache::new(fusion.clone());
        self.check_with(device, &exec, name, inputs, None);
    }

    /// [`Tally::check`] twice: forced onto the default schedule
    /// (`HeuristicParams::Default`), and with the registry's choice (which may be a
    /// tuned scheduler, or the default one again).
    pub fn check_default_and_registry(
        &mut self,
        device: &Device,
        name: &str,
        fusion: &Fusion,
        inputs: &[EvalInput],
    ) {
        let exec = FusionExecutorCache::new(fusion.clone());
        let default = HeuristicParams::Default;
        self.check_with(
            device,
            &exec,
            &format!("{name} (default schedule)"),
            inputs,
            Some(&default),
        );
        let chosen = exec
            .heuristics(device, &args(inputs, &upload(device, inputs)))
            .map(|p| {
                format!("{p:?}")
                    .split(['(', ' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .unwrap_or_else(|e| format!("no scheduler: {e}"));
        self.check_with(
            device,
            &exec,
            &format!("{name} (registry: {chosen})"),
            inputs,
            None,
        );
    }

    /// Prints `<what>: N outputs compared, M mismatches, K not run` and fails on any
    /// mismatch or fusion that did not run.
    pub fn finish(self, what: &str) {
        println!(
            "{what}: {} outputs compared, {} mismatches, {} not run",
            self.compared,
            self.mismatches.len(),
            self.unsupported.len()
        );
        assert!(
            self.mismatches.is_empty() && self.unsupported.is_empty(),
            "{what}: mismatches:\n{}\nnot run:\n{}",
            self.mismatches.join("\n"),
            self.unsupported.join("\n")
        );
        assert!(self.compared > 0);
    }
}
