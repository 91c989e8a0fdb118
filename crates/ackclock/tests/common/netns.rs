//! Private network namespaces for interop tests with the Linux kernel as the peer.
//!
//! Names are unique per process and call (`ackc-<pid>-<n>-<rand>`, TAPs `ak<pid in hex>-<n>`), so
//! tests run in parallel. Dropping a [`NetNs`] deletes the namespace, and with it every
//! address in it, and any link it was given that is still in the root namespace. Addresses
//! exist only inside the namespace; no default route is ever added, so nothing is routed
//! out. Namespaces left by a process that was killed outright (no destructor ran) are swept
//! by the next test process.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

static NEXT: AtomicU32 = AtomicU32::new(0);
static SWEPT: AtomicBool = AtomicBool::new(false);

/// Why namespace tests cannot run here, if they cannot (they are then skipped, not failed).
pub fn unavailable() -> Option<String> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(probe).clone()
}

fn probe() -> Option<String> {
    let uid = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
    });
    if uid.as_deref() != Some("0") {
        return Some("not root (network namespaces and TAP devices need CAP_NET_ADMIN)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is missing".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("iproute2 (`ip`) is not installed".into());
    }
    // Root without CAP_SYS_ADMIN / CAP_NET_ADMIN (e.g. in a container) cannot make one.
    let probe = format!("ackc-{}-probe", std::process::id());
    if let Err(e) = ip(&["netns", "add", &probe]) {
        return Some(format!("cannot create a network namespace: {e}"));
    }
    let _ = ip(&["netns", "del", &probe]);
    None
}

/// Have `cmd`'s process get SIGTERM when the thread that spawns it ends (Linux
/// `PR_SET_PDEATHSIG`), so that a test killed or failing hard leaves no server running. A
/// test's own thread outlives its children's normal stop in `Drop`.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        })
    }
}

/// Whether a tool is on PATH (for tests that need curl, ping, python3, ...).
pub fn have(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success())
}

/// Skip (print the reason, pass) when namespaces or the needed `tools` are not available.
pub fn skip(tools: &[&str]) -> bool {
    let why = unavailable().or_else(|| tools.iter().find(|t| !have(t)).map(|t| format!("`{t}` is not installed")));
    if let Some(why) = why {
        eprintln!("SKIP: {why}");
        return true;
    }
    false
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Delete `ackc-<pid>-...` namespaces whose process is gone.
fn sweep() {
    if SWEPT.swap(true, Ordering::Relaxed) {
        return;
    }
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name.strip_prefix("ackc-").and_then(|r| r.split('-').next()) else { continue };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// A network namespace that exists as long as this value.
pub struct NetNs {
    name: String,
    tap: String,
    links: Vec<String>,
}

impl NetNs {
    /// A fresh namespace with its loopback up. Panics if it cannot be made (call
    /// [`unavailable`] first).
    pub fn new() -> NetNs {
        sweep();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let name = format!("ackc-{pid}-{n}-{:04x}", (nanos ^ (nanos >> 16)) & 0xffff);
        // Unique among live processes (the whole pid, in hex to fit IFNAMSIZ's 15 characters:
        // pid_max is 2^22), so that no run opens another run's TAP.
        let tap = format!("ak{pid:x}-{n:x}");
        ip(&["netns", "add", &name]).unwrap();
        let ns = NetNs { name, tap, links: Vec::new() };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A TAP name unique to this namespace.
    pub fn tap_name(&self) -> &str {
        &self.tap
    }

    /// Delete `link` on drop if it is still in the root namespace (e.g. a test failed
    /// between creating it and moving it in).
    pub fn adopt(&mut self, link: &str) {
        self.links.push(link.to_string());
    }

    /// Move `link` from the root namespace into this one, give it `addr` (`A/P`) and bring
    /// it up.
    pub fn take_link(&mut self, link: &str, addr: &str) {
        self.adopt(link);
        ip(&["link", "set", link, "netns", &self.name]).unwrap();
        self.ip(&["addr", "add", addr, "dev", link]);
        self.ip(&["link", "set", link, "up"]);
    }

    /// `ip -n <ns> ARGS`; panics on failure.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all).unwrap();
    }

    /// `program` run inside the namespace, killed after `timeout_secs` (coreutils
    /// `timeout`, then SIGKILL 5 s later), so a hung peer never hangs a test.
    pub fn command(&self, timeout_secs: u64, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, "timeout", "-k", "5", &timeout_secs.to_string(), program]);
        cmd
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
        for link in &self.links {
            if Path::new("/sys/class/net").join(link).exists() {
                let _ = ip(&["link", "del", link]);
            }
        }
    }
}
