//! The arguments of a case's calls: how each one is made (`ArgSpec`, `CallSpec`, from a
//! recipe's call or read back from a reproducer), and making them on a device in their
//! layouts (contiguous, offset, pitched, transposed), with the reference's host copies.

use nvfuser::eval::{EvalInput, HostTensor};
use nvfuser::prelude::*;
use nvfuser::Error;

use crate::gen::{Call, InputSpec, Layout, Recipe, Rng};

/// The tensor arguments of one call on `device`, and the reference's copies of them.
pub struct CallArgs {
    pub tensors: Vec<Option<Tensor>>,
    pub scalars: Vec<Option<ScalarValue>>,
    pub host: Vec<EvalInput>,
}

impl CallArgs {
    pub fn args(&self) -> Vec<Arg<'_>> {
        self.tensors
            .iter()
            .zip(&self.scalars)
            .map(|(t, s)| match (t, s) {
                (Some(t), _) => Arg::from(t),
                (None, Some(s)) => Arg::Scalar(*s),
                (None, None) => Arg::Scalar(ScalarValue::Int(0)),
            })
            .collect()
    }
}

/// Shape of input `spec` in call `call`.
fn input_shape(spec: &InputSpec, call: &Call) -> Vec<usize> {
    let dims = match spec {
        InputSpec::Tensor { dims, .. } | InputSpec::Index { dims, .. } => dims,
        InputSpec::Scalar { .. } => return vec![],
    };
    dims.iter()
        .map(|d| match d {
            crate::gen::Ax::U(k) => call.sizes[*k],
            _ => 1,
        })
        .collect()
}

/// How one argument of a call is made (see [`make_args`]).
#[derive(Clone, Debug)]
pub enum ArgSpec {
    /// Random values (`HostTensor::random`, seeded by the call's data seed and the
    /// argument's position) placed in `layout`.
    Tensor {
        dtype: DataType,
        shape: Vec<usize>,
        layout: Layout,
    },
    /// Indices below `n`, drawn from the call's shared `Rng`, placed in `layout`.
    Index {
        dtype: DataType,
        shape: Vec<usize>,
        n: u64,
        layout: Layout,
    },
    /// A scalar drawn from the call's shared `Rng` (a float in [-2, 2) or an integer in
    /// [-4, 4]); `value`, when given, replaces the drawn one (the draw still happens, so
    /// that later arguments draw the same).
    Scalar {
        float: bool,
        value: Option<ScalarValue>,
    },
}

impl ArgSpec {
    pub fn layout(&self) -> Option<Layout> {
        match self {
            ArgSpec::Tensor { layout, .. } | ArgSpec::Index { layout, .. } => Some(*layout),
            ArgSpec::Scalar { .. } => None,
        }
    }
}

/// The arguments of one call: its data seed and how each argument is made.
#[derive(Clone, Debug)]
pub struct CallSpec {
    pub data_seed: u64,
    pub args: Vec<ArgSpec>,
    /// Elements of the call's universe (every tensor of the case is a view of it): a
    /// bound on the elements any reduction combines.
    pub elements: usize,
}

impl CallSpec {
    /// The arguments of `call` of `recipe`.
    pub fn of(recipe: &Recipe, call: &Call) -> CallSpec {
        let args = recipe
            .inputs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let shape = input_shape(spec, call);
                match spec {
                    InputSpec::Scalar { dtype } => ArgSpec::Scalar {
                        float: dtype.is_float(),
                        value: None,
                    },
                    InputSpec::Tensor { dtype, .. } => ArgSpec::Tensor {
                        dtype: *dtype,
                        shape,
                        layout: call.layouts[i],
                    },
                    InputSpec::Index { dtype, target, .. } => ArgSpec::Index {
                        dtype: *dtype,
                        shape,
                        n: call.sizes[*target].max(1) as u64,
                        layout: call.layouts[i],
                    },
                }
            })
            .collect();
        CallSpec {
            data_seed: call.data_seed,
            args,
            elements: call.sizes.iter().map(|&n| n.max(1)).product(),
        }
    }
}

/// Makes the arguments of `call` on `device` in their layouts.
pub fn make_args(call: &CallSpec, device: &Device) -> Result<CallArgs, Error> {
    let mut rng = Rng::new(call.data_seed);
    let mut out = CallArgs {
        tensors: vec![],
        scalars: vec![],
        host: vec![],
    };
    for (i, spec) in call.args.iter().enumerate() {
        let (values, layout) = match spec {
            ArgSpec::Scalar { float, value } => {
                let drawn = if *float {
                    ScalarValue::Float(-2.0 + 4.0 * rng.unit())
                } else {
                    ScalarValue::Int(rng.below(9) as i64 - 4)
                };
                let s = value.unwrap_or(drawn);
                out.tensors.push(None);
                out.scalars.push(Some(s));
                out.host.push(EvalInput::Scalar(s));
                continue;
            }
            ArgSpec::Tensor {
                dtype,
                shape,
                layout,
            } => (
                HostTensor::random(*dtype, shape, call.data_seed ^ (i as u64 * 7919)),
                *layout,
            ),
            ArgSpec::Index {
                dtype,
                shape,
                n,
                layout,
            } => {
                let numel: usize = shape.iter().product();
                let v: Vec<i64> = (0..numel).map(|_| (rng.next() % n) as i64).collect();
                let t = HostTensor::from_vec(v, shape)?;
                (t.cast(*dtype), *layout)
            }
        };
        let t = place(device, &values, layout)?;
        let host = t.to_host_tensor()?;
        out.tensors.push(Some(t));
        out.scalars.push(None);
        out.host.push(EvalInput::Tensor(host));
    }
    Ok(out)
}

/// Puts `values` on `device` in `layout` (the logical values stay the same).
fn place(device: &Device, values: &HostTensor, layout: Layout) -> Result<Tensor, Error> {
    let shape = values.shape().to_vec();
    let rank = shape.len();
    match layout {
        Layout::Contiguous => device.tensor_from_host(values),
        _ if rank == 0 => device.tensor_from_host(values),
        Layout::Offset(k) => {
            // A dense view that starts k elements into a buffer of k + numel elements.
            let numel: usize = shape.iter().product();
            let flat = values.to_f64_vec();
            let mut buf = vec![0.0f64; k + numel];
            buf[k..].copy_from_slice(&flat);
            let big = HostTensor::from_vec(buf, &[k + numel])?.cast(values.dtype());
            let t = device.tensor_from_host(&big)?;
            let strides = nvfuser_cuda::contiguous_strides(&shape);
            t.as_strided(&shape, &strides, k)
        }
        Layout::Pitched(pad) => {
            let mut wide = shape.clone();
            wide[rank - 1] += pad;
            let big = pad_last(values, pad)?;
            debug_assert_eq!(big.shape(), &wide[..]);
            let t = device.tensor_from_host(&big)?;
            t.slice(rank as i64 - 1, 0, shape[rank - 1] as i64, 1)
        }
        Layout::Transposed => {
            let perm: Vec<usize> = (0..rank).rev().collect();
            let tr = permute_host(values, &perm)?;
            let t = device.tensor_from_host(&tr)?;
            let back: Vec<i64> = (0..rank as i64).rev().collect();
            t.permute(&back)
        }
    }
}

fn pad_last(values: &HostTensor, pad: usize) -> Result<HostTensor, Error> {
    let shape = values.shape();
    let rank = shape.len();
    let inner = shape[rank - 1];
    let flat = values.to_f64_vec();
    let rows = flat
        .len()
        .checked_div(inner)
        .unwrap_or_else(|| shape[..rank - 1].iter().product());
    let mut out = Vec::with_capacity(rows * (inner + pad));
    for r in 0..rows {
        out.extend_from_slice(&flat[r * inner..(r + 1) * inner]);
        out.extend(std::iter::repeat_n(0.0, pad));
    }
    let mut wide = shape.to_vec();
    wide[rank - 1] += pad;
    Ok(HostTensor::from_vec(out, &wide)?.cast(values.dtype()))
}

fn permute_host(values: &HostTensor, perm: &[usize]) -> Result<HostTensor, Error> {
    let shape = values.shape();
    let new_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let flat = values.to_f64_vec();
    let numel = flat.len();
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    let mut out = vec![0.0; numel];
    let mut idx = vec![0usize; new_shape.len()];
    for slot in out.iter_mut() {
        let src: usize = idx.iter().zip(perm).map(|(&i, &p)| i * strides[p]).sum();
        *slot = flat[src];
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < new_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(HostTensor::from_vec(out, &new_shape)?.cast(values.dtype()))
}
