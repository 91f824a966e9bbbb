// `as` casts and `cast(x, dtype)` to every dtype.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn casts(x: Tensor<f32, [N]>) -> (
        Tensor<bool, [N]>, Tensor<i32, [N]>, Tensor<i64, [N]>, Tensor<f16, [N]>,
        Tensor<bf16, [N]>, Tensor<f32, [N]>, Tensor<f64, [N]>,
    ) {
        let h = x as f16;
        let b = cast(h, bf16);
        (x as bool, b as i32, x.cast(i64), h, b, x as f32, (b as f64) * 2.0)
    }
}

fn main() {
    let f = casts_fusion().expect("casts");
    assert_eq!(f.outputs().len(), 7);
}
