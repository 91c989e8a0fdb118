//! The send queue's cuts: finding the segment that holds a sequence number, cutting a sent
//! offload unit into MSS-sized views of its buffer, giving a segment a buffer of its own,
//! and splitting one to fit a small window. The queue is contiguous in sequence space, one
//! entry per segment as sent (or to be sent); Linux's `tcp_fragment` and `tso_fragment` do
//! the same to its `sk_buff` queue.

use super::env::Env;
use super::seq::SeqNumber;
use super::stats::DropReason;
use super::tcb::{Tcb, TxSeg};
use std::collections::VecDeque;

/// Send again from SND.UNA (after a timeout, or a Datagram Too Big): SND.NXT goes back to
/// it. SACKed segments keep their marks, so only what the peer has not SACKed is sent
/// again, unless the first unacknowledged one is marked: then the receiver reneged and
/// every mark goes.
pub(crate) fn go_back_to_una(tcb: &mut Tcb) {
    super::recovery::clear_if_reneged(tcb);
    tcb.snd_nxt = tcb.snd_una;
    tcb.snd_nxt_idx = index_of(tcb, tcb.snd_una);
}

/// Index of the send-queue segment holding `seq` (the queue length if past the data).
pub(crate) fn index_of(tcb: &Tcb, seq: SeqNumber) -> usize {
    // The queue is contiguous in sequence space: binary search on segment starts.
    let q = &tcb.sndq;
    let (mut lo, mut hi) = (0, q.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if q[mid].end() <= seq {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// After segment `idx` went out as one offload frame, cut its queue entry into MSS-sized
/// entries that share the buffer read-only (a reference each, no copy). From here on the
/// scoreboard, ACKs and retransmissions see ordinary segments, as Linux's
/// `tcp_fragment` leaves them; a retransmitted piece gets a buffer of its own then
/// ([`unshare`]). Returns the number of entries.
///
/// The pieces' references are counted with one atomic addition
/// ([`PBuf::shares`](crate::buf::PBuf::shares)), and the segments queued behind `idx` move
/// once, not once per piece.
pub(super) fn slice_sent(tcb: &mut Tcb, idx: usize, mss: u32) -> usize {
    let seg = &tcb.sndq[idx];
    let (seq, len, sent, sent_at) = (seg.seq, seg.len(), seg.sent, seg.sent_at);
    let pieces = len.div_ceil(mss) as usize;
    if pieces < 2 {
        return pieces;
    }
    let behind = tcb.sndq.len() - idx - 1;
    let shares = seg.buf.shares(pieces as u32 - 1);
    for (k, mut buf) in (1..pieces as u32).zip(shares) {
        let off = k * mss;
        // Cannot fail: both stay inside the view.
        let _ = buf.trim_front(off as usize);
        let _ = buf.truncate(mss.min(len - off) as usize);
        tcb.sndq.push_back(TxSeg { seq: seq + off, buf, sent, sent_at, sacked: false });
    }
    // The pieces went to the back: the `behind` segments that were there go after them.
    rotate_back(&mut tcb.sndq, idx + 1, behind);
    let _ = tcb.sndq[idx].buf.truncate(mss as usize);
    pieces
}

/// Move the `n` entries of `q` from `at` on to its back, keeping the order of both parts
/// (a rotation of `q[at..]` by `n`, by three reversals: each entry moves about twice).
fn rotate_back<T>(q: &mut VecDeque<T>, at: usize, n: usize) {
    let end = q.len();
    if n == 0 || at + n == end {
        return;
    }
    let reverse = |q: &mut VecDeque<T>, mut i: usize, mut j: usize| {
        while i + 1 < j {
            j -= 1;
            q.swap(i, j);
            i += 1;
        }
    };
    reverse(q, at, end);
    reverse(q, at, end - n);
    reverse(q, end - n, end);
}

/// Give segment `idx` a buffer of its own (copy of the payload) because the old one is
/// still held elsewhere; summed during the copy unless the device completes checksums.
pub(super) fn unshare(env: &mut Env, tcb: &mut Tcb, idx: usize) -> bool {
    let Ok(mut fresh) = env.pool.alloc() else {
        env.counters.drop(DropReason::NoBuffer);
        return false;
    };
    let seg = &mut tcb.sndq[idx];
    let src = seg.buf.data();
    let copied = match super::output::partial_sums(env) {
        true => fresh.append_copy(src),
        false => fresh.append_copy_sum(src).map(|_| ()),
    };
    if copied.is_err() {
        env.counters.drop(DropReason::NoBuffer);
        return false;
    }
    seg.buf = fresh;
    env.counters.tx_copies += 1;
    true
}

/// Split send-queue segment `idx` after its first `n` bytes: the front moves to a new
/// buffer (summed during the copy, unless the device completes checksums), the back keeps
/// the old one with its cached sum adjusted arithmetically. Used to send part of a segment
/// into a small window.
pub(crate) fn split_front(env: &mut Env, tcb: &mut Tcb, idx: usize, n: usize) -> Result<(), ()> {
    let Ok(mut front) = env.pool.alloc() else {
        env.counters.drop(DropReason::NoBuffer);
        return Err(());
    };
    let seg = &mut tcb.sndq[idx];
    if n == 0 || n >= seg.buf.len() {
        return Err(());
    }
    let src = &seg.buf.data()[..n];
    let trimmed = match super::output::partial_sums(env) {
        true => front.append_copy(src).map(|_| seg.buf.trim_front(n)),
        false => front.append_copy_sum(src).map(|sum| seg.buf.trim_front_summed(n, sum)),
    };
    let Ok(trimmed) = trimmed else {
        env.counters.drop(DropReason::NoBuffer);
        return Err(());
    };
    if trimmed.is_err() {
        return Err(());
    }
    env.counters.tx_splits += 1;
    let seq = seg.seq;
    seg.seq = seq + n as u32;
    let new = TxSeg { seq, buf: front, sent: seg.sent, sent_at: seg.sent_at, sacked: false };
    tcb.sndq.insert(idx, new);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rotate_back;
    use std::collections::VecDeque;

    #[test]
    fn rotate_back_moves_a_run_behind_the_rest_in_order() {
        for len in 0..9usize {
            for at in 0..=len {
                for n in 0..=len - at {
                    // Also across the ring's wrap: start the deque part-way into its buffer.
                    let mut q: VecDeque<usize> = VecDeque::with_capacity(len + 3);
                    for _ in 0..3 {
                        q.push_back(usize::MAX);
                    }
                    q.extend(0..len);
                    q.drain(..3);
                    rotate_back(&mut q, at, n);
                    let want: Vec<usize> = (0..at).chain(at + n..len).chain(at..at + n).collect();
                    assert_eq!(q.iter().copied().collect::<Vec<_>>(), want, "len {len} at {at} n {n}");
                }
            }
        }
    }
}
