//! Proof that the timing wheel allocates nothing after `TimerWheel::new` (no
//! allocation on the packet path): schedule, reschedule, cancel, expire and `next_deadline` 100k times each
//! under a counting global allocator.

mod common;

use ackclock::tcp::wheel::TimerWheel;
use ackclock::time::{Duration, Instant};
use common::alloc::{allocations, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn wheel_allocates_nothing_after_new() {
    const KEYS: u32 = 1_024;
    let mut wheel = TimerWheel::new(KEYS as usize, Duration::from_millis(1), Instant::ZERO);
    let mut fired: Vec<u32> = Vec::with_capacity(KEYS as usize);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut now = Instant::ZERO;
    let mut total_fired = 0u64;

    let before = allocations();
    for i in 0..100_000u32 {
        let key = (rng.next() % u64::from(KEYS)) as u32;
        // Deadlines from microseconds to hours ahead, some in the past.
        let ahead = match rng.next() % 4 {
            0 => Duration::from_micros(rng.next() % 5_000),
            1 => Duration::from_millis(rng.next() % 3_000),
            2 => Duration::from_secs(rng.next() % 7_200),
            _ => Duration::ZERO,
        };
        wheel.schedule(key, now + ahead);
        if i % 3 == 0 {
            wheel.cancel((rng.next() % u64::from(KEYS)) as u32);
        }
        std::hint::black_box(wheel.next_deadline());
        now += Duration::from_micros(rng.next() % 20_000);
        wheel.expire(now, |k| fired.push(k));
        total_fired += fired.len() as u64;
        // "Restart" half of the fired timers, as connections would.
        for (j, &k) in fired.iter().enumerate() {
            if j % 2 == 0 {
                wheel.schedule(k, now + Duration::from_millis(200));
            }
        }
        fired.clear();
    }
    // A jump of a day drains everything.
    now += Duration::from_secs(86_400);
    wheel.expire(now, |k| fired.push(k));
    let after = allocations();

    assert_eq!(after - before, 0, "{} allocations in 100,000 rounds", after - before);
    assert!(total_fired > 10_000, "the test exercised expiry ({total_fired} fired)");
    assert!(wheel.is_empty());
}

#[test]
fn the_counter_sees_allocations() {
    let before = allocations();
    let v = std::hint::black_box(vec![0u8; 100]);
    assert_eq!(allocations() - before, 1);
    drop(v);
}
