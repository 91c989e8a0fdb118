//! Packet-level tests: connection establishment (RFC 9293 §3.5) and option negotiation.

mod common;

use ackclock::tcp::TcpConfig;
use ackclock::time::Duration;
use ackclock::Shutdown;
use common::script::*;
use std::net::SocketAddrV4;

/// RFC 9293 §3.5 (figure 6), RFC 7323 §2-3, RFC 2018 §2: a passive open answers a Linux
/// SYN with a SYN-ACK carrying our MSS (MTU - 40), SACK-permitted, timestamps echoing the
/// peer's TSval, and our window-scale shift derived from the 256 KiB receive buffer (3).
#[test]
fn passive_open_negotiates_every_option() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
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
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(8192));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(65535).mss(1460));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(1).win(8192));
    let c = t.stack.tcp_accept(l).unwrap();
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.smss, info.eff_mss, info.snd_wscale, info.rcv_wscale), (536, 536, 0, 0));
    assert!(!info.timestamps && !info.sack);
    // Data goes out in 536-byte segments, with unscaled windows; the short tail goes with
    // the first segment (Nagle, RFC 9293 §3.7.4, as refined by Minshall, Linux
    // `tcp_minshall_check`: no short segment is in flight).
    t.stack.tcp_send(c, &[7u8; 1000]).unwrap();
    t.expect(2, seg(".").seq(1).ack(PEER_ISS + 1).win(65535).len(536));
    t.expect(2, seg("P.").seq(537).ack(PEER_ISS + 1).win(65535).len(464));
    t.expect_nothing(3);
}

/// RFC 9293 §3.5 (figure 5), RFC 6298 §2.1: an active open sends a SYN with every option,
/// retransmits it after the initial RTO of 1 s and backs off exponentially.
#[test]
fn active_open_retransmits_the_syn_with_backoff() {
    let mut t = Script::new(tcp_config());
    let _c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
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
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
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
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).win(32768).ts(ANY, 5000));
    assert!(t.stack.tcp_readiness(c).unwrap().writable);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.srtt, Some(ackclock::time::Duration::from_millis(10)), "RTT from the echoed timestamp");
    assert_eq!(info.snd_wnd, 29200, "RFC 7323 §2.2: the SYN-ACK's window is not scaled");
    t.stack.tcp_send(c, b"hello").unwrap();
    t.expect(10, seg("P.").seq(1).ack(PEER_ISS + 1).win(32768).ts(ANY, 5000).len(5));
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
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(65535));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(2));
    assert_eq!(t.stack.tcp_readiness(c).unwrap().state, ackclock::tcp::State::FinWait2);
    t.inject(3, seg("F.").seq(PEER_ISS + 1).ack(2));
    t.expect(3, seg(".").seq(2).ack(PEER_ISS + 2).win(65535));
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
        t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
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

// ---- Options turned off, and the MSS, through TcpConfig. ----

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;

/// RFC 7323 §3.2 (a TCP "MAY send a TSopt in <SYN,ACK> only if it received a TSopt in the
/// initial <SYN>", and TSopt is in use only when both carry it): with `timestamps: false`
/// the SYN-ACK to a SYN offering every option carries MSS, SACK-permitted and window scale,
/// and no TSopt. Data segments then carry no TSopt and use the whole MSS (1460, not 1448:
/// RFC 9293 §3.7.1); the RTT comes from a timed segment (RFC 6298 §3: the SYN-ACK, 20 ms);
/// and a TSopt the peer sends anyway "MUST be ignored and the packet processed normally"
/// (§3.2): a TSval going backwards is no PAWS drop.
#[test]
fn timestamps_off_passive_open() {
    let mut t = Script::new(TcpConfig { timestamps: false, ..tcp_config() });
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(64240).mss(1460).sack_ok().ts(1000, 0).ws(7));
    t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(1460).sack_ok().ws(3));
    t.inject(20, seg(".").seq(P).ack(1).win(502));
    let c = t.stack.tcp_accept(l).unwrap();
    let info = t.stack.tcp_info(c).unwrap();
    assert!(!info.timestamps && info.sack);
    assert_eq!((info.smss, info.eff_mss, info.snd_wscale, info.rcv_wscale), (1460, 1460, 7, 3));
    assert_eq!(info.srtt, Some(Duration::from_millis(20)), "RTT timed on the SYN-ACK");
    t.stack.tcp_send(c, &[7u8; 2000]).unwrap();
    t.expect(20, seg(".").seq(1).ack(P).win(32768).len(1460));
    t.expect(20, seg("P.").seq(1461).ack(P).win(32768).len(540));
    t.expect_nothing(29);
    // Data with TSopts, the second one's TSval older than the first's: both are taken (and
    // acknowledged at once: the connection's first data, quick ACKs as Linux's
    // `tcp_event_data_recv` sends them).
    t.inject(30, seg("P.").seq(P).ack(1461).win(502).ts(5000, 0).len(100));
    // (262144 - 100) / 8, rounded up so the right edge does not move left (RFC 7323 §2.4).
    t.expect(30, seg(".").seq(2001).ack(P + 100).win(32756));
    t.inject(40, seg("P.").seq(P + 100).ack(2001).win(502).ts(4000, 0).len(100));
    // The right edge stays at P + 100 + 8 · 32756: (that - (P + 200)) / 8, rounded up.
    t.expect(40, seg(".").seq(2001).ack(P + 200).win(32744));
    assert_eq!(t.stack.counters().drops_paws, 0);
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 256]), Ok(200));
}

/// RFC 7323 §3.2: with `timestamps: false` our SYN offers no TSopt, so the connection runs
/// without timestamps even if the peer's SYN-ACK (against the rule) carries one: our ACK
/// and data carry none.
#[test]
fn timestamps_off_active_open() {
    let mut t = Script::new(TcpConfig { timestamps: false, ..tcp_config() });
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let syn = t.expect(0, seg("S").seq(0).win(65535).mss(1460).sack_ok().ws(3));
    let peer = |s: Seg| s.port(syn.src_port).peer_port(80);
    t.inject(10, peer(seg("S.").seq(PEER_ISS).ack(1).win(29200).mss(1460).sack_ok().ts(5000, 0).ws(7)));
    t.expect(10, seg(".").seq(1).ack(P).win(32768));
    assert!(!t.stack.tcp_info(c).unwrap().timestamps);
    t.stack.tcp_send(c, b"hello").unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(32768).len(5));
}

/// RFC 7323 §2.2 ("both sides MUST send Window Scale options in their <SYN> segments to
/// enable window scaling in either direction"): with `window_scaling: false` the SYN-ACK
/// carries no window-scale option although the peer offered a shift of 7, so no window is
/// scaled either way: the peer's window field of 3000 means 3000 bytes (two 1448-byte
/// segments, then the 104 bytes left are less than an MSS: RFC 9293 §3.8.6.2.1), and our
/// field is the 256 KiB buffer capped at 65535.
#[test]
fn window_scaling_off_passive_open() {
    let mut t = Script::new(TcpConfig { window_scaling: false, ..tcp_config() });
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(64240).mss(1460).sack_ok().ts(1000, 0).ws(7));
    let synack = t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(1460).sack_ok().ts(ANY, 1000));
    t.inject(10, seg(".").seq(P).ack(1).win(3000).ts(1001, synack.ts.unwrap().0));
    let c = t.stack.tcp_accept(l).unwrap();
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.snd_wscale, info.rcv_wscale, info.snd_wnd), (0, 0, 3000));
    t.stack.tcp_send(c, &[7u8; 5000]).unwrap();
    t.expect(10, seg(".").seq(1).ack(P).win(65535).ts(ANY, 1001).len(1448));
    t.expect(10, seg(".").seq(1449).ack(P).win(65535).ts(ANY, 1001).len(1448));
    t.expect_nothing(19);
    // 1000 bytes from the peer: our field stays 65535 (the free buffer is far larger).
    t.inject(20, seg("P.").seq(P).ack(1).win(3000).ts(1002, synack.ts.unwrap().0).len(1000));
    t.expect(60, seg(".").seq(2897).ack(P + 1000).win(65535).ts(ANY, 1002));
}

/// RFC 7323 §2.2: with `window_scaling: false` our SYN offers no shift, so a shift in the
/// peer's SYN-ACK is not used: its later window fields are taken as they are.
#[test]
fn window_scaling_off_active_open() {
    let mut t = Script::new(TcpConfig { window_scaling: false, ..tcp_config() });
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let syn = t.expect(0, seg("S").seq(0).win(65535).mss(1460).sack_ok().ts(ANY, 0));
    let peer = |s: Seg| s.port(syn.src_port).peer_port(80);
    let tsval = syn.ts.unwrap().0;
    t.inject(10, peer(seg("S.").seq(PEER_ISS).ack(1).win(2000).mss(1460).sack_ok().ts(5000, tsval).ws(7)));
    t.expect(10, seg(".").seq(1).ack(P).win(65535).ts(ANY, 5000));
    t.inject(20, peer(seg(".").seq(P).ack(1).win(2000).ts(5001, tsval)));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.snd_wscale, info.rcv_wscale, info.snd_wnd), (0, 0, 2000), "2000, not 2000 << 7");
}

/// RFC 2018 §2 (SACK-permitted "may be sent in a SYN"; SACK is used only when both SYNs
/// carry it): with `sack: false` neither our SYN nor our SYN-ACK offers it, and out-of-order
/// arrivals draw plain duplicate ACKs with no SACK blocks (RFC 5681 §4.2: at once).
#[test]
fn sack_off_sends_no_sack_permitted_and_no_blocks() {
    let cfg = TcpConfig { sack: false, ..tcp_config() };
    let mut t = Script::new(cfg.clone());
    t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    t.expect(0, seg("S").seq(0).win(65535).mss(1460).ts(ANY, 0).ws(3));

    let mut t = Script::new(cfg);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460).sack_ok());
    t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(1460));
    t.inject(1, seg(".").seq(P).ack(1).win(65535));
    let c = t.stack.tcp_accept(l).unwrap();
    assert!(!t.stack.tcp_info(c).unwrap().sack);
    t.inject(10, seg(".").seq(P + 1000).ack(1).win(65535).len(1000));
    t.expect(10, seg(".").seq(1).ack(P).win(65535));
    t.inject(11, seg(".").seq(P + 3000).ack(1).win(65535).len(1000));
    t.expect(11, seg(".").seq(1).ack(P).win(65535));
    t.inject(12, seg(".").seq(P).ack(1).win(65535).len(1000));
    t.expect(12, seg(".").seq(1).ack(P + 2000).win(65535));
    t.expect_nothing(100);
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.ooo_segs, 2);
}

/// RFC 9293 §3.7.1 (the MSS option carries the largest segment we can receive; we send
/// no more than the peer's): `mss: Some(1000)` is what our SYN and SYN-ACK advertise, and
/// it also bounds what we send (Linux TCP_MAXSEG): a peer advertising 1460 gets 1000-byte
/// segments; one advertising 536 gets 536-byte ones.
#[test]
fn mss_override_is_advertised_and_bounds_our_segments() {
    let cfg = TcpConfig { mss: Some(1000), timestamps: false, ..tcp_config() };
    let mut t = Script::new(cfg.clone());
    t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    t.expect(0, seg("S").seq(0).win(65535).mss(1000).sack_ok().ws(3));

    for (peer_mss, seg_len) in [(1460, 1000), (536, 536)] {
        let mut t = Script::new(cfg.clone());
        let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
        t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(peer_mss));
        t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(1000));
        t.inject(1, seg(".").seq(P).ack(1).win(65535));
        let c = t.stack.tcp_accept(l).unwrap();
        assert_eq!(t.stack.tcp_info(c).unwrap().smss, seg_len);
        t.stack.tcp_send(c, &[1u8; 2500]).unwrap();
        let mut off = 0;
        while 2500 - off >= seg_len as usize {
            t.expect(1, seg(".").seq(1 + off as u32).ack(P).win(65535).len(seg_len as usize));
            off += seg_len as usize;
        }
        // The short tail with them (Nagle as refined by Minshall, Linux `tcp_minshall_check`).
        t.expect(1, seg("P.").seq(1 + off as u32).ack(P).win(65535).len(2500 - off));
        t.expect_nothing(1);
    }
}

/// RFC 9293 §3.7.1, RFC 879: without an override the MSS is the device MTU less 40 bytes
/// of IPv4 and TCP headers: 1240 on an MTU of 1280, 536 on 576. A peer advertising 1460
/// still gets segments no larger than our MTU allows.
#[test]
fn mss_derives_from_the_device_mtu() {
    for (mtu, mss) in [(1280, 1240u16), (576, 536)] {
        let mut t = Script::with_mtu(tcp_config(), mtu);
        t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
        t.expect(0, seg("S").seq(0).win(65535).mss(mss).sack_ok().ts(ANY, 0).ws(3));

        let mut t = Script::with_mtu(tcp_config(), mtu);
        let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
        t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460));
        t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(mss));
        t.inject(1, seg(".").seq(P).ack(1).win(65535));
        let c = t.stack.tcp_accept(l).unwrap();
        t.stack.tcp_send(c, &[1u8; 3000]).unwrap();
        t.expect(1, seg(".").seq(1).ack(P).win(65535).len(mss as usize));
        t.expect(1, seg(".").seq(1 + mss as u32).ack(P).win(65535).len(mss as usize));
    }
}

/// RFC 9293 §3.7.1 (the MSS is what we can receive; IPv4 fragments are not reassembled
/// here, and our segments go out with DF): an override above MTU - 40 is capped there. With
/// `mss: Some(9000)` on an MTU of 1500 the SYN-ACK advertises 1460, and a peer advertising
/// 8960 gets 1460-byte segments, not frames the link cannot carry.
#[test]
fn mss_override_is_capped_by_the_device_mtu() {
    let cfg = TcpConfig { mss: Some(9000), timestamps: false, ..tcp_config() };
    let mut t = Script::new(cfg);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(8960));
    t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(1460));
    t.inject(1, seg(".").seq(P).ack(1).win(65535));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_info(c).unwrap().smss, 1460);
    t.stack.tcp_send(c, &[1u8; 3000]).unwrap();
    t.expect(1, seg(".").seq(1).ack(P).win(65535).len(1460));
    t.expect(1, seg(".").seq(1461).ack(P).win(65535).len(1460));
    t.expect(1, seg("P.").seq(2921).ack(P).win(65535).len(80));
    t.expect_nothing(1);
}
