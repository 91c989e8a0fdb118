//! Packet-level TCP tests, in the spirit of packetdrill: the test plays the remote peer.
//! It injects segments at given times and expects exactly the segments the stack sends
//! back, field by field.
//!
//! Sequence numbers of the stack's side are relative to its ISS (learned from its first
//! SYN or SYN-ACK), as packetdrill prints them; the peer's are absolute, chosen by the test
//! (`PEER_ISS` by convention). Windows are raw header fields.
//!
//! ```ignore
//! let mut t = Script::new(Default::default());
//! let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
//! t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460));
//! t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).mss(1460));
//! ```
#![allow(dead_code)]

use ackclock::buf::{Flags, PBuf, PoolConfig};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::Capabilities;
use ackclock::tcp::TcpConfig;
use ackclock::time::{Duration, Instant};
use ackclock::wire::{
    checksum, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, SackBlocks,
    TcpFlags, TcpPacket, TcpRepr,
};
use ackclock::{Stack, StackConfig};
use core::fmt;
use core::net::Ipv4Addr;

pub const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
pub const PEER: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);
pub const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
pub const PEER_PORT: u16 = 40000;
/// The peer's initial sequence number, by convention.
pub const PEER_ISS: u32 = 1_000_000;

/// A segment description: what to inject, or what to expect. When expecting, options and
/// payload length always match exactly, and the window must be given; an unset seq or ack
/// matches anything. `any_options` makes an expectation loose: options and window are not
/// checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seg {
    pub flags: TcpFlags,
    pub seq: Option<u32>,
    pub ack: Option<u32>,
    pub win: Option<u16>,
    pub mss: Option<u16>,
    pub ws: Option<u8>,
    pub sack_ok: bool,
    /// (TSval, TSecr); when expecting, `Some((ANY, x))` checks only the echo.
    pub ts: Option<(u32, u32)>,
    pub sack: Vec<(u32, u32)>,
    pub len: usize,
    /// Local port of the stack's side (destination of injected segments).
    pub port: Option<u16>,
    /// Peer port (source of injected segments).
    pub peer_port: Option<u16>,
    /// When expecting: skip the option and window checks entirely.
    pub any_options: bool,
    /// The urgent pointer field (meaningful with `U`); when expecting, checked as given.
    pub urgent: u16,
}

/// Wildcard for timestamp values in expectations.
pub const ANY: u32 = u32::MAX;

/// Parse tcpdump-style flags: S (SYN), F (FIN), R (RST), P (PSH), '.' (ACK).
pub fn seg(flags: &str) -> Seg {
    let mut f = TcpFlags::NONE;
    for c in flags.chars() {
        f |= match c {
            'S' => TcpFlags::SYN,
            'F' => TcpFlags::FIN,
            'R' => TcpFlags::RST,
            'P' => TcpFlags::PSH,
            '.' => TcpFlags::ACK,
            'U' => TcpFlags::URG,
            _ => panic!("unknown flag {c}"),
        };
    }
    Seg {
        flags: f,
        seq: None,
        ack: None,
        win: None,
        mss: None,
        ws: None,
        sack_ok: false,
        ts: None,
        sack: vec![],
        len: 0,
        port: None,
        peer_port: None,
        any_options: false,
        urgent: 0,
    }
}

impl Seg {
    /// The urgent pointer field: with `U`, the offset from SEG.SEQ of the octet after the
    /// urgent data (RFC 9293 §3.1).
    pub fn urg(mut self, up: u16) -> Self {
        self.urgent = up;
        self
    }

    pub fn seq(mut self, s: u32) -> Self {
        self.seq = Some(s);
        self
    }
    pub fn ack(mut self, a: u32) -> Self {
        self.ack = Some(a);
        self
    }
    pub fn win(mut self, w: u16) -> Self {
        self.win = Some(w);
        self
    }
    pub fn mss(mut self, m: u16) -> Self {
        self.mss = Some(m);
        self
    }
    pub fn ws(mut self, w: u8) -> Self {
        self.ws = Some(w);
        self
    }
    pub fn sack_ok(mut self) -> Self {
        self.sack_ok = true;
        self
    }
    pub fn ts(mut self, val: u32, ecr: u32) -> Self {
        self.ts = Some((val, ecr));
        self
    }
    pub fn sack(mut self, blocks: &[(u32, u32)]) -> Self {
        self.sack = blocks.to_vec();
        self
    }
    pub fn len(mut self, n: usize) -> Self {
        self.len = n;
        self
    }
    pub fn port(mut self, p: u16) -> Self {
        self.port = Some(p);
        self
    }
    pub fn peer_port(mut self, p: u16) -> Self {
        self.peer_port = Some(p);
        self
    }
    pub fn any_options(mut self) -> Self {
        self.any_options = true;
        self
    }
}

/// A segment the stack sent, decoded (seq and ack relative to the stack's ISS / absolute
/// peer numbers as described in the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct Sent {
    pub flags: TcpFlags,
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    pub mss: Option<u16>,
    pub ws: Option<u8>,
    pub sack_ok: bool,
    pub ts: Option<(u32, u32)>,
    pub sack: Vec<(u32, u32)>,
    pub len: usize,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: Vec<u8>,
    /// The urgent pointer field.
    pub urgent: u16,
}

impl fmt::Debug for Sent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}:{}({}) ack {} win {}",
            self.flags,
            self.seq,
            self.seq.wrapping_add(self.len as u32),
            self.len,
            self.ack,
            self.win
        )?;
        let mut opts = vec![];
        if let Some(m) = self.mss {
            opts.push(format!("mss {m}"));
        }
        if self.sack_ok {
            opts.push("sackOK".into());
        }
        if let Some((v, e)) = self.ts {
            opts.push(format!("TS val {v} ecr {e}"));
        }
        if let Some(w) = self.ws {
            opts.push(format!("wscale {w}"));
        }
        if !self.sack.is_empty() {
            opts.push(format!("sack {:?}", self.sack));
        }
        if !opts.is_empty() {
            write!(f, " <{}>", opts.join(","))?;
        }
        write!(f, " [{}->{}]", self.src_port, self.dst_port)
    }
}

/// A stack under test, and the peer the test plays.
pub struct Script {
    pub stack: Stack,
    pub start: Instant,
    pub now: Instant,
    /// The stack's ISS, once seen.
    pub iss: Option<u32>,
    /// Everything the stack sent, in order (also the ones already expected).
    pub log: Vec<Sent>,
    pending: std::collections::VecDeque<Sent>,
    /// Bytes of link header before each IPv4 packet: 14 (Ethernet) or 0 (a TUN's link).
    link: usize,
}

pub fn tcp_config() -> TcpConfig {
    TcpConfig::default()
}

/// The stack configuration of scripts: `LOCAL`/24, a fixed seed (the ISS, ports and hash
/// keys repeat from run to run), 512 buffers.
pub fn stack_config() -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(LOCAL, 24));
    c.seed = 7;
    c.pool = PoolConfig { buffers: 512, ..Default::default() };
    c
}

/// The bytes of `frame` as a device with transmit checksum offload puts them on the wire: for
/// a frame marked `CSUM_PARTIAL` (and not to be cut, `GSO_TCPV4`), the ones'-complement sum
/// from `csum_start` to the end, whose field holds the pseudo-header sum, stored in the field
/// at `csum_start + csum_offset` (virtio-net's `NEEDS_CSUM`).
pub fn complete_checksum(frame: &PBuf) -> Vec<u8> {
    let mut d = frame.data().to_vec();
    let m = &frame.meta;
    if m.flags.contains(Flags::CSUM_PARTIAL) && !m.flags.contains(Flags::GSO_TCPV4) {
        assert!(checksum::complete_partial(&mut d, m.csum_start as usize, m.csum_offset as usize));
    }
    d
}

impl Script {
    /// A stack at `LOCAL` with `tcp` settings; the peer's MAC is known (no ARP in scripts).
    pub fn new(tcp: TcpConfig) -> Script {
        Script::with_mtu(tcp, 1500)
    }

    /// As [`Script::new`], on a device with this MTU.
    pub fn with_mtu(tcp: TcpConfig, mtu: usize) -> Script {
        let mut c = stack_config();
        c.tcp = tcp;
        Script::with_config(c, Capabilities::ethernet(mtu))
    }

    /// A stack built from `c` (its interface must be `LOCAL`/24) on a device with `caps`.
    pub fn with_config(c: StackConfig, caps: Capabilities) -> Script {
        let start = Instant::from_secs(100);
        let mut stack = Stack::new(c, caps, start).unwrap();
        stack.iface_mut().insert_static_neighbor(PEER, PEER_MAC);
        let link = if caps.ethernet { 14 } else { 0 };
        let mut s = Script { stack, start, now: start, iss: None, log: vec![], pending: Default::default(), link };
        // The gratuitous ARP at start-up is not TCP: let it out now.
        s.stack.dispatch(start);
        s.stack.tx_ring().clear();
        s
    }

    pub fn at(&mut self, ms: u64) {
        let t = self.start + Duration::from_millis(ms);
        assert!(t >= self.now, "script time runs backwards: {ms} ms");
        self.now = t;
    }

    /// Set the time to `us` microseconds after the start.
    pub fn at_us(&mut self, us: u64) {
        let t = self.start + Duration::from_micros(us);
        assert!(t >= self.now, "script time runs backwards");
        self.now = t;
    }

    /// Build the frame for `s` from the peer to the stack.
    pub fn frame(&self, s: &Seg, payload: &[u8]) -> Vec<u8> {
        let mut sack = SackBlocks::new();
        for &(l, r) in &s.sack {
            sack.push(self.local_seq(l), self.local_seq(r));
        }
        let tcp = TcpRepr {
            src_port: s.peer_port.unwrap_or(PEER_PORT),
            dst_port: s.port.unwrap_or(8080),
            seq: s.seq.expect("injected segments need a seq"),
            ack: s.ack.map(|a| self.local_seq(a)).unwrap_or(0),
            flags: s.flags,
            window: s.win.unwrap_or(65535),
            urgent: s.urgent,
            max_seg_size: s.mss,
            window_scale: s.ws,
            sack_permitted: s.sack_ok,
            timestamps: s.ts,
            sack_blocks: sack,
            payload,
        };
        let tl = tcp.header_len() + payload.len();
        let ip = Ipv4Repr::new(PEER, LOCAL, IpProtocol::TCP, tl);
        let eth = EthernetRepr {
            src_addr: PEER_MAC,
            dst_addr: self.stack.iface().mac(),
            ethertype: EtherType::IPV4,
            vlan_id: None,
        };
        let l = self.link;
        let mut buf = vec![0u8; l + 20 + tl];
        if l > 0 {
            eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..14]));
        }
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[l..l + 20]), true);
        let hl = tcp.header_len();
        buf[l + 20 + hl..].copy_from_slice(payload);
        tcp.emit(&mut TcpPacket::new_unchecked(&mut buf[l + 20..]), PEER, LOCAL, true);
        buf
    }

    /// Stack-relative sequence number to absolute.
    pub fn local_seq(&self, rel: u32) -> u32 {
        rel.wrapping_add(self.iss.unwrap_or(0))
    }

    /// Inject `s` at `ms` after the start, with `s.len` bytes of payload (a pattern).
    pub fn inject(&mut self, ms: u64, s: Seg) {
        let payload: Vec<u8> = (0..s.len).map(|i| (s.seq.unwrap_or(0) as usize + i) as u8).collect();
        self.inject_payload(ms, s, &payload);
    }

    pub fn inject_payload(&mut self, ms: u64, s: Seg, payload: &[u8]) {
        self.at(ms);
        let bytes = self.frame(&s, payload);
        self.inject_raw(&bytes);
    }

    /// Inject `s` at `ms` in a buffer from `pool` rather than the stack's own: a device
    /// with its own receive pool (as the TAP has), for tests that exhaust the stack's pool.
    pub fn inject_via(&mut self, pool: &ackclock::buf::Pool, ms: u64, s: Seg) {
        self.at(ms);
        let payload: Vec<u8> = (0..s.len).map(|i| (s.seq.unwrap_or(0) as usize + i) as u8).collect();
        let bytes = self.frame(&s, &payload);
        let mut buf = pool.alloc().expect("the device pool");
        buf.append(bytes.len()).unwrap().copy_from_slice(&bytes);
        self.stack.process(self.now, buf);
    }

    /// Hand the stack an arbitrary frame (for malformed-input tests).
    pub fn inject_raw(&mut self, bytes: &[u8]) {
        let mut buf = self.stack.pool().alloc().expect("pool");
        buf.append(bytes.len()).unwrap().copy_from_slice(bytes);
        self.stack.process(self.now, buf);
    }

    /// Let the stack run timers and send, and collect what it sent. A frame left for the
    /// device to complete its checksum (transmit offload) is completed first, as a device does.
    pub fn collect(&mut self) {
        self.stack.dispatch(self.now);
        while let Some(frame) = self.stack.tx_ring().pop() {
            let completed = complete_checksum(&frame);
            let data = &completed[..];
            let packet = if self.link == 0 {
                data
            } else {
                let eth = EthernetFrame::new_checked(data).expect("ethernet");
                if eth.ethertype() != EtherType::IPV4 {
                    continue;
                }
                assert_eq!(eth.dst_addr(), PEER_MAC);
                &data[14..]
            };
            let ip = Ipv4Packet::new_checked(packet).expect("ipv4");
            if ip.protocol() != IpProtocol::TCP {
                continue;
            }
            assert!(ip.verify_checksum(), "IPv4 header checksum");
            assert_eq!(ip.dst_addr(), PEER);
            let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
            assert!(tcp.verify_checksum(LOCAL, PEER), "TCP checksum of a sent segment");
            let r = TcpRepr::parse(&tcp, LOCAL, PEER, true).expect("tcp parse");
            if r.flags.contains(TcpFlags::SYN) && self.iss.is_none() {
                self.iss = Some(r.seq);
            }
            let base = self.iss.unwrap_or(0);
            let sent = Sent {
                flags: r.flags,
                seq: r.seq.wrapping_sub(base),
                ack: r.ack,
                win: r.window,
                mss: r.max_seg_size,
                ws: r.window_scale,
                sack_ok: r.sack_permitted,
                ts: r.timestamps,
                sack: r.sack_blocks.as_slice().to_vec(),
                len: r.payload.len(),
                src_port: r.src_port,
                dst_port: r.dst_port,
                payload: r.payload.to_vec(),
                urgent: r.urgent,
            };
            self.log.push(sent.clone());
            self.pending.push_back(sent);
        }
    }

    /// Expect exactly `want` as the next segment the stack sends at `ms`.
    #[track_caller]
    pub fn expect(&mut self, ms: u64, want: Seg) -> Sent {
        self.at(ms);
        self.collect();
        let Some(got) = self.pending.pop_front() else {
            panic!("at {ms} ms: expected {want:?}, the stack sent nothing");
        };
        check(ms, &want, &got);
        got
    }

    /// Expect that the stack sends nothing at `ms` (timers up to then included).
    #[track_caller]
    pub fn expect_nothing(&mut self, ms: u64) {
        self.at(ms);
        self.collect();
        if let Some(got) = self.pending.pop_front() {
            panic!("at {ms} ms: expected nothing, the stack sent {got:?}");
        }
    }

    /// Advance virtual time to `ms` step by step (1 ms), letting timers fire, and return
    /// everything sent on the way with the time it was sent.
    pub fn run_to(&mut self, ms: u64) -> Vec<(u64, Sent)> {
        let mut out = vec![];
        let mut t = (self.now - self.start).as_millis() as u64;
        while t < ms {
            t += 1;
            self.at(t);
            self.collect();
            while let Some(s) = self.pending.pop_front() {
                out.push((t, s));
            }
        }
        out
    }

    /// Drop whatever the stack sent and was not expected.
    pub fn discard(&mut self) {
        self.collect();
        self.pending.clear();
    }

    /// Complete a passive open on `port`: the peer's SYN (with the given options), the
    /// stack's SYN-ACK, the peer's ACK; returns the accepted handle.
    pub fn accept_with(&mut self, listener: ackclock::ListenerHandle, syn: Seg) -> ackclock::TcpHandle {
        let ts = syn.ts;
        self.inject(self.ms(), syn.clone().seq(PEER_ISS));
        let synack = self.expect(self.ms(), seg("S.").any_options().ack(PEER_ISS + 1));
        let mut ack = seg(".").seq(PEER_ISS + 1).ack(1).win(syn.win.unwrap_or(65535));
        if let (Some((v, _)), Some((sv, _))) = (ts, synack.ts) {
            ack = ack.ts(v + 1, sv);
        }
        self.inject(self.ms(), ack);
        self.stack.tcp_accept(listener).expect("accept after the handshake")
    }

    /// Milliseconds since the start.
    pub fn ms(&self) -> u64 {
        (self.now - self.start).as_millis() as u64
    }
}

#[track_caller]
fn check(ms: u64, want: &Seg, got: &Sent) {
    let ctx = || format!("at {ms} ms: expected {want:?}\n                 got {got:?}");
    assert_eq!(want.flags, got.flags, "flags: {}", ctx());
    if let Some(s) = want.seq {
        assert_eq!(s, got.seq, "seq: {}", ctx());
    }
    if let Some(a) = want.ack {
        assert_eq!(a, got.ack, "ack: {}", ctx());
    }
    // An exact expectation states the window: a wrong window is as wrong as a wrong ACK
    // (receiver SWS avoidance, scaling, a window never withdrawn). Only a loose one
    // (`any_options`) may leave it out.
    match want.win {
        Some(w) => assert_eq!(w, got.win, "window: {}", ctx()),
        None => assert!(want.any_options, "an exact expectation must state the window (.win), {}", ctx()),
    }
    assert_eq!(want.len, got.len, "payload length: {}", ctx());
    assert_eq!(want.urgent, got.urgent, "urgent pointer: {}", ctx());
    if want.any_options {
        return;
    }
    assert_eq!(want.mss, got.mss, "MSS option: {}", ctx());
    assert_eq!(want.ws, got.ws, "window scale option: {}", ctx());
    assert_eq!(want.sack_ok, got.sack_ok, "SACK-permitted option: {}", ctx());
    match (want.ts, got.ts) {
        (None, None) => {}
        (Some((v, e)), Some((gv, ge))) => {
            if v != ANY {
                assert_eq!(v, gv, "TSval: {}", ctx());
            }
            if e != ANY {
                assert_eq!(e, ge, "TSecr: {}", ctx());
            }
        }
        _ => panic!("timestamps option: {}", ctx()),
    }
    // SACK blocks are given in the peer's absolute numbers (they describe peer data).
    assert_eq!(want.sack, got.sack, "SACK blocks: {}", ctx());
}

impl Script {
    /// Let the stack run at the current time and return everything it sent that no `expect`
    /// has consumed yet, in order (for tests where several connections answer at once and
    /// their relative order is not part of the behaviour under test).
    pub fn sent_now(&mut self) -> Vec<Sent> {
        self.collect();
        self.pending.drain(..).collect()
    }
}

/// A router on the link (for ICMP errors about our own packets).
pub const ROUTER: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 254);
pub const ROUTER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xfe]);
/// The stack's MAC (`InterfaceConfig::new` derives it from LOCAL).
pub const LOCAL_MAC: EthernetAddress = EthernetAddress([0x02, 0xac, 192, 168, 0, 1]);

/// A frame from ROUTER to LOCAL carrying the ICMP message `icmp` (type, code, a zero
/// checksum, the rest), its checksum filled in.
pub fn icmp_from_router(mut icmp: Vec<u8>) -> Vec<u8> {
    icmp[2..4].fill(0);
    let sum = !ackclock::wire::checksum::sum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut f = vec![0u8; 14 + 20 + icmp.len()];
    EthernetRepr { src_addr: ROUTER_MAC, dst_addr: LOCAL_MAC, ethertype: EtherType::IPV4, vlan_id: None }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..14]));
    Ipv4Repr::new(ROUTER, LOCAL, IpProtocol::ICMP, icmp.len())
        .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]), true);
    f[34..].copy_from_slice(&icmp);
    f
}
