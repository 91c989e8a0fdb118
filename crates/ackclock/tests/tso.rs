//! TCP segmentation offload: the sender queues segments of many MSS and hands each to the
//! device as one frame marked GSO_TCPV4, which the device (here `phy::SoftGso`, doing what
//! a TAP's kernel side does) cuts into MSS-sized segments. The receiver is an ordinary stack.

mod common;

use ackclock::buf::{Flags, PoolConfig};
use ackclock::phy::{pipe, Device, Impaired, Impairment, PipeConfig, PipeEnd, SoftGso};
use ackclock::sim::link::Loss;
use ackclock::tcp::trace::Event;
use ackclock::time::{Duration, Instant};
use ackclock::wire::{checksum, EthernetFrame, Ipv4Packet, TcpPacket};
use ackclock::{Error, Shutdown, Stack, TcpHandle};
use common::{config, A, B};
use sha2::{Digest, Sha256};
use std::net::SocketAddrV4;

type Sender = SoftGso<Impaired<PipeEnd>>;

/// Stack A (offload, 64 KiB buffers) sends to stack B (plain) over a pipe; A's segments
/// cross `Impaired` after they are cut, so a loss takes one MSS, as on a wire.
struct Rig {
    a: Stack,
    b: Stack,
    da: Sender,
    db: PipeEnd,
    now: Instant,
}

impl Rig {
    fn new(loss: f64, seed: u64) -> Rig {
        let (pa, db) = pipe(PipeConfig { depth: 8192, ..Default::default() });
        let imp =
            Impairment { loss: if loss > 0.0 { Loss::Bernoulli(loss) } else { Loss::None }, ..Default::default() };
        let da = SoftGso::new(Impaired::new(pa, imp, Impairment::default(), seed, 8192), 4096);
        let now = Instant::from_secs(1);
        let mut ca = config(A, 1);
        ca.pool = PoolConfig { buffers: 512, buffer_size: 65536 + 256, headroom: 160 };
        // A send buffer of one window, as these bounds were measured with. With two windows
        // queued (the default) a window-limited sender cuts more units: 143 of 1,339 frames
        // in the 64 MB transfer below.
        ca.tcp.send_buffer = 256 * 1024;
        let a = Stack::new(ca, da.capabilities(), now).unwrap();
        let b = Stack::new(config(B, 2), db.capabilities(), now).unwrap();
        Rig { a, b, da, db, now }
    }

    fn step(&mut self, app: &mut impl FnMut(&mut Rig) -> bool) -> bool {
        self.a.receive(self.now, &mut self.da);
        self.b.receive(self.now, &mut self.db);
        let done = app(self);
        self.a.transmit(self.now, &mut self.da);
        self.b.transmit(self.now, &mut self.db);
        if self.db.pending() > 0 || self.da.inner().inner().pending() > 0 {
            self.now += Duration::from_micros(10);
        } else {
            let next = [self.a.poll_at(), self.b.poll_at(), self.da.poll_at()].into_iter().flatten().min();
            self.now = match next {
                Some(t) if t > self.now => t,
                _ => self.now + Duration::from_micros(10),
            };
        }
        done
    }

    fn run_until(&mut self, limit: Duration, mut app: impl FnMut(&mut Rig) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if self.step(&mut app) {
                return true;
            }
        }
        false
    }

    fn connect(&mut self) -> (TcpHandle, TcpHandle) {
        let l = self.b.tcp_listen(SocketAddrV4::new(B, 5001), 4).unwrap();
        let c = self.a.tcp_connect(SocketAddrV4::new(B, 5001)).unwrap();
        let mut s = None;
        assert!(self.run_until(Duration::from_secs(5), |r| {
            s = s.or_else(|| r.b.tcp_accept(l).ok());
            s.is_some() && r.a.tcp_readiness(c).unwrap().writable
        }));
        (c, s.unwrap())
    }

    /// Send `len` pattern bytes A to B and close; returns the SHA-256 of both sides.
    fn transfer(&mut self, len: usize) -> ([u8; 32], [u8; 32]) {
        let (c, s) = self.connect();
        let data: Vec<u8> = (0..len as u64).map(|i| ((i * 2654435761) >> 13) as u8).collect();
        let (mut sent, mut shut) = (0, false);
        let mut rx = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        assert!(self.run_until(Duration::from_secs(600), |r| {
            while sent < data.len() {
                match r.a.tcp_send(c, &data[sent..]) {
                    Ok(n) => sent += n,
                    Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => break,
                    Err(e) => panic!("send: {e}"),
                }
            }
            if sent == data.len() && !shut {
                r.a.tcp_shutdown(c, Shutdown::Write).unwrap();
                shut = true;
            }
            loop {
                match r.b.tcp_recv(s, &mut buf) {
                    Ok(0) => return true,
                    Ok(n) => rx.update(&buf[..n]),
                    Err(Error::WouldBlock) => return false,
                    Err(e) => panic!("recv: {e}"),
                }
            }
        }));
        self.b.tcp_close(s).unwrap();
        self.a.tcp_close(c).unwrap();
        assert!(
            self.run_until(Duration::from_secs(120), |r| r.a.tcp().connections() == 0 && r.b.tcp().connections() == 0)
        );
        (Sha256::digest(&data).into(), rx.finalize().into())
    }
}

/// The first flight after the handshake, frame by frame: IW10 (RFC 6928) = 14480 bytes in
/// units of a third of cwnd (3 MSS, as Linux sizes TSO units by `tcp_xmit_size_goal`), each
/// a GSO_TCPV4 frame with `gso_size` = MSS less the timestamp option and the pseudo-header
/// sum in the checksum field for the device to complete (virtio-net NEEDS_CSUM). The fourth
/// unit does not fit the window; the ACK of the first is more than half an RTT away, so it
/// is cut (the front copied) rather than held (Linux's `tcp_tso_should_defer`).
#[test]
fn first_flight_is_three_offload_frames_and_one_cut_segment() {
    let mut r = Rig::new(0.0, 1);
    let (c, _s) = r.connect();
    assert_eq!(r.a.tcp_send(c, &[7u8; 30000]).unwrap(), 30000);
    r.a.dispatch(r.now);
    let frames: Vec<_> = r.a.tx_ring().iter().map(|f| f.share()).collect();
    let mut seen = Vec::new();
    for f in &frames {
        let eth = EthernetFrame::new_checked(f.data()).unwrap();
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum());
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        let gso = f.meta.flags.contains(Flags::GSO_TCPV4);
        if gso {
            assert!(f.meta.flags.contains(Flags::CSUM_PARTIAL));
            assert_eq!((f.meta.csum_start, f.meta.csum_offset, f.meta.gso_size), (34, 16, 1448));
            let pseudo = checksum::pseudo_header(A, B, 6, ip.payload().len() as u16);
            assert_eq!(tcp.checksum(), pseudo, "the device completes the checksum from the pseudo-header sum");
        } else {
            assert!(tcp.verify_checksum(A, B));
        }
        assert_eq!(tcp.header_len(), 32, "timestamps only: no SACK blocks in a unit's header");
        seen.push((gso, tcp.payload().len()));
    }
    assert_eq!(seen, [(true, 4344), (true, 4344), (true, 4344), (false, 1448)]);
    assert_eq!(r.a.counters().tx_splits, 1);
    // Counted as the segments the device sends.
    assert_eq!(r.a.tcp_info(c).unwrap().stats.segs_out, 2 + 10);
}

/// Linux behaviour (the send buffer charges an skb's truesize, the memory it holds), no RFC
/// rule. Early in a connection a unit is a third of cwnd (3 MSS), so each 64 KiB buffer of
/// the send queue holds 4,344 bytes; a write of a whole 256 KiB send buffer used to take 61
/// of them (charged 256 bytes each), and once reused at full size they held 4 MB for a
/// 256 KiB buffer. Each unsent segment but the tail (which the next write would fill) is
/// charged at least half its buffer, so the queue takes nine buffers, about twice the send
/// buffer, and the write stops there. Once the first flight is sent, its units (cut into
/// MSS-sized entries that share their buffers) cost their bytes, and the writer may write
/// again, told so by the connection's event: charged per entry, 14,480 bytes in flight
/// would have cost fifteen half-buffers and kept it blocked.
#[test]
fn unsent_small_units_are_charged_half_their_buffer() {
    let mut r = Rig::new(0.0, 1);
    let (c, _s) = r.connect();
    let (free, size) = (r.a.pool().available(), r.a.pool().buffer_size());
    let queued = r.a.tcp_send(c, &[7u8; 256 * 1024]).unwrap();
    let held = free - r.a.pool().available();
    // Eight are charged their 34,752 bytes and 7 x (32,896 - 4,344) more, 234,616: a ninth
    // fits, and nine (267,512) fill the 262,144.
    assert_eq!((size, held), (65792, 9));
    assert!(held * size <= 2 * 256 * 1024 + 2 * size);
    assert_eq!(queued, held * 4344, "one unit of 3 MSS per buffer");
    assert!(!r.a.tcp_readiness(c).unwrap().writable);
    assert_eq!(r.a.tcp_send(c, &[7u8; 1000]), Err(Error::WouldBlock));

    // IW10: three units and the front of a fourth go out (as in the test above). Sending
    // opened the room, so the connection's event says so (a sleeping writer hears of it
    // now, not at the next ACK).
    while r.a.poll_event().is_some() {}
    r.a.dispatch(r.now);
    assert_eq!(r.a.tcp_info(c).unwrap().stats.segs_out, 2 + 10);
    assert!(r.a.tcp_readiness(c).unwrap().writable, "sent pieces cost their bytes");
    assert_eq!(r.a.poll_event(), Some(ackclock::Event::Tcp(c)));
    assert!(r.a.tcp_send(c, &[7u8; 4344]).unwrap() > 0);
}

/// 64 MB with SHA-256 over a clean link: nearly all data leaves in large offload frames, and
/// windows rarely cut a unit (each cut copies its front): under 5% of frames (35 of 1566
/// when this was written).
#[test]
fn bulk_transfer_over_offload_is_byte_exact_with_large_frames() {
    let mut r = Rig::new(0.0, 1);
    let (want, got) = r.transfer(64 << 20);
    assert_eq!(want, got);
    let g = r.da.gso_stats();
    let per_frame = g.segments as f64 / g.gso_frames as f64;
    eprintln!("gso {g:?}, {per_frame:.1} segments per frame, splits {}", r.a.counters().tx_splits);
    assert!(per_frame >= 20.0, "{per_frame:.1} segments per offload frame");
    assert!(g.segments >= (64 << 20) / 1448 * 95 / 100, "{g:?}");
    assert!(r.a.counters().tx_splits * 20 <= g.gso_frames, "splits {} for {g:?}", r.a.counters().tx_splits);
    assert_eq!(r.a.counters().retransmitted, 0);
    assert_eq!(g.dropped, 0);
    assert_eq!(r.a.pool().available(), r.a.pool().capacity());
    assert_eq!(r.b.pool().available(), r.b.pool().capacity());
}

/// Loss after segmentation: a unit was sliced into MSS-sized queue entries when it was sent,
/// so SACK recovery retransmits single segments (each in a buffer of its own: a copy) and
/// the stream arrives byte-exact.
#[test]
fn losses_after_segmentation_are_repaired_per_segment() {
    for seed in 1..=3 {
        let mut r = Rig::new(0.02, seed);
        r.a.set_tracing(true);
        let (want, got) = r.transfer(16 << 20);
        assert_eq!(want, got, "seed {seed}");
        let c = *r.a.counters();
        assert!(c.retransmitted > 0, "seed {seed}: 2% loss must cost retransmissions");
        // Every retransmission resends one MSS or less, never a whole unit.
        let trace = r.a.take_trace();
        let resent: Vec<u32> = trace
            .iter()
            .filter_map(|rec| match rec.event {
                Event::Sent { len, retransmit: true, .. } => Some(len),
                _ => None,
            })
            .collect();
        assert_eq!(resent.len() as u64, c.retransmitted);
        assert!(resent.iter().all(|&len| len <= 1448), "seed {seed}: {resent:?}");
        let units = trace.iter().filter(|rec| matches!(rec.event, Event::Sent { len, .. } if len > 1448)).count();
        assert!(units > 100, "seed {seed}: only {units} offload units sent");
        assert_eq!(r.a.pool().available(), r.a.pool().capacity());
        assert_eq!(r.b.pool().available(), r.b.pool().capacity());
    }
}

/// `Impaired::cut_offload`: with the impairment in front of the segmentation (as around a
/// TAP, where the kernel cuts), offload frames are cut before the loss draw, so 2% loss
/// takes single segments; the stream still arrives byte-exact, and the wrapper cut every
/// unit the stack sent.
#[test]
fn impairment_cuts_offload_frames_before_losing_segments() {
    let (pa, mut db) = pipe(PipeConfig { depth: 8192, ..Default::default() });
    let imp = Impairment { loss: Loss::Bernoulli(0.02), ..Default::default() };
    let mut da = Impaired::new(SoftGso::new(pa, 4096), imp, Impairment::default(), 9, 8192).cut_offload(8192);
    let mut now = Instant::from_secs(1);
    let mut ca = config(A, 1);
    ca.pool = PoolConfig { buffers: 512, buffer_size: 65536 + 256, headroom: 160 };
    let mut a = Stack::new(ca, da.capabilities(), now).unwrap();
    let mut b = Stack::new(config(B, 2), db.capabilities(), now).unwrap();
    a.set_tracing(true);
    let l = b.tcp_listen(SocketAddrV4::new(B, 5001), 4).unwrap();
    let c = a.tcp_connect(SocketAddrV4::new(B, 5001)).unwrap();
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i.wrapping_mul(2246822519) >> 9) as u8).collect();
    let (mut s, mut sent, mut got, mut shut) = (None, 0, Vec::new(), false);
    let mut buf = vec![0u8; 1 << 16];
    let end = now + Duration::from_secs(120);
    let mut done = false;
    while now < end && !done {
        a.receive(now, &mut da);
        b.receive(now, &mut db);
        s = s.or_else(|| b.tcp_accept(l).ok());
        while sent < data.len() {
            match a.tcp_send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        if sent == data.len() && !shut {
            shut = a.tcp_shutdown(c, Shutdown::Write).is_ok();
        }
        if let Some(s) = s {
            loop {
                match b.tcp_recv(s, &mut buf) {
                    Ok(0) => {
                        done = true;
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(_) => break,
                }
            }
        }
        a.transmit(now, &mut da);
        b.transmit(now, &mut db);
        let next = [a.poll_at(), b.poll_at(), da.poll_at()].into_iter().flatten().min();
        now = match next {
            _ if db.pending() > 0 || da.inner().inner().pending() > 0 => now + Duration::from_micros(10),
            Some(t) if t > now => t,
            _ => now + Duration::from_micros(10),
        };
    }
    assert!(done && got == data, "{} of {} bytes", got.len(), data.len());
    let cut = da.cut_stats();
    let (tx, _) = da.impair_stats();
    // Every unit the stack sent was cut before the draw (nothing was left for the device to
    // cut), and the wrapper lost about 2% of the segments.
    let units = a.take_trace().iter().filter(|r| matches!(r.event, Event::Sent { len, .. } if len > 1448)).count();
    assert!(units > 100, "{units} units");
    assert_eq!(cut.gso_frames, units as u64, "{cut:?}");
    assert_eq!(da.inner().gso_stats().gso_frames, 0, "nothing left for the device to cut");
    let rate = tx.lost as f64 / (tx.lost + tx.passed) as f64;
    assert!((0.01..0.03).contains(&rate), "loss rate {rate} over {tx:?}");
}
