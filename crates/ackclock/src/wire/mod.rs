//! Packet formats: zero-copy typed views over byte slices, plus checked `parse`/`emit` of a
//! high-level representation, smoltcp-style. Every malformed input is a typed [`Error`],
//! never a panic.
//!
//! Each format has a view `Xxx<T: AsRef<[u8]>>` (read; with `T: AsMut<[u8]>` also write),
//! whose `new_checked` validates lengths once so that the accessors cannot go out of bounds,
//! and an `XxxRepr` with `parse` and `emit`.

#[macro_use]
mod view;

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod ipv4;
pub mod tcp;
pub mod udp;

// Re-exports of each format's main types (added by each format's module).
pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{Icmpv4Message, Icmpv4Packet, Icmpv4Repr};
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
pub use tcp::{SackBlocks, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};

pub use core::net::Ipv4Addr;

use core::fmt;

/// Why a packet was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than a fixed header, or than a length the packet declares
    /// (a header length, an IPv4 total length or a UDP length running past the buffer).
    Truncated,
    /// A header-length field below its minimum (IPv4 IHL < 5, TCP data offset < 5).
    BadHeaderLength,
    /// A length field inconsistent in itself (IPv4 total length < header length, UDP
    /// length < 8).
    BadLength,
    /// A version field other than the one this format supports (IPv4 version != 4).
    BadVersion,
    /// A malformed option: length 0 or 1, running past the header end, or a known option
    /// with the wrong length.
    BadOption,
    /// The checksum does not verify.
    BadChecksum,
    /// Well-formed, but a variant this stack does not handle (e.g. ARP over non-Ethernet
    /// hardware, an ICMP type without a representation).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated packet",
            Error::BadHeaderLength => "bad header length",
            Error::BadLength => "bad length field",
            Error::BadVersion => "bad version",
            Error::BadOption => "malformed option",
            Error::BadChecksum => "bad checksum",
            Error::Unsupported => "unsupported packet",
        };
        f.write_str(s)
    }
}

impl std::error::Error for Error {}

/// Result of parsing.
pub type Result<T> = core::result::Result<T, Error>;
