// broadcast, unsqueeze, squeeze, expand, reshape, permute, broadcast_in_dim, size.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn shapes(x: Tensor<f32, [N, H]>, v: Tensor<f32, [1, H]>, n: i64) -> (
        Tensor<f32, [H, N]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _, _]>, Tensor<f32, [_, H]>,
    ) {
        let t = x.permute([1, 0]);
        let r = x.reshape([x.size(0) * 2, -1]);
        let b = x.broadcast([true, false, false]).expand([n, -1, -1]);
        let w = v.squeeze([0]).unsqueeze(0).expand([x.size(0), -1]);
        let d = broadcast_in_dim(v.squeeze([0]), [4, x.size(1)], [1]);
        (t, r + 0.0, b, w + d.sum([0]).unsqueeze(0))
    }
}

fn main() {
    shapes_fusion().expect("shapes");
}
