//! `ackclock serve --runtime` (a hidden mode for measuring the library's threaded runtime
//! against serve's own loop): echo and discard on the runtime, a thread per connection, with
//! a Python client in a private network namespace made (and removed) by the test. Echo must
//! return every byte in order, and the exit object must count what each service moved. Needs
//! root, /dev/net/tun and python3: without them the test prints SKIP and passes. Every wait
//! is bounded.
#![cfg(target_os = "linux")]

#[allow(dead_code)]
#[path = "../../ackclock/tests/common/netns.rs"]
mod netns;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const STACK_ADDR: &str = "10.77.0.2";
const STACK_CIDR: &str = "10.77.0.2/24";
const HOST_CIDR: &str = "10.77.0.1/24";

/// 1 MiB of a pattern through echo (byte-exact, read while writing) and then discard.
const CLIENT: &str = r#"
import socket, sys, threading
addr, n = sys.argv[1], 1 << 20
data = bytes(i % 251 for i in range(n))
s = socket.create_connection((addr, 7), timeout=30)
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send); t.start()
got = bytearray()
while True:
    k = s.recv(65536)
    if not k: break
    got += k
t.join()
print(len(got), bytes(got) == data)
d = socket.create_connection((addr, 9), timeout=30)
d.sendall(data); d.shutdown(socket.SHUT_WR)
print(len(d.recv(1)))
"#;

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

fn serve_on_the_runtime(app_rounds: bool) {
    if netns::skip(&["python3"]) {
        return;
    }
    let mut ns = netns::NetNs::new();
    let tap = ns.tap_name().to_string();
    ns.adopt(&tap);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ackclock"));
    cmd.args(["serve", "--runtime", "--json", "--tap", &tap, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR])
        .args(["--netns", ns.name()]);
    if app_rounds {
        cmd.arg("--runtime-app-rounds");
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn ackclock serve");
    let out = child.stdout.take().unwrap();
    let mut serve = Serve(child);
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let ready = parse(&lines.recv_timeout(Duration::from_secs(60)).expect("serve printed its start-up line"));
    assert_eq!((&ready["event"], &ready["runtime"], &ready["device"]), (&"ready".into(), &true.into(), &"tap".into()));

    let client = ns.command(60, "python3").args(["-c", CLIENT, STACK_ADDR]).output().expect("run python3");
    let text = String::from_utf8_lossy(&client.stdout);
    assert!(client.status.success(), "client: {text}{}", String::from_utf8_lossy(&client.stderr));
    assert_eq!(text, "1048576 True\n0\n", "echo byte-exact, then discard closed after the client's FIN");

    assert!(serve.stop(), "serve --runtime exits 0 on SIGTERM");
    let rest: Vec<String> = lines.iter().collect();
    assert_eq!(rest.len(), 1, "one more line, the exit object: {rest:?}");
    let exit = parse(&rest[0]);
    assert_eq!(exit["event"], "exit");
    assert_eq!(exit["connections"], 2, "{exit}");
    assert_eq!(exit["bytes"], serde_json::json!({"discard": 1 << 20, "echo": 1 << 20, "chargen": 0}), "{exit}");
    let app = exit["runtime"]["app_rounds"].as_u64().unwrap();
    assert_eq!(app > 0, app_rounds, "rounds in application threads only with --runtime-app-rounds: {exit}");
}

#[test]
fn serve_runtime_echoes_and_discards() {
    serve_on_the_runtime(false)
}

#[test]
fn serve_runtime_with_application_thread_rounds() {
    serve_on_the_runtime(true)
}
