//! How the grader writes and checks the figures on its pages: thousands separators, and
//! whether a timing line is one a script wrote.

/// Why a timing line was not written by a script, or `None` when it was. `scripts/lib.sh`
/// and `scripts/reproduce` record when a run finished as an RFC 3339 UTC time
/// (`2026-11-28T10:54:29Z`) and the load as the three load averages of `/proc/loadavg`
/// (`1.56 1.80 1.72`); a date alone, a rounded or estimated load, or a range was typed in.
pub fn typed_in(finished: &str, load: &str) -> Option<String> {
    let b = finished.as_bytes();
    let time_ok = b.len() == 20
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'Z',
            _ => c.is_ascii_digit(),
        });
    if !time_ok {
        return Some(format!(
            "finished `{finished}` is not the time a script records (YYYY-MM-DDTHH:MM:SSZ)"
        ));
    }
    let loads: Vec<&str> = load.split_whitespace().collect();
    let load_ok = loads.len() == 3
        && loads
            .iter()
            .all(|l| l.contains('.') && l.parse::<f64>().is_ok_and(|x| x >= 0.0));
    if !load_ok {
        return Some(format!(
            "load `{load}` is not the three load averages a script records"
        ));
    }
    None
}

/// `54823` → `54,823`; anything that is not a plain integer of four or more digits is
/// returned as it is.
pub fn thousands(s: &str) -> String {
    if s.len() < 4 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return s.to_string();
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
