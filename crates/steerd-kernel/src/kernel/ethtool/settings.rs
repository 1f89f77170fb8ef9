//! What `ethtool -g` and `ethtool -c` show: a device's ring sizes (`ETHTOOL_GRINGPARAM`)
//! and its interrupt coalescing (`ETHTOOL_GCOALESCE`), which `steerd doctor` checks.
//!
//! A module of its own because these are plain gets of a fixed-size struct, read once
//! by doctor and never per tick; their structs' layouts are the kernel's.

use super::{AnsweredInPlace, Ethtool};
use crate::error::Error;

/// Commands (`ethtool.h`).
const ETHTOOL_GRINGPARAM: u32 = 0x0000_0010;
const ETHTOOL_GCOALESCE: u32 = 0x0000_000e;

/// `struct ethtool_ringparam` (36 bytes): what `ethtool -g` shows.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingParams {
    cmd: u32,
    pub rx_max_pending: u32,
    pub rx_mini_max_pending: u32,
    pub rx_jumbo_max_pending: u32,
    pub tx_max_pending: u32,
    pub rx_pending: u32,
    pub rx_mini_pending: u32,
    pub rx_jumbo_pending: u32,
    pub tx_pending: u32,
}

/// `struct ethtool_coalesce` (92 bytes): what `ethtool -c` shows. Only the receive
/// fields are public; the rest are there for the layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coalesce {
    cmd: u32,
    pub rx_coalesce_usecs: u32,
    pub rx_max_coalesced_frames: u32,
    rx_coalesce_usecs_irq: u32,
    rx_max_coalesced_frames_irq: u32,
    tx: [u32; 5],
    pub use_adaptive_rx_coalesce: u32,
    use_adaptive_tx_coalesce: u32,
    rest: [u32; 11],
}

impl AnsweredInPlace for RingParams {}

impl AnsweredInPlace for Coalesce {}

impl Coalesce {
    /// Receive coalescing as `ethtool -c` prints it: rx-usecs, rx-frames, adaptive-rx.
    pub fn rx(usecs: u32, frames: u32, adaptive: bool) -> Self {
        Coalesce {
            rx_coalesce_usecs: usecs,
            rx_max_coalesced_frames: frames,
            use_adaptive_rx_coalesce: u32::from(adaptive),
            ..Coalesce::default()
        }
    }
}

impl RingParams {
    /// Sizes as `ethtool -g` prints them: current RX and TX, and their maxima.
    pub fn new(rx_pending: u32, rx_max_pending: u32, tx_pending: u32, tx_max_pending: u32) -> Self {
        RingParams {
            rx_pending,
            rx_max_pending,
            tx_pending,
            tx_max_pending,
            ..RingParams::default()
        }
    }
}

impl Ethtool {
    /// `ETHTOOL_GRINGPARAM`: the ring sizes (`ethtool -g`). Fails with EOPNOTSUPP for
    /// devices whose driver has no rings to report (`lo`, veth).
    pub fn ring_params(&self, ifname: &str) -> Result<RingParams, Error> {
        let rings = RingParams {
            cmd: ETHTOOL_GRINGPARAM,
            ..RingParams::default()
        };
        self.get(ifname, "ETHTOOL_GRINGPARAM", rings)
    }

    /// `ETHTOOL_GCOALESCE`: interrupt coalescing (`ethtool -c`). Fails with EOPNOTSUPP
    /// where the driver does not report it.
    pub fn coalesce(&self, ifname: &str) -> Result<Coalesce, Error> {
        let coalesce = Coalesce {
            cmd: ETHTOOL_GCOALESCE,
            ..Coalesce::default()
        };
        self.get(ifname, "ETHTOOL_GCOALESCE", coalesce)
    }
}
