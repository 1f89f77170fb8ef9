//! A cheap nesting bound checked before the YAML parser runs.
//!
//! yaml_serde refuses a document nested deeper than 128 levels, but only after its loader
//! has turned the whole text into events: about 30 µs a level in a debug build, so a
//! 1 MiB file of `[` (a million levels) would take half a minute to be refused. This scan
//! takes a millisecond. It counts flow brackets (`[`, `{`) outside quotes and comments,
//! and the block indicators (`- `, `? `) that open a line; a steerd configuration nests 4
//! levels, so counting generously cannot refuse a real one.

/// Deeper than this is refused; the parser's own limit.
pub const MAX_NESTING: usize = 128;

/// The 1-based line where the nesting first passes `limit`, if it does.
pub fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut line = 1;
    let mut flow = 0usize;
    let mut quote: Option<u8> = None;
    let mut comment = false;
    let mut at_line_start = true;
    let mut block = 0usize;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line += 1;
            comment = false;
            at_line_start = true;
            block = 0;
            i += 1;
            continue;
        }
        if comment {
            i += 1;
            continue;
        }
        if let Some(q) = quote {
            if b == b'\\' && q == b'"' {
                i += 2;
                continue;
            }
            if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        let next_is_space = bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
        match b {
            b' ' | b'\t' => {}
            b'-' | b'?' if at_line_start && next_is_space => {
                block += 1;
                if block + flow > limit {
                    return Some(line);
                }
            }
            b'#' if i == 0 || bytes[i - 1].is_ascii_whitespace() => comment = true,
            b'"' | b'\'' => quote = Some(b),
            b'[' | b'{' => {
                flow += 1;
                if block + flow > limit {
                    return Some(line);
                }
            }
            b']' | b'}' => flow = flow.saturating_sub(1),
            _ => at_line_start = false,
        }
        if !matches!(b, b' ' | b'\t' | b'-' | b'?') {
            at_line_start = false;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_flow_and_leading_block_indicators() {
        assert_eq!(too_deep(&"[".repeat(129), MAX_NESTING), Some(1));
        assert_eq!(too_deep(&"[".repeat(128), MAX_NESTING), None);
        assert_eq!(too_deep(&"{a: ".repeat(200), MAX_NESTING), Some(1));
        assert_eq!(
            too_deep(&format!("x: 1\n{}x", "- ".repeat(200)), 128),
            Some(2)
        );
        // Balanced lists do not add up.
        assert_eq!(too_deep(&"[1], ".repeat(1000), 2), None);
    }

    #[test]
    fn ignores_brackets_in_quotes_and_comments() {
        let quoted = format!(
            "a: \"{}\"\nb: '{}'\n# {}\n",
            "[".repeat(300),
            "{".repeat(300),
            "[".repeat(300)
        );
        assert_eq!(too_deep(&quoted, MAX_NESTING), None);
        assert_eq!(too_deep("a: \"\\\"[[[\"\n", 2), None);
    }

    #[test]
    fn the_shipped_config_is_shallow() {
        let shipped = include_str!("../../../../config/steerd.yaml");
        assert_eq!(too_deep(shipped, 8), None);
    }
}
