// Unary, binary and ternary ops, as operators, methods and free functions.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    /// Float math.
    pub fn floats(x: Tensor<f32, [N, H]>, y: Tensor<f32, [H]>, s: f32)
        -> (Tensor<f32, [N, H]>, Tensor<f32, [N, H]>, Tensor<bool, [N, H]>)
    {
        let a = -x + y * s - x / 2.0 % 3.0;
        let b = exp(a).log1p().tanh().sigmoid().abs().sqrt() + a.rsqrt().reciprocal();
        let c = a.gelu() + a.gelu_tanh() + a.silu() + a.relu() + a.erf() + a.floor();
        let d = a.pow(2.0) + maximum(a, b) - minimum(b, c) + atan2(a, b) + truediv(a, b);
        let e = where_(a > b, c, d).lerp(b, 0.25).clamp(-1.0, 1.0).threshold(0.1, 0.0);
        let f = addcmul(e, a, b, 0.5) + remainder(a, 3.0);
        let m = (a == b) || (a != c) && !(a <= d) || a.isnan() || (a >= 0.0) && (a < 1.0);
        (e, f, m)
    }

    /// Integer and bool math.
    pub fn ints(a: Tensor<i32, [N]>, b: Tensor<i64, [N]>, m: Tensor<bool, [N]>)
        -> (Tensor<i64, [N]>, Tensor<bool, [N]>)
    {
        let x = (a & 7i32) | (b ^ 3) + (a << 1i32) + (b >> 2) + a.logical_shift_right(1i32);
        let x = !x + -x + x / 2 + x % 5 + x.abs() + x.sign();
        let y = !m && (x > 0) || m.bitwise_xor(m);
        (x, y)
    }
}

fn main() {
    let f = floats_fusion().expect("floats");
    assert!(f.num_exprs() > 30);
    let g = ints_fusion().expect("ints");
    assert_eq!(g.outputs().len(), 2);
}
