//! The results: one JSON document (format `nvfuser-bench/1`, also written by
//! `scripts/bench/torch_baseline.py`) and a markdown table.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

/// The device-to-device copy every case is compared with.
#[derive(Clone, Debug, Serialize)]
pub struct CopyResult {
    /// Bytes copied (read once and written once: the bandwidth counts twice this).
    pub bytes: u64,
    pub time_us: f64,
    pub gb_s: f64,
}

/// One case's result. Times are medians over `repeats`; `None` when it did not run.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub group: String,
    pub kernel: String,
    pub shape: Vec<usize>,
    pub dtype: String,
    /// Logical bytes: every input and output once.
    pub bytes: u64,
    /// `ok`, `mismatch` (ran, but the output differs from the CPU reference),
    /// `unsupported` (the library refused the fusion) or `error`.
    pub status: String,
    pub error: Option<String>,
    /// What the correctness check found.
    pub check: String,
    pub time_us: Option<f64>,
    pub min_us: Option<f64>,
    pub max_us: Option<f64>,
    pub gb_s: Option<f64>,
    pub pct_of_copy: Option<f64>,
    /// A whole `FusionExecutorCache::run` on the device's timeline (allocation, launch).
    pub call_us: Option<f64>,
    pub scheduler: Option<String>,
    pub kernel_name: Option<String>,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub registers: Option<u32>,
    /// First call: schedule, generate, compile (or load from the disk cache), run.
    pub first_call_ms: Option<f64>,
    /// The heuristic params the scheduler picked (`HeuristicParams` as JSON).
    pub params: Option<serde_json::Value>,
    pub note: String,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub format: &'static str,
    /// `nvfuser-rs` here; `torch-eager` / `torch-compile` from the PyTorch script.
    pub implementation: String,
    pub device: String,
    pub date: String,
    pub repeats: usize,
    pub timing: String,
    pub l2_flush_bytes: u64,
    pub peak_gb_s: Option<f64>,
    pub copy: Option<CopyResult>,
    pub cases: Vec<CaseResult>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{x:.digits$}"))
}

fn shape(s: &[usize]) -> String {
    let dims: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

/// The markdown table of a report (with a header naming device, date and method).
pub fn markdown(r: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# {} on {}\n", r.implementation, r.device);
    let _ = writeln!(md, "Date: {}. {}", r.date, r.timing);
    if let Some(c) = &r.copy {
        let _ = writeln!(
            md,
            "Device-to-device copy of {} MiB: {:.1} us, {:.0} GB/s (the 100% of `% copy`).",
            c.bytes >> 20,
            c.time_us,
            c.gb_s
        );
    }
    if let Some(p) = r.peak_gb_s {
        let _ = writeln!(md, "Theoretical peak DRAM bandwidth: {p:.0} GB/s.");
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| case | shape | dtype | scheduler | time (us) | GB/s | % copy | call (us) | check |"
    );
    let _ = writeln!(md, "|---|---|---|---|---:|---:|---:|---:|---|");
    for c in &r.cases {
        let check = match &c.error {
            Some(e) => format!("{}: {}", c.status, one_line(e, 120)),
            None => one_line(&c.check, 120),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.name,
            shape(&c.shape),
            c.dtype,
            c.scheduler.as_deref().unwrap_or("-"),
            opt(c.time_us, 1),
            opt(c.gb_s, 0),
            opt(c.pct_of_copy, 1),
            opt(c.call_us, 1),
            check.replace('|', "\\|"),
        );
    }
    md
}

/// The first line of `s`, cut to `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}...")
    } else {
        line.to_owned()
    }
}

/// Writes `<dir>/<name>.json` and `<dir>/<name>.md`.
pub fn write(dir: &Path, name: &str, r: &Report) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(r).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(format!("{name}.json")), json + "\n")?;
    std::fs::write(dir.join(format!("{name}.md")), markdown(r))?;
    Ok(())
}
