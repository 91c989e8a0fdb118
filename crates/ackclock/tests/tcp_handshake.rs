//! Packet-level tests: connection establishment (RFC 9293 §3.5) and option negotiation.

mod common;

use ackclock::Shutdown;
use common::script::*;

/// RFC 9293 §3.5 (figure 6), RFC 7323 §2-3, RFC 2018 §2: a passive open answers a Linux
/// SYN with a SYN-ACK carrying our MSS (MTU - 40), SACK-permitted, timestamps echoing the
/// peer's TSval, and our window-scale shift derived from the 256 KiB receive buffer (3).
#[test]
fn passive_open_negotiates_every_option() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(LOCAL, 8080, 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(64240).mss(1460).sack_ok().ts(1000, 0).ws(7));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(65535).mss(1460).sack_ok().ts(ANY, 1000).ws(3));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(1).win(502).ts(1001, ANY));
    let c = t.stack.tcp_accept(l).unwrap();
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.state, ackclock::tcp::State::Established);
    assert_eq!((info.snd_wscale, info.rcv_wscale), (7, 3));
    assert!(info.timestamps && info.sack);
    assert_eq!(info.snd_wnd, 502 << 7, "RFC 7323 §2.2: windows after the SYN are scaled");
    assert_eq!(info.eff_mss, 1448, "MSS less the 12 bytes of the timestamps option");
    t.expect_nothing(200);
}

/// RFC 9293 §3.7.1: without an MSS option the peer's MSS is 536; RFC 7323: without the
/// peer's window-scale and timestamps options, neither is used, and the SYN-ACK offers only
/// what the SYN offered.
#[test]
fn options_absent_from_the_syn_are_not_used() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(LOCAL, 8080, 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(8192));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(65535).mss(1460));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(1).win(8192));
    let c = t.stack.tcp_accept(l).unwrap();
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.smss, info.eff_mss, info.snd_wscale, info.rcv_wscale), (536, 536, 0, 0));
    assert!(!info.timestamps && !info.sack);
    // Data goes out in 536-byte segments, with unscaled windows; Nagle (RFC 9293 §3.7.4)
    // holds the short tail until the first segment is acknowledged.
    t.stack.tcp_send(c, &[7u8; 1000]).unwrap();
    t.expect(2, seg(".").seq(1).ack(PEER_ISS + 1).win(65535).len(536));
    t.expect_nothing(3);
    t.inject(4, seg(".").seq(PEER_ISS + 1).ack(537).win(8192));
    t.expect(4, seg("P.").seq(537).ack(PEER_ISS + 1).win(65535).len(464));
}

/// RFC 9293 §3.5 (figure 5), RFC 6298 §2.1: an active open sends a SYN with every option,
/// retransmits it after the initial RTO of 1 s and backs off exponentially.
#[test]
fn active_open_retransmits_the_syn_with_backoff() {
    let mut t = Script::new(tcp_config());
    let _c = t.stack.tcp_connect(PEER, 80).unwrap();
    let syn = t.expect(0, seg("S").seq(0).win(65535).mss(1460).sack_ok().ts(ANY, 0).ws(3).any_options());
    assert_eq!((syn.mss, syn.ws, syn.sack_ok, syn.ts.map(|t| t.1)), (Some(1460), Some(3), true, Some(0)));
    t.expect_nothing(999);
    t.expect(1000, seg("S").seq(0).any_options());
    t.expect_nothing(2999);
    t.expect(3000, seg("S").seq(0).any_options());
    t.expect_nothing(6999);
    t.expect(7000, seg("S").seq(0).any_options());
}

/// RFC 9293 §3.10.7.3: SYN-ACK completes the active open with an ACK; the connection is
/// writable and data flows.
#[test]
fn active_open_completes() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(PEER, 80).unwrap();
    let syn = t.expect(0, seg("S").seq(0).any_options());
    let port = syn.src_port;
    t.inject(
        10,
        seg("S.")
            .seq(PEER_ISS)
            .ack(1)
            .win(29200)
            .mss(1460)
            .sack_ok()
            .ts(5000, syn.ts.unwrap().0)
            .ws(7)
            .port(port)
            .peer_port(80),
    );
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).ts(ANY, 5000).any_options());
    assert!(t.stack.tcp_readiness(c).unwrap().writable);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.srtt, Some(ackclock::time::Duration::from_millis(10)), "RTT from the echoed timestamp");
    assert_eq!(info.snd_wnd, 29200, "RFC 7323 §2.2: the SYN-ACK's window is not scaled");
    t.stack.tcp_send(c, b"hello").unwrap();
    t.expect(10, seg("P.").seq(1).ack(PEER_ISS + 1).ts(ANY, 5000).len(5));
}

/// RFC 9293 §3.10.7.1: a segment to a closed port draws an RST: `<SEQ=SEG.ACK><CTL=RST>` if
/// it had ACK, `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>` if not; an RST draws nothing.
#[test]
fn closed_port_resets() {
    let mut t = Script::new(tcp_config());
    t.iss = Some(0);
    t.inject(0, seg("S").seq(PEER_ISS).port(9999));
    t.expect(0, seg("R.").seq(0).ack(PEER_ISS + 1).win(0));
    t.inject(1, seg(".").seq(PEER_ISS).ack(777).port(9999));
    t.expect(1, seg("R").seq(777).win(0));
    t.inject(2, seg("P.").seq(PEER_ISS).ack(5).len(10).port(9999));
    t.expect(2, seg("R").seq(5).win(0));
    t.inject(3, seg("R").seq(PEER_ISS).port(9999));
    t.expect_nothing(3);
    assert_eq!(t.stack.counters().resets_sent, 3);
}

/// RFC 9293 §3.6: orderly close from our side: FIN_WAIT_1 -> FIN_WAIT_2 -> TIME_WAIT, and
/// the connection disappears after 2 MSL (60 s by default).
#[test]
fn active_close_through_time_wait() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(LOCAL, 8080, 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(2));
    assert_eq!(t.stack.tcp_readiness(c).unwrap().state, ackclock::tcp::State::FinWait2);
    t.inject(3, seg("F.").seq(PEER_ISS + 1).ack(2));
    t.expect(3, seg(".").seq(2).ack(PEER_ISS + 2));
    assert_eq!(t.stack.tcp_readiness(c).unwrap().state, ackclock::tcp::State::TimeWait);
    let mut buf = [0u8; 8];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(0), "end of stream");
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp().connections(), 1);
    t.expect_nothing(60_002);
    assert_eq!(t.stack.tcp().connections(), 1, "still in TIME-WAIT just before 2 MSL");
    t.expect_nothing(60_004);
    assert_eq!(t.stack.tcp().connections(), 0, "gone after 2 MSL");
}

/// RFC 6528 §3 (the ISN function's `secretkey` is a random value) and RFC 6056 §3.3.3 (so
/// is the port function's): `StackConfig::new` draws the seed behind both keys from the OS,
/// so two stacks built with the defaults answer the same SYN at the same time with
/// different ISNs. An explicit seed, as simulations and these scripts set, reproduces the
/// ISN exactly.
#[test]
fn default_seed_is_random_and_an_explicit_seed_reproduces_the_isn() {
    use ackclock::iface::InterfaceConfig;
    use ackclock::phy::Capabilities;
    use ackclock::StackConfig;
    let iss = |seed: u64| {
        let mut t = Script::with_config(StackConfig { seed, ..stack_config() }, Capabilities::ethernet(1500));
        t.stack.tcp_listen(LOCAL, 8080, 8).unwrap();
        t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460));
        t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(65535).mss(1460));
        t.iss.unwrap()
    };
    let a = StackConfig::new(InterfaceConfig::new(LOCAL, 24)).seed;
    let b = StackConfig::new(InterfaceConfig::new(LOCAL, 24)).seed;
    assert_ne!(a, b, "two default configurations share a secret");
    assert_ne!(iss(a), iss(b), "same 4-tuple, same time, different secrets: different ISNs");
    assert_eq!(iss(7), iss(7), "an explicit seed is deterministic");
}
