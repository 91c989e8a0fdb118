//! The progress bar of long runs (`ttcp`, `ttcp --sweep`, `sim`), on stderr.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant as WallClock;

/// A progress bar on stderr, shown only on a terminal, only when `enabled` (callers pass
/// `!json`), and only once the work has taken more than a second.
pub struct Progress {
    bar: ProgressBar,
    start: WallClock,
    shown: bool,
    enabled: bool,
}

impl Progress {
    /// A bar for `len` units of work, drawn with an indicatif `template`.
    pub fn new(len: u64, template: &str, enabled: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        let enabled = enabled && std::io::stderr().is_terminal();
        Progress { bar, start: WallClock::now(), shown: false, enabled }
    }

    /// `pos` units are done.
    pub fn set(&mut self, pos: u64) {
        self.bar.set_position(pos);
        if self.enabled && !self.shown && self.start.elapsed().as_secs_f64() > 1.0 {
            self.shown = true;
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Remove the bar (if it was shown) before the results are printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
