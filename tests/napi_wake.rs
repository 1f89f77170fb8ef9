//! The NAPI-poll wake-up fires on real receive work, and keeps firing round after round
//! without being reopened (root only; skips with a printed reason otherwise).

mod common;
mod netns;

use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::time::Duration;

use common::suite::{TestResult, not_here};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use steerd::cpuset::CpuSet;
use steerd::kernel::napi_wake::NapiPollWake;

fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online CPUs");
    CpuSet::parse_list(text.trim())
        .expect("online list")
        .iter()
        .collect()
}

fn readable_within(wake: &NapiPollWake, timeout: Duration) -> bool {
    let mut fds = [PollFd::new(wake.as_fd(), PollFlags::POLLIN)];
    let millis = PollTimeout::try_from(timeout.as_millis() as u64).expect("timeout");
    poll(&mut fds, millis).expect("poll") > 0
}

/// Sends `count` datagrams over the loopback of a namespace of the test's own.
fn loopback_datagrams(ns: &netns::Netns, count: usize) {
    ns.spawn(None, move || {
        let receiver = UdpSocket::bind("127.0.0.1:0").expect("bind receiver");
        receiver
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let sender = UdpSocket::bind("127.0.0.1:0").expect("bind sender");
        let to = receiver.local_addr().expect("address");
        let mut buf = [0u8; 64];
        for _ in 0..count {
            sender.send_to(b"steerd napi wake test", to).expect("send");
            // Received one by one, so each datagram is its own backlog poll.
            let _ = receiver.recv_from(&mut buf);
        }
    })
    .join()
    .expect("traffic thread");
}

fn receive_work_wakes_the_reader_again_and_again() -> TestResult {
    netns::require()?;
    let wake = match NapiPollWake::open(online_cpus(), 1) {
        Ok(wake) => wake,
        Err(e) => {
            return not_here(format!(
                "the kernel offers no napi:napi_poll perf event here: {e}"
            ));
        }
    };
    assert!(wake.cpus() >= 1);
    let ns = netns::Netns::create("napiwake");
    // Five rounds of 1000 polls each: more samples than the 4 KiB ring holds (512), so
    // this also shows the read-only ring is overwritten instead of filling up and going
    // silent.
    for round in 0..5 {
        wake.drain();
        loopback_datagrams(&ns, 1000);
        assert!(
            readable_within(&wake, Duration::from_secs(2)),
            "round {round}: 1000 loopback datagrams did not wake the reader"
        );
    }
    Ok(())
}

fn fewer_polls_than_the_period_do_not_wake() -> TestResult {
    netns::require()?;
    // A period far above what this test (and a quiet host) receives in its half second.
    let wake = match NapiPollWake::open(online_cpus(), 1_000_000) {
        Ok(wake) => wake,
        Err(e) => {
            return not_here(format!(
                "the kernel offers no napi:napi_poll perf event here: {e}"
            ));
        }
    };
    let ns = netns::Netns::create("napiquiet");
    loopback_datagrams(&ns, 1000);
    assert!(
        !readable_within(&wake, Duration::from_millis(500)),
        "1000 polls woke a reader asking for 1000000"
    );
    Ok(())
}

fn a_tracepoint_id_the_kernel_lacks_is_an_open_error() -> TestResult {
    netns::require()?;
    // Tracepoint ids are small; this one does not exist.
    let error = NapiPollWake::open_tracepoint(u64::from(u32::MAX) - 7, online_cpus(), 1)
        .err()
        .expect("an unknown tracepoint must not open");
    assert!(error.to_string().contains("perf_event_open"), "{error}");
    Ok(())
}

suite_main!(
    receive_work_wakes_the_reader_again_and_again,
    fewer_polls_than_the_period_do_not_wake,
    a_tracepoint_id_the_kernel_lacks_is_an_open_error,
);
