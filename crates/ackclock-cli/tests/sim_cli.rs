//! `ackclock sim`: every scenario runs, writes a non-empty PNG and SVG and a summary, and
//! the JSON summary parses; its captures decode cleanly in tshark.

mod common;

use common::{have_tshark, tshark};
use std::path::{Path, PathBuf};
use std::process::Command;

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sim_cli").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Run `ackclock sim <scenario> --json --out <dir> <extra>`; the parsed summary.
fn sim(scenario: &str, dir: &Path, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ackclock"))
        .args(["sim", scenario, "--json", "--seed", "1", "--out"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("run ackclock");
    assert!(out.status.success(), "ackclock sim {scenario}: {}", String::from_utf8_lossy(&out.stderr));
    // No progress bar (nor anything else) on a stderr that is not a terminal.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "ackclock sim {scenario}: stderr");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary on stdout");
    assert_eq!(json["scenario"], scenario);
    json
}

fn check_plots(dir: &Path, name: &str) {
    let png = std::fs::read(dir.join(format!("{name}.png"))).expect("PNG written");
    assert!(png.len() > 10_000, "{name}.png has a picture in it ({} bytes)", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}.png is a PNG");
    let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).expect("SVG written");
    assert!(svg.len() > 5_000 && svg.contains("<svg") && svg.contains("</svg>"), "{name}.svg");
    assert!(svg.contains("time (s)") || svg.contains("loss probability (%)"), "{name}.svg has axis labels");
    let txt = std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("text summary written");
    assert!(txt.contains("plots:"), "{txt}");
    let json = std::fs::read_to_string(dir.join(format!("{name}.json"))).expect("JSON summary written");
    serde_json::from_str::<serde_json::Value>(&json).expect("the JSON file parses");
}

#[test]
fn slowstart_plots_doubling() {
    let dir = out_dir("slowstart");
    let j = sim("slowstart", &dir, &[]);
    check_plots(&dir, "slowstart");
    let rounds = j["rounds"].as_array().unwrap();
    assert!(rounds.len() >= 5);
    for r in &rounds[1..] {
        let g = r["growth"].as_f64().unwrap();
        assert!((1.9..=2.1).contains(&g), "{r}");
    }
}

#[test]
fn fast_recovery_plots_and_summarises_seed_000() {
    let dir = out_dir("fast-recovery");
    let pcaps = dir.join("pcap");
    let j = sim("fast-recovery", &dir, &["--pcap", pcaps.to_str().unwrap()]);
    check_plots(&dir, "fast-recovery");
    assert_eq!(j["rtos"], 0);
    let w = j["window_segments"].as_f64().unwrap();
    let new = j["new_segments_in_recovery"].as_f64().unwrap();
    assert!((new - (w / 2.0 - 1.0)).abs() <= 1.0, "{j}");
    assert!(j["burst_on_recovery_ack"].as_u64().unwrap() <= 2);
    let pcap = std::fs::read(pcaps.join("fast-recovery.pcap")).expect("pcap written");
    assert!(pcap.len() > 100_000, "a capture of the whole run");
}

#[test]
fn timeout_plots_the_rto() {
    let dir = out_dir("timeout");
    let j = sim("timeout", &dir, &[]);
    check_plots(&dir, "timeout");
    assert_eq!(j["rtos_s"].as_array().unwrap().len(), 1);
    assert_eq!(j["cwnd_after_rto_segments"].as_f64(), Some(1.0));
}

#[test]
fn sharing_plots_flows_and_jain() {
    let dir = out_dir("sharing");
    let j = sim("sharing", &dir, &["--flows", "3", "--duration", "30"]);
    check_plots(&dir, "sharing");
    assert_eq!(j["flows"], 3);
    assert_eq!(j["last_half_mbps"].as_array().unwrap().len(), 3);
    assert!(j["jain"].as_f64().unwrap() > 0.8, "{j}");
}

#[test]
fn loss_sweep_plots_against_mathis() {
    let dir = out_dir("loss-sweep");
    let pcaps = dir.join("pcap");
    let j = sim("loss-sweep", &dir, &["--pcap", pcaps.to_str().unwrap()]);
    check_plots(&dir, "loss-sweep");
    // One capture per algorithm (its run at RTT 60 ms, 1% loss), not one per run.
    assert_eq!(j["pcap_run"], serde_json::json!({"rtt_ms": 60, "loss": 0.01}));
    let want: Vec<PathBuf> = ["cubic", "newreno", "newreno-sack"]
        .iter()
        .map(|a| pcaps.join(format!("loss-sweep-{a}-60ms-1pct.pcap")))
        .collect();
    let listed: Vec<PathBuf> =
        j["pcaps"].as_array().unwrap().iter().map(|p| PathBuf::from(p.as_str().unwrap())).collect();
    assert_eq!(listed, want);
    assert_eq!(std::fs::read_dir(&pcaps).unwrap().count(), 3);
    for p in &want {
        let pcap = std::fs::read(p).expect("pcap written");
        assert_eq!(pcap[..4], 0xa1b2_3c4du32.to_le_bytes(), "{}: a nanosecond pcap", p.display());
        // 30 simulated seconds at about 2.4 Mb/s of goodput: megabytes of whole frames.
        assert!(pcap.len() > 5_000_000, "{}: {} bytes", p.display(), pcap.len());
    }
    if have_tshark() {
        assert!(check_capture(&want[2]) > 5000);
    }
    let points = j["points"].as_array().unwrap();
    assert_eq!(points.len(), 21, "7 loss rates × 3 RTTs");
    // Goodput falls as loss grows, for every algorithm at every RTT.
    for rtt in [20, 60, 200] {
        let row = |p: f64| points.iter().find(|x| x["rtt_ms"] == rtt && x["loss"].as_f64() == Some(p)).unwrap();
        for algo in ["NewReno", "NewReno+SACK", "CUBIC"] {
            let lo = row(0.0001)[algo]["mbps"].as_f64().unwrap();
            let hi = row(0.05)[algo]["mbps"].as_f64().unwrap();
            assert!(hi < lo / 2.0, "{algo} at {rtt} ms: {lo} -> {hi}");
        }
    }
}

#[test]
fn rtt_plots_the_estimator() {
    let dir = out_dir("rtt");
    let j = sim("rtt", &dir, &[]);
    check_plots(&dir, "rtt");
    assert_eq!(j["rtos"], 0);
    assert_eq!(j["phases"].as_array().unwrap().len(), 5);
}

#[test]
fn text_summary_by_default_and_bad_arguments_fail() {
    let dir = out_dir("text");
    let out =
        Command::new(env!("CARGO_BIN_EXE_ackclock")).args(["sim", "slowstart", "--out"]).arg(&dir).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("round") && text.contains("slowstart.png"), "{text}");
    let bad = Command::new(env!("CARGO_BIN_EXE_ackclock")).args(["sim", "sharing", "--flows", "9"]).output().unwrap();
    assert!(!bad.status.success(), "at most 8 flows");
    let bad = Command::new(env!("CARGO_BIN_EXE_ackclock")).args(["sim", "no-such-scenario"]).output().unwrap();
    assert!(!bad.status.success());
}

/// Every frame of `pcap` is recorded whole and decodes as Ethernet/IPv4/TCP (or ARP) with
/// good checksums; no frame is malformed. Returns the number of TCP frames.
fn check_capture(pcap: &Path) -> usize {
    let fields = tshark(
        pcap,
        &[
            "-T",
            "fields",
            "-e",
            "frame.protocols",
            "-e",
            "frame.cap_len",
            "-e",
            "frame.len",
            "-e",
            "ip.checksum.status",
            "-e",
            "tcp.checksum.status",
        ],
    );
    let mut tcp = 0;
    for line in fields.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 5, "{}: {line}", pcap.display());
        assert_eq!(cols[1], cols[2], "{}: a frame recorded whole: {line}", pcap.display());
        match cols[0] {
            "eth:ethertype:ip:tcp" | "eth:ethertype:ip:tcp:data" => {
                assert_eq!(cols[3..], ["1", "1"], "{}: IPv4 and TCP checksums verified good: {line}", pcap.display());
                tcp += 1;
            }
            "eth:ethertype:arp" => {}
            other => panic!("{}: a frame decoded as {other}", pcap.display()),
        }
    }
    let broken = tshark(pcap, &["-Y", "tcp.checksum.status == Bad || ip.checksum.status == Bad || _ws.malformed"]);
    assert_eq!(broken.lines().count(), 0, "{}: bad checksums or malformed frames:\n{broken}", pcap.display());
    tcp
}

#[test]
fn tshark_decodes_every_frame_of_the_scenario_captures() {
    if !have_tshark() {
        return;
    }
    // A two-host scenario (the shaper drops a segment) and a dumbbell (captures per sender).
    let dir = out_dir("tshark");
    let pcaps = dir.join("pcap");
    sim("fast-recovery", &dir, &["--pcap", pcaps.to_str().unwrap()]);
    assert!(check_capture(&pcaps.join("fast-recovery.pcap")) > 3000, "the whole run is in the capture");
    sim("sharing", &dir, &["--pcap", pcaps.to_str().unwrap(), "--flows", "2", "--duration", "6"]);
    for flow in 0..2 {
        assert!(check_capture(&pcaps.join(format!("sharing-flow{flow}.pcap"))) > 1000);
    }
}
