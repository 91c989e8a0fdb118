//! Path MTU discovery end to end in the simulator (RFC 1191): hosts on 1500-byte links with
//! a 1280-byte link between two routers.

/// Named `sim` so that `cargo test sim` selects these tests.
mod sim {
    use ackclock::sim::{host_config, LinkConfig, NodeId, World};
    use ackclock::time::{Duration, Instant};
    use core::net::{Ipv4Addr, SocketAddrV4};

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const ROUTER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);

    /// A, a first router (with address `first`, if any), a second, and B; the link
    /// between the routers carries 1280-byte packets.
    fn narrow_path(seed: u64, first: Option<Ipv4Addr>) -> (World, NodeId, NodeId, NodeId) {
        narrow_path_probing(seed, first, false)
    }

    /// [`narrow_path`], A's black hole detection (`TcpConfig::mtu_probing`) as given.
    fn narrow_path_probing(seed: u64, first: Option<Ipv4Addr>, probing: bool) -> (World, NodeId, NodeId, NodeId) {
        let mut w = World::new(seed);
        let mut config = host_config(A, 24, seed);
        config.tcp.mtu_probing = probing;
        let a = w.add_stack(config);
        let r1 = match first {
            Some(addr) => w.add_router_at(addr),
            None => w.add_router(),
        };
        let r2 = w.add_router();
        let b = w.add_host(B, 24);
        w.connect(a, r1, LinkConfig::gigabit());
        w.connect(r1, r2, LinkConfig { mtu: 1280, ..LinkConfig::wan(100_000_000, Duration::from_millis(5)) });
        w.connect(r2, b, LinkConfig::gigabit());
        (w, a, r1, b)
    }

    /// `bytes` of a pattern from A to B on a new connection to `port`, read back byte for
    /// byte; returns how many arrived within `limit` of virtual time.
    fn transfer(w: &mut World, a: NodeId, b: NodeId, port: u16, bytes: usize, limit: Duration) -> usize {
        let l = w.stack_mut(b).tcp_listen(SocketAddrV4::new(B, port), 1).unwrap();
        let c = w.stack_mut(a).tcp_connect(SocketAddrV4::new(B, port)).unwrap();
        let data: Vec<u8> = (0..bytes).map(|i| (i * 7 % 251) as u8).collect();
        let (mut sent, mut got, mut s) = (0, Vec::new(), None);
        let mut buf = vec![0u8; 65536];
        let deadline = w.now() + limit;
        w.run_while(|w| {
            s = s.or_else(|| w.stack_mut(b).tcp_accept(l).ok());
            if let Ok(n) = w.stack_mut(a).tcp_send(c, &data[sent..]) {
                sent += n;
            }
            while let Some(Ok(n @ 1..)) = s.map(|s| w.stack_mut(b).tcp_recv(s, &mut buf)) {
                got.extend_from_slice(&buf[..n]);
            }
            got.len() < bytes && w.now() < deadline
        });
        assert_eq!(got[..], data[..got.len()], "what arrived is what was sent");
        let _ = w.stack_mut(a).tcp_abort(c);
        if let Some(s) = s {
            let _ = w.stack_mut(b).tcp_abort(s);
        }
        let _ = w.stack_mut(b).tcp_unlisten(l);
        got.len()
    }

    /// RFC 1191: the first router answers A's 1500-byte segments with Datagram Too Big
    /// naming 1280; A sends again in 1240-byte segments and the transfer completes. The
    /// second connection starts at the learned size (§5: no segment is too big again); ten
    /// minutes later the estimate is gone (§6.3), the next connection tries 1500 again and
    /// learns again.
    #[test]
    fn rfc1191_a_narrow_link_is_found_remembered_and_tried_again_after_ten_minutes() {
        let (mut w, a, r1, b) = narrow_path(21, Some(ROUTER));
        let mb = 1 << 20;
        assert_eq!(transfer(&mut w, a, b, 80, mb, Duration::from_secs(60)), mb);
        let r = *w.router_stats(r1);
        assert!(r.too_big >= 1 && r.icmp_too_big == r.too_big, "{r:?}");
        assert_eq!(w.stack(a).counters().pmtu_reductions, 1);
        assert_eq!(w.stack(a).iface().path_mtu(B), 1280);

        assert_eq!(transfer(&mut w, a, b, 81, mb, Duration::from_secs(60)), mb);
        assert_eq!(w.router_stats(r1).too_big, r.too_big, "the second connection started at 1280");
        assert_eq!(w.stack(a).counters().pmtu_reductions, 1);

        w.run_until(Instant::from_secs(700));
        assert_eq!(w.stack(a).iface().path_mtu(B), 1500, "forgotten after 600 s");
        assert_eq!(transfer(&mut w, a, b, 82, mb, Duration::from_secs(60)), mb);
        assert!(w.router_stats(r1).too_big > r.too_big);
        assert_eq!(w.stack(a).counters().pmtu_reductions, 2);
        assert_eq!(w.stack(a).iface().path_mtu(B), 1280);
    }

    /// A router with no address sends no ICMP: the full-size segments vanish and the
    /// connection makes no progress (a path MTU black hole, RFC 2923 §2.1; the stack does
    /// not probe, RFC 4821, as Linux by default), while small packets still pass.
    #[test]
    fn a_router_that_sends_no_icmp_is_a_black_hole() {
        let (mut w, a, r1, b) = narrow_path(22, None);
        assert_eq!(transfer(&mut w, a, b, 80, 100_000, Duration::from_secs(30)), 0);
        let r = *w.router_stats(r1);
        assert!(r.too_big >= 10 && r.icmp_too_big == 0, "{r:?}");
        assert!(r.forwarded >= 3, "the handshake crossed: {r:?}");
        assert_eq!(w.stack(a).iface().path_mtu(B), 1500);
    }

    /// The same black hole, with A's black hole detection on (Linux `tcp_mtu_probing` =
    /// 1): after three timeouts in a row A sends 1,024-byte segments, which the narrow link
    /// carries, and the transfer completes.
    #[test]
    fn black_hole_detection_gets_through_a_router_that_sends_no_icmp() {
        let (mut w, a, r1, b) = narrow_path_probing(23, None, true);
        let n = 200_000;
        assert_eq!(transfer(&mut w, a, b, 80, n, Duration::from_secs(60)), n);
        assert_eq!(w.router_stats(r1).icmp_too_big, 0);
        assert_eq!(w.stack(a).counters().mtu_black_holes, 1);
    }
}
