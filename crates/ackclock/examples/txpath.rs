//! Drives the transmit path for `scripts/callgrind-txpath`: under callgrind with collection
//! toggled on `measured` (one `Stack::dispatch`), the instruction count divided by the frames
//! that dispatch put in the transmit ring is the cost of sending one segment: the output
//! decision, the headers (TCP, IPv4, Ethernet), the checksum from the payload's cached sum,
//! the bookkeeping after the send and the timer re-arm. The payload copy is not in it: the
//! application's bytes were copied (and summed) by `tcp_send` before, outside the count.
//!
//! `txpath data N` sends N full-size data segments, one per dispatch (the application
//! writes one MSS, dispatch sends it; a scripted peer acknowledges every 32 segments,
//! outside the count); with `--burst B` the application writes B segments' worth and one
//! dispatch sends them all (a sender that takes many frames per poll). `txpath ack N` sends N pure ACKs: the peer sends two full-size
//! segments, the application reads them, and dispatch sends the ACK they are owed (RFC 5681
//! §4.2: at least every second full-size segment). `--tun` uses a link without a link header.

use ackclock::buf::{Pool, PoolConfig};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::Capabilities;
use ackclock::time::{Duration, Instant};
use ackclock::wire::{EtherType, EthernetFrame, Ipv4Packet, TcpFlags, TcpPacket, TcpRepr};
use ackclock::{Stack, StackConfig};
#[path = "support/peer.rs"]
mod peer;
use peer::{Peer, LOCAL, MSS, PEER, PEER_ISS, PEER_MAC};
use std::net::SocketAddrV4;

/// The TCP segments in the stack's transmit ring: (seq, ack, payload length, tsval).
fn take(stack: &mut Stack) -> Vec<(u32, u32, usize, u32)> {
    let mut out = vec![];
    let ethernet = stack.iface().capabilities().ethernet;
    while let Some(f) = stack.tx_ring().pop() {
        let packet = if ethernet {
            match EthernetFrame::new_checked(f.data()) {
                Ok(eth) if eth.ethertype() == EtherType::IPV4 => &f.data()[14..],
                _ => continue,
            }
        } else {
            f.data()
        };
        let ip = Ipv4Packet::new_checked(packet).expect("IPv4");
        let t = TcpPacket::new_checked(ip.payload()).expect("TCP");
        assert!(t.verify_checksum(LOCAL, PEER), "the stack's checksum verifies");
        let r = TcpRepr::parse(&t, LOCAL, PEER, false).expect("parses");
        out.push((r.seq, r.ack, r.payload.len(), r.timestamps.map_or(0, |t| t.0)));
    }
    out
}

#[inline(never)]
fn measured(stack: &mut Stack, now: Instant) -> usize {
    stack.dispatch(now);
    stack.tx_ring().len()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("data");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let tun = args.iter().any(|a| a == "--tun");
    let burst: usize = args
        .iter()
        .position(|a| a == "--burst")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    assert!((1..=32).contains(&burst) && n % burst == 0, "--burst between 1 and 32, dividing N");
    let caps = if tun { Capabilities::ip(1500) } else { Capabilities::ethernet(1500) };
    let mut cfg = StackConfig::new(InterfaceConfig::new(LOCAL, 24));
    // A fixed seed (ISN, hash keys), so that instruction counts repeat from run to run.
    cfg.seed = 0;
    cfg.pool = PoolConfig { buffers: 4096, ..Default::default() };
    cfg.tcp.recv_buffer = 4 << 20;
    cfg.tcp.send_buffer = 4 << 20;
    // The sender may send what the application wrote at once: a window of 64 segments.
    cfg.tcp.initial_window = 64;
    let mut now = Instant::from_secs(1);
    let mut stack = Stack::new(cfg, caps, now).expect("stack");
    stack.iface_mut().insert_static_neighbor(PEER, PEER_MAC);
    let peer = Peer {
        pool: Pool::new(PoolConfig { buffers: 256, ..Default::default() }).expect("pool"),
        stack_mac: stack.iface().mac(),
        link: if tun { 0 } else { 14 },
    };
    stack.dispatch(now);
    take(&mut stack);

    // Handshake with timestamps and window scaling.
    let listener = stack.tcp_listen(SocketAddrV4::new(LOCAL, 80), 4).expect("listen");
    stack.process(now, peer.frame(PEER_ISS, 0, TcpFlags::SYN, Some((100, 0)), Some(7), 0));
    stack.dispatch(now);
    let synack = take(&mut stack)[0];
    let iss = synack.0;
    let mut ts = 101;
    stack.process(now, peer.frame(PEER_ISS + 1, iss + 1, TcpFlags::ACK, Some((ts, synack.3)), None, 0));
    let conn = stack.tcp_accept(listener).expect("accepted");
    stack.dispatch(now);
    take(&mut stack);

    let (mut measured_frames, mut sent) = (0, 0);
    match mode {
        "data" => {
            let data = vec![0x17u8; MSS];
            let mut snd_nxt = iss + 1;
            let mut last_tsval = synack.3;
            for i in 0..n / burst {
                for _ in 0..burst {
                    assert_eq!(stack.tcp_send(conn, &data).expect("send"), MSS);
                }
                now += Duration::from_micros(1);
                measured_frames += measured(&mut stack, now);
                for s in take(&mut stack) {
                    assert_eq!((s.0, s.2), (snd_nxt, MSS), "one full segment in order");
                    snd_nxt = snd_nxt.wrapping_add(MSS as u32);
                    last_tsval = s.3;
                    sent += 1;
                }
                if (i + 1) * burst % 32 == 0 {
                    ts += 1;
                    stack.process(
                        now,
                        peer.frame(PEER_ISS + 1, snd_nxt, TcpFlags::ACK, Some((ts, last_tsval)), None, 0),
                    );
                }
            }
        }
        "ack" => {
            let mut sink = vec![0u8; 1 << 16];
            let mut seq = PEER_ISS + 1;
            for _ in 0..n {
                now += Duration::from_micros(1);
                for _ in 0..2 {
                    ts += 1;
                    stack.process(now, peer.frame(seq, iss + 1, TcpFlags::ACK, Some((ts, synack.3)), None, MSS));
                    seq = seq.wrapping_add(MSS as u32);
                }
                while stack.tcp_recv(conn, &mut sink).is_ok_and(|k| k > 0) {}
                measured_frames += measured(&mut stack, now);
                for s in take(&mut stack) {
                    assert_eq!((s.1, s.2), (seq, 0), "a pure ACK of both segments");
                    sent += 1;
                }
            }
        }
        _ => {
            eprintln!("usage: txpath data|ack N [--tun] [--burst B]");
            std::process::exit(2);
        }
    }
    assert_eq!(sent, n, "every segment sent");
    assert_eq!(measured_frames, n, "every segment was sent by the measured dispatch");
    eprintln!("mode={mode} segments={n} tun={tun} burst={burst} frames_out={}", stack.counters().frames_out);
}
