//! Coverage of fusions as users write them (the training and data-movement classes the
//! benchmark set does not hold): how an H100 would run each, planned without a GPU by
//! the product's own planner. The table is an insta snapshot: each row says how many
//! kernels a fusion takes, which scheduler plans each, and whether the default schedule
//! (a correctness fallback: a real fusion that reaches it is a coverage bug) is used.
//! Improving a scheduler changes this table visibly in review; every kernel here is
//! NVRTC-compiled for sm_90 (CI installs NVRTC).

use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, FusionExecutorCache, GpuArch};

struct Case {
    name: &'static str,
    src: &'static str,
    shapes: &'static [(DataType, &'static [i64])],
}

use DataType::{Bool as BOOL, BF16, F32, I64};

const CASES: &[Case] = &[
    Case {
        name: "layernorm bwd (dx, dw, db)",
        src: nvfuser_core::workloads::LAYER_NORM_BWD,
        shapes: &[(BF16, &[8192, 4096]), (BF16, &[8192, 4096]), (BF16, &[4096]), (F32, &[8192, 1]), (F32, &[8192, 1])],
    },
    Case {
        name: "rmsnorm bwd (dx only)",
        src: "fn f(dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, rstd: Tensor<f32, [N, 1]>) -> Tensor<bf16, [N, H]> {
            let x = x as f32;
            let g = (dy as f32) * (w as f32);
            let c = (g * x).mean([1], keepdim = true);
            ((g - x * rstd * rstd * c) * rstd) as bf16
        }",
        shapes: &[(BF16, &[8192, 4096]), (BF16, &[8192, 4096]), (BF16, &[4096]), (F32, &[8192, 1])],
    },
    Case {
        name: "softmax bwd",
        src: "fn f(dy: Tensor<bf16, [N, H]>, y: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
            let y = y as f32;
            let dy = dy as f32;
            ((dy - (dy * y).sum([1], keepdim = true)) * y) as bf16
        }",
        shapes: &[(BF16, &[8192, 4096]), (BF16, &[8192, 4096])],
    },
    Case {
        name: "gelu bwd + bias grad",
        src: nvfuser_core::workloads::GELU_BWD_BIAS,
        shapes: &[(BF16, &[8192, 4096]), (BF16, &[8192, 4096])],
    },
    Case {
        name: "batchnorm fwd, channels-last stats",
        src: "fn f(x: Tensor<bf16, [M, C]>, w: Tensor<f32, [C]>, b: Tensor<f32, [C]>) -> Tensor<bf16, [M, C]> {
            let x = x as f32;
            let (var, mean) = x.var_mean([0], correction = 0, keepdim = true);
            ((x - mean) * rsqrt(var + 1e-5f32) * w + b) as bf16
        }",
        shapes: &[(BF16, &[65536, 256]), (F32, &[256]), (F32, &[256])],
    },
    Case {
        name: "rank-3 softmax + mask over the batch",
        src: "fn f(s: Tensor<bf16, [B, S, T]>, m: Tensor<f32, [S, T]>) -> Tensor<bf16, [B, S, T]> {
            let x = (s as f32) + m;
            let e = (x - x.max([2], keepdim = true)).exp();
            (e / e.sum([2], keepdim = true)) as bf16
        }",
        shapes: &[(BF16, &[64, 1024, 1024]), (F32, &[1024, 1024])],
    },
    Case {
        name: "causal softmax (tril mask)",
        src: "fn f(s: Tensor<f32, [B, S, S]>) -> Tensor<f32, [B, S, S]> {
            let x = s.tril(0) + (s.triu(1) * 0.0f32 - 1e30f32).triu(1);
            let e = (x - x.max([2], keepdim = true)).exp();
            e / e.sum([2], keepdim = true)
        }",
        shapes: &[(F32, &[32, 1024, 1024])],
    },
    Case {
        name: "rope rotate-half (slice, neg, cat)",
        src: "fn f(x: Tensor<bf16, [N, 128]>, cos: Tensor<bf16, [N, 128]>, sin: Tensor<bf16, [N, 128]>) -> Tensor<bf16, [N, 128]> {
            let a = x.slice([.., 0..64]);
            let b = x.slice([.., 64..128]);
            let r = cat([-b, a], 1);
            ((x as f32) * (cos as f32) + (r as f32) * (sin as f32)) as bf16
        }",
        shapes: &[(BF16, &[262144, 128]), (BF16, &[262144, 128]), (BF16, &[262144, 128])],
    },
    Case {
        name: "silu-mul on halves of [N, 2H]",
        src: "fn f(x: Tensor<bf16, [N, 8192]>) -> Tensor<bf16, [N, 4096]> {
            let g = x.slice([.., 0..4096]) as f32;
            let u = x.slice([.., 4096..8192]) as f32;
            (g.silu() * u) as bf16
        }",
        shapes: &[(BF16, &[8192, 8192])],
    },
    Case {
        name: "cross-entropy fwd (natural)",
        src: "fn f(logits: Tensor<bf16, [N, V]>, labels: Tensor<i64, [N, 1]>) -> Tensor<f32, [N]> {
            let x = logits as f32;
            let m = x.max([1], keepdim = true);
            let lse = (x - m).exp().sum([1], keepdim = true).log() + m;
            (lse - x.take_along_axis(labels, 1)).squeeze([1])
        }",
        shapes: &[(BF16, &[4096, 32768]), (I64, &[4096, 1])],
    },
    Case {
        name: "dropout + residual + layernorm",
        src: "fn f(x: Tensor<bf16, [N, H]>, res: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, seed: i64, offset: i64) -> Tensor<bf16, [N, H]> {
            let keep = uniform([x.size(0), x.size(1)], 0.0f32, 1.0f32, seed, offset, f32) < 0.9f32;
            let h = where_(keep, (x as f32) / 0.9f32, 0.0f32) + (res as f32);
            let (var, mean) = h.var_mean([1], correction = 0, keepdim = true);
            ((h - mean) * rsqrt(var + 1e-5f32) * (w as f32)) as bf16
        }",
        shapes: &[(BF16, &[8192, 4096]), (BF16, &[8192, 4096]), (BF16, &[4096])],
    },
    Case {
        name: "rank-3 layernorm [B, S, H]",
        src: "fn f(x: Tensor<bf16, [B, S, H]>, w: Tensor<bf16, [H]>) -> Tensor<bf16, [B, S, H]> {
            let x = x as f32;
            let (var, mean) = x.var_mean([2], correction = 0, keepdim = true);
            ((x - mean) * rsqrt(var + 1e-5f32) * (w as f32)) as bf16
        }",
        shapes: &[(BF16, &[16, 2048, 4096]), (BF16, &[4096])],
    },
    Case {
        name: "top-p mask (exclusive cumsum of probabilities)",
        src: "fn f(p: Tensor<f32, [N, V]>) -> Tensor<bool, [N, V]> {
            (p.cumsum(1) - p) > 0.9f32
        }",
        shapes: &[(F32, &[64, 32000])],
    },
    Case {
        name: "positions from a padding mask",
        src: "fn f(mask: Tensor<bool, [B, S]>) -> Tensor<i64, [B, S]> {
            mask.cumsum(1) - 1i64
        }",
        shapes: &[(BOOL, &[32, 4096])],
    },
    Case {
        name: "running sum over time [T, B, H]",
        src: "fn f(x: Tensor<bf16, [T, B, H]>) -> Tensor<bf16, [T, B, H]> {
            ((x as f32).cumsum(0) * 0.5f32) as bf16
        }",
        shapes: &[(BF16, &[2048, 8, 1024])],
    },
];

fn row(case: &Case, compiled: &mut usize) -> String {
    let fusion = match nvfuser_core::dsl::build_str(case.src) {
        Ok(mut f) => f.remove(0).0,
        Err(e) => panic!("{}: {e:?}", case.name),
    };
    // Tensor inputs first, then the scalars (seeds and offsets, given 0).
    let scalars = fusion.inputs().len() - case.shapes.len();
    let mut info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), case.shapes);
    for _ in 0..scalars {
        info.inputs
            .push(nvfuser_core::scheduler::InputInfo::Scalar(0i64.into()));
    }
    let exec = FusionExecutorCache::new(fusion);
    match exec.plan_for(&info, None) {
        Err(e) => format!("| {} | refused: {} |", case.name, one_line(&e.to_string())),
        Ok(plan) => {
            let schedulers: Vec<&str> = plan.segments.iter().map(|s| s.scheduler).collect();
            let default = plan
                .segments
                .iter()
                .filter(|s| s.fallback.is_some() || s.scheduler.starts_with("default"))
                .count();
            if require_nvrtc().is_some() {
                for s in &plan.segments {
                    if let Some(k) = &s.kernel {
                        compile(&k.kernel.cuda_source(), "coverage", GpuArch::SM90)
                            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                        *compiled += 1;
                    }
                }
            }
            let mut row = format!(
                "| {} | {} kernel(s): {} | default schedule: {} |",
                case.name,
                plan.segments.len(),
                schedulers.join(", "),
                default
            );
            // Why each default-scheduled segment got no tuned scheduler: the refusals
            // of the tuned ones (or the tuned schedule's failure), one line each.
            for (k, s) in plan.segments.iter().enumerate() {
                if s.fallback.is_none() && !s.scheduler.starts_with("default") {
                    continue;
                }
                for r in &s.refused.0 {
                    row.push_str(&format!("\n    segment {k}: {}", one_line(&r.to_string())));
                }
                if let Some(why) = &s.fallback {
                    row.push_str(&format!("\n    segment {k}: fallback: {}", one_line(why)));
                }
            }
            row
        }
    }
}

fn one_line(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.len() > 220 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(220).map_or(s.len(), |c| c.0)]
        )
    } else {
        s
    }
}

#[test]
fn user_fusions_on_an_h100() {
    let mut compiled = 0;
    let rows: Vec<String> = CASES.iter().map(|c| row(c, &mut compiled)).collect();
    eprintln!("compiled {compiled} kernels");
    insta::assert_snapshot!(rows.join("\n"));
}
