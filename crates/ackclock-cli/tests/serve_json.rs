//! `ackclock serve --json`: the start-up line and the exit summary are JSON objects on
//! stdout. serve runs on a TAP whose kernel side lives in a private network namespace made
//! (and removed) by the test, with curl inside it as the client. Needs root and
//! /dev/net/tun: without them the test prints SKIP and passes. Every wait is bounded.
#![cfg(target_os = "linux")]

#[allow(dead_code)]
#[path = "../../ackclock/tests/common/netns.rs"]
mod netns;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const STACK_ADDR: &str = "10.77.0.2";
const STACK_CIDR: &str = "10.77.0.2/24";
const HOST_CIDR: &str = "10.77.0.1/24";

/// serve, killed and reaped on drop so a failed assertion leaves nothing running.
struct Serve(Child);

impl Serve {
    /// SIGTERM, then wait at most 10 s (SIGKILL after that); whether it exited cleanly.
    fn stop(&mut self) -> bool {
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.0.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.0.kill();
                    let _ = self.0.wait();
                    return false;
                }
            }
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn parse(line: &str) -> Value {
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"))
}

#[test]
fn serve_json_prints_a_ready_object_and_an_exit_object() {
    if let Some(why) = netns::unavailable() {
        println!("SKIP: {why}");
        return;
    }
    if !netns::have("curl") {
        println!("SKIP: `curl` is not installed");
        return;
    }
    let mut ns = netns::NetNs::new();
    let tap = ns.tap_name().to_string();
    ns.adopt(&tap);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ackclock"))
        .args(["serve", "--json", "--tap", &tap, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ackclock serve");
    let (out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let mut serve = Serve(child);
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let first = lines.recv_timeout(Duration::from_secs(60)).expect("serve printed its start-up line");
    assert!(first.contains("ready"), "scripts/netns waits for `ready`: {first}");
    let ready = parse(&first);
    assert_eq!(ready["event"], "ready");
    assert_eq!(ready["tap"], tap.as_str());
    assert_eq!(ready["mode"], "offload");
    assert_eq!(ready["addr"], STACK_CIDR);
    assert_eq!(ready["host_addr"], HOST_CIDR);
    assert_eq!(ready["netns"], ns.name());
    assert_eq!(ready["services"], serde_json::json!({"discard": 9, "echo": 7, "chargen": 19, "http": 80}));

    // One request on a connection the server closes after the response, so that nothing
    // is open when serve is told to stop.
    let curl = ns
        .command(60, "curl")
        .args(["-sS", "--fail", "-H", "Connection: close", "-o", "/dev/null", "-w", "%{size_download}"])
        .arg(format!("http://{STACK_ADDR}/bytes/100000"))
        .output()
        .expect("run curl");
    assert!(curl.status.success(), "curl: {}", String::from_utf8_lossy(&curl.stderr));
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "100000");

    assert!(serve.stop(), "serve exits 0 on SIGTERM");
    let rest: Vec<String> = lines.iter().collect();
    assert_eq!(rest.len(), 1, "one more line, the exit summary: {rest:?}");
    let exit = parse(&rest[0]);
    assert_eq!(exit["event"], "exit");
    assert_eq!(exit["connections"], 1);
    assert_eq!(exit["reset_at_exit"], 0);
    assert_eq!(exit["tcp"]["passive_opens"], 1, "the stack's counters: {exit}");
    assert!(exit["rx"]["frames"].as_u64().unwrap() > 0, "{exit}");
    assert!(exit["tx"]["bytes"].as_u64().unwrap() > 100_000, "the body went out: {exit}");
    // The response (head and body) counted by the HTTP service, which ran as a task on the
    // library's runtime: its counters are in the object too.
    let http = exit["bytes"]["http"].as_u64().unwrap();
    assert!(http > 100_000 && http < 100_400, "head and body: {exit}");
    assert_eq!(exit["bytes"]["echo"], 0, "{exit}");
    assert!(exit["runtime"]["rounds"].as_u64().unwrap() > 0, "{exit}");
    assert!(exit["impairment"].is_null() && exit["error"].is_null(), "{exit}");
    assert_eq!(stderr.join().unwrap(), "", "nothing on stderr with --json");
}
