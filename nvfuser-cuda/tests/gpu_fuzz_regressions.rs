//! GPU fuzz regressions run against the CPU reference (skipped without a GPU).

use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_cuda::testing::{require_gpu, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};

/// Seed 5405: a full reduction of `[T0.size(0), 256]` beside a pointwise output in the
/// inner persistent scheduler; the pointwise output had `T0.size(0) * 256` rows.
#[test]
fn persistent_full_reduction_with_pointwise_output() {
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    let fusion = nvfuser_core::dsl::build_str(
        r#"
fn fuzz_case(t0: Tensor<f64, [_, 256]>) -> (Tensor<f64, [1, 1]>, Tensor<f64, [_, 256]>) {
    let t1 = t0.atan();
    let t2 = t1.reshape([-1]);
    let t3 = t0.min([0, 1]);
    let t4 = t3.broadcast([true, true]);
    (t4, t1)
}
"#,
    )
    .unwrap()
    .remove(0)
    .0;
    let exec = FusionExecutorCache::new(fusion);
    for rows in [1usize, 2, 5] {
        let values: Vec<f64> = (0..rows * 256)
            .map(|i| ((i * 37) % 101) as f64 - 50.0)
            .collect();
        let input: EvalInput = HostTensor::from_vec(values, &[rows, 256]).unwrap().into();
        run_and_compare(&dev, &exec, &[input], None, &Tolerance::for_dtype)
            .unwrap_or_else(|e| panic!("rows {rows}: {e}"));
    }
}

fn fusion_of(src: &str) -> nvfuser_core::ir::Fusion {
    nvfuser_core::dsl::build_str(src).unwrap().remove(0).0
}

/// Runs `src` on random inputs of `shapes` (one call per shape list) and compares every
/// output with the CPU reference.
fn check_calls(src: &str, calls: &[&[&[usize]]]) {
    check_calls_with(src, calls, &Tolerance::for_dtype)
}

/// [`check_calls`] with tolerance `tol` per output dtype (an f64 output computed from
/// f32 math compares at the f32 tolerance, as the fuzzer's rule).
fn check_calls_with(
    src: &str,
    calls: &[&[&[usize]]],
    tol: &dyn Fn(nvfuser_core::DataType) -> Tolerance,
) {
    // Parsed first, so that a machine without a GPU still checks the source.
    let fusion = fusion_of(src);
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    let exec = FusionExecutorCache::new(fusion.clone());
    for (c, shapes) in calls.iter().enumerate() {
        let inputs: Vec<EvalInput> = fusion
            .inputs()
            .iter()
            .zip(shapes.iter())
            .enumerate()
            .map(|(i, (&v, s))| {
                HostTensor::random(fusion.val(v).dtype, s, 17 + 31 * i as u64 + c as u64).into()
            })
            .collect();
        run_and_compare(&dev, &exec, &inputs, None, tol)
            .unwrap_or_else(|e| panic!("call {c} {shapes:?}: {e}"));
    }
}

/// Seed 9080: an output broadcast along the reference's inner dim (`silu` of a
/// `[1, 1]` input) read by the wider output: thread 0 stored it and the other warps
/// read it back from global memory before the store (only the first 32 values were
/// right). Readers now take a register copy (`cache_fork`).
#[test]
fn broadcast_output_read_by_a_wider_output() {
    check_calls(
        r#"
fn k(t1: Tensor<f32, [_]>, t2: Tensor<f64, [1, 1]>) -> (Tensor<f64, [1, _]>, Tensor<f64, [1, 1]>) {
    let t4 = t1.abs();
    let t5 = t2.silu();
    let t6 = t4.broadcast([true, false]);
    let t7 = t6 * t5;
    (t7, t5)
}
"#,
        &[&[&[128], &[1, 1]], &[&[1000], &[1, 1]], &[&[4096], &[1, 1]]],
    );
}

/// GPU fuzz seed 10603257 (refused, not wrong): a broadcast `[A, 1, C, 1]` of a
/// `[A, C]` input read by a full output (`x + t`) and by an output of its own shape.
/// Shared by readers with different loops, the broadcast could only be computed in
/// the loops they share, over its symbolic dims ("T6 in Local memory spans loop axis
/// 0 of symbolic extent"); now each reader gets its own copy (`broadcast_per_reader`).
#[test]
fn broadcast_read_by_outputs_of_two_shapes() {
    check_calls(
        r#"
fn k(x: Tensor<f32, [_, _, _, _]>, t: Tensor<f32, [_, _]>) -> (Tensor<f32, [_, _, _, _]>, Tensor<f32, [_, 1, _, 1]>) {
    let b = t.broadcast([false, true, false, true]);
    (x + b, b * 2.0)
}
"#,
        &[&[&[31, 2, 128, 256], &[31, 128]], &[&[3, 5, 7, 9], &[3, 7]]],
    );
}

/// GPU fuzz seed 10603824 (refused, not wrong): a mask from two `iota`s broadcast to
/// the rows `[4, X]` of a variance over the last dim of `[4, X, 8]`. The streaming
/// reduction bound `blockIdx.x` to `X` for the mask and to `4 * X` for the rows; per-row
/// tensors that mix broadcast and row dims now split the rows (`split_rows`).
#[test]
fn iota_masks_beside_a_rank_3_variance() {
    check_calls(
        nvfuser_core::testing::FUZZ_IOTA_MASK_BESIDE_ROW_VARIANCE,
        &[&[&[8, 16]], &[&[128, 16]], &[&[1000, 16]]],
    );
}

/// GPU fuzz seed 10604126 (refused, not wrong): an `iota` mask beside the `[B, C]`
/// result of a Welford over dim 0; the outer reduction merged the mask's kept dims into
/// another extent than the columns'. Such per-column tensors now go to a segment of
/// their own (`Unfit::MixedKeptBroadcast`).
#[test]
fn iota_masks_beside_a_rank_3_column_welford() {
    check_calls(
        nvfuser_core::testing::FUZZ_IOTA_MASK_BESIDE_COLUMN_WELFORD,
        &[&[&[7, 31, 17]], &[&[31, 31, 100]]],
    );
}

/// Seed 21616: an output read back by another output of the same pointwise kernel while
/// its vector store was deferred past the math. Such outputs are now stored where they
/// are computed.
#[test]
fn output_read_back_before_its_vector_store() {
    check_calls(
        r#"
fn k(t0: Tensor<bf16, [_]>) -> (Tensor<bf16, [_]>, Tensor<bf16, [_]>) {
    let t1 = t0.isnan();
    let t2 = t0.erfc();
    let t3 = where_(t1, t0, t2);
    (t2, t3)
}
"#,
        &[&[&[100]], &[&[4096]], &[&[1 << 20]]],
    );
}

/// Seed 7976: an `i32` tensor meeting `f16` math is rounded to `f16` first (2049
/// becomes 2048), as the evaluator's spec and PyTorch say.
#[test]
fn int_tensor_in_half_math_rounds_to_half() {
    check_calls(
        r#"
fn k(t0: Tensor<f16, [_, _]>) -> Tensor<f16, [_, _]> {
    let s2 = t0.size(1);
    let t5 = iota(s2, 100, 1, i32);
    let t6 = t5.broadcast([true, false]);
    let t7 = t6.maximum(t0);
    let t13 = t7 - t6;
    t13
}
"#,
        &[&[&[1, 2048]], &[&[3, 4096]]],
    );
}

/// Seed 14490: two outputs whose dims are unrelated (`[4, 128, 1]` and `[100, 4, 128]`)
/// were scheduled as one pointwise kernel over the second's loops. Pointwise now
/// requires every dim to be exactly mapped to the reference's.
#[test]
fn outputs_of_unrelated_shapes() {
    check_calls(
        r#"
fn k(t1: Tensor<i64, [_, _]>, t2: Tensor<f64, [_, _, _]>) -> (Tensor<f64, [_, _, _]>, Tensor<i64, [_, _, 1]>) {
    let t3 = t1.broadcast([false, false, true]);
    let t12 = t2.relu();
    (t12, t3)
}
"#,
        &[&[&[4, 128], &[100, 4, 128]], &[&[1, 2], &[1, 1, 2]]],
    );
}

/// Seed 3772: the widest output is empty (a `[0, 2]` expand) beside a non-empty output
/// broadcast along the empty dim: the kernel's loops covered nothing. Such calls now run
/// on the reference (`EmptyLaunch`).
#[test]
fn empty_widest_output_beside_a_non_empty_one() {
    check_calls(
        r#"
fn k(t0: Tensor<f16, [1, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [1, _]>) {
    let t2 = t0.slice([1.., ..]);
    let t3 = t0 as f32;
    let s6 = t2.size(0);
    let t7 = t3.expand([s6, -1]);
    (t7, t3)
}
"#,
        &[&[&[1, 2]], &[&[1, 1024]]],
    );
}

/// Seed 9648: a reshape to sizes of another element count that only the fusion's scalar
/// math reads (`iota` over its size). The reference refuses it; so must the GPU (the
/// checks of data-dependent reads now run on the whole fusion before any kernel).
#[test]
fn reshape_read_only_through_its_size_is_checked() {
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    let fusion = fusion_of(
        r#"
fn k(t0: Tensor<f64, [_, _, _]>) -> Tensor<i64, [_]> {
    let s5 = t0.size(0);
    let s6 = t0.size(2);
    let t7 = t0.reshape([s5, 2, -1, s6]);
    let s9 = t7.size(1);
    let t12 = iota(s9, 100, 1, i64);
    t12
}
"#,
    );
    let exec = FusionExecutorCache::new(fusion.clone());
    let input: EvalInput = HostTensor::random(nvfuser_core::DataType::F64, &[1, 1, 1], 3).into();
    assert!(nvfuser_core::eval::evaluate(&fusion, std::slice::from_ref(&input)).is_err());
    let tensors = nvfuser_cuda::testing::upload_inputs(&dev, std::slice::from_ref(&input)).unwrap();
    let args = nvfuser_cuda::testing::input_args(std::slice::from_ref(&input), &tensors);
    match exec.run(&dev, &args) {
        Ok(_) => panic!("the GPU ran a reshape the reference refuses"),
        Err(e) => assert!(e.to_string().contains("reshape"), "{e}"),
    }
    // A valid call still runs.
    let ok: EvalInput = HostTensor::random(nvfuser_core::DataType::F64, &[3, 4, 5], 4).into();
    run_and_compare(&dev, &exec, &[ok], None, &Tolerance::for_dtype).unwrap();
}

/// Fuzz seed 516791: a `[2, 1]` input broadcast into the merged kept loop (`2 * N`) of an
/// outer reduction was read by row `i` instead of `i / N` (7,365 of 8,192 values wrong).
#[test]
fn broadcast_merged_into_an_outer_reduction_loop() {
    check_calls(
        nvfuser_core::testing::FUZZ_BROADCAST_IN_KEPT_LOOP,
        &[
            &[&[2, 1], &[1, 2, 4096]],
            &[&[2, 1], &[1, 2, 31]],
            &[&[2, 1], &[1, 2, 1000]],
        ],
    );
}

/// Fuzz seed 510836: a `[3, 1, 5]` input in a product over dims 0 and 1 of `[3, N, 5]`,
/// merged into one loop of `3 * N`: its register copy held 3 values, read at the merged
/// index (one factor in `N` wrong, 4 of 5 values off).
#[test]
fn broadcast_in_a_merged_reduction_loop() {
    check_calls(
        nvfuser_core::testing::FUZZ_BROADCAST_IN_REDUCTION_LOOP,
        &[
            &[&[3, 2, 5], &[3, 1, 5]],
            &[&[3, 32, 5], &[3, 1, 5]],
            &[&[3, 1, 5], &[3, 1, 5]],
        ],
    );
}

/// Fuzz seed 504258: an expanded output read back by the kernel at element 0 of its
/// expanded dim (stored by another thread: 889 of 70,000 values wrong).
#[test]
fn expanded_output_read_back_by_its_kernel() {
    check_calls(
        nvfuser_core::testing::FUZZ_EXPANDED_OUTPUT_READ_BACK,
        &[
            &[&[7, 100, 100], &[7, 100, 1]],
            &[&[7, 1, 17], &[7, 1, 1]],
            &[&[7, 3, 128], &[7, 3, 1]],
        ],
    );
}

/// Fuzz seeds 711301 and 701852: `uniform([a, b, c, 1])` broadcast against a `[.., 17]`
/// tensor drew every value from the wrong place of the random stream (the broadcast dim
/// counted 17 in the stream's index).
#[test]
fn uniform_with_a_broadcast_dim() {
    check_calls(
        r#"
fn k(t0: Tensor<i64, [_, _, _, 17]>, t1: Tensor<f64, [_, _, _, 4]>) -> (Tensor<f64, [_, _, _, 17]>, Tensor<bool, [_, _, _, 4]>) {
    let s5 = t0.size(0);
    let s6 = t0.size(1);
    let s7 = t0.size(2);
    let t12 = uniform([s5, s6, s7, 1], -1.0, 1.0, 792, 0, f64);
    let t13 = t0 * t12;
    let t14 = t12 < t1;
    (t13, t14)
}
"#,
        &[
            &[&[2, 64, 16, 17], &[2, 64, 16, 4]],
            &[&[1, 5, 3, 17], &[1, 5, 3, 4]],
        ],
    );
}

/// Fuzz seed 502822: `where(t0, t2, t4)` with `t4` an output the kernel stored just
/// before. NVRTC merged the two loads into one read-only load of the selected address,
/// issued before the store: the second call read the previous call's bytes (6,654 of
/// 14,336 values wrong; compute-sanitizer initcheck: uninitialized global reads). The
/// read-back is now a volatile load (`nvf_load_volatile`).
#[test]
fn output_read_back_in_a_select_sees_its_store() {
    check_calls(
        r#"
fn k(t0: Tensor<bool, [_, 2048]>, t2: Tensor<i32, [2048]>) -> (Tensor<i64, [_, 2048]>, Tensor<i32, [_, 2048]>) {
    let t4 = t0 as i32;
    let t6 = t2.broadcast([true, false]);
    let t7 = where_(t0, t6, t4);
    let t8 = t2 as i64;
    let t9 = t8.sum([0]);
    let t10 = t9.broadcast([true]);
    let t11 = t10.broadcast([true, false]);
    let t12 = t11 ^ t7;
    (t12, t4)
}
"#,
        &[
            &[&[128, 2048], &[2048]],
            &[&[7, 2048], &[2048]],
            &[&[2, 2048], &[2048]],
        ],
    );
}

/// Fuzz seed 1009234: the variance (correction 1) of a scaled input over a dim of size
/// 1 is 0/0 = NaN. With multiply-add contraction on, NVRTC folded `x - avg` in the
/// Welford update into `fma(t, s, -avg)`: `m2` became the product's rounding error and
/// every row came out ±inf (then clamped to a bound). Kernels are now compiled with
/// `--fmad=false`. The other shapes check the ordinary rows of the same kernel.
#[test]
fn variance_of_one_element_is_nan() {
    check_calls(
        r#"
fn k(t1: Tensor<f32, [_, _, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_, _]>) {
    let s3 = t1.size(1);
    let s5 = s3 + 1;
    let s6 = s5 as f32;
    let s7 = s6.reciprocal();
    let t8 = t1 * s7;
    let (t15, t16) = t8.var_mean([2], 1);
    let t19 = clamp(t15, -1.5, 1.0);
    (t19, t16)
}
"#,
        &[
            &[&[1024, 64, 1]],
            &[&[16, 32, 256]],
            &[&[3, 5, 1]],
            &[&[2, 3, 7]],
        ],
    );
}

/// Fuzz seed 1117748: a broadcast row sum read inside the persistent kernel's unrolled
/// loop and by a `[1]` output outside it (the kernel did not compile: the buffer was
/// declared inside the loop).
#[test]
fn broadcast_read_in_and_out_of_a_loop() {
    check_calls(
        nvfuser_core::testing::FUZZ_BROADCAST_READ_IN_AND_OUT_OF_A_LOOP,
        &[&[&[255]], &[&[2048]], &[&[4096]], &[&[1]]],
    );
}

/// Fuzz seed 1225086: a full sum of a `[0, 255]` input broadcast into a `[1, 255]`
/// output. The reduction kernel's output stores sat in the loop over the input's
/// `0 * 255` elements, so the output was never written (147 of 255 values were stale).
/// A kernel with any empty tensor and an output with elements is now computed by the
/// CPU reference (`Error::EmptyLaunch`).
#[test]
fn output_beside_an_empty_input_is_written() {
    // f32 exp feeds the f64 sum: the f32 tolerance.
    check_calls_with(
        r#"
fn k(t1: Tensor<f32, [255]>, t2: Tensor<f64, [_, 255]>) -> (Tensor<f64, [1, 255]>, Tensor<f32, [255]>) {
    let t3 = t1.exp();
    let t4 = t1.segment_set();
    let t6 = t3.broadcast([true, false]);
    let t7 = t2 * t6;
    let t9 = t7.sum([0, 1]);
    let t10 = t9.broadcast([true, true]);
    let t13 = clamp(t3, -1.8965887198020062, 0.8930964924888279);
    let t14 = t13.broadcast([true, false]);
    let t15 = t14.minimum(t10);
    (t15, t13)
}
"#,
        &[
            &[&[255], &[1024, 255]],
            &[&[255], &[0, 255]],
            &[&[255], &[5, 255]],
            &[&[255], &[0, 255]],
        ],
        &|_| Tolerance::for_dtype(nvfuser_core::DataType::F32),
    );
}

/// Fuzz seed 1103918: a min over a slice that is empty in the first call (`t1`, rows
/// `0..-3` of 3), broadcast and sliced again to an empty output, beside a reshape in
/// another segment. The min's values are never observed, so both devices return the
/// outputs; the segment that stores the min (3 undefined values, an intermediate of the
/// whole fusion) must not refuse the call.
#[test]
fn unobserved_empty_min_in_a_segment() {
    check_calls(
        r#"
fn k(t0: Tensor<bf16, [_, 1000, _, _]>) -> (Tensor<i64, [_, 4, _, _, _]>, Tensor<f32, [0, 1000]>, Tensor<bf16, [_, 1000, _, _]>) {
    let t1 = t0.slice([0..-3, .., .., ..]);
    let t3 = t1 as f32;
    let t4 = t3.min([0, 2, 3]);
    let t6 = t4.broadcast([true, false]);
    let t8 = t6.slice([(1, -3, 2), ..]);
    let s9 = t0.size(0);
    let s10 = t0.size(2);
    let s11 = t0.size(3);
    let t12 = t0.reshape([s9, 4, -1, s10, s11]);
    let t15 = t12 as i64;
    (t15, t8, t0)
}
"#,
        &[
            &[&[3, 1000, 3, 5]],
            &[&[7, 1000, 16, 16]],
            &[&[16, 1000, 8, 15]],
        ],
    );
}

/// Squeezes (the largest class of GPU refusals in the fuzzer: 276 of 317 at seed
/// 1600000) move up through elementwise math and broadcasts to the inputs, which the
/// kernels read as views. Pointwise math on a squeezed `[N, 1, H]` input beside a
/// `[1, 1, H]` one, with sizes that are not multiples of a vector.
#[test]
fn squeezed_inputs_in_pointwise_math() {
    check_calls(
        r#"
fn k(x: Tensor<f32, [_, 1, _]>, y: Tensor<f32, [1, 1, _]>) -> Tensor<f32, [_, _]> {
    let r = x.relu();
    let s = r + y;
    let z = s.squeeze([1]);
    z
}
"#,
        &[
            &[&[64, 1, 1024], &[1, 1, 1024]],
            &[&[3, 1, 1001], &[1, 1, 1001]],
            &[&[1, 1, 1], &[1, 1, 1]],
        ],
    );
}

/// A softmax over a squeezed, scaled input (inner persistent) and a row sum of a
/// squeezed input (reduction), in bf16 and f32.
#[test]
fn reductions_of_squeezed_inputs() {
    check_calls(
        r#"
fn k(x: Tensor<bf16, [_, 1, _]>) -> Tensor<bf16, [_, _]> {
    let t = x * 2.0;
    let s = t.squeeze([1]);
    let f = s as f32;
    let m = f.max([1]);
    let mb = m.broadcast([false, true]);
    let e = (f - mb).exp();
    let d = e.sum([1]);
    let db = d.broadcast([false, true]);
    let y = e / db;
    y as bf16
}
"#,
        &[&[&[128, 1, 1024]], &[&[5, 1, 77]]],
    );
    // An f32 row sum of 4096 random values: the GPU's summation order differs from the
    // reference's, so the absolute tolerance grows with the row (the benchmark's rule).
    check_calls_with(
        r#"
fn k(x: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_]> {
    let s = x.squeeze([2]);
    s.sum([1])
}
"#,
        &[&[&[128, 4096, 1]], &[&[7, 33, 1]]],
        &|_| Tolerance::new(1e-4, 1e-6 * 4096.0),
    );
}

/// Squeezes of broadcasts (a broadcast then squeezed is its input again) and of
/// squeezes, with outputs of the squeezed and the unsqueezed value.
#[test]
fn squeezes_of_broadcasts_and_squeezes() {
    check_calls(
        r#"
fn k(x: Tensor<f32, [_, _]>, w: Tensor<f32, [1, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_]>) {
    let b = x.broadcast([false, true, true, false]);
    let s1 = b.squeeze([1]);
    let s2 = s1.squeeze([1]);
    let e = s2.exp();
    let v = w.squeeze([0]);
    let n = v.neg();
    (e, n)
}
"#,
        &[&[&[16, 300], &[1, 300]], &[&[1, 1], &[1, 1]]],
    );
}

/// Fuzz seeds 5416194 and 5416105: an expand of an outer reduction's result back over
/// the rows was planned into the grid-split reduction kernel, where only the last block
/// stores (its own rows): the other rows were never written. An expanded dim has
/// elements along the reduced dims, so the outer reduction refuses it and the expand
/// runs in a pointwise segment.
#[test]
fn expanded_outer_reduction_results() {
    check_calls(
        r#"
fn fuzz_case(t0: Tensor<f64, [_, _]>) -> (Tensor<f64, [1, _]>, Tensor<f64, [_, _]>) {
    let t3 = t0.max([0]);
    let t4 = t3.broadcast([true, false]);
    let s5 = t0.size(0);
    let t6 = t4.expand([s5, -1]);
    let t7 = t4.sinh();
    (t7, t6)
}
"#,
        &[&[&[2048, 1024]], &[&[2, 2048]], &[&[3, 5]]],
    );
    check_calls_with(
        r#"
fn fuzz_case(t0: Tensor<f32, [_, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_]>) {
    let t3 = clamp(t0, -1.1234974371026056, 1.1358046251237028);
    let t5 = t0.sum([0]);
    let (t6, t7) = t3.var_mean([0, 1], 1);
    let t8 = t3.var([0], 0);
    let t9 = t8.broadcast([true, false]);
    let s12 = t0.size(0);
    let t13 = t9.expand([s12, -1]);
    let t14 = t6.broadcast([true, true]);
    (t13 * t14, t5)
}
"#,
        &[&[&[2048, 1024]], &[&[2, 2048]]],
        // `t5` sums 2048 f32 values: the grid's order of partial sums differs from the
        // reference's, so the absolute tolerance grows with the reduced length.
        &|dtype| {
            let t = Tolerance::for_dtype(dtype);
            Tolerance::new(t.rtol, t.atol * 2048.0)
        },
    );
}

/// Seed 6421399: `maximum` / `minimum` of a signed zero, made visible by `atan2` (and here
/// by a division). The reference orders -0 below +0 (`minimum(+0, -0)` is -0,
/// `maximum(-0, +0)` is +0, as IEEE 754-2019's minimum and maximum); the GPU helpers
/// returned their first operand on every tie.
#[test]
fn maximum_and_minimum_order_negative_zero_below_positive_zero() {
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    let fusion = fusion_of(
        r#"
fn k(a: Tensor<f32, [_, 2]>, b: Tensor<f32, [_, 2]>)
    -> (Tensor<f32, [_, 2]>, Tensor<f32, [_, 2]>, Tensor<f32, [_, 2]>, Tensor<f32, [_]>, Tensor<f32, [_]>) {
    let hi = a.maximum(b);
    let lo = a.minimum(b);
    (1.0f32 / hi, 1.0f32 / lo, 1.0f32 / a.clamp(b, b), 1.0f32 / a.max([1]), 1.0f32 / a.min([1]))
}
"#,
    );
    let exec = FusionExecutorCache::new(fusion);
    // Every ordered pair of signed zeros, in both operands and within each row.
    let zeros = [0.0f32, -0.0];
    let mut a = Vec::new();
    let mut b = Vec::new();
    for i in 0..64usize {
        a.push(zeros[i % 2]);
        b.push(zeros[(i / 2) % 2]);
    }
    let a: EvalInput = HostTensor::from_vec(a, &[32, 2]).unwrap().into();
    let b: EvalInput = HostTensor::from_vec(b, &[32, 2]).unwrap().into();
    run_and_compare(&dev, &exec, &[a, b], None, &Tolerance::for_dtype).unwrap();
}

/// Seeds 8500031, 8502920, 8524010 (and 7 more like them): an input updated in place
/// by one pointwise kernel and also returned as an output. The kernel wrote the update
/// straight into the input's buffer, so the returned input showed the new values; the
/// direct write is now kept for inputs no other output returns.
#[test]
fn an_input_updated_in_place_and_returned() {
    check_calls(
        r#"
fn k(t0: Tensor<f32, [_]>) -> (Tensor<f32, [_]>, Tensor<f32, [_]>) {
    let t2 = t0 + t0;
    (inplace(t2, t0), t0)
}
"#,
        &[&[&[128]], &[&[4096]], &[&[100]]],
    );
    check_calls(
        r#"
fn k(t0: Tensor<bf16, [_, _]>) -> (Tensor<bf16, [_, _]>, Tensor<bf16, [_, _]>, Tensor<bf16, [_, _]>) {
    let t1 = t0.sigmoid();
    (t0, inplace(t1, t0), t0.permute([1, 0]))
}
"#,
        &[&[&[64, 1024]], &[&[3, 5]]],
    );
}

/// CPU fuzz seed 10902137: outputs sharing a producer across the pointwise schedule's
/// serial loops now share those loops (`compute_with` the reference).
#[test]
fn outputs_sharing_a_producer_across_serial_loops() {
    use nvfuser_core::testing::{FUZZ_SHARED_PRODUCER_ALTERNATING, FUZZ_SHARED_PRODUCER_KEEPDIM};
    check_calls(
        FUZZ_SHARED_PRODUCER_KEEPDIM,
        &[
            &[&[63, 1, 62, 3], &[3]],
            &[&[17, 1, 2048, 4], &[4]],
            &[&[4, 1, 255, 2], &[2]],
        ],
    );
    check_calls(
        FUZZ_SHARED_PRODUCER_ALTERNATING,
        &[
            &[&[63, 5, 62, 3], &[5, 3]],
            &[&[17, 3, 2048, 4], &[3, 4]],
            &[&[2, 7, 3, 1000], &[7, 1000]],
        ],
    );
}

/// Seed 11032140: `sign` of -0 was -0 on the GPU and +0 on the CPU reference (and in
/// PyTorch); `atan2(sign(x), x)` showed it as -pi against pi.
#[test]
fn sign_of_a_signed_zero_is_positive_zero() {
    let fusion = fusion_of(
        r#"
fn k(a: Tensor<f32, [_]>, h: Tensor<f16, [_]>) -> (Tensor<f32, [_]>, Tensor<f32, [_]>, Tensor<f16, [_]>) {
    let s = a.sign();
    (1.0f32 / s, s.atan2(a), h.sign())
}
"#,
    );
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    let exec = FusionExecutorCache::new(fusion);
    let vals = [0.0f32, -0.0, 1.5, -2.0, f32::NAN, -0.0, 0.0, 3.0];
    let a: Vec<f32> = (0..64).map(|i| vals[i % vals.len()]).collect();
    let h: Vec<half::f16> = a.iter().map(|&x| half::f16::from_f32(x)).collect();
    let a: EvalInput = HostTensor::from_vec(a, &[64]).unwrap().into();
    let h: EvalInput = HostTensor::from_vec(h, &[64]).unwrap().into();
    run_and_compare(&dev, &exec, &[a, h], None, &Tolerance::for_dtype).unwrap();
}

/// Seed 11010968: a reshape with an inferred size, on the GPU (NVRTC 13.0 crashed on
/// the kernel's uncancelled inferred size; `codegen_nvrtc` checks the cancelled one).
#[test]
fn reshape_with_an_inferred_size() {
    check_calls(
        r#"
fn k(x: Tensor<f32, [_, _, _, _]>) -> Tensor<f32, [_, _, _]> {
    let s0 = x.size(0);
    let s1 = x.size(1);
    x.reshape([s0, s1, -1]).sigmoid()
}
"#,
        &[
            &[&[4, 128, 64, 64]],
            &[&[17, 100, 4, 100]],
            &[&[4, 4, 1, 8]],
        ],
    );
}

/// GPU fuzz seed 11227029: a pad's guarded read `T1[i - 1]` was loaded at `i = 0` too
/// (the select's other side), where the unsigned index wrapped to `2^32 - 1`: an illegal
/// address. Guarded reads of pad, cat and the indexing ops are clamped into their input.
#[test]
fn guarded_pad_and_cat_reads_stay_in_bounds() {
    check_calls(
        r#"
fn k(t0: Tensor<f32, [_, _, _]>, t1: Tensor<f16, [_]>) -> (Tensor<f32, [_, _, _]>, Tensor<f16, [_]>) {
    let t4 = (t1 as i64).broadcast([true, true, false]);
    let t5 = t0 + t4;
    (t5.pad([(0, 0), (0, 0), (1, 0)], 0.5), t1)
}
"#,
        &[&[&[100, 7, 2048], &[2048]], &[&[1, 31, 64], &[64]]],
    );
    check_calls(
        r#"
fn k(a: Tensor<f32, [_, _]>, b: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> {
    cat([a.exp(), b.sigmoid(), a.neg()], 1).pad([(0, 0), (3, 2)], 1.0)
}
"#,
        &[&[&[64, 1000], &[64, 24]], &[&[3, 1], &[3, 2]]],
    );
}

/// GPU fuzz seed 11337506: a per-row `[A, 1]` input beside `[A, B]` row results.
#[test]
fn a_per_row_input_beside_row_results() {
    check_calls(
        nvfuser_core::testing::FUZZ_PER_ROW_INPUT_BESIDE_ROWS,
        &[&[&[256, 128, 1]], &[&[100, 256, 1]], &[&[2048, 31, 1]]],
    );
}

/// GPU fuzz seed 11337506: `x[A, B, 1].sum([1])` is reduced without its size-1 dim by a
/// tuned scheduler (`scheduler::squeeze_reduction_broadcasts`); the default schedule took
/// it before.
#[test]
fn reductions_beside_size_one_dims() {
    check_calls(
        "fn k(x: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_, 1]> { x.sum([1]) }",
        &[&[&[2048, 31, 1]], &[&[3, 5000, 1]], &[&[1, 1, 1]]],
    );
    check_calls(
        "fn k(x: Tensor<f32, [_, _, 1]>) -> (Tensor<f32, [_, 1]>, Tensor<f32, [_, 1]>) { x.var_mean([1], 1) }",
        &[&[&[64, 100000, 1]], &[&[7, 3, 1]]],
    );
    check_calls(
        "fn k(x: Tensor<f32, [_, 1, _, 1]>) -> Tensor<f32, [_, 1, 1]> { (x * 2.0).max([2]) + 1.0 }",
        &[&[&[100, 1, 1024, 1]], &[&[5, 1, 3, 1]]],
    );
}

/// GPU fuzz seeds 12608041, 12610762, 12632162, 12634746: a sort kernel whose fusion
/// has inputs of another rank than the sorted one (an unused 0-d or rank-2 input, an
/// input returned as an output). The sort lowering declared every input's shape with
/// the sorted tensor's rank, so the launch refused the arguments ("T2_shape: expected
/// rank 4, found 0 sizes").
#[test]
fn a_sort_beside_inputs_of_other_ranks() {
    check_calls(
        r#"
fn k(t0: Tensor<bf16, [_, 1, _, _]>, t1: Tensor<f64, [_, _, _, _]>, t2: Tensor<f64, []>) -> (Tensor<i64, [_, _, _, _]>, Tensor<bf16, [_, 1, _, _]>) {
    let (v, i) = t1.sort(3, false);
    (i, t0)
}
"#,
        &[
            &[&[1, 1, 5, 3], &[1, 256, 5, 3], &[]],
            &[&[5, 1, 64, 128], &[5, 2, 64, 128], &[]],
        ],
    );
    check_calls(
        r#"
fn k(t0: Tensor<f32, [_, _]>, t1: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_, _, _]> {
    let (v, i) = t1.sort(1, true);
    v
}
"#,
        &[&[&[3, 7], &[4, 300, 5]], &[&[1, 1], &[2, 3000, 1]]],
    );
}

/// Broadcasts of `iota`/`full` folded into the creation op (`fold_creation_broadcasts`):
/// cross-entropy's backward with an iota one-hot, a causal mask over a batch, an iota
/// with a start and a step broadcast along a middle dim, a `full` broadcast along the
/// rows (positive rows: their sums are well-conditioned); one persistent kernel each,
/// compared with the CPU reference.
#[test]
fn creation_ops_broadcast_along_the_rows() {
    check_calls(
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
        &[
            &[&[64], &[64, 32000], &[64, 1]],
            &[&[3], &[3, 1000], &[3, 1]],
            &[&[129], &[129, 7], &[129, 1]],
        ],
    );
    check_calls(
        r#"
fn k(s: Tensor<bf16, [_, _, _]>) -> Tensor<bf16, [_, _, _]> {
    let row = iota(s.size(1), 0, 1, i64).unsqueeze(1);
    let col = iota(s.size(2), 0, 1, i64).unsqueeze(0);
    let x = where_(col <= row, (s as f32) * 0.088388346f32, f32::NEG_INFINITY);
    let e = (x - x.max([2], keepdim = true)).exp();
    (e / e.sum([2], keepdim = true)) as bf16
}
"#,
        &[&[&[4, 256, 256]], &[&[2, 37, 45]], &[&[1, 5, 2048]]],
    );
    check_calls(
        r#"
fn k(x: Tensor<f32, [_, _, _]>) -> (Tensor<f32, [_, _, _]>, Tensor<f32, [_, _, 1]>) {
    let r = iota(x.size(1), 3, 2, f32).unsqueeze(1);
    let h = full([x.size(2)], 0.5, f32).unsqueeze(0);
    let y = x.abs() * r + h;
    (y / y.sum([2], keepdim = true), y.max([2], keepdim = true))
}
"#,
        &[&[&[3, 5, 1000]], &[&[2, 64, 33]]],
    );
}

/// CPU fuzz seed 12124262 (refused, not wrong): reductions over size-1 dims only are
/// planned as pointwise math (`scheduler::pointwise_unit_reductions`); the values must
/// be the reference's, including `var` at a correction of the count or more (NaN).
#[test]
fn reductions_over_size_one_dims_are_pointwise() {
    check_calls(
        "fn k(x: Tensor<f32, [1, _, _, 1024]>, y: Tensor<f16, [_, 1024]>) -> (Tensor<f32, [_, _, 1024]>, Tensor<f32, [_, _, 1024]>) {
            let v = x.var([0], 0);
            (v.minimum(y.broadcast([true, false, false])).relu(), v)
        }",
        &[&[&[1, 1, 250, 1024], &[250, 1024]], &[&[1, 16, 8, 1024], &[8, 1024]]],
    );
    check_calls(
        "fn k(x: Tensor<f32, [_, 1, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _]>) {
            let (v, m) = x.var_mean([1], 1);
            (v, m, x.sum([1]) * 2.0)
        }",
        &[&[&[64, 1, 4096]], &[&[3, 1, 5]]],
    );
    check_calls(
        "fn k(x: Tensor<bf16, [1, _]>) -> (Tensor<bf16, [_]>, Tensor<bf16, [_]>) { (x.mean([0]), x.max([0])) }",
        &[&[&[1, 100000]], &[&[1, 3]]],
    );
}

/// CPU fuzz seed 12332149 (refused, not wrong): a full `min` of `[A, B]` masked by
/// `[A, 1]` and `[1, B]` iotas, broadcast to `[1, 1]`; and a full sum of `x * w` with
/// `w: [A, 1]` (a broadcast in the innermost reduced dim, which lost the reference's
/// extent when the reduced dims were split).
#[test]
fn broadcast_in_the_last_reduced_dim() {
    check_calls(
        "fn k(x: Tensor<f32, [_, _]>) -> Tensor<bool, [1, 1]> {
            let a = iota(x.size(0), 0, 1, i64).broadcast([false, true]);
            let b = iota(x.size(1), 0, 1, i64).broadcast([true, false]);
            let t = (where_(b - a <= 1, x, 0.0f32) as f64).min([0, 1]).broadcast([true, true]);
            t < t + 1.0
        }",
        &[&[&[17, 31]], &[&[300, 700]], &[&[1, 5]]],
    );
    check_calls(
        "fn k(x: Tensor<f32, [_, _]>, w: Tensor<f32, [_, 1]>) -> Tensor<f32, []> { (x * w).sum([0, 1]) }",
        &[&[&[17, 31], &[17, 1]], &[&[1000, 4096], &[1000, 1]]],
    );
    check_calls(
        "fn k(x: Tensor<f32, [_, _, _]>, w: Tensor<f32, [_, 1]>) -> Tensor<f32, [_]> { (x * w).sum([1, 2]) }",
        &[&[&[64, 17, 31], &[17, 1]], &[&[8, 300, 1000], &[300, 1]]],
    );
}

/// CPU fuzz seed 12801467 (refused, not wrong): a `var` over all four symbolic dims
/// broadcast back beside a `uniform`; the persistent heuristics now decline several
/// symbolic reduced dims and the rows are streamed.
#[test]
fn full_variance_of_four_symbolic_dims_beside_uniform() {
    check_calls(
        "fn k(x: Tensor<f32, [_, _, _, _]>) -> (Tensor<f32, [_]>, Tensor<f32, [_, _, _, _]>) {
            let v = x.var([0, 1, 2, 3], 1).broadcast([true, true, true, true]);
            let e = v.expand([x.size(0), x.size(1), x.size(2), x.size(3)]);
            let u = uniform([x.size(0), x.size(1), x.size(2), x.size(3)], -1.0, 1.0, 259, 12, f32);
            let t = u.minimum(e);
            let (m, m2, n) = t.welford([1, 2, 3]);
            (m2, u)
        }",
        &[
            &[&[128, 127, 64, 2]],
            &[&[8, 1, 3, 3]],
            &[&[32, 1, 16, 4096]],
        ],
    );
}

/// CPU fuzz seed 13200097 (refused, not wrong): an uncorrected f32 `var` without its
/// mean in a normalization. The inner persistent schedule's two-pass rewrite gave the
/// cast of its f64 mean the reduced dims, so the lowering took the cast for a
/// reduction; the seed's `min` over the broadcast result was then refused by the
/// default schedule too. Both run as one inner persistent kernel now.
#[test]
fn uncorrected_f32_var_without_its_mean_in_a_normalization() {
    check_calls(
        "fn k(t1: Tensor<f16, [_]>) -> (Tensor<f16, []>, Tensor<f16, [1, 1]>) {
            let t6 = ((t1 as f32).var([0], 0) as f16).broadcast([true]);
            (t6.min([0]), t6.broadcast([false, true]))
        }",
        &[&[&[64]], &[&[32]], &[&[100]], &[&[1]]],
    );
    check_calls(
        "fn k(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x - x.var([1], 0, keepdim = true) }",
        &[&[&[128, 1024]], &[&[3, 77]], &[&[1000, 4096]]],
    );
}
