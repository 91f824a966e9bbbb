//! A differential fuzzer of the whole automatic path: random fusions, run through one
//! `FusionExecutorCache` per fusion with changing shapes and argument layouts, compared
//! with the CPU reference evaluator.
//!
//! ```text
//! cargo run --release --example fuzz -- [--count N] [--seed S] [--steps K] [--calls C]
//!                                       [--jobs J] [--time-limit SECS] [--no-gpu]
//!                                       [--preset h100|h200|a100|l40s|rtx4090|b200]
//!                                       [--case SEED] [--repro FILE] [--no-shrink]
//!                                       [--quiet]
//! ```
//!
//! - On a GPU (the default when one is present): every call's outputs are compared with
//!   the reference at dtype-aware tolerances. A mismatch, a GPU result where the
//!   reference refused the arguments, a CUDA fault, a panic or an untyped failure is a
//!   failure: the case is shrunk (fewer outputs, steps bypassed, smaller sizes) and its
//!   reproducer printed (`fusion!` source, argument sizes, strides, offsets, seeds). A
//!   fault poisons the CUDA context, so the GPU mode runs the cases in worker processes
//!   and starts a new one after a fault.
//! - `--no-gpu`: every fusion is planned for every call as an H100 would see it (one
//!   kernel, or segments), every distinct kernel compiled by NVRTC for sm_80 and sm_90,
//!   and the reference run on the CPU device. CI runs this mode. `--preset MODEL` plans
//!   for that GPU's public specification instead and compiles for its architecture.
//!
//! `--case SEED` runs one case (its reproducer printed first). `--repro FILE` runs a
//! printed reproducer again, in either mode: the `fusion!` source (built with the DSL) and
//! its `call` lines (data seeds, sizes, layouts, scalar values; an index argument's
//! `index < N`), as printed by `--case` or a failure report (whose `  | ` prefixes are
//! stripped; lines before the `fn` line are skipped). Each argument is made as the
//! generated case made it, the calls run through one executor, and the verdict is printed
//! as `case repro: VERDICT` (exit status 1 on a failure; no shrinking). With
//! `NVFUSER_DUMP=cuda,scheduler` and `--no-gpu` it prints the kernels an H100 would run.
//!
//! `NVFUSER_FUZZ_TRACE=1` prints each seed (and, with `--case`, the universe and call
//! sizes) to stderr, to find a case that hangs or exhausts memory.
//!
//! The last line is `fuzz: N fusions, N planned, N compiled, N failures` (planned: a plan
//! exists for every call; compiled: those whose kernels all compiled, or that ran on the
//! GPU), preceded by the refusals counted by reason. The exit status is 1 when anything
//! failed.

mod args;
mod compare;
mod gen;
mod run;
mod shrink;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use gen::Recipe;
use nvfuser::prelude::*;
use nvfuser::scheduler::GpuModel;
use run::{FailKind, Verdict};

struct Options {
    count: u64,
    seed: u64,
    steps: usize,
    calls: usize,
    no_gpu: bool,
    case: Option<u64>,
    repro: Option<String>,
    shrink: bool,
    worker: bool,
    quiet: bool,
    jobs: u64,
    /// Seconds after which no new case starts (the summary is still printed).
    time_limit: Option<u64>,
    /// `--preset`, as given (forwarded to workers).
    preset: Option<String>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        count: 200,
        seed: 0,
        steps: 12,
        calls: 3,
        no_gpu: false,
        case: None,
        repro: None,
        shrink: true,
        worker: false,
        quiet: false,
        jobs: 1,
        time_limit: None,
        preset: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a non-negative integer"))
        };
        match a.as_str() {
            "--count" => o.count = num("--count")?,
            "--seed" => o.seed = num("--seed")?,
            "--steps" => o.steps = num("--steps")? as usize,
            "--calls" => o.calls = num("--calls")?.max(1) as usize,
            "--case" => o.case = Some(num("--case")?),
            "--repro" => {
                o.repro = Some(args.next().ok_or("--repro needs a file")?);
            }
            "--no-gpu" => o.no_gpu = true,
            "--preset" => {
                let name = args.next().ok_or("--preset needs a GPU model")?;
                let model = name.parse::<GpuModel>().map_err(|e| e.to_string())?;
                let _ = run::PRESET.set(model);
                o.preset = Some(name);
            }
            "--no-shrink" => o.shrink = false,
            "--worker" => o.worker = true,
            "--quiet" => o.quiet = true,
            "--jobs" => o.jobs = num("--jobs")?.max(1),
            "--time-limit" => o.time_limit = Some(num("--time-limit")?),
            "--help" | "-h" => {
                println!("usage: fuzz [--count N] [--seed S] [--steps K] [--calls C] [--jobs J] [--time-limit SECS] [--no-gpu] [--preset MODEL] [--case SEED] [--repro FILE] [--no-shrink] [--quiet]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(o)
}

/// Tallies of a run.
#[derive(Default)]
struct Tally {
    fusions: u64,
    planned: u64,
    compiled: u64,
    empty: u64,
    failures: BTreeMap<String, u64>,
    refusals: BTreeMap<String, u64>,
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.fusions += o.fusions;
        self.planned += o.planned;
        self.compiled += o.compiled;
        self.empty += o.empty;
        for (k, n) in o.failures {
            *self.failures.entry(k).or_default() += n;
        }
        for (k, n) in o.refusals {
            *self.refusals.entry(k).or_default() += n;
        }
    }

    fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Empty => self.empty += 1,
            Verdict::Pass => {
                self.fusions += 1;
                self.planned += 1;
                self.compiled += 1;
            }
            Verdict::Refused(r) => {
                self.fusions += 1;
                *self.refusals.entry(run::reason_class(r)).or_default() += 1;
            }
            Verdict::Fail(k, _) => {
                self.fusions += 1;
                *self.failures.entry(k.to_string()).or_default() += 1;
            }
        }
    }

    fn failed(&self) -> u64 {
        self.failures.values().sum()
    }

    fn report(&self, mode: &str) {
        let refused: u64 = self.refusals.values().sum();
        println!("fuzz ({mode}): {refused} refused, by reason:");
        let mut by: Vec<_> = self.refusals.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1));
        for (r, n) in by {
            println!("  {n:6}  {r}");
        }
        for (k, n) in &self.failures {
            println!("fuzz ({mode}): {n} failures of kind {k}");
        }
        if self.empty > 0 {
            println!(
                "fuzz ({mode}): {} recipes built no fusion (not counted)",
                self.empty
            );
        }
        if self.fusions > 0 {
            println!(
                "fuzz ({mode}): {:.1}% of fusions ran (or were planned and compiled) rather than refused",
                100.0 * self.planned as f64 / self.fusions as f64
            );
        }
        println!(
            "fuzz: {} fusions, {} planned, {} compiled, {} failures",
            self.fusions,
            self.planned,
            self.compiled,
            self.failed()
        );
    }
}

fn main() {
    run::quiet_panics();
    if let Err(p) = std::panic::catch_unwind(real_main) {
        eprintln!("fuzz: panicked outside a case: {}", run::panic_text(&p));
        std::process::exit(101);
    }
}

fn real_main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("fuzz: {e}");
            std::process::exit(2);
        }
    };
    let gpu = if o.no_gpu {
        None
    } else {
        match Device::cuda(0) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("fuzz: no GPU ({e}); use --no-gpu for the planning and NVRTC mode");
                std::process::exit(2);
            }
        }
    };
    if let Some(path) = &o.repro {
        repro(path, gpu.as_ref());
    }
    if let Some(seed) = o.case {
        let recipe = match std::panic::catch_unwind(|| Recipe::generate(seed, o.steps, o.calls)) {
            Ok(r) => r,
            Err(p) => {
                println!(
                    "case {seed}: generating it panicked: {}",
                    run::panic_text(&p)
                );
                std::process::exit(1);
            }
        };
        if std::env::var_os("NVFUSER_FUZZ_TRACE").is_some() {
            eprintln!(
                "universe {:?}, calls {:?}",
                recipe.universe,
                recipe.calls.iter().map(|c| &c.sizes).collect::<Vec<_>>()
            );
        }
        println!("{}", run::reproducer(&recipe));
        if std::env::var_os("NVFUSER_FUZZ_TRACE").is_some() {
            eprintln!(
                "universe {:?}, calls {:?}",
                recipe.universe,
                recipe.calls.iter().map(|c| &c.sizes).collect::<Vec<_>>()
            );
        }
        let mut stats = run::CpuStats::default();
        let v = one(&recipe, gpu.as_ref(), &mut stats);
        println!("case {seed}: {v:?}");
        if let Verdict::Fail(kind, msg) = &v {
            if o.shrink && *kind != FailKind::Fault {
                report_failure(&o, &recipe, *kind, msg, gpu.as_ref(), &mut stats);
            }
        }
        std::process::exit(i32::from(matches!(v, Verdict::Fail(..))));
    }
    match gpu {
        Some(device) if o.worker => worker(&o, &device),
        Some(_) => driver(&o),
        None => cpu_mode(&o),
    }
}

fn one(recipe: &Recipe, gpu: Option<&Device>, stats: &mut run::CpuStats) -> Verdict {
    match run::Case::of(recipe) {
        Some(case) => run_case(&case, gpu, stats),
        None => Verdict::Empty,
    }
}

fn run_case(case: &run::Case, gpu: Option<&Device>, stats: &mut run::CpuStats) -> Verdict {
    match gpu {
        Some(d) => run::run_gpu(case, d),
        None => run::run_cpu(case, stats),
    }
}

/// `--repro FILE`: runs a printed reproducer as its case ran, and exits.
fn repro(path: &str, gpu: Option<&Device>) -> ! {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("fuzz: cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let case = match std::panic::catch_unwind(|| run::parse_reproducer(&text)) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            eprintln!("fuzz: {path}: not a reproducer: {e}");
            std::process::exit(2);
        }
        Err(p) => {
            println!("case repro: building it panicked: {}", run::panic_text(&p));
            std::process::exit(1);
        }
    };
    let mut stats = run::CpuStats::default();
    let v = run_case(&case, gpu, &mut stats);
    println!("case repro: {v:?}");
    std::process::exit(i32::from(matches!(v, Verdict::Fail(..))));
}

/// With `NVFUSER_FUZZ_SHOW_REFUSED` set, each refused case's seed and reason on stderr
/// (to pick a refusal class's cases for `--case`).
fn show_refused(seed: u64, v: &Verdict) {
    if let Verdict::Refused(r) = v {
        if std::env::var_os("NVFUSER_FUZZ_SHOW_REFUSED").is_some() {
            eprintln!("refused {seed}: {r}");
        }
    }
}

fn cpu_mode(o: &Options) {
    let mut tally = Tally::default();
    let mut stats = run::CpuStats::default();
    let t0 = std::time::Instant::now();
    for seed in o.seed..o.seed + o.count {
        if o.time_limit.is_some_and(|l| t0.elapsed().as_secs() >= l) {
            println!("fuzz (no GPU): time limit reached at seed {seed}");
            break;
        }
        if std::env::var_os("NVFUSER_FUZZ_TRACE").is_some() {
            eprintln!("seed {seed}");
        }
        let recipe = Recipe::generate(seed, o.steps, o.calls);
        let v = one(&recipe, None, &mut stats);
        if let Verdict::Fail(kind, msg) = &v {
            report_failure(o, &recipe, *kind, msg, None, &mut stats);
        }
        show_refused(seed, &v);
        tally.add(&v);
    }
    println!(
        "fuzz (no GPU): {} kernels generated, {} distinct compiled for sm_80 and sm_90, {:.1} s",
        stats.kernels,
        stats.compiled.len(),
        t0.elapsed().as_secs_f64()
    );
    tally.report("no GPU");
    std::process::exit(i32::from(tally.failed() > 0));
}

fn report_failure(
    o: &Options,
    recipe: &Recipe,
    kind: FailKind,
    msg: &str,
    gpu: Option<&Device>,
    stats: &mut run::CpuStats,
) {
    println!("FAIL seed {} ({kind}): {msg}", recipe.seed);
    let shown = if o.shrink && kind != FailKind::Fault {
        let small = shrink::shrink(recipe, kind, &mut |r| one(r, gpu, stats));
        if let Verdict::Fail(_, m) = one(&small, gpu, stats) {
            println!("  shrunk: {m}");
        }
        small
    } else {
        recipe.clone()
    };
    for line in run::reproducer(&shown).lines() {
        println!("  | {line}");
    }
}

/// GPU worker: runs seeds and prints one line per case, `case SEED pass|refused R|fail K M`.
fn worker(o: &Options, device: &Device) {
    let mut stats = run::CpuStats::default();
    let t0 = std::time::Instant::now();
    for seed in o.seed..o.seed + o.count {
        if o.time_limit.is_some_and(|l| t0.elapsed().as_secs() >= l) {
            break;
        }
        let recipe = Recipe::generate(seed, o.steps, o.calls);
        let v = one(&recipe, Some(device), &mut stats);
        let line = match &v {
            Verdict::Pass => "pass".to_string(),
            Verdict::Empty => "empty".to_string(),
            Verdict::Refused(r) => format!("refused {r}"),
            Verdict::Fail(k, m) => format!("fail {k} {}", m.replace('\n', " ")),
        };
        println!("case {seed} {line}");
        if let Verdict::Fail(kind, msg) = &v {
            if *kind == FailKind::Fault {
                // The context is poisoned: print the reproducer and stop this worker.
                report_failure(o, &recipe, *kind, msg, None, &mut stats);
                std::process::exit(3);
            }
            report_failure(o, &recipe, *kind, msg, Some(device), &mut stats);
        }
        let _ = std::io::stdout().flush();
    }
}

/// GPU driver: runs the seeds in `--jobs` worker processes at a time (each over its own
/// share of the seeds), restarting a worker after a fault or a crash.
fn driver(o: &Options) {
    let t0 = std::time::Instant::now();
    let jobs = o.jobs.min(o.count.max(1));
    let share = o.count.div_ceil(jobs);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|j| {
                let from = o.seed + j * share;
                let to = (from + share).min(o.seed + o.count);
                s.spawn(move || drive_range(o, from, to, t0))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut tally = Tally::default();
    for t in tallies {
        tally.merge(t);
    }
    println!(
        "fuzz (GPU): {:.0} s with {jobs} worker(s)",
        t0.elapsed().as_secs_f64()
    );
    tally.report("GPU");
    std::process::exit(i32::from(tally.failed() > 0));
}

static PRINT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs seeds `from..to` in worker processes, one after another.
fn drive_range(o: &Options, from: u64, end: u64, t0: std::time::Instant) -> Tally {
    let exe = std::env::current_exe().expect("the fuzzer's own path");
    let mut tally = Tally::default();
    let mut next = from;
    // A worker's failure report (its FAIL line and reproducer) is printed whole, so that
    // reports of concurrent workers do not interleave.
    let mut report = String::new();
    let flush = |report: &mut String| {
        if !report.is_empty() {
            let _guard = PRINT.lock();
            print!("{report}");
            report.clear();
        }
    };
    while next < end {
        let mut child = Command::new(&exe)
            .args([
                "--worker",
                "--seed",
                &next.to_string(),
                "--count",
                &(end - next).to_string(),
            ])
            .args([
                "--steps",
                &o.steps.to_string(),
                "--calls",
                &o.calls.to_string(),
            ])
            .args(if o.shrink {
                vec![]
            } else {
                vec!["--no-shrink"]
            })
            .args(match &o.preset {
                Some(p) => vec!["--preset", p.as_str()],
                None => vec![],
            })
            .args(match o.time_limit {
                Some(l) => vec![
                    "--time-limit".to_string(),
                    l.saturating_sub(t0.elapsed().as_secs()).max(1).to_string(),
                ],
                None => vec![],
            })
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn a fuzz worker");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut last = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("case ") {
                flush(&mut report);
                let mut parts = rest.splitn(3, ' ');
                let seed: u64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(next);
                let what = parts.next().unwrap_or("");
                let more = parts.next().unwrap_or("").to_string();
                last = Some(seed);
                let v = match what {
                    "pass" => Verdict::Pass,
                    "empty" => Verdict::Empty,
                    "refused" => Verdict::Refused(more),
                    _ => {
                        let (k, m) = more.split_once(' ').unwrap_or((&more, ""));
                        let kind = match k {
                            "mismatch" => FailKind::Mismatch,
                            "unrefused" => FailKind::Unrefused,
                            "fault" => FailKind::Fault,
                            "panic" => FailKind::Panic,
                            _ => FailKind::Error,
                        };
                        Verdict::Fail(kind, m.to_string())
                    }
                };
                show_refused(seed, &v);
                tally.add(&v);
                if !o.quiet && tally.fusions % 500 == 0 {
                    eprintln!(
                        "fuzz: seeds from {from}: {} fusions, {} failures, {:.0} s",
                        tally.fusions,
                        tally.failed(),
                        t0.elapsed().as_secs_f64()
                    );
                }
            } else {
                report.push_str(&line);
                report.push('\n');
            }
        }
        flush(&mut report);
        let status = child.wait().expect("wait for a fuzz worker");
        if o.time_limit.is_some_and(|l| t0.elapsed().as_secs() >= l) {
            break;
        }
        match last {
            Some(seed) if seed + 1 >= end => break,
            Some(seed) => {
                if !status.success() && status.code() != Some(3) {
                    // A crash after the case's line: count the next case as a crash.
                    let _guard = PRINT.lock();
                    println!("FAIL seed {} (panic): the worker died ({status})", seed + 1);
                    tally.add(&Verdict::Fail(FailKind::Panic, "worker died".into()));
                    next = seed + 2;
                } else {
                    next = seed + 1;
                }
            }
            None => {
                let _guard = PRINT.lock();
                println!("FAIL seed {next} (panic): the worker died before reporting ({status})");
                tally.add(&Verdict::Fail(FailKind::Panic, "worker died".into()));
                next += 1;
            }
        }
    }
    tally
}
