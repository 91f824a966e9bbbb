// Reductions with and without keepdim, with a dtype, var, and the tuple-returning var_mean
// and welford.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn reductions(x: Tensor<f32, [N, H]>, i: Tensor<i32, [N, H]>) -> (
        Tensor<f32, [N]>, Tensor<f32, [N, 1]>, Tensor<i64, [N]>, Tensor<f32, [_]>,
        Tensor<f32, [N]>, Tensor<f32, [N]>, Tensor<f32, [H]>, Tensor<i64, [H]>,
        Tensor<i32, [N]>, Tensor<f64, [N, 1]>,
    ) {
        let s = x.sum([1]) + x.max([-1]) - min(x, [1]) + x.prod(1) + x.mean([1]);
        let k = x.sum([1], keepdim = true) * x.var([1], 0, true);
        let n = i.sum([1]);
        let all = x.var([0, 1], correction = 0).unsqueeze(0);
        let (var, mean) = x.var_mean([1]);
        let m = x.var_mean([1], 1).1;
        let (wm, _, count) = x.welford([0]);
        let n32 = i.sum([1], dtype = i32);
        let m64 = x.mean([1], keepdim = true, dtype = f64);
        (s, k, n, all, var, mean + m, wm, count, n32, m64)
    }
}

fn main() {
    let f = reductions_fusion().expect("reductions");
    assert_eq!(f.outputs().len(), 10);
}
