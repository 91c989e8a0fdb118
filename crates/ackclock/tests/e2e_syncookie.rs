//! SYN cookies end to end (RFC 4987 §3.6): a server whose SYN queue is full (backlog 1,
//! held by a spoofed SYN whose SYN-ACK goes nowhere) still accepts a new connection through
//! a cookie, and that connection behaves as any other: with window scaling, SACK and
//! timestamps it moves 2 MB byte-exact through 2% loss each way.

mod common;

use ackclock::phy::{pipe, Capabilities, Device, Impaired, Impairment, PipeConfig};
use ackclock::sim::Loss;
use ackclock::time::{Duration, Instant};
use ackclock::wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, SackBlocks, TcpFlags,
    TcpPacket, TcpRepr,
};
use ackclock::{Error, Stack};
use common::{config, stream, A, B};
use core::net::Ipv4Addr;
use std::net::SocketAddrV4;

/// A SYN from an address nobody answers for, to `to`:80.
fn spoofed_syn(to: &Stack) -> Vec<u8> {
    let src = Ipv4Addr::new(10, 0, 0, 99);
    let tcp = TcpRepr {
        src_port: 1234,
        dst_port: 80,
        seq: 777,
        ack: 0,
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        max_seg_size: Some(1460),
        window_scale: None,
        sack_permitted: false,
        timestamps: None,
        sack_blocks: SackBlocks::new(),
        payload: &[],
    };
    let tl = tcp.header_len();
    let eth = EthernetRepr {
        src_addr: EthernetAddress([2, 0, 0, 0, 0, 99]),
        dst_addr: to.iface().mac(),
        ethertype: EtherType::IPV4,
        vlan_id: None,
    };
    let mut buf = vec![0u8; 14 + 20 + tl];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..14]));
    Ipv4Repr::new(src, B, IpProtocol::TCP, tl).emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..34]), true);
    tcp.emit(&mut TcpPacket::new_unchecked(&mut buf[34..]), src, B, true);
    buf
}

#[test]
fn full_syn_queue_still_accepts_through_a_cookie_and_transfers_with_sack_and_window_scaling() {
    let imp = Impairment { loss: Loss::Bernoulli(0.02), ..Impairment::default() };
    let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let mut da = Impaired::new(da, imp, Impairment::default(), 31, 4096);
    let mut db = Impaired::new(db, imp, Impairment::default(), 32, 4096);
    let mut now = Instant::from_secs(1);
    let caps = Capabilities::ethernet(1500);
    let mut a = Stack::new(config(A, 1), caps, now).unwrap();
    let mut b = Stack::new(config(B, 2), caps, now).unwrap();
    let l = b.tcp_listen(SocketAddrV4::new(B, 80), 1).unwrap();
    let syn = spoofed_syn(&b);
    let mut frame = b.pool().alloc().unwrap();
    frame.append(syn.len()).unwrap().copy_from_slice(&syn);
    b.process(now, frame);
    assert_eq!(b.tcp().connections(), 1, "the spoofed SYN holds the one SYN queue place");

    let c = a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    let request = b"GET /2MB\r\n";
    let data = stream(2_000_000, 17);
    let (mut server, mut req, mut sent, mut got) = (None, Vec::new(), 0, Vec::new());
    let mut asked = false;
    let mut buf = vec![0u8; 65536];
    let deadline = now + Duration::from_secs(600);
    while got.len() < data.len() {
        assert!(now < deadline, "transfer did not finish in 600 s of virtual time: {} bytes", got.len());
        a.receive(now, &mut da);
        b.receive(now, &mut db);
        // The client speaks first: the handshake's ACK may be lost, and nothing retransmits
        // a bare ACK, but its data is retransmitted until the cookie in it is taken.
        if !asked && a.tcp_send(c, request).is_ok() {
            asked = true;
        }
        server = server.or_else(|| b.tcp_accept(l).ok());
        if let Some(s) = server {
            while req.len() < request.len() {
                match b.tcp_recv(s, &mut buf) {
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("server recv: {e}"),
                }
            }
            while req.len() == request.len() && sent < data.len() {
                match b.tcp_send(s, &data[sent..]) {
                    Ok(n) => sent += n,
                    Err(Error::WouldBlock | Error::NoBufferSpace) => break,
                    Err(e) => panic!("send: {e}"),
                }
            }
        }
        loop {
            match a.tcp_recv(c, &mut buf) {
                Ok(0) => panic!("early end of stream"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("client recv: {e}"),
            }
        }
        a.transmit(now, &mut da);
        b.transmit(now, &mut db);
        let next = [a.poll_at(), b.poll_at(), da.poll_at(), db.poll_at()].into_iter().flatten().min();
        let pending = da.inner().pending() + db.inner().pending() > 0;
        now = match next {
            _ if pending => now,
            Some(t) if t > now => t,
            _ => now + Duration::from_micros(100),
        };
    }
    assert_eq!(req, request);
    assert!(got == data, "received {} of {} bytes, or different bytes", got.len(), data.len());
    let counters = b.counters();
    assert!(counters.syn_cookies_sent >= 1);
    assert_eq!(counters.syn_cookies_validated, 1);
    assert_eq!(counters.drops_bad_cookie, 0);
    let s = server.unwrap();
    let (si, ci) = (b.tcp_info(s).unwrap(), a.tcp_info(c).unwrap());
    assert!(si.sack && si.timestamps && ci.sack && ci.timestamps);
    assert_eq!((si.snd_wscale, si.rcv_wscale), (ci.rcv_wscale, ci.snd_wscale));
    assert!(si.snd_wscale > 0 && si.rcv_wscale > 0, "window scaling both ways: {si:?}");
    assert_eq!(si.smss, 1460);
    assert!(si.stats.retransmits > 0, "the loss was felt: {:?}", si.stats);
    assert!(si.stats.sack_blocks > 0, "the cookie connection took SACK blocks: {:?}", si.stats);
    assert!(si.snd_wnd > 65535, "the client's window, scaled, passed 64 KiB: {}", si.snd_wnd);
}
