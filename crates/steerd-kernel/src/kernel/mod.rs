//! All I/O with the kernel, always under a [`crate::Root`]: one small reader per kernel
//! file or interface, each returning a typed value from [`crate::model`].

pub mod cgroup_isolation;
pub mod ethtool;
pub mod ethtool_events;
pub mod ethtool_names;
pub mod event_socket;
pub mod interfaces;
pub mod irq_names;
pub mod link_events;
pub mod linkinfo;
pub mod napi_threads;
pub mod napi_wake;
pub mod netlink;
pub mod procfs;
pub mod queue_counters;
pub mod queue_events;
pub mod rss;
pub mod sampler;
pub mod sysfs;
