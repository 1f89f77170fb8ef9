//! The configuration in effect and where it comes from: the file (reloaded on SIGHUP or,
//! with `--watch-config`, when its text changes), with `--interval` and irqbalance's ban
//! laid over it, and the watch on the files steerd follows. A reload lands between ticks;
//! an invalid file keeps the running configuration.

use std::path::PathBuf;

use tracing::{error, info, warn};

use super::{Daemon, wakeups};
use crate::config::{Config, check_config_for};
use crate::discover::Machine;
use crate::irqbalance_compat::{self, IrqbalanceBan};

impl Daemon {
    /// Re-reads the configuration file. Invalid: the running configuration stays, every
    /// error is logged with its key and line, and the failure is counted.
    pub(super) fn reload(&mut self, why: &str) {
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Reloading, monotonic_now()]);
        let checked = read_config_text(&self.options.config_path).and_then(|text| {
            check_config_text(
                &self.options.config_path,
                &text,
                Some(self.engine.machine()),
            )
            .map(|config| (config, text))
        });
        match checked {
            Ok((config, text)) => {
                let follow_ban_before = self.file_config.cpus.irqbalance_banned_cpus;
                self.file_config = config;
                self.config_text = text;
                if self.file_config.cpus.irqbalance_banned_cpus && !follow_ban_before {
                    self.read_irqbalance_ban();
                }
                self.apply_overlays();
                self.follow_files();
                self.quiet.reloaded();
                self.export_quiet_state();
                self.shared.metrics.count_reload(true);
                info!(why, path = ?self.options.config_path, "configuration reloaded");
            }
            Err(errors) => {
                self.shared.metrics.count_reload(false);
                for e in &errors {
                    error!(why, error = %e, "configuration not reloaded; keeping the previous one: {e}");
                }
            }
        }
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status("running"),
        ]);
    }

    /// The configuration in effect: the file's, with `--interval` and irqbalance's ban laid
    /// over it. A ban that would leave no CPU allowed is refused (logged) and not applied.
    pub(super) fn apply_overlays(&mut self) {
        let mut config = self.file_config.clone();
        if let Some(interval) = self.options.interval {
            config.interval = interval;
        }
        if config.cpus.irqbalance_banned_cpus && !self.irqbalance_ban.cpus.is_empty() {
            let ban = self
                .irqbalance_ban
                .cpus
                .intersection(&self.engine.machine().topology.possible);
            let mut banned = config.clone();
            banned.cpus.banned = banned.cpus.banned.union(&ban);
            let problems = banned.validate(&self.engine.machine().topology);
            if problems.is_empty() {
                config = banned;
            } else {
                for problem in problems {
                    error!(sources = ?self.irqbalance_ban.sources, error = %problem, "irqbalance's ban not applied: {problem}");
                }
            }
        }
        self.engine.set_config(config);
    }

    /// Reads irqbalance's ban files (when `cpus.irqbalance_banned_cpus` is on). Returns
    /// whether the ban changed. A file that cannot be read or parsed keeps the last ban.
    pub(super) fn read_irqbalance_ban(&mut self) -> bool {
        if !self.file_config.cpus.irqbalance_banned_cpus {
            let had_one = !self.irqbalance_ban.cpus.is_empty();
            self.irqbalance_ban = IrqbalanceBan::default();
            return had_one;
        }
        match irqbalance_compat::read_ban(&self.options.root) {
            Ok(ban) if ban == self.irqbalance_ban => false,
            Ok(ban) => {
                info!(
                    cpus = %ban.cpus.to_list(),
                    sources = ?ban.sources,
                    "irqbalance's banned CPUs"
                );
                self.irqbalance_ban = ban;
                true
            }
            Err(e) => {
                error!(error = %e, "cannot read irqbalance's ban; keeping the previous one: {e}");
                false
            }
        }
    }

    /// Sets up (again) the watch on the files steerd follows: the configuration file with
    /// `--watch-config`, irqbalance's ban files with `cpus.irqbalance_banned_cpus`.
    pub(super) fn follow_files(&mut self) {
        let mut files = Vec::new();
        if self.options.watch_config
            && let Some(path) = &self.options.config_path
        {
            files.push(path.clone());
        }
        if self.file_config.cpus.irqbalance_banned_cpus {
            files.extend(irqbalance_compat::ban_file_paths(&self.options.root));
        }
        self.files = if files.is_empty() {
            None
        } else {
            match wakeups::FileWatch::new(files) {
                Ok(watch) => watch,
                Err(e) => {
                    warn!(error = %e, "cannot watch files; reload with SIGHUP: {e}");
                    None
                }
            }
        };
    }

    /// A followed file changed: reload a configuration whose text changed, and apply a
    /// changed irqbalance ban from this tick on.
    pub(super) fn look_at_followed_files(&mut self) {
        if self.options.watch_config {
            match read_config_text(&self.options.config_path) {
                Ok(text) if text != self.config_text => self.reload("file changed"),
                Ok(_) => {}
                // Between a delete and a create: the next event brings the new file.
                Err(errors) => {
                    for e in errors {
                        warn!(error = %e, "configuration file changed but cannot be read: {e}");
                    }
                }
            }
        }
        if self.read_irqbalance_ban() {
            self.apply_overlays();
        }
    }
}

/// The configuration file's text (`None`: no file, the built-in default).
pub(super) fn read_config_text(path: &Option<PathBuf>) -> Result<Option<String>, Vec<String>> {
    let Some(path) = path else {
        return Ok(None);
    };
    crate::config::read_config_file(path)
        .map(Some)
        .map_err(|e| vec![e.to_string()])
}

/// Checks a configuration text (without the machine: used before discovery).
pub(super) fn check_config_text(
    path: &Option<PathBuf>,
    text: &Option<String>,
    machine: Option<&Machine>,
) -> Result<Config, Vec<String>> {
    let (Some(path), Some(text)) = (path, text) else {
        return Ok(Config::default());
    };
    let checked = match machine {
        Some(machine) => check_config_for(text, &machine.topology),
        None => crate::config::check_config(text),
    };
    checked.map_err(|errors| {
        errors
            .iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect()
    })
}

fn monotonic_now() -> sd_notify::NotifyState<'static> {
    sd_notify::NotifyState::monotonic_usec_now().unwrap_or(sd_notify::NotifyState::MonotonicUsec(0))
}
