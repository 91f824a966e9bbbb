//! Data movement fused with its math, as users write it: rope's rotate-half (slice,
//! neg, cat) in rank 2 and rank 4, SiLU-mul on the halves of one `[N, 2H]` tensor, a
//! KV-cache append, pads of computed values, gathers and `take_along_axis` of casts
//! (cross-entropy's label logit), an embedding lookup with scaling, and a select of a
//! computed row, and permutes (an attention head split, a rank-4 reversal, a rank-3
//! permute of the innermost dim) of inputs and of computed values. Each plans one tuned kernel for an H100 (never the default schedule;
//! this part runs everywhere), and runs on the GPU against the CPU reference at odd and
//! even shapes, slice starts that allow vectors and ones that do not (skipped without a
//! GPU, required with `NVFUSER_REQUIRE_GPU=1`).

mod common;

use common::indices;
use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::{require_gpu, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};

use DataType::{BF16, F32, I64};

/// One input of a case: random values, or indices in `0..bound`.
#[derive(Clone, Copy)]
enum In {
    Rand(DataType, &'static [usize]),
    Index(&'static [usize], usize),
}

struct Case {
    name: &'static str,
    src: &'static str,
    /// Input sets, each one call.
    calls: &'static [&'static [In]],
}

use In::{Index, Rand};

const CASES: &[Case] = &[
    Case {
        name: "rope rotate-half [N, D]",
        src: "fn f(x: Tensor<bf16, [N, D]>, cos: Tensor<bf16, [N, D]>, sin: Tensor<bf16, [N, D]>) -> Tensor<bf16, [N, D]> {
            let h = x.size(1) / 2;
            let a = x.slice([.., 0..h]);
            let b = x.slice([.., h..]);
            let r = cat([-b, a], 1);
            ((x as f32) * (cos as f32) + (r as f32) * (sin as f32)) as bf16
        }",
        calls: &[
            &[Rand(BF16, &[1000, 128]), Rand(BF16, &[1000, 128]), Rand(BF16, &[1000, 128])],
            &[Rand(BF16, &[7, 6]), Rand(BF16, &[7, 6]), Rand(BF16, &[7, 6])],
            &[Rand(BF16, &[33, 64]), Rand(BF16, &[33, 64]), Rand(BF16, &[33, 64])],
        ],
    },
    Case {
        name: "rope rotate-half [B, S, H, 64] with [S, 64] tables",
        src: "fn f(x: Tensor<f32, [B, S, H, 64]>, cos: Tensor<f32, [S, 64]>, sin: Tensor<f32, [S, 64]>) -> Tensor<f32, [B, S, H, 64]> {
            let r = cat([-x.slice([.., .., .., 32..64]), x.slice([.., .., .., 0..32])], 3);
            x * cos.unsqueeze(1) + r * sin.unsqueeze(1)
        }",
        calls: &[
            &[Rand(F32, &[2, 17, 3, 64]), Rand(F32, &[17, 64]), Rand(F32, &[17, 64])],
            &[Rand(F32, &[1, 128, 8, 64]), Rand(F32, &[128, 64]), Rand(F32, &[128, 64])],
        ],
    },
    Case {
        name: "rope [T, H, 128] bf16 with [T, 128] tables (a cat of slices and a select)",
        src: "fn f(x: Tensor<bf16, [T, H, 128]>, cos: Tensor<bf16, [T, 128]>, sin: Tensor<bf16, [T, 128]>) -> Tensor<bf16, [T, H, 128]> {
            let r = cat([-x.slice([.., .., 64..128]), x.slice([.., .., 0..64])], 2);
            let y = (x as f32) * (cos as f32).unsqueeze(1) + (r as f32) * (sin as f32).unsqueeze(1);
            y as bf16
        }",
        calls: &[
            &[Rand(BF16, &[37, 5, 128]), Rand(BF16, &[37, 128]), Rand(BF16, &[37, 128])],
            &[Rand(BF16, &[256, 8, 128]), Rand(BF16, &[256, 128]), Rand(BF16, &[256, 128])],
        ],
    },
    Case {
        name: "an innermost cat of three pieces of math on slices and an input",
        src: "fn f(x: Tensor<f32, [N, 24]>, y: Tensor<f32, [N, 8]>) -> Tensor<f32, [N, 32]> {
            cat([x.slice([.., 16..24]) * 2.0f32, y.exp(), -x.slice([.., 0..16])], 1) + 1.0f32
        }",
        calls: &[
            &[Rand(F32, &[7, 24]), Rand(F32, &[7, 8])],
            &[Rand(F32, &[1024, 24]), Rand(F32, &[1024, 8])],
        ],
    },
    Case {
        name: "an innermost cat of math on odd slices (no vectors)",
        src: "fn f(x: Tensor<f32, [N, 6]>) -> Tensor<f32, [N, 6]> {
            cat([-x.slice([.., 3..6]), x.slice([.., 0..3]).abs()], 1)
        }",
        calls: &[&[Rand(F32, &[9, 6])], &[Rand(F32, &[500, 6])]],
    },
    Case {
        name: "silu-mul on the halves of [N, 2H]",
        src: "fn f(x: Tensor<bf16, [N, K]>) -> Tensor<bf16, [N, _]> {
            let h = x.size(1) / 2;
            let g = x.slice([.., 0..h]) as f32;
            let u = x.slice([.., h..]) as f32;
            (g.silu() * u) as bf16
        }",
        calls: &[
            &[Rand(BF16, &[64, 8192])],
            &[Rand(BF16, &[37, 2002])],
            &[Rand(BF16, &[5, 2])],
            &[Rand(BF16, &[3, 4098])],
        ],
    },
    Case {
        name: "silu-mul on static halves",
        src: "fn f(x: Tensor<bf16, [N, 2048]>) -> Tensor<bf16, [N, 1024]> {
            let g = x.slice([.., 0..1024]) as f32;
            let u = x.slice([.., 1024..2048]) as f32;
            (g.silu() * u) as bf16
        }",
        calls: &[&[Rand(BF16, &[100, 2048])], &[Rand(BF16, &[1, 2048])]],
    },
    Case {
        name: "kv-cache append",
        src: "fn f(cache: Tensor<bf16, [B, S, D]>, new: Tensor<bf16, [B, 1, D]>) -> Tensor<bf16, [B, _, D]> {
            cat([cache, new], 1)
        }",
        calls: &[
            &[Rand(BF16, &[4, 127, 128]), Rand(BF16, &[4, 1, 128])],
            &[Rand(BF16, &[3, 5, 7]), Rand(BF16, &[3, 1, 7])],
        ],
    },
    Case {
        name: "pad of computed values",
        src: "fn f(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N, _]> {
            (x * 2.0f32).relu().pad([(0, 0), (1, 3)], -1.0f32) + 1.0f32
        }",
        calls: &[&[Rand(F32, &[100, 1020])], &[Rand(F32, &[3, 5])]],
    },
    Case {
        name: "cat of computed halves (neg and exp)",
        src: "fn f(x: Tensor<f32, [N, H]>, y: Tensor<f32, [N, H]>) -> Tensor<f32, [N, _]> {
            cat([-(x * y), y.exp()], 1) * 0.5f32
        }",
        calls: &[
            &[Rand(F32, &[64, 100]), Rand(F32, &[64, 100])],
            &[Rand(F32, &[1, 3]), Rand(F32, &[1, 3])],
        ],
    },
    Case {
        // The squeeze reads the recomputed take_along_axis (a predicate is needed: the
        // first GPU run read labels past the last row).
        name: "label logit of the f32 cast (take_along_axis)",
        src: "fn f(logits: Tensor<bf16, [N, V]>, labels: Tensor<i64, [N, 1]>) -> Tensor<f32, [N]> {
            ((logits as f32).take_along_axis(labels, 1) * -1.0f32).squeeze([1])
        }",
        calls: &[
            &[Rand(BF16, &[64, 32000]), Index(&[64, 1], 32000)],
            &[Rand(BF16, &[3, 7]), Index(&[3, 1], 7)],
        ],
    },
    Case {
        name: "embedding lookup with scaling (index_select)",
        src: "fn f(table: Tensor<bf16, [V, D]>, ids: Tensor<i64, [T]>) -> Tensor<f32, [T, D]> {
            (table as f32).index_select(0, ids) * 8.0f32
        }",
        calls: &[
            &[Rand(BF16, &[1000, 256]), Index(&[77], 1000)],
            &[Rand(BF16, &[5, 3]), Index(&[9], 5)],
        ],
    },
    Case {
        name: "gather of computed values",
        src: "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [N, K]>) -> Tensor<f32, [N, K]> {
            (x.exp() + 1.0f32).gather(1, i)
        }",
        calls: &[
            &[Rand(F32, &[50, 300]), Index(&[50, 20], 300)],
            &[Rand(F32, &[2, 3]), Index(&[2, 5], 3)],
        ],
    },
    Case {
        // Fuzz seed 5100425: the squeeze that reads a recomputed index_select ran
        // without its bounds predicate, so threads past the end read garbage indices.
        name: "squeeze of a recomputed index_select",
        src: "fn f(x: Tensor<f32, [N, 1, D]>, i: Tensor<i64, [K]>) -> Tensor<bool, [K, D]> {
            x.index_select(0, i).isnan().squeeze([1])
        }",
        calls: &[
            &[Rand(F32, &[255, 1, 32]), Index(&[16], 255)],
            &[Rand(F32, &[7, 1, 3]), Index(&[300], 7)],
        ],
    },
    Case {
        // Permutes read their input at the permuted position, in the pointwise kernel
        // (they went to the default schedule, or split the fusion at a computed value).
        name: "attention head split [B, S, H, D] -> [B, H, S, D] of scaled values",
        src: "fn f(x: Tensor<bf16, [B, S, H, D]>) -> Tensor<bf16, [B, H, S, D]> {
            ((x as f32) * 0.125f32).permute([0, 2, 1, 3]) as bf16
        }",
        calls: &[
            &[Rand(BF16, &[2, 128, 8, 64])],
            &[Rand(BF16, &[3, 5, 7, 9])],
        ],
    },
    Case {
        name: "permuted input times an input of the permuted shape",
        src: "fn f(x: Tensor<f32, [B, S, H, D]>, y: Tensor<f32, [B, H, S, D]>) -> Tensor<f32, [B, H, S, D]> {
            x.permute([0, 2, 1, 3]) * y + 1.0f32
        }",
        calls: &[
            &[Rand(F32, &[2, 64, 4, 32]), Rand(F32, &[2, 4, 64, 32])],
            &[Rand(F32, &[1, 3, 2, 5]), Rand(F32, &[1, 2, 3, 5])],
        ],
    },
    Case {
        name: "rank-4 reversal of a computed value",
        src: "fn f(x: Tensor<f32, [A, B, C, D]>) -> Tensor<f32, [D, B, C, A]> {
            let s = x.sigmoid();
            s.permute([3, 1, 2, 0]) * s.permute([3, 1, 2, 0])
        }",
        calls: &[&[Rand(F32, &[63, 5, 62, 3])], &[Rand(F32, &[4, 1, 255, 2])]],
    },
    Case {
        name: "rank-3 permute moving the innermost dim",
        src: "fn f(x: Tensor<f32, [A, B, C]>) -> Tensor<f32, [C, A, B]> {
            x.exp().permute([2, 0, 1]) - 1.0f32
        }",
        calls: &[&[Rand(F32, &[16, 33, 130])], &[Rand(F32, &[1, 2, 3])]],
    },
];

fn tolerance(dtype: DataType) -> Tolerance {
    match dtype {
        DataType::F32 => Tolerance::new(2e-5, 2e-5),
        DataType::BF16 => Tolerance::new(1e-2, 1e-3),
        other => Tolerance::for_dtype(other),
    }
}

fn fusion(case: &Case) -> nvfuser_core::Fusion {
    match nvfuser_core::dsl::build_str(case.src) {
        Ok(mut f) => f.remove(0).0,
        Err(e) => panic!("{}: {e:?}", case.name),
    }
}

fn shape(i: &In) -> (DataType, Vec<i64>) {
    match *i {
        Rand(d, s) => (d, s.iter().map(|&x| x as i64).collect()),
        Index(s, _) => (I64, s.iter().map(|&x| x as i64).collect()),
    }
}

/// Every call of every case plans one kernel of a tuned scheduler for an H100.
#[test]
fn movement_fusions_plan_one_tuned_kernel() {
    for case in CASES {
        let exec = FusionExecutorCache::new(fusion(case));
        for call in case.calls {
            let typed: Vec<(DataType, Vec<i64>)> = call.iter().map(shape).collect();
            let refs: Vec<(DataType, &[i64])> =
                typed.iter().map(|(d, s)| (*d, s.as_slice())).collect();
            let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &refs);
            let plan = exec
                .plan_for(&info, None)
                .unwrap_or_else(|e| panic!("{} {typed:?}: {e}", case.name));
            let kernels: Vec<&str> = plan.segments.iter().map(|s| s.scheduler).collect();
            assert_eq!(kernels.len(), 1, "{} {typed:?}: {kernels:?}", case.name);
            let s = &plan.segments[0];
            assert!(
                s.fallback.is_none() && !s.scheduler.starts_with("default"),
                "{} {typed:?}: {} (refused: {}; fallback: {:?})",
                case.name,
                s.scheduler,
                s.refused,
                s.fallback
            );
        }
    }
}

#[test]
fn movement_fusions_match_the_cpu_reference() {
    if require_gpu().is_none() {
        return;
    }
    let device = Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}"));
    let mut compared = 0;
    let mut mismatches = Vec::new();
    let mut seed = 500;
    for case in CASES {
        let exec = FusionExecutorCache::new(fusion(case));
        for call in case.calls {
            let inputs: Vec<EvalInput> = call
                .iter()
                .map(|i| {
                    seed += 1;
                    match *i {
                        Rand(d, s) => EvalInput::Tensor(HostTensor::random(d, s, seed)),
                        Index(s, bound) => indices(I64, s, bound, seed),
                    }
                })
                .collect();
            match run_and_compare(&device, &exec, &inputs, None, &tolerance) {
                Ok(n) => compared += n,
                Err(m) => mismatches.push(format!("{}: {m}", case.name)),
            }
        }
    }
    println!(
        "movement fusions: {compared} outputs compared, {} mismatches",
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(compared > 0);
}
