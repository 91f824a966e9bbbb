// The scans: cumsum, cumprod, cummax and cummin as methods and free calls, with a keyword
// or a negative axis; bool sums promote to i64, half sums run in f32; a 0-d scan; cumsum
// with a dtype (PyTorch's `dtype=`).
#![deny(warnings)]

use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    fn scans(x: Tensor<f32, [N, H]>, b: Tensor<bool, [N, H]>, h: Tensor<f16, [N, H]>, z: Tensor<i32, []>) -> (
        Tensor<f32, [N, H]>, Tensor<f32, [N, H]>, Tensor<i64, [N, H]>, Tensor<bool, [N, H]>,
        Tensor<f16, [N, H]>, Tensor<i64, []>, Tensor<f32, [N, H]>, Tensor<i32, []>,
    ) {
        let s = x.cumsum(1) + cumprod(x, axis = 0);
        let m = x.cummax(-1) - cummin(x, -2);
        let hs32 = h.cumsum(1, dtype = f32);
        (s, m, b.cumsum(0), b.cummin(axis = 1), h.cumsum(-1), z.cumprod(0), hs32, cumsum(z, axis = 0, dtype = i32))
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let f = scans_fusion()?;
    let names: Vec<&str> = f.exprs().map(|(_, e)| e.op.name()).collect();
    for op in ["cumsum", "cumprod", "cummax", "cummin"] {
        assert!(names.contains(&op), "{op} missing from {names:?}");
    }
    let cpu = Device::cpu();
    let x = cpu.tensor_from_slice(&[1.0f32, 2.0, 3.0, -4.0], [2, 2])?;
    let b = cpu.tensor_from_slice(&[true, false, true, true], [2, 2])?;
    let h = cpu.tensor_from_slice(
        &[f16::from_f32(0.5), f16::from_f32(0.25), f16::ONE, f16::ONE],
        [2, 2],
    )?;
    let z = cpu.tensor_from_slice(&[7i32], [])?;
    let (s, m, c, a, hs, zp, h32, zs) = scans(&cpu, &x, &b, &h, &z)?;
    // cumsum along rows [1, 3, 3, -1] plus cumprod down columns [1, 2, 3, -8].
    assert_eq!(s.to_vec::<f32>()?, vec![2.0, 5.0, 6.0, -9.0]);
    // cummax along rows [1, 2, 3, 3] minus cummin down columns [1, 2, 1, -4].
    assert_eq!(m.to_vec::<f32>()?, vec![0.0, 0.0, 2.0, 7.0]);
    assert_eq!(c.to_vec::<i64>()?, vec![1, 0, 2, 1]);
    assert_eq!(a.to_vec::<bool>()?, vec![true, false, true, true]);
    assert_eq!(
        hs.to_vec::<f16>()?,
        vec![
            f16::from_f32(0.5),
            f16::from_f32(0.75),
            f16::ONE,
            f16::from_f32(2.0)
        ]
    );
    assert_eq!(zp.to_vec::<i64>()?, vec![7]);
    assert_eq!(h32.to_vec::<f32>()?, vec![0.5, 0.75, 1.0, 2.0]);
    assert_eq!(zs.to_vec::<i32>()?, vec![7]);
    Ok(())
}
