//! Stack-wide counters, like `netstat -s`, and the reasons a frame or segment is dropped.
//!
//! Every layer counts here (the interface its link and IP drops, TCP its segments), so this
//! module sits below all of them. Each drop reason is listed once, in the `counters!`
//! invocation below, which makes the enum, its counter field, and the code that counts and
//! sums them.

macro_rules! counters {
    (
        counters { $( $(#[$cm:meta])* $c:ident, )* }
        drops { $( $(#[$dm:meta])* $v:ident => $d:ident, )* }
    ) => {
        /// Why the stack dropped a received frame or segment.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum DropReason {
            $( $(#[$dm])* $v, )*
        }

        impl DropReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$v,)*];

            /// The name of the reason's counter in [`Counters`] (`drops_...`).
            pub fn counter_name(self) -> &'static str {
                match self {
                    $(DropReason::$v => stringify!($d),)*
                }
            }
        }

        /// Stack-wide counters, like `netstat -s`.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[$cm])* pub $c: u64, )*
            $( $(#[$dm])* pub $d: u64, )*
        }

        impl Counters {
            /// Count a drop.
            pub fn drop(&mut self, reason: DropReason) {
                match reason {
                    $(DropReason::$v => self.$d += 1,)*
                }
            }

            /// Drops of one reason.
            pub fn dropped(&self, reason: DropReason) -> u64 {
                match reason {
                    $(DropReason::$v => self.$d,)*
                }
            }

            /// Drops of every reason.
            pub fn drops(&self) -> u64 {
                0 $(+ self.$d)*
            }

            /// Every counter with its name, in declaration order (for printing and JSON).
            pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($c), self.$c),)* $((stringify!($d), self.$d),)*].into_iter()
            }
        }
    };
}

counters! {
    counters {
        /// Frames taken from the device.
        frames_in,
        /// Frames handed to the device.
        frames_out,
        /// TCP segments received.
        segs_in,
        /// TCP segments sent.
        segs_out,
        /// Segments retransmitted (any cause).
        retransmitted,
        /// Retransmission timeouts (RFC 6298 §5.5; Linux `TCPTimeouts`), of every connection.
        rtos,
        /// Connections opened by `connect`.
        active_opens,
        /// Connections opened by a listener.
        passive_opens,
        /// Active opens that failed (refused, reset or timed out before ESTABLISHED).
        failed_opens,
        /// RSTs sent.
        resets_sent,
        /// RSTs accepted.
        resets_received,
        /// Connections reset from ESTABLISHED or CLOSE-WAIT.
        established_resets,
        /// SACK blocks of acceptable ACKs that were ignored: empty, inverted, outside
        /// `[snd_una, snd_max]` (stale or forged, RFC 6675 §5), or on a connection without SACK.
        sack_blocks_ignored,
        /// Challenge ACKs sent (RFC 5961 §3.2, §4.2, §5.2).
        challenge_acks,
        /// Challenge ACKs not sent because of the rate limit (RFC 5961 §7).
        challenge_acks_suppressed,
        /// Connections that timed out (retransmissions, keep-alive or user timeout).
        timeouts,
        /// Segments whose headers had to be rebuilt in a fresh buffer because a device still
        /// held the original (rare: the single-copy path).
        tx_copies,
        /// Unsent segments cut to fit a window: the front moves to a fresh buffer (a copy of it).
        tx_splits,
        /// Frames the device queue would not take.
        tx_dropped,
        /// Pure ACKs sent at once in quick-ACK mode that the delayed-ACK rule would have held
        /// back (`TcpConfig::quick_acks`).
        quick_acks,
        /// Urgent pointers received that told an application of urgent data, new or further
        /// into the stream (RFC 9293 §3.8.5).
        urgent_signals,
        /// Data segments received on the header-prediction fast path.
        fast_path_data,
        /// Pure ACKs received on the header-prediction fast path.
        fast_path_acks,
        /// Segments that took the full input path.
        slow_path,
        /// Data segments sent by the predicted transmit path (new data in order, from the
        /// connection's header template); the others took the general output path.
        fast_path_sends,
        /// Received segments whose checksum was left for the reader's copy but checked in a
        /// pass of its own, because an ACK (or the input path) had to cover them first: the
        /// fused copy (Jacobson 1993) lost, a second pass over the payload paid.
        csum_verified_early,
        /// Of `csum_verified_early`, those checked because an ACK was about to cover them
        /// (not because the input path needed `rcv_nxt` settled: a FIN, a segment out of
        /// order or not deferrable).
        csum_verified_for_ack,
        /// UDP datagrams received (well-formed, before the socket lookup).
        udp_in,
        /// UDP datagrams handed to the application (checksum good).
        udp_delivered,
        /// UDP datagrams sent.
        udp_out,
        /// ICMP port-unreachable messages sent for datagrams no socket took.
        icmp_unreachable_sent,
        /// ICMP errors not sent because of the rate limit (Linux's `icmp_ratelimit`).
        icmp_rate_limited,
        /// ICMP messages received that the stack takes no action on: echo replies,
        /// destination unreachables that quote nothing a connection or a connected UDP
        /// socket has sent (RFC 5927 §4.1: not believed), and well-formed types it has no
        /// use for (RFC 1122 §3.2.2: silently discarded).
        icmp_ignored,
        /// Connection attempts (SYN-SENT) ended by a Destination Unreachable for their SYN,
        /// as Linux ends them (RFC 5461 §4.1).
        icmp_connect_aborts,
        /// Destination Unreachables for a synchronized connection's segment in flight:
        /// kept as a soft error (RFC 1122 §4.2.3.9; RFC 5927 §5.2 for the hard ones), and
        /// reported if the connection then times out.
        icmp_soft_errors,
        /// Retransmission timer backoffs taken back on a network or host unreachable for a
        /// retransmission (RFC 6069).
        icmp_rto_reverts,
        /// Destination Unreachables with a hard error (port or protocol unreachable, and
        /// the administrative ones) for a connected UDP socket's datagram: its next call
        /// fails with the error, as on Linux.
        icmp_udp_errors,
        /// Datagram Too Big messages (RFC 1191) that lowered a connection's segment size.
        pmtu_reductions,
        /// Datagram Too Big messages for a TCP segment that no connection has in flight
        /// (RFC 5927 §4.1: not believed), or reporting an MTU no smaller than the one in use,
        /// or for a UDP datagram of no socket connected to its destination.
        pmtu_ignored,
        /// Times a connection's segment size followed a changed path MTU estimate for its
        /// peer before sending: one another connection's Datagram Too Big lowered, or one
        /// that expired (RFC 1191 §5, §6.3).
        pmtu_followed,
        /// Datagram Too Big messages for a datagram of a UDP socket connected to the quoted
        /// destination: its path MTU learned (RFC 1191 §5), the socket told (EMSGSIZE).
        pmtu_udp,
        /// Times a connection lowered its segment size after repeated retransmission
        /// timeouts, suspecting a path MTU black hole (`TcpConfig::mtu_probing`).
        mtu_black_holes,
        /// SYN-ACKs sent with a SYN cookie instead of a SYN queue entry (RFC 4987 §3.6).
        syn_cookies_sent,
        /// Handshake ACKs whose SYN cookie was valid: connections rebuilt from a cookie.
        syn_cookies_validated,
        /// TIME-WAIT entries dropped before their 2 MSL because the table was full
        /// (`TcpConfig::max_time_wait`).
        time_wait_overflow,
        /// Idle connections whose drained queues gave their storage back (`tcp::reclaim`).
        conn_storage_reclaimed,
        /// Aggregates of two or more segments or ACKs that TCP processed once (receive
        /// aggregation, `tcp::Aggregation`).
        lro_aggregates,
        /// Data segments that arrived inside an aggregate.
        lro_segments,
        /// Pure ACKs merged into a newer one (their buffers went back to the pool at once).
        lro_acks,
        /// Segments and ACKs that receive aggregation took by comparing their frame's
        /// headers with a template frame's (a run, `tcp::lro::run`), without the ordinary
        /// per-frame checks.
        lro_run_frames,
        /// Aggregation flows flushed because the batch ended.
        lro_flush_batch,
        /// ... because the aggregate was full.
        lro_flush_full,
        /// ... because the flow table was full.
        lro_flush_table,
        /// ... because a segment carried PSH (merged, then flushed).
        lro_flush_push,
        /// ... because a segment carried SYN, FIN, RST, URG, CWR or ECE.
        lro_flush_flags,
        /// ... because a segment carried options other than timestamps (SACK blocks).
        lro_flush_options,
        /// ... because a segment was not the next in sequence (a gap or a duplicate).
        lro_flush_order,
        /// ... because of a duplicate ACK (never merged: fast retransmit counts them).
        lro_flush_dupack,
        /// ... because the window changed.
        lro_flush_window,
        /// ... because a segment was not of the aggregate's size.
        lro_flush_size,
        /// ... for any other reason (ACK number, timestamps, TOS, checksum state, a frame
        /// that is not a common one, a connection header prediction would not take).
        lro_flush_other,
    }
    drops {
        /// A frame or header failed to parse.
        Malformed => drops_malformed,
        /// IPv4 header, TCP or UDP checksum did not verify.
        BadChecksum => drops_bad_checksum,
        /// Not for one of our addresses.
        NotForUs => drops_not_for_us,
        /// An IPv4 fragment (no reassembly).
        Fragment => drops_fragment,
        /// A protocol the stack does not handle.
        UnknownProtocol => drops_unknown_protocol,
        /// A segment outside the receive window (acknowledged, then dropped).
        OutOfWindow => drops_out_of_window,
        /// Timestamp older than TS.Recent (RFC 7323 §5 PAWS).
        Paws => drops_paws,
        /// An RST that did not match exactly (RFC 5961 §3).
        BadRst => drops_bad_rst,
        /// An ACK for data never sent, or too old (RFC 5961 §5).
        BadAck => drops_bad_ack,
        /// A SYN to a listener whose SYN or accept queue is full.
        ListenOverflow => drops_listen_overflow,
        /// An ACK to a listener that sent SYN cookies lately whose cookie did not verify
        /// (wrong, forged or expired): the SYN cookies that failed (answered with RST).
        BadCookie => drops_bad_cookie,
        /// No buffer left in the pool.
        NoBuffer => drops_no_buffer,
        /// The receive queue hit its buffer-count bound, or out-of-order data was not held
        /// because the pool it arrived in was running low.
        RcvQueueFull => drops_rcvq_full,
        /// Segment for a connection that has no state for it (answered with RST if allowed).
        NoConnection => drops_no_connection,
        /// Anything else the state machine discards (e.g. no ACK bit).
        Discarded => drops_discarded,
        /// A UDP datagram to a port no socket is bound to (Linux `NoPorts`).
        UdpNoPort => drops_udp_no_port,
        /// A UDP datagram for a socket whose receive queue is full (Linux `RcvbufErrors`).
        UdpRcvbuf => drops_udp_rcvbuf,
        /// A source address that names no single host (RFC 1122 §3.2.1.3: 0/8, 127/8,
        /// class D and E, 255.255.255.255, the subnet's directed broadcast).
        Martian => drops_martian,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_counts_in_its_own_field_and_in_the_total() {
        let mut c = Counters::default();
        for (i, &r) in DropReason::ALL.iter().enumerate() {
            for _ in 0..=i {
                c.drop(r);
            }
        }
        for (i, &r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(c.dropped(r), i as u64 + 1, "{r:?}");
            let named = c.named().find(|&(n, _)| n == r.counter_name()).map(|(_, v)| v);
            assert_eq!(named, Some(i as u64 + 1), "{r:?} under its counter's name");
        }
        let n = DropReason::ALL.len() as u64;
        assert_eq!(c.drops(), n * (n + 1) / 2);
        assert_eq!(c.drops_bad_checksum, 2, "BadChecksum is the second reason");
    }
}
