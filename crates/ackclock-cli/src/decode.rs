//! `ackclock decode`: a frame decoder on the stack's own parsers.

use ackclock::wire::{
    checksum, ArpPacket, ArpRepr, EtherType, EthernetFrame, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr,
    TcpPacket, TcpRepr, UdpPacket,
};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::process::ExitCode;

/// Decode an Ethernet frame given in hex (tcpdump -xx style; spaces and newlines ignored)
/// with ackclock's own parsers: Ethernet/802.1Q, ARP, IPv4, ICMP, UDP, TCP and options.
#[derive(Args)]
pub struct DecodeArgs {
    /// The frame, as hex digits.
    hex: Option<String>,
    /// Decode a built-in frame instead.
    #[arg(long, value_enum, conflicts_with = "hex")]
    example: Option<Example>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Example {
    /// A Linux 6.x SYN: MSS, SACK-permitted, timestamps, NOP, window scale.
    LinuxSyn,
    /// An ARP request from a Linux host.
    LinuxArp,
}

/// A SYN from 10.0.0.1:45678 to 10.0.0.2:80 as Linux sends it (options in Linux's order).
const LINUX_SYN: &str = "020000000002 020000000001 0800
    4500 003c 1c46 4000 4006 0a74 0a00 0001 0a00 0002
    b26e 0050 5a1b 2c3d 0000 0000 a002 faf0 a97d 0000
    0204 05b4 0402 080a 1a2b 3c4d 0000 0000 0103 0307";

/// who-has 192.168.1.1 tell 192.168.1.20, padded to 60 bytes.
const LINUX_ARP: &str = "ffffffffffff 52540012 3456 0806
    0001 0800 06 04 0001 525400123456 c0a80114 000000000000 c0a80101
    000000000000000000000000000000000000";

fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let digits: String = s.chars().filter(|c| !c.is_whitespace() && *c != ':').collect();
    if digits.len() % 2 != 0 {
        return Err("odd number of hex digits".into());
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).map_err(|e| format!("bad hex at {i}: {e}")))
        .collect()
}

fn decode(frame: &[u8]) -> Result<Vec<Value>, String> {
    let mut layers = Vec::new();
    let eth = EthernetFrame::new_checked(frame).map_err(|e| format!("ethernet: {e}"))?;
    layers.push(json!({
        "layer": "ethernet",
        "src": eth.src_addr().to_string(),
        "dst": eth.dst_addr().to_string(),
        "vlan": eth.vlan_id(),
        "ethertype": format!("0x{:04x}", eth.ethertype().0),
        "length": frame.len(),
    }));
    match eth.ethertype() {
        EtherType::ARP => {
            let p = ArpPacket::new_checked(eth.payload()).map_err(|e| format!("arp: {e}"))?;
            let a = ArpRepr::parse(&p).map_err(|e| format!("arp: {e}"))?;
            layers.push(json!({
                "layer": "arp",
                "operation": a.operation.0,
                "sender": format!("{} {}", a.source_protocol_addr, a.source_hardware_addr),
                "target": format!("{} {}", a.target_protocol_addr, a.target_hardware_addr),
            }));
        }
        EtherType::IPV4 => {
            let p = Ipv4Packet::new_checked(eth.payload()).map_err(|e| format!("ipv4: {e}"))?;
            let ip = Ipv4Repr::parse(&p, false).map_err(|e| format!("ipv4: {e}"))?;
            layers.push(json!({
                "layer": "ipv4",
                "src": ip.src_addr.to_string(),
                "dst": ip.dst_addr.to_string(),
                "protocol": ip.protocol.0,
                "ttl": ip.ttl,
                "ident": ip.ident,
                "dont_fragment": ip.dont_frag,
                "fragment": ip.fragment.is_some(),
                "header_checksum_ok": p.verify_checksum(),
                "padding": eth.payload().len() - p.total_len() as usize,
            }));
            let body = p.payload();
            match ip.protocol {
                IpProtocol::TCP => {
                    let t = TcpPacket::new_checked(body).map_err(|e| format!("tcp: {e}"))?;
                    let r = TcpRepr::parse(&t, ip.src_addr, ip.dst_addr, false).map_err(|e| format!("tcp: {e}"))?;
                    let checksum_ok = t.verify_checksum(ip.src_addr, ip.dst_addr);
                    // A frame captured before an offloading device completed its checksum
                    // (virtio-net's NEEDS_CSUM; the stack's CSUM_PARTIAL) carries only the
                    // pseudo-header's sum: say so, instead of a bare failure.
                    let pseudo =
                        checksum::pseudo_header(ip.src_addr, ip.dst_addr, IpProtocol::TCP.0, body.len() as u16);
                    let partial = (!checksum_ok && t.checksum() == pseudo).then_some(true);
                    layers.push(json!({
                        "layer": "tcp",
                        "src_port": r.src_port,
                        "dst_port": r.dst_port,
                        "flags": r.flags.to_string(),
                        "seq": r.seq,
                        "ack": r.ack,
                        "window": r.window,
                        "header_len": t.header_len(),
                        "mss": r.max_seg_size,
                        "window_scale": r.window_scale,
                        "sack_permitted": r.sack_permitted,
                        "timestamps": r.timestamps,
                        "sack": r.sack_blocks.as_slice(),
                        "payload_len": r.payload.len(),
                        "checksum_ok": checksum_ok,
                        "checksum_partial": partial,
                    }));
                }
                IpProtocol::UDP => {
                    let u = UdpPacket::new_checked(body).map_err(|e| format!("udp: {e}"))?;
                    layers.push(json!({
                        "layer": "udp",
                        "src_port": u.src_port(),
                        "dst_port": u.dst_port(),
                        "payload_len": u.payload().len(),
                        "checksum_ok": u.checksum() == 0 || u.verify_checksum(ip.src_addr, ip.dst_addr),
                    }));
                }
                IpProtocol::ICMP => {
                    let i = Icmpv4Packet::new_checked(body).map_err(|e| format!("icmp: {e}"))?;
                    let kind = match Icmpv4Repr::parse(&i) {
                        Ok(Icmpv4Repr::EchoRequest { .. }) => "echo request".to_string(),
                        Ok(Icmpv4Repr::EchoReply { .. }) => "echo reply".to_string(),
                        Ok(Icmpv4Repr::DstUnreachable { .. }) => "destination unreachable".to_string(),
                        Ok(Icmpv4Repr::TimeExceeded { .. }) => "time exceeded".to_string(),
                        Err(e) => format!("type {} ({e})", i.msg_type().0),
                    };
                    layers.push(json!({ "layer": "icmp", "message": kind }));
                }
                other => layers.push(json!({ "layer": "ip-payload", "protocol": other.0, "length": body.len() })),
            }
        }
        other => layers.push(json!({ "layer": "unknown", "ethertype": other.0 })),
    }
    Ok(layers)
}

fn print_layers(layers: &[Value]) {
    for l in layers {
        let Value::Object(m) = l else { continue };
        let name = m.get("layer").and_then(|v| v.as_str()).unwrap_or("?");
        let fields: Vec<String> = m
            .iter()
            .filter(|(k, v)| *k != "layer" && !v.is_null() && **v != json!([]))
            .map(|(k, v)| format!("{k}={}", v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
            .collect();
        println!("{name:>9}: {}", fields.join(" "));
    }
}

pub fn run(args: DecodeArgs) -> ExitCode {
    let DecodeArgs { hex, example, json } = args;
    let text = match (hex, example) {
        (Some(h), _) => h,
        (None, Some(Example::LinuxSyn)) => LINUX_SYN.to_string(),
        (None, Some(Example::LinuxArp)) => LINUX_ARP.to_string(),
        (None, None) => {
            eprintln!("error: give a frame in hex or --example");
            return ExitCode::from(2);
        }
    };
    match parse_hex(&text).and_then(|bytes| decode(&bytes)) {
        Ok(layers) if json => println!("{}", Value::Array(layers)),
        Ok(layers) => print_layers(&layers),
        Err(e) => {
            if json {
                println!("{}", json!({ "error": e }));
            } else {
                eprintln!("error: {e}");
            }
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_linux_syn() {
        let layers = decode(&parse_hex(LINUX_SYN).unwrap()).unwrap();
        let tcp = &layers[2];
        assert_eq!(tcp["flags"], "S");
        assert_eq!(tcp["mss"], 1460);
        assert_eq!(tcp["window_scale"], 7);
        assert_eq!(tcp["sack_permitted"], true);
        assert_eq!(layers[1]["header_checksum_ok"], true);
        assert_eq!(tcp["checksum_ok"], true);
    }

    /// A segment whose checksum field holds the pseudo-header's sum, as a stack leaves it to
    /// an offloading device, is reported as partial; a corrupted one is not.
    #[test]
    fn a_checksum_left_to_the_device_is_reported_as_partial() {
        let mut syn = parse_hex(LINUX_SYN).unwrap();
        let pseudo = checksum::pseudo_header([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 6, 40);
        syn[50..52].copy_from_slice(&pseudo.to_be_bytes());
        let tcp = &decode(&syn).unwrap()[2];
        assert_eq!((&tcp["checksum_ok"], &tcp["checksum_partial"]), (&json!(false), &json!(true)));
        syn[50] ^= 1;
        let tcp = &decode(&syn).unwrap()[2];
        assert_eq!((&tcp["checksum_ok"], &tcp["checksum_partial"]), (&json!(false), &Value::Null));
        let tcp = &decode(&parse_hex(LINUX_SYN).unwrap()).unwrap()[2];
        assert_eq!(tcp["checksum_partial"], Value::Null, "a good checksum is not partial");
    }

    #[test]
    fn decodes_the_linux_arp_with_padding() {
        let layers = decode(&parse_hex(LINUX_ARP).unwrap()).unwrap();
        assert_eq!(layers[1]["layer"], "arp");
        assert_eq!(layers[1]["target"], "192.168.1.1 00:00:00:00:00:00");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(parse_hex("abc").is_err());
        assert!(decode(&[0u8; 10]).is_err());
        let mut syn = parse_hex(LINUX_SYN).unwrap();
        syn[14] = 0x46; // IHL 6 but the options run into TCP: still parses, never panics
        let _ = decode(&syn);
        syn.truncate(40);
        assert!(decode(&syn).is_err());
    }
}
