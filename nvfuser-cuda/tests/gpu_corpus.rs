//! Every kernel of the manual-schedule corpus, generated, compiled by NVRTC for the GPU's
//! architecture, launched, and compared with the CPU reference evaluator on random
//! inputs of several shapes (odd and non-divisible ones included).
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_corpus -- --nocapture
//! ```

use nvfuser_core::codegen::corpus;
use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::sched::ScheduledFusion;
use nvfuser_core::ScalarValue;
use nvfuser_cuda::launch::run_scheduled;
use nvfuser_cuda::testing::require_gpu;
use nvfuser_cuda::{Arg, Device, Tensor};

fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// Runs `sf` on the GPU and on the CPU reference with the given inputs and compares
/// every output.
fn check_inputs(device: &Device, name: &str, sf: &ScheduledFusion, inputs: Vec<EvalInput>) {
    let fusion = sf.fusion();
    let shapes: Vec<Vec<usize>> = inputs
        .iter()
        .map(|i| match i {
            EvalInput::Tensor(h) => h.shape().to_vec(),
            EvalInput::Scalar(_) => vec![],
        })
        .collect();
    let dev: Vec<Option<Tensor>> = inputs
        .iter()
        .map(|i| match i {
            EvalInput::Tensor(h) => Some(device.tensor_from_host(h).unwrap()),
            EvalInput::Scalar(_) => None,
        })
        .collect();
    let args: Vec<Arg<'_>> = inputs
        .iter()
        .zip(&dev)
        .map(|(i, d)| match (i, d) {
            (_, Some(t)) => Arg::Tensor(t),
            (EvalInput::Scalar(s), None) => Arg::Scalar(*s),
            _ => unreachable!("tensors were uploaded"),
        })
        .collect();
    let got = run_scheduled(device, sf, &args)
        .unwrap_or_else(|e| panic!("{name} {shapes:?}: {e}\n{}", sf.fusion()));
    let want = evaluate(fusion, &inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let g = g.to_host_tensor().unwrap();
        compare(&g, w, Tolerance::for_dtype(w.dtype()))
            .unwrap_or_else(|m| panic!("{name} {shapes:?} output {k}: {m}"));
    }
    println!(
        "{name} {shapes:?}: {} outputs match the CPU reference",
        got.len()
    );
}

/// [`check_inputs`] with random tensors of `shapes` (one per tensor input, in order);
/// scalar inputs get 1e-5 (an epsilon in the norms of the corpus).
fn check(device: &Device, name: &str, sf: &ScheduledFusion, shapes: &[&[usize]], seed: u64) {
    let fusion = sf.fusion();
    let mut shapes = shapes.iter();
    let inputs = fusion
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let val = fusion.val(id);
            if val.is_tensor() {
                let shape = shapes
                    .next()
                    .unwrap_or_else(|| panic!("{name}: too few shapes"));
                HostTensor::random(val.dtype, shape, seed + i as u64).into()
            } else {
                EvalInput::Scalar(ScalarValue::Float(1e-5).cast(val.dtype))
            }
        })
        .collect();
    assert!(shapes.next().is_none(), "{name}: too many shapes");
    check_inputs(device, name, sf, inputs);
}

/// Index tensors with values in `0..bound`.
fn indices(shape: &[usize], bound: i64, seed: u64) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n as u64)
        .map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed * 97)) % bound as u64) as i64)
        .collect();
    HostTensor::from_vec(v, shape).unwrap()
}

#[test]
fn corpus_kernels_match_the_cpu_reference() {
    let Some(device) = gpu() else { return };
    let cases: Vec<(&str, Vec<Vec<&[usize]>>)> = vec![
        (
            "pointwise_split128",
            vec![
                vec![&[37, 129], &[37, 129]],
                vec![&[64, 128], &[64, 128]],
                vec![&[1, 1], &[1, 1]],
            ],
        ),
        (
            "pointwise_vectorize4_f32",
            vec![
                vec![&[12288], &[12288]],
                vec![&[1000], &[1000]],
                vec![&[4], &[4]],
            ],
        ),
        (
            "pointwise_vectorize8_bf16",
            vec![vec![&[8192], &[8192]], vec![&[1000], &[1000]]],
        ),
        (
            "inner_sum_rfactor",
            vec![vec![&[33, 1000]], vec![&[5, 128]], vec![&[3, 1]]],
        ),
        (
            "softmax_row_in_registers",
            vec![vec![&[17, 1024]], vec![&[1, 1024]]],
        ),
        ("nondivisible_split", vec![vec![&[1000]]]),
        (
            "broadcast_add",
            vec![vec![&[9, 300], &[300]], vec![&[2, 128], &[128]]],
        ),
        (
            "outer_sum",
            vec![vec![&[333, 257]], vec![&[1, 128]], vec![&[64, 1]]],
        ),
        (
            "softmax_row_in_shared",
            vec![vec![&[5, 4096]], vec![&[1, 4096]]],
        ),
        (
            "layer_norm_bf16",
            vec![
                vec![&[6, 1024], &[1024], &[1024]],
                vec![&[1, 1024], &[1024], &[1024]],
            ],
        ),
        ("rms_norm_bf16", vec![vec![&[6, 1024], &[1024]]]),
        (
            "welford_three_outputs",
            vec![vec![&[7, 300]], vec![&[2, 1]]],
        ),
        ("inner_sum_grid", vec![vec![&[3, 5000]], vec![&[2, 1024]]]),
        ("inner_sum_2d_block", vec![vec![&[9, 200]], vec![&[4, 32]]]),
        (
            "resize_slice_pad_cat",
            vec![vec![&[5, 9], &[5, 4]], vec![&[1, 3], &[1, 1]]],
        ),
        ("reshape_view", vec![vec![&[4, 6, 8]], vec![&[1, 6, 8]]]),
    ];
    let all = corpus::all().unwrap();
    for (name, sf) in &all {
        if *name == "gather_select" {
            // x [n, h], idx [n, 3] in 0..h, rows [4] in 0..n: indices must be in range.
            for (seed, (n, h)) in [(1u64, (5usize, 7usize)), (2, (2, 130))] {
                let x = HostTensor::random(nvfuser_core::DataType::F32, &[n, h], seed);
                let idx = indices(&[n, 3], h as i64, seed);
                let rows = indices(&[4], n as i64, seed + 1);
                check_inputs(&device, name, sf, vec![x.into(), idx.into(), rows.into()]);
            }
            continue;
        }
        if *name == "int_div_mod" {
            // Divisors without zeros (a zero divisor is a device-side error, tested in
            // gpu_device_checks), of both signs; dividends of both signs.
            for (seed, n) in [(3u64, 5usize), (4, 1000)] {
                let x = HostTensor::random(nvfuser_core::DataType::I32, &[n], seed);
                let y: Vec<i64> = (0..n as i64)
                    .map(|i| if i % 2 == 0 { 1 + i % 7 } else { -1 - i % 5 })
                    .collect();
                let y = HostTensor::from_vec(y, &[n])
                    .unwrap()
                    .cast(nvfuser_core::DataType::I32);
                check_inputs(&device, name, sf, vec![x.into(), y.into()]);
            }
            continue;
        }
        let (_, shape_sets) = cases
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no shapes for corpus entry {name}"));
        for (i, shapes) in shape_sets.iter().enumerate() {
            check(&device, name, sf, shapes, 17 * i as u64);
        }
    }
}

#[test]
fn vectorized_kernels_reject_what_they_cannot_handle() {
    let Some(device) = gpu() else { return };
    let sf = corpus::pointwise_vectorized(nvfuser_core::DataType::F32, 4).unwrap();
    // A size that is not a multiple of the vector width: a typed error, not a fault.
    let a = device
        .tensor_from_slice(&vec![1.0f32; 1001], [1001])
        .unwrap();
    let err = run_scheduled(&device, &sf, &[(&a).into(), (&a).into()]).unwrap_err();
    println!("{err}");
    assert!(err.to_string().contains("divisible by 4"), "{err}");
    // A view starting one element into its buffer is misaligned for 16-byte access.
    let b = device
        .tensor_from_slice(&vec![1.0f32; 1005], [1005])
        .unwrap();
    let b = b.slice(0, 1, 1005, 1).unwrap();
    let err = run_scheduled(&device, &sf, &[(&b).into(), (&b).into()]).unwrap_err();
    println!("{err}");
    assert!(err.to_string().contains("aligned to 16 bytes"), "{err}");
}

/// `uniform` and `normal` of every float dtype, split by 128 onto blocks and threads:
/// the generated Philox stream must reproduce the CPU reference bit for bit for uniform
/// values, and within a few ulps for normal ones (the GPU's log/sin/cos differ).
#[test]
fn philox_streams_match_the_cpu_reference() {
    use nvfuser_core::builder::FusionDefinition;
    use nvfuser_core::ir::Distribution;
    use nvfuser_core::sched::ParallelType::{BIDx, TIDx};
    use nvfuser_core::{DataType, Size};
    let Some(device) = gpu() else { return };
    let mut compared = 0usize;
    for dist in [Distribution::Uniform, Distribution::Normal] {
        for dtype in [DataType::F32, DataType::F16, DataType::BF16, DataType::F64] {
            for (seed, offset, n) in [(0i64, 0i64, 1000usize), (0x1234_5678_9abc, 77, 4099)] {
                let mut fd = FusionDefinition::new();
                let len = fd.define_scalar(DataType::I64).unwrap();
                let (a, b) = match dist {
                    Distribution::Uniform => (fd.constant(-2.0), fd.constant(3.0)),
                    Distribution::Normal => (fd.constant(0.5), fd.constant(2.0)),
                };
                let (s, o) = (fd.constant(seed), fd.constant(offset));
                let sizes = [Size::Val(len)];
                let y = match dist {
                    Distribution::Uniform => fd.uniform(&sizes, a, b, s, o, dtype),
                    Distribution::Normal => fd.normal(&sizes, a, b, s, o, dtype),
                }
                .unwrap();
                fd.add_output(y).unwrap();
                let f = fd.finish().unwrap();
                let mut sf = ScheduledFusion::new(f.clone()).unwrap();
                sf.split(y, 0, 128).unwrap();
                sf.parallelize(y, 0, BIDx).unwrap();
                sf.parallelize(y, 1, TIDx).unwrap();
                let got = run_scheduled(&device, &sf, &[Arg::from(n as i64)]).unwrap();
                let got = got[0].to_host_tensor().unwrap().to_f64_vec();
                let want = evaluate(&f, &[EvalInput::Scalar(ScalarValue::Int(n as i64))]).unwrap()
                    [0]
                .to_f64_vec();
                assert_eq!(got.len(), n);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let ok = match dist {
                        Distribution::Uniform => g.to_bits() == w.to_bits(),
                        // A few ulps of the dtype (f64: of f32-level transcendental error
                        // is not expected; allow 1e-12 relative).
                        Distribution::Normal => {
                            let ulp = match dtype {
                                DataType::F64 => 1e-12,
                                DataType::F32 => 1e-5,
                                DataType::F16 => 2e-3,
                                _ => 1.6e-2,
                            };
                            (g - w).abs() <= ulp * (1.0 + w.abs())
                        }
                    };
                    assert!(
                        ok,
                        "{} {dtype} seed {seed} offset {offset} element {i}: GPU {g}, CPU {w}",
                        dist.name()
                    );
                }
                compared += n;
            }
        }
    }
    println!("philox: {compared} random elements compared (uniform bit for bit), 0 mismatches");
}
