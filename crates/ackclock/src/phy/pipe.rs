//! An in-memory pipe: two device endpoints joined back to back. A frame transmitted on one
//! end is received on the other as the same buffer: no copy, only the handle moves.
//!
//! Each direction is a queue of bounded depth. A frame sent into a full queue is dropped and
//! counted, as a NIC's full transmit ring would. The endpoints may live on different threads.

use super::{Batch, Capabilities, Device, DeviceStats, Wakeup};
use crate::buf::PBuf;
use crate::time::Instant;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// How a pipe is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipeConfig {
    /// Frames each direction holds before it drops.
    pub depth: usize,
    /// What both ends report. Defaults to plain Ethernet with MTU 1500 and no offloads, so
    /// that the stack computes and verifies every checksum itself.
    pub capabilities: Capabilities,
}

impl Default for PipeConfig {
    fn default() -> Self {
        PipeConfig { depth: 1024, capabilities: Capabilities::ethernet(1500) }
    }
}

/// One direction of the pipe.
#[derive(Debug)]
struct Queue {
    frames: VecDeque<PBuf>,
    depth: usize,
    /// Called when a frame arrives at the empty queue (set by the receiving end).
    wakeup: Option<Arc<dyn Wakeup>>,
}

/// Two connected endpoints.
pub fn pipe(config: PipeConfig) -> (PipeEnd, PipeEnd) {
    let queue = || {
        Arc::new(Mutex::new(Queue { frames: VecDeque::with_capacity(config.depth), depth: config.depth, wakeup: None }))
    };
    let (a_to_b, b_to_a) = (queue(), queue());
    let a = PipeEnd {
        tx: a_to_b.clone(),
        rx: b_to_a.clone(),
        capabilities: config.capabilities,
        stats: DeviceStats::default(),
    };
    let b = PipeEnd { tx: b_to_a, rx: a_to_b, capabilities: config.capabilities, stats: DeviceStats::default() };
    (a, b)
}

/// One end of a [`pipe`].
#[derive(Debug)]
pub struct PipeEnd {
    tx: Arc<Mutex<Queue>>,
    rx: Arc<Mutex<Queue>>,
    capabilities: Capabilities,
    stats: DeviceStats,
}

fn lock(q: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    // A panic while holding the lock cannot leave a VecDeque half-updated in a way that
    // matters here, so poisoning is ignored.
    q.lock().unwrap_or_else(|e| e.into_inner())
}

impl PipeEnd {
    /// Frames waiting to be received at this end.
    pub fn pending(&self) -> usize {
        lock(&self.rx).frames.len()
    }

    /// Call `wakeup` whenever a frame arrives at this end while nothing was waiting here, so
    /// that a thread owning this end can sleep until then (the other end's transmit calls
    /// it). The receiver must take all pending frames before it sleeps again: only the
    /// first frame into an empty queue wakes it.
    pub fn set_wakeup(&self, wakeup: Arc<dyn Wakeup>) {
        lock(&self.rx).wakeup = Some(wakeup);
    }
}

impl Device for PipeEnd {
    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn receive(&mut self, _now: Instant, rx: &mut Batch) -> usize {
        let mut q = lock(&self.rx);
        let mut n = 0;
        while !rx.is_full() {
            let Some(frame) = q.frames.pop_front() else { break };
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += frame.len() as u64;
            // Cannot fail: checked `is_full` above.
            let _ = rx.push(frame);
            n += 1;
        }
        n
    }

    fn transmit(&mut self, _now: Instant, tx: &mut Batch) -> usize {
        let mut q = lock(&self.tx);
        let was_empty = q.frames.is_empty();
        let mut n = 0;
        while let Some(frame) = tx.pop() {
            if q.frames.len() >= q.depth {
                self.stats.tx_dropped += 1;
                continue; // dropping the handle frees the buffer
            }
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += frame.len() as u64;
            q.frames.push_back(frame);
            n += 1;
        }
        let wakeup = if was_empty && n > 0 { q.wakeup.clone() } else { None };
        drop(q);
        if let Some(w) = wakeup {
            w.wake();
        }
        n
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};

    fn frame(pool: &Pool, byte: u8) -> PBuf {
        let mut b = pool.alloc().unwrap();
        b.append(60).unwrap().fill(byte);
        b
    }

    #[test]
    fn frames_cross_without_copy_in_order() {
        let pool = Pool::new(PoolConfig { buffers: 8, ..Default::default() }).unwrap();
        let (mut a, mut b) = pipe(PipeConfig::default());
        let mut tx = Batch::with_capacity(4);
        let mut indices = Vec::new();
        for i in 0..3 {
            let f = frame(&pool, i);
            indices.push(f.index());
            tx.push(f).unwrap();
        }
        assert_eq!(a.transmit(Instant::ZERO, &mut tx), 3);
        assert!(tx.is_empty());
        assert_eq!(b.pending(), 3);
        let mut rx = Batch::with_capacity(2);
        assert_eq!(b.receive(Instant::ZERO, &mut rx), 2, "stops when the batch is full");
        assert_eq!(b.pending(), 1);
        let got: Vec<_> = rx.iter().map(|f| (f.index(), f.data()[0])).collect();
        assert_eq!(got, vec![(indices[0], 0), (indices[1], 1)], "same buffers, in order");
        rx.clear();
        assert_eq!(b.receive(Instant::ZERO, &mut rx), 1);
        rx.clear();
        assert_eq!(pool.available(), 8);
        assert_eq!(a.stats().tx_frames, 3);
        assert_eq!(b.stats().rx_bytes, 180);
    }

    #[test]
    fn full_queue_drops_and_counts() {
        let pool = Pool::new(PoolConfig { buffers: 8, ..Default::default() }).unwrap();
        let (mut a, mut b) = pipe(PipeConfig { depth: 2, ..Default::default() });
        let mut tx = Batch::with_capacity(8);
        for i in 0..5 {
            tx.push(frame(&pool, i)).unwrap();
        }
        assert_eq!(a.transmit(Instant::ZERO, &mut tx), 2);
        assert_eq!(a.stats().tx_dropped, 3);
        assert_eq!(pool.available(), 6, "dropped frames went back to the pool");
        let mut rx = Batch::with_capacity(8);
        assert_eq!(b.receive(Instant::ZERO, &mut rx), 2);
        assert_eq!(rx.iter().map(|f| f.data()[0]).collect::<Vec<_>>(), vec![0, 1]);
    }

    #[derive(Debug, Default)]
    struct Count(std::sync::atomic::AtomicUsize);
    impl Wakeup for Count {
        fn wake(&self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn wakeup_only_when_frames_reach_an_empty_end() {
        let pool = Pool::new(PoolConfig { buffers: 8, ..Default::default() }).unwrap();
        let (mut a, mut b) = pipe(PipeConfig::default());
        let woken = Arc::new(Count::default());
        b.set_wakeup(woken.clone());
        let mut tx = Batch::with_capacity(4);
        let send = |a: &mut PipeEnd, tx: &mut Batch, k: u8| {
            for i in 0..k {
                tx.push(frame(&pool, i)).unwrap();
            }
            a.transmit(Instant::ZERO, tx)
        };
        let woken_count = || woken.0.load(std::sync::atomic::Ordering::Relaxed);
        send(&mut a, &mut tx, 2);
        assert_eq!(woken_count(), 1, "the first frames into the empty queue wake the receiver");
        send(&mut a, &mut tx, 1);
        assert_eq!(woken_count(), 1, "frames behind undelivered ones do not wake it again");
        let mut rx = Batch::with_capacity(8);
        assert_eq!(b.receive(Instant::ZERO, &mut rx), 3);
        rx.clear();
        a.transmit(Instant::ZERO, &mut tx);
        assert_eq!(woken_count(), 1, "an empty transmit wakes nobody");
        send(&mut a, &mut tx, 1);
        assert_eq!(woken_count(), 2, "the queue was drained: the next frame wakes it");
        b.transmit(Instant::ZERO, &mut tx);
        assert_eq!(woken_count(), 2, "only this end's arrivals wake this end");
    }

    #[test]
    fn shared_frame_stays_with_sender_after_delivery() {
        let pool = Pool::new(PoolConfig { buffers: 2, ..Default::default() }).unwrap();
        let (mut a, mut b) = pipe(PipeConfig::default());
        let kept = frame(&pool, 7);
        let mut tx = Batch::with_capacity(1);
        tx.push(kept.share()).unwrap();
        a.transmit(Instant::ZERO, &mut tx);
        let mut rx = Batch::with_capacity(1);
        b.receive(Instant::ZERO, &mut rx);
        let mut got = rx.pop().unwrap();
        got.trim_front(10).unwrap();
        assert_eq!(got.len(), 50);
        assert_eq!(kept.len(), 60, "the sender's view is its own");
        drop(got);
        assert_eq!(pool.available(), 1);
        assert!(kept.is_unique());
    }
}
