//! What the guest runs on besides its kernel: the emulated NIC, the userland QEMU and
//! irqbalance come from, and which irqbalance the comparison runs.
//!
//! The host is Debian 12: its QEMU 7.2 has virtio-net and vmxnet3 but no igb (QEMU 8.0 added
//! it) and its irqbalance is 1.9.2. Debian 13's QEMU 10 and irqbalance 1.9.4 run from a root
//! that `scripts/lab-userland.sh` builds with mmdebstrap, so the lab can boot the NICs and
//! compare with the irqbalance versions users run without touching the host's packages.

use std::path::{Path, PathBuf};

use super::{LabError, Result, run_cmd, which};

/// The NIC QEMU emulates for the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nic {
    /// virtio-net: an `input.N` and an `output.N` vector per queue.
    Virtio,
    /// Intel 82576 (`igb`, QEMU 8.0 and later): separate `eth0-rx-N` and `eth0-tx-N`
    /// vectors, and RSS with a 128-entry table the driver writes into the device.
    Igb,
    /// VMware's vmxnet3: one `eth0-rxtx-N` vector per queue pair.
    Vmxnet3,
    /// A virtual function (`igbvf`) of an 82576 booted on a PCIe root port (q35), one
    /// queue pair (`eth0-rx-0`, `eth0-tx-0`): how the guest makes it is guest-init.sh's
    /// `make_vf`.
    IgbVf,
}

impl Nic {
    pub const ALL: [Nic; 4] = [Nic::Virtio, Nic::Igb, Nic::Vmxnet3, Nic::IgbVf];

    pub fn name(self) -> &'static str {
        match self {
            Nic::Virtio => "virtio",
            Nic::Igb => "igb",
            Nic::Vmxnet3 => "vmxnet3",
            Nic::IgbVf => "igbvf",
        }
    }

    pub fn parse(s: &str) -> Option<Nic> {
        Nic::ALL.into_iter().find(|n| n.name() == s)
    }

    /// The driver modules, loaded after the virtio modules every guest carries (each one's
    /// own dependencies first, `image::with_dependencies`).
    pub fn drivers(self) -> &'static [&'static str] {
        match self {
            Nic::Virtio => &[],
            Nic::Igb => &["igb"],
            Nic::Vmxnet3 => &["vmxnet3"],
            Nic::IgbVf => &["igb", "igbvf"],
        }
    }

    /// Whether QEMU needs a PCIe machine (q35) for the device: SR-IOV is a PCIe extended
    /// capability, which a conventional PCI bus cannot carry.
    pub fn needs_pcie(self) -> bool {
        match self {
            Nic::IgbVf => true,
            Nic::Virtio | Nic::Igb | Nic::Vmxnet3 => false,
        }
    }

    /// The guest shell run before the NIC is brought up (igbvf: guest-init.sh's `make_vf`).
    pub fn guest_prepare(self) -> &'static str {
        match self {
            Nic::IgbVf => "make_vf",
            Nic::Virtio | Nic::Igb | Nic::Vmxnet3 => "",
        }
    }

    /// Whether the NIC is emulated by QEMU 8.0 or newer (igb), which the host's 7.2 lacks.
    fn needs_new_qemu(self) -> bool {
        match self {
            Nic::Igb | Nic::IgbVf => true,
            Nic::Virtio | Nic::Vmxnet3 => false,
        }
    }

    /// Why `scenario` cannot run on this NIC, if it cannot: `rss-igb` measures igb's own
    /// driver, and a VF can neither be removed and found again by a PCI rescan (its PF
    /// makes it) nor change its channel count (igbvf has one queue pair and no
    /// `ethtool -L`), so those scenarios would run and measure nothing.
    pub fn cannot_run(self, scenario: &str) -> Option<&'static str> {
        match (self, scenario) {
            (Nic::Igb, _) => None,
            (_, "rss-igb") => Some(
                "it needs --nic igb (and a generic kernel, scripts/lab-kernel.sh VERSION generic)",
            ),
            (Nic::IgbVf, "nic-remove" | "inflight-remove") => {
                Some("a VF is made by its PF, not found again by a PCI rescan")
            }
            (Nic::IgbVf, "channels") => Some("igbvf has one queue pair and no ethtool -L"),
            _ => None,
        }
    }

    /// The guest shell run once the NIC is up, before the scenario's set-up: igb hashes UDP
    /// on addresses only until told to include ports (dmesg: "enabling UDP RSS"), so the 8
    /// flows between two hosts would share one queue. virtio-net without `rss=on` is
    /// spread by the host's tap, and vmxnet3 has no hash setting to change.
    pub fn guest_setup(self) -> &'static str {
        match self {
            Nic::Igb => "ethtool -N eth0 rx-flow-hash udp4 sdfn",
            // The VF hashes nothing (it has one receive queue), but its address may not
            // have reached the PF's filter (guest-init.sh's vf_receives).
            Nic::IgbVf => "vf_receives",
            Nic::Virtio | Nic::Vmxnet3 => "",
        }
    }
}

/// The NIC, the QEMU and the irqbalance of a lab.
#[derive(Debug, Clone)]
pub struct Platform {
    pub nic: Nic,
    /// A root holding a newer QEMU (`scripts/lab-userland.sh`); QEMU runs chrooted in it.
    pub userland: Option<PathBuf>,
    /// The irqbalance binary the guest runs, and the root its libraries come from.
    pub irqbalance: Tool,
}

/// A program for the guest and the root whose libraries it links (`/` for the host's).
#[derive(Debug, Clone)]
pub struct Tool {
    pub root: PathBuf,
    /// Its path inside `root`.
    pub path: PathBuf,
    pub version: String,
}

impl Tool {
    /// The program's path as the host sees it.
    pub fn host_path(&self) -> PathBuf {
        self.root
            .join(self.path.strip_prefix("/").unwrap_or(&self.path))
    }
}

impl Platform {
    /// virtio-net on the host's QEMU, with the host's irqbalance.
    pub fn host() -> Result<Platform> {
        Platform::new(Nic::Virtio, None, None)
    }

    /// `nic` on the QEMU of `userland` (the host's when `None`), comparing with irqbalance
    /// `irqbalance` (`1.9.4`), found in the host or the userland, or the host's when `None`.
    pub fn new(nic: Nic, userland: Option<PathBuf>, irqbalance: Option<&str>) -> Result<Platform> {
        if let Some(root) = &userland
            && !root.join("usr/bin/qemu-system-x86_64").is_file()
        {
            return Err(LabError::Missing(
                format!("qemu-system-x86_64 in {}", root.display()),
                "build the userland with scripts/lab-userland.sh".into(),
            ));
        }
        if nic.needs_new_qemu() && userland.is_none() {
            return Err(LabError::Missing(
                "a QEMU with -device igb (8.0 or newer; the host has 7.2)".into(),
                "pass --userland $(scripts/lab-userland.sh)".into(),
            ));
        }
        let mut found = vec![host_irqbalance()?];
        if let Some(root) = &userland
            && let Ok(tool) = irqbalance_in(root)
        {
            found.push(tool);
        }
        let irqbalance = match irqbalance {
            None => found.swap_remove(0),
            Some(v) => found.into_iter().find(|t| t.version == v).ok_or_else(|| {
                LabError::Missing(
                    format!("irqbalance {v}"),
                    "the host has Debian 12's (1.9.2); --userland $(scripts/lab-userland.sh) \
                     adds Debian 13's (1.9.4)"
                        .into(),
                )
            })?,
        };
        Ok(Platform {
            nic,
            userland,
            irqbalance,
        })
    }

    /// The QEMU version that will run, for the report (`QEMU emulator version 10.0.13 ...`).
    pub fn qemu_version(&self) -> String {
        let out = match &self.userland {
            Some(root) => run_cmd(
                "chroot",
                &[
                    &root.display().to_string(),
                    "qemu-system-x86_64",
                    "--version",
                ],
            ),
            None => run_cmd("qemu-system-x86_64", &["--version"]),
        };
        out.ok()
            .and_then(|o| o.lines().next().map(str::to_string))
            .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
            .unwrap_or_else(|| "?".into())
    }
}

fn host_irqbalance() -> Result<Tool> {
    let path = which("irqbalance").ok_or_else(|| {
        LabError::Missing("irqbalance".into(), "apt-get install irqbalance".into())
    })?;
    let version = version_of(&banner(std::process::Command::new(&path))?);
    Ok(Tool {
        root: PathBuf::from("/"),
        path,
        version,
    })
}

fn irqbalance_in(root: &Path) -> Result<Tool> {
    let mut chroot = std::process::Command::new("chroot");
    chroot.arg(root).arg("irqbalance");
    let out = banner(chroot)?;
    Ok(Tool {
        root: root.to_path_buf(),
        path: PathBuf::from("/usr/sbin/irqbalance"),
        version: version_of(&out),
    })
}

/// What `irqbalance --version` prints: it exits with status 1 after printing it, so the
/// status says nothing.
fn banner(mut command: std::process::Command) -> Result<String> {
    let out = command
        .arg("--version")
        .output()
        .map_err(super::io("running irqbalance --version"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !text.contains("version") {
        return Err(LabError::Command {
            command: "irqbalance --version".into(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(text)
}

/// `irqbalance version 1.9.4` -> `1.9.4`.
pub fn version_of(out: &str) -> String {
    out.split_whitespace()
        .last()
        .unwrap_or("?")
        .trim()
        .to_string()
}
