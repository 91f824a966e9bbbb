//! Snapshots of what the executor plans for every workload fusion and the benchmark's
//! shapes, on a fixed H100 and a fixed A100 (`DeviceInfo::*_for_tests`), without a GPU:
//! the scheduler chosen and why the ones before it refused, its params, the scheduled
//! IR and the kernel (the runtime support preamble left out). A refactor changes no
//! snapshot; an optimization changes them where a reviewer sees it. Update with
//! `INSTA_UPDATE=always cargo test -p nvfuser-cuda --test plan_snapshots`.

use std::sync::{Arc, Mutex};

use nvfuser_core::scheduler::{DeviceInfo, InputInfo, RuntimeInfo, TensorInfo};
use nvfuser_core::workloads::{self, WorkloadInput};
use nvfuser_core::{DataType, Fusion};
use nvfuser_cuda::dump::{Dump, DumpFlags};
use nvfuser_cuda::FusionExecutorCache;

/// Contiguous, 16-byte aligned tensors of these shapes (scalars as given).
fn runtime_info(device: DeviceInfo, inputs: &[WorkloadInput]) -> RuntimeInfo {
    let inputs = inputs
        .iter()
        .map(|i| match i {
            WorkloadInput::Tensor(dtype, shape) => {
                let sizes: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
                let mut strides = vec![1i64; sizes.len()];
                for d in (0..sizes.len().saturating_sub(1)).rev() {
                    strides[d] = strides[d + 1] * sizes[d + 1].max(1);
                }
                InputInfo::Tensor(TensorInfo {
                    dtype: *dtype,
                    sizes,
                    strides,
                    alignment: 16,
                })
            }
            WorkloadInput::Scalar(s) => InputInfo::Scalar(*s),
        })
        .collect();
    RuntimeInfo { device, inputs }
}

/// The executor's dump of planning `fusion` for `info`: scheduler decision, scheduled IR
/// and kernel.
fn plan_text(fusion: Fusion, info: &RuntimeInfo) -> String {
    let buf: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
    let flags = DumpFlags::SCHEDULER | DumpFlags::SCHEDULED | DumpFlags::CUDA;
    let exec = FusionExecutorCache::new(fusion).with_dump(Dump::to_writer(flags, buf.clone()));
    let (params, kernel) = exec
        .generate_for(info, None)
        .unwrap_or_else(|e| panic!("not planned: {e}"));
    assert!(kernel.is_some(), "no kernel for {params:?}");
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    without_preamble(&text)
}

/// `text` with each kernel's runtime support (the same for every kernel) cut out.
fn without_preamble(text: &str) -> String {
    const END: &str = "// ---- end of runtime support ----\n";
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("==== NVFUSER_DUMP cuda:") {
        let header_end = rest[start..]
            .find('\n')
            .map_or(rest.len(), |n| start + n + 1);
        out.push_str(&rest[..header_end]);
        rest = &rest[header_end..];
        match rest.find(END) {
            Some(e) => rest = &rest[e + END.len()..],
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// The benchmark's main shapes (`examples/bench/cases.rs`), per workload.
fn shape_of(name: &str) -> (DataType, usize, usize) {
    match name {
        "gelu_tanh" => (DataType::BF16, 16384, 32768),
        "silu_mul" => (DataType::BF16, 8192, 14336),
        "softmax" | "layer_norm" => (DataType::BF16, 32768, 8192),
        "rms_norm" => (DataType::BF16, 8192, 4096),
        "inner_sum" => (DataType::F32, 32768, 8192),
        "outer_sum" => (DataType::F32, 8192, 32768),
        "transpose" => (DataType::F32, 8192, 8192),
        _ => (DataType::BF16, 8192, 4096),
    }
}

fn snapshot_all(device_name: &str, device: fn() -> DeviceInfo) {
    for &(name, build) in workloads::ALL {
        let (dtype, rows, hidden) = shape_of(name);
        let fusion = build(dtype).unwrap();
        let inputs = workloads::inputs(name, dtype, rows, hidden).unwrap();
        let text = plan_text(fusion, &runtime_info(device(), &inputs));
        insta::assert_snapshot!(format!("{name}_{device_name}"), text);
    }
}

#[test]
fn workloads_on_an_h100() {
    snapshot_all("h100", DeviceInfo::h100_for_tests);
}

#[test]
fn workloads_on_an_a100() {
    snapshot_all("a100", DeviceInfo::a100_for_tests);
}

/// The persistent norms across the benchmark's hidden-size sweep (H100): where the
/// row stops fitting on chip, the plan changes visibly.
#[test]
fn norm_sweep_on_an_h100() {
    for name in ["softmax", "layer_norm", "rms_norm"] {
        for hidden in [1024usize, 32768] {
            let rows = (1usize << 28) / hidden;
            let fusion =
                (workloads::ALL.iter().find(|w| w.0 == name).unwrap().1)(DataType::BF16).unwrap();
            let inputs = workloads::inputs(name, DataType::BF16, rows, hidden).unwrap();
            let text = plan_text(fusion, &runtime_info(DeviceInfo::h100_for_tests(), &inputs));
            insta::assert_snapshot!(format!("{name}_h{hidden}_h100"), text);
        }
    }
}

/// Squeezes moved up to the inputs (read as views with index 0 in the removed dims):
/// pointwise math on a squeezed `[N, 1, H]` input, and a softmax of one.
/// A named `fusion!` source and the shapes of its contiguous inputs.
type Case = (&'static str, &'static str, Vec<(DataType, Vec<usize>)>);

/// Snapshots the plan of each `(name, fusion! source, contiguous input shapes)` on an
/// H100, as `{name}_h100`.
fn snapshot_cases<const N: usize>(cases: [Case; N]) {
    for (name, src, shapes) in cases {
        let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
        let inputs: Vec<WorkloadInput> = shapes
            .into_iter()
            .map(|(d, s)| WorkloadInput::Tensor(d, s))
            .collect();
        let text = plan_text(fusion, &runtime_info(DeviceInfo::h100_for_tests(), &inputs));
        insta::assert_snapshot!(format!("{name}_h100"), text);
    }
}

/// Rows of a vocabulary (32000, not a multiple of the block's threads times the
/// vector): a log-sum-exp (rows only reduced: 512 threads) and a softmax (rows stored),
/// whose bounds checks are per vector, not per element; cross-entropy's backward and a
/// causal softmax, whose `iota`s broadcast along the rows are computed in the kernel.
#[test]
fn vocabulary_rows_on_an_h100() {
    let cases = [
        (
            "logsumexp_vocab",
            r#"
fn k(x: Tensor<bf16, [_, _]>) -> Tensor<f32, [_, 1]> {
    let x = x as f32;
    let m = x.max([1], keepdim = true);
    (x - m).exp().sum([1], keepdim = true).log() + m
}
"#,
            vec![(DataType::BF16, vec![4096, 32000])],
        ),
        (
            "softmax_vocab",
            r#"
fn k(x: Tensor<bf16, [_, _]>) -> Tensor<bf16, [_, _]> {
    let x = x as f32;
    let e = (x - x.max([1], keepdim = true)).exp();
    (e / e.sum([1], keepdim = true)) as bf16
}
"#,
            vec![(DataType::BF16, vec![4096, 32000])],
        ),
        (
            // The one-hot's `iota` broadcast along the rows is folded into an iota in
            // the rows' shape: one persistent kernel, vectors of 8 bf16.
            "cross_entropy_bwd_vocab",
            r#"
fn k(g: Tensor<f32, [_]>, logits: Tensor<bf16, [_, _]>, labels: Tensor<i64, [_, 1]>) -> Tensor<bf16, [_, _]> {
    let x = logits as f32;
    let e = (x - x.max([1], keepdim = true)).exp();
    let p = e / e.sum([1], keepdim = true);
    let col = iota(x.size(1), 0, 1, i64).unsqueeze(0);
    let onehot = (col == labels) as f32;
    ((p - onehot) * g.unsqueeze(1)) as bf16
}
"#,
            vec![
                (DataType::F32, vec![4096]),
                (DataType::BF16, vec![4096, 32000]),
                (DataType::I64, vec![4096, 1]),
            ],
        ),
        (
            // The causal mask of two iotas, broadcast over the batch: computed in the
            // persistent kernel.
            "causal_softmax",
            r#"
fn k(s: Tensor<bf16, [_, _, _]>) -> Tensor<bf16, [_, _, _]> {
    let row = iota(s.size(1), 0, 1, i64).unsqueeze(1);
    let col = iota(s.size(2), 0, 1, i64).unsqueeze(0);
    let x = where_(col <= row, (s as f32) * 0.088388346f32, f32::NEG_INFINITY);
    let e = (x - x.max([2], keepdim = true)).exp();
    (e / e.sum([2], keepdim = true)) as bf16
}
"#,
            vec![(DataType::BF16, vec![32, 2048, 2048])],
        ),
    ];
    snapshot_cases(cases);
}

#[test]
fn squeezed_inputs_on_an_h100() {
    let cases = [
        (
            "squeeze_pointwise",
            r#"
fn k(x: Tensor<bf16, [_, 1, _]>, y: Tensor<bf16, [1, 1, _]>) -> Tensor<bf16, [_, _]> {
    let s = (x as f32).relu() + (y as f32);
    s.squeeze([1]) as bf16
}
"#,
            vec![
                (DataType::BF16, vec![8192, 1, 4096]),
                (DataType::BF16, vec![1, 1, 4096]),
            ],
        ),
        (
            "squeeze_softmax",
            r#"
fn k(x: Tensor<bf16, [_, 1, _]>) -> Tensor<bf16, [_, _]> {
    let s = (x as f32).squeeze([1]);
    let e = (s - s.max([1], keepdim = true)).exp();
    (e / e.sum([1], keepdim = true)) as bf16
}
"#,
            vec![(DataType::BF16, vec![8192, 1, 4096])],
        ),
    ];
    snapshot_cases(cases);
}

/// Training-side normalizations (H100): softmax backward (its casts kept in
/// registers across the reduction, the producers of each pulled to it by the
/// lowering's emission order), RMSNorm backward's dx, and softmax of `[B, S, T]`
/// scores plus a `[S, T]` mask (rows split: `S` on `blockIdx.x`, `B` on `blockIdx.y`),
/// GELU backward with its bias gradient (an outer reduction of one loop nest, dx
/// stored inside the sum's loops) and LayerNorm backward's dw and db (two nests).
#[test]
fn training_kernels_on_an_h100() {
    let cases = [
        (
            "softmax_bwd",
            r#"
fn k(dy: Tensor<bf16, [_, _]>, y: Tensor<bf16, [_, _]>) -> Tensor<bf16, [_, _]> {
    let y = y as f32;
    let dy = dy as f32;
    ((dy - (dy * y).sum([1], keepdim = true)) * y) as bf16
}
"#,
            vec![
                (DataType::BF16, vec![8192, 4096]),
                (DataType::BF16, vec![8192, 4096]),
            ],
        ),
        (
            "rms_norm_bwd_dx",
            r#"
fn k(dy: Tensor<bf16, [_, _]>, x: Tensor<bf16, [_, _]>, w: Tensor<bf16, [_]>, rstd: Tensor<f32, [_, 1]>) -> Tensor<bf16, [_, _]> {
    let x = x as f32;
    let g = (dy as f32) * (w as f32);
    let c = (g * x).mean([1], keepdim = true);
    ((g - x * rstd * rstd * c) * rstd) as bf16
}
"#,
            vec![
                (DataType::BF16, vec![8192, 4096]),
                (DataType::BF16, vec![8192, 4096]),
                (DataType::BF16, vec![4096]),
                (DataType::F32, vec![8192, 1]),
            ],
        ),
        (
            "masked_softmax_rank3",
            r#"
fn k(s: Tensor<bf16, [_, _, _]>, m: Tensor<f32, [_, _]>) -> Tensor<bf16, [_, _, _]> {
    let x = (s as f32) + m;
    let e = (x - x.max([2], keepdim = true)).exp();
    (e / e.sum([2], keepdim = true)) as bf16
}
"#,
            vec![
                (DataType::BF16, vec![64, 1024, 1024]),
                (DataType::F32, vec![1024, 1024]),
            ],
        ),
        (
            // One loop nest: the dx store runs in the bias gradient's loops
            // (compute_with), dx computed once per element from 16-byte loads, stored
            // with a vector and accumulated from the same registers.
            "gelu_bwd_bias",
            r#"
fn k(dy: Tensor<bf16, [_, _]>, x: Tensor<bf16, [_, _]>) -> (Tensor<bf16, [_, _]>, Tensor<bf16, [_]>) {
    let x = x as f32;
    let cdf = 0.5f32 * (1.0f32 + (x * 0.70710678f32).erf());
    let pdf = (x * x * -0.5f32).exp() * 0.39894228f32;
    let dx = (dy as f32) * (cdf + x * pdf);
    (dx as bf16, dx.sum([0]) as bf16)
}
"#,
            vec![
                (DataType::BF16, vec![8192, 16384]),
                (DataType::BF16, vec![8192, 16384]),
            ],
        ),
        (
            // LayerNorm backward's dw and db (its second segment): two column sums,
            // each nest with its own batched loads.
            "layer_norm_bwd_dw_db",
            r#"
fn k(dy: Tensor<bf16, [_, _]>, x: Tensor<bf16, [_, _]>, mean: Tensor<f32, [_, 1]>, rstd: Tensor<f32, [_, 1]>) -> (Tensor<bf16, [_]>, Tensor<bf16, [_]>) {
    let dy = dy as f32;
    let xhat = ((x as f32) - mean) * rstd;
    ((dy * xhat).sum([0]) as bf16, dy.sum([0]) as bf16)
}
"#,
            vec![
                (DataType::BF16, vec![8192, 4096]),
                (DataType::BF16, vec![8192, 4096]),
                (DataType::F32, vec![8192, 1]),
                (DataType::F32, vec![8192, 1]),
            ],
        ),
    ];
    snapshot_cases(cases);
}

/// Data movement fused with its math (H100): rope's rotate-half (the `neg` and both
/// slices recomputed inside the `cat`, `x`, `cos`, `sin` loaded with vectors), SiLU-mul
/// on the halves of one `[N, 2H]` tensor (each half loaded with vectors through its
/// slice), a KV-cache append (a `cat` of the cache and the new step's keys along the
/// sequence), a pad of computed values, a gather of a cast (recomputed at the gathered
/// index), and a squeeze of such a gather (the squeeze reads it under its own bounds
/// predicate).
#[test]
fn movement_kernels_on_an_h100() {
    let cases = [
        (
            "rope_rotate_half",
            r#"
fn k(x: Tensor<bf16, [_, 128]>, cos: Tensor<bf16, [_, 128]>, sin: Tensor<bf16, [_, 128]>) -> Tensor<bf16, [_, 128]> {
    let a = x.slice([.., 0..64]);
    let b = x.slice([.., 64..128]);
    let r = cat([-b, a], 1);
    ((x as f32) * (cos as f32) + (r as f32) * (sin as f32)) as bf16
}
"#,
            vec![
                (DataType::BF16, vec![262144, 128]),
                (DataType::BF16, vec![262144, 128]),
                (DataType::BF16, vec![262144, 128]),
            ],
        ),
        (
            "silu_mul_halves",
            r#"
fn k(x: Tensor<bf16, [_, 8192]>) -> Tensor<bf16, [_, 4096]> {
    let g = x.slice([.., 0..4096]) as f32;
    let u = x.slice([.., 4096..8192]) as f32;
    (g.silu() * u) as bf16
}
"#,
            vec![(DataType::BF16, vec![8192, 8192])],
        ),
        (
            "rope_heads_tables",
            r#"
fn k(x: Tensor<bf16, [_, _, 128]>, cos: Tensor<bf16, [_, 128]>, sin: Tensor<bf16, [_, 128]>) -> Tensor<bf16, [_, _, 128]> {
    let r = cat([-x.slice([.., .., 64..128]), x.slice([.., .., 0..64])], 2);
    let y = (x as f32) * (cos as f32).unsqueeze(1) + (r as f32) * (sin as f32).unsqueeze(1);
    y as bf16
}
"#,
            vec![
                (DataType::BF16, vec![16384, 32, 128]),
                (DataType::BF16, vec![16384, 128]),
                (DataType::BF16, vec![16384, 128]),
            ],
        ),
        (
            "embedding_scaled",
            r#"
fn k(table: Tensor<bf16, [_, _]>, ids: Tensor<i64, [_]>) -> Tensor<bf16, [_, _]> {
    (table.index_select(0, ids) as f32 * 64.0f32) as bf16
}
"#,
            vec![
                (DataType::BF16, vec![32000, 4096]),
                (DataType::I64, vec![8192]),
            ],
        ),
        (
            "kv_cache_append",
            r#"
fn k(cache: Tensor<bf16, [_, _, _]>, new: Tensor<bf16, [_, 1, _]>) -> Tensor<bf16, [_, _, _]> {
    cat([cache, new], 1)
}
"#,
            vec![
                (DataType::BF16, vec![32, 1023, 128]),
                (DataType::BF16, vec![32, 1, 128]),
            ],
        ),
        (
            "pad_of_computed",
            r#"
fn k(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> {
    (x * 2.0f32).relu().pad([(0, 0), (1, 3)], -1.0f32) + 1.0f32
}
"#,
            vec![(DataType::F32, vec![1024, 1020])],
        ),
        (
            "gather_of_cast",
            r#"
fn k(x: Tensor<bf16, [_, _]>, i: Tensor<i64, [_, 1]>) -> Tensor<f32, [_, 1]> {
    (x as f32).take_along_axis(i, 1) * 2.0f32
}
"#,
            vec![
                (DataType::BF16, vec![4096, 32000]),
                (DataType::I64, vec![4096, 1]),
            ],
        ),
        (
            "label_logit_squeezed",
            r#"
fn k(logits: Tensor<bf16, [_, _]>, labels: Tensor<i64, [_, 1]>) -> Tensor<f32, [_]> {
    ((logits as f32).take_along_axis(labels, 1) * -1.0f32).squeeze([1])
}
"#,
            vec![
                (DataType::BF16, vec![4095, 32000]),
                (DataType::I64, vec![4095, 1]),
            ],
        ),
        (
            // A permute read at the permuted position by the pointwise kernel.
            "head_split",
            r#"
fn k(x: Tensor<bf16, [_, _, _, 128]>) -> Tensor<bf16, [_, _, _, 128]> {
    ((x as f32) * 0.088388346f32).permute([0, 2, 1, 3]) as bf16
}
"#,
            vec![(DataType::BF16, vec![4, 4096, 32, 128])],
        ),
        (
            // Reduced without its size-1 dim (`squeeze_reduction_broadcasts`).
            "middle_sum_beside_size_one",
            r#"
fn k(x: Tensor<bf16, [_, _, 1]>) -> Tensor<f32, [_, 1]> {
    (x as f32).sum([1])
}
"#,
            vec![(DataType::BF16, vec![4096, 4096, 1])],
        ),
    ];
    snapshot_cases(cases);
}

/// Whole execution plans as `NVFUSER_DUMP=plan` prints them (H100): a fusion whose
/// kernel reads a size computed on the host (the host scalar program, one segment), and
/// fusions that run as segments (a forced boundary; a softmax beside a column sum of
/// its input), with their value maps.
#[test]
fn execution_plans_on_an_h100() {
    let cases = [
        (
            "plan_host_scalars",
            r#"
fn k(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> {
    let r = x.reshape([x.size(0) * 2, x.size(1) / 2]);
    r.relu()
}
"#,
            vec![(DataType::F32, vec![4096, 1024])],
        ),
        (
            "plan_forced_boundary",
            r#"
fn k(x: Tensor<bf16, [_, _]>) -> Tensor<f32, [_]> {
    let y = ((x as f32) * 2.0f32).segment_set();
    y.sum([1])
}
"#,
            vec![(DataType::BF16, vec![8192, 4096])],
        ),
        (
            "plan_two_reductions",
            r#"
fn k(x: Tensor<f32, [_, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_]>) {
    let e = (x - x.max([1], keepdim = true)).exp();
    (e / e.sum([1], keepdim = true), x.sum([0]))
}
"#,
            vec![(DataType::F32, vec![2048, 1024])],
        ),
        (
            // The gather reads a private copy of the f32 cast, recomputed from the bf16
            // logits: no segment writes the cast out.
            "plan_cross_entropy",
            r#"
fn k(logits: Tensor<bf16, [_, _]>, labels: Tensor<i64, [_, 1]>) -> Tensor<f32, [_]> {
    let x = logits as f32;
    let m = x.max([1], keepdim = true);
    let lse = (x - m).exp().sum([1], keepdim = true).log() + m;
    (lse - x.take_along_axis(labels, 1)).squeeze([1])
}
"#,
            vec![
                (DataType::BF16, vec![4096, 32000]),
                (DataType::I64, vec![4096, 1]),
            ],
        ),
        (
            // Statistics by an outer Welford over rows on threadIdx.y and blockIdx.y
            // (196 partials per column, combined by 8 rows of threads), then the
            // normalization as a pointwise kernel.
            "plan_batch_norm_nhwc",
            r#"
fn k(x: Tensor<bf16, [_, _]>, w: Tensor<f32, [_]>, b: Tensor<f32, [_]>) -> Tensor<bf16, [_, _]> {
    let x = x as f32;
    let (var, mean) = x.var_mean([0], correction = 0, keepdim = true);
    ((x - mean) * rsqrt(var + 1e-5f32) * w + b) as bf16
}
"#,
            vec![
                (DataType::BF16, vec![100352, 256]),
                (DataType::F32, vec![256]),
                (DataType::F32, vec![256]),
            ],
        ),
        (
            // Segmented: each segment recomputes xhat and g from the inputs (private
            // copies), dx in an inner persistent kernel, dw and db in one outer
            // reduction (input-sibling merge): no [N, H] tensor crosses.
            "plan_layer_norm_bwd",
            nvfuser_core::workloads::LAYER_NORM_BWD_BF16_GRADS,
            vec![
                (DataType::BF16, vec![8192, 4096]),
                (DataType::BF16, vec![8192, 4096]),
                (DataType::BF16, vec![4096]),
                (DataType::F32, vec![8192, 1]),
                (DataType::F32, vec![8192, 1]),
            ],
        ),
        (
            // One inner-outer persistent kernel: dx with the row in registers, dw's
            // accumulators kept across the serial row loop (compute_with) and finished
            // by the grid all-reduce; launched cooperatively.
            "plan_rms_norm_bwd_inner_outer",
            nvfuser_core::workloads::RMS_NORM_BWD,
            vec![
                (DataType::BF16, vec![65536, 4096]),
                (DataType::BF16, vec![65536, 4096]),
                (DataType::BF16, vec![4096]),
                (DataType::F32, vec![65536, 1]),
            ],
        ),
    ];
    for (name, src, shapes) in cases {
        let fusion = nvfuser_core::dsl::build_str(src)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
            .remove(0)
            .0;
        let inputs: Vec<WorkloadInput> = shapes
            .into_iter()
            .map(|(d, s)| WorkloadInput::Tensor(d, s))
            .collect();
        let exec = FusionExecutorCache::new(fusion);
        let plan = exec
            .plan_for(&runtime_info(DeviceInfo::h100_for_tests(), &inputs), None)
            .unwrap_or_else(|e| panic!("{name}: not planned: {e}"));
        insta::assert_snapshot!(format!("{name}_h100"), plan.to_string());
    }
}

/// A chain of reshapes under a `where` that reads it three times (GPU fuzz seed 6308007):
/// each reshape copies the index below it twice, and the `where` copies everything three
/// times. Inline, one statement was 2 MB of CUDA and NVRTC took minutes; with the large
/// index math bound to named constants (`kir::bind`) the whole plan stays small.
#[test]
fn reshape_chains_read_three_times_give_small_kernels() {
    let src = r#"
fn k(t0: Tensor<bf16, [_, _, _, _]>) -> Tensor<bool, [2, _, _, _, _]> {
    let t6 = t0.isfinite();
    let t11 = t6.reshape([t6.size(0), t6.size(1), t6.size(2), 2, -1]);
    let t16 = t11.reshape([2, -1, t11.size(1), t11.size(2), t11.size(3), t11.size(4)]);
    let t19 = where_(t16, t16, t16);
    t19.reshape([t19.size(0), t19.size(1), t19.size(2), t19.size(3), -1])
}
"#;
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let inputs = [WorkloadInput::Tensor(DataType::BF16, vec![8, 256, 4, 250])];
    let text = plan_text(fusion, &runtime_info(DeviceInfo::h100_for_tests(), &inputs));
    assert!(
        text.len() < 200_000,
        "the plan's CUDA is {} bytes",
        text.len()
    );
    assert!(text.contains("const nvfuser_index_t nvf_ix0 = "), "{text}");
}
