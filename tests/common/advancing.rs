//! A fake kernel whose counters advance on a thread of their own, for tests that read
//! rates from a tree while it changes (`top`, the daemon, softnet rows without a CPU id).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Calls its writer with step 2, 3, ... once every period until stopped or dropped (the
/// caller writes step 1 before starting it).
pub struct Advancing {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Advancing {
    /// Starts advancing: waits `period`, then `write(step)`, and again.
    pub fn start(period: Duration, mut write: impl FnMut(u64) + Send + 'static) -> Advancing {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut step = 2;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(period);
                write(step);
                step += 1;
            }
        });
        Advancing {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops advancing and waits for the last write to finish.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Advancing {
    fn drop(&mut self) {
        self.stop();
    }
}
