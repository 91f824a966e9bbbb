//! Training-side fusions as users write them (softmax, LayerNorm and RMSNorm backward with
//! their weight gradients, GELU backward with the bias gradient, softmax of
//! rank-3 scores plus a mask broadcast over the batch, causal softmax, rank-4 attention
//! scores plus a mask) on the GPU against the CPU reference, at odd and even shapes,
//! and the scheduler that planned each: none may fall to the default schedule. Skipped
//! without a GPU, required with `NVFUSER_REQUIRE_GPU=1`.

use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::{require_gpu, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};

use DataType::{BF16, F32};

struct Case {
    name: &'static str,
    src: &'static str,
    /// Input dtypes, and for each shape set the input shapes.
    dtypes: &'static [DataType],
    shapes: &'static [&'static [&'static [usize]]],
}

const CASES: &[Case] = &[
    Case {
        name: "softmax bwd",
        src: "fn f(dy: Tensor<bf16, [N, H]>, y: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
            let y = y as f32;
            let dy = dy as f32;
            ((dy - (dy * y).sum([1], keepdim = true)) * y) as bf16
        }",
        dtypes: &[BF16, BF16],
        shapes: &[
            &[&[1, 8], &[1, 8]],
            &[&[37, 1000], &[37, 1000]],
            &[&[256, 4096], &[256, 4096]],
            &[&[5, 32000], &[5, 32000]],
            &[&[3, 12289], &[3, 12289]],
        ],
    },
    Case {
        name: "rmsnorm bwd dx",
        src: "fn f(dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, rstd: Tensor<f32, [N, 1]>) -> Tensor<bf16, [N, H]> {
            let x = x as f32;
            let g = (dy as f32) * (w as f32);
            let c = (g * x).mean([1], keepdim = true);
            ((g - x * rstd * rstd * c) * rstd) as bf16
        }",
        dtypes: &[BF16, BF16, BF16, F32],
        shapes: &[
            &[&[7, 64], &[7, 64], &[64], &[7, 1]],
            &[&[100, 4096], &[100, 4096], &[4096], &[100, 1]],
            &[&[9, 1000], &[9, 1000], &[1000], &[9, 1]],
        ],
    },
    Case {
        // Segmented (two column sums: the inner-outer kernel measured slower): dx
        // (inner persistent) and dw, db (one outer reduction) each read the inputs.
        name: "layernorm bwd (dx, dw, db)",
        src: nvfuser_core::workloads::LAYER_NORM_BWD,
        dtypes: &[BF16, BF16, BF16, F32, F32],
        shapes: &[
            &[&[1, 8], &[1, 8], &[8], &[1, 1], &[1, 1]],
            &[&[37, 1000], &[37, 1000], &[1000], &[37, 1], &[37, 1]],
            &[&[256, 4096], &[256, 4096], &[4096], &[256, 1], &[256, 1]],
            &[&[3, 12289], &[3, 12289], &[12289], &[3, 1], &[3, 1]],
            &[&[65536, 384], &[65536, 384], &[384], &[65536, 1], &[65536, 1]],
            &[&[1, 4096], &[1, 4096], &[4096], &[1, 1], &[1, 1]],
            &[&[5001, 2050], &[5001, 2050], &[2050], &[5001, 1], &[5001, 1]],
        ],
    },
    Case {
        name: "layernorm bwd with bf16 dw, db",
        src: nvfuser_core::workloads::LAYER_NORM_BWD_BF16_GRADS,
        dtypes: &[BF16, BF16, BF16, F32, F32],
        shapes: &[
            &[&[2048, 1024], &[2048, 1024], &[1024], &[2048, 1], &[2048, 1]],
            &[&[999, 777], &[999, 777], &[777], &[999, 1], &[999, 1]],
        ],
    },
    Case {
        name: "rmsnorm bwd (dx, dw)",
        src: nvfuser_core::workloads::RMS_NORM_BWD,
        dtypes: &[BF16, BF16, BF16, F32],
        shapes: &[
            &[&[7, 64], &[7, 64], &[64], &[7, 1]],
            &[&[1000, 4096], &[1000, 4096], &[4096], &[1000, 1]],
            &[&[65, 1000], &[65, 1000], &[1000], &[65, 1]],
            &[&[131, 16384], &[131, 16384], &[16384], &[131, 1]],
            &[&[20000, 96], &[20000, 96], &[96], &[20000, 1]],
            // One inner-outer persistent kernel (enough rows per block; `nvfuser-core`'s
            // `tests/inner_outer.rs` checks these shapes plan it): dw accumulated
            // across the serial row loop, finished by the cooperative grid all-reduce.
            &[&[40000, 256], &[40000, 256], &[256], &[40000, 1]],
            &[&[36000, 640], &[36000, 640], &[640], &[36000, 1]],
        ],
    },
    Case {
        name: "gelu bwd + bias grad",
        src: nvfuser_core::workloads::GELU_BWD_BIAS,
        dtypes: &[BF16, BF16],
        shapes: &[&[&[1, 8], &[1, 8]], &[&[513, 1000], &[513, 1000]], &[&[64, 4096], &[64, 4096]]],
    },
    Case {
        name: "rank-3 softmax + mask over the batch",
        src: "fn f(s: Tensor<bf16, [B, S, T]>, m: Tensor<f32, [S, T]>) -> Tensor<bf16, [B, S, T]> {
            let x = (s as f32) + m;
            let e = (x - x.max([2], keepdim = true)).exp();
            (e / e.sum([2], keepdim = true)) as bf16
        }",
        dtypes: &[BF16, F32],
        shapes: &[
            &[&[2, 3, 8], &[3, 8]],
            &[&[3, 37, 200], &[37, 200]],
            &[&[4, 64, 1024], &[64, 1024]],
            &[&[1, 5, 77], &[5, 77]],
        ],
    },
    Case {
        name: "causal softmax (tril mask)",
        src: "fn f(s: Tensor<f32, [B, S, S]>) -> Tensor<f32, [B, S, S]> {
            let x = s.tril(0) + (s.triu(1) * 0.0f32 - 1e30f32).triu(1);
            let e = (x - x.max([2], keepdim = true)).exp();
            e / e.sum([2], keepdim = true)
        }",
        dtypes: &[F32],
        shapes: &[&[&[2, 17, 17]], &[&[3, 128, 128]]],
    },
    Case {
        name: "rank-4 scores + mask over batch and heads",
        src: "fn f(s: Tensor<f32, [B, H, S, T]>, m: Tensor<f32, [S, T]>) -> Tensor<f32, [B, H, S, T]> {
            let x = s * 0.125f32 + m;
            let e = (x - x.max([3], keepdim = true)).exp();
            e / e.sum([3], keepdim = true)
        }",
        dtypes: &[F32, F32],
        shapes: &[&[&[2, 3, 5, 64], &[5, 64]], &[&[2, 4, 33, 100], &[33, 100]]],
    },
    Case {
        // Statistics over the rows (an outer Welford split over blocks, finished by the
        // last block), then the normalization as a kernel of its own.
        name: "batch norm fwd, channels-last [N*H*W, C]",
        src: "fn f(x: Tensor<bf16, [M, C]>, w: Tensor<f32, [C]>, b: Tensor<f32, [C]>) -> Tensor<bf16, [M, C]> {
            let x = x as f32;
            let (var, mean) = x.var_mean([0], correction = 0, keepdim = true);
            ((x - mean) * rsqrt(var + 1e-5f32) * w + b) as bf16
        }",
        dtypes: &[BF16, F32, F32],
        shapes: &[
            &[&[4096, 64], &[64], &[64]],
            &[&[3000, 37], &[37], &[37]],
            &[&[7, 5], &[5], &[5]],
            &[&[65536, 256], &[256], &[256]],
        ],
    },
    Case {
        name: "column statistics with an epilogue (mean, unbiased variance, scaled sum)",
        src: "fn f(x: Tensor<f32, [M, C]>) -> (Tensor<f32, [C]>, Tensor<f32, [C]>, Tensor<f32, [C]>) {
            let (var, mean) = x.var_mean([0], correction = 1);
            (mean * 2.0f32, var.sqrt(), x.sum([0]) * 0.5f32 + 1.0f32)
        }",
        dtypes: &[F32],
        shapes: &[&[&[4096, 64]], &[&[1000, 129]], &[&[2, 3]], &[&[20000, 8]]],
    },
    Case {
        // Rows over threadIdx.y and blockIdx.y: block and grid reductions of max, min
        // and mean, with row counts no split divides.
        name: "column max, min and mean of bf16 (rows on threads and blocks)",
        src: "fn f(x: Tensor<bf16, [M, C]>) -> (Tensor<f32, [C]>, Tensor<f32, [C]>, Tensor<f32, [C]>) {
            let x = x as f32;
            (x.max([0]), x.min([0]), x.mean([0]))
        }",
        dtypes: &[BF16],
        shapes: &[&[&[5003, 100]], &[&[777, 33]], &[&[70001, 256]]],
    },
];

fn tolerance(dtype: DataType) -> Tolerance {
    match dtype {
        DataType::F32 => Tolerance::new(2e-4, 2e-4),
        DataType::BF16 => Tolerance::new(1.6e-2, 2e-3),
        other => Tolerance::for_dtype(other),
    }
}

fn fusion(case: &Case) -> nvfuser_core::Fusion {
    match nvfuser_core::dsl::build_str(case.src) {
        Ok(mut f) => f.remove(0).0,
        Err(e) => panic!("{}: {e:?}", case.name),
    }
}

/// The schedulers an H100 plans for these shapes, without a GPU: none is the
/// default schedule (this part runs everywhere).
#[test]
fn training_fusions_plan_tuned_schedulers() {
    for case in CASES {
        let exec = FusionExecutorCache::new(fusion(case));
        for shapes in case.shapes {
            let typed: Vec<(DataType, Vec<i64>)> = case
                .dtypes
                .iter()
                .zip(shapes.iter())
                .map(|(&d, s)| (d, s.iter().map(|&x| x as i64).collect()))
                .collect();
            let refs: Vec<(DataType, &[i64])> =
                typed.iter().map(|(d, s)| (*d, s.as_slice())).collect();
            let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &refs);
            let plan = exec
                .plan_for(&info, None)
                .unwrap_or_else(|e| panic!("{} {shapes:?}: {e}", case.name));
            for s in &plan.segments {
                assert!(
                    s.fallback.is_none() && !s.scheduler.starts_with("default"),
                    "{} {shapes:?}: {} (refused: {}; fallback: {:?})",
                    case.name,
                    s.scheduler,
                    s.refused,
                    s.fallback
                );
            }
        }
    }
}

#[test]
fn training_fusions_match_the_cpu_reference() {
    if require_gpu().is_none() {
        return;
    }
    let device = Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}"));
    let mut compared = 0;
    let mut mismatches = Vec::new();
    let mut seed = 100;
    for case in CASES {
        let exec = FusionExecutorCache::new(fusion(case));
        for shapes in case.shapes {
            let inputs: Vec<EvalInput> = case
                .dtypes
                .iter()
                .zip(shapes.iter())
                .map(|(&d, s)| {
                    seed += 1;
                    EvalInput::Tensor(HostTensor::random(d, s, seed))
                })
                .collect();
            match run_and_compare(&device, &exec, &inputs, None, &tolerance) {
                Ok(n) => compared += n,
                Err(m) => mismatches.push(format!("{} {shapes:?}: {m}", case.name)),
            }
        }
    }
    println!(
        "training fusions: {compared} outputs compared, {} mismatches",
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(compared > 0);
}
