//! The link's throughput ceiling, and the parsers for rates, delays and sizes.

use ackclock::sim::link::wire_bytes;
use ackclock::sim::{Duplex, LinkConfig, QueueLimit};
use ackclock::time::Duration;

/// Ethernet + IPv4 + TCP headers without options.
const HEADERS: usize = 14 + 20 + 20;

/// The best task-to-task throughput the link model allows for full-sized segments.
///
/// What is counted, per full-sized segment: its frame as built (Ethernet 14 + IPv4 20 +
/// TCP 20 + options + payload) plus what the simulated link charges on top (FCS 4,
/// preamble and delimiter 8, inter-frame gap 12; [`wire_bytes`]). On a half-duplex medium
/// the receiver's ACKs take turns with the data on the one wire: one bare ACK per two
/// segments (RFC 5681 delayed ACKs), so each segment carries half an ACK. On a full-duplex
/// link the ACKs have the other direction to themselves and cost the data nothing.
/// Handshake, ARP and FIN are left out (under 0.01% of 8 MB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ceiling {
    pub rate_bps: u64,
    pub half_duplex: bool,
    /// Payload of a full-sized segment.
    pub payload: usize,
    /// TCP option bytes in every segment (12 with timestamps).
    pub options: usize,
    /// A full-sized data frame and a bare ACK: as built, and on the wire.
    pub data_frame: usize,
    pub data_wire: usize,
    pub ack_frame: usize,
    pub ack_wire: usize,
    /// The ceiling, payload bytes per second.
    pub bytes_per_sec: f64,
}

impl Ceiling {
    pub fn new(link: &LinkConfig, payload: usize, timestamps: bool) -> Ceiling {
        let options = if timestamps { 12 } else { 0 };
        let data_frame = HEADERS + options + payload;
        let ack_frame = HEADERS + options;
        let (data_wire, ack_wire) = (wire_bytes(data_frame), wire_bytes(ack_frame));
        let rate_bps = link.a_to_b.rate_bps;
        let half_duplex = link.duplex == Duplex::Half;
        let per_segment = if half_duplex { data_wire as f64 + ack_wire as f64 / 2.0 } else { data_wire as f64 };
        let bytes_per_sec = rate_bps as f64 / 8.0 * payload as f64 / per_segment;
        Ceiling { rate_bps, half_duplex, payload, options, data_frame, data_wire, ack_frame, ack_wire, bytes_per_sec }
    }

    /// KB/s with KB = 1024 bytes, as in Jacobson 1988.
    pub fn kb_per_sec(&self) -> f64 {
        self.bytes_per_sec / 1024.0
    }

    /// The formula with this link's numbers.
    pub fn formula(&self) -> String {
        let r = sci(self.rate_bps);
        if self.half_duplex {
            format!(
                "max = {r}/8 B/s x 2x{p} / (2x{d} + {a}) = {b:.0} B/s = {k:.1} KB/s",
                p = self.payload,
                d = self.data_wire,
                a = self.ack_wire,
                b = self.bytes_per_sec,
                k = self.kb_per_sec()
            )
        } else {
            format!(
                "max = {r}/8 B/s x {p} / {d} = {b:.0} B/s = {k:.1} KB/s",
                p = self.payload,
                d = self.data_wire,
                b = self.bytes_per_sec,
                k = self.kb_per_sec()
            )
        }
    }

    /// What the formula counts, in words.
    pub fn explanation(&self) -> String {
        let opts = if self.options > 0 { format!(" + {} options", self.options) } else { String::new() };
        let seg = format!(
            "a full segment is a {}-byte frame (14 Ethernet + 20 IPv4 + 20 TCP{opts} + {} payload) \
             and {} byte-times on the wire (+ FCS 4, preamble 8, gap 12)",
            self.data_frame, self.payload, self.data_wire
        );
        if self.half_duplex {
            format!(
                "{seg}; on the shared half-duplex medium every two segments also carry one delayed ACK \
                 ({}-byte frame, {} byte-times)",
                self.ack_frame, self.ack_wire
            )
        } else {
            format!("{seg}; ACKs travel the other direction of the full-duplex link")
        }
    }
}

/// `10e6`, `1e9`, `1.5e6`: a rate with an exponent that is a multiple of 3.
pub fn sci(v: u64) -> String {
    let mut e = 0;
    let mut m = v as f64;
    while m >= 1000.0 {
        m /= 1000.0;
        e += 3;
    }
    let m = format!("{m:.3}");
    let m = m.trim_end_matches('0').trim_end_matches('.');
    if e == 0 {
        m.to_string()
    } else {
        format!("{m}e{e}")
    }
}

/// A rate for people: `10 Mb/s`, `1 Gb/s`, `1.5 Mb/s`.
pub fn rate_text(bps: u64) -> String {
    let (v, unit) = match bps {
        b if b >= 1_000_000_000 => (b as f64 / 1e9, "Gb/s"),
        b if b >= 1_000_000 => (b as f64 / 1e6, "Mb/s"),
        b if b >= 1_000 => (b as f64 / 1e3, "kb/s"),
        b => (b as f64, "b/s"),
    };
    let s = format!("{v:.3}");
    format!("{} {unit}", s.trim_end_matches('0').trim_end_matches('.'))
}

/// A duration for people: `10 us`, `20 ms`, `1.5 s`.
pub fn duration_text(d: Duration) -> String {
    let ns = d.as_nanos();
    let (v, unit) = match ns {
        n if n >= 1_000_000_000 => (n as f64 / 1e9, "s"),
        n if n >= 1_000_000 => (n as f64 / 1e6, "ms"),
        n if n >= 1_000 => (n as f64 / 1e3, "us"),
        n => (n as f64, "ns"),
    };
    let s = format!("{v:.3}");
    format!("{} {unit}", s.trim_end_matches('0').trim_end_matches('.'))
}

pub fn queue_text(q: QueueLimit) -> String {
    match q {
        QueueLimit::Packets(n) => format!("{n} frames"),
        QueueLimit::Bytes(n) => format!("{n} bytes"),
    }
}

/// Split `s` into a decimal number and the rest.
fn number(s: &str) -> Result<(f64, &str), String> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || ((c == 'e' || c == 'E') && s[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-')))
        })
        .map_or(s.len(), |(i, _)| i);
    let v: f64 = s[..end].parse().map_err(|_| format!("`{s}`: expected a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: expected a non-negative number"));
    }
    Ok((v, s[end..].trim()))
}

/// Bits per second: `10M`, `10Mbit`, `10Mb/s`, `1G`, `100k`, `10e6` (decimal multiples).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, unit) = number(s)?;
    let unit = unit.trim_end_matches("/s").trim_end_matches("ps");
    let unit = unit.strip_suffix("bit").or_else(|| unit.strip_suffix('b')).unwrap_or(unit);
    let mult = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" | "m" => 1e6,
        "G" | "g" => 1e9,
        _ => return Err(format!("`{s}`: a rate is a number with k, M or G (bits per second)")),
    };
    let bps = (v * mult).round();
    if !(1.0..=1e13).contains(&bps) {
        return Err(format!("`{s}`: rate out of range"));
    }
    Ok(bps as u64)
}

/// A duration: `10ms`, `20us` (or `µs`), `1s`, `500ns`; a plain number is milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (v, unit) = number(s)?;
    let ns = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "" | "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("`{s}`: a duration is a number with ns, us, ms or s")),
    };
    let total = (v * ns).round();
    if total > 1e15 {
        return Err(format!("`{s}`: duration out of range"));
    }
    Ok(Duration::from_nanos(total as u64))
}

/// A size: `17p` (packets) or bytes, with `k`, `M`, `G` (or `KiB`, `MiB`, `GiB`) as binary
/// multiples, as Jacobson 1988's 8 MB = 8 x 1024 x 1024.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Packets(u64),
    Bytes(u64),
}

impl Size {
    /// In bytes, with `packet` bytes per packet.
    pub fn bytes(self, packet: usize) -> u64 {
        match self {
            Size::Packets(n) => n * packet as u64,
            Size::Bytes(n) => n,
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Size::Packets(n) => write!(f, "{n}p"),
            Size::Bytes(n) => write!(f, "{n}"),
        }
    }
}

pub fn parse_size(s: &str) -> Result<Size, String> {
    let (v, unit) = number(s)?;
    let whole = |x: f64| -> Result<u64, String> {
        if x.fract() != 0.0 || x > 1e15 {
            Err(format!("`{s}`: expected a whole number of bytes or packets"))
        } else {
            Ok(x as u64)
        }
    };
    Ok(match unit {
        "p" | "P" | "pkt" | "packets" => Size::Packets(whole(v)?),
        "" | "b" | "B" => Size::Bytes(whole(v)?),
        "k" | "K" | "KB" | "KiB" | "kB" => Size::Bytes(whole(v * 1024.0)?),
        "m" | "M" | "MB" | "MiB" => Size::Bytes(whole(v * 1024.0 * 1024.0)?),
        "g" | "G" | "GB" | "GiB" => Size::Bytes(whole(v * 1024.0 * 1024.0 * 1024.0)?),
        _ => return Err(format!("`{s}`: a size is bytes (with k, M, G: binary multiples) or packets (`17p`)")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(parse_rate("10M"), Ok(10_000_000));
        assert_eq!(parse_rate("10Mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("10Mb/s"), Ok(10_000_000));
        assert_eq!(parse_rate("1.5e6"), Ok(1_500_000));
        assert_eq!(parse_rate("1G"), Ok(1_000_000_000));
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_millis(5)));
        assert_eq!(parse_size("8M"), Ok(Size::Bytes(8 << 20)));
        assert_eq!(parse_size("17p"), Ok(Size::Packets(17)));
        assert_eq!(parse_size("24616"), Ok(Size::Bytes(24616)));
        assert_eq!(parse_size("64KiB"), Ok(Size::Bytes(65536)));
        assert!(parse_size("1.5p").is_err());
        assert_eq!(sci(10_000_000), "10e6");
        assert_eq!(sci(1_000_000_000), "1e9");
        assert_eq!(sci(1_500_000), "1.5e6");
    }

    #[test]
    fn ethernet10_ceiling() {
        // Without timestamps: Jacobson 1988's 1460-byte payload in 1538-byte frames, 84-byte ACKs.
        let c = Ceiling::new(&LinkConfig::ethernet10(), 1460, false);
        assert_eq!((c.data_wire, c.ack_wire), (1538, 84));
        assert!((c.bytes_per_sec - 1.25e6 * 2920.0 / 3160.0).abs() < 1e-6);
        // With timestamps: 1448 bytes in the same frame, 90-byte ACKs.
        let c = Ceiling::new(&LinkConfig::ethernet10(), 1448, true);
        assert_eq!((c.data_wire, c.ack_wire), (1538, 90));
        let c = Ceiling::new(&LinkConfig::ethernet100(), 1448, true);
        assert!((c.bytes_per_sec - 12.5e6 * 1448.0 / 1538.0).abs() < 1e-6);
    }
}
