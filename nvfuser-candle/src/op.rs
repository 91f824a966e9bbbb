//! [`FusedOp`]: a fusion as a candle custom op (`CustomOp1/2/3`), with its backward
//! run by other fusions.
//!
//! Candle's custom ops take one to three tensors and give one tensor; their `bwd` is
//! handed the op's arguments, its result and the result's gradient. A `FusedOp` says, as
//! data ([`Operand`]), which of those feed each fusion input and which backward output
//! is the gradient of which argument. Scalars (eps) are bound in the operand list.
//!
//! A backward may have several variants (say, `dx` only, and `dx` with the weight's
//! gradient): `bwd` runs the first whose gradients cover every argument that tracks
//! a gradient, so a frozen weight costs no column sums. An argument no variant gives a
//! gradient to (integer labels) is not differentiable and gets none.
//!
//! The backward's results are new tensors that track no gradient: a `FusedOp` has a
//! first derivative, not a second (a backward of the backward is not supported).

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use nvfuser::ScalarValue;

use crate::error::{Error, Result};
use crate::fusion::{CandleFusion, FusionArg, StorageArg};

/// What feeds one fusion input of a [`FusedOp`].
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// The op's `i`-th tensor argument.
    Input(usize),
    /// The forward's result (backward only).
    Output,
    /// The gradient of the forward's result (backward only).
    GradOutput,
    /// A scalar value.
    Scalar(ScalarValue),
}

/// One way to compute gradients: a fusion, its operands, and per op argument the index
/// of the fusion output that is its gradient (`None`: this variant gives none).
#[derive(Clone, Debug)]
struct Backward {
    fusion: Arc<CandleFusion>,
    operands: Vec<Operand>,
    grads: Vec<Option<usize>>,
}

/// A fusion run as a candle custom op, with forward and (optionally) backward.
///
/// ```
/// use std::sync::Arc;
/// use candle_core::{Device, Tensor, Var};
/// use nvfuser::prelude::*;
/// use nvfuser_candle::{CandleFusion, FusedOp, Operand};
///
/// // y = x * x * s, and its backward dx = 2 * x * s * dy.
/// let mut fd = FusionDefinition::new();
/// let x = fd.define_tensor(DataType::F32, &[-1])?;
/// let s = fd.define_scalar(DataType::F64)?;
/// let y = fd.mul(x, x)?;
/// let y = fd.mul(y, s)?;
/// fd.add_output(y)?;
/// let fwd = Arc::new(CandleFusion::new("square_scale", fd.finish()?)?);
///
/// let mut fd = FusionDefinition::new();
/// let dy = fd.define_tensor(DataType::F32, &[-1])?;
/// let x = fd.define_tensor(DataType::F32, &[-1])?;
/// let s = fd.define_scalar(DataType::F64)?;
/// let two = fd.constant_of(2.0, DataType::F32);
/// let dx = fd.mul(x, two)?;
/// let dx = fd.mul(dx, s)?;
/// let dx = fd.mul(dx, dy)?;
/// fd.add_output(dx)?;
/// let bwd = Arc::new(CandleFusion::new("square_scale_bwd", fd.finish()?)?);
///
/// let s = Operand::Scalar(3.0f64.into());
/// let op = FusedOp::new("square_scale", fwd, vec![Operand::Input(0), s.clone()])?
///     .with_backward(bwd, vec![Operand::GradOutput, Operand::Input(0), s], vec![Some(0)])?;
///
/// let x = Var::new(&[1f32, -2.0, 0.5], &Device::Cpu)?;
/// let y = op.apply(&[x.as_tensor()])?;
/// assert_eq!(y.to_vec1::<f32>()?, [3.0, 12.0, 0.75]);
/// let grads = y.sum_all()?.backward()?;
/// assert_eq!(grads.get(&x).unwrap().to_vec1::<f32>()?, [6.0, -12.0, 3.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct FusedOp {
    name: &'static str,
    arity: usize,
    forward: Arc<CandleFusion>,
    operands: Arc<[Operand]>,
    backward: Arc<[Backward]>,
}

impl FusedOp {
    /// A custom op whose forward is `forward`, fed by `operands` (one per fusion input:
    /// [`Operand::Input`] or [`Operand::Scalar`]). The op takes as many tensors as the
    /// operands name (1 to 3, each used at least once); the fusion must have one output.
    pub fn new(
        name: &'static str,
        forward: Arc<CandleFusion>,
        operands: Vec<Operand>,
    ) -> Result<FusedOp> {
        let err = |expected: String, found: String| Error::Argument {
            op: name.into(),
            arg: "forward operands".into(),
            expected,
            found,
        };
        if forward.num_outputs() != 1 {
            return Err(Error::Arity {
                op: name.into(),
                expected: "a forward fusion with 1 output (a candle custom op gives one tensor)"
                    .into(),
                found: forward.num_outputs(),
            });
        }
        check_operands(name, &forward, &operands, false)?;
        let arity = operands
            .iter()
            .filter_map(|o| match o {
                Operand::Input(i) => Some(i + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        if !(1..=3).contains(&arity) {
            return Err(err(
                "operands naming 1 to 3 tensor arguments (candle's custom ops take 1 to 3; \
                 use CandleFusion::run for more, without autograd)"
                    .into(),
                format!("{arity} tensor arguments"),
            ));
        }
        for i in 0..arity {
            if !operands.contains(&Operand::Input(i)) {
                return Err(err(
                    format!("every tensor argument 0..{arity} used"),
                    format!("argument {i} unused"),
                ));
            }
        }
        Ok(FusedOp {
            name,
            arity,
            forward,
            operands: operands.into(),
            backward: Arc::new([]),
        })
    }

    /// Adds a backward variant: `fusion` fed by `operands` (any [`Operand`]), and per op
    /// argument the index of the fusion output that is its gradient (`None` where this
    /// variant gives none). Variants are tried in the order added: the first that gives a
    /// gradient to every argument that tracks one runs.
    pub fn with_backward(
        mut self,
        fusion: Arc<CandleFusion>,
        operands: Vec<Operand>,
        grads: Vec<Option<usize>>,
    ) -> Result<FusedOp> {
        check_operands(self.name, &fusion, &operands, true)?;
        if grads.len() != self.arity {
            return Err(Error::Arity {
                op: self.name.into(),
                expected: format!("{} gradient entries (one per tensor argument)", self.arity),
                found: grads.len(),
            });
        }
        if let Some(&k) = grads.iter().flatten().find(|&&k| k >= fusion.num_outputs()) {
            return Err(Error::Argument {
                op: self.name.into(),
                arg: "backward gradients".into(),
                expected: format!("output indices below {}", fusion.num_outputs()),
                found: format!("output {k}"),
            });
        }
        for o in &operands {
            if let Operand::Input(i) = o {
                if *i >= self.arity {
                    return Err(Error::Argument {
                        op: self.name.into(),
                        arg: "backward operands".into(),
                        expected: format!("tensor arguments below {}", self.arity),
                        found: format!("argument {i}"),
                    });
                }
            }
        }
        let mut variants = self.backward.to_vec();
        variants.push(Backward {
            fusion,
            operands,
            grads,
        });
        self.backward = variants.into();
        Ok(self)
    }

    /// The op's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How many tensors the op takes.
    pub fn arity(&self) -> usize {
        self.arity
    }

    /// The forward fusion.
    pub fn forward_fusion(&self) -> &CandleFusion {
        &self.forward
    }

    /// Applies the op to candle tensors: the result tracks gradients through the
    /// backward fusions (an op without one says so when `backward()` reaches it).
    pub fn apply(&self, inputs: &[&Tensor]) -> candle_core::Result<Tensor> {
        match *inputs {
            [a] if self.arity == 1 => a.apply_op1(self.clone()),
            [a, b] if self.arity == 2 => a.apply_op2(b, self.clone()),
            [a, b, c] if self.arity == 3 => a.apply_op3(b, c, self.clone()),
            _ => Err(Error::Arity {
                op: self.name.into(),
                expected: format!("{} tensors", self.arity),
                found: inputs.len(),
            }
            .into()),
        }
    }

    /// The forward on storage views.
    fn forward_cpu(
        &self,
        inputs: &[(&CpuStorage, &Layout)],
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let args: Vec<StorageArg<'_>> = self
            .operands
            .iter()
            .map(|o| match o {
                Operand::Input(i) => StorageArg::Tensor(inputs[*i].0, inputs[*i].1),
                Operand::Scalar(s) => StorageArg::Scalar(*s),
                // `FusedOp::new` refused these in a forward.
                Operand::Output | Operand::GradOutput => StorageArg::Scalar(ScalarValue::Int(0)),
            })
            .collect();
        let mut outputs = self.forward.run_storage(&args)?;
        match outputs.pop() {
            Some(out) if outputs.is_empty() => Ok(out),
            _ => Err(Error::Arity {
                op: self.name.into(),
                expected: "1 forward output".into(),
                found: outputs.len() + 1,
            }
            .into()),
        }
    }

    /// The gradients of `args` from the result `res` and its gradient `grad`.
    fn backward_cpu(
        &self,
        args: &[&Tensor],
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        if self.backward.is_empty() {
            return Err(candle_core::Error::BackwardNotSupported { op: self.name });
        }
        let differentiable = |i: usize| self.backward.iter().any(|b| b.grads[i].is_some());
        let needed: Vec<bool> = (0..self.arity)
            .map(|i| args[i].track_op() && differentiable(i))
            .collect();
        if !needed.contains(&true) {
            return Ok(vec![None; self.arity]);
        }
        let Some(variant) = self
            .backward
            .iter()
            .find(|b| (0..self.arity).all(|i| !needed[i] || b.grads[i].is_some()))
        else {
            return Err(Error::Unsupported {
                op: self.name.into(),
                what: "no backward variant gives a gradient to every argument that tracks one \
                       (add a variant that gives them all)"
                    .into(),
            }
            .into());
        };
        let fusion_args: Vec<FusionArg<'_>> = variant
            .operands
            .iter()
            .map(|o| match o {
                Operand::Input(i) => FusionArg::Tensor(args[*i]),
                Operand::Output => FusionArg::Tensor(res),
                Operand::GradOutput => FusionArg::Tensor(grad),
                Operand::Scalar(s) => FusionArg::Scalar(*s),
            })
            .collect();
        let outputs = variant.fusion.try_run(&fusion_args)?;
        let mut grads = Vec::with_capacity(self.arity);
        for (i, arg) in args.iter().enumerate() {
            let Some(k) = variant.grads[i].filter(|_| needed[i]) else {
                grads.push(None);
                continue;
            };
            let g = &outputs[k];
            if g.dims() != arg.dims() || g.dtype() != arg.dtype() {
                return Err(Error::Shape {
                    op: self.name.into(),
                    arg: format!("gradient of argument {i} (backward output {k})"),
                    expected: format!(
                        "the argument's shape {:?} and dtype {:?} (found dtype {:?})",
                        arg.dims(),
                        arg.dtype(),
                        g.dtype()
                    ),
                    found: g.dims().to_vec(),
                }
                .into());
            }
            grads.push(Some(g.clone()));
        }
        Ok(grads)
    }
}

/// Checks an operand list against a fusion's inputs.
fn check_operands(
    name: &str,
    fusion: &CandleFusion,
    operands: &[Operand],
    backward: bool,
) -> Result<()> {
    let what = if backward {
        "backward operands"
    } else {
        "forward operands"
    };
    if operands.len() != fusion.num_inputs() {
        return Err(Error::Arity {
            op: name.into(),
            expected: format!(
                "{} {what} (one per input of fusion `{}`)",
                fusion.num_inputs(),
                fusion.name()
            ),
            found: operands.len(),
        });
    }
    for (i, o) in operands.iter().enumerate() {
        let scalar = matches!(o, Operand::Scalar(_));
        if !backward && matches!(o, Operand::Output | Operand::GradOutput) {
            return Err(Error::Argument {
                op: name.into(),
                arg: format!("{what} {i}"),
                expected: "Operand::Input or Operand::Scalar in a forward".into(),
                found: format!("{o:?}"),
            });
        }
        if scalar == fusion.input_is_tensor(i) {
            return Err(Error::Argument {
                op: name.into(),
                arg: format!("{what} {i}"),
                expected: format!(
                    "a {} (fusion `{}` declares one there)",
                    if scalar { "tensor" } else { "scalar" },
                    fusion.name()
                ),
                found: format!("{o:?}"),
            });
        }
    }
    Ok(())
}

impl CustomOp1 for FusedOp {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        self.forward_cpu(&[(s, l)])
    }

    fn bwd(
        &self,
        arg: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let mut g = self.backward_cpu(&[arg], res, grad)?;
        Ok(g.pop().flatten())
    }
}

impl CustomOp2 for FusedOp {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.forward_cpu(&[(s1, l1), (s2, l2)])
    }

    fn bwd(
        &self,
        a1: &Tensor,
        a2: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let mut g = self.backward_cpu(&[a1, a2], res, grad)?.into_iter();
        Ok((g.next().flatten(), g.next().flatten()))
    }
}

impl CustomOp3 for FusedOp {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.forward_cpu(&[(s1, l1), (s2, l2), (s3, l3)])
    }

    fn bwd(
        &self,
        a1: &Tensor,
        a2: &Tensor,
        a3: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let mut g = self.backward_cpu(&[a1, a2, a3], res, grad)?.into_iter();
        Ok((g.next().flatten(), g.next().flatten(), g.next().flatten()))
    }
}
