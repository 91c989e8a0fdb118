//! Sequence numbers: 32-bit, compared modulo 2^32 (RFC 9293 §3.4).
//!
//! `a < b` means `b` is ahead of `a` by less than 2^31. That is a total order only inside a
//! window of 2^31, which TCP's windows (at most 2^30 with scaling, RFC 7323 §2.3) respect.

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A TCP sequence number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// Distance from `earlier` to `self`, wrapping: how many bytes `self` is ahead.
    #[inline]
    pub fn since(self, earlier: SeqNumber) -> u32 {
        self.0.wrapping_sub(earlier.0)
    }

    /// The later of two sequence numbers.
    #[inline]
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self < other {
            other
        } else {
            self
        }
    }

    /// The earlier of two sequence numbers.
    #[inline]
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self < other {
            self
        } else {
            other
        }
    }

    /// `start <= self < end`.
    #[inline]
    pub fn in_range(self, start: SeqNumber, end: SeqNumber) -> bool {
        self.since(start) < end.since(start)
    }
}

impl PartialOrd for SeqNumber {
    #[inline]
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        Some((self.0.wrapping_sub(other.0) as i32).cmp(&0))
    }
}

impl Add<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn add(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(n))
    }
}

impl AddAssign<u32> for SeqNumber {
    #[inline]
    fn add_assign(&mut self, n: u32) {
        self.0 = self.0.wrapping_add(n);
    }
}

impl Sub<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn sub(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(n))
    }
}

impl fmt::Debug for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_wrap() {
        let a = SeqNumber(u32::MAX - 10);
        let b = a + 20;
        assert_eq!(b.0, 9);
        assert!(a < b);
        assert!(b > a);
        assert!(a.partial_cmp(&a) == Some(core::cmp::Ordering::Equal));
        assert_eq!(b.since(a), 20);
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
        assert!((a + 5).in_range(a, b));
        assert!(!b.in_range(a, b));
        assert!(!(a - 1).in_range(a, b));
        assert!(!a.in_range(a, a), "empty range");
    }
}
