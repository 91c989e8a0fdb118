//! SYN cookies (RFC 4987 §3.6): when a listener's SYN queue is full (or always, by
//! [`SynCookies::Always`](super::config::SynCookies)), the SYN is answered with a SYN-ACK
//! and no state is kept. Everything needed to rebuild the connection travels in the
//! SYN-ACK's initial sequence number and comes back, plus one, in the ACK of the handshake.
//!
//! The ISN is built as Linux's `syncookies.c` builds it (the layout D. J. Bernstein proposed
//! in 1996):
//!
//! ```text
//! ISN = H(tuple) + peer's ISN + (count << 24) + (MAC(tuple, count, mss_index) << 3 | mss_index)
//! ```
//!
//! where `count` ticks once a minute, and `H` and the 21-bit `MAC` are SipHash-2-4 under a
//! key derived from the stack's secret. The top 8 bits carry the count (so that old cookies
//! expire). Linux adds the index to a hash, so that a cookie a few units off still passes
//! with another MSS; here, as FreeBSD's `syncookie_mac` does, the low bits are a MAC over
//! the index, so a cookie verifies exactly or not at all. An ACK is valid when the count it
//! yields is at most [`MAX_AGE`] counter periods old and the MAC matches: a blind guess succeeds
//! with probability about 2 / 2^29.
//!
//! The peer's MSS is kept only as an index into [`MSS_TABLE`]. The peer's window scale and
//! SACK-permitted cannot fit in the ISN; with timestamps they travel in the low bits of our
//! TSval (Linux's `cookie_init_timestamp`), which the peer echoes in every TSecr. Without
//! timestamps the SYN-ACK offers neither (RFC 4987 §3.6 names that loss).

use super::header::Hdr;
use super::input::{negotiate, Segment};
use super::seq::SeqNumber;
use super::stats::DropReason;
use super::tcb::{FourTuple, State};
use super::{hash, output, Io, Tcp};
use crate::buf::PBuf;
use crate::time::Instant;
use crate::wire::{SackBlocks, TcpFlags};

/// The peer MSS values a cookie can name, smallest first (Linux's `msstab` for IPv4 plus
/// jumbo and loopback sizes); a SYN's MSS is rounded down to one of them.
pub(crate) const MSS_TABLE: [u16; 8] = [536, 1300, 1440, 1460, 4312, 8960, 16384, 65495];
const IDX_MASK: u32 = MSS_TABLE.len() as u32 - 1;
/// Seconds per tick of the cookie counter.
const COUNT_PERIOD_SECS: u64 = 60;
/// Oldest counter value still accepted, in ticks: a cookie lives one to two minutes (Linux
/// `check_tcp_syn_cookie`: `diff >= MAX_SYNCOOKIE_AGE` (2) fails, so ages 0 and 1 pass).
pub(crate) const MAX_AGE: u32 = 1;
/// Low bits of the TSval that carry options: 4 bits of window scale, 1 of SACK-permitted.
const TS_OPT_BITS: u32 = 5;
const TS_OPT_MASK: u32 = (1 << TS_OPT_BITS) - 1;
/// The window-scale field's value for "no window scaling".
const TS_NO_WSCALE: u32 = 0xf;
const TS_SACK: u32 = 1 << 4;

/// The cookie function under one secret.
#[derive(Debug, Clone)]
pub(crate) struct CookieKey {
    key: [u64; 2],
}

impl CookieKey {
    pub(crate) fn new(key: [u64; 2]) -> CookieKey {
        CookieKey { key }
    }

    fn hash(&self, t: &FourTuple, count: u32, which: u8) -> u32 {
        let addrs = (u32::from(t.local_addr) as u64) << 32 | u32::from(t.remote_addr) as u64;
        let rest = (t.local_port as u64) << 48 | (t.remote_port as u64) << 32 | count as u64;
        hash::siphash24_words(self.key, [addrs, rest, which as u64]) as u32
    }

    /// The 21 bits above the MSS index: a MAC of the tuple, the count and the index.
    fn mac(&self, t: &FourTuple, count: u32, idx: u32) -> u32 {
        self.hash(t, count, 1 + idx as u8) & 0x00ff_ffff & !IDX_MASK
    }

    /// The counter at `now`.
    fn count(now: Instant) -> u32 {
        (now.total_millis() / 1000 / COUNT_PERIOD_SECS) as u32
    }

    /// The ISN for a SYN on `t` with sequence number `peer_isn` and MSS option `peer_mss`.
    pub(crate) fn make(&self, now: Instant, t: &FourTuple, peer_isn: SeqNumber, peer_mss: u16) -> SeqNumber {
        let idx = MSS_TABLE.iter().rposition(|&m| m <= peer_mss).unwrap_or(0) as u32;
        let count = Self::count(now);
        let low = self.mac(t, count, idx) | idx;
        SeqNumber(self.hash(t, 0, 0).wrapping_add(peer_isn.0).wrapping_add(count << 24).wrapping_add(low))
    }

    /// The peer MSS a valid `cookie` (the ACK's acknowledgment number less one) for the
    /// SYN `peer_isn` on `t` encodes; `None` if it is not one of ours or has expired.
    pub(crate) fn check(&self, now: Instant, t: &FourTuple, peer_isn: SeqNumber, cookie: SeqNumber) -> Option<u16> {
        let rest = cookie.0.wrapping_sub(self.hash(t, 0, 0)).wrapping_sub(peer_isn.0);
        let count = Self::count(now);
        let age = count.wrapping_sub(rest >> 24) & 0xff;
        if age > MAX_AGE {
            return None;
        }
        let idx = rest & IDX_MASK;
        (rest & 0x00ff_ffff == self.mac(t, count.wrapping_sub(age), idx) | idx).then(|| MSS_TABLE[idx as usize])
    }
}

/// Our TSval at `ts_now` with the peer's window scale and SACK-permitted in its low bits,
/// never ahead of `ts_now` (the connection's later TSvals must not go backwards).
pub(crate) fn encode_ts(ts_now: u32, wscale: Option<u8>, sack: bool) -> u32 {
    let opts = wscale.map_or(TS_NO_WSCALE, |w| w.min(14) as u32) | if sack { TS_SACK } else { 0 };
    let ts = (ts_now & !TS_OPT_MASK) | opts;
    if ts.wrapping_sub(ts_now) as i32 > 0 {
        ts.wrapping_sub(TS_OPT_MASK + 1)
    } else {
        ts
    }
}

/// The peer's window scale and SACK-permitted from the TSecr of the handshake's ACK.
pub(crate) fn decode_ts(tsecr: u32) -> (Option<u8>, bool) {
    let ws = tsecr & 0xf;
    ((ws != TS_NO_WSCALE).then_some(ws as u8), tsecr & TS_SACK != 0)
}

/// The connection a segment would belong to, seen from our end.
fn tuple_of(seg: &Segment) -> FourTuple {
    FourTuple { local_addr: seg.dst, local_port: seg.dst_port, remote_addr: seg.src, remote_port: seg.src_port }
}

/// Whether a listener that last sent a cookie at `last` may still receive its ACK.
pub(crate) fn recent(last: Option<Instant>, now: Instant) -> bool {
    let window = crate::time::Duration::from_secs((MAX_AGE as u64 + 1) * COUNT_PERIOD_SECS);
    last.is_some_and(|t| now.saturating_duration_since(t) <= window)
}

impl Tcp {
    /// Answer the SYN `seg` to listener `lidx` with a cookie SYN-ACK, keeping nothing.
    pub(super) fn send_syn_cookie(&mut self, now: Instant, lidx: u32, seg: &Segment, io: Io<'_>) {
        let Some(l) = self.listeners.get_mut(lidx as usize).and_then(|l| l.as_mut()) else { return };
        l.last_cookie = Some(now);
        let opts = l.opts;
        let tuple = tuple_of(seg);
        let Io { pool, iface, tx } = io;
        let mtu = iface.capabilities().mtu;
        let rmss = self.rmss(mtu);
        let iss = self.cookies.make(now, &tuple, seg.seq, seg.mss.unwrap_or(536));
        // Options the ACK could not bring back are not offered.
        let ts_on = self.config.timestamps && seg.ts.is_some();
        let wscale = (ts_on && self.config.window_scaling && seg.wscale.is_some()).then(|| self.rcv_wscale(&opts));
        let sack = ts_on && self.config.sack && seg.sack_permitted;
        let peer_ws = if self.config.window_scaling { seg.wscale } else { None };
        let ts_now = (now.total_millis() as u32).wrapping_add(self.ts_offset(&tuple));
        let ts = seg.ts.filter(|_| ts_on).map(|(tsval, _)| (encode_ts(ts_now, peer_ws, sack), tsval));
        let window = opts.recv_buffer.min(u16::MAX as usize) as u16;
        let mut env = env!(self, now, pool, iface, tx);
        let flags = TcpFlags::SYN | TcpFlags::ACK;
        let synack = Hdr {
            seq: iss,
            ack: seg.seq + 1,
            flags,
            window,
            mss: Some(rmss),
            wscale,
            sack_permitted: sack,
            ts,
            sack: SackBlocks::new(),
            urgent: 0,
        };
        if output::send_stateless(&mut env, tuple, &synack) {
            self.counters.syn_cookies_sent += 1;
        }
    }

    /// Whether the segment `seg`, which found no connection, should be checked as the
    /// final ACK of a cookie handshake: a bare ACK to a listener that sent cookies lately
    /// (Linux's `tcp_synq_no_recent_overflow`: other stray ACKs are not worth a hash).
    pub(super) fn cookie_ack_candidate(&self, now: Instant, seg: &Segment) -> bool {
        let f = seg.flags;
        if !f.contains(TcpFlags::ACK) || f.intersects(TcpFlags::SYN | TcpFlags::RST) {
            return false;
        }
        let Some(l) = self.listener_for(seg.dst, seg.dst_port).and_then(|i| self.listener(i)) else { return false };
        recent(l.last_cookie, now)
    }

    /// The ACK `seg` (with `payload`) may complete a cookie handshake: if its cookie is
    /// valid, rebuild the connection as SYN-RECEIVED and let the ordinary input path take
    /// the segment, which makes it ESTABLISHED (and queues any data it carries). An invalid
    /// one is a blind ACK: counted, and answered as LISTEN answers any ACK (RFC 9293
    /// §3.10.7.2: `<SEQ=SEG.ACK><CTL=RST>`).
    pub(super) fn syn_cookie_ack(&mut self, now: Instant, seg: &Segment, payload: PBuf, io: Io<'_>) {
        let Some(lidx) = self.listener_for(seg.dst, seg.dst_port) else { return };
        let tuple = tuple_of(seg);
        let peer_isn = seg.seq - 1;
        let iss = seg.ack - 1;
        let mss = self.cookies.check(now, &tuple, peer_isn, iss);
        // The options, from the echo of our TSval (only if timestamps were offered).
        let ts = seg.ts.filter(|_| self.config.timestamps);
        let (wscale, sack) = ts.map_or((None, false), |(_, tsecr)| decode_ts(tsecr));
        let Some(mss) = mss else {
            let Io { pool, iface, tx } = io;
            let mut env = env!(self, now, pool, iface, tx);
            env.counters.drop(DropReason::BadCookie);
            output::send_reset(&mut env, seg, Some(seg.ack), None);
            return;
        };
        let Some(l) = self.listeners.get(lidx as usize).and_then(|l| l.as_ref()) else { return };
        // As for any final ACK (see `connection_input`): with the accept queue full it is
        // dropped, and the peer's retransmission (or its first data) tries again.
        if l.ready >= l.backlog {
            self.counters.drop(DropReason::ListenOverflow);
            return;
        }
        let sock = l.opts;
        let Io { pool, iface, tx } = io;
        let mtu = iface.capabilities().mtu;
        let mut tcb = self.new_tcb(now, tuple, sock, mtu, State::SynReceived);
        tcb.set_iss(iss);
        // Our SYN went out (in the SYN-ACK the peer acknowledges).
        tcb.snd_nxt = iss + 1;
        tcb.snd_max = iss + 1;
        tcb.listener = Some(lidx);
        tcb.irs = peer_isn;
        tcb.rcv_nxt = seg.seq;
        tcb.rcv_adv = seg.seq + sock.recv_buffer.min(u16::MAX as usize) as u32;
        tcb.snd_wl1 = peer_isn;
        tcb.snd_wl2 = iss;
        // The peer's SYN as far as the cookie recorded it.
        let syn = Segment {
            flags: TcpFlags::SYN,
            seq: peer_isn,
            mss: Some(mss),
            wscale,
            sack_permitted: sack,
            ts: ts.map(|(tsval, _)| (tsval, 0)),
            ..*seg
        };
        let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
        negotiate(&mut env, &mut tcb, &syn);
        self.trace.event(now, &tcb, super::trace::Event::State(tcb.state));
        let Some(idx) = self.insert(tcb) else {
            self.counters.drop(DropReason::NoBuffer);
            return;
        };
        self.counters.syn_cookies_validated += 1;
        if let Some(l) = self.listeners.get_mut(lidx as usize).and_then(|l| l.as_mut()) {
            l.syn_received += 1;
        }
        self.connection_input(now, idx, seg, payload, None, Io { pool, iface, tx });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;
    use core::net::Ipv4Addr;

    const T: FourTuple = FourTuple {
        local_addr: Ipv4Addr::new(10, 0, 0, 2),
        local_port: 80,
        remote_addr: Ipv4Addr::new(10, 0, 0, 1),
        remote_port: 40000,
    };

    /// A cookie made at `t` verifies, with the MSS rounded down to the table, in its own
    /// counter period and the next, no longer (Linux); another tuple, peer ISN or key does not.
    #[test]
    fn cookies_verify_within_their_age_only() {
        let k = CookieKey::new([1, 2]);
        let t0 = Instant::from_secs(1_000_000);
        let isn = SeqNumber(0xdead_beef);
        let c = k.make(t0, &T, isn, 1460);
        assert_eq!(k.check(t0, &T, isn, c), Some(1460));
        assert_eq!(k.check(t0 + Duration::from_secs(60), &T, isn, c), Some(1460));
        // 1_000_000 s is 16666 periods and 40 s: the second period boundary is 80 s on.
        assert_eq!(k.check(t0 + Duration::from_secs(79), &T, isn, c), Some(1460));
        assert_eq!(k.check(t0 + Duration::from_secs(80), &T, isn, c), None);
        for d in [1, 2, 7, 8, 0x1_0000] {
            assert_eq!(k.check(t0, &T, isn + d, c), None, "peer ISN off by {d}");
            assert_eq!(k.check(t0, &T, isn, c + d), None, "cookie off by {d}");
            assert_eq!(k.check(t0, &T, isn, SeqNumber(c.0.wrapping_sub(d))), None, "cookie off by -{d}");
        }
        let other = FourTuple { remote_port: 40001, ..T };
        assert_eq!(k.check(t0, &other, isn, c), None);
        assert_eq!(CookieKey::new([1, 3]).check(t0, &T, isn, c), None);
        for (mss, want) in [(100, 536), (536, 536), (1299, 536), (1400, 1300), (9000, 8960), (65535, 65495)] {
            assert_eq!(k.check(t0, &T, isn, k.make(t0, &T, isn, mss)), Some(want), "mss {mss}");
        }
    }

    /// Guessed cookies: of 2^20 random ACK numbers for one SYN, about 2 / 2^29 of them
    /// verify, so none should.
    #[test]
    fn guessed_cookies_fail() {
        let k = CookieKey::new([5, 6]);
        let t0 = Instant::from_secs(500);
        let mut x = 0x9e37_79b9u32;
        let valid = (0..1 << 20)
            .filter(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                k.check(t0, &T, SeqNumber(7), SeqNumber(x)).is_some()
            })
            .count();
        assert_eq!(valid, 0);
    }

    /// The options round-trip through the TSval, which never runs ahead of the clock.
    #[test]
    fn options_travel_in_the_tsval() {
        for now in [0u32, 1, 31, 32, 1000, u32::MAX - 3, u32::MAX] {
            for (ws, sack) in [(None, false), (None, true), (Some(0), true), (Some(7), false), (Some(14), true)] {
                let ts = encode_ts(now, ws, sack);
                assert!(ts.wrapping_sub(now) as i32 <= 0 && now.wrapping_sub(ts) < 32, "{now} {ts}");
                assert_eq!(decode_ts(ts), (ws, sack));
            }
        }
        assert_eq!(encode_ts(100, Some(20), false) & 0xf, 14, "a shift above 14 is taken as 14 (RFC 7323 §2.3)");
    }
}
