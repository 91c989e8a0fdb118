//! `ackclock ttcp`, run as a user would: the built binary, its text and JSON output, the
//! sweep's files, and its captures read back by tshark. Every run is simulated and
//! deterministic; wall time is never asserted.

use serde_json::Value;
mod common;

use common::{have_tshark, tshark};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ackclock(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ackclock")).args(args).output().expect("run the ackclock binary")
}

/// Run `ackclock ttcp ARGS --json`, expect success, and parse the one JSON object.
fn ttcp_json(args: &[&str]) -> Value {
    let mut all = vec!["ttcp", "--json"];
    all.extend_from_slice(args);
    let out = ackclock(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ackclock {all:?} failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}"))
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ackclock-ttcp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("`{key}` is not a number in {v}"))
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("`{key}` is not an unsigned integer in {v}"))
}

#[test]
fn no_arguments_runs_on_ethernet10_and_prints_the_rates_and_the_formula() {
    let out = ackclock(&["ttcp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    for want in [
        "ethernet10: 10 Mb/s half duplex",
        "8388608 bytes",
        "task-to-task",
        "KB/s",
        "Mb/s",
        "of the max",
        "max = 10e6/8 B/s x 2x1448 / (2x1538 + 90)",
        "retransmitted",
        "simulated",
    ] {
        assert!(text.contains(want), "`{want}` missing from:\n{text}");
    }
}

#[test]
fn json_has_the_fields_and_they_agree() {
    let v = ttcp_json(&["--bytes", "1M"]);
    assert_eq!(v["link"]["profile"], "ethernet10");
    assert_eq!(v["link"]["duplex"], "half");
    assert_eq!(u(&v["link"], "rate_bps"), 10_000_000);
    assert_eq!(u(&v, "bytes"), 1 << 20);
    assert_eq!(u(&v, "received"), 1 << 20);
    assert_eq!(v["completed"], true);
    assert!(v["error"].is_null());
    assert_eq!((u(&v, "mss"), u(&v, "eff_mss"), u(&v, "packet_bytes")), (1460, 1448, 1448));
    assert_eq!((v["timestamps"].as_bool(), v["sack"].as_bool()), (Some(true), Some(true)));
    assert_eq!(v["cc"], "newreno");
    assert_eq!((f(&v, "sndbuf_packets"), f(&v, "rcvbuf_packets")), (17.0, 17.0));
    assert_eq!(u(&v, "sndbuf_bytes"), 17 * 1448);
    for key in ["retransmits", "fast_retransmits", "rtos", "lost", "queue_drops"] {
        assert_eq!(u(&v, key), 0, "{key} on a clean link");
    }
    let (task, max, secs) = (f(&v, "task_KBps"), f(&v, "max_KBps"), f(&v, "sim_seconds"));
    assert!(secs > 0.0 && f(&v, "wall_seconds") >= 0.0);
    assert!((task - (1 << 20) as f64 / 1024.0 / secs).abs() < 1e-6 * task, "KB/s is bytes/1024 per second");
    assert!((f(&v, "pct_of_max") - 100.0 * task / max).abs() < 1e-9);
    assert!((max - 1.25e6 * 2896.0 / 3166.0 / 1024.0).abs() < 1e-6, "the ethernet10 ceiling: {max}");
    assert!(task <= max * 1.0005, "nothing beats the medium: {task} > {max}");
    assert!(f(&v, "wire_Mbps") <= 10.0 + 1e-6);
    assert!(v["ceiling"]["formula"].as_str().unwrap().starts_with("max = 10e6/8"));
    assert!(u(&v, "data_frames") >= (1 << 20) / 1448);
}

#[test]
fn the_same_seed_gives_the_same_lossy_run() {
    let args = ["--bytes", "1M", "--loss", "0.02", "--reorder", "0.01", "--duplicate", "0.01", "--seed", "9"];
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("wall_seconds");
        v
    };
    let a = strip(ttcp_json(&args));
    let b = strip(ttcp_json(&args));
    assert_eq!(a, b);
    assert!(u(&a, "retransmits") > 0 && u(&a, "lost") > 0);
    assert_eq!(a["completed"], true);
}

/// Jacobson 1988's table, on the simulated 10 Mb/s Ethernet: with equal send and receive buffers
/// of 4 packets or more the transfer reaches at least 97% of the medium's ceiling.
fn equal_buffers_reach_97_percent(extra: &[&str], name: &str) {
    let dir = scratch(name);
    let csv = dir.join("sweep.csv");
    let plot = dir.join("sweep");
    let mut args = vec!["--sweep", "--diagonal", "--csv", s(&csv), "--plot", s(&plot)];
    args.extend_from_slice(extra);
    let v = ttcp_json(&args);
    let equal = v["equal"].as_array().unwrap();
    assert_eq!(equal.len(), 17);
    assert_eq!(u(&v["sweep"], "bytes"), 8 << 20);
    let max = f(&v, "max_KBps");
    for row in equal {
        let (n, pct, task) = (u(row, "packets"), f(row, "pct_of_max"), f(row, "task_KBps"));
        println!("{name}: {n:>2} packets: {task:7.1} KB/s, {:5.2} Mb/s, {pct:5.1}% of {max:.1}", f(row, "wire_Mbps"));
        assert!(task <= max * 1.0005, "{n} packets: {task} KB/s beats the ceiling {max}");
        if n >= 4 {
            assert!(pct >= 97.0, "{n} packets: {pct:.2}% of the maximum ({task:.1} of {max:.1} KB/s)");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn equal_buffer_sweep_on_ethernet10_reaches_97_percent_of_the_maximum() {
    equal_buffers_reach_97_percent(&[], "equal-ts");
}

#[test]
fn equal_buffer_sweep_without_timestamps_reaches_97_percent_of_the_maximum() {
    // Jacobson 1988's segments: 1460 bytes of user data, no options.
    equal_buffers_reach_97_percent(&["--no-timestamps"], "equal-nots");
}

#[test]
fn sweep_writes_the_grid_csv_and_a_heatmap() {
    let dir = scratch("grid");
    let csv = dir.join("grid.csv");
    let plot = dir.join("heat");
    let args =
        ["--sweep", "--max-buffer", "3", "--repeats", "2", "--bytes", "256k", "--csv", s(&csv), "--plot", s(&plot)];
    let v = ttcp_json(&args);
    assert_eq!(u(&v["sweep"], "runs"), 18);
    assert_eq!(u(&v["sweep"], "incomplete"), 0);
    let grid = v["grid"].as_array().unwrap();
    assert_eq!(grid.len(), 9);
    let mut order: Vec<u64> = Vec::new();
    for cell in grid {
        let runs = cell["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        order.extend(runs.iter().map(|r| u(r, "order")));
        assert!(f(cell, "task_KBps") > 0.0);
    }
    order.sort_unstable();
    assert_eq!(order, (0..18).collect::<Vec<u64>>(), "every run has a place in the order");
    // Random order: not the grid's own.
    let in_grid_order: Vec<u64> =
        grid.iter().flat_map(|c| c["runs"].as_array().unwrap().iter().map(|r| u(r, "order"))).collect();
    assert_ne!(in_grid_order, (0..18).collect::<Vec<u64>>());

    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 19, "a header and one line per run");
    assert!(lines[0].starts_with("send_packets,recv_packets,"));
    assert!(lines[1].starts_with("1,1,1448,1448,0,"));
    let png = std::fs::read(dir.join("heat.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg = std::fs::read_to_string(dir.join("heat.svg")).unwrap();
    for want in ["<svg", "receive buffer (packets)", "send buffer (packets)", "task-to-task KB/s"] {
        assert!(svg.contains(want), "`{want}` missing from the SVG");
    }

    // Same seed, same grid.
    let again = ttcp_json(&args);
    let cells = |v: &Value| {
        v["grid"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["task_KBps"].clone(),
                    c["runs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| (r["order"].clone(), r["seed"].clone(), r["task_KBps"].clone()))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(cells(&v), cells(&again));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sweep_text_shows_the_seed_column_next_to_ours() {
    let dir = scratch("text");
    let csv = dir.join("t.csv");
    let plot = dir.join("t");
    let out = ackclock(&[
        "ttcp",
        "--sweep",
        "--diagonal",
        "--max-buffer",
        "13",
        "--bytes",
        "512k",
        "--csv",
        s(&csv),
        "--plot",
        s(&plot),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("3/60 to 3/60"), "{text}");
    // Jacobson 1988's 1-packet and 12-packet rows, and a dash past its table.
    assert!(text.lines().any(|l| l.trim_start().starts_with("1 ") && l.contains("384") && l.contains("3.4")), "{text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("12 ") && l.contains("1001") && l.contains("8.9")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.trim_start().starts_with("13 ") && l.trim_end().ends_with('-')), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_arguments_are_refused() {
    let out = ackclock(&["ttcp", "--link", "custom"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rate"));
    for bad in [["--loss", "1.5"], ["--sndbuf", "1.5p"], ["--rate", "fast"], ["--delay", "3 parsecs"]] {
        let out = ackclock(&["ttcp", bad[0], bad[1]]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn every_link_profile_runs_near_its_ceiling() {
    for link in [
        &["--link", "ethernet100"][..],
        &["--link", "gigabit"],
        &["--link", "10g"],
        &["--link", "wan"],
        &["--link", "custom", "--rate", "50M", "--delay", "1ms"],
    ] {
        let mut args = link.to_vec();
        args.extend_from_slice(&["--bytes", "4M"]);
        let v = ttcp_json(&args);
        let pct = f(&v, "pct_of_max");
        assert_eq!(v["completed"], true, "{link:?}");
        assert!(pct > 90.0 && pct <= 100.05, "{link:?}: {pct}% of the maximum");
    }
}

// tshark --------------------------------------------------------------------------------

/// Frames matching a display filter.
fn count(pcap: &Path, filter: &str) -> usize {
    tshark(pcap, &["-Y", filter]).lines().count()
}

/// A bad checksum, a malformed packet, or any error-level expert finding. In tshark's
/// `*.checksum.status` fields 0 is Bad, 1 Good, 2 Unverified.
const BROKEN: &str =
    "ip.checksum.status == 0 || tcp.checksum.status == 0 || _ws.malformed || _ws.expert.severity >= 8388608";

#[test]
fn tshark_decodes_every_frame_of_a_clean_capture() {
    if !have_tshark() {
        return;
    }
    let dir = scratch("pcap-clean");
    let pcap = dir.join("clean.pcap");
    let v = ttcp_json(&["--pcap", s(&pcap)]);
    let frames = u(&v, "pcap_frames");
    assert!(frames > 8 * 1024 * 1024 / 1448, "{frames} frames");

    // Every frame is Ethernet/IPv4/TCP (with data or a bare ACK), or the ARP exchange.
    let protocols = tshark(
        &pcap,
        &["-T", "fields", "-e", "frame.protocols", "-e", "ip.checksum.status", "-e", "tcp.checksum.status"],
    );
    let (mut tcp, mut arp) = (0u64, 0u64);
    for line in protocols.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        match cols[0] {
            "eth:ethertype:ip:tcp" | "eth:ethertype:ip:tcp:data" => {
                assert_eq!(&cols[1..], ["1", "1"], "IPv4 and TCP checksums verified good: {line}");
                tcp += 1;
            }
            "eth:ethertype:arp" => arp += 1,
            other => panic!("a frame decoded as {other}"),
        }
    }
    assert_eq!(tcp + arp, frames, "tshark read every frame ackclock wrote");
    assert!(arp <= 4 && tcp > 0);
    assert_eq!(count(&pcap, BROKEN), 0, "no bad checksum, malformed packet or error");
    assert_eq!(count(&pcap, "tcp.analysis.retransmission || tcp.analysis.lost_segment"), 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// The display filter for the sender's data segments that tshark files under any of its
/// retransmission classes.
///
/// tshark's TCP analysis (Wireshark 4.0, `tcp_analyze_sequence_number`) puts a segment that
/// does not advance the sequence number into exactly one class, tried in this order:
/// - `fast_retransmission`: at least 2 duplicate ACKs for its sequence number, the last one
///   less than 20 ms before it;
/// - `out_of_order`: sent less than the connection's first RTT (measured on the handshake)
///   after the segment that last advanced the sequence number, and not ending where that one
///   ended;
/// - `spurious_retransmission`: its data was already acknowledged;
/// - `retransmission`: anything else.
///
/// Fast and spurious ones are also flagged `tcp.analysis.retransmission`; out-of-order ones
/// are not. That is where `tcp.analysis.retransmission` alone falls short: in SACK recovery
/// (RFC 6675) the sender resends later holes, and in NewReno a hole a partial ACK reveals,
/// while new data is still going out, often within one RTT of the newest segment. On
/// `ethernet10` the handshake's RTT is 0.18 ms (a SYN and a SYN-ACK are minimum frames),
/// so this is rare; on the 40 ms `wan` path a third of the retransmissions can land there. In a capture taken at the sender nothing
/// else goes backwards (the sender emits its sequence space in order; the link reorders
/// after the capture), so every out-of-order segment there is a retransmission, and
/// counting all four classes counts exactly the retransmissions. `tcp.len > 0`: ackclock
/// counts data-bearing retransmissions, not SYNs or bare FINs.
const SENDER_RETRANSMISSIONS: &str = "(tcp.analysis.retransmission || tcp.analysis.fast_retransmission \
     || tcp.analysis.spurious_retransmission || tcp.analysis.out_of_order) && ip.src == 10.0.0.1 && tcp.len > 0";

/// A lossy run: the data segments tshark files as retransmissions (any class, see
/// [`SENDER_RETRANSMISSIONS`]) are exactly those that go back below the highest sequence
/// number sent before them, frame by frame, and there are as many as ackclock counted.
fn retransmissions_match(args: &[&str], name: &str) {
    let dir = scratch(name);
    let pcap = dir.join("lossy.pcap");
    let mut all = vec!["--pcap", s(&pcap)];
    all.extend_from_slice(args);
    let v = ttcp_json(&all);
    assert_eq!(v["completed"], true);
    let ours = u(&v, "retransmits");
    assert_eq!(ours, u(&v, "stack_retransmitted"), "connection and stack counters agree");
    assert!(ours > 0 && u(&v, "lost") > 0, "{name}: the run lost and resent something");

    let fields = tshark(
        &pcap,
        &[
            "-Y",
            "ip.src == 10.0.0.1 && tcp.len > 0",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "tcp.seq_raw",
            "-e",
            "tcp.len",
            "-e",
            "tcp.analysis.retransmission",
            "-e",
            "tcp.analysis.fast_retransmission",
            "-e",
            "tcp.analysis.spurious_retransmission",
            "-e",
            "tcp.analysis.out_of_order",
        ],
    );
    let (mut backwards, mut classes) = (0u64, [0u64; 4]);
    let mut highest: Option<u32> = None;
    for line in fields.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        assert_eq!(c.len(), 7, "{line}");
        let (seq, len): (u32, u32) = (c[1].parse().unwrap(), c[2].parse().unwrap());
        let flags: Vec<bool> = c[3..].iter().map(|f| !f.is_empty()).collect();
        // Below the highest sequence number sent so far (sequence space wraps).
        let back = highest.is_some_and(|h| (seq.wrapping_sub(h) as i32) < 0);
        let end = seq.wrapping_add(len);
        if highest.is_none_or(|h| (end.wrapping_sub(h) as i32) > 0) {
            highest = Some(end);
        }
        assert_eq!(flags.iter().any(|&f| f), back, "{name}: frame {}: tshark's classes {flags:?}", c[0]);
        assert!(!flags[1] || flags[0], "{name}: frame {}: a fast retransmission is a retransmission", c[0]);
        assert!(!flags[2] || flags[0], "{name}: frame {}: a spurious retransmission is a retransmission", c[0]);
        backwards += u64::from(back);
        for (n, f) in classes.iter_mut().zip(&flags) {
            *n += u64::from(*f);
        }
    }
    println!(
        "{name}: ackclock {ours} retransmissions ({} fast retransmits, {} RTOs); tshark: {} retransmission ({} fast, \
         {} spurious), {} out-of-order",
        u(&v, "fast_retransmits"),
        u(&v, "rtos"),
        classes[0],
        classes[1],
        classes[2],
        classes[3]
    );
    assert_eq!(backwards, ours, "{name}: segments sent again, by sequence number");
    assert_eq!(count(&pcap, SENDER_RETRANSMISSIONS) as u64, ours, "{name}: tshark's retransmission classes");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tshark_counts_the_retransmissions_ackclock_counts() {
    if !have_tshark() {
        return;
    }
    let runs: [(&str, &[&str]); 9] = [
        ("e10-2pc", &["--loss", "0.02", "--seed", "2"]),
        ("e10-1pc", &["--bytes", "2M", "--loss", "0.01", "--seed", "1"]),
        ("e10-5pc", &["--bytes", "2M", "--loss", "0.05", "--seed", "3"]),
        ("e10-nosack-1pc", &["--bytes", "2M", "--loss", "0.01", "--seed", "6", "--no-sack"]),
        ("e10-nosack-5pc", &["--bytes", "2M", "--loss", "0.05", "--seed", "5", "--no-sack"]),
        ("wan-cubic-2pc", &["--link", "wan", "--loss", "0.02", "--seed", "8", "--cc", "cubic"]),
        ("wan-cubic-5pc", &["--link", "wan", "--bytes", "2M", "--loss", "0.05", "--seed", "4", "--cc", "cubic"]),
        ("wan-nosack-2pc", &["--link", "wan", "--bytes", "2M", "--loss", "0.02", "--seed", "3", "--no-sack"]),
        ("wan100-half-pc", &["--link", "wan", "--rate", "100M", "--delay", "10ms", "--loss", "0.005", "--seed", "2"]),
    ];
    for (name, args) in runs {
        retransmissions_match(args, name);
    }
}

#[test]
fn tshark_sees_the_corrupted_frames_the_sender_received() {
    if !have_tshark() {
        return;
    }
    let dir = scratch("pcap-corrupt");
    let pcap = dir.join("corrupt.pcap");
    let v = ttcp_json(&["--pcap", s(&pcap), "--bytes", "2M", "--corrupt", "0.02", "--seed", "6"]);
    assert!(u(&v, "corrupted") > 0);
    // Corrupted ACKs reach the sender and its capture; its own frames leave intact.
    assert!(count(&pcap, "ip.checksum.status == 0 || tcp.checksum.status == 0") > 0);
    assert_eq!(count(&pcap, "(ip.checksum.status == 0 || tcp.checksum.status == 0) && ip.src == 10.0.0.1"), 0);
    let _ = std::fs::remove_dir_all(dir);
}
