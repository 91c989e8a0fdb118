//! Drives the receive path for `scripts/callgrind-rxpath`: builds frames ahead of time, then
//! hands them to `Stack::process` one by one. Under callgrind with collection toggled on
//! `Stack::process`, the instruction count divided by the number of frames is the cost of
//! the whole receive path — Ethernet, IPv4, demultiplexing, TCP — from frame in the ring to
//! data on the receive queue (or ACK processed), excluding the payload copy, which happens
//! later in `tcp_recv`.
//!
//! `rxpath data N` measures in-order data segments, `rxpath ack N` pure ACKs. Add
//! `--offload` to model a device that verified checksums (no IPv4 header sum either), and
//! `--tun` for a link without a link header (a TUN: bare IPv4 packets, no ARP).
//! `--batch B` hands the frames over in batches of B through `Stack::process_batch`, with
//! receive aggregation on (`--no-lro` turns it off); the count is still per original frame.
//! In batch mode data segments carry no PSH (a bulk sender sets it at the end of a write,
//! and PSH ends an aggregate).

use ackclock::buf::{PBuf, Pool, PoolConfig};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Batch, Capabilities};
use ackclock::time::{Duration, Instant};
use ackclock::wire::{EtherType, EthernetFrame, Ipv4Packet, TcpFlags, TcpPacket, TcpRepr};
use ackclock::{Stack, StackConfig, TcpHandle};
#[path = "support/peer.rs"]
mod peer;
use peer::{Peer, LOCAL, MSS, PEER, PEER_ISS, PEER_MAC};
use std::net::SocketAddrV4;

/// The stack's segments in its transmit ring: (seq, ack, len, tsval).
fn drain(stack: &mut Stack, now: Instant) -> Vec<(u32, u32, usize, Option<u32>)> {
    stack.dispatch(now);
    let mut out = vec![];
    let ethernet = stack.iface().capabilities().ethernet;
    while let Some(f) = stack.tx_ring().pop() {
        let packet = if ethernet {
            let eth = EthernetFrame::new_checked(f.data()).unwrap();
            if eth.ethertype() != EtherType::IPV4 {
                continue;
            }
            &f.data()[14..]
        } else {
            f.data()
        };
        let ip = Ipv4Packet::new_checked(packet).unwrap();
        let t = TcpPacket::new_checked(ip.payload()).unwrap();
        let r = TcpRepr::parse(&t, LOCAL, PEER, false).unwrap();
        out.push((r.seq, r.ack, r.payload.len(), r.timestamps.map(|t| t.0)));
    }
    out
}

#[inline(never)]
fn measured(stack: &mut Stack, now: Instant, frame: PBuf) {
    stack.process(now, frame);
}

#[inline(never)]
fn measured_batch(stack: &mut Stack, now: Instant, batch: &mut Batch) {
    stack.process_batch(now, batch);
}

/// Hand `frames` to the stack one by one (`batch` 0) or in batches of `batch`; `between`
/// runs after each batch (or every 32 frames), outside the measured part.
fn feed(stack: &mut Stack, now: Instant, frames: Vec<PBuf>, batch: usize, mut between: impl FnMut(&mut Stack)) {
    if batch == 0 {
        for (i, f) in frames.into_iter().enumerate() {
            measured(stack, now, f);
            if i % 32 == 31 {
                between(stack);
            }
        }
        return;
    }
    let mut b = Batch::with_capacity(batch);
    let mut frames = frames.into_iter().peekable();
    while frames.peek().is_some() {
        for f in frames.by_ref().take(batch) {
            let _ = b.push(f);
        }
        measured_batch(stack, now, &mut b);
        between(stack);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("data");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let offload = args.iter().any(|a| a == "--offload");
    let tun = args.iter().any(|a| a == "--tun");
    let batch: usize = args
        .iter()
        .position(|a| a == "--batch")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let lro = !args.iter().any(|a| a == "--no-lro");
    let mut caps = if tun { Capabilities::ip(1500) } else { Capabilities::ethernet(1500) };
    caps.rx_checksum = offload;
    let mut cfg = StackConfig::new(InterfaceConfig::new(LOCAL, 24));
    // A fixed seed (ISN, hash keys), so that instruction counts repeat from run to run.
    cfg.seed = 0;
    cfg.pool = PoolConfig { buffers: 4096, ..Default::default() };
    cfg.tcp.recv_buffer = 4 << 20;
    cfg.tcp.send_buffer = 4 << 20;
    let mut now = Instant::from_secs(1);
    let mut stack = Stack::new(cfg, caps, now).unwrap();
    // Aggregation is off by default; batches measure it on unless --no-lro.
    let on = ackclock::tcp::Aggregation::ON;
    stack.set_aggregation(if lro && batch > 0 { on } else { ackclock::tcp::Aggregation::OFF });
    stack.iface_mut().insert_static_neighbor(PEER, PEER_MAC);
    let peer = Peer {
        pool: Pool::new(PoolConfig { buffers: n + 64, ..Default::default() }).unwrap(),
        stack_mac: stack.iface().mac(),
        link: if tun { 0 } else { 14 },
    };
    drain(&mut stack, now);

    // Handshake with timestamps (the common case the fast path predicts).
    let listener = stack.tcp_listen(SocketAddrV4::new(LOCAL, 80), 4).unwrap();
    stack.process(now, peer.frame(PEER_ISS, 0, TcpFlags::SYN, Some((100, 0)), Some(7), 0));
    let synack = drain(&mut stack, now)[0];
    let iss = synack.0;
    let tsval = synack.3.unwrap();
    stack.process(now, peer.frame(PEER_ISS + 1, iss + 1, TcpFlags::ACK, Some((101, tsval)), None, 0));
    let conn: TcpHandle = stack.tcp_accept(listener).unwrap();
    drain(&mut stack, now);
    let mut sink = vec![0u8; 1 << 20];

    match mode {
        "data" => {
            let flags = if batch == 0 { TcpFlags::ACK | TcpFlags::PSH } else { TcpFlags::ACK };
            let mut frames: Vec<PBuf> = (0..n + 1)
                .map(|i| {
                    let seq = PEER_ISS + 1 + (i * MSS) as u32;
                    peer.frame(seq, iss + 1, flags, Some((200, tsval)), None, MSS)
                })
                .collect();
            // One segment first, unmeasured: its ACK carries the scaled window (a SYN's
            // window is never scaled), which a batch of 64 segments needs.
            stack.process(now, frames.remove(0));
            while stack.tcp_recv(conn, &mut sink).is_ok_and(|n| n > 0) {}
            drain(&mut stack, now);
            feed(&mut stack, now, frames, batch, |stack| {
                while stack.tcp_recv(conn, &mut sink).is_ok_and(|n| n > 0) {}
                drain(stack, now);
            });
            while stack.tcp_recv(conn, &mut sink).is_ok_and(|n| n > 0) {}
        }
        "ack" => {
            let data = vec![0u8; 64 * 1024];
            let mut acked = 0;
            let mut peer_ts = 300;
            while acked < n {
                let _ = stack.tcp_send(conn, &data);
                now += Duration::from_micros(10);
                let sent = drain(&mut stack, now);
                let frames: Vec<PBuf> = sent
                    .iter()
                    .filter(|s| s.2 > 0)
                    .map(|s| {
                        peer_ts += 1;
                        let ack = s.0.wrapping_add(s.2 as u32);
                        peer.frame(PEER_ISS + 1, ack, TcpFlags::ACK, Some((peer_ts, s.3.unwrap_or(0))), None, 0)
                    })
                    .collect();
                acked += frames.len();
                feed(&mut stack, now, frames, batch, |_| {});
            }
        }
        _ => {
            eprintln!("usage: rxpath data|ack N [--offload] [--tun] [--batch B [--no-lro]]");
            std::process::exit(2);
        }
    }
    let c = stack.counters();
    eprintln!(
        "mode={mode} frames={n} offload={offload} tun={tun} batch={batch} lro={lro} fast_path_data={} fast_path_acks={} \
         slow_path={} lro_aggregates={} lro_segments={} lro_acks={} lro_run_frames={}",
        c.fast_path_data,
        c.fast_path_acks,
        c.slow_path,
        c.lro_aggregates,
        c.lro_segments,
        c.lro_acks,
        c.lro_run_frames
    );
}
