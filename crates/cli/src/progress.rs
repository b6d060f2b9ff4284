//! Progress bars for long runs (drawn on stderr, hidden when it is not a terminal or the
//! run is short).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` units labelled `what`; hidden for runs under four million units.
pub fn bar(total: u64, what: &str) -> ProgressBar {
    if total < 4_000_000 {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {what} [{{bar:40}}] {{percent}}% {{per_sec}} eta {{eta}}"
        ))
        .expect("static template")
        .progress_chars("=> "),
    );
    b
}
