//! A failure that comes back every tick (counters that cannot be read, a rediscovery that
//! keeps failing on the same file) is told once, not once a tick: the journal of a daemon
//! ticking every second would otherwise fill with the same line, burying what changed.
//! Told again when its message changes, and its end is told with how many times it
//! happened, so the log still says when it began, what it was and when it ended.

/// What to log for this occurrence of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occurrence {
    /// Not seen just before (or with another message): log it at its level.
    New,
    /// The same as the last one: count it, log it at debug level only.
    Repeated,
}

/// One kind of failure (one per place that can fail every tick) and whether it lasts.
#[derive(Debug, Default)]
pub struct LastingFailure {
    /// The message of the failure going on, if one is.
    message: Option<String>,
    /// How many times it happened in a row (1 at its first).
    times: u64,
}

impl LastingFailure {
    /// The failure happened again with `message`.
    pub fn happened(&mut self, message: &str) -> Occurrence {
        if self.message.as_deref() == Some(message) {
            self.times += 1;
            return Occurrence::Repeated;
        }
        self.message = Some(message.to_string());
        self.times = 1;
        Occurrence::New
    }

    /// The operation succeeded: the number of failures in a row that this ends (to tell),
    /// or `None` when none was going on.
    pub fn ended(&mut self) -> Option<u64> {
        self.message.take()?;
        Some(std::mem::take(&mut self.times))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_new_once_per_message_and_its_end_counts_it() {
        let mut failure = LastingFailure::default();
        assert_eq!(failure.ended(), None, "nothing going on");
        assert_eq!(failure.happened("proc/stat: gone"), Occurrence::New);
        assert_eq!(failure.happened("proc/stat: gone"), Occurrence::Repeated);
        assert_eq!(failure.happened("proc/stat: gone"), Occurrence::Repeated);
        assert_eq!(failure.happened("softnet_stat: gone"), Occurrence::New);
        assert_eq!(failure.happened("softnet_stat: gone"), Occurrence::Repeated);
        assert_eq!(failure.ended(), Some(2), "the last message's run");
        assert_eq!(failure.ended(), None);
        assert_eq!(
            failure.happened("softnet_stat: gone"),
            Occurrence::New,
            "again after an end"
        );
    }
}
