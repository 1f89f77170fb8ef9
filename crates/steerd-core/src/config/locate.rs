//! Finds the line of a key path (`cpus.banned`) in a YAML text.
//!
//! yaml_serde reports a line for the errors it finds while reading, but values are checked
//! after reading (and against the machine), when spans are gone. Rather than keep a span for
//! every value, this walks the text's block mappings by indentation, which is how config
//! files are written. A key written in flow style (`cpus: {banned: 3}`) is found at its
//! closest block-style ancestor.

/// The 1-based line where `path` (dot-separated keys) is written, or the line of its
/// deepest ancestor that is written in block style; `None` if not even the first key is.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    let wanted: Vec<&str> = path.split('.').filter(|k| !k.is_empty()).collect();
    if wanted.is_empty() {
        return None;
    }
    let mut stack: Vec<(usize, &str)> = Vec::new();
    let mut best: Option<(usize, usize)> = None;
    for (index, raw) in text.lines().enumerate() {
        let Some((indent, key)) = mapping_key(raw) else {
            continue;
        };
        while stack.last().is_some_and(|&(depth, _)| depth >= indent) {
            stack.pop();
        }
        stack.push((indent, key));
        let matched = stack
            .iter()
            .zip(&wanted)
            .take_while(|((_, have), want)| have == *want)
            .count();
        if matched == stack.len() && best.is_none_or(|(depth, _)| matched > depth) {
            best = Some((matched, index + 1));
            if matched == wanted.len() {
                break;
            }
        }
    }
    best.map(|(_, line)| line)
}

/// The indentation and key of a `key: ...` line, ignoring comments, blank lines, list
/// items and document markers.
fn mapping_key(raw: &str) -> Option<(usize, &str)> {
    let trimmed = raw.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("---") {
        return None;
    }
    if trimmed.starts_with('-') {
        return None;
    }
    let indent = raw.len() - trimmed.len();
    let (key, _) = split_key(trimmed)?;
    Some((indent, key))
}

/// Splits `key: rest` (the key possibly quoted) at the mapping colon.
fn split_key(line: &str) -> Option<(&str, &str)> {
    if let Some(quote) = line.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let end = line[1..].find(quote)? + 1;
        let rest = line[end + 1..].trim_start().strip_prefix(':')?;
        return Some((&line[1..end], rest));
    }
    let colon = line
        .char_indices()
        .find(|&(i, c)| c == ':' && line[i + 1..].chars().next().is_none_or(char::is_whitespace))?
        .0;
    Some((line[..colon].trim_end(), &line[colon + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# comment
interval: 1s
cpus:
  # banned CPUs
  banned: 0-3
  reserved: ''
devices:
  eth0:
    rps: static
    rps_cpus: 1-2
  \"veth*\":
    rps: off
watermarks: {high: 0.5}
";

    #[test]
    fn finds_nested_keys() {
        assert_eq!(line_of(TEXT, "interval"), Some(2));
        assert_eq!(line_of(TEXT, "cpus.banned"), Some(5));
        assert_eq!(line_of(TEXT, "cpus.reserved"), Some(6));
        assert_eq!(line_of(TEXT, "devices.eth0.rps_cpus"), Some(10));
        assert_eq!(line_of(TEXT, "devices.veth*.rps"), Some(12));
    }

    #[test]
    fn falls_back_to_the_closest_ancestor() {
        assert_eq!(line_of(TEXT, "watermarks.high"), Some(13));
        assert_eq!(line_of(TEXT, "devices.eth1.rps"), Some(7));
        assert_eq!(line_of(TEXT, "rfs.enabled"), None);
    }

    #[test]
    fn does_not_match_a_same_named_key_elsewhere() {
        let text = "rps:\n  mode: auto\ndevices:\n  eth0:\n    mode: x\n";
        assert_eq!(line_of(text, "rps.mode"), Some(2));
        assert_eq!(line_of(text, "devices.eth0.mode"), Some(5));
    }
}
