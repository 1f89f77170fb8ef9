//! The guest's root: an initramfs built on the host from Debian's packages (busybox-static,
//! the cloud kernel's virtio modules, irqbalance, ethtool, strace, iproute2's tc and the
//! libraries they link) and the steerd binary under test, plus a small per-run archive with
//! the scenario.
//!
//! An initramfs boots in seconds and needs no disk image; the kernel unpacks concatenated
//! newc archives in order, so the per-run part is appended rather than rebuilding the base.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::platform::{Platform, Tool};
use super::{LabError, Result, io, run_cmd, which};

/// The guest's init script.
pub const INIT: &str = include_str!("guest-init.sh");

/// virtio modules in load order; those built into a kernel are simply absent.
pub const MODULES: [&str; 9] = [
    "virtio_ring",
    "virtio",
    "virtio_pci_legacy_dev",
    "virtio_pci_modern_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
    "virtio_blk",
];

/// A kernel to boot and the directory of its modules.
#[derive(Debug, Clone)]
pub struct GuestKernel {
    pub vmlinuz: PathBuf,
    pub modules: PathBuf,
    pub version: String,
}

impl GuestKernel {
    /// `STEERD_LAB_KERNEL=DIR` (an unpacked kernel package, `scripts/lab-kernel.sh`:
    /// `DIR/boot/vmlinuz-V`, `DIR/lib/modules/V`), else the newest cloud kernel in `/boot`.
    pub fn find() -> Result<Self> {
        match std::env::var_os("STEERD_LAB_KERNEL") {
            Some(dir) => Self::find_in(Path::new(&dir)),
            None => Self::find_in_boot(Path::new("/"), true),
        }
    }

    /// The newest kernel of an unpacked package under `root` (any flavour: igb needs the
    /// generic one).
    pub fn find_in(root: &Path) -> Result<Self> {
        Self::find_in_boot(root, false)
    }

    /// The newest kernel under `root` (`root/boot/vmlinuz-V`, `root/lib/modules/V`); only
    /// cloud kernels when `cloud_only` (the host's /boot also holds the kernel it runs).
    fn find_in_boot(root: &Path, cloud_only: bool) -> Result<Self> {
        let boot = root.join("boot");
        let mut found: Vec<String> = fs::read_dir(&boot)
            .map_err(io(format!("reading {}", boot.display())))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| n.strip_prefix("vmlinuz-").map(str::to_string))
            .filter(|v| !cloud_only || v.contains("cloud"))
            .collect();
        found.sort();
        let Some(version) = found.pop() else {
            return Err(LabError::Missing(
                format!("a cloud kernel in {}", boot.display()),
                "apt-get install linux-image-cloud-amd64".into(),
            ));
        };
        let modules = ["lib/modules", "usr/lib/modules"]
            .iter()
            .map(|m| root.join(m).join(&version))
            .find(|p| p.is_dir())
            .ok_or_else(|| {
                LabError::Missing(
                    format!("modules of {version}"),
                    "install the kernel package whole".into(),
                )
            })?;
        Ok(GuestKernel {
            vmlinuz: boot.join(format!("vmlinuz-{version}")),
            modules,
            version,
        })
    }

    /// The module file of `name`, if the kernel has it as a module (`i2c-algo-bit` and
    /// `i2c_algo_bit` name the same module; the file keeps the name it was built as).
    fn module(&self, name: &str) -> Option<PathBuf> {
        let dir = self.modules.join("kernel");
        find_file(&dir, &format!("{name}.ko"), 6)
            .or_else(|| find_file(&dir, &format!("{}.ko", name.replace('_', "-")), 6))
            .or_else(|| find_file(&dir, &format!("{}.ko", name.replace('-', "_")), 6))
    }

    /// `name` and the modules it needs, each after what it needs, as `insmod` must load
    /// them: an unpacked package has no `modules.dep` (depmod runs at install), so each
    /// module's own `depends` field is read with `modinfo -F depends` (igb on 6.18: dca,
    /// i2c-algo-bit). Modules built into the kernel are absent and skipped.
    pub fn with_dependencies(&self, name: &str) -> Result<Vec<String>> {
        let mut order = Vec::new();
        self.add_with_dependencies(name, &mut order, 0)?;
        Ok(order)
    }

    fn add_with_dependencies(&self, name: &str, order: &mut Vec<String>, depth: u32) -> Result<()> {
        if order.iter().any(|m| m == name) {
            return Ok(());
        }
        if depth > 16 {
            return Err(LabError::Guest(format!(
                "module dependencies of {name} loop or run deeper than 16"
            )));
        }
        let Some(path) = self.module(name) else {
            return Ok(());
        };
        let depends = run_cmd("modinfo", &["-F", "depends", &path.display().to_string()])?;
        for dep in depends.trim().split(',').filter(|d| !d.is_empty()) {
            self.add_with_dependencies(dep, order, depth + 1)?;
        }
        order.push(name.to_string());
        Ok(())
    }
}

fn find_file(dir: &Path, stem: &str, depth: u32) -> Option<PathBuf> {
    let entries = fs::read_dir(dir).ok()?;
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == stem
            || name
                .strip_prefix(stem)
                .is_some_and(|s| s == ".xz" || s == ".zst")
        {
            return Some(path);
        }
        if path.is_dir() {
            dirs.push(path);
        }
    }
    if depth == 0 {
        return None;
    }
    dirs.iter().find_map(|d| find_file(d, stem, depth - 1))
}

/// Builds the base archive in `work` and returns its path and the modules it carries.
pub fn build_base(
    work: &Path,
    kernel: &GuestKernel,
    platform: &Platform,
    steerd: &Path,
) -> Result<(PathBuf, Vec<String>)> {
    let stage = work.join("stage");
    let _ = fs::remove_dir_all(&stage);
    for dir in [
        "bin", "sbin", "usr/sbin", "modules", "proc", "sys", "dev", "run", "tmp", "etc",
    ] {
        fs::create_dir_all(stage.join(dir)).map_err(io("making the guest root"))?;
    }
    let busybox = which("busybox").ok_or_else(|| {
        LabError::Missing("busybox".into(), "apt-get install busybox-static".into())
    })?;
    copy_exec(&busybox, &stage.join("bin/busybox"))?;
    for (program, to) in [
        (steerd.to_path_buf(), "usr/sbin/steerd"),
        (find_tool("ethtool", "ethtool")?, "usr/sbin/ethtool"),
        // Holds a write in the in-flight fault scenarios (lab/faults.rs).
        (find_tool("strace", "strace")?, "usr/bin/strace"),
        // The transmit queues' qdisc statistics (`tc -s`, which busybox's tc lacks): the
        // guest runs it by this path, past busybox's applet on PATH.
        (find_tool("tc", "iproute2")?, "usr/sbin/tc"),
    ] {
        install(&program, &stage, to)?;
    }
    // Last, so that a newer userland's C library replaces the host's: the host's programs
    // run on a newer glibc, not the other way round.
    install_from(&platform.irqbalance, &stage, "usr/sbin/irqbalance")?;
    let mut names: Vec<String> = MODULES.iter().map(|m| m.to_string()).collect();
    for driver in platform.nic.drivers() {
        let needed = kernel.with_dependencies(driver)?;
        if needed.is_empty() {
            return Err(LabError::Missing(
                format!("the {driver} module in kernel {}", kernel.version),
                "the cloud kernels have no igb: scripts/lab-kernel.sh VERSION generic".into(),
            ));
        }
        // Once each, however many of the NIC's drivers need it.
        for module in needed {
            if !names.contains(&module) {
                names.push(module);
            }
        }
    }
    let mut loaded = Vec::new();
    for name in &names {
        let Some(path) = kernel.module(name) else {
            continue;
        };
        let to = stage.join(format!("modules/{name}.ko"));
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        match ext {
            "xz" | "zst" => {
                let tool = if ext == "xz" { "xz" } else { "zstd" };
                let out = Command::new(tool)
                    .args(["-dc"])
                    .arg(&path)
                    .output()
                    .map_err(io(format!("running {tool}")))?;
                fs::write(&to, out.stdout).map_err(io(format!("writing {}", to.display())))?;
            }
            _ => {
                fs::copy(&path, &to).map_err(io(format!("copying {}", path.display())))?;
            }
        }
        loaded.push(name.to_string());
    }
    // The kernel goes beside the initrd: a userland's QEMU sees only the work directory.
    fs::copy(&kernel.vmlinuz, work.join("vmlinuz"))
        .map_err(io(format!("copying {}", kernel.vmlinuz.display())))?;
    let init = stage.join("init");
    fs::write(&init, INIT).map_err(io("writing init"))?;
    fs::set_permissions(&init, fs::Permissions::from_mode(0o755)).map_err(io("chmod init"))?;
    let base = work.join("base.cpio");
    cpio(&stage, &base)?;
    Ok((base, loaded))
}

/// Copies `program` to `to` under `stage` with the libraries it needs, without debug info.
fn install(program: &Path, stage: &Path, to: &str) -> Result<()> {
    copy_exec(program, &stage.join(to))?;
    copy_libraries(program, Path::new("/"), stage, false)?;
    strip(stage, to)
}

/// Copies a program of another root (a userland's irqbalance) with the libraries it needs
/// there, replacing those already in `stage`.
fn install_from(tool: &Tool, stage: &Path, to: &str) -> Result<()> {
    copy_exec(&tool.host_path(), &stage.join(to))?;
    copy_libraries(&tool.path, &tool.root, stage, tool.root != Path::new("/"))?;
    strip(stage, to)
}

fn strip(stage: &Path, to: &str) -> Result<()> {
    // Debug info is most of a test build's size and the guest never reads it.
    if which("strip").is_some() {
        run_cmd(
            "strip",
            &["--strip-debug", &stage.join(to).display().to_string()],
        )?;
    }
    Ok(())
}

/// Adds `program` at `to` to the base archive `build_base` made in `work`, for a test that
/// runs more than the binaries every guest has (`tests/lab.rs` runs `examples/rss.rs`).
#[allow(dead_code)] // only tests/lab.rs adds a program so far
pub fn add_program(work: &Path, base: &Path, program: &Path, to: &str) -> Result<()> {
    let stage = work.join("stage");
    install(program, &stage, to)?;
    cpio(&stage, base)
}

/// Adds the whole directory `tree` (another root: `scripts/lab-tuned.sh`'s) to the base
/// archive at `to`, as it is (links, modes); the guest runs what it holds chrooted there.
/// `cp -a` copies it: links, owners and modes as they are, which a hand-written walk
/// would have to redo.
pub fn add_tree(work: &Path, base: &Path, tree: &Path, to: &str) -> Result<()> {
    let stage = work.join("stage");
    let dest = stage.join(to);
    let _ = fs::remove_dir_all(&dest);
    fs::create_dir_all(&dest).map_err(io(format!("making {}", dest.display())))?;
    run_cmd(
        "cp",
        &[
            "-a",
            "--",
            &format!("{}/.", tree.display()),
            &dest.display().to_string(),
        ],
    )?;
    cpio(&stage, base)
}

/// A host program to copy into the guest, or which Debian package installs it.
fn find_tool(name: &str, package: &str) -> Result<PathBuf> {
    which(name).ok_or_else(|| LabError::Missing(name.into(), format!("apt-get install {package}")))
}

fn copy_exec(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(io("making the guest root"))?;
    }
    fs::copy(from, to).map_err(io(format!("copying {}", from.display())))?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755)).map_err(io("chmod"))?;
    Ok(())
}

/// Copies the shared libraries `ldd` lists for `program` (a path inside `root`; `ldd`
/// runs chrooted there for another root than `/`) from `root` to the same paths in the
/// guest; `replace` overwrites libraries already there.
fn copy_libraries(program: &Path, root: &Path, stage: &Path, replace: bool) -> Result<()> {
    let out = if root == Path::new("/") {
        Command::new("ldd").arg(program).output()
    } else {
        Command::new("chroot")
            .arg(root)
            .arg("ldd")
            .arg(program)
            .output()
    }
    .map_err(io("running ldd"))?;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let path = match line.split("=>").nth(1) {
            Some(rest) => rest.split_whitespace().next(),
            None => line
                .split_whitespace()
                .next()
                .filter(|p| p.starts_with('/')),
        };
        let Some(path) = path.filter(|p| p.starts_with('/')) else {
            continue;
        };
        let to = stage.join(path.trim_start_matches('/'));
        if replace || !to.exists() {
            copy_exec(&resolve_in(root, Path::new(path))?, &to)?;
        }
    }
    Ok(())
}

/// The file `path` names inside `root`, following symlinks as a process chrooted there
/// would: an absolute link inside a userland (`/lib64/ld-linux-x86-64.so.2`) points into
/// that root, not at the host's file of the same name.
fn resolve_in(root: &Path, path: &Path) -> Result<PathBuf> {
    use std::collections::VecDeque;
    use std::path::Component;
    let mut left: VecDeque<std::ffi::OsString> = VecDeque::new();
    let owned = |c: Component| c.as_os_str().to_os_string();
    left.extend(path.components().map(owned));
    let mut at = PathBuf::new(); // relative to root
    let mut links = 0;
    while let Some(part) = left.pop_front() {
        match Path::new(&part)
            .components()
            .next()
            .unwrap_or(Component::CurDir)
        {
            Component::RootDir | Component::Prefix(_) => at = PathBuf::new(),
            Component::CurDir => {}
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(name) => {
                let next = at.join(name);
                let on_host = root.join(&next);
                match fs::read_link(&on_host) {
                    Ok(target) => {
                        links += 1;
                        if links > 40 {
                            return Err(LabError::Guest(format!(
                                "too many links resolving {} in {}",
                                path.display(),
                                root.display()
                            )));
                        }
                        for c in target.components().rev() {
                            left.push_front(owned(c));
                        }
                    }
                    Err(_) => at = next,
                }
            }
        }
    }
    Ok(root.join(at))
}

/// Packs a directory as a newc archive.
fn cpio(dir: &Path, to: &Path) -> Result<()> {
    let list = run_cmd("sh", &["-c", &format!("cd '{}' && find .", dir.display())])?;
    let out = fs::File::create(to).map_err(io(format!("creating {}", to.display())))?;
    let mut child = Command::new("cpio")
        .args(["--quiet", "-o", "-H", "newc"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(out)
        .spawn()
        .map_err(io("running cpio (apt-get install cpio)"))?;
    child
        .stdin
        .take()
        .ok_or_else(|| LabError::Guest("cpio has no stdin".into()))?
        .write_all(list.as_bytes())
        .map_err(io("feeding cpio"))?;
    let status = child.wait().map_err(io("waiting for cpio"))?;
    if !status.success() {
        return Err(LabError::Command {
            command: "cpio -o -H newc".into(),
            status: status.to_string(),
            stderr: String::new(),
        });
    }
    Ok(())
}

/// The base archive with `lab.env` appended: one initrd for one run.
pub fn with_env(base: &Path, work: &Path, env: &str) -> Result<PathBuf> {
    let stage = work.join("run-stage");
    let _ = fs::remove_dir_all(&stage);
    fs::create_dir_all(&stage).map_err(io("making the run archive"))?;
    fs::write(stage.join("lab.env"), env).map_err(io("writing lab.env"))?;
    let extra = work.join("run-extra.cpio");
    cpio(&stage, &extra)?;
    let initrd = work.join("run.cpio");
    let mut bytes = fs::read(base).map_err(io("reading the base archive"))?;
    bytes.extend(fs::read(&extra).map_err(io("reading the run archive"))?);
    fs::write(&initrd, bytes).map_err(io("writing the initrd"))?;
    Ok(initrd)
}
