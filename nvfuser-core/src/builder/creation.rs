//! Tensor factories: full, iota and the random distributions.

use super::{FusionDefinition, Size};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::{Distribution, GeneratorInputs, IterDomain, Op, SizeArg, ValId};

impl FusionDefinition {
    /// A tensor of `sizes` filled with the scalar `value`, converted to `dtype`.
    pub fn full(&mut self, sizes: &[Size], value: ValId, dtype: DataType) -> Result<ValId> {
        let op = "full";
        self.scalar(op, value)?;
        let mut inputs = vec![value];
        let (args, domain) = self.factory_domain(op, sizes, &mut inputs)?;
        self.emit_tensor(Op::Full { sizes: args }, &inputs, dtype, domain)
    }

    /// The 1-D tensor `start + i * step` for `i in 0..length`, of `dtype` (integer or
    /// floating; `start` and `step` are scalars).
    pub fn iota(
        &mut self,
        length: Size,
        start: ValId,
        step: ValId,
        dtype: DataType,
    ) -> Result<ValId> {
        let op = "iota";
        if dtype == DataType::Bool {
            return Err(Error::dtype(op, "an integer or floating point type", dtype));
        }
        for v in [start, step] {
            let d = self.scalar(op, v)?;
            if d.is_float() && !dtype.is_float() {
                return Err(Error::dtype(
                    op,
                    format!("integer start and step for an {dtype} iota"),
                    d,
                ));
            }
        }
        let mut inputs = vec![start, step];
        let (args, domain) = self.factory_domain(op, &[length], &mut inputs)?;
        let length = args[0];
        self.emit_tensor(Op::Iota { length }, &inputs, dtype, domain)
    }

    /// Uniform random numbers on `[low, high)` (see [`crate::philox`] for the stream).
    pub fn uniform(
        &mut self,
        sizes: &[Size],
        low: ValId,
        high: ValId,
        seed: ValId,
        offset: ValId,
        dtype: DataType,
    ) -> Result<ValId> {
        self.random(
            Distribution::Uniform,
            sizes,
            [low, high, seed, offset],
            dtype,
        )
    }

    /// Normal random numbers with `mean` and `std` (see [`crate::philox`]).
    pub fn normal(
        &mut self,
        sizes: &[Size],
        mean: ValId,
        std: ValId,
        seed: ValId,
        offset: ValId,
        dtype: DataType,
    ) -> Result<ValId> {
        self.random(
            Distribution::Normal,
            sizes,
            [mean, std, seed, offset],
            dtype,
        )
    }

    /// Uniform random numbers on `[low, high)` from the device's random generator: no
    /// seed or offset to pass. Each call of the fusion draws new numbers, and the
    /// generator's state (`Device::manual_seed`) makes a sequence of calls reproducible.
    /// The fusion gains two `i64` inputs after all others, the generator's seed and
    /// offset ([`Fusion::generator_inputs`]); a call may pass them itself to replay one.
    pub fn rand_uniform(
        &mut self,
        sizes: &[Size],
        low: ValId,
        high: ValId,
        dtype: DataType,
    ) -> Result<ValId> {
        self.generator_random(Distribution::Uniform, sizes, [low, high], dtype)
    }

    /// Normal random numbers of `mean` and `std` from the device's random generator (see
    /// [`FusionDefinition::rand_uniform`]).
    pub fn rand_normal(
        &mut self,
        sizes: &[Size],
        mean: ValId,
        std: ValId,
        dtype: DataType,
    ) -> Result<ValId> {
        self.generator_random(Distribution::Normal, sizes, [mean, std], dtype)
    }

    /// A random op reading the generator's seed and the offset `offset + k`, where `k`
    /// counts the stateful random ops before it.
    fn generator_random(
        &mut self,
        dist: Distribution,
        sizes: &[Size],
        params: [ValId; 2],
        dtype: DataType,
    ) -> Result<ValId> {
        // Check the parameters before the generator inputs exist, so that a refused op
        // leaves no trace.
        for v in params {
            self.scalar(dist.name(), v)?;
        }
        let g = match self.fusion.generator {
            Some(g) => g,
            None => GeneratorInputs {
                seed: self.new_scalar(DataType::I64, None),
                offset: self.new_scalar(DataType::I64, None),
                draws: 0,
            },
        };
        let offset = if g.draws == 0 {
            g.offset
        } else {
            let k = self.constant(g.draws as i64);
            self.add(g.offset, k)?
        };
        let out = self.random(dist, sizes, [params[0], params[1], g.seed, offset], dtype)?;
        self.fusion.generator = Some(GeneratorInputs {
            draws: g.draws + 1,
            ..g
        });
        Ok(out)
    }

    fn random(
        &mut self,
        dist: Distribution,
        sizes: &[Size],
        args: [ValId; 4],
        dtype: DataType,
    ) -> Result<ValId> {
        let op = dist.name();
        if !dtype.is_float() || dtype.is_fp8() {
            // PyTorch has no fp8 random streams either: draw in f32 and cast.
            return Err(Error::dtype(
                op,
                "an f16, bf16, f32 or f64 output type (for fp8, draw f32 and cast)",
                dtype,
            ));
        }
        for (i, &v) in args.iter().enumerate() {
            let d = self.scalar(op, v)?;
            if i >= 2 && !d.is_int() {
                let what = if i == 2 { "seed" } else { "offset" };
                return Err(Error::dtype(op, format!("an integer {what}"), d));
            }
        }
        let mut inputs = args.to_vec();
        let (args, domain) = self.factory_domain(op, sizes, &mut inputs)?;
        self.emit_tensor(Op::Rand { dist, sizes: args }, &inputs, dtype, domain)
    }

    /// Checks factory sizes (each >= 0 or a scalar) and builds the output domain.
    fn factory_domain(
        &self,
        op: &str,
        sizes: &[Size],
        inputs: &mut Vec<ValId>,
    ) -> Result<(Vec<SizeArg>, Vec<IterDomain>)> {
        let (args, extents) = self.size_args(op, sizes, inputs)?;
        let mut domain = Vec::with_capacity(extents.len());
        for (i, e) in extents.into_iter().enumerate() {
            match e.as_const() {
                Some(n) if n < 0 => {
                    return Err(Error::invalid(
                        op,
                        format!("size {n} at dim {i}: expected >= 0"),
                    ))
                }
                Some(1) => domain.push(IterDomain::broadcast()),
                _ => domain.push(IterDomain::iteration(e)),
            }
        }
        Ok((args, domain))
    }
}
