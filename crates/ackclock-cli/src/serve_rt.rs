//! `ackclock serve --threads`: discard (9), echo (7) and chargen (19) on the library's
//! threaded runtime (`ackclock::runtime`) as blocking code, written as with `std::net`: a
//! thread per connection, blocking `read` and `write`. For measuring the runtime's blocking
//! sockets over a TAP or TUN against serve's tokio tasks in the same run
//! (`scripts/bench-rt-tap`), and each `RuntimeConfig::tap_rounds`; HTTP is not served in
//! this mode.
//!
//! Output: the same start-up line as serve (or `"event": "ready"` with `--json`), and on
//! exit (SIGINT, SIGTERM) one line with the runtime's counters and the bytes each service
//! moved (`"event": "exit"` with `--json`, with a `"runtime"` object).

use crate::chargen::{self, Chargen};
use crate::link::{install_signals, runtime_json, stopping, Link};
use ackclock::runtime::{Runtime, RuntimeConfig, TapRounds, TcpListener, TcpStream};
use ackclock::Stack;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes each service moved.
#[derive(Default)]
struct Moved {
    discard: AtomicU64,
    echo: AtomicU64,
    chargen: AtomicU64,
    connections: AtomicU64,
}

const BUFFER: usize = 64 * 1024;
/// Chargen's writes: one offload unit each (with application threads running rounds, each
/// write is a round).
const CHUNK: usize = 64 * 1024;

fn discard(mut s: TcpStream, moved: &Moved) {
    let mut buf = vec![0u8; BUFFER];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        moved.discard.fetch_add(n as u64, Ordering::Relaxed);
    }
}

fn echo(mut s: TcpStream, moved: &Moved) {
    let mut buf = vec![0u8; BUFFER];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        if s.write_all(&buf[..n]).is_err() {
            return;
        }
        moved.echo.fetch_add(n as u64, Ordering::Relaxed);
    }
}

fn chargen(s: TcpStream, moved: &Moved, gen: &Chargen) {
    // Whatever the client sends is read and dropped by a second thread, as serve drains it.
    let s = Arc::new(s);
    let r = s.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        while let Ok(1..) = (&*r).read(&mut buf) {}
    });
    let mut pos = 0usize;
    loop {
        match (&*s).write(gen.at(pos as u64, CHUNK)) {
            Ok(n) => {
                pos = (pos + n) % chargen::PERIOD;
                moved.chargen.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(_) => return,
        }
    }
}

/// Serve on the runtime until SIGINT or SIGTERM.
pub(crate) fn serve(link: Link, stack: Stack, json: bool, rounds: &str, sync: bool) -> Result<(), String> {
    install_signals();
    let kind = link.kind();
    let Link { dev, .. } = link;
    let tap_rounds = match rounds {
        "proto" => TapRounds::ProtocolThread,
        "app" => TapRounds::AppThreads,
        _ => TapRounds::Watch,
    };
    let config = RuntimeConfig { tap_rounds, sync_window_updates: sync, ..RuntimeConfig::default() };
    let rt = Runtime::with_config(stack, dev, config).map_err(|e| format!("runtime: {e}"))?;
    let moved = Arc::new(Moved::default());
    let gen = Arc::new(Chargen::new(CHUNK));
    let mut acceptors = Vec::new();
    for (port, svc) in [(9u16, 0u8), (7, 1), (19, 2)] {
        let l = TcpListener::bind_with_backlog(&rt, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), 128)
            .map_err(|e| format!("listen {port}: {e}"))?;
        let (moved, gen) = (moved.clone(), gen.clone());
        acceptors.push(std::thread::spawn(move || {
            while let Ok((s, _)) = l.accept() {
                moved.connections.fetch_add(1, Ordering::Relaxed);
                let (moved, gen) = (moved.clone(), gen.clone());
                std::thread::spawn(move || match svc {
                    0 => discard(s, &moved),
                    1 => echo(s, &moved),
                    _ => chargen(s, &moved, &gen),
                });
            }
        }));
    }
    if json {
        println!("{}", serde_json::json!({ "event": "ready", "runtime": true, "device": kind }));
    } else {
        println!("ackclock serve --threads: {kind}; discard:9 echo:7 chargen:19; ready");
    }
    let _ = std::io::stdout().flush();
    while !stopping() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let s = rt.stats();
    let mut rt = rt;
    rt.shutdown();
    for a in acceptors {
        let _ = a.join();
    }
    let m = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let exit = serde_json::json!({
        "event": "exit",
        "connections": m(&moved.connections),
        "bytes": { "discard": m(&moved.discard), "echo": m(&moved.echo), "chargen": m(&moved.chargen) },
        "runtime": runtime_json(&s),
    });
    if json {
        println!("{exit}");
    } else {
        eprintln!("ackclock serve --threads: {exit}");
    }
    Ok(())
}
