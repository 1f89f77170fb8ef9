//! How an event's fields are written on stderr (when not under systemd's journal): the
//! message, then only the fields whose value the message does not already say.
//!
//! steerd's messages say everything on their own (`journalctl -u steerd` shows only the
//! message), and the same values go in fields for the journal's structured search, e.g.
//! `warn!(error = %e, "... : {e}")`. tracing's default format prints both, so a person
//! reading stderr saw each cause twice on one long line.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

/// Values this long or longer are left out when the message contains them.
const SAID_AT_LEAST: usize = 6;

/// The field formatter for stderr.
#[derive(Debug, Default, Clone, Copy)]
pub struct MessageFirst;

impl<'writer> FormatFields<'writer> for MessageFirst {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut seen = Fields::default();
        fields.record(&mut seen);
        writer.write_str(&seen.render())
    }
}

/// An event's fields, as text.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    /// Name, value as text (to compare with the message), value as written (strings
    /// quoted, as tracing's default format writes them).
    others: Vec<(&'static str, String, String)>,
}

impl Fields {
    /// The message, then ` name=value` for each field it does not already contain. Short
    /// values (a count, a CPU number) are always written: `4` in "every 4s" is not them.
    fn render(&self) -> String {
        let mut out = self.message.clone();
        for (name, value, shown) in &self.others {
            if value.len() >= SAID_AT_LEAST && self.message.contains(value.as_str()) {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "{name}={shown}");
        }
        out
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.others
                .push((field.name(), value.to_string(), format!("{value:?}")));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.others.push((field.name(), text.clone(), text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_the_message_says_is_not_repeated() {
        let fields = Fields {
            message: "quiet mode unavailable: tracefs is mounted nowhere".into(),
            others: vec![
                (
                    "error",
                    "tracefs is mounted nowhere".into(),
                    "tracefs is…".into(),
                ),
                ("devices", "4".into(), "4".into()),
                ("kind", "s".into(), "\"s\"".into()),
            ],
        };
        assert_eq!(
            fields.render(),
            "quiet mode unavailable: tracefs is mounted nowhere devices=4 kind=\"s\""
        );
    }
}
