//! A runtime gives idle packet memory back (`RuntimeConfig::keep_idle_memory`, off by
//! default): once no frame has moved for `IDLE_MEMORY_AFTER`, the protocol thread releases
//! the pages of the pools' free buffers (those a burst used), once per quiet spell, and the
//! buffers given back work as before. With `keep_idle_memory` nothing is given back. Two
//! runtimes over the in-memory pipe; the waits are bounded and only line the steps up.

mod runtime_support;

use ackclock::runtime::{RuntimeConfig, TcpListener, TcpStream, IDLE_MEMORY_AFTER};
use runtime_support::{b_at, pair_with, pattern};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// `n` pattern bytes from `a` to `b` over a fresh connection, checked on arrival.
fn transfer(a: &ackclock::runtime::Runtime, b: &ackclock::runtime::Runtime, port: u16, n: usize) {
    let listener = TcpListener::bind(b, b_at(port)).unwrap();
    let mut client = TcpStream::connect(a, b_at(port)).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut chunk = vec![0u8; 64 * 1024];
            let mut off = 0;
            while off < n {
                let k = chunk.len().min(n - off);
                pattern(off as u64, &mut chunk[..k]);
                client.write_all(&chunk[..k]).unwrap();
                off += k;
            }
        });
        let (mut buf, mut want, mut got) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024], 0);
        while got < n {
            let k = server.read(&mut buf).unwrap();
            assert!(k > 0, "end of stream after {got} of {n} bytes");
            pattern(got as u64, &mut want[..k]);
            assert!(buf[..k] == want[..k], "bytes differ after {got}");
            got += k;
        }
    });
}

/// Wait (bounded) until `cond` holds.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn idle_memory_is_given_back_after_a_burst_and_the_buffers_still_work() {
    // The sender's data frames come from its own pool: 4,096 buffers of 2 KiB, of which a
    // burst of 32 MB uses a window's worth or so.
    let (a, b) = pair_with(|_| {}, RuntimeConfig::default());
    transfer(&a, &b, 80, 32 << 20);
    assert!(eventually(|| a.stats().idle_memory_releases == 1), "no release after the burst: {:?}", a.stats());
    let first = a.stats().idle_memory_released;
    // At least the sender's 256 KiB send queue, in buffers the burst used and freed: those
    // are given back (the pool's untouched buffers count among those it keeps, and a
    // release counts only the buffers ever used).
    assert!(first > 256 << 10, "released {first} bytes");
    // Quiet stays quiet: no second release without frames in between.
    std::thread::sleep(IDLE_MEMORY_AFTER + Duration::from_millis(500));
    assert_eq!(a.stats().idle_memory_releases, 1);
    // The buffers given back read as zeros and are used again: a second burst, byte-exact,
    // and a second release after it.
    transfer(&a, &b, 81, 32 << 20);
    assert!(eventually(|| a.stats().idle_memory_releases == 2), "{:?}", a.stats());
    assert!(a.stats().idle_memory_released > first);
}

#[test]
fn keep_idle_memory_gives_nothing_back() {
    let (a, b) = pair_with(|_| {}, RuntimeConfig { keep_idle_memory: true, ..Default::default() });
    transfer(&a, &b, 80, 8 << 20);
    std::thread::sleep(IDLE_MEMORY_AFTER * 2);
    assert_eq!((a.stats().idle_memory_releases, a.stats().idle_memory_released), (0, 0));
}
