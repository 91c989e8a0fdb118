//! A task that watches the device (`runtime::tokio::watch_device`): the frames of
//! connections served by tokio tasks are processed on the tasks' worker, not on the
//! protocol thread. An echo task on a TAP answers a Linux client in a network namespace
//! byte-exact, in both TAP modes, while the watcher runs the rounds; with the watcher
//! aborted, the protocol thread watches the device again and a second echo still completes;
//! a watcher ends when the runtime shuts down; and on a current-thread runtime the output
//! that the tasks' writes and reads owe is sent by the watcher on their thread, not by
//! rounds on the protocol thread.
//!
//! Needs root, /dev/net/tun and python3: without them the tests print why and pass as
//! skipped. Every wait is bounded.
#![cfg(target_os = "linux")]

mod common;

use ackclock::buf::DEFAULT_HEADROOM;
use ackclock::phy::TapMode;
use ackclock::runtime::tokio::{watch_device, TcpListener};
use ackclock::runtime::{Runtime, RuntimeConfig};
use common::clients::ECHO_CLIENT;
use common::link_runtime::{link_runtime, STACK_ADDR};
use common::netns::{skip, NetNs};
use std::net::SocketAddrV4;
use std::time::Duration;

/// `n` bytes through the echo port from inside the namespace (`ECHO_CLIENT`: written while
/// the echo is read, then compared byte for byte).
fn echo_through(ns: &NetNs, n: usize) {
    let out = ns
        .command(120, "python3")
        .args(["-c", ECHO_CLIENT, &STACK_ADDR.to_string(), "7", &n.to_string()])
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("{n} True");
    assert!(out.status.success() && text.trim() == want, "echo: {text}{}", String::from_utf8_lossy(&out.stderr));
}

/// A namespace with a TAP in `mode`, and a runtime over it listening on the echo port.
fn echo_setup(mode: TapMode) -> (NetNs, Runtime, TcpListener) {
    let mut ns = NetNs::new();
    let offload = mode == TapMode::Offload;
    let tune = |sc: &mut ackclock::StackConfig| {
        if offload {
            sc.pool.buffer_size = 64 * 1024 + DEFAULT_HEADROOM;
        }
    };
    let rt = link_runtime(&mut ns, mode, false, tune, RuntimeConfig::default());
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(STACK_ADDR, 7)).expect("bind");
    (ns, rt, listener)
}

/// Echo every connection `listener` accepts, a task each (spawned on `tasks`).
fn spawn_echo(tasks: &tokio::runtime::Runtime, listener: TcpListener) {
    tasks.spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = tokio::io::split(s);
                let _ = tokio::io::copy_buf(&mut tokio::io::BufReader::with_capacity(1 << 16, &mut r), &mut w).await;
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
            });
        }
    });
}

fn watched(mode: TapMode) {
    if skip(&["python3"]) {
        return;
    }
    let (ns, mut rt, listener) = echo_setup(mode);
    let tasks = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let watcher = tasks.spawn(watch_device(&rt).expect("a TAP can be watched by a task"));
    spawn_echo(&tasks, listener);

    echo_through(&ns, 8 << 20);
    let s = rt.stats();
    // The task's worker ran rounds for the frames (the protocol thread still runs the
    // rounds a write rings for while the watcher waits).
    assert!(s.watch_rounds > 0, "the task watched the device: {s:?}");
    assert!(s.app_rounds > 0, "rounds run outside the protocol thread: {s:?}");

    // Without the watcher the protocol thread watches the device again.
    watcher.abort();
    assert!(tasks.block_on(watcher).is_err_and(|e| e.is_cancelled()));
    let before = rt.stats().watch_rounds;
    echo_through(&ns, 1 << 20);
    assert_eq!(rt.stats().watch_rounds, before, "no watcher any more");

    // A watcher ends when the runtime stops, even with no frame coming.
    let watcher = tasks.spawn(watch_device(&rt).unwrap());
    std::thread::sleep(Duration::from_millis(100));
    rt.shutdown();
    let ended = tasks.block_on(async { tokio::time::timeout(Duration::from_secs(5), watcher).await });
    assert!(matches!(ended, Ok(Ok(Ok(())))), "the watcher ends with the runtime: {ended:?}");
}

#[test]
fn a_task_watches_a_plain_tap() {
    watched(TapMode::Plain)
}

#[test]
fn a_task_watches_an_offload_tap() {
    watched(TapMode::Offload)
}

/// The tasks' writes and window updates owe output; on the watcher's thread the watcher
/// sends it (`TaskWatch`) instead of ringing the protocol thread, whose round would read
/// the device as well and keep the rounds there (before: 19,617 of 20,156 rounds of a
/// plain-TUN chargen ran on the protocol thread; here, 234 of 355 for the plain TAP).
fn output_on_the_watchers_thread(mode: TapMode) {
    if skip(&["python3"]) {
        return;
    }
    let (ns, rt, listener) = echo_setup(mode);
    let tasks = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tasks.spawn(watch_device(&rt).expect("a TAP can be watched by a task"));
    spawn_echo(&tasks, listener);
    // The tasks run while the client does (a thread of the test blocks on it).
    let before = rt.stats();
    let client = std::thread::spawn(move || {
        echo_through(&ns, 16 << 20);
        ns
    });
    tasks.block_on(async {
        while !client.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let ns = client.join().expect("the echo client");
    let s = rt.stats();
    let (all, app) = (s.rounds - before.rounds, s.app_rounds - before.app_rounds);
    assert!(all > 100, "rounds ran: {s:?}");
    // The protocol thread still runs its timers and the owed output's backstop (output-only
    // rounds, at most one per `OWED_BACKSTOP`): under half the rounds, where ringing it for
    // every call ran two thirds there.
    assert!(all - app < all / 2, "{} of {all} rounds on the protocol thread: {s:?}", all - app);
    drop(tasks);
    drop(rt);
    drop(ns);
}

#[test]
fn a_plain_taps_output_goes_with_the_watcher_on_the_tasks_thread() {
    output_on_the_watchers_thread(TapMode::Plain)
}

#[test]
fn an_offload_taps_output_goes_with_the_watcher_on_the_tasks_thread() {
    output_on_the_watchers_thread(TapMode::Offload)
}

/// Output owed to a watcher that nothing polls any more still leaves: the tokio runtime's
/// `block_on` returns right after a write on the watcher's thread, and nothing polls the
/// watcher again; the protocol thread sends the data (at the backstop's deadline, or at its
/// own next wake-up if that comes first: the test asserts no timing), and the peer reads it.
#[test]
fn output_owed_to_a_watcher_nobody_polls_still_leaves() {
    if skip(&["python3"]) {
        return;
    }
    let (ns, rt, listener) = echo_setup(TapMode::Plain);
    let tasks = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tasks.spawn(watch_device(&rt).expect("a TAP can be watched by a task"));
    let reader = ns
        .command(30, "python3")
        .args([
            "-c",
            "import socket,sys; s=socket.create_connection((sys.argv[1], 7), timeout=10); \
             b=b''\nwhile len(b) < 5:\n    c=s.recv(5 - len(b))\n    if not c: break\n    b+=c\nprint(b.decode())",
            &STACK_ADDR.to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run python3");
    let stream = tasks.block_on(async {
        let (s, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept()).await.expect("accepted").unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut &s, b"hello").await.unwrap();
        s
    });
    // Nothing polls the tasks from here on.
    let out = reader.wait_with_output().expect("python3");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hello");
    drop(stream);
    drop(tasks);
    drop(rt);
}
