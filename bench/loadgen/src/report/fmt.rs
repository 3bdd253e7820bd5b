//! How the report writes numbers and table heads, so every table reads the same way.

use std::fmt::Write as _;

/// A dash where there is no figure (a workload a target did not run, a missing CPU reading).
pub const NONE: &str = "–";

/// Three significant-ish figures: grouped integers from 100 up, then one or two decimals.
pub fn num(v: Option<f64>) -> String {
    match v {
        None => NONE.into(),
        Some(x) if x >= 100.0 => group(x.round() as u64),
        Some(x) if x >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

/// Two decimals, or the dash.
pub fn fixed2(v: Option<f64>) -> String {
    v.map_or(NONE.into(), |v| format!("{v:.2}"))
}

/// `12,345`: thousands separated.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `a / b` when both are known and `b` is positive.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// A ratio as `1.23×`, or the dash.
pub fn times(r: Option<f64>) -> String {
    r.map_or(NONE.into(), |r| format!("{r:.2}×"))
}

/// KiB as `12.3 MiB`.
pub fn mib(kib: f64) -> String {
    format!("{:.1} MiB", kib / 1024.0)
}

/// A workload's label without its unit: `3. CONNECT + one GET + close`.
pub fn short(label: &str) -> &str {
    label.split(" (").next().unwrap_or(label)
}

/// A table's two head lines: the workload column, one column per name, then the `extra`
/// columns; every column but the first right-aligned (they hold figures).
pub fn table_head<'a>(s: &mut String, names: impl IntoIterator<Item = &'a String>, extra: &[&str]) {
    let mut columns = 0;
    let _ = write!(s, "| workload |");
    for name in names {
        let _ = write!(s, " {name} |");
        columns += 1;
    }
    for name in extra {
        let _ = write!(s, " {name} |");
    }
    let _ = write!(s, "\n|---|");
    for _ in 0..columns + extra.len() {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s);
}
