//! The lost window update, tested end to end: a receiver whose buffer fills to a zero
//! window, then a reader that drains it in random-sized pieces with random pauses, 1,000
//! times. The read path posts window-update requests that the protocol thread coalesces
//! (DragonFly BSD commit 96c6eb29); if one were lost, the sender would sit on the zero
//! window until its persist timer sent a probe (RFC 9293 §3.8.6.1). So every round must
//! resume on a window update alone, and the sender's probe count must stay zero.

mod runtime_support;

use ackclock::runtime::{RuntimeConfig, TcpListener, TcpStream};
use runtime_support::{b_at, pair_with, pattern};
use std::io::{Read, Write};
use std::time::Duration;

const RECV_BUFFER: usize = 11 * 1448;
const ROUNDS: usize = 1000;

/// xorshift64: reproducible pieces and pauses with no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn every_zero_window_round_resumes_without_a_persist_probe() {
    let (a, b) = pair_with(|c| c.tcp.recv_buffer = RECV_BUFFER, RuntimeConfig::default());
    let listener = TcpListener::bind(&b, b_at(5001)).unwrap();
    let sender = TcpStream::connect(&a, b_at(5001)).unwrap();
    let (receiver, _) = listener.accept().unwrap();
    let total = (ROUNDS + 2) * RECV_BUFFER;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut chunk = vec![0u8; 8192];
            let mut off = 0;
            while off < total {
                let n = chunk.len().min(total - off);
                pattern(off as u64, &mut chunk[..n]);
                (&sender).write_all(&chunk[..n]).unwrap();
                off += n;
            }
        });
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut buf = vec![0u8; 4096];
        let mut want = vec![0u8; 4096];
        let mut read = 0usize;
        let mut zero_rounds = 0;
        for round in 0..ROUNDS {
            // Until the window is closed: zero, or less than a segment, which the sender's
            // SWS avoidance (RFC 9293 §3.8.6.2.1) will not fill. Either way the sender is
            // stalled with nothing in flight, its persist timer running.
            let mut polls = 0u32;
            loop {
                let info = receiver.tcp_info().unwrap();
                if info.rcv_wnd < info.smss as u32 {
                    zero_rounds += (info.rcv_wnd == 0) as usize;
                    break;
                }
                polls += 1;
                assert!(polls < 100_000, "round {round}: the window never closed");
                std::thread::sleep(Duration::from_micros(20));
            }
            let round_end = read + RECV_BUFFER;
            while read < round_end {
                let piece = (1 + rng.below(buf.len() as u64) as usize).min(round_end - read);
                let n = (&receiver).read(&mut buf[..piece]).unwrap();
                assert!(n > 0, "end of stream at {read}");
                pattern(read as u64, &mut want[..n]);
                assert!(buf[..n] == want[..n], "round {round}: bytes {read}.. differ");
                read += n;
                if rng.below(4) == 0 {
                    std::thread::sleep(Duration::from_micros(rng.below(300)));
                }
            }
        }
        eprintln!("{zero_rounds} of {ROUNDS} rounds closed the window to exactly 0");
        // Let the sender finish.
        let mut rest = [0u8; 4096];
        while read < total {
            read += (&receiver).read(&mut rest).unwrap();
        }
    });
    let probes = sender.tcp_info().unwrap().stats.window_probes;
    let stats = b.stats();
    eprintln!(
        "{ROUNDS} rounds: {} window-update requests, {} updates sent, {probes} persist probes",
        stats.window_update_requests, stats.window_updates_sent
    );
    // Every round's reads posted requests. Most rounds reopen the window with an update of
    // its own; in a few the reopened window leaves on the ACK of data the reader's copy
    // checked (a reader over the pipe acknowledges after its copy), and the request then
    // finds nothing left to send (999 of 1,000 updates sent in one run).
    assert!(stats.window_update_requests >= ROUNDS as u64, "each round's reads posted a request");
    assert!(stats.window_updates_sent >= ROUNDS as u64 * 9 / 10, "{stats:?}");
    assert_eq!(probes, 0, "a round needed the persist timer: a window update was lost");
}
