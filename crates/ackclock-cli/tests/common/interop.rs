//! What the interop tests share: the `ackclock` binary, Linux peers in a private network
//! namespace ([`netns`](super::netns)), child processes and temporary directories that
//! clean up after themselves, and the checks on what came back (the body pattern of
//! `GET /bytes/N`, SHA-256 of files, numbers in JSON output).
//!
//! Every child is bounded in time and stopped on drop; files go with their [`TempDir`].

#[allow(unused_imports)]
pub use super::netns::skip;
use super::netns::{self, NetNs};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Lines, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The stack's side of the TAP.
pub const STACK_ADDR: &str = "10.77.0.2";
pub const STACK_CIDR: &str = "10.77.0.2/24";
/// Linux's side of the TAP, in the namespace.
pub const HOST_CIDR: &str = "10.77.0.1/24";

/// The two ways to open the TAP: plain frames (`--plain`), or virtio-net headers with
/// checksum and segmentation offload (the default).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Plain,
    Offload,
}

/// A test module `$name` with the test `$body(mode)` run once in each [`Mode`].
#[allow(unused_macros)]
macro_rules! both_modes {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn plain() {
                ($body)(Mode::Plain)
            }
            #[test]
            fn offload() {
                ($body)(Mode::Offload)
            }
        }
    };
}

/// The `ackclock` binary Cargo built for these tests.
pub fn cli() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ackclock"))
}

/// `ackclock serve` on a TAP moved into `ns`, with `extra` options (e.g. `--impair SPEC`);
/// started once it says it is ready.
pub fn serve(ns: &mut NetNs, mode: Mode, extra: &[&str]) -> Proc {
    serve_on(ns, "--tap", mode, extra)
}

/// `ackclock serve` on the device `dev` asks for (`--tap` or `--tun`), moved into `ns`.
pub fn serve_on(ns: &mut NetNs, dev: &str, mode: Mode, extra: &[&str]) -> Proc {
    serve_ready(ns, dev, mode, extra).0
}

/// [`serve_on`], and the start-up line serve printed.
pub fn serve_ready(ns: &mut NetNs, dev: &str, mode: Mode, extra: &[&str]) -> (Proc, String) {
    let tap = ns.tap_name().to_string();
    ns.adopt(&tap);
    let mut cmd = Command::new(cli());
    cmd.args(["serve", dev, &tap, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()]);
    cmd.args(extra);
    if mode == Mode::Plain {
        cmd.arg("--plain");
    }
    Proc::start("serve", cmd, "ready")
}

/// A long-running child (serve, relay, a server): its stdout lines arrive on a channel;
/// SIGTERM, bounded wait, SIGKILL on stop or drop.
pub struct Proc {
    what: &'static str,
    pub child: Child,
    /// The stdout lines not yet read.
    pub lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
}

impl Proc {
    /// Spawn `cmd`, and wait (at most 60 s) for a stdout line containing `ready`; returns
    /// the process and that line.
    pub fn start(what: &'static str, mut cmd: Command, ready: &str) -> (Proc, String) {
        let mut child = netns::die_with_parent(&mut cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = Proc { what, child, lines, stderr: Some(stderr) };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match p.lines.recv_timeout(left) {
                Ok(line) if line.contains(ready) => return (p, line),
                Ok(_) => {}
                Err(e) => {
                    let (out, err) = p.stop();
                    panic!("{what} did not start ({e}); stdout:\n{out}\nstderr:\n{err}")
                }
            }
        }
    }

    /// SIGTERM, wait (at most 15 s, then SIGKILL); the rest of stdout and all of stderr.
    pub fn stop(&mut self) -> (String, String) {
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        let err = self.stderr.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        let mut out = String::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            out += &l;
            out.push('\n');
        }
        (out, err)
    }

    /// Stop, and require a zero exit status.
    pub fn stop_ok(&mut self) -> (String, String) {
        let (out, err) = self.stop();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{} exited with {status}; stderr:\n{err}", self.what);
        (out, err)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.stderr.is_some() {
            let (_, err) = self.stop();
            eprintln!("{} stderr:\n{err}", self.what);
        }
    }
}

/// A directory under the system's temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("ackclock-interop-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `len` pseudo-random bytes (xorshift, seeded) in `dir/name`; returns their SHA-256.
pub fn random_file(dir: &Path, name: &str, len: usize, seed: u64) -> [u8; 32] {
    let mut x = seed | 1;
    let mut data = Vec::with_capacity(len + 8);
    while data.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(len);
    std::fs::write(dir.join(name), &data).unwrap();
    Sha256::digest(&data).into()
}

/// SHA-256 of the file at `p` (of nothing, if it cannot be read).
pub fn file_sha256(p: &Path) -> [u8; 32] {
    Sha256::digest(std::fs::read(p).unwrap_or_default()).into()
}

/// SHA-256 of serve's `GET /bytes/N` body: byte i is (i % 251) as u8.
pub fn pattern_sha256(n: u64) -> [u8; 32] {
    let block: Vec<u8> = (0..251 * 4096).map(|i| (i % 251) as u8).collect();
    let mut h = Sha256::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len() as u64) as usize;
        h.update(&block[..k]);
        left -= k as u64;
    }
    h.finalize().into()
}

/// Hash a curl child's body (its stdout) as it arrives; returns (bytes, SHA-256, exit
/// status, stderr).
pub fn finish_curl(mut child: Child) -> (u64, [u8; 32], ExitStatus, String) {
    let mut out = child.stdout.take().unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                total += k as u64;
            }
        }
    }
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    let status = child.wait().unwrap();
    (total, h.finalize().into(), status, err)
}

/// A Python client that stays connected until the server ends the connection:
/// `python3 -c WAITING_CLIENT HOST PORT MODE` sends 1000 bytes (and with MODE `echo` reads
/// them back), prints "connected", and then prints how the connection ended: "eof",
/// "data" or "reset".
const WAITING_CLIENT: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.sendall(b"x" * 1000)
got = 0
while sys.argv[3] == "echo" and got < 1000:
    got += len(s.recv(1000))
print("connected", flush=True)
try:
    print("eof" if s.recv(1) == b"" else "data")
except ConnectionResetError:
    print("reset")
"#;

/// Start [`WAITING_CLIENT`] in `ns` against `port` on the stack (`echo`: read the 1000
/// bytes back before saying "connected"); the child and its stdout lines.
pub fn waiting_client(ns: &NetNs, port: u16, echo: bool) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mode = if echo { "echo" } else { "send" };
    let mut child = ns
        .command(60, "python3")
        .args(["-c", WAITING_CLIENT, STACK_ADDR, &port.to_string(), mode])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// What tshark reads of the handshake in `pcap`: one line per SYN or SYN-ACK, its fields
/// `|`-separated: source address, ACK flag, MSS, window scale shift, SACK-permitted and
/// timestamp value (empty when the option is absent).
pub fn handshake_fields(pcap: &Path) -> String {
    let o = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-Y", "tcp.flags.syn==1", "-T", "fields", "-E", "separator=|"])
        .args(["-e", "ip.src", "-e", "tcp.flags.ack", "-e", "tcp.options.mss_val", "-e", "tcp.options.wscale.shift"])
        .args(["-e", "tcp.options.sack_perm", "-e", "tcp.options.timestamp.tsval"])
        .output()
        .expect("run tshark");
    assert!(o.status.success(), "tshark: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The number after `"key":` in a JSON text.
pub fn json_u64(text: &str, key: &str) -> Option<u64> {
    let rest = &text[text.find(&format!("\"{key}\":"))? + key.len() + 3..];
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}
