//! Internet checksum throughput: `sum`, `copy_and_sum` and the `copy_from_slice` (memcpy)
//! baseline side by side at 64 B, 1460 B (a full-size TCP segment) and 64 KiB, hot in
//! cache (every iteration reuses the same buffers).
//!
//! `cargo bench -p ackclock --bench checksum`. After criterion's own output, this prints a
//! Markdown table (GB/s = 10^9 bytes/s from criterion's median time per iteration, and the
//! copy_and_sum / memcpy ratio) read back from `<criterion home>/checksum_*/*/new/
//! estimates.json`; it is also written to `<criterion home>/checksum_table.md`. With a
//! name filter the table still shows the last stored result of the benches not run.
//!
//! Both buffers are 64-byte aligned and a multiple of 4 KiB apart. On the machine in
//! BENCHMARKS.md, glibc's `rep movsb` path for large copies drops to ~3 GB/s when the
//! destination sits a few bytes past the source modulo 4 KiB (which is what two separate
//! 64 KiB `Vec`s happen to give), which would make the memcpy baseline meaningless.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use ackclock::wire::checksum::{copy_and_sum, sum};
use criterion::{criterion_group, BenchmarkId, Criterion, SamplingMode, Throughput};

const SIZES: [usize; 3] = [64, 1460, 65536];
const FUNCTIONS: [&str; 3] = ["memcpy", "copy_and_sum", "sum"];

/// `(src, dst)` ranges into one allocation: 64-byte aligned, `dst - src` a multiple of
/// 4 KiB.
fn buffers(size: usize) -> (Vec<u8>, usize, usize) {
    let span = size.div_ceil(4096) * 4096 + 4096;
    let mut buf: Vec<u8> = (0..2 * span + 64).map(|i| (i as u8).wrapping_mul(151) ^ 0x5a).collect();
    let src = buf.as_ptr().align_offset(64);
    buf[src + span..].fill(0);
    (buf, src, src + span)
}

fn bench(c: &mut Criterion) {
    for size in SIZES {
        let (mut buf, s, d) = buffers(size);
        let (head, tail) = buf.split_at_mut(d);
        let src = &head[s..s + size];
        let dst = &mut tail[..size];
        let mut group = c.benchmark_group(format!("checksum_{size}"));
        group.throughput(Throughput::Bytes(size as u64)).sampling_mode(SamplingMode::Flat);
        group.bench_function(BenchmarkId::from_parameter("memcpy"), |b| {
            b.iter(|| black_box(&mut *dst).copy_from_slice(black_box(src)))
        });
        group.bench_function(BenchmarkId::from_parameter("copy_and_sum"), |b| {
            b.iter(|| copy_and_sum(black_box(&mut *dst), black_box(src)))
        });
        group.bench_function(BenchmarkId::from_parameter("sum"), |b| b.iter(|| sum(black_box(src))));
        group.finish();
    }
}

criterion_group! {
    name = benches;
    // Many short equal samples (about 5 ms each) and the median: on a shared machine a
    // sample that the scheduler interrupted is an outlier, not a shift of every sample.
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_millis(2500))
        .sample_size(500)
        .nresamples(20_000);
    targets = bench
}

/// Where criterion writes (its own rule, minus the `cargo metadata` fallback: the bench
/// binary lives in `<target>/<profile>/deps/`).
fn criterion_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(home.into());
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(target).join("criterion"));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// Median time per iteration in ns, from criterion's `estimates.json` (a flat search, to
/// avoid a JSON dependency: `"median":{"confidence_interval":{..},"point_estimate":X`).
fn median_ns(home: &std::path::Path, size: usize, function: &str) -> Option<f64> {
    let path = home.join(format!("checksum_{size}/{function}/new/estimates.json"));
    let json = std::fs::read_to_string(path).ok()?;
    let median = &json[json.find("\"median\":")?..];
    let value = &median[median.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = value.find([',', '}'])?;
    value[..end].trim().parse().ok()
}

fn table() -> Option<String> {
    let home = criterion_home()?;
    let mut out = String::from(
        "| size | memcpy GB/s | copy_and_sum GB/s | sum GB/s | copy_and_sum / memcpy |\n\
         |---:|---:|---:|---:|---:|\n",
    );
    for size in SIZES {
        let gbps = FUNCTIONS.map(|f| median_ns(&home, size, f).map(|ns| size as f64 / ns));
        let cell = |g: Option<f64>| g.map_or("-".to_string(), |g| format!("{g:.1}"));
        let ratio = match gbps {
            [Some(m), Some(c), _] => format!("{:.0}%", 100.0 * c / m),
            _ => "-".to_string(),
        };
        let _ = writeln!(out, "| {size} B | {} | {} | {} | {ratio} |", cell(gbps[0]), cell(gbps[1]), cell(gbps[2]));
    }
    let _ = std::fs::write(home.join("checksum_table.md"), &out);
    Some(out)
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo test --benches` runs this binary in test mode: no table then.
    if std::env::args().any(|a| a == "--bench") {
        match table() {
            Some(t) => println!("\n{t}"),
            None => eprintln!("criterion results not found"),
        }
    }
}
