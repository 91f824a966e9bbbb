//! Running one case (a fusion and its calls, from a recipe or a printed reproducer): the
//! CPU reference, the automatic path on a GPU (or, without one, planning and NVRTC
//! compiles), the verdict, and the reproducer's text. The calls' arguments are made in
//! their layouts by [`crate::args`]; outputs are compared by [`crate::compare`].

use std::panic::{catch_unwind, AssertUnwindSafe};

use nvfuser::eval::evaluate;
use nvfuser::nvrtc::compile;
use nvfuser::prelude::*;
use nvfuser::scheduler::{DeviceInfo, GpuModel};
use nvfuser::{Error, GpuArch};

use crate::args::{make_args, ArgSpec, CallSpec};
use crate::compare::{compare, rtol_for, rtol_for_call};
use crate::gen::{Layout, Recipe};

/// What happened to one case.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every call matched the reference (or both refused it).
    Pass,
    /// The automatic path refused the fusion (a typed error): the whole refusal on one
    /// line; [`reason_class`] groups them for the counts.
    Refused(String),
    /// The recipe built no fusion (every output was dropped).
    Empty,
    /// A silent wrong value, a fault, a panic or an error where the reference ran.
    Fail(FailKind, String),
}

/// The kinds of failure; the shrinker keeps a case's kind while it shrinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// Values differ from the reference beyond tolerance.
    Mismatch,
    /// The GPU returned values where the reference refused the arguments.
    Unrefused,
    /// A CUDA error from the driver (a fault, misaligned address, ...).
    Fault,
    /// A panic anywhere.
    Panic,
    /// A typed error that is neither a refusal nor an argument error (lowering, NVRTC).
    Error,
}

impl std::fmt::Display for FailKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailKind::Mismatch => "mismatch",
            FailKind::Unrefused => "unrefused",
            FailKind::Fault => "fault",
            FailKind::Panic => "panic",
            FailKind::Error => "error",
        })
    }
}

/// What runs: a fusion and the arguments of its calls (one executor for all of them).
pub struct Case {
    pub fusion: Fusion,
    pub calls: Vec<CallSpec>,
}

impl Case {
    /// The case of `recipe`; `None` when it builds no fusion.
    pub fn of(recipe: &Recipe) -> Option<Case> {
        let fusion = recipe.build()?.fusion;
        let calls = recipe
            .calls
            .iter()
            .map(|call| CallSpec::of(recipe, call))
            .collect();
        Some(Case { fusion, calls })
    }
}

/// A short class of a refusal or error, for counting by reason.
pub fn reason_class(e: &str) -> String {
    // The last resort's reason says what no kernel can do; the tuned schedulers'
    // reasons before it are the same for most cases.
    let e = match e.rfind("default: ") {
        Some(i) => format!("default schedule: {}", &e[i + "default: ".len()..]),
        None => e.to_string(),
    };
    let mut s: String = e.chars().take(4000).collect();
    // Drop value ids and numbers so that one reason counts once.
    s = s
        .split(|c: char| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .join("#");
    while s.contains("##") {
        s = s.replace("##", "#");
    }
    s
}

fn is_driver_fault(e: &Error) -> bool {
    matches!(e, Error::Driver { .. })
}

/// For a fusion with stateful random ops (`rand_uniform`), whose calls leave the seed
/// and offset to the device's generator: seeds the generator from the call's data seed
/// (a replayed case draws the same numbers) and gives the reference the seed and offset
/// the run takes.
fn seed_generator(
    fusion: &nvfuser::Fusion,
    device: &Device,
    call: &CallSpec,
    host: &mut Vec<nvfuser::eval::EvalInput>,
) {
    if fusion.generator_inputs().is_none() || host.len() != fusion.user_inputs().len() {
        return;
    }
    device.manual_seed(call.data_seed);
    let state = device.rng_state();
    for v in [state.seed, state.offset] {
        host.push(nvfuser::eval::EvalInput::Scalar(nvfuser::ScalarValue::Int(
            v as i64,
        )));
    }
}

fn is_refusal(e: &Error) -> bool {
    matches!(e, Error::UnsupportedFusion { .. })
}

/// Runs every call of `case` through one executor on the GPU `device`, comparing with
/// the reference. Each call is made twice, the second time on new data (and new
/// scalar values) of the same sizes and layouts: the executor replays the launch it
/// recorded on the first (`ExecutorStats::replays`), and that path must be as right.
pub fn run_gpu(case: &Case, device: &Device) -> Verdict {
    let fusion = &case.fusion;
    let rtol = rtol_for(fusion);
    let exec = FusionExecutorCache::new(fusion.clone());
    let mut refused = None;
    let repeated: Vec<(String, CallSpec)> = case
        .calls
        .iter()
        .enumerate()
        .flat_map(|(c, call)| {
            let again = CallSpec {
                data_seed: call.data_seed ^ 0x005e_ed0f_a9a1,
                ..call.clone()
            };
            [
                (c.to_string(), call.clone()),
                (format!("{c} (repeated)"), again),
            ]
        })
        .collect();
    for (c, call) in repeated.iter() {
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<Option<Verdict>, Error> {
            let mut args = make_args(call, device)?;
            seed_generator(fusion, device, call, &mut args.host);
            let want = evaluate(fusion, &args.host);
            let got = exec.run(device, &args.args()).and_then(|outs| {
                outs.iter()
                    .map(|o| o.to_host_tensor())
                    .collect::<Result<Vec<_>, _>>()
            });
            Ok(match (want, got) {
                (Ok(want), Ok(got)) => {
                    let rtol = rtol_for_call(fusion, rtol, call, &args.host);
                    // Every output that differs (the first in full, the others named),
                    // so a report tells a wrong input read from a wrong output.
                    let bad: Vec<(usize, String)> = got
                        .iter()
                        .zip(&want)
                        .enumerate()
                        .filter_map(|(k, (g, w))| compare(g, w, rtol).err().map(|m| (k, m)))
                        .collect();
                    bad.first().map(|(k, m)| {
                        let also: Vec<String> =
                            bad[1..].iter().map(|(j, _)| j.to_string()).collect();
                        let also = if also.is_empty() {
                            String::new()
                        } else {
                            format!(" (outputs {} differ too)", also.join(", "))
                        };
                        Verdict::Fail(
                            FailKind::Mismatch,
                            format!("call {c}: output {k}: {m}{also}"),
                        )
                    })
                }
                (Err(_), Err(e)) if !is_driver_fault(&e) => None,
                (Err(r), Ok(_)) => Some(Verdict::Fail(
                    FailKind::Unrefused,
                    format!("call {c}: the reference refused ({r}) but the GPU returned values"),
                )),
                (_, Err(e)) if is_driver_fault(&e) => {
                    Some(Verdict::Fail(FailKind::Fault, format!("call {c}: {e}")))
                }
                (Ok(_), Err(e)) if is_refusal(&e) => {
                    refused.get_or_insert(e.to_string().replace('\n', " "));
                    None
                }
                (Ok(_), Err(e)) => Some(Verdict::Fail(FailKind::Error, format!("call {c}: {e}"))),
                (Err(_), Err(_)) => None,
            })
        }));
        match outcome {
            Ok(Ok(None)) => {}
            Ok(Ok(Some(v))) => return v,
            Ok(Err(e)) if is_driver_fault(&e) => {
                return Verdict::Fail(FailKind::Fault, format!("call {c}: making arguments: {e}"))
            }
            Ok(Err(e)) => {
                return Verdict::Fail(FailKind::Error, format!("call {c}: making arguments: {e}"))
            }
            Err(p) => {
                return Verdict::Fail(FailKind::Panic, format!("call {c}: {}", panic_text(&p)))
            }
        }
    }
    match refused {
        Some(r) => Verdict::Refused(r),
        None => Verdict::Pass,
    }
}

pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    let payload = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into());
    match LAST_PANIC.with(|l| l.borrow_mut().take()) {
        Some(at) => format!("{payload} ({at})"),
        None => payload,
    }
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Panics are caught and reported as failures with their location; the default hook's
/// message and backtrace would only interleave with the report.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        LAST_PANIC.with(|l| *l.borrow_mut() = Some(at));
    }));
}

/// Compile statistics of the CPU mode.
/// The GPU the CPU mode plans for (`--preset`); unset: an H100, compiled for sm_80 and
/// sm_90.
pub static PRESET: std::sync::OnceLock<GpuModel> = std::sync::OnceLock::new();

/// The device the CPU mode plans for and the architectures it compiles for.
fn planned_for() -> (DeviceInfo, Vec<GpuArch>) {
    match PRESET.get() {
        None => (
            DeviceInfo::preset(GpuModel::H100),
            vec![GpuArch::SM80, GpuArch::SM90],
        ),
        Some(&m) => {
            let (major, minor) = m.spec().compute_capability;
            (DeviceInfo::preset(m), vec![GpuArch::new(major, minor)])
        }
    }
}

#[derive(Default)]
pub struct CpuStats {
    pub kernels: usize,
    pub compiled: std::collections::HashSet<u64>,
}

/// Without a GPU: plans every call (a single kernel or segments) for an H100 (or the
/// `--preset` GPU), generates the kernels and compiles each distinct one with NVRTC for
/// sm_80 and sm_90 (or the preset's architecture); runs the reference on the CPU device. `Refused` when no plan exists.
pub fn run_cpu(case: &Case, stats: &mut CpuStats) -> Verdict {
    let fusion = &case.fusion;
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(fusion.clone());
    let mut refused = None;
    let (device, archs) = planned_for();
    for (c, call) in case.calls.iter().enumerate() {
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<Option<Verdict>, String> {
            let mut args = make_args(call, &cpu).map_err(|e| format!("making arguments: {e}"))?;
            seed_generator(fusion, &cpu, call, &mut args.host);
            let arg_list = args.args();
            // The CPU device's run (argument checks, the evaluator, outputs that are
            // inputs or views of them) against the reference evaluator alone: the same
            // values exactly, and refused only where the reference refuses.
            let want = evaluate(fusion, &args.host);
            let got = exec.run(&cpu, &arg_list).and_then(|outs| {
                outs.iter()
                    .map(|o| o.to_host_tensor())
                    .collect::<Result<Vec<_>, _>>()
            });
            match (want, got) {
                // Refused arguments: nothing to plan for this call.
                (Err(_), Err(_)) => return Ok(None),
                (Ok(_), Err(e)) => {
                    return Ok(Some(Verdict::Fail(
                        FailKind::Error,
                        format!("call {c}: the CPU device failed where the reference ran: {e}"),
                    )))
                }
                (Err(r), Ok(_)) => {
                    return Ok(Some(Verdict::Fail(
                        FailKind::Unrefused,
                        format!(
                        "call {c}: the reference refused ({r}) but the CPU device returned values"
                    ),
                    )))
                }
                (Ok(want), Ok(got)) => {
                    if let Some((k, m)) = got
                        .iter()
                        .zip(&want)
                        .enumerate()
                        .find_map(|(k, (g, w))| compare(g, w, 0.0).err().map(|m| (k, m)))
                    {
                        return Ok(Some(Verdict::Fail(
                            FailKind::Mismatch,
                            format!("call {c}: the CPU device's output {k}: {m}"),
                        )));
                    }
                }
            }
            // The kernels the GPU would run, planned as `run` plans them (host scalars,
            // one kernel or segments).
            let kernels = match exec.plan_kernels(device.clone(), &arg_list) {
                Ok(k) => k,
                Err(e) if is_refusal(&e) => {
                    refused.get_or_insert(e.to_string().replace('\n', " "));
                    return Ok(None);
                }
                Err(e) => {
                    return Ok(Some(Verdict::Fail(
                        FailKind::Error,
                        format!("call {c}: {e}"),
                    )))
                }
            };
            for kernel in kernels {
                stats.kernels += 1;
                let src = kernel.cuda_source();
                let key = {
                    use std::hash::{Hash, Hasher};
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    src.hash(&mut h);
                    h.finish()
                };
                if !stats.compiled.insert(key) {
                    continue;
                }
                for &arch in &archs {
                    if let Err(e) = compile(&src, &kernel.abi.name, arch) {
                        return Ok(Some(Verdict::Fail(
                            FailKind::Error,
                            format!("call {c}: NVRTC ({arch:?}): {e}"),
                        )));
                    }
                }
            }
            Ok(None)
        }));
        match outcome {
            Ok(Ok(None)) => {}
            Ok(Ok(Some(v))) => return v,
            Ok(Err(e)) => return Verdict::Fail(FailKind::Error, format!("call {c}: {e}")),
            Err(p) => {
                return Verdict::Fail(FailKind::Panic, format!("call {c}: {}", panic_text(&p)))
            }
        }
    }
    match refused {
        Some(r) => Verdict::Refused(r),
        None => Verdict::Pass,
    }
}

/// The reproducer of a case: `fusion!` source and the calls' argument layouts. An index
/// argument's line ends with `index < N` (its values' bound); [`parse_reproducer`] reads
/// it back.
pub fn reproducer(recipe: &Recipe) -> String {
    let mut s = String::new();
    match recipe.build() {
        Some(b) => s.push_str(&b.fusion.to_reproducer("fuzz_case")),
        None => s.push_str("(builds no fusion)\n"),
    }
    let cpu = Device::cpu();
    for (c, call) in recipe.calls.iter().enumerate() {
        s.push_str(&format!(
            "call {c}: universe sizes {:?}, data seed {}\n",
            call.sizes, call.data_seed
        ));
        let spec = CallSpec::of(recipe, call);
        if let Ok(args) = make_args(&spec, &cpu) {
            for (i, (a, spec)) in args.args().iter().zip(&spec.args).enumerate() {
                match a {
                    Arg::Tensor(t) => {
                        s.push_str(&format!(
                            "  arg {i}: {} sizes {:?} strides {:?} offset {} ({:?})",
                            t.dtype(),
                            t.sizes(),
                            t.strides(),
                            t.offset(),
                            spec.layout().unwrap_or(Layout::Contiguous)
                        ));
                        if let ArgSpec::Index { n, .. } = spec {
                            s.push_str(&format!(" index < {n}"));
                        }
                        s.push('\n');
                    }
                    Arg::Scalar(v) => s.push_str(&format!("  arg {i}: scalar {v}\n")),
                }
            }
        }
    }
    s
}

/// Reads a [`reproducer`] back into a case: the `fusion!` source (built with the DSL) and
/// each call's arguments, made as the recipe's were. Lines may carry the `  | ` prefix of
/// a failure report; lines before the `fn` line are skipped.
pub fn parse_reproducer(text: &str) -> Result<Case, String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| {
            let t = l.strip_prefix("  | ").or_else(|| l.strip_prefix("| "));
            let t = t.unwrap_or(match l.trim_end() {
                "  |" | "|" => "",
                _ => l,
            });
            t.trim_end()
        })
        .collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("fn "))
        .ok_or("no `fn` line (the fusion's source)")?;
    let end = lines[start..]
        .iter()
        .position(|l| l.starts_with("call "))
        .map_or(lines.len(), |k| start + k);
    let src = lines[start..end].join("\n");
    let mut built = nvfuser::dsl::build_str(&src).map_err(|errs| {
        errs.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    if built.is_empty() {
        return Err("the source defines no fusion".into());
    }
    let fusion = built.remove(0).0;
    let mut calls: Vec<CallSpec> = Vec::new();
    for (n, line) in lines.iter().enumerate().skip(end) {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("call ") {
            let seed = rest
                .rsplit_once("data seed ")
                .and_then(|(_, v)| v.trim().parse().ok())
                .ok_or_else(|| at("no data seed".into()))?;
            // `universe sizes [a, b], data seed S`; older reproducers may lack it.
            let elements = rest
                .split_once("universe sizes [")
                .and_then(|(_, v)| v.split_once(']'))
                .map(|(v, _)| {
                    v.split(',')
                        .filter_map(|x| x.trim().parse::<usize>().ok())
                        .map(|n| n.max(1))
                        .product()
                })
                .unwrap_or(1);
            calls.push(CallSpec {
                data_seed: seed,
                args: vec![],
                elements,
            });
        } else if let Some(rest) = line.trim_start().strip_prefix("arg ") {
            let call = calls
                .last_mut()
                .ok_or_else(|| at("an argument before any call".into()))?;
            let (i, rest) = rest
                .split_once(": ")
                .ok_or_else(|| at("no `arg N: `".into()))?;
            if i.parse::<usize>().ok() != Some(call.args.len()) {
                return Err(at(format!("expected argument {}", call.args.len())));
            }
            call.args.push(parse_arg(rest).map_err(at)?);
        } else if !line.trim().is_empty() {
            // The end of the reproducer (a verdict line, the next report).
            break;
        }
    }
    if calls.is_empty() {
        return Err("no `call` lines".into());
    }
    Ok(Case { fusion, calls })
}

/// One argument line after `arg N: `: `scalar V`, or
/// `DTYPE sizes [..] strides [..] offset K (LAYOUT)` with an optional `index < N`.
fn parse_arg(s: &str) -> Result<ArgSpec, String> {
    if let Some(v) = s.strip_prefix("scalar ") {
        let v = v.trim();
        let value = match v {
            "true" => ScalarValue::Bool(true),
            "false" => ScalarValue::Bool(false),
            _ if v.contains(['.', 'e', 'E']) || v.contains("inf") || v.contains("NaN") => {
                ScalarValue::Float(v.parse().map_err(|_| format!("bad float {v:?}"))?)
            }
            _ => ScalarValue::Int(v.parse().map_err(|_| format!("bad integer {v:?}"))?),
        };
        return Ok(ArgSpec::Scalar {
            float: matches!(value, ScalarValue::Float(_)),
            value: Some(value),
        });
    }
    let (dtype, rest) = s.split_once(' ').ok_or("no dtype")?;
    let dtype = DataType::from_name(dtype).ok_or_else(|| format!("unknown dtype {dtype:?}"))?;
    let list = |key: &str| -> Result<Vec<usize>, String> {
        let after = rest.split_once(key).ok_or_else(|| format!("no {key:?}"))?.1;
        let inner = after
            .strip_prefix('[')
            .and_then(|a| a.split_once(']'))
            .ok_or_else(|| format!("no list after {key:?}"))?
            .0;
        inner
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| x.parse().map_err(|_| format!("bad size {x:?}")))
            .collect()
    };
    let shape = list("sizes ")?;
    let layout_text = rest
        .split_once('(')
        .and_then(|(_, l)| l.rsplit_once(')'))
        .ok_or("no (LAYOUT)")?
        .0;
    let num = |x: &str| -> Result<usize, String> {
        x.parse().map_err(|_| format!("bad layout {layout_text:?}"))
    };
    let layout = if layout_text == "Contiguous" {
        Layout::Contiguous
    } else if layout_text == "Transposed" {
        Layout::Transposed
    } else if let Some(k) = layout_text
        .strip_prefix("Offset(")
        .and_then(|k| k.strip_suffix(')'))
    {
        Layout::Offset(num(k)?)
    } else if let Some(p) = layout_text
        .strip_prefix("Pitched(")
        .and_then(|p| p.strip_suffix(')'))
    {
        Layout::Pitched(num(p)?)
    } else {
        return Err(format!("unknown layout {layout_text:?}"));
    };
    match rest.split_once("index < ") {
        Some((_, n)) => Ok(ArgSpec::Index {
            dtype,
            shape,
            n: n.trim()
                .parse()
                .map_err(|_| format!("bad index bound {n:?}"))?,
            layout,
        }),
        None => Ok(ArgSpec::Tensor {
            dtype,
            shape,
            layout,
        }),
    }
}
