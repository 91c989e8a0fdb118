//! The world's event loop and routers.

/// Named `sim` so that `cargo test sim` selects these tests.
mod sim {
    use ackclock::sim::{host_config, LinkConfig, Side, World};
    use ackclock::tcp::State;
    use ackclock::time::{Duration, Instant};
    use ackclock::TcpHandle;
    use core::net::Ipv4Addr;
    use std::net::SocketAddrV4;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn established(w: &World, node: ackclock::sim::NodeId, h: TcpHandle) -> bool {
        w.stack(node).tcp_readiness(h).is_ok_and(|r| r.state == State::Established)
    }

    #[test]
    fn idle_time_costs_no_steps() {
        let mut w = World::new(1);
        let a = w.add_host(A, 24);
        let b = w.add_host(B, 24);
        w.connect(a, b, LinkConfig::gigabit());
        w.run_until(Instant::from_secs(3600));
        assert_eq!(w.now(), Instant::from_secs(3600));
        assert!(w.steps() < 20, "an idle hour in {} steps", w.steps());
        assert_eq!(w.next_event(), None, "nothing left to do");
        assert!(!w.run_while(|_| true), "an idle world stops by itself");
    }

    #[test]
    fn a_connection_opens_and_closes_and_the_world_goes_quiet() {
        let mut w = World::new(2);
        let a = w.add_host(A, 24);
        let b = w.add_host(B, 24);
        w.connect(a, b, LinkConfig::wan(1_000_000, Duration::from_millis(50)));
        let l = w.stack_mut(b).tcp_listen(SocketAddrV4::new(B, 80), 1).unwrap();
        let c = w.stack_mut(a).tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
        let mut s = None;
        let stopped = w.run_while(|w| {
            s = s.or_else(|| w.stack_mut(b).tcp_accept(l).ok());
            s.is_none()
        });
        assert!(stopped);
        // ARP, SYN, SYN-ACK, ACK: two and a half round trips of 100 ms, and some serialization.
        let t = w.now();
        assert!(t > Instant::from_millis(250) && t < Instant::from_millis(255), "{t:?}");
        assert!(established(&w, a, c));
        let s = s.unwrap();
        w.stack_mut(a).tcp_close(c).unwrap();
        w.stack_mut(b).tcp_close(s).unwrap();
        let before = w.steps();
        assert!(!w.run_while(|_| true), "runs until nothing is left, TIME-WAIT included");
        assert!(w.steps() - before < 50, "{} steps to close and wait", w.steps() - before);
        assert!(w.now() > Instant::from_secs(30), "TIME-WAIT ran out in virtual time: {:?}", w.now());
        assert_eq!(w.stalls(), 0);
    }

    #[test]
    fn run_until_brings_every_stack_to_the_deadline() {
        let mut w = World::new(3);
        let a = w.add_host(A, 24);
        let b = w.add_host(B, 24);
        let link = w.connect(a, b, LinkConfig::ethernet100());
        w.run_until(Instant::from_secs(10));
        // A socket call made now acts at 10 s: the SYN leaves at 10 s, not at the last event.
        let l = w.stack_mut(b).tcp_listen(SocketAddrV4::new(B, 80), 1).unwrap();
        w.stack_mut(a).tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
        let before = w.link_stats(link, Side::A).enqueued;
        w.run_until(Instant::from_secs(10));
        assert_eq!(w.link_stats(link, Side::A).enqueued, before + 1, "the SYN went out at the same instant");
        w.run_for(Duration::from_millis(5));
        assert!(w.stack_mut(b).tcp_accept(l).is_ok());
    }

    #[test]
    fn routers_forward_across_a_chain_and_count_what_has_no_route() {
        let mut w = World::new(4);
        let a = w.add_stack(host_config(A, 24, 1));
        let routers: Vec<_> = (0..3).map(|_| w.add_router()).collect();
        let b = w.add_stack(host_config(B, 24, 2));
        w.connect(a, routers[0], LinkConfig::gigabit());
        w.connect(routers[0], routers[1], LinkConfig::wan(100_000_000, Duration::from_millis(1)));
        w.connect(routers[1], routers[2], LinkConfig::ethernet100());
        let last = w.connect(b, routers[2], LinkConfig::gigabit());
        assert_eq!(w.link_ends(last), [b, routers[2]]);

        let l = w.stack_mut(b).tcp_listen(SocketAddrV4::new(B, 22), 1).unwrap();
        let c = w.stack_mut(a).tcp_connect(SocketAddrV4::new(B, 22)).unwrap();
        w.run_for(Duration::from_millis(20));
        assert!(w.stack_mut(b).tcp_accept(l).is_ok(), "ARP and TCP crossed three routers");
        assert!(established(&w, a, c));
        for &r in &routers {
            assert!(w.router_stats(r).forwarded >= 4, "{:?}", w.router_stats(r));
        }
        // Gratuitous ARPs have nowhere to go but back: dropped at the first router.
        assert!(w.router_stats(routers[0]).no_route >= 1);

        // An address nobody has: the ARP request dies at the first router.
        let before = w.router_stats(routers[0]).no_route;
        let _ = w.stack_mut(a).tcp_connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 99), 22)).unwrap();
        w.run_for(Duration::from_millis(10));
        assert!(w.router_stats(routers[0]).no_route > before);
        assert_eq!(w.router_stats(routers[1]).no_route, 0, "nothing unroutable reaches the middle");
    }

    #[test]
    #[should_panic(expected = "already connected")]
    fn a_host_has_one_link() {
        let mut w = World::new(5);
        let a = w.add_host(A, 24);
        let b = w.add_host(B, 24);
        let r = w.add_router();
        w.connect(a, b, LinkConfig::gigabit());
        w.connect(a, r, LinkConfig::gigabit());
    }
}
