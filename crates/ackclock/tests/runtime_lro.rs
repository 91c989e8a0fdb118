//! The runtime's rounds take the stack's batch path, as a single-thread loop's
//! `Stack::receive` does: the frames a round reads are aggregated (`tcp::lro`, Gallatin
//! 2008's receive aggregation), and `StackConfig::aggregation` switches it off as it does
//! there. Two runtimes over the in-memory pipe move 8 MB in one stream, byte-exact.

mod runtime_support;

use ackclock::runtime::{Runtime, RuntimeConfig, TcpListener, TcpStream};
use ackclock::tcp::{Aggregation, Counters};
use runtime_support::{b_at, pair_with, pattern};
use std::io::{Read, Write};

const BYTES: u64 = 8 << 20;

/// 8 MB from `a` to `b`, checked byte by byte; the receiver's and the sender's counters.
fn transfer(aggregation: Aggregation) -> (Counters, Counters) {
    let (a, b) = pair_with(|c| c.aggregation = aggregation, RuntimeConfig::default());
    let listener = TcpListener::bind(&b, b_at(5001)).unwrap();
    let sender = TcpStream::connect(&a, b_at(5001)).unwrap();
    let (mut receiver, _) = listener.accept().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut sender = sender;
            let mut chunk = vec![0u8; 64 * 1024];
            let mut sent = 0;
            while sent < BYTES {
                let n = (chunk.len() as u64).min(BYTES - sent) as usize;
                pattern(sent, &mut chunk[..n]);
                sender.write_all(&chunk[..n]).unwrap();
                sent += n as u64;
            }
        });
        let (mut buf, mut want) = (vec![0u8; 40_000], vec![0u8; 40_000]);
        let mut got = 0;
        while got < BYTES {
            let n = receiver.read(&mut buf).unwrap();
            assert!(n > 0, "end of stream after {got} bytes");
            pattern(got, &mut want[..n]);
            assert!(buf[..n] == want[..n], "bytes {got}.. differ");
            got += n as u64;
        }
    });
    let counters = |rt: &Runtime| rt.with_stack(|s| *s.tcp().counters());
    (counters(&b), counters(&a))
}

#[test]
fn the_runtime_aggregates_what_a_round_reads() {
    let (rx, _) = transfer(Aggregation::ON);
    // Every data segment went through header prediction; some merged into aggregates.
    assert!(rx.lro_aggregates > 0, "no aggregate in 8 MB: {rx:?}");
    assert!(rx.lro_segments > rx.lro_aggregates, "{rx:?}");
}

#[test]
fn the_runtime_honours_aggregation_off() {
    let off = Aggregation { data: false, acks: false };
    let (rx, tx) = transfer(off);
    assert_eq!((rx.lro_aggregates, rx.lro_segments, tx.lro_acks), (0, 0, 0));
    assert!(rx.fast_path_data > 0, "header prediction still runs: {rx:?}");
}
