//! In-place outputs (`add_output_alias`) on the GPU, against the CPU device (whose
//! in-place semantics `tests/inplace.rs` checks by hand): pointwise, segmented and
//! reduction fusions, every element width, inputs that are dense, transposed or slices
//! of wider buffers, replayed calls, and the typed refusal of an expanded input.
//!
//! Each case builds the same random buffers on both devices, runs the fusion a few
//! times on each, and compares every output and every input buffer afterwards (the
//! whole buffer, so a write outside the view would show). The CPU half runs anywhere;
//! the GPU half needs a GPU (`NVFUSER_REQUIRE_GPU=1` makes its absence a failure).

use nvfuser_core::eval::{compare, HostTensor, Tolerance};
use nvfuser_core::prelude::*;
use nvfuser_cuda::testing::require_gpu;
use nvfuser_cuda::{Arg, Device, Error, FusionExecutorCache, SegmentedRuntime, Tensor};

/// How an input tensor is laid out over its buffer.
#[derive(Clone, Copy, Debug)]
enum View {
    /// Contiguous, the whole buffer.
    Dense,
    /// A rank-2 input seen through a transpose of a contiguous buffer.
    Transposed,
    /// Columns 2.. of a buffer three columns wider (rows apart in memory).
    Columns,
}

/// An input: its dtype, logical shape, layout and data seed.
struct Input {
    dtype: DataType,
    shape: Vec<usize>,
    view: View,
    seed: u64,
}

/// The buffer behind an input and the view the fusion gets.
fn make(device: &Device, i: &Input) -> (Tensor, Tensor) {
    let (r, c) = match i.shape[..] {
        [r, c] => (r, c),
        _ => {
            let base = device
                .tensor_from_host(&HostTensor::random(i.dtype, &i.shape, i.seed))
                .unwrap();
            return (base.clone(), base);
        }
    };
    let base_shape = match i.view {
        View::Dense => vec![r, c],
        View::Transposed => vec![c, r],
        View::Columns => vec![r, c + 3],
    };
    let base = device
        .tensor_from_host(&HostTensor::random(i.dtype, &base_shape, i.seed))
        .unwrap();
    let view = match i.view {
        View::Dense => base.clone(),
        View::Transposed => base.permute(&[1, 0]).unwrap(),
        View::Columns => base.slice(1, 2, c as i64 + 2, 1).unwrap(),
    };
    (base, view)
}

/// What a device did: the last call's outputs, every input buffer afterwards, and
/// whether each in-place output is its input's tensor.
struct Run {
    outputs: Vec<HostTensor>,
    buffers: Vec<HostTensor>,
    same_tensor: Vec<bool>,
    replays: u64,
}

fn run(device: &Device, fusion: &Fusion, inputs: &[Input], calls: usize) -> Result<Run, Error> {
    let made: Vec<(Tensor, Tensor)> = inputs.iter().map(|i| make(device, i)).collect();
    let args: Vec<Arg<'_>> = made.iter().map(|(_, v)| Arg::from(v)).collect();
    let exec = FusionExecutorCache::new(fusion.clone());
    let mut outputs = Vec::new();
    for _ in 0..calls {
        outputs = exec.run(device, &args)?;
    }
    let same_tensor = fusion
        .outputs()
        .iter()
        .zip(&outputs)
        .filter_map(|(o, t)| {
            let p = fusion.input_position(o.alias_of?)?;
            Some(t.shares_buffer(&made[p].1) && t.sizes() == made[p].1.sizes())
        })
        .collect();
    Ok(Run {
        outputs: outputs
            .iter()
            .map(|t| t.to_host_tensor().unwrap())
            .collect(),
        buffers: made
            .iter()
            .map(|(b, _)| b.to_host_tensor().unwrap())
            .collect(),
        same_tensor,
        replays: exec.stats().replays,
    })
}

/// The dtype's tolerance, widened for the reductions' different summation order.
fn tolerance(dtype: DataType) -> Tolerance {
    let t = Tolerance::for_dtype(dtype);
    Tolerance::new(t.rtol * 4.0, t.atol * 4.0)
}

/// Runs `fusion` on the CPU device and, where there is one, on the GPU, and compares.
/// Returns the GPU run.
fn check(name: &str, fusion: &Fusion, inputs: &[Input], calls: usize) -> Option<Run> {
    let cpu =
        run(&Device::cpu(), fusion, inputs, calls).unwrap_or_else(|e| panic!("{name}: CPU: {e}"));
    assert!(
        cpu.same_tensor.iter().all(|&s| s),
        "{name}: CPU returns the input"
    );
    require_gpu()?;
    let gpu = run(&Device::cuda(0).unwrap(), fusion, inputs, calls)
        .unwrap_or_else(|e| panic!("{name}: GPU: {e}"));
    assert!(
        gpu.same_tensor.iter().all(|&s| s),
        "{name}: GPU returns the input"
    );
    for (k, (g, c)) in gpu.outputs.iter().zip(&cpu.outputs).enumerate() {
        let tol = tolerance(c.dtype());
        compare(g, c, tol).unwrap_or_else(|e| panic!("{name}: output {k}: {e}"));
    }
    for (k, (g, c)) in gpu.buffers.iter().zip(&cpu.buffers).enumerate() {
        let tol = tolerance(c.dtype());
        compare(g, c, tol).unwrap_or_else(|e| panic!("{name}: buffer of input {k}: {e}"));
    }
    Some(gpu)
}

/// `x <- x * 2 + 1` in place, and `x + 10` (of the old `x`) as a second output;
/// `boundary` puts a `segment_set` between the two steps. `any_layout`: the input may
/// have any strides.
fn update(dtype: DataType, boundary: bool, any_layout: bool) -> Fusion {
    let mut fd = FusionDefinition::new();
    let mut spec = TensorSpec::new(dtype, &[-1, -1]);
    if any_layout {
        spec = spec.contiguity(Contiguity::All(false));
    }
    let x = fd.define_tensor_spec(spec).unwrap();
    let (y, z) = if dtype == DataType::Bool {
        let y = fd.logical_not(x).unwrap();
        let y = if boundary {
            fd.segment_set(y).unwrap()
        } else {
            y
        };
        let t = fd.constant(true);
        (y, fd.logical_and(x, t).unwrap())
    } else {
        let two = fd.constant_of(2, dtype);
        let one = fd.constant_of(1, dtype);
        let ten = fd.constant_of(10, dtype);
        let mut y = fd.mul(x, two).unwrap();
        if boundary {
            y = fd.segment_set(y).unwrap();
        }
        (fd.add(y, one).unwrap(), fd.add(x, ten).unwrap())
    };
    fd.add_output_alias(y, x).unwrap();
    fd.add_output(z).unwrap();
    fd.finish().unwrap()
}

fn input(dtype: DataType, shape: &[usize], view: View, seed: u64) -> Input {
    Input {
        dtype,
        shape: shape.to_vec(),
        view,
        seed,
    }
}

#[test]
fn pointwise_updates_of_every_width_and_layout() {
    let dtypes = [
        DataType::F32,
        DataType::F16,
        DataType::BF16,
        DataType::F64,
        DataType::I32,
        DataType::I64,
        DataType::Bool,
    ];
    let mut seed = 100;
    for dtype in dtypes {
        for view in [View::Dense, View::Transposed, View::Columns] {
            for shape in [[7usize, 13], [33, 130], [1, 5]] {
                seed += 1;
                let name = format!("{dtype} {view:?} {shape:?}");
                let fusion = update(dtype, false, !matches!(view, View::Dense));
                check(&name, &fusion, &[input(dtype, &shape, view, seed)], 2);
            }
        }
    }
}

#[test]
fn segmented_updates_store_after_every_segment() {
    for view in [View::Dense, View::Transposed, View::Columns] {
        let fusion = update(DataType::F32, true, !matches!(view, View::Dense));
        let inputs = [input(DataType::F32, &[65, 300], view, 7)];
        check(&format!("segmented {view:?}"), &fusion, &inputs, 3);
    }
    // Through the segmented runtime's own entry point too.
    let x0 = HostTensor::random(DataType::F32, &[9, 11], 3);
    let mut results = Vec::new();
    let mut devices = vec![Device::cpu()];
    if require_gpu().is_some() {
        devices.push(Device::cuda(0).unwrap());
    }
    for device in &devices {
        let rt = SegmentedRuntime::new(update(DataType::F32, true, false)).unwrap();
        assert!(rt.segmented().segments().len() >= 2);
        let x = device.tensor_from_host(&x0).unwrap();
        let out = rt.run(device, &[Arg::from(&x)]).unwrap();
        assert!(out[0].shares_buffer(&x));
        results.push((
            x.to_host_tensor().unwrap(),
            out[1].to_host_tensor().unwrap(),
        ));
    }
    if let [(cx, cz), (gx, gz)] = &results[..] {
        compare(gx, cx, Tolerance::for_dtype(DataType::F32)).unwrap();
        compare(gz, cz, Tolerance::for_dtype(DataType::F32)).unwrap();
    }
}

/// Batch norm's running mean, `rm <- 0.9 rm + 0.1 mean(x, 0)` in place, beside the
/// centred values `x - mean`.
fn running_mean() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let rm = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let n = fd.size(x, 0).unwrap();
    let s = fd.sum(x, &[0], false).unwrap();
    let mean = fd.div(s, n).unwrap();
    let keep = fd.constant(0.9f32);
    let take = fd.constant(0.1f32);
    let old = fd.mul(rm, keep).unwrap();
    let new = fd.mul(mean, take).unwrap();
    let updated = fd.add(old, new).unwrap();
    let b = fd.broadcast(mean, &[true, false]).unwrap();
    let centred = fd.sub(x, b).unwrap();
    fd.add_output_alias(updated, rm).unwrap();
    fd.add_output(centred).unwrap();
    fd.finish().unwrap()
}

/// `rm.size(0)` and `x.size(1)` name one size in [`running_mean`], so the kernels bind
/// one extent to each parallel dim and the plan needs no default schedule (planned for
/// an H100 preset, on any machine).
#[test]
fn the_running_mean_update_plans_with_tuned_schedulers() {
    use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
    let exec = FusionExecutorCache::new(running_mean());
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[(DataType::F32, &[1000, 64][..]), (DataType::F32, &[64][..])],
    );
    let plan = exec.plan_for(&info, None).unwrap();
    for s in &plan.segments {
        let default = s.scheduler.starts_with("default") || s.fallback.is_some();
        assert!(!default, "{}: {:?}", s.scheduler, s.fallback);
    }
}

/// The running mean, and a row sum added into a per-row accumulator: in-place outputs
/// of reduction kernels, whose inputs are read by many threads.
#[test]
fn reductions_update_statistics_in_place() {
    let bn = running_mean();
    for (rows, cols) in [(1000, 64), (37, 1030), (4096, 3)] {
        let inputs = [
            input(DataType::F32, &[rows, cols], View::Dense, 11),
            input(DataType::F32, &[cols], View::Dense, 12),
        ];
        check(&format!("running mean {rows}x{cols}"), &bn, &inputs, 3);
    }

    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let acc = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let s = fd.sum(xf, &[1], false).unwrap();
    let total = fd.add(acc, s).unwrap();
    fd.add_output_alias(total, acc).unwrap();
    let rows = fd.finish().unwrap();
    for (r, h) in [(512, 4096), (3, 77)] {
        let inputs = [
            input(DataType::BF16, &[r, h], View::Dense, 21),
            input(DataType::F32, &[r], View::Dense, 22),
        ];
        check(&format!("row sums {r}x{h}"), &rows, &inputs, 2);
    }
}

/// A cached call replays its launch and still stores the update (the third call's
/// input holds three updates: compared with the CPU device above).
#[test]
fn replayed_calls_store_too() {
    let fusion = update(DataType::F32, false, false);
    let inputs = [input(DataType::F32, &[128, 256], View::Dense, 5)];
    if let Some(gpu) = check("replayed", &fusion, &inputs, 4) {
        assert!(gpu.replays >= 2, "replays: {}", gpu.replays);
    }
}

/// Empty inputs update nothing, and an input whose elements share memory is refused on
/// both devices before anything is written.
#[test]
fn empty_and_expanded_inputs() {
    let fusion = update(DataType::F32, false, false);
    check(
        "empty",
        &fusion,
        &[input(DataType::F32, &[0, 5], View::Dense, 1)],
        1,
    );

    let mut fd = FusionDefinition::new();
    let x = fd
        .define_tensor_from_strides(DataType::F32, &[2, 3], &[0, 1], false)
        .unwrap();
    let y = fd.neg(x).unwrap();
    fd.add_output_alias(y, x).unwrap();
    let fusion = fd.finish().unwrap();
    let mut devices = vec![Device::cpu()];
    if require_gpu().is_some() {
        devices.push(Device::cuda(0).unwrap());
    }
    for device in &devices {
        let row = device
            .tensor_from_slice(&[1.0f32, 2.0, 3.0], [1, 3])
            .unwrap();
        let expanded = row.expand(&[2, 3]).unwrap();
        let err = FusionExecutorCache::new(fusion.clone())
            .run(device, &[Arg::from(&expanded)])
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidTensor { .. }),
            "{device}: {err:?}"
        );
        assert!(
            err.to_string().contains("stride 0 at dim 0"),
            "{device}: {err}"
        );
        assert_eq!(row.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0], "{device}");
    }
}

/// Outputs that are the updated input (itself, or a permuted view of it) hold the
/// values from before the call on both devices.
#[test]
fn other_outputs_of_an_updated_input_keep_the_old_values() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let t = fd.permute(x, &[1, 0]).unwrap();
    let two = fd.constant(2.0f32);
    let y = fd.mul(x, two).unwrap();
    fd.add_output(x).unwrap();
    fd.add_output(t).unwrap();
    fd.add_output_alias(y, x).unwrap();
    let fusion = fd.finish().unwrap();
    check(
        "outputs of the updated input",
        &fusion,
        &[input(DataType::F32, &[40, 70], View::Dense, 9)],
        2,
    );
    // Without the view: one pointwise kernel, which could write `x` itself.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let two = fd.constant(2.0f32);
    let y = fd.mul(x, two).unwrap();
    fd.add_output(x).unwrap();
    fd.add_output_alias(y, x).unwrap();
    let fusion = fd.finish().unwrap();
    let inputs = [input(DataType::F32, &[64, 1024], View::Dense, 10)];
    check("the updated input returned", &fusion, &inputs, 3);
}

/// An SGD step, `p <- p - lr * g`, on a contiguous aligned parameter: one pointwise
/// kernel that writes `p` straight into its buffer (no store after the call), also
/// when replayed.
#[test]
fn an_sgd_step_writes_the_parameter_directly() {
    let mut fd = FusionDefinition::new();
    let p = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let g = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let lr = fd.define_scalar(DataType::F64).unwrap();
    let gf = fd.cast(g, DataType::F32).unwrap();
    let step = fd.mul(gf, lr).unwrap();
    let next = fd.sub(p, step).unwrap();
    fd.add_output_alias(next, p).unwrap();
    let fusion = fd.finish().unwrap();
    let p0 = HostTensor::random(DataType::F32, &[256, 1024], 31);
    let g0 = HostTensor::random(DataType::BF16, &[256, 1024], 32);
    let mut devices = vec![Device::cpu()];
    if require_gpu().is_some() {
        devices.push(Device::cuda(0).unwrap());
    }
    let mut results = Vec::new();
    for device in &devices {
        let exec = FusionExecutorCache::new(fusion.clone());
        let (pt, gt) = (
            device.tensor_from_host(&p0).unwrap(),
            device.tensor_from_host(&g0).unwrap(),
        );
        for _ in 0..3 {
            let args = [
                Arg::from(&pt),
                Arg::from(&gt),
                Arg::Scalar(ScalarValue::Float(0.01)),
            ];
            let out = exec.run(device, &args).unwrap();
            assert!(out[0].shares_buffer(&pt));
        }
        if device.is_gpu() {
            let stats = exec.stats();
            assert_eq!(stats.direct_in_place, 3, "{stats:?}");
            assert!(stats.replays >= 1, "{stats:?}");
        }
        results.push(pt.to_host_tensor().unwrap());
    }
    if let [c, g] = &results[..] {
        compare(g, c, Tolerance::for_dtype(DataType::F32)).unwrap();
    }
}

/// An update that does not read the input it replaces (`x <- 2 w`) beside an output
/// that reads the old `x` (`x + 1`), and one whose input is read twice: neither may be
/// written before every read of the old values.
#[test]
fn updates_beside_readers_of_the_old_values() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let w = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let two = fd.constant(2.0f32);
    let one = fd.constant(1.0f32);
    let y = fd.mul(w, two).unwrap();
    fd.add_output_alias(y, x).unwrap();
    let z = fd.add(x, one).unwrap();
    fd.add_output(z).unwrap();
    let fusion = fd.finish().unwrap();
    for shape in [[64usize, 1024], [7, 13]] {
        let inputs = [
            input(DataType::F32, &shape, View::Dense, 41),
            input(DataType::F32, &shape, View::Dense, 42),
        ];
        check(
            &format!("independent update {shape:?}"),
            &fusion,
            &inputs,
            2,
        );
    }
    for shape in [[64usize, 1024], [7, 13], [1, 4096]] {
        let fusion = update(DataType::F32, false, false);
        check(
            &format!("two readers {shape:?}"),
            &fusion,
            &[input(DataType::F32, &shape, View::Dense, 43)],
            2,
        );
    }
}
