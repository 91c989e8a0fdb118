//! Segmentation offload in software, around any device: what a NIC or the kernel does with
//! a TCP/IPv4 frame marked [`Flags::GSO_TCPV4`], done here for a device that cannot.
//!
//! The stack then builds one frame of many MSS and pays its per-frame costs (headers,
//! checksum bookkeeping, ring slots, the device call) once; the wrapper cuts it at
//! `gso_size` into ordinary segments, each with its own IPv4 length, identification and
//! checksum, TCP sequence number and checksum, FIN and PSH only on the last piece and CWR only
//! on the first (as Linux's `tcp_gso_segment`). Each piece costs one copy of its payload,
//! summed during the copy. Other frames pass untouched: this completes no checksum of a
//! frame it does not cut, so it does not claim `tx_checksum` (with which the stack marks
//! every data segment [`Flags::CSUM_PARTIAL`], not only the ones to cut).
//!
//! It serves devices without offload (the pipe, the simulator) in tests of the stack's
//! offload path, and is the reference for what the stack expects a device to do.

use super::{Batch, Capabilities, Device, DeviceStats};
use crate::buf::{Flags, PBuf, Pool, PoolConfig};
use crate::time::Instant;
use crate::wire::{checksum, EtherType, EthernetFrame, IpProtocol, Ipv4Packet, TcpFlags, TcpPacket};
use core::net::Ipv4Addr;

/// Largest IP packet a frame to be cut may be.
pub const GSO_MAX: usize = 65535;

/// Counters of the software offload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GsoStats {
    /// Frames cut into segments.
    pub gso_frames: u64,
    /// Segments those frames became.
    pub segments: u64,
    /// Frames dropped: malformed offload metadata, or the wrapper's pool was empty.
    pub dropped: u64,
}

/// Cuts offload frames into wire segments from a pool of its own: the part of [`SoftGso`]
/// that [`Impaired`](super::Impaired) also uses, so that impairments act per segment.
#[derive(Debug)]
pub struct Segmenter {
    pool: Pool,
    stats: GsoStats,
    /// Frames start with an Ethernet header (else with the IPv4 header: a TUN's link).
    ethernet: bool,
}

impl Segmenter {
    /// Pieces of at most `max_frame` bytes, `buffers` of them in use at once.
    pub fn new(max_frame: usize, buffers: usize) -> Segmenter {
        let config = PoolConfig { buffers: buffers.max(1), buffer_size: max_frame.max(64), headroom: 0 };
        // Cannot fail for a nonzero count of buffers below 4 GiB each.
        let pool = Pool::new(config).unwrap_or_else(|e| panic!("gso pool: {e}"));
        Segmenter { pool, stats: GsoStats::default(), ethernet: true }
    }

    /// Pieces for the frames of a device with `caps`: of its largest frame, with or without
    /// an Ethernet header as it has one.
    pub fn for_link(caps: &Capabilities, buffers: usize) -> Segmenter {
        Segmenter { ethernet: caps.ethernet, ..Segmenter::new(caps.max_frame(), buffers) }
    }

    /// Counters of the frames cut so far.
    pub fn stats(&self) -> GsoStats {
        self.stats
    }

    /// How many frames `frame` becomes: its payload length divided by `gso_size`, rounded up
    /// (at least 1), or 1 if it is not a GSO_TCPV4 frame that can be cut.
    pub fn pieces(&self, frame: &PBuf) -> usize {
        let mss = frame.meta.gso_size as usize;
        match Headers::parse(frame, self.ethernet) {
            Some(h) if frame.meta.flags.contains(Flags::GSO_TCPV4) && mss > 0 => piece_count(frame.len() - h.end, mss),
            _ => 1,
        }
    }

    /// Hand `push` what `frame` becomes on the wire: its segments if it is marked
    /// GSO_TCPV4, else the frame itself. A malformed one is dropped and counted.
    pub fn cut(&mut self, frame: PBuf, mut push: impl FnMut(PBuf)) {
        if !frame.meta.flags.contains(Flags::GSO_TCPV4) {
            push(frame);
        } else if self.segment(&frame, &mut push).is_none() {
            self.stats.dropped += 1;
        }
    }

    /// Cut a TCP/IPv4 frame at `gso_size`.
    fn segment(&mut self, frame: &PBuf, push: &mut impl FnMut(PBuf)) -> Option<()> {
        let h = Headers::parse(frame, self.ethernet)?;
        let data = frame.data();
        let mss = frame.meta.gso_size as usize;
        if mss == 0 {
            return None;
        }
        let payload = &data[h.end..];
        let count = piece_count(payload.len(), mss);
        // Each piece gets a correct checksum below; when the frame's was vouched for (left to
        // the device on transmit, verified by a TAP on receive), the receiving stack need not
        // sum the piece again. On transmit the flag is harmless: the sum is in the header.
        let vouched = frame.meta.flags.contains(Flags::CSUM_PARTIAL) || frame.meta.flags.contains(Flags::CSUM_VERIFIED);
        let verified = if vouched { Flags::CSUM_VERIFIED } else { Flags::empty() };
        self.stats.gso_frames += 1;
        for (k, chunk) in payload.chunks(mss).chain(payload.is_empty().then_some(&[][..])).enumerate() {
            let mut piece = self.pool.alloc().ok()?;
            piece.meta.flags = verified;
            let bytes = piece.append(h.end + chunk.len()).ok()?;
            bytes[..h.end].copy_from_slice(&data[..h.end]);
            let payload_sum = checksum::copy_and_sum(&mut bytes[h.end..], chunk);
            let last = k + 1 == count;
            h.rewrite(bytes, (k * mss) as u32, k as u16, last, k == 0, payload_sum);
            self.stats.segments += 1;
            push(piece);
        }
        Some(())
    }
}

/// How many pieces `payload` bytes after the headers become when cut at `mss` (nonzero):
/// a frame without payload is still one.
fn piece_count(payload: usize, mss: usize) -> usize {
    payload.div_ceil(mss).max(1)
}

/// A device wrapper that segments in software; see the [module docs](self).
#[derive(Debug)]
pub struct SoftGso<D> {
    inner: D,
    cutter: Segmenter,
    /// Segments waiting for the inner device (it pushed back).
    out: Batch,
    /// Frames dropped because the inner device's queue could not take their pieces.
    dropped: u64,
}

impl<D: Device> SoftGso<D> {
    /// Wrap `inner`; the pieces come from a pool of `buffers` MTU-sized buffers of its own.
    pub fn new(inner: D, buffers: usize) -> SoftGso<D> {
        let cutter = Segmenter::for_link(&inner.capabilities(), buffers);
        SoftGso { inner, cutter, out: Batch::with_capacity(buffers.max(1)), dropped: 0 }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Counters of the cutting, with the frames the wrapped device could not take counted as dropped.
    pub fn gso_stats(&self) -> GsoStats {
        let mut s = self.cutter.stats();
        s.dropped += self.dropped;
        s
    }
}

/// Where the headers of an offload frame are.
#[derive(Debug, Clone, Copy)]
struct Headers {
    /// IPv4 header start.
    ip: usize,
    /// TCP header start; `end` is where the payload starts.
    tcp: usize,
    end: usize,
    src: Ipv4Addr,
    dst: Ipv4Addr,
}

impl Headers {
    /// An Ethernet frame (or, without `ethernet`, a bare packet) with IPv4 and TCP; if it is
    /// marked CSUM_PARTIAL, the TCP header at `csum_start` and its checksum field at
    /// `csum_offset` 16, as the stack marks them.
    fn parse(frame: &PBuf, ethernet: bool) -> Option<Headers> {
        let link = if ethernet {
            let eth = EthernetFrame::new_checked(frame.data()).ok()?;
            (eth.ethertype() == EtherType::IPV4).then_some(eth.header_len())?
        } else {
            0
        };
        let ip = Ipv4Packet::new_checked(&frame.data()[link..]).ok()?;
        let tcp = TcpPacket::new_checked(ip.payload()).ok().filter(|_| ip.protocol() == IpProtocol::TCP)?;
        let at = link + ip.header_len();
        // Only a frame whose checksum is left to the device says where the TCP header is: a
        // received one marked CSUM_VERIFIED (a TAP's DATA_VALID) has csum_start 0.
        let m = &frame.meta;
        if m.flags.contains(Flags::CSUM_PARTIAL) && (m.csum_start as usize != at || m.csum_offset != 16) {
            return None;
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        Some(Headers { ip: link, tcp: at, end: at + tcp.header_len(), src, dst })
    }

    /// Fix up the headers copied into `b`, which ends where the piece's payload does, for
    /// the piece `seq_off` bytes into the payload, whose payload sums to `payload_sum`.
    fn rewrite(&self, b: &mut [u8], seq_off: u32, id_off: u16, last: bool, first: bool, payload_sum: u16) {
        let total = (b.len() - self.ip) as u16;
        let mut ip = Ipv4Packet::new_unchecked(&mut b[self.ip..]);
        ip.set_total_len(total);
        ip.set_ident(ip.ident().wrapping_add(id_off));
        ip.fill_checksum();

        let mut tcp = TcpPacket::new_unchecked(&mut b[self.tcp..]);
        tcp.set_seq_number(tcp.seq_number().wrapping_add(seq_off));
        let mut flags = tcp.flags();
        if !last {
            flags &= !(TcpFlags::FIN | TcpFlags::PSH);
        }
        if !first {
            flags &= !TcpFlags::CWR;
        }
        tcp.set_flags(flags);
        tcp.fill_checksum_with_payload_sum(self.src, self.dst, payload_sum);
    }
}

impl<D: Device> Device for SoftGso<D> {
    /// The inner device's, plus segmentation offload.
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.inner.capabilities();
        caps.tso_max = GSO_MAX;
        caps
    }

    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize {
        self.inner.receive(now, rx)
    }

    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize {
        let mut sent = self.inner.transmit(now, &mut self.out);
        // Cut a frame only when all its pieces fit; the rest waits in `tx`.
        while let Some(frame) = tx.pop() {
            let need = self.cutter.pieces(&frame);
            if need > self.out.capacity() {
                // More pieces than the wrapper holds at once (a tiny gso_size): refused.
                self.dropped += 1;
                continue;
            }
            if self.out.remaining() < need {
                sent += self.inner.transmit(now, &mut self.out);
                if self.out.remaining() < need {
                    let _ = tx.push_front(frame); // cannot fail: it was just popped
                    break;
                }
            }
            let (out, dropped) = (&mut self.out, &mut self.dropped);
            self.cutter.cut(frame, |piece| {
                if out.push(piece).is_err() {
                    *dropped += 1;
                }
            });
        }
        sent + self.inner.transmit(now, &mut self.out)
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phy::{pipe, PipeConfig};

    /// A GSO frame as the stack builds it: Ethernet, IPv4 (id 7), TCP with timestamps
    /// (32 bytes), the checksum field holding the pseudo-header sum.
    fn gso_frame(pool: &Pool, payload: &[u8], mss: u16, flags: u8) -> PBuf {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut f = pool.alloc().unwrap();
        let len = 14 + 20 + 32 + payload.len();
        let b = f.append(len).unwrap();
        b[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut b[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + 32 + payload.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&7u16.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src.octets());
        ip[16..20].copy_from_slice(&dst.octets());
        let tcp = &mut b[34..66];
        tcp[0..2].copy_from_slice(&1234u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&0xffff_f000u32.to_be_bytes());
        tcp[12] = 8 << 4;
        tcp[13] = flags;
        tcp[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        let pseudo = checksum::pseudo_header(src, dst, 6, (32 + payload.len()) as u16);
        tcp[16..18].copy_from_slice(&pseudo.to_be_bytes());
        b[66..].copy_from_slice(payload);
        f.meta.flags.insert(Flags::CSUM_PARTIAL | Flags::GSO_TCPV4);
        f.meta.csum_start = 34;
        f.meta.csum_offset = 16;
        f.meta.gso_size = mss;
        f
    }

    #[test]
    fn cuts_at_gso_size_with_valid_checksums_sequence_numbers_and_flags() {
        let pool = Pool::new(PoolConfig { buffers: 4, buffer_size: 8192, headroom: 64 }).unwrap();
        let (a, mut b) = pipe(PipeConfig::default());
        let mut dev = SoftGso::new(a, 16);
        assert_eq!(dev.capabilities().tso_max, GSO_MAX);
        let payload: Vec<u8> = (0..3500u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut tx = Batch::with_capacity(4);
        // FIN|PSH|ACK|CWR on the big frame.
        tx.push(gso_frame(&pool, &payload, 1448, 0x80 | 0x10 | 0x08 | 0x01)).unwrap();
        dev.transmit(Instant::ZERO, &mut tx);
        let mut rx = Batch::with_capacity(8);
        assert_eq!(b.receive(Instant::ZERO, &mut rx), 3);
        let mut got = Vec::new();
        for (k, f) in rx.iter().enumerate() {
            let want = [1448, 1448, 604][k];
            let (tcp, total_len) = check_piece(f, k, want);
            assert_eq!(total_len, 20 + 32 + want);
            // CWR only on the first piece, FIN and PSH only on the last.
            assert_eq!(tcp.flags().bits(), [0x90, 0x10, 0x19][k], "piece {k} flags");
            got.extend_from_slice(tcp.payload());
        }
        assert_eq!(got, payload);
        assert_eq!(dev.gso_stats(), GsoStats { gso_frames: 1, segments: 3, dropped: 0 });
    }

    /// Without an Ethernet header (a TUN's link) the IPv4 header is at byte 0 and the TCP
    /// header at `csum_start` 20; the pieces are cut the same way, with no link header.
    #[test]
    fn cuts_frames_without_link_header() {
        let pool = Pool::new(PoolConfig { buffers: 4, buffer_size: 8192, headroom: 64 }).unwrap();
        let payload: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let mut f = gso_frame(&pool, &payload, 1448, 0x10);
        f.trim_front(14).unwrap();
        f.meta.csum_start = 20;
        let mut cutter = Segmenter::for_link(&Capabilities::ip(1500), 8);
        assert_eq!(cutter.pieces(&f), 3);
        let mut pieces = Vec::new();
        cutter.cut(f, |p| pieces.push(p));
        let mut got = Vec::new();
        for (k, p) in pieces.iter().enumerate() {
            let ip = Ipv4Packet::new_checked(p.data()).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(ip.total_len() as usize, p.len(), "piece {k} is one IPv4 packet");
            let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
            assert!(tcp.verify_checksum(ip.src_addr(), ip.dst_addr()));
            assert_eq!(tcp.seq_number(), 0xffff_f000u32.wrapping_add(1448 * k as u32));
            got.extend_from_slice(tcp.payload());
        }
        assert_eq!(got, payload);
        assert_eq!(cutter.stats(), GsoStats { gso_frames: 1, segments: 3, dropped: 0 });
    }

    /// Piece `k` of `gso_frame`'s frame: valid IPv4 and TCP checksums, the IP ident and the
    /// sequence number of the k-th piece, `len` payload bytes. Returns its TCP segment and
    /// the IPv4 total length.
    #[track_caller]
    fn check_piece(f: &PBuf, k: usize, len: usize) -> (TcpPacket<&[u8]>, usize) {
        let ip = Ipv4Packet::new_checked(&f.data()[14..]).unwrap();
        assert!(ip.verify_checksum(), "piece {k}: IPv4 checksum");
        assert_eq!(ip.ident(), 7 + k as u16);
        let (src, dst, total_len) = (ip.src_addr(), ip.dst_addr(), ip.total_len() as usize);
        let tcp = TcpPacket::new_checked(&f.data()[14 + 20..14 + total_len]).unwrap();
        assert!(tcp.verify_checksum(src, dst), "piece {k}: TCP checksum");
        assert_eq!(tcp.seq_number(), 0xffff_f000u32.wrapping_add(1448 * k as u32));
        assert_eq!(tcp.payload().len(), len);
        (tcp, total_len)
    }

    /// A TAP's coalesced receive with DATA_VALID: GSO_TCPV4 and CSUM_VERIFIED, csum_start and
    /// csum_offset 0, the checksum field as the sender's last segment left it.
    fn received_gso_frame(pool: &Pool, payload: &[u8], mss: u16) -> PBuf {
        let mut f = gso_frame(pool, payload, mss, 0x10);
        f.meta.flags = Flags::GSO_TCPV4 | Flags::CSUM_VERIFIED;
        f.meta.csum_start = 0;
        f.meta.csum_offset = 0;
        f.data_mut().unwrap()[34 + 16..34 + 18].copy_from_slice(&[0xab, 0xcd]);
        f
    }

    #[test]
    fn received_gso_frame_with_verified_checksum_is_cut() {
        let pool = Pool::new(PoolConfig { buffers: 4, buffer_size: 8192, headroom: 64 }).unwrap();
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 13 % 251) as u8).collect();
        let mut cutter = Segmenter::new(1514, 8);
        let mut pieces = Vec::new();
        cutter.cut(received_gso_frame(&pool, &payload, 1448), |p| pieces.push(p));
        assert_eq!(pieces.len(), 3);
        let mut got = Vec::new();
        for (k, f) in pieces.iter().enumerate() {
            let (tcp, _) = check_piece(f, k, [1448, 1448, 1104][k]);
            got.extend_from_slice(tcp.payload());
        }
        assert_eq!(got, payload);
        assert_eq!(cutter.stats(), GsoStats { gso_frames: 1, segments: 3, dropped: 0 });
    }

    /// Pieces keep the frame's checksum status: verified when the frame's checksum was
    /// verified (receive) or left to the device (transmit), not when nobody vouched for it.
    #[test]
    fn pieces_are_checksum_verified_when_the_frame_was() {
        let pool = Pool::new(PoolConfig { buffers: 4, buffer_size: 8192, headroom: 64 }).unwrap();
        let mut cutter = Segmenter::new(1514, 8);
        let unvouched = {
            let mut f = received_gso_frame(&pool, &[5; 3000], 1448);
            f.meta.flags.remove(Flags::CSUM_VERIFIED);
            f
        };
        let frames = [
            (received_gso_frame(&pool, &[5; 3000], 1448), true),
            (gso_frame(&pool, &[5; 3000], 1448, 0x10), true),
            (unvouched, false),
        ];
        for (i, (frame, want)) in frames.into_iter().enumerate() {
            let mut pieces = Vec::new();
            cutter.cut(frame, |p| pieces.push(p));
            assert_eq!(pieces.len(), 3, "frame {i}");
            for (k, p) in pieces.iter().enumerate() {
                assert_eq!(p.meta.flags.contains(Flags::CSUM_VERIFIED), want, "frame {i} piece {k}");
                assert!(!p.meta.flags.contains(Flags::CSUM_PARTIAL), "frame {i} piece {k}: sum is complete");
                assert!(!p.meta.flags.contains(Flags::GSO_TCPV4), "frame {i} piece {k}: already cut");
            }
        }
    }

    #[test]
    fn piece_count_is_the_number_of_pieces_cut() {
        let pool = Pool::new(PoolConfig { buffers: 4, buffer_size: 8192, headroom: 64 }).unwrap();
        let mut cutter = Segmenter::new(1514, 8);
        // No payload, one byte, one MSS, two exact MSS, a remainder, four MSS and a byte.
        for (len, want) in [(0, 1), (1, 1), (1448, 1), (2896, 2), (3000, 3), (5793, 5)] {
            let frame = gso_frame(&pool, &vec![3; len], 1448, 0x10);
            let count = cutter.pieces(&frame);
            let mut pieces = Vec::new();
            cutter.cut(frame, |p| pieces.push(p));
            assert_eq!(pieces.len(), want, "payload {len}");
            assert_eq!(count, pieces.len(), "payload {len}");
        }
    }

    #[test]
    fn malformed_offload_metadata_is_a_counted_drop() {
        let pool = Pool::new(PoolConfig { buffers: 4, buffer_size: 8192, headroom: 64 }).unwrap();
        let (a, mut b) = pipe(PipeConfig::default());
        let mut dev = SoftGso::new(a, 16);
        let mut tx = Batch::with_capacity(4);
        let mut f = gso_frame(&pool, &[0; 3000], 1448, 0x10);
        f.meta.csum_start = 20; // not where the TCP header is
        tx.push(f).unwrap();
        let mut f = gso_frame(&pool, &[0; 3000], 0, 0x10);
        f.meta.gso_size = 0;
        tx.push(f).unwrap();
        dev.transmit(Instant::ZERO, &mut tx);
        let mut rx = Batch::with_capacity(8);
        assert_eq!(b.receive(Instant::ZERO, &mut rx), 0);
        assert_eq!(dev.gso_stats().dropped, 2);
    }
}
