//! Writing a TCP header in front of a segment's payload, with its checksum.
//!
//! Nearly every segment of an open connection carries no option but timestamps; its header
//! is written as the words of Jacobson's header template (1993) with the checksum summed from
//! those words and the payload's cached sum, not built option by option through
//! [`TcpRepr::emit`], which writes the SYN's options and the SACK blocks.

use super::seq::SeqNumber;
use super::tcb::FourTuple;
use crate::buf::{BufError, PBuf};
use crate::iface::{tcp_pseudo_sum, Prebuilt};
use crate::wire::{checksum, IpProtocol, SackBlocks, TcpFlags, TcpPacket, TcpRepr};

/// Fields of an outgoing header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hdr {
    pub seq: SeqNumber,
    pub ack: SeqNumber,
    pub flags: TcpFlags,
    pub window: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub ts: Option<(u32, u32)>,
    pub sack: SackBlocks,
    /// The urgent pointer field, with URG in `flags` (RFC 9293 §3.8.5).
    pub urgent: u16,
}

/// Prepend a TCP header for `tuple` to `buf` (whose data is the payload) and fill the
/// checksum from `payload_sum`, or, with `None`, leave the pseudo-header sum in the field for
/// a device that completes it (Linux's CHECKSUM_PARTIAL convention). Returns the header length.
pub(crate) fn prepend_tcp(
    buf: &mut PBuf,
    tuple: &FourTuple,
    h: &Hdr,
    payload_sum: Option<u16>,
) -> Result<usize, BufError> {
    if is_plain(h) {
        return prepend_tcp_plain(buf, tuple, h, payload_sum);
    }
    prepend_tcp_any(buf, tuple, h, payload_sum)
}

/// [`prepend_tcp`] for any header, through [`TcpRepr::emit`].
#[inline(never)]
fn prepend_tcp_any(buf: &mut PBuf, tuple: &FourTuple, h: &Hdr, payload_sum: Option<u16>) -> Result<usize, BufError> {
    let repr = TcpRepr {
        src_port: tuple.local_port,
        dst_port: tuple.remote_port,
        seq: h.seq.0,
        ack: h.ack.0,
        flags: h.flags,
        window: h.window,
        urgent: h.urgent,
        max_seg_size: h.mss,
        window_scale: h.wscale,
        sack_permitted: h.sack_permitted,
        timestamps: h.ts,
        sack_blocks: h.sack,
        payload: &[],
    };
    let hl = repr.header_len();
    let total = hl + buf.len();
    let bytes = buf.prepend(hl)?;
    let mut pkt = TcpPacket::new_unchecked(bytes);
    repr.emit(&mut pkt, tuple.local_addr, tuple.remote_addr, false);
    let pseudo = tcp_pseudo_sum(tuple.local_addr, tuple.remote_addr, total);
    match payload_sum {
        Some(payload_sum) => {
            let s = checksum::add(checksum::add(pseudo, pkt.header_sum()), checksum::add_at(0, payload_sum, hl));
            pkt.set_checksum(checksum::finish(s));
        }
        None => pkt.set_checksum(pseudo),
    }
    Ok(hl)
}

/// Whether `h` carries no option but timestamps: the header of nearly every segment once a
/// connection is open, which [`prepend_frame`] writes.
#[inline]
pub(crate) fn is_plain(h: &Hdr) -> bool {
    h.mss.is_none() && h.wscale.is_none() && !h.sack_permitted && h.sack.is_empty() && !h.flags.contains(TcpFlags::URG)
}

/// The words of a plain header (see [`is_plain`]), checksum included, and its length: the
/// words Jacobson's header template holds. They are summed as words (a 32-bit big-endian
/// word adds to the ones' complement sum what its two 16-bit halves add), and they are the
/// bytes `TcpRepr::emit` writes for the same fields.
#[inline(always)]
fn plain_words(tuple: &FourTuple, h: &Hdr, payload_len: usize, payload_sum: Option<u16>) -> ([u32; 8], usize) {
    words(tuple, h.seq, h.ack, h.flags, h.window, h.ts, payload_len, payload_sum)
}

/// [`plain_words`] from the fields themselves, for the predicted transmit path
/// (`tcp::fastout`), which keeps them in registers rather than in a [`Hdr`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn words(
    tuple: &FourTuple,
    seq: SeqNumber,
    ack: SeqNumber,
    flags: TcpFlags,
    window: u16,
    ts: Option<(u32, u32)>,
    payload_len: usize,
    payload_sum: Option<u16>,
) -> ([u32; 8], usize) {
    let hl = if ts.is_some() { 32 } else { 20 };
    let ports = (tuple.local_port as u32) << 16 | tuple.remote_port as u32;
    let (seq, ack) = (seq.0, ack.0);
    let off_flags = ((hl as u32 / 4) << 28) | (flags.bits() as u32) << 16 | window as u32;
    let (val, ecr) = ts.unwrap_or((0, 0));
    // The pseudo-header (RFC 9293 §3.1): addresses, protocol, TCP length.
    let pseudo = tuple.local_addr.to_bits() as u64
        + tuple.remote_addr.to_bits() as u64
        + IpProtocol::TCP.0 as u64
        + (hl + payload_len) as u16 as u64;
    let csum = match payload_sum {
        Some(p) => {
            let mut acc = ports as u64 + seq as u64 + ack as u64 + off_flags as u64;
            if ts.is_some() {
                acc += TS_PREFIX as u64 + val as u64 + ecr as u64;
            }
            // The header is a whole number of words: the payload's sum adds unswapped.
            checksum::finish(checksum::fold(acc + pseudo + p as u64))
        }
        // A device completes it from the pseudo-header sum (CHECKSUM_PARTIAL).
        None => checksum::fold(pseudo),
    };
    ([ports, seq, ack, off_flags, (csum as u32) << 16, TS_PREFIX, val, ecr], hl)
}

#[inline(always)]
pub(super) fn write_words(out: &mut [u8], w: &[u32; 8]) {
    if let Ok(o) = <&mut [u8; 32]>::try_from(&mut *out) {
        for (i, w) in w.iter().enumerate() {
            o[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
    } else if let Ok(o) = <&mut [u8; 20]>::try_from(out) {
        for (i, w) in w[..5].iter().enumerate() {
            o[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
    }
}

/// The TCP header of one pass of output, kept as Jacobson's template (1993): the words
/// every segment of the pass repeats (ports, ACK, window, timestamps) and the ones'
/// complement sum of them and of the pseudo-header's addresses and protocol, made once. A
/// segment's header is then the template with its sequence number and the checksum from
/// that sum, its own length and the payload's cached sum.
#[derive(Clone, Copy)]
pub(super) struct Template {
    words: [u32; 8],
    /// Header bytes: 32 with timestamps, 20 without.
    pub hl: usize,
    /// Sum of the constant words and of the pseudo-header without its length.
    sum: u64,
    /// Sum of the pseudo-header without its length alone (for a device to complete).
    pseudo: u64,
}

impl Template {
    /// The template of an ACK-flagged segment (PSH is added per segment) with these fields.
    #[inline(always)]
    pub fn new(tuple: &FourTuple, ack: SeqNumber, window: u16, ts: Option<(u32, u32)>) -> Template {
        let (w, hl) = words(tuple, SeqNumber(0), ack, TcpFlags::ACK, window, ts, 0, None);
        let mut sum = w[0] as u64 + w[2] as u64 + w[3] as u64;
        if ts.is_some() {
            sum += TS_PREFIX as u64 + w[6] as u64 + w[7] as u64;
        }
        let pseudo = tuple.local_addr.to_bits() as u64 + tuple.remote_addr.to_bits() as u64 + IpProtocol::TCP.0 as u64;
        Template { words: w, hl, sum: sum + pseudo, pseudo }
    }

    /// Write the header of a segment of `len` payload bytes whose sum is `payload_sum` at
    /// `seq` (with PSH if `push`) into `out` ([`hl`](Self::hl) bytes): the bytes
    /// [`words`] gives for the same fields (with `None`, the pseudo-header sum for a device
    /// to complete).
    #[inline(always)]
    pub fn write(&self, out: &mut [u8], seq: SeqNumber, push: bool, len: usize, payload_sum: Option<u16>) {
        let mut w = self.words;
        let psh = if push { (TcpFlags::PSH.bits() as u32) << 16 } else { 0 };
        w[1] = seq.0;
        w[3] |= psh;
        let tcp_len = (self.hl + len) as u16 as u64;
        w[4] = match payload_sum {
            Some(p) => {
                let acc = self.sum + seq.0 as u64 + psh as u64 + tcp_len + p as u64;
                (checksum::finish(checksum::fold(acc)) as u32) << 16
            }
            None => (checksum::fold(self.pseudo + tcp_len) as u32) << 16,
        };
        write_words(out, &w);
    }
}

/// [`prepend_tcp`] for a plain header (see [`is_plain`]).
#[inline]
fn prepend_tcp_plain(buf: &mut PBuf, tuple: &FourTuple, h: &Hdr, payload_sum: Option<u16>) -> Result<usize, BufError> {
    let (w, hl) = plain_words(tuple, h, buf.len(), payload_sum);
    write_words(buf.prepend(hl)?, &w);
    Ok(hl)
}

/// Every header of a frame in one pass, for a plain TCP header (see [`is_plain`]) below which
/// the connection's hop keeps prebuilt link and IPv4 headers (`pre`, with the IPv4
/// identification `ident`): one claim on the headroom, a copy and a few stores. Returns the
/// TCP header's length and the bytes below it.
#[inline]
pub(crate) fn prepend_frame(
    buf: &mut PBuf,
    tuple: &FourTuple,
    h: &Hdr,
    payload_sum: Option<u16>,
    pre: &Prebuilt,
    ident: u16,
) -> Result<(usize, usize), BufError> {
    let (w, hl) = plain_words(tuple, h, buf.len(), payload_sum);
    let below = pre.len();
    let ip_payload = hl + buf.len();
    let (l, t) = buf.prepend(below + hl)?.split_at_mut(below);
    pre.write(l, ip_payload, ident);
    write_words(t, &w);
    Ok((hl, below))
}

/// The first word of the timestamps option when it is the only option: NOP, NOP, kind 8,
/// length 10 (RFC 7323 Appendix A's layout, as Linux sends it).
const TS_PREFIX: u32 = u32::from_be_bytes([1, 1, 8, 10]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};
    use crate::rng::Rng;
    use core::net::Ipv4Addr;

    fn random_tuple(rng: &mut Rng) -> FourTuple {
        let r = rng.next_u64();
        FourTuple {
            local_addr: Ipv4Addr::from_bits(rng.next_u64() as u32),
            local_port: r as u16,
            remote_addr: Ipv4Addr::from_bits((r >> 16) as u32),
            remote_port: (r >> 48) as u16,
        }
    }

    /// A segment written from a pass's template is byte for byte the one the words of its
    /// own fields give: random tuples, ACKs, windows, timestamps or none, PSH or not, lengths
    /// and payload sums or none.
    #[test]
    fn the_template_writes_the_plain_header() {
        let mut rng = Rng::new(11);
        for round in 0..5000 {
            let tuple = random_tuple(&mut rng);
            let ack = SeqNumber(rng.next_u64() as u32);
            let window = rng.next_u64() as u16;
            let ts = (round % 3 != 0).then(|| (rng.next_u64() as u32, rng.next_u64() as u32));
            let t = Template::new(&tuple, ack, window, ts);
            for _ in 0..4 {
                let seq = SeqNumber(rng.next_u64() as u32);
                let push = rng.next_u64() & 1 == 1;
                let len = rng.below(65_000) as usize;
                // A payload sum, or none (the device completes the checksum).
                let psum = (rng.next_u64() % 4 != 0).then(|| rng.next_u64() as u16);
                let flags = if push { TcpFlags::ACK | TcpFlags::PSH } else { TcpFlags::ACK };
                let (w, hl) = words(&tuple, seq, ack, flags, window, ts, len, psum);
                assert_eq!(t.hl, hl);
                let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
                t.write(&mut a[..hl], seq, push, len, psum);
                write_words(&mut b[..hl], &w);
                assert_eq!(a, b, "round {round}");
            }
        }
    }

    /// The words written by `prepend_tcp_plain` are the bytes `TcpRepr::emit` writes, and its
    /// checksum the one the general build computes, for random fields, payloads and both
    /// checksum conventions (filled, or the pseudo-header sum for a device to complete).
    #[test]
    fn the_plain_header_is_byte_for_byte_the_general_one() {
        let pool = Pool::new(PoolConfig { buffers: 4, buffer_size: 2048, headroom: 128 }).unwrap();
        let mut rng = Rng::new(7);
        for round in 0..2000 {
            let tuple = random_tuple(&mut rng);
            let h = Hdr {
                seq: SeqNumber(rng.next_u64() as u32),
                ack: SeqNumber(rng.next_u64() as u32),
                flags: TcpFlags::from_bits(rng.next_u64() as u16 & 0xfff),
                window: rng.next_u64() as u16,
                mss: None,
                wscale: None,
                sack_permitted: false,
                ts: (round % 3 != 0).then(|| (rng.next_u64() as u32, rng.next_u64() as u32)),
                sack: SackBlocks::new(),
                urgent: 0,
            };
            let len = rng.below(1500) as usize;
            let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let (mut a, mut b) = (pool.alloc().unwrap(), pool.alloc().unwrap());
            let sum = a.append_copy_sum(&payload).unwrap();
            b.append_copy_sum(&payload).unwrap();
            let psum = (round % 5 != 0).then_some(sum);
            let la = prepend_tcp_plain(&mut a, &tuple, &h, psum).unwrap();
            let lb = prepend_tcp_any(&mut b, &tuple, &h, psum).unwrap();
            assert_eq!(la, lb);
            assert_eq!(a.data(), b.data(), "round {round}: {h:?}");
            if psum.is_some() {
                let pkt = TcpPacket::new_unchecked(a.data());
                assert!(pkt.verify_checksum(tuple.local_addr, tuple.remote_addr));
            }
        }
    }
}
