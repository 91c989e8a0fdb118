//! Packet capture in the classic libpcap format, readable by tcpdump and Wireshark.
//!
//! [`PcapWriter`] writes a capture to any [`std::io::Write`]: the 24-byte global header
//! (magic `0xa1b2c3d4` for microsecond or `0xa1b23c4d` for nanosecond timestamps, version
//! 2.4, link type 1 = Ethernet), then one record per frame. Everything is written
//! little-endian; readers tell the byte order from the magic.
//!
//! [`Capture`] wraps a [`Device`] and records every frame it receives and every frame it
//! takes for transmission, stamped with the `now` of the call: virtual time in the
//! simulator, so a capture of a simulated run shows simulated timestamps.

use super::{Batch, Capabilities, Device, DeviceStats};
use crate::time::Instant;
use std::io::{self, Write};

/// Link type of the records: Ethernet (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type of records that are bare IP packets, as a TUN carries them (LINKTYPE_RAW).
pub const LINKTYPE_RAW: u32 = 101;
/// Magic number of a capture with microsecond timestamps.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic number of a capture with nanosecond timestamps.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Default snapshot length: frames are recorded whole up to this many bytes.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Timestamp resolution of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Microsecond timestamps (magic `0xa1b2c3d4`).
    Micros,
    /// Nanosecond timestamps (magic `0xa1b23c4d`).
    Nanos,
}

/// Writes a libpcap capture; see the [module docs](self).
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    resolution: Resolution,
    snaplen: u32,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Start a capture on `out`: writes the global header.
    pub fn new(out: W, resolution: Resolution) -> io::Result<PcapWriter<W>> {
        PcapWriter::with_snaplen(out, resolution, DEFAULT_SNAPLEN)
    }

    /// A capture whose records keep at most `snaplen` bytes of each frame.
    pub fn with_snaplen(out: W, resolution: Resolution, snaplen: u32) -> io::Result<PcapWriter<W>> {
        PcapWriter::with_linktype(out, resolution, snaplen, LINKTYPE_ETHERNET)
    }

    /// A capture of a device's frames: Ethernet frames, or, on a device without a link
    /// header ([`Capabilities::ethernet`](super::Capabilities::ethernet) false), IP packets.
    pub fn for_link(out: W, resolution: Resolution, ethernet: bool) -> io::Result<PcapWriter<W>> {
        let linktype = if ethernet { LINKTYPE_ETHERNET } else { LINKTYPE_RAW };
        PcapWriter::with_linktype(out, resolution, DEFAULT_SNAPLEN, linktype)
    }

    /// A capture with this snap length and link type.
    pub fn with_linktype(mut out: W, resolution: Resolution, snaplen: u32, linktype: u32) -> io::Result<PcapWriter<W>> {
        let magic = match resolution {
            Resolution::Micros => MAGIC_MICROS,
            Resolution::Nanos => MAGIC_NANOS,
        };
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&magic.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes()); // version 2.4
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone (8..12) and sigfigs (12..16) stay zero: timestamps are UTC-like offsets.
        header[16..20].copy_from_slice(&snaplen.to_le_bytes());
        header[20..24].copy_from_slice(&linktype.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out, resolution, snaplen, records: 0 })
    }

    /// Record `frame` (an Ethernet frame without FCS, or an IP packet) at time `ts` since the clock's epoch.
    pub fn write_frame(&mut self, ts: Instant, frame: &[u8]) -> io::Result<()> {
        let nanos = ts.total_nanos();
        let secs = (nanos / 1_000_000_000) as u32;
        let frac = match self.resolution {
            Resolution::Micros => (nanos % 1_000_000_000 / 1_000) as u32,
            Resolution::Nanos => (nanos % 1_000_000_000) as u32,
        };
        let incl = frame.len().min(self.snaplen as usize);
        let mut header = [0u8; 16];
        header[0..4].copy_from_slice(&secs.to_le_bytes());
        header[4..8].copy_from_slice(&frac.to_le_bytes());
        header[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        header[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(&frame[..incl])?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The timestamp resolution of the records.
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The underlying writer, mutably.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// The underlying writer (not flushed).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A device that records its traffic into a [`PcapWriter`].
///
/// Received frames are recorded as the inner device hands them over. Frames to transmit are
/// recorded when they are offered, before the inner device takes them; a device that pushes
/// back leaves frames at the front of the ring, and those are not recorded again when the
/// same ring (as a [`Stack`](crate::Stack) passes its own) is offered next time. So over a
/// device that completes checksums (`tx_checksum`), a data segment is recorded with the
/// pseudo-header sum in its TCP checksum field, as tcpdump shows a Linux host's own
/// segments on an interface with checksum offload.
///
/// Device calls cannot fail, so the first write error is kept ([`Capture::error`]) and
/// recording stops; the device goes on working.
#[derive(Debug)]
pub struct Capture<D, W: Write> {
    inner: D,
    pcap: PcapWriter<W>,
    error: Option<io::Error>,
    /// Frames at the front of the transmit ring already recorded.
    offered: usize,
}

impl<D: Device, W: Write> Capture<D, W> {
    /// Wrap `inner`, recording its frames into `pcap`.
    pub fn new(inner: D, pcap: PcapWriter<W>) -> Capture<D, W> {
        Capture { inner, pcap, error: None, offered: 0 }
    }

    /// The wrapped device.
    pub fn get_ref(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn get_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The capture being written.
    pub fn writer(&self) -> &PcapWriter<W> {
        &self.pcap
    }

    /// The first write error, if any (recording stopped there).
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Take the first write error, if any; recording resumes.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    /// The device and the writer back.
    pub fn into_parts(self) -> (D, PcapWriter<W>) {
        (self.inner, self.pcap)
    }

    fn record(&mut self, now: Instant, frame: &[u8]) {
        if self.error.is_none() {
            if let Err(e) = self.pcap.write_frame(now, frame) {
                self.error = Some(e);
            }
        }
    }
}

impl<D: Device, W: Write> Device for Capture<D, W> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize {
        let before = rx.len();
        let n = self.inner.receive(now, rx);
        for frame in rx.iter().skip(before) {
            self.record(now, frame.data());
        }
        n
    }

    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize {
        let skip = self.offered.min(tx.len());
        for frame in tx.iter().skip(skip) {
            self.record(now, frame.data());
        }
        let n = self.inner.transmit(now, tx);
        self.offered = tx.len();
        n
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The global header's link type (bytes 20..24) says how to read the records: Ethernet
    /// frames, or IP packets from a device without a link header.
    #[test]
    fn link_type_follows_the_device() {
        let linktype = |w: PcapWriter<Vec<u8>>| u32::from_le_bytes(w.out[20..24].try_into().unwrap());
        let eth = PcapWriter::for_link(Vec::new(), Resolution::Micros, true).unwrap();
        assert_eq!(linktype(eth), LINKTYPE_ETHERNET);
        let raw = PcapWriter::for_link(Vec::new(), Resolution::Micros, false).unwrap();
        assert_eq!(linktype(raw), LINKTYPE_RAW);
        assert_eq!(linktype(PcapWriter::new(Vec::new(), Resolution::Nanos).unwrap()), 1);
    }
}
