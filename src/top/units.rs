//! Short number forms for `steerd top`'s columns, shared by the text and the live view so
//! both print a rate the same way: `950`, `12.3k`, `1.20M`, a percentage with one
//! decimal, and `-` for a rate not known yet.

/// A rate with an SI suffix, at most 6 characters wide; `-` when unknown.
pub fn rate(value: Option<f64>) -> String {
    let Some(value) = value.filter(|v| v.is_finite()) else {
        return "-".to_string();
    };
    let value = value.max(0.0);
    if value < 1000.0 {
        // Rates of rare events (drops) below 1/s are still worth seeing as non-zero.
        if value > 0.0 && value < 10.0 {
            return format!("{value:.1}");
        }
        return format!("{value:.0}");
    }
    let (scaled, suffix) = if value < 1e6 {
        (value / 1e3, "k")
    } else if value < 1e9 {
        (value / 1e6, "M")
    } else {
        (value / 1e9, "G")
    };
    if scaled < 10.0 {
        format!("{scaled:.2}{suffix}")
    } else if scaled < 100.0 {
        format!("{scaled:.1}{suffix}")
    } else {
        format!("{scaled:.0}{suffix}")
    }
}

/// A share of time (0..=1) as a percentage with one decimal; `-` when unknown.
pub fn percent(share: Option<f64>) -> String {
    match share.filter(|v| v.is_finite()) {
        Some(share) => format!("{:.1}", share * 100.0),
        None => "-".to_string(),
    }
}

/// A cpulist for a column: `-` when unknown, `off` for an empty RPS mask.
pub fn cpus(list: Option<&str>, empty: &str) -> String {
    match list {
        None => "-".to_string(),
        Some("") => empty.to_string(),
        Some(list) => list.to_string(),
    }
}

/// `text` cut to at most `width` characters, with `…` marking the cut.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_stay_short() {
        assert_eq!(rate(None), "-");
        assert_eq!(rate(Some(0.0)), "0");
        assert_eq!(rate(Some(0.5)), "0.5");
        assert_eq!(rate(Some(950.0)), "950");
        assert_eq!(rate(Some(12_345.0)), "12.3k");
        assert_eq!(rate(Some(1_204_000.0)), "1.20M");
        assert_eq!(rate(Some(987_654_321_000.0)), "988G");
        assert_eq!(percent(Some(0.4567)), "45.7");
        assert_eq!(cpus(Some(""), "off"), "off");
        assert_eq!(fit("eth0:1 eth0:2", 8), "eth0:1 …");
    }
}
