//! `NVFUSER_DUMP`: printing the stages of a fusion's compilation and its launches.
//!
//! `NVFUSER_DUMP` holds a comma list of stage names ([`DUMP_NAMES`]):
//!
//! - `ir`: the fusion (its `Display`), when a runtime is built;
//! - `scheduler`: the scheduler that took the fusion, every refusal before it (with
//!   its reason) and the heuristic params, when a runtime is built;
//! - `scheduled`: the scheduled IR (loop domains), when a runtime is built;
//! - `cuda`: the generated CUDA source, when a runtime is built;
//! - `launch`: grid and block dims and the runtime sizes, on every launch;
//! - `all`: all of them.
//!
//! The variable is read and parsed once per process ([`Dump::from_env`]); an unknown name
//! gets one warning on stderr that lists the valid ones. Build-time stages are printed
//! only when a runtime is built, never on a cached call, so the hot path costs one flag
//! check. Output goes to stderr, or to any writer ([`Dump::to_writer`]) for tests and
//! tools; [`crate::FusionExecutorCache::with_dump`] gives one executor its own.
//!
//! ```
//! use nvfuser_cuda::dump::{parse_dump_spec, DumpFlags};
//!
//! let (flags, unknown) = parse_dump_spec("ir, cuda,bogus");
//! assert_eq!(flags, DumpFlags::IR | DumpFlags::CUDA);
//! assert_eq!(unknown, ["bogus"]);
//! ```

use std::fmt;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// The environment variable that selects what is dumped.
pub const DUMP_VAR: &str = "NVFUSER_DUMP";

/// The names `NVFUSER_DUMP` accepts.
pub const DUMP_NAMES: &[&str] = &[
    "ir",
    "scheduler",
    "plan",
    "scheduled",
    "cuda",
    "launch",
    "all",
];

/// A set of dump stages.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DumpFlags(u8);

impl DumpFlags {
    /// Nothing.
    pub const NONE: DumpFlags = DumpFlags(0);
    /// The fusion, when a runtime is built.
    pub const IR: DumpFlags = DumpFlags(1);
    /// The scheduled IR, when a runtime is built.
    pub const SCHEDULED: DumpFlags = DumpFlags(2);
    /// The generated CUDA source, when a runtime is built.
    pub const CUDA: DumpFlags = DumpFlags(4);
    /// Launch dims and runtime sizes, on every launch.
    pub const LAUNCH: DumpFlags = DumpFlags(8);
    /// Which scheduler took the fusion, why the others refused, and its params, when a
    /// runtime is built.
    pub const SCHEDULER: DumpFlags = DumpFlags(16);
    /// The execution plan (host scalars, segments, kernels, value maps), when a runtime
    /// is built.
    pub const PLAN: DumpFlags = DumpFlags(32);
    /// Every stage.
    pub const ALL: DumpFlags = DumpFlags(63);

    /// Whether every stage of `other` is in `self`.
    #[inline]
    pub fn contains(self, other: DumpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no stage is selected.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for DumpFlags {
    type Output = DumpFlags;
    fn bitor(self, rhs: DumpFlags) -> DumpFlags {
        DumpFlags(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for DumpFlags {
    fn bitor_assign(&mut self, rhs: DumpFlags) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for DumpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [
            (DumpFlags::IR, "ir"),
            (DumpFlags::SCHEDULED, "scheduled"),
            (DumpFlags::CUDA, "cuda"),
            (DumpFlags::LAUNCH, "launch"),
            (DumpFlags::SCHEDULER, "scheduler"),
            (DumpFlags::PLAN, "plan"),
        ]
        .iter()
        .filter(|(flag, _)| self.contains(*flag))
        .map(|&(_, name)| name)
        .collect();
        write!(f, "DumpFlags({})", names.join(","))
    }
}

/// Parses an `NVFUSER_DUMP` value: comma-separated names ([`DUMP_NAMES`]), case and
/// surrounding spaces ignored, empty items skipped. Returns the stages and the names it
/// did not know, in order.
pub fn parse_dump_spec(spec: &str) -> (DumpFlags, Vec<String>) {
    let mut flags = DumpFlags::NONE;
    let mut unknown = Vec::new();
    for item in spec.split(',') {
        let name = item.trim().to_ascii_lowercase();
        flags |= match name.as_str() {
            "" => continue,
            "ir" => DumpFlags::IR,
            "scheduled" => DumpFlags::SCHEDULED,
            "cuda" => DumpFlags::CUDA,
            "launch" => DumpFlags::LAUNCH,
            "scheduler" => DumpFlags::SCHEDULER,
            "plan" => DumpFlags::PLAN,
            "all" => DumpFlags::ALL,
            _ => {
                unknown.push(item.trim().to_owned());
                continue;
            }
        };
    }
    (flags, unknown)
}

/// The warning for unknown `NVFUSER_DUMP` names, or `None` when all were known.
pub fn unknown_names_warning(unknown: &[String]) -> Option<String> {
    if unknown.is_empty() {
        return None;
    }
    Some(format!(
        "nvfuser: ignoring unknown {DUMP_VAR} name(s) {}; valid names: {}",
        unknown
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        DUMP_NAMES.join(", ")
    ))
}

/// A shared writer that dump output can go to.
pub type DumpWriter = Arc<Mutex<dyn Write + Send>>;

#[derive(Clone)]
enum Sink {
    Stderr,
    Writer(DumpWriter),
}

/// What to dump and where: stderr or an injected writer. Cheap to clone.
#[derive(Clone)]
pub struct Dump {
    flags: DumpFlags,
    sink: Sink,
}

impl fmt::Debug for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sink = match self.sink {
            Sink::Stderr => "stderr",
            Sink::Writer(_) => "writer",
        };
        f.debug_struct("Dump")
            .field("flags", &self.flags)
            .field("sink", &sink)
            .finish()
    }
}

static FROM_ENV: OnceLock<Dump> = OnceLock::new();

impl Dump {
    /// Dumps nothing.
    pub fn off() -> Dump {
        Dump {
            flags: DumpFlags::NONE,
            sink: Sink::Stderr,
        }
    }

    /// Dumps `flags` to stderr.
    pub fn to_stderr(flags: DumpFlags) -> Dump {
        Dump {
            flags,
            sink: Sink::Stderr,
        }
    }

    /// Dumps `flags` to `writer` (e.g. an `Arc<Mutex<Vec<u8>>>` that a test reads back).
    pub fn to_writer(flags: DumpFlags, writer: DumpWriter) -> Dump {
        Dump {
            flags,
            sink: Sink::Writer(writer),
        }
    }

    /// The process-wide dump selected by `NVFUSER_DUMP`, read and parsed on the first
    /// call only (unknown names are warned about then, once, through `log`).
    #[inline]
    pub fn from_env() -> &'static Dump {
        FROM_ENV.get_or_init(|| {
            let spec = std::env::var(DUMP_VAR).unwrap_or_default();
            let (flags, unknown) = parse_dump_spec(&spec);
            if let Some(warning) = unknown_names_warning(&unknown) {
                log::warn!(target: "nvfuser", "{warning}");
            }
            Dump::to_stderr(flags)
        })
    }

    /// The selected stages.
    #[inline]
    pub fn flags(&self) -> DumpFlags {
        self.flags
    }

    /// Whether launches are dumped (the one check on the launch path).
    #[inline]
    pub fn launch_enabled(&self) -> bool {
        self.flags.contains(DumpFlags::LAUNCH)
    }

    /// Writes one section, `body` under a `==== NVFUSER_DUMP <stage>: <title> ====`
    /// header, when `stage` is selected. `body` is only formatted then.
    pub fn section(&self, stage: DumpFlags, name: &str, title: &str, body: &dyn fmt::Display) {
        if !self.flags.contains(stage) || stage.is_empty() {
            return;
        }
        let mut text = format!("==== {DUMP_VAR} {name}: {title} ====\n{body}");
        if !text.ends_with('\n') {
            text.push('\n');
        }
        self.write(&text);
    }

    /// Writes one line (a newline is added).
    pub fn line(&self, line: &str) {
        self.write(&format!("{line}\n"));
    }

    fn write(&self, text: &str) {
        // Dumps are diagnostics: a failed write must not fail the fusion.
        match &self.sink {
            Sink::Stderr => {
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
            Sink::Writer(w) => {
                let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
                let _ = w.write_all(text.as_bytes());
                let _ = w.flush();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_flags() {
        assert_eq!(parse_dump_spec(""), (DumpFlags::NONE, vec![]));
        assert_eq!(parse_dump_spec("ir"), (DumpFlags::IR, vec![]));
        assert_eq!(
            parse_dump_spec("ir,scheduler,plan,scheduled,cuda,launch").0,
            DumpFlags::ALL
        );
        assert_eq!(
            parse_dump_spec(" CUDA , ,launch,").0,
            DumpFlags::CUDA | DumpFlags::LAUNCH
        );
        assert_eq!(parse_dump_spec("all"), (DumpFlags::ALL, vec![]));
        assert_eq!(parse_dump_spec("scheduled,all").0, DumpFlags::ALL);
    }

    #[test]
    fn unknown_names_are_reported_with_the_valid_ones() {
        let (flags, unknown) = parse_dump_spec("ir,segments, Fusion");
        assert_eq!(flags, DumpFlags::IR);
        assert_eq!(unknown, ["segments", "Fusion"]);
        let warning = unknown_names_warning(&unknown).unwrap();
        assert!(warning.contains("\"segments\", \"Fusion\""), "{warning}");
        for name in DUMP_NAMES {
            assert!(warning.contains(name), "{warning}");
        }
        assert_eq!(unknown_names_warning(&[]), None);
    }

    #[test]
    fn flags_contain_and_debug() {
        assert!(DumpFlags::ALL.contains(DumpFlags::SCHEDULED));
        assert!(!DumpFlags::IR.contains(DumpFlags::CUDA));
        assert!(DumpFlags::NONE.is_empty());
        assert_eq!(
            format!("{:?}", DumpFlags::IR | DumpFlags::LAUNCH),
            "DumpFlags(ir,launch)"
        );
    }

    #[test]
    fn sections_go_to_the_writer_only_when_selected() {
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let dump = Dump::to_writer(DumpFlags::IR, buf.clone());
        dump.section(DumpFlags::IR, "ir", "k", &"T2 = T0 + T1");
        dump.section(DumpFlags::CUDA, "cuda", "k", &"__global__");
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "==== NVFUSER_DUMP ir: k ====\nT2 = T0 + T1\n");
        assert!(!Dump::off().launch_enabled());
    }

    fn captured(buf: &Arc<Mutex<Vec<u8>>>) -> String {
        String::from_utf8(buf.lock().unwrap().clone()).unwrap()
    }

    /// Building a runtime dumps its stages before compiling, so the build path is
    /// exercised without a GPU: on the CPU device the build stops at loading the kernel.
    #[test]
    fn building_a_runtime_dumps_the_selected_stages() {
        use crate::{Device, Error, FusionExecutorCache};
        use nvfuser_core::{DataType, FusionDefinition};

        let mut fd = FusionDefinition::new();
        let a = fd.define_tensor(DataType::F32, &[-1]).unwrap();
        let b = fd.define_tensor(DataType::F32, &[-1]).unwrap();
        let two = fd.constant(2.0f32);
        let y = fd.mul(a, two).unwrap();
        let y = fd.add(y, b).unwrap();
        fd.add_output(y).unwrap();
        let fusion = fd.finish().unwrap();
        let cpu = Device::cpu();
        let x = cpu.tensor_from_slice(&[1.0f32, 2.0], [2]).unwrap();
        let args = [(&x).into(), (&x).into()];

        // Generating (no GPU needed: the heuristics see an H100's properties) dumps the
        // stages in order; a CPU device has no kernel to show.
        let info = nvfuser_core::scheduler::RuntimeInfo::contiguous(
            nvfuser_core::scheduler::DeviceInfo::h100_for_tests(),
            &[(DataType::F32, &[2]), (DataType::F32, &[2])],
        );
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let exec = FusionExecutorCache::new(fusion.clone())
            .with_dump(Dump::to_writer(DumpFlags::ALL, buf.clone()));
        let err = exec.cuda_source(&cpu, &args).unwrap_err();
        assert!(matches!(err, Error::NotAGpu { .. }), "{err}");
        assert!(captured(&buf).is_empty());
        exec.generate_for(&info, None).unwrap();
        let text = captured(&buf);
        let ir = text
            .find("==== NVFUSER_DUMP ir: fusion ====\n")
            .expect(&text);
        let scheduler = text.find("==== NVFUSER_DUMP scheduler: ").expect(&text);
        let sched = text.find("==== NVFUSER_DUMP scheduled: ").expect(&text);
        let cuda = text.find("==== NVFUSER_DUMP cuda: ").expect(&text);
        assert!(scheduler < ir && ir < sched && sched < cuda, "{text}");
        assert!(
            text[scheduler..ir].contains("pointwise: takes it"),
            "{text}"
        );
        assert!(
            text[scheduler..ir].contains("reduction: refused: "),
            "{text}"
        );
        // The kernel fusion: the definition with tied input dims spelled one way.
        assert!(
            text[ir..sched].contains(&exec.kernel_fusion().to_string()),
            "{text}"
        );
        assert!(text[ir..sched].contains("T1: f32[T0.size(0)]"), "{text}");
        assert!(text[sched..cuda].contains("(pointwise) ===="), "{text}");
        assert!(text[cuda..].contains("__global__"), "{text}");
        assert!(!text.contains("NVFUSER_DUMP: launch"), "{text}");

        // Only the selected stages.
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let exec = FusionExecutorCache::new(fusion)
            .with_dump(Dump::to_writer(DumpFlags::SCHEDULED, buf.clone()));
        exec.generate_for(&info, None).unwrap();
        let text = captured(&buf);
        assert!(text.starts_with("==== NVFUSER_DUMP scheduled: "), "{text}");
        assert!(!text.contains("NVFUSER_DUMP ir") && !text.contains("__global__"));
    }
}
