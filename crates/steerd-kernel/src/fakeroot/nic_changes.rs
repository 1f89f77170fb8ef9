//! Changes a test makes to a written tree's NIC between ticks, as an administrator or a
//! driver makes them on a running machine: a channel-count change, threaded NAPI (and its
//! kernel threads' `proc/PID`) turned on, to busy-poll or off, and interrupt deferral.
//! Apart from the first writing because the daemon must see them happen under it.

use std::fs;
use std::io;

use super::{FakeTree, write};
use crate::cpuset::CpuSet;

impl FakeTree {
    /// A channel-count change (`ethtool -L <nic> combined <active>`) as a driver such as
    /// virtio_net makes it: the NIC keeps all its vectors, `queues/rx-N` and `tx-N` at or
    /// past `active` are removed, missing ones below it are added with RPS off (mask 0,
    /// flow count 0), and the driver writes its own default affinity (`driver_default`
    /// of the queue index) to the vector of every active queue.
    pub fn set_channels(
        &self,
        nic: usize,
        active: u32,
        driver_default: &dyn Fn(u32) -> CpuSet,
    ) -> io::Result<()> {
        let n = self.machine.cpu_count();
        let name = &self.machine.nics[nic].name;
        let queues = fs::canonicalize(self.root.join("sys/class/net").join(name))?.join("queues");
        let empty_mask = CpuSet::new().to_mask(n).map_err(io::Error::other)?;
        for q in 0..self.machine.nics[nic].queues {
            let (rx, tx) = (
                queues.join(format!("rx-{q}")),
                queues.join(format!("tx-{q}")),
            );
            if q >= active {
                for dir in [rx, tx] {
                    if dir.exists() {
                        fs::remove_dir_all(dir)?;
                    }
                }
                continue;
            }
            if !rx.exists() {
                fs::create_dir_all(&rx)?;
                fs::write(rx.join("rps_cpus"), format!("{empty_mask}\n"))?;
                fs::write(rx.join("rps_flow_cnt"), "0\n")?;
            }
            if !tx.exists() {
                fs::create_dir_all(&tx)?;
                fs::write(tx.join("xps_cpus"), format!("{empty_mask}\n"))?;
            }
            let cpus = driver_default(q);
            let base = self
                .root
                .join(format!("proc/irq/{}", self.queue_irqs[nic][q as usize]));
            // Only the list form, the file steerd reads and writes: a fake tree does not keep
            // `smp_affinity` in step (as for writes steerd makes).
            fs::write(
                base.join("smp_affinity_list"),
                format!("{}\n", cpus.to_list()),
            )?;
        }
        Ok(())
    }

    /// Turns threaded NAPI on for a NIC, as `echo 1 > /sys/class/net/DEV/threaded` does:
    /// one `napi/DEV-ID` kernel thread per receive queue (ids from 8193, in queue order, as
    /// virtio_net registers them) and one transmit-only `napi/DEV-0`, each a
    /// `proc/PID/{comm,status}` allowed on every CPU. Pids are `first_pid` on; returns the
    /// receive threads' pids by queue.
    pub fn make_threaded(&self, nic: usize, first_pid: u32) -> io::Result<Vec<u32>> {
        let name = &self.machine.nics[nic].name;
        write(
            &self.root,
            &format!("sys/class/net/{name}/threaded"),
            "1
",
        )?;
        let all = CpuSet::first_n(self.machine.cpu_count()).to_list();
        let queues = self.machine.nics[nic].queues;
        let mut rx = Vec::new();
        for n in 0..=queues {
            let pid = first_pid + n;
            let id = if n < queues { 8193 + n } else { 0 };
            let comm = format!("napi/{name}-{id}");
            write(
                &self.root,
                &format!("proc/{pid}/comm"),
                &format!("{comm}\n"),
            )?;
            write(
                &self.root,
                &format!("proc/{pid}/status"),
                &format!(
                    "Name:\t{comm}\nUmask:\t0000\nState:\tS (sleeping)\nTgid:\t{pid}\n\
                     Pid:\t{pid}\nPPid:\t2\nCpus_allowed_list:\t{all}\n\
                     Mems_allowed_list:\t0\n"
                ),
            )?;
            // No CPU time yet, last ran on CPU 0.
            write(
                &self.root,
                &format!("proc/{pid}/stat"),
                &format!(
                    "{pid} ({comm}) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 \
                     18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 0 0 0 0 0 0 0 0 \
                     0 0 0 0 0 0\n"
                ),
            )?;
            if n < queues {
                rx.push(pid);
            }
        }
        Ok(rx)
    }

    /// Threaded NAPI in busy-poll mode (6.19, `echo 2 > /sys/class/net/DEV/threaded`): the
    /// threads of [`FakeTree::make_threaded`], each of which polls without pause.
    pub fn make_busy_poll(&self, nic: usize, first_pid: u32) -> io::Result<Vec<u32>> {
        let rx = self.make_threaded(nic, first_pid)?;
        let name = &self.machine.nics[nic].name;
        write(&self.root, &format!("sys/class/net/{name}/threaded"), "2\n")?;
        Ok(rx)
    }

    /// Turns threaded NAPI off again (`echo 0 > /sys/class/net/DEV/threaded`): the kernel
    /// stops the threads, so the `proc/PID` directories of `pids` (and of the transmit-only
    /// thread after them, as [`FakeTree::make_threaded`] numbered it) vanish.
    pub fn make_unthreaded(&self, nic: usize, pids: &[u32]) -> io::Result<()> {
        let name = &self.machine.nics[nic].name;
        write(&self.root, &format!("sys/class/net/{name}/threaded"), "0\n")?;
        let tx = pids.iter().max().map(|&last| last + 1);
        for &pid in pids.iter().chain(tx.iter()) {
            let dir = self.root.join(format!("proc/{pid}"));
            if dir.exists() {
                fs::remove_dir_all(dir)?;
            }
        }
        Ok(())
    }

    /// Software interrupt deferral on a NIC, as `echo N > napi_defer_hard_irqs` and
    /// `echo NS > gro_flush_timeout` in its `sys/class/net/DEV` set it.
    pub fn set_napi_deferral(
        &self,
        nic: usize,
        defer_hard_irqs: u32,
        gro_flush_timeout_ns: u64,
    ) -> io::Result<()> {
        let name = &self.machine.nics[nic].name;
        let dir = format!("sys/class/net/{name}");
        write(
            &self.root,
            &format!("{dir}/napi_defer_hard_irqs"),
            &format!("{defer_hard_irqs}\n"),
        )?;
        write(
            &self.root,
            &format!("{dir}/gro_flush_timeout"),
            &format!("{gro_flush_timeout_ns}\n"),
        )
    }
}
