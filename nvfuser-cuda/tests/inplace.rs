//! In-place outputs (`add_output_alias`) on the CPU device: the value is stored into the
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

/// GPU kernels do not store into inputs yet: planning refuses an in-place output with a
/// typed error, also when a `segment_set` would split the fusion (a segment's outputs
/// never alias an input, so a segmented plan would return the value without storing it).
#[test]
fn gpu_planning_refuses_in_place_outputs_segmented_or_not() {
    use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[(DataType::F32, &[4, 8][..])],
    );
    for boundary in [false, true] {
        let err = FusionExecutorCache::new(update(boundary))
            .plan_for(&info, None)
            .unwrap_err();
        assert!(matches!(err, Error::UnsupportedFusion { .. }), "{err:?}");
        assert!(
            err.to_string().contains("the in-place output v")
                && err
                    .to_string()
                    .contains("GPU kernels do not store into inputs yet"),
            "{err}"
        );
    }
    // On a GPU (when there is one) the call is refused the same way and the input keeps
    // its values.
    let Some(_gpu) = nvfuser_cuda::testing::require_gpu() else {
        return;
    };
    let gpu = Device::cuda(0).unwrap();
    let x = gpu.tensor_from_slice(&[1.0f32; 6], [2, 3]).unwrap();
    for boundary in [false, true] {
        let err = FusionExecutorCache::new(update(boundary))
            .run(&gpu, &[Arg::from(&x)])
            .unwrap_err();
        assert!(matches!(err, Error::UnsupportedFusion { .. }), "{err:?}");
        let err = SegmentedRuntime::new(update(boundary))
            .unwrap()
            .run(&gpu, &[Arg::from(&x)])
            .unwrap_err();
        assert!(matches!(err, Error::UnsupportedFusion { .. }), "{err:?}");
    }
    assert_eq!(x.to_vec::<f32>().unwrap(), [1.0; 6]);
}
