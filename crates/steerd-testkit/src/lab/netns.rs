//! The host side of the guest's NIC: a network namespace of the lab's own holding a
//! multi-queue tap with an address and a static neighbour entry for the guest. QEMU runs
//! inside it, so the traffic never leaves that namespace and the guest; dropping the
//! value removes the namespace and with it the tap.

use std::fs::File;
use std::os::fd::AsFd;

use super::{Result, io, run_cmd};

pub const HOST_ADDR: &str = "10.77.0.1";
pub const GUEST_ADDR: &str = "10.77.0.2";
pub const HOST_MAC: &str = "52:54:00:77:00:01";
pub const GUEST_MAC: &str = "52:54:00:77:00:02";
/// The igbvf lab's physical function's address: `GUEST_MAC`, which the host's neighbour
/// entry names, is the VF's.
pub const PF_MAC: &str = "52:54:00:77:00:03";
pub const TAP: &str = "tap0";

/// The lab's namespace names: `steerd-lab-<pid>-<n>`; the pid of the lab that made it.
fn lab_pid(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix("steerd-lab-")?.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Removes the namespaces (and with them the taps) of labs whose process is gone. Why: a
/// lab ended by a signal runs no destructor, and its namespace stayed (2026-11-30, the
/// matrix script stopped with SIGTERM mid-run). Only a name of the lab's own form whose
/// pid no longer exists is touched: a lab that is running keeps its namespace, and what
/// cannot be removed is left as it is.
fn sweep_dead_labs() {
    let Ok(list) = run_cmd("ip", &["netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(pid) = lab_pid(name) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        match run_cmd("ip", &["netns", "delete", name]) {
            Ok(_) => eprintln!("lab: removed {name}, left by lab process {pid}, which is gone"),
            Err(e) => eprintln!(
                "lab: {name} was left by lab process {pid}, which is gone, and stays: {e}"
            ),
        }
    }
}

/// A namespace with the lab's tap; removed on drop.
#[derive(Debug)]
pub struct LabNetns {
    pub name: String,
}

impl LabNetns {
    /// Creates `steerd-lab-<pid>-<n>` with a multi-queue tap, after removing the
    /// namespaces of labs that are gone ([`sweep_dead_labs`]).
    pub fn create(n: u32) -> Result<Self> {
        sweep_dead_labs();
        let name = format!("steerd-lab-{}-{n}", std::process::id());
        run_cmd("ip", &["netns", "add", &name])?;
        let ns = LabNetns { name };
        let ip = |args: &[&str]| {
            let mut all = vec!["-n", ns.name.as_str()];
            all.extend_from_slice(args);
            run_cmd("ip", &all).map(drop)
        };
        ip(&["link", "set", "lo", "up"])?;
        ip(&["tuntap", "add", "dev", TAP, "mode", "tap", "multi_queue"])?;
        ip(&["link", "set", TAP, "address", HOST_MAC])?;
        ip(&["addr", "add", &format!("{HOST_ADDR}/24"), "dev", TAP])?;
        ip(&["link", "set", TAP, "up"])?;
        ip(&[
            "neigh",
            "replace",
            GUEST_ADDR,
            "lladdr",
            GUEST_MAC,
            "dev",
            TAP,
            "nud",
            "permanent",
        ])?;
        Ok(ns)
    }

    /// Moves the calling thread into the namespace (sockets it opens afterwards live there).
    pub fn enter_thread(&self) -> Result<()> {
        enter(&self.name)
    }

    /// Makes the tap put each UDP packet on the queue a table of the host's names for its
    /// source port (a steering eBPF program over an array map, `TUNSETSTEERINGEBPF`),
    /// instead of the tap's own flow hash; [`TapSteering::set`] fills the table.
    ///
    /// Why: with `rss=on` QEMU's software RSS reads a packet from tap queue k and hands it
    /// to the virtqueue the guest's table names, j. When j has no free buffer, QEMU keeps
    /// the packet and stops reading tap queue k until virtqueue *k* gets buffers; if k
    /// carries nothing of its own, that never happens and the tap queue stalls for good (in
    /// one run a single flow delivered 256 packets, one ring, and then nothing for 40 s).
    /// When the host sends each flow on the queue the guest's table sends it to, k is j:
    /// what QEMU's eBPF RSS would do in the tap, had it loaded here.
    ///
    /// QEMU clears the tap's steering program when the guest resets the device, so this is
    /// called once the guest is up. It attaches a queue of its own (flags as QEMU's, which
    /// the kernel leaves alone while other queues are attached), sets the program for the
    /// whole tap, detaches the queue and closes it.
    pub fn steer_by_table(&self) -> Result<TapSteering> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.enter_thread()?;
                    steer_by_table()
                })
                .join()
                .unwrap_or_else(|_| Err(super::LabError::Guest("steering thread panicked".into())))
        })
    }

    /// The tap's transmit drops (packets the guest's queues had no room for).
    pub fn tap_tx_dropped(&self) -> u64 {
        run_cmd(
            "ip",
            &[
                "netns",
                "exec",
                &self.name,
                "cat",
                &format!("/sys/class/net/{TAP}/statistics/tx_dropped"),
            ],
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
    }
}

impl Drop for LabNetns {
    fn drop(&mut self) {
        if let Err(e) = run_cmd("ip", &["netns", "del", &self.name]) {
            eprintln!("lab: could not remove network namespace {}: {e}", self.name);
        }
    }
}

/// The tap's steering table: UDP source port -> tap queue.
pub struct TapSteering {
    map: std::os::fd::OwnedFd,
}

impl TapSteering {
    /// Sends the flows from `sport` on tap queue `queue`.
    pub fn set(&self, sport: u16, queue: u32) -> Result<()> {
        use std::os::fd::AsRawFd;
        let key = u32::from(sport);
        // union bpf_attr for BPF_MAP_UPDATE_ELEM: map_fd, key, value, flags.
        let mut attr = [0u8; 32];
        attr[0..4].copy_from_slice(&(self.map.as_raw_fd() as u32).to_ne_bytes());
        attr[8..16].copy_from_slice(&(&key as *const u32 as u64).to_ne_bytes());
        attr[16..24].copy_from_slice(&(&queue as *const u32 as u64).to_ne_bytes());
        bpf(2, &mut attr, "setting a flow's tap queue").map(drop)
    }
}

fn bpf(cmd: i64, attr: &mut [u8], what: &str) -> Result<i64> {
    use nix::libc;
    // SAFETY: the bpf syscall reads (and for some commands writes) `attr`, whose size is
    // given, and the buffers it points to, which the callers keep alive over the call.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len() as u32) };
    if ret < 0 {
        return Err(super::LabError::Io {
            what: what.to_string(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(ret)
}

/// Creates the table, loads the steering program and sets it on `TAP` in the calling
/// thread's namespace.
fn steer_by_table() -> Result<TapSteering> {
    use nix::libc;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let err = |what: &str| super::LabError::Io {
        what: what.to_string(),
        source: std::io::Error::last_os_error(),
    };
    // BPF_MAP_CREATE: an array of 65536 u32 (the queue of each source port).
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&2u32.to_ne_bytes()); // BPF_MAP_TYPE_ARRAY
    attr[4..8].copy_from_slice(&4u32.to_ne_bytes());
    attr[8..12].copy_from_slice(&4u32.to_ne_bytes());
    attr[12..16].copy_from_slice(&65536u32.to_ne_bytes());
    let map = bpf(0, &mut attr, "creating the tap's steering table (bpf)")?;
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    let map = unsafe { OwnedFd::from_raw_fd(map as i32) };
    let fd = map.as_raw_fd();
    // r6 = r1 (LD_ABS reads the skb in r6); r0 = ntohs(*(u16 *)(skb->data + 34)), the UDP
    // source port behind a 14-byte Ethernet and a 20-byte IPv4 header; look it up in the
    // map; return its value, or 0 when absent. The tap takes the result modulo its queues.
    let insns: [u64; 12] = [
        insn(0xbf, 6, 1, 0, 0),   // r6 = r1
        insn(0x28, 0, 0, 0, 34),  // r0 = ldh [34]
        insn(0x63, 10, 0, -4, 0), // *(u32 *)(r10 - 4) = r0
        insn(0xbf, 2, 10, 0, 0),  // r2 = r10
        insn(0x07, 2, 0, 0, -4),  // r2 += -4
        insn(0x18, 1, 1, 0, fd),  // r1 = map (ld_imm64, BPF_PSEUDO_MAP_FD)
        insn(0x00, 0, 0, 0, 0),   //   (its upper half)
        insn(0x85, 0, 0, 0, 1),   // call bpf_map_lookup_elem
        insn(0x15, 0, 0, 2, 0),   // if r0 == 0 goto +2
        insn(0x61, 0, 0, 0, 0),   // r0 = *(u32 *)(r0 + 0)
        insn(0x95, 0, 0, 0, 0),   // exit
        insn(0xb7, 0, 0, 0, 0),   // r0 = 0
    ];
    let insns = [&insns[..], &[insn(0x95, 0, 0, 0, 0)]].concat();
    let license = b"GPL\0";
    // union bpf_attr for BPF_PROG_LOAD: prog_type, insn_cnt, insns, license, then zeros.
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // BPF_PROG_TYPE_SOCKET_FILTER
    attr[4..8].copy_from_slice(&(insns.len() as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    let prog = bpf(5, &mut attr, "loading the tap's steering program (bpf)")?;
    // SAFETY: as above.
    let prog = unsafe { OwnedFd::from_raw_fd(prog as i32) };
    // SAFETY: a plain open of a path given as a C string.
    let tun = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if tun < 0 {
        return Err(err("opening /dev/net/tun"));
    }
    // SAFETY: as above.
    let tun = unsafe { OwnedFd::from_raw_fd(tun) };
    // struct ifreq: the name, then the flags (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR |
    // IFF_MULTI_QUEUE, as QEMU opens its queues).
    let mut ifr = [0u8; 40];
    ifr[..TAP.len()].copy_from_slice(TAP.as_bytes());
    let flags: u16 = 0x0002 | 0x1000 | 0x4000 | 0x0100;
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    const TUNSETQUEUE: libc::c_ulong = 0x4004_54d9;
    const TUNSETSTEERINGEBPF: libc::c_ulong = 0x8004_54e0;
    // SAFETY: each ioctl reads a buffer of the size the kernel expects for it.
    unsafe {
        if libc::ioctl(tun.as_raw_fd(), TUNSETIFF, ifr.as_mut_ptr()) < 0 {
            return Err(err("attaching a queue to the lab's tap (TUNSETIFF)"));
        }
        let fd: libc::c_int = prog.as_raw_fd();
        if libc::ioctl(tun.as_raw_fd(), TUNSETSTEERINGEBPF, &fd) < 0 {
            return Err(err("setting the tap's steering program"));
        }
        ifr[16..18].copy_from_slice(&0x0400u16.to_ne_bytes()); // IFF_DETACH_QUEUE
        if libc::ioctl(tun.as_raw_fd(), TUNSETQUEUE, ifr.as_mut_ptr()) < 0 {
            return Err(err("detaching the lab's own tap queue"));
        }
    }
    Ok(TapSteering { map })
}

/// One eBPF instruction: opcode, destination and source registers, offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let mut out = [0u8; 8];
    out[0] = code;
    out[1] = (src << 4) | (dst & 0xf);
    out[2..4].copy_from_slice(&off.to_le_bytes());
    out[4..].copy_from_slice(&imm.to_le_bytes());
    u64::from_le_bytes(out)
}

/// Moves the calling thread into the named network namespace (`/run/netns/NAME`); sockets
/// it opens afterwards live there. The lab's namespace and the veth bed's use it.
pub fn enter(name: &str) -> Result<()> {
    let path = format!("/run/netns/{name}");
    let file = File::open(&path).map_err(io(format!("opening {path}")))?;
    nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
        super::LabError::Io {
            what: format!("entering {path}"),
            source: e.into(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::lab_pid;

    #[test]
    fn only_the_labs_own_names_give_a_pid() {
        assert_eq!(lab_pid("steerd-lab-32210-5"), Some(32210));
        assert_eq!(lab_pid("steerd-lab-32210"), None);
        assert_eq!(lab_pid("steerd-lab-x-5"), None);
        assert_eq!(lab_pid("steerd-lab-32210-5-extra"), None);
        assert_eq!(lab_pid("steerd-bed-32210-5"), None);
    }
}
