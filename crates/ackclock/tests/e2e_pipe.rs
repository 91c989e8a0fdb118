//! End to end: two stacks over the in-memory pipe.

mod common;

use ackclock::time::Duration;
use ackclock::{Error, Shutdown, TcpHandle};
use common::{Pair, B};
use std::net::SocketAddrV4;

/// Send `total` bytes of `byte` from `c` (on a) to `s` (on b), reading as they arrive, and
/// check every byte; fails if that takes more than `limit` of virtual time.
fn bulk(p: &mut Pair, c: TcpHandle, s: TcpHandle, total: usize, byte: u8, limit: Duration) {
    let chunk = vec![byte; 65536];
    let (mut sent, mut received) = (0usize, 0usize);
    let mut buf = vec![0u8; 65536];
    assert!(p.run_until(limit, |p| {
        while sent < total {
            match p.a.tcp_send(c, &chunk[..chunk.len().min(total - sent)]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        while let Ok(n) = p.b.tcp_recv(s, &mut buf) {
            if n == 0 {
                break;
            }
            assert!(buf[..n].iter().all(|&x| x == byte));
            received += n;
        }
        received == total
    }));
}

#[test]
fn handshake_transfer_and_orderly_close() {
    let mut p = Pair::new();
    let (c, s) = p.connect(80);
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut closed = false;
    assert!(p.run_until(Duration::from_secs(60), |p| {
        while sent < data.len() {
            match p.a.tcp_send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        if sent == data.len() && !closed {
            p.a.tcp_shutdown(c, Shutdown::Write).unwrap();
            closed = true;
        }
        loop {
            match p.b.tcp_recv(s, &mut buf) {
                Ok(0) => return true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => return false,
                Err(e) => panic!("recv: {e}"),
            }
        }
    }));
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    p.close_and_drain(c, s);
}

/// Header prediction (Jacobson 1993): in a steady bulk transfer over the pipe, at least 95% of data
/// segments take the receiver's header-prediction fast path and at least 95% of ACKs take
/// the sender's. (Counted over every segment each side received, handshake and FIN
/// included, so the ratio is conservative.)
#[test]
fn bulk_transfer_runs_on_the_fast_path() {
    let mut p = Pair::new();
    let (c, s) = p.connect(80);
    bulk(&mut p, c, s, 20_000_000, 0x5a, Duration::from_secs(600));
    let (a, b) = (p.a.counters(), p.b.counters());
    let data_share = b.fast_path_data as f64 / b.segs_in as f64;
    let ack_share = a.fast_path_acks as f64 / a.segs_in as f64;
    assert!(data_share >= 0.95, "receiver fast path: {} of {} segments", b.fast_path_data, b.segs_in);
    assert!(ack_share >= 0.95, "sender fast path: {} of {} ACKs", a.fast_path_acks, a.segs_in);
}

/// `tcp_send_with` / `tcp_recv_with`: the caller's bytes go straight into send-queue pbufs
/// and come out of receive-queue pbufs in place. Fills and drains of odd sizes (a short one
/// ends the call) move 4 MB byte-exact, and every pbuf returns to its pool.
#[test]
fn send_with_and_recv_with_move_a_stream_in_place() {
    let mut p = Pair::new();
    let (c, s) = p.connect(80);
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let (mut sent, mut closed, mut calls) = (0, false, 0u32);
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(60), |p| {
        while sent < data.len() && !closed {
            // Fill at most 1000..1999 bytes a call, varying.
            let r = p.a.tcp_send_with(c, |dst| {
                calls += 1;
                let n = dst.len().min(1000 + (calls as usize * 37) % 1000).min(data.len() - sent);
                dst[..n].copy_from_slice(&data[sent..sent + n]);
                sent += n;
                n
            });
            match r {
                Ok(0) | Err(Error::WouldBlock) => break,
                Ok(_) => {}
                Err(e) => panic!("send_with: {e}"),
            }
        }
        if sent == data.len() && !closed {
            p.a.tcp_shutdown(c, Shutdown::Write).unwrap();
            closed = true;
        }
        loop {
            let r = p.b.tcp_recv_with(s, |b| {
                let n = b.len().min(777);
                got.extend_from_slice(&b[..n]);
                n
            });
            match r {
                Ok(0) => return true,
                Ok(_) => {}
                Err(Error::WouldBlock) => return false,
                Err(e) => panic!("recv_with: {e}"),
            }
        }
    }));
    assert!(got == data, "bytes differ ({} of {})", got.len(), data.len());
    p.close_and_drain(c, s);
}

/// A transparent proxy's stack (`InterfaceConfig::any_destination` and `tcp_listen_any`,
/// tun2socks-style) accepts connections to addresses and ports it does not own, answers from
/// the address the peer dialled, and tells the application where each connection was going.
/// The client reaches those addresses through its default gateway (the proxy's address).
/// Without `any_destination` the same SYN is not for us: counted and dropped, no connection.
#[test]
fn any_destination_listener_accepts_connections_to_other_addresses() {
    use ackclock::tcp::SocketOptions;
    use core::net::Ipv4Addr;
    for transparent in [true, false] {
        let mut ca = common::config(common::A, 1);
        ca.iface.gateway = Some(B);
        let mut cb = common::config(B, 2);
        cb.iface.any_destination = transparent;
        let mut p = Pair::with(ca, cb);
        let opts = SocketOptions::from_config(p.b.tcp().config());
        let l = p.b.tcp_listen_any(16, opts).unwrap();
        let far = [(Ipv4Addr::new(198, 18, 0, 7), 4444), (Ipv4Addr::new(203, 0, 113, 9), 443)];
        let clients: Vec<_> =
            far.iter().map(|&(ip, port)| p.a.tcp_connect(SocketAddrV4::new(ip, port)).unwrap()).collect();
        let mut accepted = Vec::new();
        p.run_until(Duration::from_secs(3), |p| {
            while let Ok(s) = p.b.tcp_accept(l) {
                accepted.push(s);
            }
            accepted.len() == far.len()
        });
        if !transparent {
            assert!(accepted.is_empty());
            assert!(p.b.counters().drops_not_for_us > 0);
            continue;
        }
        assert_eq!(accepted.len(), 2);
        for (&s, &c) in accepted.iter().zip(&clients) {
            let t = p.b.tcp_tuple(s).unwrap();
            assert!(far.contains(&(t.local_addr, t.local_port)), "{t:?}");
            assert_eq!(t.remote_addr, common::A);
            // The client's view of the same connection.
            let ct = p.a.tcp_tuple(c).unwrap();
            assert_eq!((ct.remote_addr, ct.remote_port), (t.local_addr, t.local_port));
            assert_eq!(p.a.tcp_send(c, b"ping").unwrap(), 4);
            assert_eq!(p.b.tcp_send(s, b"pong").unwrap(), 4);
        }
        let mut got = [0usize; 2];
        assert!(p.run_until(Duration::from_secs(3), |p| {
            let mut buf = [0u8; 16];
            for (i, (&s, &c)) in accepted.iter().zip(&clients).enumerate() {
                if let Ok(n) = p.b.tcp_recv(s, &mut buf) {
                    assert_eq!(&buf[..n], b"ping");
                    got[i] += n;
                }
                if let Ok(n) = p.a.tcp_recv(c, &mut buf) {
                    assert_eq!(&buf[..n], b"pong");
                    got[i] += n;
                }
            }
            got == [8, 8]
        }));
        // Bulk data to an address the proxy does not own still takes header prediction's
        // fast path (its one-pass frame check accepts any unicast destination here).
        let (s, c) = (accepted[0], clients[0]);
        let before = *p.b.counters();
        bulk(&mut p, c, s, 2_000_000, 0x3c, Duration::from_secs(60));
        let after = p.b.counters();
        let (fast, segs) = (after.fast_path_data - before.fast_path_data, after.segs_in - before.segs_in);
        assert!(segs > 1000 && fast as f64 >= 0.95 * segs as f64, "fast path: {fast} of {segs} segments");
    }
}

/// A jumbo MTU with pool buffers too small for it: the stack's MTU is capped at what a buffer
/// holds (1728-byte buffers, 160 of headroom: 1554), so both ends advertise MSS 1514 instead
/// of 8960, every segment is full-sized, and a megabyte crosses in well under a second of
/// virtual time (short segments would each wait for an ACK under Nagle).
#[test]
fn jumbo_mtu_with_small_buffers_uses_the_mss_a_buffer_holds() {
    use ackclock::phy::{pipe, Capabilities, PipeConfig};
    use ackclock::time::Instant;
    let caps = Capabilities::ethernet(9000);
    let (mut da, mut db) = pipe(PipeConfig { depth: 4096, capabilities: caps });
    let now = Instant::from_secs(1);
    let mut a = ackclock::Stack::new(common::config(common::A, 1), caps, now).unwrap();
    let mut b = ackclock::Stack::new(common::config(B, 2), caps, now).unwrap();
    assert_eq!(a.iface().capabilities().mtu, 1554);
    let l = b.tcp_listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let c = a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    let data = vec![0x5au8; 1 << 20];
    let (mut t, mut s, mut sent, mut got) = (now, None, 0, 0);
    let mut buf = vec![0u8; 1 << 16];
    while got < data.len() && t < now + Duration::from_secs(10) {
        a.receive(t, &mut da);
        b.receive(t, &mut db);
        s = s.or_else(|| b.tcp_accept(l).ok());
        if let Ok(n) = a.tcp_send(c, &data[sent..]) {
            sent += n;
        }
        if let Some(s) = s {
            while let Ok(n) = b.tcp_recv(s, &mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
            }
        }
        a.transmit(t, &mut da);
        b.transmit(t, &mut db);
        let next = [a.poll_at(), b.poll_at()].into_iter().flatten().min();
        t = match next {
            _ if da.pending() + db.pending() > 0 => t + Duration::from_micros(10),
            Some(n) if n > t => n,
            _ => t + Duration::from_micros(10),
        };
    }
    assert_eq!(got, data.len());
    let info = a.tcp_info(c).unwrap();
    assert_eq!((info.smss, info.eff_mss), (1514, 1502));
    assert!(t < now + Duration::from_millis(500), "took {:?} of virtual time", t.saturating_duration_since(now));
}

/// A next hop that never answers ARP: the SYN and its retransmissions are parked for it,
/// each dropped after 3 s (Linux: three requests one second apart, then the neighbour
/// fails), `poll_at` wakes the stack for that, and when the connection gives up every buffer
/// is back in the pool. Before, the last parked frames stayed until their address answered.
#[test]
fn frames_parked_for_a_silent_neighbour_expire() {
    use ackclock::phy::Capabilities;
    use ackclock::time::Instant;
    use core::net::Ipv4Addr;
    let t0 = Instant::from_secs(1);
    let mut a = ackclock::Stack::new(common::config(common::A, 1), Capabilities::ethernet(1500), t0).unwrap();
    let free = a.pool().available();
    let c = a.tcp_connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 99), 80)).unwrap();
    let mut t = t0;
    let mut most_parked = 0;
    while t < t0 + Duration::from_secs(300) {
        a.dispatch(t);
        while a.tx_ring().pop().is_some() {}
        most_parked = most_parked.max(a.iface().arp().pending_len());
        if a.tcp_readiness(c).unwrap().error.is_some() && a.iface().arp().pending_len() == 0 {
            break;
        }
        let next = a.poll_at().expect("a parked frame or the SYN timer is pending");
        if a.iface().arp().pending_len() > 0 {
            assert!(next <= t + Duration::from_secs(3), "poll_at covers the parked frames' deadline");
        }
        t = next.max(t + Duration::from_millis(1));
    }
    assert!(a.tcp_readiness(c).unwrap().error.is_some(), "the connection gave up");
    assert!(most_parked >= 1);
    assert!(a.iface().arp().pending_expired >= 1);
    assert_eq!(a.iface().arp().pending_len(), 0);
    assert_eq!(a.pool().available(), free, "every parked buffer is back");
}

/// The stack remembers the last (address, port) it looked a listener up for, and the last
/// 4-tuple it found no connection for, so that a SYN flood costs one hash per SYN. Neither
/// memory may outlive a change: a port refused, then listened on, accepts the next
/// connection (the handshake's ACK finds the connection its SYN created); a listener closed
/// refuses (RFC 9293 §3.10.7.1: RST for a SYN to a closed port); a second port opened
/// meanwhile is found as well.
#[test]
fn listener_and_connection_lookups_see_every_change() {
    let mut p = Pair::new();
    let refused = |p: &mut Pair, port: u16| {
        let c = p.a.tcp_connect(SocketAddrV4::new(B, port)).unwrap();
        p.run_until(Duration::from_secs(1), |p| p.a.tcp_readiness(c).is_ok_and(|r| r.closed));
        p.a.tcp_readiness(c).unwrap().error
    };
    assert_eq!(refused(&mut p, 80), Some(Error::Refused), "nothing listens yet");
    let (l, c, s) = p.listen_and_connect(80);
    assert_eq!(refused(&mut p, 81), Some(Error::Refused), "another port still refuses");
    let (_, c81, s81) = p.listen_and_connect(81);
    p.b.tcp_unlisten(l).unwrap();
    assert_eq!(refused(&mut p, 80), Some(Error::Refused), "the closed listener's port refuses again");
    // The connections made before still carry data.
    for (c, s) in [(c, s), (c81, s81)] {
        assert_eq!(p.a.tcp_send(c, b"ping").unwrap(), 4);
        let mut buf = [0u8; 8];
        let mut n = 0;
        assert!(p.run_until(Duration::from_secs(1), |p| {
            n += p.b.tcp_recv(s, &mut buf[n..]).unwrap_or(0);
            n == 4
        }));
        assert_eq!(&buf[..4], b"ping");
    }
}
