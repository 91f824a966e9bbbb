//! In-place outputs (`add_output_alias`) on the CPU device (the GPU's are compared with
//! these in `gpu_inplace.rs`): the value is stored into the
//! input's buffer, seen through the input tensor and every view of it, and the returned
//! output is the input tensor itself; other outputs read the input's values from before
//! the call. Also through strided views, through the segmented runtime, and refused
//! (typed) for a view whose elements share memory.

use nvfuser_core::prelude::*;
use nvfuser_cuda::{Arg, Device, Error, FusionExecutorCache, SegmentedRuntime};

/// `x <- x * 2 + 1` in place, and `x + 10` (of the old `x`) as a second output;
/// `boundary` puts a `segment_set` between the two steps.
fn update(boundary: bool) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let two = fd.constant(2.0f32);
    let one = fd.constant(1.0f32);
    let ten = fd.constant(10.0f32);
    let mut y = fd.mul(x, two).unwrap();
    if boundary {
        y = fd.segment_set(y).unwrap();
    }
    let y = fd.add(y, one).unwrap();
    let z = fd.add(x, ten).unwrap();
    fd.add_output_alias(y, x).unwrap();
    fd.add_output(z).unwrap();
    fd.finish().unwrap()
}

#[test]
fn in_place_outputs_are_stored_into_the_input() {
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(update(false));
    let x = cpu
        .tensor_from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3])
        .unwrap();
    let view = x.slice(1, 1, 3, 1).unwrap();
    let out = exec.run(&cpu, &[Arg::from(&x)]).unwrap();
    assert_eq!(
        x.to_vec::<f32>().unwrap(),
        [3.0, 5.0, 7.0, 9.0, 11.0, 13.0],
        "the input holds the new values"
    );
    assert_eq!(
        view.to_vec::<f32>().unwrap(),
        [5.0, 7.0, 11.0, 13.0],
        "so do its views"
    );
    assert_eq!(out[0].to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        [11.0, 12.0, 13.0, 14.0, 15.0, 16.0],
        "other outputs read the values from before the call"
    );
    // Twice more: the update compounds.
    exec.run(&cpu, &[Arg::from(&x)]).unwrap();
    exec.run(&cpu, &[Arg::from(&x)]).unwrap();
    assert_eq!(
        x.to_vec::<f32>().unwrap()[0],
        ((3.0 * 2.0 + 1.0) * 2.0 + 1.0)
    );
}

#[test]
fn in_place_outputs_go_through_strided_views() {
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(update(false));
    // A transposed view of a [3, 2] buffer: the fusion sees [[1, 3, 5], [2, 4, 6]].
    let base = cpu
        .tensor_from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [3, 2])
        .unwrap();
    let t = base.permute(&[1, 0]).unwrap();
    let mut fd = FusionDefinition::new();
    let x = fd
        .define_tensor_from_strides(DataType::F32, &[2, 3], &[1, 2], false)
        .unwrap();
    let two = fd.constant(2.0f32);
    let y = fd.mul(x, two).unwrap();
    fd.add_output_alias(y, x).unwrap();
    let strided = FusionExecutorCache::new(fd.finish().unwrap());
    strided.run(&cpu, &[Arg::from(&t)]).unwrap();
    assert_eq!(
        base.to_vec::<f32>().unwrap(),
        [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    );
    assert_eq!(t.to_vec::<f32>().unwrap(), [2.0, 6.0, 10.0, 4.0, 8.0, 12.0]);
    // A view whose elements share memory cannot be written in place.
    let row = cpu.tensor_from_slice(&[1.0f32, 2.0, 3.0], [1, 3]).unwrap();
    let expanded = row.expand(&[2, 3]).unwrap();
    let mut fd = FusionDefinition::new();
    let x = fd
        .define_tensor_from_strides(DataType::F32, &[2, 3], &[0, 1], false)
        .unwrap();
    let y = fd.neg(x).unwrap();
    fd.add_output_alias(y, x).unwrap();
    let err = FusionExecutorCache::new(fd.finish().unwrap())
        .run(&cpu, &[Arg::from(&expanded)])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidTensor { .. }), "{err:?}");
    assert!(err.to_string().contains("stride 0 at dim 0"), "{err}");
    assert_eq!(
        row.to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0],
        "left as it was"
    );
    let _ = exec;
}

#[test]
fn in_place_outputs_of_segmented_fusions() {
    let cpu = Device::cpu();
    let rt = SegmentedRuntime::new(update(true)).unwrap();
    assert!(rt.segmented().segments().len() >= 2);
    let x = cpu
        .tensor_from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3])
        .unwrap();
    let out = rt.run(&cpu, &[Arg::from(&x)]).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [3.0, 5.0, 7.0, 9.0, 11.0, 13.0]);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        [11.0, 12.0, 13.0, 14.0, 15.0, 16.0]
    );
    // The executor segments at the boundary by itself, with the same result.
    let y = cpu.tensor_from_slice(&[1.0f32; 6], [2, 3]).unwrap();
    FusionExecutorCache::new(update(true))
        .run(&cpu, &[Arg::from(&y)])
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [3.0; 6]);
}

/// GPU planning computes an in-place output like any other output (the runtime stores it
/// into its input after the kernels; `tests/gpu_inplace.rs` runs it): one kernel, or a
/// segment per side of a `segment_set`, none of whose outputs alias an input.
#[test]
fn gpu_planning_computes_in_place_outputs_as_plain_outputs() {
    use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[(DataType::F32, &[4, 8][..])],
    );
    for (boundary, kernels) in [(false, 1), (true, 2)] {
        let plan = FusionExecutorCache::new(update(boundary))
            .plan_for(&info, None)
            .unwrap();
        assert_eq!(plan.kernels().count(), kernels, "boundary {boundary}");
        for segment in &plan.segments {
            assert!(segment
                .fusion
                .outputs()
                .iter()
                .all(|o| o.alias_of.is_none()));
        }
    }
}

/// The input an output updates, returned as another output too (itself, and through a
/// view), keeps its values from before the call in those outputs: they are not views
/// of the updated buffer.
fn update_and_return_the_input() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let t = fd.permute(x, &[1, 0]).unwrap();
    let two = fd.constant(2.0f32);
    let y = fd.mul(x, two).unwrap();
    fd.add_output(x).unwrap();
    fd.add_output(t).unwrap();
    fd.add_output_alias(y, x).unwrap();
    fd.finish().unwrap()
}

#[test]
fn other_outputs_of_an_updated_input_hold_its_old_values() {
    let cpu = Device::cpu();
    let x = cpu
        .tensor_from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3])
        .unwrap();
    let out = FusionExecutorCache::new(update_and_return_the_input())
        .run(&cpu, &[Arg::from(&x)])
        .unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    assert_eq!(
        out[0].to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    assert!(!out[0].shares_buffer(&x) && !out[1].shares_buffer(&x));
    assert!(out[2].shares_buffer(&x));
}
