//! Tensors on the CPU reference device, through the public API only: uploads and
//! downloads of every dtype, 0-d and empty tensors, copy-free views gathered on
//! download, alignment, and typed errors for wrong lengths, types and shapes.
//!
//! The same view logic serves GPU tensors (`gpu_device.rs` compares the two).

use half::{bf16, f16};
use nvfuser_core::eval::HostTensor;
use nvfuser_core::DataType;
use nvfuser_cuda::{Device, Error, KernelCache, Tensor};

fn cpu() -> Device {
    Device::cpu()
}

#[test]
fn host_tensors_round_trip_every_dtype() {
    let d = cpu();
    let t = d.tensor_from_slice(&[1.5f32, -2.0, 3.25], [3]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.5, -2.0, 3.25]);
    let t = d.tensor_from_slice(&[1.5f64], [1, 1]).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), [1.5]);
    let halves = [f16::from_f32(0.5), f16::from_f32(-1.0)];
    assert_eq!(
        d.tensor_from_slice(&halves, [2])
            .unwrap()
            .to_vec::<f16>()
            .unwrap(),
        halves
    );
    let bhalves = [bf16::from_f32(0.5), bf16::from_f32(-1.0)];
    assert_eq!(
        d.tensor_from_slice(&bhalves, [2])
            .unwrap()
            .to_vec::<bf16>()
            .unwrap(),
        bhalves
    );
    assert_eq!(
        d.tensor_from_slice(&[7i32, -7], [2])
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [7, -7]
    );
    assert_eq!(
        d.tensor_from_slice(&[i64::MIN], [1])
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [i64::MIN]
    );
    assert_eq!(
        d.tensor_from_slice(&[true, false], [2])
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true, false]
    );
}

#[test]
fn zero_d_and_empty_tensors() {
    let d = cpu();
    let s = d.tensor_from_slice(&[42i64], []).unwrap();
    assert_eq!((s.rank(), s.numel()), (0, 1));
    assert_eq!(s.to_vec::<i64>().unwrap(), [42]);
    assert_eq!(s.unsqueeze(0).unwrap().sizes(), &[1]);
    let e = d.tensor_from_slice::<f32>(&[], [0, 3]).unwrap();
    assert_eq!(e.numel(), 0);
    assert!(e.to_vec::<f32>().unwrap().is_empty());
    assert!(e
        .permute(&[1, 0])
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .is_empty());
    let z = d.zeros(DataType::BF16, [2, 0]).unwrap();
    assert!(z.to_vec::<bf16>().unwrap().is_empty());
}

#[test]
fn zeros_are_zero_in_every_dtype() {
    let d = cpu();
    for dtype in DataType::ALL {
        let z = d.zeros(dtype, [3]).unwrap();
        assert_eq!(z.dtype(), dtype);
        assert_eq!(z.buffer_bytes(), 3 * dtype.size_bytes());
    }
    assert_eq!(
        d.zeros(DataType::F32, [2])
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [0.0; 2]
    );
    assert_eq!(
        d.zeros(DataType::Bool, [2])
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [false; 2]
    );
}

#[test]
fn wrong_lengths_and_types_are_typed_errors() {
    let d = cpu();
    let err = d.tensor_from_slice(&[1.0f32, 2.0], [3]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Device::tensor_from_slice: expected 3 values for shape [3], found 2 values"
    );
    let t = d.tensor_from_slice(&[1.0f32], [1]).unwrap();
    let err = t.to_vec::<f64>().unwrap_err();
    assert!(matches!(
        err,
        Error::DtypeMismatch {
            expected: DataType::F64,
            found: DataType::F32,
            ..
        }
    ));
    assert!(d.zeros(DataType::F64, [usize::MAX, 2]).is_err());
    assert!(d.zeros(DataType::F64, [usize::MAX / 4]).is_err());
}

#[test]
fn views_gather_like_the_host_would() {
    let d = cpu();
    let values: Vec<i32> = (0..24).collect();
    let t = d.tensor_from_slice(&values, [2, 3, 4]).unwrap();
    // permute(2, 0, 1): out[k][i][j] = t[i][j][k] = 12i + 4j + k.
    let p = t.permute(&[2, 0, 1]).unwrap();
    let expected: Vec<i32> = (0..4)
        .flat_map(|k| (0..2).flat_map(move |i| (0..3).map(move |j| 12 * i + 4 * j + k)))
        .collect();
    assert_eq!(p.to_vec::<i32>().unwrap(), expected);
    assert!(!p.is_contiguous());
    // slice(1, 1, 3, 1) then slice(2, 0, 4, 2).
    let s = t.slice(1, 1, 3, 1).unwrap().slice(2, 0, 4, 2).unwrap();
    assert_eq!(s.sizes(), &[2, 2, 2]);
    assert_eq!(s.to_vec::<i32>().unwrap(), [4, 6, 8, 10, 16, 18, 20, 22]);
    // A copy to the same device is contiguous and equal.
    let c = s.to_device(&d).unwrap();
    assert!(c.is_contiguous());
    assert_eq!(c.to_vec::<i32>().unwrap(), s.to_vec::<i32>().unwrap());
}

#[test]
fn alignment_follows_the_offset() {
    let d = cpu();
    let t = d.zeros(DataType::F32, [64]).unwrap();
    assert_eq!(t.data_alignment(), 256);
    assert_eq!(t.slice(0, 1, 64, 1).unwrap().data_alignment(), 4);
    assert_eq!(t.slice(0, 2, 64, 1).unwrap().data_alignment(), 8);
    assert_eq!(t.slice(0, 4, 64, 1).unwrap().data_alignment(), 16);
    assert!(t.cuda_address().is_none());
}

#[test]
fn handles_are_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Tensor>();
    send_sync::<Device>();
    send_sync::<KernelCache>();
}

#[test]
fn debug_names_the_view() {
    let t = cpu()
        .zeros(DataType::F16, [2, 3])
        .unwrap()
        .permute(&[1, 0])
        .unwrap();
    assert_eq!(
        format!("{t:?}"),
        "Tensor(f16[3, 2], strides [1, 3], offset 0, on cpu)"
    );
}

#[test]
fn bad_views_are_typed_errors_that_say_what_was_expected() {
    let t = cpu().zeros(DataType::F32, [2, 3]).unwrap();
    let cases: Vec<(Result<Tensor, Error>, &str)> = vec![
        (
            t.permute(&[0]),
            "expected a permutation of 2 dims, found 1 dims [0]",
        ),
        (
            t.permute(&[0, 0]),
            "expected each of the 2 dims exactly once",
        ),
        (
            t.permute(&[0, 2]),
            "expected an axis in -2..2 for a rank-2 tensor, found axis 2",
        ),
        (
            t.slice(0, 0, 2, 0),
            "expected a step of at least 1, found step 0",
        ),
        (t.slice(-3, 0, 2, 1), "found axis -3"),
        (t.expand(&[4, 3]), "size 2 (or -1) for dim 0"),
        (t.expand(&[3]), "expected at least 2 sizes"),
        (
            t.expand(&[-2, 2, 3]),
            "expected a size >= 0 for the new leading dim 0",
        ),
        (t.unsqueeze(3), "found axis 3"),
    ];
    for (result, needle) in cases {
        let err = result.expect_err(needle);
        assert!(matches!(err, Error::InvalidTensor { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err:?} lacks {needle:?}");
    }
}

/// A logical array: the reference the views are checked against, computed by plain
/// index arithmetic on materialized values (no strides involved).
#[derive(Clone, Debug, PartialEq)]
struct Logical {
    shape: Vec<usize>,
    data: Vec<i64>,
}

impl Logical {
    /// Builds `shape` by asking `source` for the flat index (into `self.data`) of each
    /// output multi-index, in row-major order.
    fn gather(&self, shape: Vec<usize>, source: impl Fn(&[usize]) -> Vec<usize>) -> Logical {
        let numel: usize = shape.iter().product();
        let mut data = Vec::with_capacity(numel);
        let mut index = vec![0usize; shape.len()];
        for _ in 0..numel {
            let input = source(&index);
            let mut flat = 0;
            for (d, &i) in input.iter().enumerate() {
                flat = flat * self.shape[d] + i;
            }
            data.push(self.data[flat]);
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Logical { shape, data }
    }

    fn permute(&self, dims: &[usize]) -> Logical {
        let shape = dims.iter().map(|&d| self.shape[d]).collect();
        self.gather(shape, |out| {
            let mut input = vec![0; dims.len()];
            for (i, &d) in dims.iter().enumerate() {
                input[d] = out[i];
            }
            input
        })
    }

    fn slice(&self, axis: usize, start: usize, stop: usize, step: usize) -> Logical {
        let mut shape = self.shape.clone();
        shape[axis] = (start..stop).step_by(step).count();
        self.gather(shape, |out| {
            let mut input = out.to_vec();
            input[axis] = start + out[axis] * step;
            input
        })
    }

    fn expand(&self, shape: Vec<usize>) -> Logical {
        let lead = shape.len() - self.shape.len();
        self.gather(shape, |out| {
            out[lead..]
                .iter()
                .zip(&self.shape)
                .map(|(&i, &size)| if size == 1 { 0 } else { i })
                .collect()
        })
    }

    fn unsqueeze(&self, axis: usize) -> Logical {
        let mut shape = self.shape.clone();
        shape.insert(axis, 1);
        self.gather(shape, |out| {
            let mut input = out.to_vec();
            input.remove(axis);
            input
        })
    }
}

/// SplitMix64, for reproducible random cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_view_chains_match_a_logical_reference() {
    let mut rng = Rng(2024);
    for case in 0..300 {
        let rank = rng.below(4);
        let shape: Vec<usize> = (0..rank).map(|_| rng.below(5)).collect();
        let numel: usize = shape.iter().product();
        let data: Vec<i64> = (0..numel as i64).map(|v| v * 7 - 3).collect();
        let mut tensor = cpu().tensor_from_slice(&data, &shape).unwrap();
        let mut reference = Logical { shape, data };
        let mut ops = Vec::new();
        for _ in 0..4 {
            let rank = reference.shape.len();
            match rng.below(4) {
                0 if rank > 0 => {
                    let mut dims: Vec<usize> = (0..rank).collect();
                    for i in (1..rank).rev() {
                        dims.swap(i, rng.below(i + 1));
                    }
                    let signed: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
                    tensor = tensor.permute(&signed).unwrap();
                    reference = reference.permute(&dims);
                    ops.push(format!("permute{dims:?}"));
                }
                1 if rank > 0 => {
                    let axis = rng.below(rank);
                    let size = reference.shape[axis];
                    let start = rng.below(size + 1);
                    let stop = start + rng.below(size - start + 1);
                    let step = 1 + rng.below(3);
                    tensor = tensor
                        .slice(axis as i64, start as i64, stop as i64, step as i64)
                        .unwrap();
                    reference = reference.slice(axis, start, stop, step);
                    ops.push(format!("slice({axis}, {start}, {stop}, {step})"));
                }
                2 => {
                    let lead = rng.below(2);
                    let mut target: Vec<usize> = (0..lead).map(|_| rng.below(3)).collect();
                    for &size in &reference.shape {
                        target.push(if size == 1 { rng.below(4) } else { size });
                    }
                    let signed: Vec<i64> = target.iter().map(|&s| s as i64).collect();
                    tensor = tensor.expand(&signed).unwrap();
                    reference = reference.expand(target.clone());
                    ops.push(format!("expand{target:?}"));
                }
                _ => {
                    let axis = rng.below(rank + 1);
                    tensor = tensor.unsqueeze(axis as i64).unwrap();
                    reference = reference.unsqueeze(axis);
                    ops.push(format!("unsqueeze({axis})"));
                }
            }
        }
        assert_eq!(tensor.sizes(), reference.shape, "case {case}: {ops:?}");
        assert_eq!(
            tensor.to_vec::<i64>().unwrap(),
            reference.data,
            "case {case}: {ops:?}"
        );
        let copy = tensor.to_device(&cpu()).unwrap();
        assert!(copy.is_contiguous());
        assert_eq!(copy.to_vec::<i64>().unwrap(), reference.data);
    }
}

/// Shapes too large for host memory are typed errors, not panics or allocation aborts:
/// a rank-64 shape whose element count overflows, a buffer no allocator grants, and an
/// expanded view (stride 0) whose copy would not fit.
#[test]
fn huge_shapes_and_views_are_errors_not_aborts() {
    let cpu = cpu();
    let err = cpu.zeros(DataType::F32, [2; 64]).unwrap_err();
    assert!(matches!(err, Error::InvalidTensor { .. }), "{err:?}");
    let err = cpu.zeros(DataType::F64, [1usize << 50]).unwrap_err();
    assert!(err.to_string().contains("bytes of host memory"), "{err}");
    let one = cpu.zeros(DataType::F32, [1]).unwrap();
    let view = one.expand(&[1 << 50]).unwrap();
    assert_eq!(view.numel(), 1 << 50);
    let err = view.to_vec::<f32>().unwrap_err();
    assert!(err.to_string().contains("bytes of host memory"), "{err}");
    assert!(view.to_host_tensor().is_err());
    let huge_host = HostTensor::zeros(DataType::F32, &[1 << 50]);
    assert!(matches!(
        huge_host,
        Err(nvfuser_core::Error::SizeLimit { .. })
    ));
}
