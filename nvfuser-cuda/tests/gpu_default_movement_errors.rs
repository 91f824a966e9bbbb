//! Values that would make a kernel of the default schedule's movement fusions (select,
//! slice, reshape, gather; see `gpu_default_movement`) read outside its input: typed
//! errors before any launch, on the GPU through `FusionExecutorCache` (skipped without a
//! GPU, required with `NVFUSER_REQUIRE_GPU=1`) as on the CPU reference.
//!
//! ```text
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_default_movement_errors -- --nocapture
//! ```

mod common;

use common::{gpu, indices, int, out1, rnd};
use nvfuser_core::builder::{Size, Slice};
use nvfuser_core::eval::EvalInput;
use nvfuser_core::{DataType, Fusion, FusionDefinition};

/// Values that would make a kernel read outside its input are typed errors before the
/// launch, as on the CPU reference: a select index out of range (constant or scalar),
/// a scalar slice bound outside `0..=size`, reshape sizes with another element count,
/// a gather index larger than the input in a non-gathered dim.
#[test]
fn out_of_range_movement_values_are_typed_errors() {
    use DataType::*;
    let mut cases: Vec<(&str, Fusion, Vec<EvalInput>)> = Vec::new();
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1, -1]).unwrap();
    let i = fd.define_scalar(I64).unwrap();
    let sel = fd.select(x, 1, Size::Val(i)).unwrap();
    let f = out1(fd, sel);
    cases.push((
        "select index 7 of 7",
        f.clone(),
        vec![rnd(F32, &[2, 7, 3], 1), int(7)],
    ));
    cases.push((
        "select index -8 of 7",
        f,
        vec![rnd(F32, &[2, 7, 3], 1), int(-8)],
    ));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let b = fd.define_tensor(F32, &[-1]).unwrap();
    let sel = fd.select(x, 0, Size::Const(1)).unwrap();
    let y = fd.add(sel, b).unwrap();
    cases.push((
        "select constant index 1 of 1",
        out1(fd, y),
        vec![rnd(F32, &[1, 5], 2), rnd(F32, &[5], 3)],
    ));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let start = fd.define_scalar(I64).unwrap();
    let sl = fd
        .slice(x, &[Slice::range(Size::Val(start), i64::MAX), Slice::all()])
        .unwrap();
    let f = out1(fd, sl);
    cases.push((
        "slice start -1",
        f.clone(),
        vec![rnd(F32, &[4, 5], 4), int(-1)],
    ));
    cases.push(("slice start 5 of 4", f, vec![rnd(F32, &[4, 5], 4), int(5)]));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let n = fd.define_scalar(I64).unwrap();
    let m = fd.define_scalar(I64).unwrap();
    let r = fd.reshape(x, &[Size::Val(n), Size::Val(m)]).unwrap();
    cases.push((
        "reshape 12 elements to 4 x 4",
        out1(fd, r),
        vec![rnd(F32, &[3, 4], 5), int(4), int(4)],
    ));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let idx = fd.define_tensor(I64, &[-1, -1]).unwrap();
    let g = fd.gather(x, 1, idx).unwrap();
    cases.push((
        "gather index with more rows than the input",
        out1(fd, g),
        vec![rnd(F32, &[3, 4], 6), indices(I64, &[5, 2], 4, 7)],
    ));
    for (name, f, inputs) in &cases {
        assert!(
            nvfuser_core::eval::evaluate(f, inputs).is_err(),
            "{name}: the CPU reference accepts it"
        );
    }
    let Some(device) = gpu() else { return };
    let mut refused = 0;
    for (name, f, inputs) in &cases {
        let tensors = common::upload(&device, inputs);
        let exec = nvfuser_cuda::FusionExecutorCache::new(f.clone());
        match exec.run(&device, &common::args(inputs, &tensors)) {
            Err(nvfuser_cuda::Error::InvalidTensor {
                op,
                expected,
                found,
            }) => {
                println!("{name}: {op}: expected {expected}, found {found}");
                refused += 1;
            }
            // Sizes the fusion ties (a gather index larger than its input) are refused
            // by the shared argument check before any planning.
            Err(nvfuser_cuda::Error::Core(e @ nvfuser_core::Error::ArgumentSizes { .. })) => {
                println!("{name}: {e}");
                refused += 1;
            }
            other => panic!("{name}: expected a typed error, got {other:?}"),
        }
    }
    // The device is still healthy: no kernel read out of bounds.
    device.synchronize().unwrap();
    println!("{refused} out-of-range calls refused before launch");
}
