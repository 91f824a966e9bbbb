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
use nvfuser_cuda::launch::run_scheduled;
use nvfuser_cuda::testing::require_gpu;
use nvfuser_cuda::{Arg, Device};

fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// Runs `sf` on the GPU and on the CPU reference with random inputs of `shapes`
/// (one per fusion input) and compares every output.
fn check(device: &Device, name: &str, sf: &ScheduledFusion, shapes: &[&[usize]], seed: u64) {
    let fusion = sf.fusion();
    let hosts: Vec<HostTensor> = fusion
        .inputs()
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(i, (&id, shape))| HostTensor::random(fusion.val(id).dtype, shape, seed + i as u64))
        .collect();
    let dev: Vec<_> = hosts
        .iter()
        .map(|h| device.tensor_from_host(h).unwrap())
        .collect();
    let args: Vec<Arg<'_>> = dev.iter().map(Arg::from).collect();
    let got = run_scheduled(device, sf, &args)
        .unwrap_or_else(|e| panic!("{name} {shapes:?}: {e}\n{}", sf.fusion()));
    let inputs: Vec<EvalInput> = hosts.into_iter().map(EvalInput::from).collect();
    let want = evaluate(fusion, &inputs).unwrap();
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
    ];
    let all = corpus::all().unwrap();
    assert_eq!(all.len(), cases.len(), "every corpus entry has shapes here");
    for (name, sf) in &all {
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
