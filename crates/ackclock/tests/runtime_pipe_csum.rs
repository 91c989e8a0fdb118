//! The fused copy over the in-memory pipe: a blocking reader's rounds take frames in, and the
//! ACK leaves after the reader's copy, which checked the checksums (Jacobson 1993), so most
//! of the payload is read once. Two runtimes in one process, checksums in software (the
//! pipe vouches for none). Its own test binary, so that no other test's threads compete with
//! it for the two cores while it counts.

mod runtime_support;

use ackclock::runtime::RuntimeConfig;
use ackclock::runtime::{TcpListener, TcpStream};
use runtime_support::{b_at, pair_with, pattern};
use std::io::{Read, Write};

/// 16 MB from one runtime's writer to the other's reader, byte-checked. Before the
/// reader's rounds ran their input only, every ACK left before the copy and 724 of every 728
/// data segments had their checksum checked in a pass of their own. Some still are: a round
/// of the protocol thread (when the reader is away from its calls) finds them before the
/// reader's copy. How many is a matter of scheduling, so the test asserts what the reader's
/// own (held) rounds did with the segments they took in, and prints the whole.
#[test]
fn a_reader_over_the_pipe_checks_checksums_in_its_copy() {
    let (a, b) = pair_with(|c| c.pool.buffers = 16 * 1024, RuntimeConfig::default());
    let listener = TcpListener::bind(&b, b_at(9)).unwrap();
    let stream = TcpStream::connect(&a, b_at(9)).unwrap();
    let (conn, _) = listener.accept().unwrap();
    let n: u64 = 16 << 20;
    let mut chunk = vec![0u8; 256 * 1024];
    pattern(0, &mut chunk);
    // The reader reads straight into one buffer and compares afterwards: it does nothing
    // between its calls, so frames arrive while it waits inside one. (Frames that arrive
    // while a reader is away from its calls are the protocol thread's, whose round sends
    // their ACK at once, ahead of the copy.)
    let mut got = vec![0u8; n as usize];
    std::thread::scope(|s| {
        s.spawn(|| {
            let (mut w, mut sent) = (&stream, 0u64);
            while sent < n {
                let k = (chunk.len() as u64).min(n - sent) as usize;
                w.write_all(&chunk[..k]).unwrap();
                sent += k as u64;
            }
        });
        let (mut r, mut at) = (&conn, 0usize);
        while at < got.len() {
            // 1 MiB: more than the receive buffer, so each copy takes all that arrived.
            let end = (at + (1 << 20)).min(got.len());
            let k = r.read(&mut got[at..end]).unwrap();
            assert!(k > 0, "end of stream after {at} bytes");
            at += k;
        }
    });
    for (i, piece) in got.chunks(chunk.len()).enumerate() {
        assert!(piece == &chunk[..piece.len()], "bytes from {} differ", i * chunk.len());
    }
    let k = b.with_stack(|s| *s.tcp().counters());
    let (early, segs) = (k.csum_verified_early, k.segs_in);
    let st = b.stats();
    let (split, split_early) = (st.split_round_segments, st.split_round_acks_early);
    eprintln!(
        "{early} of {segs} segments checked ahead of the copy; the reader's rounds took {split} and checked {split_early} early for an ACK"
    );
    assert!(segs >= n / 1448, "{segs} segments for {n} bytes");
    assert!(split > 0, "the reader's rounds took no segment in");
    assert!(split_early * 50 < split, "the reader's rounds checked {split_early} of {split} early");
}
