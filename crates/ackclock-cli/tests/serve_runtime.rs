//! `ackclock serve --threads` (a hidden mode for measuring the library's blocking sockets
//! against serve's own loop): echo and discard on the runtime, a thread per connection, with
//! a Python client in a private network namespace made (and removed) by the test. Echo must
//! return every byte in order, and the exit object must count what each service moved. Needs
//! root, /dev/net/tun and python3: without them the test prints SKIP and passes. Every wait
//! is bounded.
#![cfg(target_os = "linux")]

mod common;

use common::interop::{serve_ready, Mode, STACK_ADDR};
use common::netns;
use serde_json::Value;

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

fn parse(line: &str) -> Value {
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"))
}

fn serve_on_the_runtime(rounds: &str) {
    if netns::skip(&["python3"]) {
        return;
    }
    let mut ns = netns::NetNs::new();
    let extra = ["--threads", "--json", "--runtime-rounds", rounds];
    let (mut serve, ready) = serve_ready(&mut ns, "--tap", Mode::Offload, &extra);
    let ready = parse(&ready);
    assert_eq!((&ready["event"], &ready["runtime"], &ready["device"]), (&"ready".into(), &true.into(), &"tap".into()));

    let client = ns.command(60, "python3").args(["-c", CLIENT, STACK_ADDR]).output().expect("run python3");
    let text = String::from_utf8_lossy(&client.stdout);
    assert!(client.status.success(), "client: {text}{}", String::from_utf8_lossy(&client.stderr));
    assert_eq!(text, "1048576 True\n0\n", "echo byte-exact, then discard closed after the client's FIN");

    let (out, _) = serve.stop_ok();
    let rest: Vec<&str> = out.lines().collect();
    assert_eq!(rest.len(), 1, "one more line, the exit object: {rest:?}");
    let exit = parse(rest[0]);
    assert_eq!(exit["event"], "exit");
    assert_eq!(exit["connections"], 2, "{exit}");
    assert_eq!(exit["bytes"], serde_json::json!({"discard": 1 << 20, "echo": 1 << 20, "chargen": 0}), "{exit}");
    let count = |k: &str| exit["runtime"][k].as_u64().unwrap();
    // Whether a writer's round runs in its thread or in the protocol thread's round that was
    // already running depends on timing; that it takes the round on itself does not.
    assert_eq!(count("app_pushes") > 0, rounds != "proto", "writers push their rounds unless proto: {exit}");
    if rounds == "proto" {
        assert_eq!(count("app_rounds"), 0, "only the protocol thread runs rounds: {exit}");
    }
    assert_eq!(count("watches") > 0, rounds == "watch", "threads watch the device only with watch: {exit}");
    assert_eq!(count("app_waits") > 0, rounds != "watch", "condition-variable waits unless watch: {exit}");
}

#[test]
fn serve_runtime_with_protocol_thread_rounds() {
    serve_on_the_runtime("proto")
}

#[test]
fn serve_runtime_with_application_thread_rounds() {
    serve_on_the_runtime("app")
}

#[test]
fn serve_runtime_with_watching_threads() {
    serve_on_the_runtime("watch")
}
