//! The op table of the `fusion!` language: every builder op by name, with its parameters.
//!
//! A call `op(a, b, ...)` and a method call `a.op(b, ...)` mean the same thing: the
//! receiver is the first argument. Arguments are positional, or `name = value` for the
//! names below (`x.var([1], correction = 0, keepdim = true)`). The table is also where
//! "did you mean" suggestions come from.

use std::sync::OnceLock;

use crate::ir::{BinaryOp, Distribution, ReductionOp, ScanOp, TernaryOp, UnaryOp};

/// What an argument must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A tensor or scalar expression (literals become constants).
    Value,
    /// Integer literals: `[1, -1]` (a single integer means one axis).
    Axes,
    /// An integer literal.
    Int,
    /// A bool literal.
    Bool,
    /// Sizes: `[4, n, x.size(0), -1]` (integer literals or integer scalar values).
    Sizes,
    /// One size.
    Size,
    /// A dtype name.
    DType,
    /// A list of tensor expressions: `[a, b]`.
    Values,
    /// Bool literals: `[false, true]`.
    Mask,
    /// Non-negative integer literals: `[0, 2]`.
    Dims,
    /// `(before, after)` integer pairs: `[(0, 0), (1, 2)]`.
    Widths,
    /// Slice ranges: `[.., 1..n, (0, 8, 2)]`.
    Ranges,
}

/// A default for an optional parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Default {
    Bool(bool),
    Int(i64),
    /// The reduction's input dtype (`dtype` of `sum`, `prod`, `mean`).
    InputDType,
}

/// One parameter of an op.
#[derive(Clone, Copy, Debug)]
pub(crate) struct P {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Option<Default>,
}

const fn p(name: &'static str, kind: Kind) -> P {
    P {
        name,
        kind,
        default: None,
    }
}

const fn opt(name: &'static str, kind: Kind, default: Default) -> P {
    P {
        name,
        kind,
        default: Some(default),
    }
}

/// Which builder method a name calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Ternary(TernaryOp),
    Cast,
    Set,
    SegmentSet,
    Reduction(ReductionOp),
    Scan(ScanOp),
    Sort,
    Argsort,
    Topk,
    Var,
    VarMean,
    Welford,
    Broadcast,
    Unsqueeze,
    Squeeze,
    Expand,
    Reshape,
    Permute,
    Slice,
    Pad,
    Cat,
    BroadcastInDim,
    Full,
    Iota,
    Rand(Distribution),
    /// `rand_uniform` / `rand_normal`: the device's random generator supplies the seed
    /// and offset.
    RandGen(Distribution),
    Size,
    IndexSelect,
    Select,
    Gather,
    TakeAlongAxis,
    /// `scatter` / `scatter_add` (`add`).
    Scatter(bool),
    Inplace,
    Triu,
    Tril,
}

/// An op of the language.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpSpec {
    pub name: &'static str,
    pub family: Family,
    pub params: &'static [P],
}

impl OpSpec {
    /// How many arguments are required.
    pub fn required(&self) -> usize {
        self.params.iter().filter(|p| p.default.is_none()).count()
    }

    /// How many arguments it takes, in words: `1 argument`, `2 to 3 arguments`.
    pub fn takes(&self) -> String {
        let (req, all) = (self.required(), self.params.len());
        match (req, all) {
            (1, 1) => "1 argument".into(),
            (r, a) if r == a => format!("{a} arguments"),
            (r, a) => format!("{r} to {a} arguments"),
        }
    }

    /// The signature as users write it: `sum(x, axes, keepdim = false)`.
    pub fn usage(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| match p.default {
                None => p.name.to_string(),
                Some(Default::Bool(b)) => format!("{} = {b}", p.name),
                Some(Default::Int(i)) => format!("{} = {i}", p.name),
                Some(Default::InputDType) => format!("{} = x.dtype", p.name),
            })
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }
}

use Kind::*;

const X: &[P] = &[p("x", Value)];
const AB: &[P] = &[p("a", Value), p("b", Value)];
const WHERE: &[P] = &[p("cond", Value), p("a", Value), p("b", Value)];
const LERP: &[P] = &[p("start", Value), p("end", Value), p("weight", Value)];
const CLAMP: &[P] = &[p("x", Value), p("min", Value), p("max", Value)];
const THRESHOLD: &[P] = &[p("x", Value), p("threshold", Value), p("value", Value)];
const ADDCMUL: &[P] = &[
    p("x", Value),
    p("t1", Value),
    p("t2", Value),
    p("value", Value),
];
const CAST: &[P] = &[p("x", Value), p("dtype", DType)];
const REDUCE: &[P] = &[
    p("x", Value),
    p("axes", Axes),
    opt("keepdim", Bool, Default::Bool(false)),
];
/// `sum`, `prod` and `mean` take the dtype to compute and return in (PyTorch's
/// `dtype=`: the input is cast to it first).
const REDUCE_DTYPE: &[P] = &[
    p("x", Value),
    p("axes", Axes),
    opt("keepdim", Bool, Default::Bool(false)),
    opt("dtype", DType, Default::InputDType),
];
const VAR: &[P] = &[
    p("x", Value),
    p("axes", Axes),
    opt("correction", Int, Default::Int(1)),
    opt("keepdim", Bool, Default::Bool(false)),
];
const WELFORD: &[P] = &[p("x", Value), p("axes", Axes)];
/// `cumsum`, `cumprod`, `cummax` and `cummin`: one axis, negative counting from the end.
const SCAN: &[P] = &[p("x", Value), p("axis", Int)];
/// `cumsum` and `cumprod` also take the dtype to compute and return in (PyTorch's
/// `dtype=`: the input is cast to it first).
const SCAN_DTYPE: &[P] = &[
    p("x", Value),
    p("axis", Int),
    opt("dtype", DType, Default::InputDType),
];
/// `sort(x, axis = -1, descending = false, stable = false)`: `(values, indices)`.
const SORT: &[P] = &[
    p("x", Value),
    opt("axis", Int, Default::Int(-1)),
    opt("descending", Bool, Default::Bool(false)),
    opt("stable", Bool, Default::Bool(false)),
];
/// `argsort(x, axis = -1, descending = false)`: the indices of `sort`.
const ARGSORT: &[P] = &[
    p("x", Value),
    opt("axis", Int, Default::Int(-1)),
    opt("descending", Bool, Default::Bool(false)),
];
/// `topk(x, k, axis = -1, largest = true, sorted = true)`: `(values, indices)`; `k` is
/// an integer literal.
const TOPK: &[P] = &[
    p("x", Value),
    p("k", Int),
    opt("axis", Int, Default::Int(-1)),
    opt("largest", Bool, Default::Bool(true)),
    opt("sorted", Bool, Default::Bool(true)),
];
const BROADCAST: &[P] = &[p("x", Value), p("mask", Mask)];
const UNSQUEEZE: &[P] = &[p("x", Value), p("axis", Int)];
const SQUEEZE: &[P] = &[p("x", Value), p("axes", Axes)];
const SIZES: &[P] = &[p("x", Value), p("sizes", Sizes)];
const PERMUTE: &[P] = &[p("x", Value), p("perm", Axes)];
const SLICE: &[P] = &[p("x", Value), p("ranges", Ranges)];
const PAD: &[P] = &[p("x", Value), p("widths", Widths), p("value", Value)];
const CAT: &[P] = &[p("tensors", Values), p("axis", Int)];
const BROADCAST_IN_DIM: &[P] = &[p("x", Value), p("sizes", Sizes), p("dims", Dims)];
const FULL: &[P] = &[p("sizes", Sizes), p("value", Value), p("dtype", DType)];
const IOTA: &[P] = &[
    p("length", Size),
    p("start", Value),
    p("step", Value),
    p("dtype", DType),
];
const UNIFORM: &[P] = &[
    p("sizes", Sizes),
    p("low", Value),
    p("high", Value),
    p("seed", Value),
    p("offset", Value),
    p("dtype", DType),
];
const NORMAL: &[P] = &[
    p("sizes", Sizes),
    p("mean", Value),
    p("std", Value),
    p("seed", Value),
    p("offset", Value),
    p("dtype", DType),
];
/// `uniform` without a seed and offset: the device's generator supplies them.
const RAND_UNIFORM: &[P] = &[
    p("sizes", Sizes),
    p("low", Value),
    p("high", Value),
    p("dtype", DType),
];
/// `normal` without a seed and offset: the device's generator supplies them.
const RAND_NORMAL: &[P] = &[
    p("sizes", Sizes),
    p("mean", Value),
    p("std", Value),
    p("dtype", DType),
];
const SIZE: &[P] = &[p("x", Value), p("axis", Int)];
const AXIS_INDEX: &[P] = &[p("x", Value), p("axis", Int), p("index", Value)];
const SELECT: &[P] = &[p("x", Value), p("axis", Int), p("index", Size)];
const TAKE: &[P] = &[p("x", Value), p("index", Value), p("axis", Int)];
const SCATTER: &[P] = &[
    p("x", Value),
    p("axis", Int),
    p("index", Value),
    p("src", Value),
];
const INPLACE: &[P] = &[p("value", Value), p("input", Value)];
const TRIANGLE: &[P] = &[p("x", Value), opt("diagonal", Int, Default::Int(0))];

/// Every op of the language.
pub(crate) fn table() -> &'static [OpSpec] {
    static TABLE: OnceLock<Vec<OpSpec>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Vec::new();
        let mut add = |name, family, params| {
            t.push(OpSpec {
                name,
                family,
                params,
            })
        };
        for &u in UnaryOp::ALL {
            add(u.name(), Family::Unary(u), X);
        }
        for &b in BinaryOp::ALL {
            add(b.name(), Family::Binary(b), AB);
        }
        for &op in TernaryOp::ALL {
            let params = match op {
                TernaryOp::Where => WHERE,
                TernaryOp::Lerp => LERP,
                TernaryOp::Clamp => CLAMP,
                TernaryOp::Threshold => THRESHOLD,
                TernaryOp::Addcmul => ADDCMUL,
            };
            add(op.name(), Family::Ternary(op), params);
        }
        for &r in ReductionOp::ALL {
            let params = match r {
                ReductionOp::Sum | ReductionOp::Prod | ReductionOp::Mean => REDUCE_DTYPE,
                _ => REDUCE,
            };
            add(r.name(), Family::Reduction(r), params);
        }
        for &s in ScanOp::ALL {
            let params = match s {
                ScanOp::Sum | ScanOp::Prod => SCAN_DTYPE,
                ScanOp::Max | ScanOp::Min => SCAN,
            };
            add(s.name(), Family::Scan(s), params);
        }
        for &d in Distribution::ALL {
            let params = match d {
                Distribution::Uniform => UNIFORM,
                Distribution::Normal => NORMAL,
            };
            add(d.name(), Family::Rand(d), params);
            let (name, params) = match d {
                Distribution::Uniform => ("rand_uniform", RAND_UNIFORM),
                Distribution::Normal => ("rand_normal", RAND_NORMAL),
            };
            add(name, Family::RandGen(d), params);
        }
        let rest: [(&'static str, Family, &'static [P]); 29] = [
            ("sort", Family::Sort, SORT),
            ("argsort", Family::Argsort, ARGSORT),
            ("topk", Family::Topk, TOPK),
            ("cast", Family::Cast, CAST),
            ("set", Family::Set, X),
            ("segment_set", Family::SegmentSet, X),
            ("var", Family::Var, VAR),
            ("var_mean", Family::VarMean, VAR),
            ("welford", Family::Welford, WELFORD),
            ("broadcast", Family::Broadcast, BROADCAST),
            ("unsqueeze", Family::Unsqueeze, UNSQUEEZE),
            ("squeeze", Family::Squeeze, SQUEEZE),
            ("expand", Family::Expand, SIZES),
            ("reshape", Family::Reshape, SIZES),
            ("permute", Family::Permute, PERMUTE),
            ("slice", Family::Slice, SLICE),
            ("pad", Family::Pad, PAD),
            ("cat", Family::Cat, CAT),
            ("broadcast_in_dim", Family::BroadcastInDim, BROADCAST_IN_DIM),
            ("full", Family::Full, FULL),
            ("iota", Family::Iota, IOTA),
            ("size", Family::Size, SIZE),
            ("index_select", Family::IndexSelect, AXIS_INDEX),
            ("select", Family::Select, SELECT),
            ("gather", Family::Gather, AXIS_INDEX),
            ("take_along_axis", Family::TakeAlongAxis, TAKE),
            ("inplace", Family::Inplace, INPLACE),
            ("triu", Family::Triu, TRIANGLE),
            ("tril", Family::Tril, TRIANGLE),
        ];
        for (name, family, params) in rest {
            add(name, family, params);
        }
        add("scatter", Family::Scatter(false), SCATTER);
        add("scatter_add", Family::Scatter(true), SCATTER);
        t
    })
}

/// Looks an op up by name.
pub(crate) fn lookup(name: &str) -> Option<&'static OpSpec> {
    table().iter().find(|op| op.name == name)
}

/// Names users reach for that the language spells differently.
fn alias(name: &str) -> Option<&'static str> {
    Some(match name {
        "transpose" | "t" => "permute",
        "view" | "flatten" | "unflatten" => "reshape",
        "concat" | "concatenate" | "hstack" | "vstack" => "cat",
        "where" | "select_where" => "where_",
        "amax" | "max_reduce" => "max",
        "amin" | "min_reduce" => "min",
        "average" => "mean",
        "cumulative_sum" | "prefix_sum" | "inclusive_scan" => "cumsum",
        "cumulative_prod" => "cumprod",
        "top_k" => "topk",
        "arg_sort" | "sort_indices" => "argsort",
        "variance" => "var",
        "clip" => "clamp",
        "swish" => "silu",
        "power" | "powf" | "powi" => "pow",
        "narrow" => "slice",
        "mod" => "fmod",
        "rem" => "fmod",
        "broadcast_to" | "expand_as" => "expand",
        "to" | "astype" | "type_as" => "cast",
        "copy" | "clone" => "set",
        "not" => "logical_not",
        "and" => "logical_and",
        "or" => "logical_or",
        "fill" | "full_like" => "full",
        "arange" => "iota",
        "rand" => "rand_uniform",
        "randn" => "rand_normal",
        _ => return None,
    })
}

/// A hint for an unknown op name: an alias, or the closest op by edit distance.
pub(crate) fn suggest_op(name: &str) -> Option<String> {
    if name == "softmax" || name == "log_softmax" || name == "layer_norm" || name == "rms_norm" {
        return Some(format!(
            "`{name}` is not a primitive; write it from primitives, e.g. softmax: \
             let m = x.max([1], true); let e = (x - m).exp(); e / e.sum([1], true)"
        ));
    }
    if let Some(a) = alias(name) {
        return Some(format!("did you mean `{a}`?"));
    }
    closest(name, table().iter().map(|op| op.name)).map(|s| format!("did you mean `{s}`?"))
}

/// The candidate closest to `name` by edit distance, if close enough to be a typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = match name.chars().count() {
        0..=3 => 1,
        4..=6 => 2,
        _ => 3,
    };
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(name, c);
        if d <= limit && best.is_none_or(|(bd, bs)| d < bd || (d == bd && c < bs)) {
            best = Some((d, c));
        }
    }
    best.map(|(_, s)| s)
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, v) in d[0].iter_mut().enumerate() {
        *v = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_name_is_unique_and_suggestions_work() {
        let names: Vec<&str> = table().iter().map(|o| o.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(edit_distance("mena", "mean"), 1);
        assert_eq!(suggest_op("sqr").as_deref(), Some("did you mean `sqrt`?"));
        assert_eq!(
            suggest_op("transpose").as_deref(),
            Some("did you mean `permute`?")
        );
        assert_eq!(suggest_op("zzzzzzzz"), None);
        assert_eq!(
            lookup("var").unwrap().usage(),
            "var(x, axes, correction = 1, keepdim = false)"
        );
    }

    #[test]
    fn scans_are_ops_with_one_axis() {
        for name in ["cumsum", "cumprod", "cummax", "cummin"] {
            let spec = lookup(name).unwrap();
            assert!(matches!(spec.family, Family::Scan(s) if s.name() == name));
            let usage = match name {
                "cumsum" | "cumprod" => format!("{name}(x, axis, dtype = x.dtype)"),
                _ => format!("{name}(x, axis)"),
            };
            assert_eq!(spec.usage(), usage);
        }
        assert_eq!(
            suggest_op("cumsun").as_deref(),
            Some("did you mean `cumsum`?")
        );
        assert_eq!(
            suggest_op("cummmax").as_deref(),
            Some("did you mean `cummax`?")
        );
        assert_eq!(
            suggest_op("cumulative_sum").as_deref(),
            Some("did you mean `cumsum`?")
        );
        assert_eq!(
            suggest_op("cumulative_prod").as_deref(),
            Some("did you mean `cumprod`?")
        );
    }
}
