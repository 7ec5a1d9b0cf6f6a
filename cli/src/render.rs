//! Text rendering shared by the commands: timestamps, action summaries, exit
//! statuses, durations, sizes and aligned tables.

/// `YYYY-MM-DD HH:MM:SS` (UTC) for seconds since the Unix epoch.
pub fn format_time(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `ms` or `s` with a sensible precision.
pub fn format_duration_us(us: u64) -> String {
    if us < 10_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else if us < 1_000_000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

/// Bytes with a binary unit.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `"s"` unless `n` is 1.
pub fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Text on one line: line breaks and tabs become visible escapes.
pub fn one_line(text: &str) -> String {
    text.trim_end_matches('\n')
        .replace('\n', "\\n")
        .replace('\t', " ")
}

/// `text` cut to at most `max` characters, with `…` marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The first line of captured output (lossy UTF-8), without its newline.
pub fn first_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines().next().unwrap_or("").replace('\t', " ")
}

/// Columns padded to their widest cell, two spaces apart; the last column
/// is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            line.push_str(cell);
            if i < last {
                line.extend(std::iter::repeat_n(' ', w - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `+ path`, `~ path`, `- path` lines (added, modified, deleted), sorted by
/// path; empty when nothing differs.
pub fn diff_lines(added: &[String], modified: &[String], deleted: &[String]) -> String {
    let mut lines: Vec<(&str, char)> = added
        .iter()
        .map(|p| (p.as_str(), '+'))
        .chain(modified.iter().map(|p| (p.as_str(), '~')))
        .chain(deleted.iter().map(|p| (p.as_str(), '-')))
        .collect();
    lines.sort();
    lines
        .into_iter()
        .map(|(p, sign)| format!("{sign} {p}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_runtime::store::ExitStatus;

    #[test]
    fn times_are_utc_calendar_dates() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00");
        assert_eq!(format_time(946_684_800), "2000-01-01 00:00:00");
        assert_eq!(format_time(1_709_164_800 + 3723), "2024-02-29 01:02:03");
        assert_eq!(format_time(1_735_689_599), "2024-12-31 23:59:59");
    }

    #[test]
    fn exit_codes_follow_shell_conventions() {
        assert_eq!(ExitStatus::Code { code: 3 }.shell_code(), 3);
        assert_eq!(ExitStatus::Signal { signal: 9 }.shell_code(), 137);
        assert_eq!(ExitStatus::Timeout.shell_code(), 124);
        assert_eq!(ExitStatus::DiskLimit.shell_code(), 125);
        assert_eq!(ExitStatus::Signal { signal: 15 }.label(), "signal 15");
    }

    #[test]
    fn clips_mark_the_cut() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }

    #[test]
    fn tables_align() {
        let t = table(
            &["A", "BB"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["w".into(), "22".into()],
            ],
        );
        assert_eq!(t, "A    BB\nxyz  1\nw    22\n");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_duration_us(1500), "1.5 ms");
        assert_eq!(format_duration_us(250_000), "250 ms");
    }
}
