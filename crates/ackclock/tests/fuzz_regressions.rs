//! Regressions found by the `tcp_stack` fuzz target (fuzz/fuzz_targets/tcp_stack.rs), as
//! packet-level scripts: each keeps the minimized scenario and asserts the correct behaviour.

mod common;

use ackclock::tcp::{State, TcpConfig};
use ackclock::{ListenerHandle, Shutdown, TcpHandle};
use common::script::*;
use std::net::SocketAddrV4;

const WIN: u16 = 65535;

fn state(t: &Script, c: TcpHandle) -> State {
    t.stack.tcp_readiness(c).expect("valid handle").state
}

/// A passive open on port 8080 with a plain SYN (no options but MSS); accepted.
fn established(t: &mut Script) -> (ListenerHandle, TcpHandle) {
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1460));
    assert_eq!(state(t, c), State::Established);
    (l, c)
}

/// Fuzz input `c7 75 fb 08 ff d3 24 d3`: the application half-closes, the peer acknowledges
/// the FIN (FIN-WAIT-2), then the peer disappears (here: it is reset by a third party and
/// never sends its FIN) and the application closes the handle. An orphan in FIN-WAIT-2 must
/// go away after `fin_wait_2_timeout` (Linux `tcp_fin_timeout`, 60 s), whether it reached
/// FIN-WAIT-2 before or after the close; otherwise every such peer leaks a connection slot
/// for good.
#[test]
fn orphan_closed_in_fin_wait_2_times_out() {
    let cfg = TcpConfig::default();
    let timeout = cfg.fin_wait_2_timeout;
    let mut t = Script::new(cfg);
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    assert_eq!(state(&t, c), State::FinWait2);
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp().connections(), 1);
    assert!(t.stack.poll_at().is_some(), "an orphan in FIN-WAIT-2 needs a timer to end it");
    let end = 2 + timeout.as_millis() as u64 + 1000;
    t.run_to(end);
    assert_eq!(t.stack.tcp().connections(), 0, "the orphan is gone {end} ms later");
    assert_eq!(t.stack.pool().available(), t.stack.pool().capacity());
}

/// Control for the test above: closing in FIN-WAIT-1 and reaching FIN-WAIT-2 afterwards
/// does arm the timer.
#[test]
fn orphan_reaching_fin_wait_2_after_close_times_out() {
    let cfg = TcpConfig::default();
    let timeout = cfg.fin_wait_2_timeout;
    let mut t = Script::new(cfg);
    let (_l, c) = established(&mut t);
    t.stack.tcp_close(c).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    assert_eq!(t.stack.tcp().connections(), 1);
    let end = 2 + timeout.as_millis() as u64 + 1000;
    t.run_to(end);
    assert_eq!(t.stack.tcp().connections(), 0, "the orphan is gone {end} ms later");
}

/// Fuzz input `02 00 06 00 00 00 3b f7 00 7f ff ff f1 0a` (first half): after a forged FIN
/// desynchronized the two ends, A answered every ACK from B that acknowledged "unsent
/// data" with an ACK, and B answered each of those (now below its window) with another:
/// an ACK storm that never ends. RFC 5961 §5.2 and §7 (and Linux's
/// `tcp_send_challenge_ack`) send the ACK for SEG.ACK > SND.NXT as a rate-limited challenge
/// ACK; here it is unlimited. (A second's budget is drawn from [⌈limit/2⌉, ⌈limit/2⌉ +
/// limit), as Linux does against CVE-2016-5696: at most 7 for a limit of 5.)
#[test]
fn acks_of_unsent_data_draw_rate_limited_challenge_acks() {
    let limit = 5;
    let mut t = Script::new(TcpConfig { challenge_ack_limit: limit, ..TcpConfig::default() });
    let (_l, _c) = established(&mut t);
    t.discard();
    let mut answers = 0;
    for _ in 0..50 {
        t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1000).win(WIN));
        answers += t.sent_now().len();
    }
    let most = limit.div_ceil(2) + limit - 1;
    assert!(
        answers <= most as usize,
        "{answers} ACKs answered 50 ACKs of unsent data within one second (challenge ACK limit {limit})"
    );
    assert!(answers >= 1, "the first one is answered");
}

/// Run the stack's timers from `t.now` up to `end_ms` (ms since the start), jumping from one
/// timer to the next, and drop what it sends (the peer is gone).
fn run_silent(t: &mut Script, end_ms: u64) {
    let end = t.start + ackclock::time::Duration::from_millis(end_ms);
    let mut steps = 0;
    while let Some(next) = t.stack.poll_at() {
        if next > end {
            break;
        }
        steps += 1;
        assert!(steps < 1_000_000, "timers fire in a tight loop");
        t.now = next.max(t.now);
        t.discard();
    }
    t.now = end.max(t.now);
    t.discard();
}

/// Fuzz input `02 00 06 00 00 00 3b f7 00 7f ff ff f1 0a` (second half): the peer closed
/// its window to zero and then vanished. The persist timer probes forever with backoff
/// capped at the maximum RTO and never gives up, so the connection (here an orphan, closed
/// by the application with data still queued) and its buffers are never released. RFC 9293
/// §3.8.6.1 forbids giving up only "as long as the receiving TCP continues to send
/// acknowledgments in response to the probe segments"; Linux's `tcp_probe_timer` aborts
/// after `tcp_retries2` (15) unanswered probes (fewer for orphans).
#[test]
fn unanswered_zero_window_probes_end_the_connection() {
    let mut t = Script::new(TcpConfig::default());
    let (_l, c) = established(&mut t);
    t.stack.tcp_send(c, &[7u8; 100]).unwrap();
    t.expect(1, seg("P.").seq(1).ack(PEER_ISS + 1).win(WIN).len(100));
    // The peer takes the data and closes its window.
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(101).win(0));
    t.stack.tcp_send(c, &[8u8; 100]).unwrap();
    t.stack.tcp_close(c).unwrap();
    t.discard();
    assert_eq!(t.stack.tcp().connections(), 1);
    // The peer is gone for good: three hours of silence.
    run_silent(&mut t, 3 * 3600 * 1000);
    assert_eq!(t.stack.tcp().connections(), 0, "the connection gave up on its unanswered probes");
    assert_eq!(t.stack.pool().available(), t.stack.pool().capacity());
}

/// Fuzz input `27 10 1a 01 01 38 14 3f fd 8e ea 4c 4c 4c ff`: a 257-byte data segment with
/// a bad payload checksum arrives in order and is deferred (queued unverified); the peer's
/// FIN behind it makes the stack verify, drop the bad data and remember the FIN as out of
/// order (`rcv_fin`). Then a duplicate of the bad segment arrives: `deferrable` admits it
/// again, and `text_and_fin` (tcp/input.rs), seeing `rcv_nxt` reach the remembered FIN,
/// accepts the FIN on top of the unverified bytes (CLOSE-WAIT). When the deferred check
/// fails, `reject_from` rolls `rcv_nxt` back by the distance to the segment's start, which
/// now includes the FIN: `stats.bytes_received` underflows (a panic with overflow checks,
/// as under cargo-fuzz; u64::MAX in release) and the connection stays in CLOSE-WAIT with
/// `rcv_nxt` before the FIN. Correct: nothing beyond `rcv_nxt` changes on unverified data
/// (`deferrable` must refuse while a FIN is pending, or the FIN must wait for
/// verification); the end of stream comes after the retransmitted data.
#[test]
fn fin_behind_a_corrupt_deferred_segment_is_not_accepted() {
    let mut t = Script::new(TcpConfig::default());
    let (_l, c) = established(&mut t);
    t.discard();
    let p = PEER_ISS + 1;
    let data = seg("P.").seq(p).ack(1).win(WIN);
    let payload: Vec<u8> = (0..257u32).map(|i| (i * 7) as u8).collect();
    let mut bad = t.frame(&data, &payload);
    let n = bad.len();
    bad[n - 20] ^= 0x4d; // a payload byte: only the TCP checksum can tell
    t.at_us(10_000);
    t.inject_raw(&bad);
    t.inject(10, seg("F.").seq(p + 257).ack(1).win(WIN));
    t.inject_raw(&bad); // the network duplicated it
    t.discard();
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.stats.bytes_received, 0, "nothing good was received");
    assert_eq!(info.state, State::Established, "the FIN lies beyond rcv_nxt once the bad data is gone");
    let mut buf = [0u8; 512];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Err(ackclock::Error::WouldBlock), "no data and no end of stream");
    // The peer retransmits both; now the stream and its end arrive.
    t.inject_payload(300, seg("P.").seq(p).ack(1).win(WIN), &payload);
    t.inject(300, seg("F.").seq(p + 257).ack(1).win(WIN));
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(257));
    assert_eq!(buf[..257], payload[..]);
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(0));
    assert_eq!(state(&t, c), State::CloseWait);
}

/// Fuzz input `66 ac 40 80 2c 2c ac…` (106 bytes): the link duplicated a SYN ninety times,
/// the copies holding the sender's pool buffers while the application closed a connection
/// in CLOSE-WAIT. The FIN could not get a buffer, and nothing was left to try again: no
/// segment in flight (no retransmission timer), no zero window (no persist timer). Once
/// the buffers came back, the connection still never sent its FIN and sat in LAST-ACK
/// forever, an orphan with no timer. Output that fails for want of a buffer must be
/// retried later (Linux arms its probe timer when it cannot send), so the FIN goes out
/// once the pool recovers.
#[test]
fn fin_blocked_by_an_empty_pool_is_sent_once_buffers_return() {
    let mut t = Script::new(TcpConfig::default());
    let (_l, c) = established(&mut t);
    t.inject(1, seg("F.").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(1, seg(".").seq(1).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::CloseWait);
    // Something else holds every buffer for a moment (frames queued on a device, say).
    let held: Vec<_> = std::iter::from_fn(|| t.stack.pool().alloc().ok()).collect();
    t.stack.tcp_close(c).unwrap();
    t.expect_nothing(2);
    drop(held);
    // The pool is back: the FIN goes out within a retransmission timeout or so.
    let sent = t.run_to(5_000);
    assert!(
        sent.iter().any(|(_, s)| s.flags.contains(ackclock::wire::TcpFlags::FIN)),
        "no FIN in the 5 s after the buffers returned: {sent:?}"
    );
}

/// Found by the stack fuzzer: a forged in-window segment with a huge TSval poisons
/// TS.Recent on both ends; each then PAWS-drops the other's segments (RFC 7323 §5.3) and
/// answers every drop with an ACK — a loop. Dataless PAWS drops are answered at the
/// out-of-window rate (one per 500 ms per connection, as Linux), so the loop dies.
#[test]
fn paws_drops_do_not_start_an_ack_loop() {
    use common::script::*;
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let _c = t.accept_with(l, seg("S").win(65535).mss(1460).ts(1000, 0));
    t.discard();
    // A forged segment at rcv_nxt with a TSval far in the future.
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(1).win(65535).ts(0x7000_0000, ANY));
    t.discard();
    // The real peer's ACKs now look old: 50 of them within 100 ms draw at most one ACK.
    for i in 0..50 {
        t.inject(2 + i * 2, seg(".").seq(PEER_ISS + 1).ack(1).win(65535).ts(1002 + i as u32, ANY));
    }
    t.collect();
    let acks = t.log.iter().filter(|s| s.len == 0 && s.flags == ackclock::wire::TcpFlags::ACK).count();
    assert!(acks <= 1, "{acks} ACKs for 50 PAWS drops");
    assert_eq!(t.stack.counters().drops_paws, 50);
}

/// Fuzz artifact `crash-278fef90` (a 706-byte program; 2026-11-25): the target asserted
/// `connections() <= max_connections`, but a connection the application closed that reaches
/// TIME-WAIT leaves its slot for a compact entry with a limit of its own
/// (`TcpConfig::max_time_wait`, as Linux's `tcp_max_tw_buckets`), so the table holds up to
/// `max_connections + max_time_wait`: with `max_connections` 1, a connection we closed first
/// stays in TIME-WAIT (RFC 9293 §3.10.7.4) and a new SYN on another port is still answered
/// and accepted. The harness bound was wrong, not the stack; this pins the behaviour.
#[test]
fn time_wait_entries_are_held_apart_from_max_connections() {
    let cfg = TcpConfig { max_connections: 1, max_time_wait: 4, ..TcpConfig::default() };
    let mut t = Script::new(cfg);
    let (l, c) = established(&mut t);
    t.stack.tcp_close(c).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(t.stack.tcp().connections(), 1, "the closed connection waits in TIME-WAIT");
    // A second connection from another port: the slot is free, so it is accepted.
    t.inject(3, seg("S").peer_port(40001).seq(PEER_ISS).win(WIN).mss(1460));
    let synack = t.expect(3, seg("S.").peer_port(40001).any_options().ack(PEER_ISS + 1));
    t.inject(4, seg(".").peer_port(40001).seq(PEER_ISS + 1).ack(synack.seq.wrapping_add(1)).win(WIN));
    let c2 = t.stack.tcp_accept(l).expect("accepted beside the TIME-WAIT entry");
    assert_eq!(state(&t, c2), State::Established);
    assert_eq!(t.stack.tcp().connections(), 2, "max_connections (1) plus one TIME-WAIT entry");
}
