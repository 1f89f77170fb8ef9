//! The tick's watch on each NAPI's threaded mode (issue 31). `napi-set threaded` (netdev
//! netlink, Linux 6.17; busy-polling, 6.19) switches one NAPI to or from its polling
//! thread and leaves the device's `sys/class/net/DEV/threaded` as it was, and that file is
//! all [`super::sampling::Sampling::device_changed`] read: such a switch waited for the
//! periodic rediscovery (`REDISCOVER_EVERY`, 300 s), its new thread unpinned until then.
//! The kernel announces no NAPI change (netdev's notifications are about devices and page
//! pools), so the watch asks: one `napi-get` dump per tick, only on kernels whose NAPIs
//! report a threaded mode, and only while discovery saw such a NAPI on a receive queue. A
//! mode that differs from the model's is the device's `ThreadedSwitched`, as a switch of the
//! sysfs file is, and the rediscovery it brings attaches or lets go of the thread.

use tracing::{debug, warn};

use crate::kernel::netlink::{Napi, NetdevClient};
use crate::model::inventory::{Inventory, ThreadedMode};

/// A receive queue's NAPI with the threaded mode the model holds for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedNapi {
    pub device: String,
    pub ifindex: u32,
    pub id: u32,
    pub mode: ThreadedMode,
}

/// The NAPIs of `inventory` whose threaded mode the kernel reported per NAPI (`napi-get`'s
/// `threaded`, 6.17+). On older kernels a queue's mode is the device's file, which the
/// tick reads already, so nothing is watched there and nothing asked.
pub fn watched(inventory: &Inventory) -> Vec<WatchedNapi> {
    inventory
        .devices
        .iter()
        .filter_map(|d| Some((d, d.ifindex?)))
        .flat_map(|(d, ifindex)| {
            d.rx_queues
                .iter()
                .filter(|q| q.napi.threaded_per_napi)
                .filter_map(move |q| {
                    Some(WatchedNapi {
                        device: d.name.clone(),
                        ifindex,
                        id: q.napi_id?,
                        mode: q.napi.threaded?,
                    })
                })
        })
        .collect()
}

/// The device of the first watched NAPI whose mode in `now` (a `napi-get` dump) is not
/// the model's. A NAPI missing from the dump (its device went down or lost the queue) is
/// not a switch: link and queue events tell those.
pub fn first_switched_device(watched: &[WatchedNapi], now: &[Napi]) -> Option<String> {
    watched.iter().find_map(|w| {
        let napi = now
            .iter()
            .find(|n| n.id == w.id && n.ifindex == w.ifindex)?;
        (napi.threaded_mode()? != w.mode).then(|| w.device.clone())
    })
}

/// The watch: what to compare, the netlink client it asks through (opened at the first
/// tick that needs it; a socket of its own beside the per-queue counters', which exist
/// only for multi-queue devices and may use `ethtool -S` instead), and the dump's vector,
/// kept so that a tick allocates nothing.
#[derive(Debug, Default)]
pub struct NapiModeWatch {
    watched: Vec<WatchedNapi>,
    client: Option<NetdevClient>,
    dump: Vec<Napi>,
    /// Whether a failure has been logged: later ones (the watch starts again after every
    /// rediscovery) go to the debug log, so a lasting failure is one warning.
    warned: bool,
}

impl NapiModeWatch {
    /// Follows a (re)discovered model. Off the host (a fake root) there is no kernel to ask.
    pub fn follow(&mut self, inventory: &Inventory, host: bool) {
        self.watched = if host { watched(inventory) } else { Vec::new() };
        if self.watched.is_empty() {
            self.client = None;
        }
    }

    /// The device one of whose NAPIs was switched since the model was read, if any. A
    /// failed dump is tried once more on a fresh socket; a second failure ends the watch
    /// until the next rediscovery (which reads every NAPI's mode anyway), said once.
    pub fn switched(&mut self) -> Option<String> {
        if self.watched.is_empty() {
            return None;
        }
        let asked = self.ask().or_else(|_| {
            self.client = None;
            self.ask()
        });
        match asked {
            Ok(()) => first_switched_device(&self.watched, &self.dump),
            Err(e) => {
                let message = format!(
                    "cannot watch the NAPIs' threaded modes: {e}; a NAPI switched to or from its thread with napi-set is found by the next rediscovery"
                );
                if self.warned {
                    debug!(error = %e, "{message}");
                } else {
                    warn!(error = %e, "{message}");
                    self.warned = true;
                }
                self.watched.clear();
                self.client = None;
                None
            }
        }
    }

    /// One `napi-get` dump into `self.dump`, connecting first if need be.
    fn ask(&mut self) -> Result<(), crate::error::Error> {
        let client = match &mut self.client {
            Some(client) => client,
            None => self.client.insert(NetdevClient::connect()?.ok_or_else(|| {
                crate::error::Error::Kernel {
                    what: "netdev napi-get".into(),
                    reason: "the kernel has no netdev netlink family".into(),
                }
            })?),
        };
        client.napis_into(None, &mut self.dump)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::inventory::{DeviceKind, NetDevice, RxQueue};

    /// A queue whose NAPI's mode came from `napi-get` (`per_napi`) or from the device's
    /// file.
    fn queue(index: u32, napi_id: Option<u32>, mode: ThreadedMode, per_napi: bool) -> RxQueue {
        let mut q = RxQueue {
            napi_id,
            ..RxQueue::bare(index)
        };
        q.napi.threaded = Some(mode);
        q.napi.threaded_per_napi = per_napi;
        q
    }

    fn napi(id: u32, ifindex: u32, threaded: Option<u32>) -> Napi {
        Napi {
            id,
            ifindex,
            threaded,
            ..Napi::default()
        }
    }

    /// A 6.19 guest's eth0 (ifindex 2): NAPIs 8193 and 8194 with modes from `napi-get`;
    /// eth1's mode from its `threaded` file, as on a kernel before 6.17 (6.8-6.16: NAPI ids
    /// but no per-NAPI mode).
    fn inventory() -> Inventory {
        let eth0 = NetDevice {
            ifindex: Some(2),
            rx_queues: vec![
                queue(0, Some(8193), ThreadedMode::Disabled, true),
                queue(1, Some(8194), ThreadedMode::Disabled, true),
            ],
            ..NetDevice::bare("eth0", DeviceKind::Physical)
        };
        let eth1 = NetDevice {
            ifindex: Some(3),
            rx_queues: vec![queue(0, Some(8195), ThreadedMode::Disabled, false)],
            ..NetDevice::bare("eth1", DeviceKind::Physical)
        };
        Inventory {
            devices: vec![eth0, eth1],
            ..Inventory::default()
        }
    }

    #[test]
    fn only_napis_whose_mode_the_kernel_reported_are_watched() {
        let w = watched(&inventory());
        let ids: Vec<u32> = w.iter().map(|n| n.id).collect();
        assert_eq!(ids, vec![8193, 8194]);
        assert!(w.iter().all(|n| n.device == "eth0" && n.ifindex == 2));
    }

    #[test]
    fn a_napi_set_to_its_thread_or_back_is_its_devices_switch() {
        let w = watched(&inventory());
        let same = [napi(8193, 2, Some(0)), napi(8194, 2, Some(0))];
        assert_eq!(first_switched_device(&w, &same), None);
        // `napi-set` id 8194 threaded enabled; then busy-poll (6.19).
        let on = [napi(8193, 2, Some(0)), napi(8194, 2, Some(1))];
        assert_eq!(first_switched_device(&w, &on).as_deref(), Some("eth0"));
        let busy = [napi(8193, 2, Some(2)), napi(8194, 2, Some(0))];
        assert_eq!(first_switched_device(&w, &busy).as_deref(), Some("eth0"));
    }

    #[test]
    fn a_napi_missing_or_without_a_mode_is_no_switch() {
        let w = watched(&inventory());
        // eth0 down (no NAPI listed), another device's NAPI with the same id, a mode this
        // steerd does not know, and no `threaded` attribute: none is a switch.
        assert_eq!(first_switched_device(&w, &[]), None);
        assert_eq!(first_switched_device(&w, &[napi(8194, 7, Some(1))]), None);
        assert_eq!(first_switched_device(&w, &[napi(8194, 2, Some(9))]), None);
        assert_eq!(first_switched_device(&w, &[napi(8194, 2, None)]), None);
    }

    #[test]
    fn off_the_host_nothing_is_watched_and_nothing_asked() {
        let mut watch = NapiModeWatch::default();
        watch.follow(&inventory(), false);
        assert_eq!(watch.switched(), None);
        assert!(watch.client.is_none());
    }
}
