//! `fusion!` with the fp8 types: fp8 tensor and scalar parameters, `as f8e4m3` /
//! `as f8e5m2`, fp8 literals, run through the typed entry point on the CPU reference
//! device with hand-checked bytes.

use nvfuser::prelude::*;

fusion! {
    /// Scales an e4m3 tensor by an e4m3 scalar (computed in f32, rounded once), also
    /// returned as e5m2 and as the f32 row sums of the scaled values.
    pub fn scale_fp8(x: Tensor<f8e4m3, [N, H]>, s: f8e4m3)
        -> (Tensor<f8e4m3, [N, H]>, Tensor<f8e5m2, [N, H]>, Tensor<f32, [N]>)
    {
        let y = x * s + 0.0f8e4m3;
        (y, (y as f32) as f8e5m2, (y as f32).sum([1]))
    }

    /// Quantizes f32 to e4m3 and back.
    pub fn quantize(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        (x as f8e4m3) as f32
    }
}

#[test]
fn fp8_entry_points_run_on_the_cpu_device() {
    let cpu = Device::cpu();
    let xs: Vec<f8e4m3> = [1.0f32, -2.0, 3.0, 448.0, 0.1, 20.0]
        .map(f8e4m3::from_f32)
        .to_vec();
    let x = cpu.tensor_from_slice(&xs, [2, 3]).unwrap();
    let (y, z, sums) = scale_fp8(&cpu, &x, f8e4m3::from_f32(1.5)).unwrap();
    assert_eq!(y.dtype(), DataType::F8E4M3);
    assert_eq!(z.dtype(), DataType::F8E5M2);
    // 1.5, -3, 4.5, 672 -> NaN (above 464), 0.1015625 * 1.5 = 0.15234375 -> 0.15625
    // (1.25 * 2^-3), 30.
    let y: Vec<u8> = y
        .to_vec::<f8e4m3>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(y, [0x3c, 0xc4, 0x49, 0x7f, 0x22, 0x5f]);
    // e5m2: 1.5 (0x3e), -3 (0xc2), 4.5 -> 4 (tie between 4 and 5: even), NaN, 0.15625
    // (0x31: 1.25 * 2^-3), 30 -> 32 (0x50: the tie between 28, mantissa 11, and 32).
    let z: Vec<u8> = z
        .to_vec::<f8e5m2>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(z, [0x3e, 0xc2, 0x44, 0x7f, 0x31, 0x50]);
    let sums = sums.to_vec::<f32>().unwrap();
    assert_eq!(sums[0], 1.5 - 3.0 + 4.5);
    assert!(sums[1].is_nan());

    let v = cpu
        .tensor_from_slice(&[0.1f32, 449.0, 465.0, -1e-3], [4])
        .unwrap();
    let q = quantize(&cpu, &v).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(q[..2], [0.1015625, 448.0]);
    assert!(q[2].is_nan());
    // -1e-3 = -0.512 * 2^-9: nearer one unit than zero.
    assert_eq!(q[3], -(2f32.powi(-9)));
}

#[test]
fn an_fp8_tensor_of_the_wrong_type_is_refused() {
    let cpu = Device::cpu();
    let x = cpu
        .tensor_from_slice(&[f8e5m2::from_f32(1.0); 6], [2, 3])
        .unwrap();
    let err = scale_fp8(&cpu, &x, f8e4m3::from_f32(1.0)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("f8e4m3") && text.contains("f8e5m2"), "{text}");
}
