//! Time as an input: the protocol core never reads a clock.
//!
//! The protocol core never reads a clock. Callers pass an [`Instant`]: the real clock in a
//! runtime, virtual time in the simulator. An `Instant` is nanoseconds since an arbitrary
//! epoch chosen by the caller; `u64` nanoseconds last 584 years.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
pub use core::time::Duration;

/// A point in time, in nanoseconds since an epoch chosen by the caller.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    nanos: u64,
}

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant { nanos: 0 };

    /// `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant { nanos }
    }
    /// `micros` microseconds after the epoch, saturating at `u64::MAX` nanoseconds.
    pub const fn from_micros(micros: u64) -> Instant {
        Instant { nanos: micros.saturating_mul(1_000) }
    }
    /// `millis` milliseconds after the epoch, saturating at `u64::MAX` nanoseconds.
    pub const fn from_millis(millis: u64) -> Instant {
        Instant { nanos: millis.saturating_mul(1_000_000) }
    }
    /// `secs` seconds after the epoch, saturating at `u64::MAX` nanoseconds.
    pub const fn from_secs(secs: u64) -> Instant {
        Instant { nanos: secs.saturating_mul(1_000_000_000) }
    }
    /// Nanoseconds since the epoch.
    pub const fn total_nanos(self) -> u64 {
        self.nanos
    }
    /// Whole microseconds since the epoch, rounded down.
    pub const fn total_micros(self) -> u64 {
        self.nanos / 1_000
    }
    /// Whole milliseconds since the epoch, rounded down.
    pub const fn total_millis(self) -> u64 {
        self.nanos / 1_000_000
    }
    /// Nanoseconds since `earlier`, zero if `earlier` is later (what
    /// [`saturating_duration_since`](Self::saturating_duration_since) gives, without building
    /// a `Duration`: the hot path compares it with a bound it keeps in nanoseconds).
    #[inline]
    pub const fn nanos_since(self, earlier: Instant) -> u64 {
        self.nanos.saturating_sub(earlier.nanos)
    }
    /// `nanos` nanoseconds later, saturating.
    #[inline]
    pub const fn plus_nanos(self, nanos: u64) -> Instant {
        Instant { nanos: self.nanos.saturating_add(nanos) }
    }
    /// Time since `earlier`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.nanos.saturating_sub(earlier.nanos))
    }
}

/// Whole nanoseconds, saturating (without the u128 arithmetic of `as_nanos`: timers are set
/// on every ACK).
#[inline]
fn duration_nanos(d: Duration) -> u64 {
    d.as_secs().saturating_mul(1_000_000_000).saturating_add(d.subsec_nanos() as u64)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, d: Duration) -> Instant {
        Instant { nanos: self.nanos.saturating_add(duration_nanos(d)) }
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant { nanos: self.nanos.saturating_sub(duration_nanos(d)) }
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero, like [`Instant::saturating_duration_since`].
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}s", self.nanos / 1_000_000_000, self.nanos % 1_000_000_000)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!((t + Duration::from_millis(3)).total_millis(), 8);
        assert_eq!(t - Instant::from_secs(1), Duration::ZERO);
        assert_eq!(Instant::from_nanos(u64::MAX) + Duration::from_secs(1), Instant::from_nanos(u64::MAX));
        assert_eq!(format!("{:?}", Instant::from_micros(1_500_000)), "1.500000000s");
    }
}
