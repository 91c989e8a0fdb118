//! A crafted-frame barrage against `ackclock serve` over a TAP whose kernel side lives in a
//! private network namespace made (and removed) by each test: a Python client holds an echo
//! connection open while `tests/barrage.py` (scapy, on an AF_PACKET socket in the namespace)
//! sends blind RSTs, SYNs and data with guessed numbers (RFC 5961 §3-5), fuzzed TCP headers
//! and options, malformed IPv4, forged and malformed ICMP, and truncated and garbage Ethernet
//! frames. Afterwards the connection still echoes byte-exact, serve is still running, and
//! every frame is accounted for: serve's counters (read on SIGUSR1 before and after) moved by
//! exactly what each category of frame must move, the RSTs the stack sent are the ones the
//! sniffer saw, and the stack took in exactly the frames the sniffer saw go to it.
//!
//! Needs root, /dev/net/tun, python3 and scapy (scripts/test installs python3-scapy): without
//! them the test prints why and passes as skipped. Every wait is bounded.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use common::interop::{serve, skip, Mode, Proc, STACK_ADDR};
use common::netns::NetNs;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Python interpreter that has scapy: `python3` on PATH, or Debian's (where
/// python3-scapy puts it) when PATH's is another one.
fn scapy_python() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|p| Command::new(p).args(["-c", "import scapy.all"]).output().is_ok_and(|o| o.status.success()))
}

/// The barrage script, killed on drop so a failed assertion leaves nothing running.
struct Script(Child);

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// serve's counters now: SIGUSR1, then its `"event": "stats"` line (at most 10 s).
fn stats(serve: &mut Proc) -> Value {
    // SAFETY: signalling our own child, which has not been reaped yet.
    unsafe { libc::kill(serve.child.id() as libc::pid_t, libc::SIGUSR1) };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = serve.lines.recv_timeout(left).expect("serve's stats line");
        if line.contains(r#""event":"stats""#) {
            return serde_json::from_str(&line).unwrap_or_else(|e| panic!("stats line ({e}): {line}"));
        }
    }
}

/// How much the counters named in `key` (`a` or `a|b`, summed) moved between two reports.
fn delta(before: &Value, after: &Value, key: &str) -> i64 {
    key.split('|')
        .map(|k| {
            let get = |v: &Value| v["tcp"][k].as_i64().unwrap_or_else(|| panic!("no counter {k}: {v}"));
            get(after) - get(before)
        })
        .sum()
}

fn barrage(mode: Mode) {
    if skip(&["python3"]) {
        return;
    }
    let Some(python) = scapy_python() else {
        println!("SKIP: scapy is not installed (scripts/test installs it: apt-get install python3-scapy)");
        return;
    };
    let mut ns = NetNs::new();
    // No IPv6 in the namespace: Linux's router and neighbour solicitations would be frames
    // the stack counts (as an unknown protocol) that the barrage did not send.
    let v6 = ns
        .command(10, "sh")
        .args([
            "-c",
            "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
        ])
        .output()
        .expect("run sh");
    assert!(v6.status.success(), "disable IPv6: {}", String::from_utf8_lossy(&v6.stderr));
    let mut serve = serve(&mut ns, mode, &["--json"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/barrage.py");
    let mut child = ns
        .command(300, python)
        .args([script, STACK_ADDR, ns.tap_name()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // Its stderr (scapy's and Python's complaints, a failed assertion) goes to the test's.
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run the barrage script");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut script = Script(child);
    let mut next = |what: &str| -> String {
        lines.next().and_then(Result::ok).unwrap_or_else(|| panic!("the barrage script ended before {what}"))
    };
    assert_eq!(next("ready"), "ready");
    let before = stats(&mut serve);
    writeln!(stdin, "go").unwrap();
    let sent = next("the barrage report");
    let report: Value = serde_json::from_str(sent.strip_prefix("sent ").expect("the barrage report"))
        .unwrap_or_else(|e| panic!("barrage report ({e}): {sent}"));
    let after = stats(&mut serve);
    writeln!(stdin, "go").unwrap();
    assert_eq!(next("the echo after the barrage"), "echo ok");
    let status = script.0.wait().unwrap();
    assert!(status.success(), "barrage script: {status}");
    assert!(serve.child.try_wait().unwrap().is_none(), "serve is still running");

    // Every frame, by category: the counters each must move moved by exactly that much.
    let frames = report["frames"].as_i64().unwrap();
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    let (mut accounted, mut resets) = (0, 0);
    for c in report["categories"].as_array().unwrap() {
        let expect = c["expect"].as_object().unwrap();
        assert!(!expect.is_empty(), "{c}");
        for (k, v) in expect {
            *want.entry(k.clone()).or_default() += v.as_i64().unwrap();
        }
        accounted += c["frames"].as_i64().unwrap();
        resets += c["resets"].as_i64().unwrap();
    }
    assert_eq!(accounted, frames, "every frame sent is in a category");
    let mut table = String::new();
    for (k, &v) in &want {
        table += &format!("  {k}: want {v}, moved {}\n", delta(&before, &after, k));
    }
    eprintln!("barrage of {frames} frames ({mode:?}):\n{table}  report: {report}");
    for (k, &v) in &want {
        assert_eq!(delta(&before, &after, k), v, "{k}\n{table}");
    }
    // Nothing else was dropped: the drops the categories name are all the drops there were.
    let drops = |v: &Value| -> i64 {
        v["tcp"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with("drops_"))
            .map(|(_, n)| n.as_i64().unwrap())
            .sum()
    };
    let want_drops: i64 = want.iter().filter(|(k, _)| k.starts_with("drops_")).map(|(_, v)| v).sum();
    assert_eq!(drops(&after) - drops(&before), want_drops, "drops of every reason\n{table}");
    // The answers: the RSTs counted are the RSTs the categories draw, and the ones on the wire.
    assert_eq!(delta(&before, &after, "resets_sent"), resets);
    assert_eq!(report["seen_resets"].as_i64().unwrap(), resets, "RSTs the sniffer saw");
    // The stack took in every frame that went to it (none lost before it), and no other.
    let seen = report["seen_to_stack"].as_i64().unwrap();
    assert!(seen >= frames, "the sniffer saw {seen} of {frames} frames go out");
    assert_eq!(delta(&before, &after, "frames_in"), seen, "frames the stack took in");

    let (out, err) = serve.stop_ok();
    assert!(err.is_empty(), "serve's stderr: {err}");
    let exit = out.lines().find(|l| l.contains(r#""event":"exit""#)).expect("serve's exit line");
    let exit: Value = serde_json::from_str(exit).unwrap();
    assert_eq!(exit["connections"], 1, "one connection, the echo client's: {exit}");
}

both_modes!(barrage_leaves_the_live_connection_echoing, barrage);
