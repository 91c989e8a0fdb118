//! The protocol side of the user requests, as BSD's `tcp_usrreq.c`: listen, accept,
//! connect, send, receive, shutdown, close and abort (RFC 9293 §3.10.1-§3.10.6), and the
//! `tcp_info` snapshot. `crate::socket` wraps these behind handles; here a connection is its
//! slot index.

use super::input;
use super::output;
use super::tcb::{self, ConnError};
use super::SocketOptions;
use super::{trace, DropReason, FourTuple, Io, Listener, State, Tcp, TcpInfo};
use crate::buf::{FreeChain, PBuf, Pool};
use crate::iface::Interface;
use crate::time::Instant;
use crate::wire::checksum;
use core::net::Ipv4Addr;
use std::collections::VecDeque;

/// Why a user request failed. `crate::socket::Error` maps each to what an application sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// The connection ended: refused, reset or timed out.
    Conn(ConnError),
    /// The address and port are taken (or no ephemeral port is free).
    AddrInUse,
    /// The connection is not (or no longer) open for this.
    NotConnected,
    /// The request does not fit the connection's state (e.g. send after shutdown).
    InvalidState,
    /// No buffer, or no connection slot, is free.
    NoBufferSpace,
    /// Nothing to do now.
    WouldBlock,
    /// No connection at that index.
    NoConnection,
    /// A bad address or port.
    InvalidArgument,
}

impl From<ConnError> for RequestError {
    fn from(e: ConnError) -> RequestError {
        RequestError::Conn(e)
    }
}

/// The least a queued send segment costs against the send buffer, whatever its buffer.
pub(crate) const MIN_SEGMENT_CHARGE: usize = 256;

/// What a send segment not yet sent costs at least against the send buffer with
/// segmentation offload, for pool buffers of `buffer_size` bytes: half its buffer.
///
/// Linux charges an skb's truesize, the memory it holds, not its bytes. A queued segment
/// holds a whole pool buffer, and once the pool has handed that buffer out it stays
/// resident at the most it was ever filled, so what a send queue costs in memory is its
/// number of buffers times their size. Early in a connection an offload unit is a third of
/// cwnd (3 MSS), so a 256 KiB send buffer charged by bytes (and 256 at least) queued some
/// 60 units of 4,344 bytes, each in a 64 KiB buffer: eight connections of a relay held 435
/// buffers at once, 8 MB resident after 4 s of `iperf3 -P 8`, for 2 MB of send buffers.
/// Charged half a buffer each while unsent (the tail apart), a connection queues at most
/// about twice its send buffer's worth of buffers ahead of what it sends, while a unit at
/// least half full (32 KiB or more, the whole of a bulk transfer once cwnd has grown) still
/// costs just its bytes. Sent units are charged their bytes: a sent unit is cut into
/// MSS-sized entries that share its one buffer (`sndq::slice_sent`), so charging entries
/// would charge a buffer some 45 times, and the bytes in flight are bounded by cwnd and the
/// window. (After a retransmission timeout the pieces count as unsent again until they are
/// sent again, each in a buffer of its own then.) Since sending opens room, the output
/// marks a connection's event when it does (`Tcp::output_dirty`).
pub(crate) fn segment_charge(buffer_size: usize) -> usize {
    MIN_SEGMENT_CHARGE.max(buffer_size / 2)
}

/// Free send buffer. Each queued segment costs at least [`MIN_SEGMENT_CHARGE`] bytes (as
/// Linux charges an skb's truesize), so tiny writes cannot pin a pbuf per byte; with
/// segmentation offload the segments not yet sent, but for the tail, cost together at least
/// `charge` each ([`segment_charge`]), so partly filled 64 KiB buffers do not pin memory
/// beyond the send buffer's measure either. Without offload `charge` is the minimum.
pub(crate) fn send_room(tcb: &tcb::Tcb, charge: usize) -> usize {
    let mut charged = tcb.snd_queued.max(tcb.sndq.len() * MIN_SEGMENT_CHARGE);
    let unsent = tcb.sndq.len().saturating_sub(tcb.snd_nxt_idx);
    // The tail, which the next write fills, costs its bytes: so a bulk writer's queue of
    // full units and one part-filled tail is charged exactly its bytes.
    if charge > MIN_SEGMENT_CHARGE && unsent > 1 {
        let (first, tail) = (tcb.sndq[tcb.snd_nxt_idx].seq, tcb.sndq[tcb.sndq.len() - 1].seq);
        let before_tail = tail.since(first) as usize;
        charged = charged.max(tcb.snd_queued + ((unsent - 1) * charge).saturating_sub(before_tail));
    }
    tcb.opts.send_buffer.saturating_sub(charged)
}

/// What a connection is ready for, for `crate::socket`'s readiness.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Status {
    pub readable: bool,
    pub writable: bool,
    pub read_closed: bool,
    pub closed: bool,
    pub error: Option<ConnError>,
    pub state: State,
    pub urgent: Option<usize>,
}

/// What a receive callback did with the front segment's bytes.
pub(crate) enum Take {
    /// Consumed this many (fewer than offered stops the read).
    Bytes(usize),
    /// The segment's deferred checksum did not verify: it is dropped, nothing consumed.
    BadChecksum,
    /// Nothing taken from this segment, whose checksum is still unchecked: the read ends
    /// before it.
    Stop,
}

/// Copy the first `dst.len()` bytes of the deferred segment `src` into `dst`, summed in the
/// copy, and sum the rest: whether the whole completes `header_sum` to a good checksum.
/// Out of line: the read of a segment larger than the caller's buffer is the rare one.
#[inline(never)]
fn copy_part_checked(dst: &mut [u8], src: &[u8], header_sum: u16) -> bool {
    let n = dst.len();
    let part = checksum::copy_and_sum(dst, &src[..n]);
    checksum::add(header_sum, checksum::add_at(part, checksum::sum(&src[n..]), n)) == 0xffff
}

impl Tcp {
    pub(crate) fn listen(&mut self, local: (Ipv4Addr, u16), backlog: usize, opts: SocketOptions) -> Option<(u32, u32)> {
        // Port 0 only as the every-address, every-port listener (`tcp_listen_any`).
        if self.listen_table.contains_key(&local) || (local.1 == 0 && !local.0.is_unspecified()) {
            return None;
        }
        self.listener_gen = self.listener_gen.wrapping_add(1);
        let l = Listener {
            gen: self.listener_gen,
            local,
            backlog: backlog.max(1),
            syn_received: 0,
            accept: VecDeque::new(),
            ready: 0,
            opts,
            last_cookie: None,
        };
        let idx = match self.listeners.iter().position(|l| l.is_none()) {
            Some(i) => i,
            None => {
                self.listeners.push(None);
                self.listener_events.grow(self.listeners.len());
                self.listeners.len() - 1
            }
        };
        self.listeners[idx] = Some(l);
        self.listen_table.insert(local, idx as u32);
        self.listen_cache.set(None);
        Some((idx as u32, self.listener_gen))
    }

    /// Close a listener: connections it had not handed out are reset.
    pub(crate) fn unlisten(&mut self, now: Instant, lidx: u32, io: Io<'_>) {
        let Some(l) = self.listeners.get_mut(lidx as usize).and_then(|l| l.take()) else { return };
        self.listen_table.remove(&l.local);
        self.listen_cache.set(None);
        let Io { pool, iface, tx } = io;
        let pending: Vec<u32> =
            (0..self.slots.len() as u32).filter(|&i| self.tcb(i).is_some_and(|t| t.listener == Some(lidx))).collect();
        for idx in pending {
            if let Some(tcb) = self.slots[idx as usize].tcb.as_deref_mut() {
                let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
                output::send_abort(&mut env, tcb);
                tcb.listener = None;
                tcb.orphan = true;
            }
            self.retire(idx);
        }
    }

    pub(crate) fn accept(&mut self, lidx: u32) -> Option<u32> {
        let l = self.listeners.get_mut(lidx as usize)?.as_mut()?;
        // Skip the entries of connections that ended before they were accepted.
        while let Some((idx, gen)) = l.accept.pop_front() {
            let slot = &mut self.slots[idx as usize];
            if let Some(tcb) = slot.tcb.as_deref_mut().filter(|_| slot.gen == gen) {
                tcb.listener = None;
                tcb.accept_queued = false;
                l.ready -= 1;
                return Some(idx);
            }
        }
        None
    }

    /// Active open: choose an ephemeral port (RFC 6056) and send a SYN.
    pub(crate) fn connect(
        &mut self,
        now: Instant,
        local_addr: Ipv4Addr,
        local_port: Option<u16>,
        remote: (Ipv4Addr, u16),
        opts: SocketOptions,
        mtu: usize,
    ) -> Result<u32, RequestError> {
        if remote.1 == 0 || remote.0.is_unspecified() || remote.0.is_broadcast() {
            return Err(RequestError::InvalidArgument);
        }
        if self.live >= self.config.max_connections {
            return Err(RequestError::NoBufferSpace);
        }
        let tuple_for = |port| FourTuple { local_addr, local_port: port, remote_addr: remote.0, remote_port: remote.1 };
        let port = match local_port {
            Some(p) => {
                if self.table.contains_key(&tuple_for(p)) || self.tw.contains(&tuple_for(p)) {
                    return Err(RequestError::AddrInUse);
                }
                p
            }
            None => {
                let (table, tw) = (&self.table, &self.tw);
                let listeners = &self.listen_table;
                self.ports
                    .candidates(local_addr, remote)
                    .find(|&p| {
                        !table.contains_key(&tuple_for(p))
                            && !tw.contains(&tuple_for(p))
                            && !listeners.contains_key(&(local_addr, p))
                            && !listeners.contains_key(&(Ipv4Addr::UNSPECIFIED, p))
                    })
                    .ok_or(RequestError::AddrInUse)?
            }
        };
        let tcb = self.new_tcb(now, tuple_for(port), opts, mtu, State::SynSent);
        self.trace.event(now, &tcb, trace::Event::State(tcb.state));
        let idx = self.insert(tcb).ok_or(RequestError::NoBufferSpace)?;
        self.counters.active_opens += 1;
        self.mark_dirty(idx);
        Ok(idx)
    }

    /// Queue application bytes: copied once into pbufs, summed during the copy if `sum` (not
    /// when the device completes the checksums, `output::partial_sums`).
    pub(crate) fn send(
        &mut self,
        idx: u32,
        data: &[u8],
        pool: &Pool,
        iface: &Interface,
        sum: bool,
    ) -> Result<usize, RequestError> {
        let mut rest = data;
        self.send_with(idx, pool, iface, data.len(), |buf, room| {
            let n = room.min(rest.len());
            // Cannot fail: `room` fits the tailroom and the buffer is unique.
            let _ = match sum {
                true => buf.append_copy_sum(&rest[..n]).map(|_| ()),
                false => buf.append_copy(&rest[..n]),
            };
            rest = &rest[n..];
            n
        })
    }

    /// [`send`](Self::send), the bytes urgent (RFC 9293 §3.9.1.2, SEND with the URGENT
    /// flag): SND.UP moves to the octet after the last byte taken, and the segments below
    /// it carry URG and the urgent pointer until the peer acknowledges it.
    pub(crate) fn send_urgent(
        &mut self,
        idx: u32,
        data: &[u8],
        pool: &Pool,
        iface: &Interface,
        sum: bool,
    ) -> Result<usize, RequestError> {
        let n = self.send(idx, data, pool, iface, sum)?;
        if n > 0 {
            if let Some(t) = self.tcb_mut(idx) {
                t.snd_up = Some(t.snd_end);
            }
            self.mark_dirty(idx);
        }
        Ok(n)
    }

    /// Queue bytes that `fill` appends to send-queue pbufs: `fill(buf, room)` appends at
    /// most `room` bytes to `buf` and returns how many; it is called until it appends less
    /// than offered, the send buffer is full or `limit` bytes (all the caller has, when it
    /// knows) were appended. Returns the bytes queued.
    pub(crate) fn send_with(
        &mut self,
        idx: u32,
        pool: &Pool,
        iface: &Interface,
        limit: usize,
        mut fill: impl FnMut(&mut PBuf, usize) -> usize,
    ) -> Result<usize, RequestError> {
        let counters = &mut self.counters;
        let charge = self.seg_charge;
        let tcb =
            self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()).ok_or(RequestError::NoConnection)?;
        if let Some(e) = tcb.error {
            return Err(e.into());
        }
        if tcb.fin_queued {
            return Err(RequestError::InvalidState);
        }
        match tcb.state {
            State::Established | State::CloseWait => {}
            State::SynSent | State::SynReceived => return Err(RequestError::WouldBlock),
            _ => return Err(RequestError::NotConnected),
        }
        // Nothing to queue is not a full buffer: `send(2)` of no bytes returns 0 at once.
        if limit == 0 {
            return Ok(0);
        }
        let mut room = send_room(tcb, charge);
        if room == 0 {
            return Err(RequestError::WouldBlock);
        }
        // A caller whose bytes run out exactly at a segment's end must not get a fresh
        // buffer allocated, queued, offered and dropped again empty.
        room = room.min(limit);
        let mut copied = 0;
        let mut starved = false;
        // The bytes are cut into segments now: at the path MTU as it stands (Linux's
        // `tcp_send_mss`; `pmtu::follow`).
        if tcb.pmtu_gen != iface.pmtu.generation() {
            super::pmtu::follow(iface, tcb, counters);
        }
        let seg_size = output::send_unit(tcb, self.gso_max);
        while room > 0 {
            // Fill the unsent tail segment first (Afterburner: "send tries to fill the
            // cluster at the end of the socket buffer before obtaining a new one").
            // (A tail cut by `split_front` keeps its buffer's end: it may be short of a unit
            // with no tailroom left.)
            let tail_has_room = tcb.sndq.len() > tcb.snd_nxt_idx
                && tcb.sndq.back().is_some_and(|s| {
                    s.sent == 0 && s.buf.len() < seg_size && s.buf.tailroom() > 0 && s.buf.is_unique()
                });
            if !tail_has_room {
                // With offload an unsent buffer costs at least `charge`: look at the room
                // again before taking one more (a unit can be a few MSS in a 64 KiB buffer,
                // early in a connection). Without, a segment costs its bytes (or the
                // minimum) and the room counted down by the copies is the room.
                if charge > MIN_SEGMENT_CHARGE {
                    room = room.min(send_room(tcb, charge));
                    if room == 0 {
                        break;
                    }
                }
                let Ok(buf) = pool.alloc() else {
                    counters.drop(DropReason::NoBuffer);
                    starved = true;
                    break;
                };
                let seq = tcb.snd_end;
                tcb.sndq.push_back(tcb::TxSeg { seq, buf, sent: 0, sent_at: Instant::ZERO, sacked: false });
            }
            let Some(tail) = tcb.sndq.back_mut() else { break };
            let offer = room.min(seg_size - tail.buf.len()).min(tail.buf.tailroom());
            if offer == 0 {
                break;
            }
            let n = fill(&mut tail.buf, offer).min(offer);
            copied += n;
            room -= n;
            tcb.snd_queued += n;
            tcb.snd_end += n as u32;
            if n < offer {
                break;
            }
        }
        // Drop an empty segment left by a failed or empty fill.
        if tcb.sndq.back().is_some_and(|s| s.buf.is_empty()) {
            tcb.sndq.pop_back();
        }
        if copied == 0 && starved {
            return Err(RequestError::NoBufferSpace);
        }
        if copied > 0 {
            self.mark_dirty(idx);
            self.note_queued(idx);
        }
        Ok(copied)
    }

    /// Copy received bytes to the application, verifying deferred checksums during the copy.
    pub(crate) fn recv(&mut self, now: Instant, idx: u32, dst: &mut [u8], io: Io<'_>) -> Result<usize, RequestError> {
        if dst.is_empty() {
            // No room reads nothing, as Linux's `recv(2)` of no bytes: `Ok(0)` while bytes
            // are queued, without looking at them (a deferred segment would be summed for
            // nothing); else what any read would return (an error, the end, `WouldBlock`).
            let tcb = self.tcb(idx).ok_or(RequestError::NoConnection)?;
            return if tcb.rcvq.is_empty() { empty_read(tcb) } else { Ok(0) };
        }
        let mut copied = 0;
        let copy = |src: &[u8], unverified: Option<u16>| {
            let room = dst.len() - copied;
            let n = src.len().min(room);
            let out = &mut dst[copied..copied + n];
            match unverified {
                // The fused path: copy and sum the whole segment in one pass, and accept it
                // only if the sum checks.
                Some(header_sum) if n == src.len() => {
                    if checksum::add(header_sum, checksum::copy_and_sum(out, src)) != 0xffff {
                        return Take::BadChecksum;
                    }
                }
                // A segment less than half of which fits, after bytes already copied: the
                // read ends before it (a short read, which a stream allows), so that the
                // next read, with the room a fresh buffer has, copies and checks it in one
                // pass. Filling the room would take a pass over the whole segment to check
                // it and a second over the rest to copy it later: an application reading
                // 64 KiB at a time from 64 KiB offload units would pay that for nearly
                // every byte.
                Some(_) if copied > 0 && 2 * n < src.len() => return Take::Stop,
                // At least half fits, or the segment alone is larger than the room: the part
                // that fits is copied and summed in one pass, the rest summed, and the part
                // reported only if the whole checks (no unverified byte is ever reported
                // read; the rest is copied, verified, later). The rest summed twice is then
                // no larger than the part, and a reader whose buffer holds a few segments (an
                // 8 KiB copy loop) gets it filled instead of one read in two or three short.
                Some(header_sum) => {
                    if !copy_part_checked(out, src, header_sum) {
                        return Take::BadChecksum;
                    }
                }
                None => out.copy_from_slice(&src[..n]),
            }
            copied += n;
            Take::Bytes(n)
        };
        self.recv_with(now, idx, io, copy, None)
    }

    /// Copy queued bytes into `dst` without consuming them (`tcp_peek`, `recv(2)` with
    /// `MSG_PEEK`): the next read returns them again. A segment whose checksum was deferred
    /// is verified first, in a pass of its own (a peek is for a few bytes: a proxy looking
    /// at a request's first line or a TLS ClientHello); one that fails is dropped as a read
    /// drops it, and the peek ends before it. The empty queue answers as `recv` does.
    pub(crate) fn peek(&mut self, now: Instant, idx: u32, dst: &mut [u8], io: Io<'_>) -> Result<usize, RequestError> {
        let Io { pool, iface, tx } = io;
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Err(RequestError::NoConnection);
        };
        if tcb.rcvq.is_empty() {
            return empty_read(tcb);
        }
        let mut env = env!(self, now, pool, iface, tx);
        let (mut copied, mut i, mut checked) = (0, 0, false);
        while copied < dst.len() {
            let Some(s) = tcb.rcvq.get(i) else { break };
            if let Some(u) = s.unverified {
                checked = true;
                if !input::payload_checks(u.header_sum, s.buf.data()) {
                    input::reject_from(&mut env, tcb, i);
                    break;
                }
                input::accept_verified(&mut env, tcb, i);
            }
            let Some(s) = tcb.rcvq.get(i) else { break };
            let n = s.buf.len().min(dst.len() - copied);
            dst[copied..copied + n].copy_from_slice(&s.buf.data()[..n]);
            copied += n;
            i += 1;
        }
        // A verified segment counts for ACKs now; a rejected one may owe one.
        if checked {
            self.mark_dirty(idx);
        }
        match copied {
            0 if !dst.is_empty() => self.tcb(idx).map_or(Err(RequestError::NoConnection), empty_read),
            n => Ok(n),
        }
    }

    /// Hand received bytes to `drain` in place (`tcp_recv_with`): a segment whose checksum
    /// was deferred is verified (a sum pass) before `drain` sees any of it.
    pub(crate) fn recv_in_place(
        &mut self,
        now: Instant,
        idx: u32,
        io: Io<'_>,
        mut drain: impl FnMut(&[u8]) -> usize,
    ) -> Result<usize, RequestError> {
        let take = |src: &[u8], unverified| match checks(unverified, src) {
            true => Take::Bytes(drain(src)),
            false => Take::BadChecksum,
        };
        self.recv_with(now, idx, io, take, None)
    }

    /// Move whole received segments to `out` (`tcp_recv_bufs`), their buffers with them: at
    /// least one, and then as many as keep the total within `max` bytes. A segment whose
    /// checksum was deferred is verified (a sum pass) first.
    pub(crate) fn recv_bufs(
        &mut self,
        now: Instant,
        idx: u32,
        io: Io<'_>,
        max: usize,
        out: &mut Vec<PBuf>,
    ) -> Result<usize, RequestError> {
        let mut taken = 0;
        self.recv_with(
            now,
            idx,
            io,
            |src, unverified| {
                if !checks(unverified, src) {
                    return Take::BadChecksum;
                }
                if taken > 0 && taken + src.len() > max {
                    return Take::Bytes(0);
                }
                taken += src.len();
                Take::Bytes(src.len())
            },
            Some(out),
        )
    }

    /// Hand received bytes to `take` segment by segment, in order: `take(bytes, unverified)`
    /// gets the front segment's bytes and, if its checksum is still to be checked, the sum
    /// of its pseudo-header and header, and returns how many bytes it consumed (checking the
    /// checksum before letting any byte go), or that the checksum failed. Stops when `take`
    /// consumes less than offered. Returns the bytes consumed; `Ok(0)` is the end of stream.
    /// With `keep`, the buffers of the segments consumed whole go there instead of back to
    /// the pool.
    pub(crate) fn recv_with(
        &mut self,
        now: Instant,
        idx: u32,
        io: Io<'_>,
        mut take: impl FnMut(&[u8], Option<u16>) -> Take,
        mut keep: Option<&mut Vec<PBuf>>,
    ) -> Result<usize, RequestError> {
        let Io { pool, iface, tx } = io;
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Err(RequestError::NoConnection);
        };
        if tcb.rcvq.is_empty() {
            // Nothing queued: the read that finds the queue drained, as a reader that reads
            // until it would block makes once per wake-up, answers from two fields.
            return empty_read(tcb);
        }
        let mut env = env!(self, now, pool, iface, tx);
        let mut copied = 0;
        // The segments read whole go back to the pool together when the read ends (nothing
        // here allocates meanwhile, and they were held in the queue until now).
        let mut read = FreeChain::new();
        while let Some(front) = tcb.rcvq.front() {
            let len = front.buf.len();
            let unverified = front.unverified.map(|u| u.header_sum);
            if unverified.is_some() {
                debug_assert_eq!(tcb.rcvq.len(), tcb.rcv_unverified, "the unverified run is a suffix");
            }
            let n = match take(front.buf.data(), unverified) {
                Take::Bytes(n) => n.min(len),
                Take::BadChecksum => {
                    input::reject_from(&mut env, tcb, 0);
                    break;
                }
                Take::Stop => {
                    // Only after bytes were copied: a read that returned nothing while the
                    // queue stays readable would leave a blocking reader waiting for ever.
                    debug_assert!(copied > 0, "a read stopped before copying anything");
                    break;
                }
            };
            if unverified.is_some() {
                input::accept_verified(&mut env, tcb, 0);
            }
            copied += n;
            tcb.rcv_queued -= n;
            if n == len {
                if let Some(s) = tcb.rcvq.pop_front() {
                    match keep.as_deref_mut() {
                        Some(out) => out.push(s.buf),
                        None => read.put(s.buf),
                    }
                }
            } else {
                if let Some(front) = tcb.rcvq.front_mut() {
                    let _ = front.buf.trim_front(n);
                    front.seq += n as u32;
                }
                break;
            }
        }
        let nothing = empty_read(tcb);
        if copied > 0 && !self.defer_window_update && output::window_update_due(tcb) {
            tcb.owe_ack();
        }
        let wake = copied > 0 && tcb.ack_now;
        if wake {
            self.mark_dirty(idx);
        }
        if copied > 0 {
            self.note_queued(idx);
            return Ok(copied);
        }
        nothing
    }

    /// Shut down the write side: a FIN follows the queued data (RFC 9293 §3.10.4 CLOSE).
    pub(crate) fn shutdown_write(&mut self, idx: u32) -> Result<(), RequestError> {
        let tcb = self.tcb_mut(idx).ok_or(RequestError::NoConnection)?;
        match tcb.state {
            State::SynSent => {
                tcb.state = State::Closed;
                self.retire(idx);
                return Ok(());
            }
            State::SynReceived | State::Established => {
                tcb.fin_queued = true;
                tcb.state = State::FinWait1;
            }
            State::CloseWait => {
                tcb.fin_queued = true;
                tcb.state = State::LastAck;
            }
            _ => return Ok(()),
        }
        self.mark_dirty(idx);
        self.repredict(idx);
        Ok(())
    }

    /// Shut down the read side: queued data is discarded. Later data is still taken in
    /// (Linux); once the write side is shut down too it resets the connection, as Linux
    /// does in FIN-WAIT-1/2.
    pub(crate) fn shutdown_read(&mut self, idx: u32) -> Result<(), RequestError> {
        let tcb = self.tcb_mut(idx).ok_or(RequestError::NoConnection)?;
        tcb.shut_rd = true;
        tcb.rcvq.clear();
        tcb.rcv_queued = 0;
        tcb.rcv_unverified = 0;
        self.repredict(idx);
        Ok(())
    }

    /// Close: if unread data would be lost, reset (RFC 9293 §3.10.4 permits it; Linux does it
    /// so the peer learns its data was not consumed); otherwise FIN and let the connection
    /// finish on its own.
    pub(crate) fn close(&mut self, now: Instant, idx: u32, io: Io<'_>) -> Result<(), RequestError> {
        let tcb = self.tcb_mut(idx).ok_or(RequestError::NoConnection)?;
        if tcb.state == State::Closed {
            self.free(idx);
            return Ok(());
        }
        if tcb.rcv_queued > 0 || !tcb.ooo.is_empty() {
            return self.abort(now, idx, io);
        }
        self.shutdown_write(idx)?;
        let fin_wait_2_timeout = self.config.fin_wait_2_timeout;
        if let Some(tcb) = self.tcb_mut(idx) {
            tcb.shut_rd = true;
            tcb.orphan = true;
            match tcb.state {
                State::Closed => self.free(idx),
                State::FinWait2 => {
                    // Already half-closed and acknowledged: the orphan timeout starts now.
                    tcb.timers.keepalive.set(now + fin_wait_2_timeout);
                    self.rearm(idx);
                }
                // Nobody holds it now: TIME-WAIT goes on as a compact entry.
                State::TimeWait => self.compact_time_wait(now, idx),
                _ => {}
            }
        }
        Ok(())
    }

    /// Abort: RST to the peer (from a synchronized state) and forget the connection.
    pub(crate) fn abort(&mut self, now: Instant, idx: u32, io: Io<'_>) -> Result<(), RequestError> {
        let Io { pool, iface, tx } = io;
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Err(RequestError::NoConnection);
        };
        if matches!(
            tcb.state,
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait
        ) {
            let mut env = env!(self, now, pool, iface, tx);
            output::send_abort(&mut env, tcb);
        }
        tcb.orphan = true;
        self.retire(idx);
        self.free(idx);
        Ok(())
    }

    /// A `tcp_info`-like snapshot.
    pub(crate) fn info(&self, idx: u32) -> Option<TcpInfo> {
        let t = self.tcb(idx)?;
        Some(TcpInfo {
            state: t.state,
            srtt: t.rtt.srtt(),
            rttvar: t.rtt.rttvar(),
            rto: t.rtt.rto(),
            cwnd: t.cwnd(),
            ssthresh: t.cc.ssthresh(),
            snd_wnd: t.snd_wnd,
            rcv_wnd: t.rcv_adv.since(t.rcv_nxt),
            smss: t.smss,
            eff_mss: t.eff_mss,
            snd_wscale: t.snd_wscale,
            rcv_wscale: t.rcv_wscale,
            timestamps: t.ts_enabled,
            sack: t.sack_enabled,
            flight: t.flight(),
            reordering: t.reordering,
            stats: t.stats,
        })
    }

    /// The generation of slot `idx` if it holds a connection the application owns (not an
    /// orphan left to finish its close alone).
    pub(crate) fn owned_generation(&self, idx: u32) -> Option<u32> {
        let slot = self.slots.get(idx as usize)?;
        slot.tcb.as_deref().filter(|t| !t.orphan).map(|_| slot.gen)
    }

    /// The generation of slot `idx` (0 for a slot never used).
    pub(crate) fn generation(&self, idx: u32) -> u32 {
        self.slots.get(idx as usize).map_or(0, |s| s.gen)
    }

    /// What the connection is ready for.
    pub(crate) fn status(&self, idx: u32) -> Option<Status> {
        let t = self.tcb(idx)?;
        let read_closed = t.read_closed();
        Some(Status {
            readable: !t.rcvq.is_empty() || read_closed || t.error.is_some(),
            writable: t.state.can_send() && !t.fin_queued && send_room(t, self.seg_charge) > 0,
            read_closed,
            closed: matches!(t.state, State::Closed | State::TimeWait),
            error: t.error,
            state: t.state,
            urgent: t.urgent_pending(),
        })
    }

    /// The options in force.
    pub(crate) fn options(&self, idx: u32) -> Option<SocketOptions> {
        Some(self.tcb(idx)?.opts)
    }

    /// Change a connection's options (see `Stack::tcp_set_options` for what applies when).
    pub(crate) fn set_options(&mut self, now: Instant, idx: u32, opts: SocketOptions) -> Result<(), RequestError> {
        let t = self.tcb_mut(idx).ok_or(RequestError::NoConnection)?;
        if opts.congestion != t.opts.congestion || opts.recv_buffer == 0 || opts.send_buffer == 0 {
            return Err(RequestError::InvalidArgument);
        }
        let max_rcv = (u16::MAX as usize) << t.rcv_wscale;
        t.opts = SocketOptions { recv_buffer: opts.recv_buffer.min(max_rcv), ..opts };
        if opts.keepalive.is_none() && t.state != State::FinWait2 {
            t.timers.keepalive.clear();
        } else if let Some(ka) = opts.keepalive {
            if t.state.is_synchronized() && t.timers.keepalive.is_none() {
                t.timers.keepalive.set(now + ka.idle);
            }
        }
        self.changed(idx);
        Ok(())
    }

    /// The connection's addresses and ports.
    pub(crate) fn tuple(&self, idx: u32) -> Option<FourTuple> {
        Some(self.tcb(idx)?.tuple)
    }

    /// After a read: whether the protocol thread has something to do for the connection (the
    /// freed space is worth a window update of its own, or verified data now owes an ACK).
    pub(crate) fn read_wants_output(&self, idx: u32) -> bool {
        self.tcb(idx).is_some_and(|t| t.dirty || output::window_update_urgent(t))
    }

    /// The window-update decision after reads on another thread (receiver SWS avoidance,
    /// RFC 9293 §3.8.6.2.2, and Linux's stricter rule for an update of its own,
    /// [`output::window_update_urgent`]): if due, an ACK is owed now. Returns whether it was.
    pub(crate) fn window_update_now(&mut self, idx: u32) -> bool {
        let Some(t) = self.tcb_mut(idx) else { return false };
        if !output::window_update_urgent(t) {
            return false;
        }
        t.owe_ack();
        self.changed(idx);
        true
    }

    /// Close every listener and reset every connection, as a process exiting does.
    pub(crate) fn reset_all(&mut self, now: Instant, io: Io<'_>) {
        let Io { pool, iface, tx } = io;
        for li in 0..self.listeners.len() as u32 {
            self.unlisten(now, li, Io { pool, iface: &mut *iface, tx: &mut *tx });
        }
        for idx in 0..self.slots.len() as u32 {
            if self.tcb(idx).is_some() {
                let _ = self.abort(now, idx, Io { pool, iface: &mut *iface, tx: &mut *tx });
            }
        }
    }
}

/// What a read that takes no byte returns: the connection's error if it has one, else the
/// end of the stream (`Ok(0)`) once read past the FIN or closed, else `WouldBlock`.
#[inline(always)]
fn empty_read(tcb: &tcb::Tcb) -> Result<usize, RequestError> {
    match tcb.error {
        Some(e) => Err(e.into()),
        None if tcb.read_closed() => Ok(0),
        None => Err(RequestError::WouldBlock),
    }
}

/// Whether a segment's bytes may go to the caller as they are: its checksum was verified on
/// arrival, or its deferred one (`unverified`: the pseudo-header's and header's sum) checks
/// now, in a pass of its own.
fn checks(unverified: Option<u16>, src: &[u8]) -> bool {
    unverified.is_none_or(|header_sum| input::payload_checks(header_sum, src))
}
