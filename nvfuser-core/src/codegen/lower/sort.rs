//! The lowering of a sort kernel: a fusion of one `sort`/`topk` expression whose
//! schedule carries a [`SortLayout`] becomes one call of the block sort,
//! `nvf_sort_rows` ([`crate::codegen::sort_support`]), with one block per
//! `rows_per_block` rows and the rows in dynamic shared memory. The parameters follow
//! the loop lowering's naming (`T0`, `T0_shape`, `s3`), inputs then outputs.

use super::super::abi::{IndexType, KernelAbi, Param, ParamKind};
use super::super::kir::{Expr, Func, Stmt};
use super::super::sort_support::{sort_shared_bytes, topk_shared_bytes};
use super::super::{Kernel, KernelOptions, LaunchDims};
use super::scalar_name;
use crate::dtype::{DataType, ScalarValue};
use crate::ir::{Extent, ExtentOp, IterKind, Op, ValId};
use crate::sched::{SchedResult, ScheduleError, ScheduledFusion, SortLayout};

fn unsupported<T>(why: impl Into<String>) -> SchedResult<T> {
    Err(ScheduleError::Unsupported(why.into()))
}

/// The kernel of the fusion's one sort, sorted as `layout` says.
pub(in crate::codegen) fn lower(
    sf: &ScheduledFusion,
    layout: SortLayout,
    opts: &KernelOptions,
) -> SchedResult<Kernel> {
    let f = sf.fusion();
    let s = sf.schedule();
    let [e] = s.exprs.as_slice() else {
        return unsupported("a sort kernel computes exactly one expression");
    };
    let Op::Sort {
        axis,
        descending,
        k,
    } = e.op
    else {
        return unsupported(format!("a sort kernel of {}", e.op.name()));
    };
    if layout.select > 0 && k.is_none_or(|k| k > layout.select) {
        return unsupported(format!(
            "a radix-select topk of {} slots for {} of k = {k:?}",
            layout.select,
            e.op.name()
        ));
    }
    let x = e.inputs[0];
    if f.input_position(x).is_none() {
        return unsupported("a sort kernel reads its input from global memory (a fusion input)");
    }
    let (values, indices) = (e.output, e.siblings[0]);
    let dtype = f.val(x).dtype;
    if dtype.is_fp8() {
        return unsupported("a sort of fp8 values");
    }
    let Some(tt) = f.tensor_type(x) else {
        return unsupported("a sort of a scalar");
    };
    let rank = tt.rank();
    // Parameters: every input (tensors as data + shape), then each output once.
    let mut params = Vec::new();
    let tensor = |v: ValId, input: bool, params: &mut Vec<Param>| {
        params.push(Param {
            name: format!("T{}", v.id()),
            kind: ParamKind::TensorData {
                tensor: v,
                dtype: f.val(v).dtype,
                input,
            },
        });
        // Each tensor's own rank: an unused input may have another rank than x.
        let rank = f.tensor_type(v).map_or(rank, |t| t.rank());
        params.push(Param {
            name: format!("T{}_shape", v.id()),
            kind: ParamKind::TensorShape { tensor: v, rank },
        });
    };
    for &v in &s.inputs {
        if f.val(v).is_tensor() {
            tensor(v, true, &mut params);
        } else {
            params.push(Param {
                name: scalar_name(v.id()),
                kind: ParamKind::Scalar {
                    val: v,
                    dtype: f.val(v).dtype,
                },
            });
        }
    }
    for (k, &v) in s.outputs.iter().enumerate() {
        if v != values && v != indices {
            return unsupported(format!(
                "a sort kernel stores only its values and indices, not T{}",
                v.id()
            ));
        }
        if !s.inputs.contains(&v) && !s.outputs[..k].contains(&v) {
            tensor(v, false, &mut params);
        }
    }
    let is_out = |v: ValId| s.outputs.contains(&v);
    let data = |v: ValId, d: DataType| {
        if is_out(v) {
            Expr::var(format!("T{}", v.id()))
        } else {
            Expr::NullPtr(d)
        }
    };
    let shape = |v: ValId| {
        let v = if is_out(v) { v } else { x };
        Expr::var(format!("T{}_shape", v.id()))
    };
    let mut args = vec![
        Expr::var(format!("T{}", x.id())),
        shape(x),
        data(values, dtype),
        shape(values),
        data(indices, DataType::I64),
        shape(indices),
        Expr::int(axis as i64),
    ];
    let direction = if descending {
        "descending"
    } else {
        "ascending"
    };
    let (comment, func) = if layout.select > 0 {
        args.push(Expr::int(layout.select));
        (
            format!(
                "topk along dim {axis} ({direction}): one row per block, radix select of the k-th pair, the selected pairs sorted in {} slots.",
                layout.select
            ),
            Func::TopkRows,
        )
    } else {
        args.push(Expr::int(layout.pad));
        args.push(Expr::int(layout.rows_per_block));
        (
            format!(
                "Block sort along dim {axis} ({direction}): {} row(s) of up to {} elements per block, (key, index) pairs in dynamic shared memory.",
                layout.rows_per_block, layout.pad
            ),
            Func::SortRows,
        )
    };
    args.push(Expr::Lit(ScalarValue::Bool(descending), DataType::Bool));
    let body = vec![Stmt::Comment(comment), Stmt::Call { func, args }];
    // One block per `rows_per_block` rows: the rows are every dim but the sorted one.
    let mut rows = Extent::Const(1);
    for (d, dim) in tt.shape().enumerate() {
        if d == axis || dim.kind == IterKind::Broadcast {
            continue;
        }
        rows = Extent::binary(ExtentOp::Mul, rows, dim.extent.clone());
    }
    let grid = rows.ceil_div(Extent::Const(layout.rows_per_block));
    let key_bytes = if dtype.size_bytes() == 8 { 8 } else { 4 };
    let bytes = if layout.select > 0 {
        topk_shared_bytes(key_bytes, layout.select)
    } else {
        sort_shared_bytes(key_bytes, layout.pad, layout.rows_per_block)
    };
    let Ok(dynamic_shared) = u32::try_from(bytes) else {
        return unsupported(format!("{bytes} bytes of shared memory per block"));
    };
    let mut index_type = opts.index_type;
    for &v in s.inputs.iter().chain(&s.outputs) {
        if let Some(t) = f.tensor_type(v) {
            let n: Option<i128> = t
                .shape()
                .map(|d| d.extent.as_const().map(i128::from))
                .product();
            if n.is_some_and(|n| n >= 1i128 << 31) {
                index_type = IndexType::I64;
            }
        }
    }
    Ok(Kernel {
        abi: KernelAbi {
            name: opts.name.clone(),
            index_type,
            params,
        },
        launch: LaunchDims {
            grid: [grid, Extent::Const(1), Extent::Const(1)],
            block: [
                Extent::Const(layout.threads),
                Extent::Const(1),
                Extent::Const(1),
            ],
        },
        requirements: Vec::new(),
        shared: Vec::new(),
        body,
        reads: crate::ir::reads::ReadChecks::of(f),
        grid_sync: false,
        min_blocks_per_sm: opts.min_blocks_per_sm,
        dynamic_shared,
    })
}
