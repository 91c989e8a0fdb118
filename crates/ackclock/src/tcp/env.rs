//! What protocol routines may touch besides their own TCB: the time, the configuration,
//! the counters, and the way out (pool, interface, transmit batch). One struct, so that
//! input, output and timer code borrow the stack's parts disjointly.

use super::config::TcpConfig;
use super::stats::Counters;
use super::trace::Trace;
use crate::buf::Pool;
use crate::iface::Interface;
use crate::phy::Batch;
use crate::time::{Duration, Instant};

pub(crate) struct Env<'a> {
    pub now: Instant,
    pub config: &'a TcpConfig,
    pub counters: &'a mut Counters,
    pub challenge: &'a mut ChallengeLimiter,
    pub pool: &'a Pool,
    pub iface: &'a mut Interface,
    pub tx: &'a mut Batch,
    pub trace: &'a mut Trace,
}

/// RFC 5961 §7: at most `limit` challenge ACKs per second, stack-wide.
#[derive(Debug, Default)]
pub(crate) struct ChallengeLimiter {
    window_start: Instant,
    sent: u32,
}

impl ChallengeLimiter {
    pub fn allow(&mut self, now: Instant, limit: u32) -> bool {
        if now >= self.window_start + Duration::from_secs(1) || now < self.window_start {
            self.window_start = now;
            self.sent = 0;
        }
        if self.sent < limit {
            self.sent += 1;
            true
        } else {
            false
        }
    }
}
