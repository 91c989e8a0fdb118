//! Helpers shared by the CLI's integration tests.
#![allow(dead_code)]

#[cfg(target_os = "linux")]
#[macro_use]
pub mod interop;
#[cfg(target_os = "linux")]
#[path = "../../../ackclock/tests/common/clients.rs"]
pub mod clients;
#[cfg(target_os = "linux")]
#[path = "../../../ackclock/tests/common/netns.rs"]
pub mod netns;

use std::path::Path;
use std::process::Command;

/// Whether tshark is there; if not, say so (scripts/test installs it).
pub fn have_tshark() -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            println!("SKIP: tshark is not installed (scripts/test installs it: apt-get install tshark)");
            false
        }
    }
}

/// tshark's output for a capture, with IPv4 and TCP checksums verified.
pub fn tshark(pcap: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE"])
        .args(args)
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark {args:?} on {}: {}", pcap.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("tshark prints UTF-8")
}
