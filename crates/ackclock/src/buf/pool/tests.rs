//! The pool's unit tests (the loom model is in `pool.rs`).

use super::*;
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;

fn pool(buffers: usize) -> Pool {
    Pool::new(PoolConfig { buffers, buffer_size: 256, headroom: 64 }).unwrap()
}

/// A buffer freed a moment ago is used again first (warm, and already resident), not
/// after the rest of the pool: a thousand allocate-and-free cycles touch one buffer.
#[test]
fn freed_buffers_are_used_again_first() {
    let p = pool(1024);
    let mut seen = HashSet::new();
    for _ in 0..1000 {
        let b = p.alloc().unwrap();
        seen.insert(b.index);
    }
    assert_eq!(seen.len(), 1, "{} buffers touched", seen.len());
    assert_eq!(p.available(), 1024);
}

/// Buffers are taken in order from those never used only when no freed one waits, and
/// only the ones used are ever on a list: giving memory back releases those, and leaves
/// the untouched rest (and their links) alone. Every buffer can still be taken once.
#[test]
fn buffers_never_taken_stay_untouched_until_needed() {
    let p = Pool::new(PoolConfig { buffers: 4096, buffer_size: 4096, headroom: 64 }).unwrap();
    let three: Vec<PBuf> = (0..3).map(|_| p.alloc().unwrap()).collect();
    assert_eq!(three.iter().map(|b| b.index).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(p.inner().take.0.fresh.load(Ordering::Relaxed), 3);
    drop(three);
    assert_eq!(p.available(), 4096);
    // The three used buffers come back first.
    let again = p.alloc().unwrap();
    assert!(again.index < 3, "{}", again.index);
    drop(again);
    assert_eq!(p.release_free(0), 3 * 4096, "only the three buffers ever used");
    assert_eq!(p.available(), 4096);
    assert_eq!(p.inner().take.0.fresh.load(Ordering::Relaxed), 3, "releasing took no fresh buffer");
    let all: Vec<PBuf> = (0..4096).map(|_| p.alloc().unwrap()).collect();
    assert_eq!(all.iter().map(|b| b.index).collect::<HashSet<_>>().len(), 4096);
    assert!(p.alloc().is_err());
}

/// Every buffer, all freed on another thread while the allocating list is empty, can be
/// allocated again: an allocation that finds its list empty takes the freed ones over.
#[test]
fn buffers_freed_elsewhere_are_all_taken_again() {
    let p = pool(100);
    let all: Vec<PBuf> = (0..100).map(|_| p.alloc().unwrap()).collect();
    assert!(p.alloc().is_err());
    assert_eq!(p.available(), 0);
    std::thread::spawn(move || drop(all)).join().unwrap();
    assert_eq!(p.available(), 100);
    let again: Vec<PBuf> = (0..100).map(|_| p.alloc().unwrap()).collect();
    assert!(p.alloc().is_err());
    assert_eq!(again.iter().map(|b| b.index).collect::<HashSet<_>>().len(), 100);
    drop(again);
    assert_eq!(p.available(), 100);
}

/// Two threads allocating (and racing to take freed buffers over) while two others free
/// what the first two hand them, in chains and one at a time: no buffer is ever held by
/// two owners, and every one comes back.
#[test]
fn two_allocators_two_freers() {
    let p = pool(64);
    // Fewer under Miri, which interprets every step (its race checks need only a few).
    let rounds = if cfg!(miri) { 300 } else { 20_000 };
    let owned: Arc<Vec<AtomicBool>> = Arc::new((0..64).map(|_| AtomicBool::new(false)).collect());
    let mut threads = vec![];
    for t in 0..2u64 {
        let (tx, rx) = std::sync::mpsc::sync_channel::<PBuf>(16);
        let (p, mine) = (p.clone(), owned.clone());
        threads.push(std::thread::spawn(move || {
            let owned = mine;
            let mut rng = t + 1;
            for _ in 0..rounds {
                let b = loop {
                    match p.alloc() {
                        Ok(b) => break b,
                        Err(_) => std::thread::yield_now(),
                    }
                };
                assert!(!owned[b.index as usize].swap(true, Ordering::AcqRel), "handed out twice");
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if rng % 3 == 0 {
                    owned[b.index as usize].store(false, Ordering::Release);
                    drop(b);
                } else {
                    tx.send(b).unwrap();
                }
            }
        }));
        let owned = owned.clone();
        threads.push(std::thread::spawn(move || {
            let mut chain = crate::buf::FreeChain::new();
            let mut n = 0u32;
            while let Ok(b) = rx.recv() {
                owned[b.index as usize].store(false, Ordering::Release);
                n += 1;
                if n % 2 == 0 {
                    chain.put(b);
                } else {
                    drop(b);
                }
                if n % 7 == 0 {
                    chain.flush();
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(p.available(), 64);
    assert!(owned.iter().all(|o| !o.load(Ordering::Relaxed)));
}
