//! `Fusion::extents()`: every input extent with nvFuser's signed ids (entry `k` is
//! `-(k + 1)`), and the segment printer's ids agree with it.

use nvfuser_core::ir::ExtentRef;
use nvfuser_core::prelude::*;
use nvfuser_core::segment::{SegmentValue, SegmentedFusion};

#[test]
fn every_dim_of_every_tensor_input_in_order() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F32).unwrap();
    let w = fd.define_tensor(DataType::BF16, &[1, -1, 4]).unwrap();
    let z = fd.define_tensor(DataType::F32, &[]).unwrap();
    let y = fd.mul(x, s).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(w).unwrap();
    fd.add_output(z).unwrap();
    let f = fd.finish().unwrap();
    let e = |tensor, axis| ExtentRef { tensor, axis };
    // The scalar and the 0-d tensor contribute nothing; the size-1 and constant dims of
    // `w` are listed like the others.
    assert_eq!(
        f.extents(),
        vec![e(x, 0), e(x, 1), e(w, 0), e(w, 1), e(w, 2)]
    );
    assert_eq!(f.extent_id(e(x, 0)), Some(-1));
    assert_eq!(f.extent_id(e(x, 1)), Some(-2));
    assert_eq!(f.extent_id(e(w, 0)), Some(-3));
    assert_eq!(f.extent_id(e(w, 2)), Some(-5));
    // Not an input tensor's dim: no id.
    assert_eq!(f.extent_id(e(w, 3)), None);
    assert_eq!(f.extent_id(e(y, 0)), None);
    assert_eq!(f.extent_id(e(s, 0)), None);
    for (k, &x) in f.extents().iter().enumerate() {
        assert_eq!(
            SegmentValue::Extent(x).id(&f.extents()),
            Some(-(k as i64) - 1)
        );
        assert_eq!(f.extent_id(x), Some(-(k as i64) - 1));
    }
    assert_eq!(e(w, 1).to_string(), format!("T{}.size(1)", w.id()));
}

/// A segment that receives only the size of the second input prints nvFuser's id -2
/// for it, not its position (-1) among the extents segments read.
#[test]
fn the_segment_printer_uses_the_fusion_wide_ids() {
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let b = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let a1 = fd.relu(a).unwrap();
    fd.add_output(a1).unwrap();
    let y = fd.relu(b).unwrap();
    let z = fd.segment_set(y).unwrap();
    let v = fd.exp(z).unwrap();
    fd.add_output(v).unwrap();
    let f = fd.finish().unwrap();
    let seg = SegmentedFusion::new(&f).unwrap();
    let b0 = ExtentRef { tensor: b, axis: 0 };
    assert_eq!(seg.extents(), &[b0], "{seg}");
    assert_eq!(f.extent_id(b0), Some(-2));
    let text = seg.to_string();
    assert!(text.contains(&format!("{b0} (extent id -2)")), "{text}");
}
