//! One QEMU guest: started inside the lab's namespace, its serial console read line by
//! line on a thread, killed on drop if it has not powered itself off (only the QEMU this
//! process started).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use super::netns::{GUEST_MAC, LabNetns, PF_MAC, TAP};
use super::platform::{Nic, Platform};
use super::{LabError, Result, io};

/// Where a userland's QEMU sees the lab's work directory (kernel, initrd, disk): bound there
/// inside the mount namespace `ip netns exec` gives it, so nothing stays mounted after QEMU.
const USERLAND_WORK: &str = "/lab";

/// The guest's hardware.
#[derive(Debug, Clone)]
pub struct VmSpec {
    pub cpus: u32,
    pub queues: u32,
    /// `rss=on`: QEMU honours the guest's indirection table (software RSS here).
    pub rss: bool,
    pub mem_mb: u32,
    /// Extra kernel command line (`isolcpus=3 nohz_full=3`).
    pub cmdline: String,
    /// Two NUMA nodes, the NIC on the second behind a PCI expander bridge.
    pub numa: bool,
    /// A virtio-blk disk with this many queues beside the NIC (kernel-managed vectors).
    pub blk_queues: Option<u32>,
}

impl Default for VmSpec {
    fn default() -> Self {
        VmSpec {
            cpus: 4,
            queues: 4,
            rss: false,
            mem_mb: 1024,
            cmdline: String::new(),
            numa: false,
            blk_queues: None,
        }
    }
}

/// A running guest.
pub struct Vm {
    child: Child,
    lines: Receiver<String>,
}

impl Vm {
    /// Starts QEMU for `spec` on `platform` inside `ns`; `kernel`, `initrd` and `disk` are
    /// in `work`.
    pub fn start(
        spec: &VmSpec,
        platform: &Platform,
        ns: &LabNetns,
        work: &Path,
        kernel: &Path,
        initrd: &Path,
        disk: &Path,
    ) -> Result<Vm> {
        let q = spec.queues;
        let mut args: Vec<String> = vec!["netns".into(), "exec".into(), ns.name.clone()];
        // A userland's QEMU runs chrooted in it, with /dev (the tap's /dev/net/tun), /proc
        // and the work directory bound in. `ip netns exec` runs its command in a mount
        // namespace of its own that does not propagate to the host's, so the mounts end
        // with QEMU, also when it is killed.
        let in_work = |p: &Path| match (&platform.userland, p.strip_prefix(work)) {
            (Some(_), Ok(rel)) => Path::new(USERLAND_WORK).join(rel).display().to_string(),
            _ => p.display().to_string(),
        };
        if let Some(root) = &platform.userland {
            let root = root.display();
            args.extend(["sh", "-c"].map(str::to_string));
            args.push(format!(
                "mount --bind /dev '{root}/dev' && mount -t proc proc '{root}/proc' && \
                 mount --bind '{}' '{root}{USERLAND_WORK}' && exec chroot '{root}' \"$@\"",
                work.display()
            ));
            args.push("qemu".into());
        }
        args.push("qemu-system-x86_64".into());
        let mut push = |s: &str| args.extend(s.split(' ').map(str::to_string));
        push(
            "-accel tcg,thread=multi -nodefaults -display none -serial stdio -monitor none -no-reboot",
        );
        push(&format!("-m {} -smp {}", spec.mem_mb, spec.cpus));
        let mut dev_extra = String::new();
        if platform.nic.needs_pcie() {
            if spec.numa {
                return Err(LabError::Guest(format!(
                    "the NUMA scenarios run on a pc machine, and {} needs q35",
                    platform.nic.name()
                )));
            }
            push("-machine q35 -device pcie-root-port,id=rp0,chassis=1,slot=1");
            dev_extra = ",bus=rp0".into();
        }
        if spec.numa {
            let half = spec.cpus / 2;
            let mem = spec.mem_mb / 2;
            push(&format!(
                "-object memory-backend-ram,id=m0,size={mem}M -object memory-backend-ram,id=m1,size={mem}M \
                 -numa node,nodeid=0,cpus=0-{},memdev=m0 -numa node,nodeid=1,cpus={}-{},memdev=m1 \
                 -device pxb,id=bridge1,bus_nr=4,numa_node=1",
                half - 1,
                half,
                spec.cpus - 1
            ));
            dev_extra = ",bus=bridge1,addr=0x3".into();
        }
        push(&format!(
            "-netdev tap,id=n0,ifname={TAP},script=no,downscript=no,queues={q}"
        ));
        push(&match platform.nic {
            Nic::Virtio => format!(
                "-device virtio-net-pci,netdev=n0,mq=on,vectors={},mac={GUEST_MAC}{}{dev_extra}",
                2 * q + 2,
                // With rss=on also the largest rx ring QEMU offers: 4 times the slack before
                // a virtqueue the table newly points at fills (see LabNetns::steer_by_table).
                if spec.rss {
                    ",rss=on,rx_queue_size=1024"
                } else {
                    ""
                }
            ),
            // igb and vmxnet3 have no queue option: the driver asks for one queue per
            // CPU, up to the device's limit, and the device model picks the guest queue of
            // each packet itself, whichever tap queue it came through.
            Nic::Igb => format!("-device igb,netdev=n0,mac={GUEST_MAC}{dev_extra}"),
            Nic::Vmxnet3 => format!("-device vmxnet3,netdev=n0,mac={GUEST_MAC}{dev_extra}"),
            // The guest's address belongs to the VF (guest-init.sh's make_vf gives it
            // GUEST_MAC): the physical function gets another.
            Nic::IgbVf => format!("-device igb,netdev=n0,mac={PF_MAC}{dev_extra}"),
        });
        if let Some(n) = spec.blk_queues {
            push(&format!(
                "-drive file={},if=none,id=d0,format=raw -device virtio-blk-pci,drive=d0,num-queues={n}",
                in_work(disk)
            ));
        }
        args.push("-kernel".into());
        args.push(in_work(kernel));
        args.push("-initrd".into());
        args.push(in_work(initrd));
        args.push("-append".into());
        args.push(format!(
            "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init {}",
            spec.cmdline
        ));
        let mut child = Command::new("ip")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io(
                "starting qemu-system-x86_64 (apt-get install qemu-system-x86)",
            ))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| LabError::Guest("qemu has no stdout".into()))?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n').map_while(|l| l.ok()) {
                let line = String::from_utf8_lossy(&line)
                    .trim_end_matches('\r')
                    .to_string();
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Vm { child, lines })
    }

    /// The next console line before `deadline`; `None` when the console closed.
    pub fn next_line(&self, deadline: Instant) -> Result<Option<String>> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => Err(LabError::Guest(
                "no console output before the deadline (a hung guest?)".into(),
            )),
        }
    }

    /// Waits for QEMU to exit after the guest powered off.
    pub fn wait(mut self, timeout: Duration) -> Result<()> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self
                .child
                .try_wait()
                .map_err(io("waiting for qemu"))?
                .is_some()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(LabError::Guest(
            "qemu did not exit after the guest powered off".into(),
        ))
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
