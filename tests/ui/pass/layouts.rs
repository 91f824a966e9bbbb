// Parameter layouts: contiguity, stride order, expanded dims, static sizes, broadcast dims.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn layouts(
        #[layout(contiguity = [false, true], stride_order = [0, 1])] t: Tensor<f32, [N, H]>,
        #[layout(expanded = [0])] e: Tensor<f32, [N, H]>,
        #[layout(static_sizes = true)] s: Tensor<f32, [1, 8]>,
        #[layout(contiguity = false)] c: Tensor<f32, [N, 1]>,
        b: Tensor<f32, [1, H]>,
    ) -> Tensor<f32, [N, H]> {
        t + e + c + b + s.sum([0, 1])
    }
}

fn main() {
    let f = layouts_fusion().expect("layouts");
    assert_eq!(f.inputs().len(), 5);
}
