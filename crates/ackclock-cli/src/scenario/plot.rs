//! Plots of the scenarios (plotters, PNG and SVG from the same drawing code): a
//! tcptrace-style time-sequence diagram, cwnd/ssthresh/RTO curves, per-flow shares, the
//! loss sweep against the Mathis model, and the RTT estimator.
//!
//! Text is drawn with an embedded subset of DejaVu Sans (see `assets/`), so PNGs come out
//! the same on a machine with no fonts installed.

use super::analysis::{self, secs};
use super::runs::{FastRecovery, RttRun, Sharing, SlowStart, SweepSeries, Timeout};
use ackclock::time::Instant;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::error::Error;
use std::path::{Path, PathBuf};

type PlotResult = Result<(), Box<dyn Error>>;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans-subset.ttf");

fn register_fonts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for family in ["sans-serif", "serif", "monospace"] {
            for style in [FontStyle::Normal, FontStyle::Bold, FontStyle::Italic, FontStyle::Oblique] {
                if plotters::style::register_font(family, style, FONT).is_err() {
                    eprintln!("plot: the embedded font does not load");
                }
            }
        }
    });
}

/// A figure that can draw itself on any backend.
pub trait Figure {
    /// File name without extension.
    fn name(&self) -> String;
    fn size(&self) -> (u32, u32) {
        (1200, 800)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> PlotResult
    where
        DB::ErrorType: 'static;
}

/// Write `fig` as `<dir>/<name>.png` and `<dir>/<name>.svg`; returns the paths.
pub fn render(dir: &Path, fig: &impl Figure) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    register_fonts();
    let png = dir.join(format!("{}.png", fig.name()));
    let svg = dir.join(format!("{}.svg", fig.name()));
    {
        let root = BitMapBackend::new(&png, fig.size()).into_drawing_area();
        root.fill(&WHITE)?;
        fig.draw(&root)?;
        root.present()?;
    }
    {
        let root = SVGBackend::new(&svg, fig.size()).into_drawing_area();
        root.fill(&WHITE)?;
        fig.draw(&root)?;
        root.present()?;
    }
    Ok(vec![png, svg])
}

// Colours: distinguishable, and readable in grey.
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const RED_: RGBColor = RGBColor(214, 39, 40);
const PURPLE: RGBColor = RGBColor(148, 103, 189);
const BROWN: RGBColor = RGBColor(140, 86, 75);
const PINK: RGBColor = RGBColor(227, 119, 194);
const GREY: RGBColor = RGBColor(127, 127, 127);
const OLIVE: RGBColor = RGBColor(188, 189, 34);
const CYAN_: RGBColor = RGBColor(23, 190, 207);
const PALETTE: [RGBColor; 8] = [BLUE, ORANGE, GREEN, RED_, PURPLE, BROWN, PINK, OLIVE];

const TITLE: u32 = 24;
const LABEL: u32 = 15;
const DESC: u32 = 17;
const LEGEND: u32 = 15;

fn title_style() -> TextStyle<'static> {
    ("sans-serif", TITLE).into()
}

fn legend_line(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3))
}

/// The legend swatch of a dashed line: the same dashes (in pixels) as the line.
fn legend_dashed(
    c: RGBColor,
    dash: i32,
    gap: i32,
) -> impl Fn((i32, i32)) -> DashedPathElement<std::vec::IntoIter<(i32, i32)>, i32> {
    move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 22, y)], dash, gap, c.stroke_width(3))
}

/// A wide line through `points`, drawn one segment at a time. plotters fills a wide
/// polyline as one polygon, and where the line turns sharply (a zigzag of samples) that
/// polygon folds over itself and stretches of the line come out one pixel thin; a single
/// segment is a plain quadrilateral.
fn polyline(points: &[(f64, f64)], style: ShapeStyle) -> impl Iterator<Item = PathElement<(f64, f64)>> + '_ {
    points.windows(2).map(move |w| PathElement::new(vec![w[0], w[1]], style))
}

fn legend_dot(c: RGBColor) -> impl Fn((i32, i32)) -> Circle<(i32, i32), i32> {
    move |(x, y)| Circle::new((x + 11, y), 4, c.filled())
}

/// Thin out a series to at most about `n` points (keeping the first and last).
fn thin<T: Copy>(v: &[T], n: usize) -> Vec<T> {
    if v.len() <= n || n < 2 {
        return v.to_vec();
    }
    let step = v.len().div_ceil(n);
    let mut out: Vec<T> = v.iter().step_by(step).copied().collect();
    if let Some(&last) = v.last() {
        out.push(last);
    }
    out
}

/// A step function through `(x, y)` points: horizontal, then vertical.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

fn max_f(v: impl IntoIterator<Item = f64>) -> f64 {
    v.into_iter().fold(0.0, f64::max)
}

// ---------------------------------------------------------------------------------------

pub struct SlowStartFig<'a>(pub &'a SlowStart);

impl Figure for SlowStartFig<'_> {
    fn name(&self) -> String {
        "slowstart".into()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> PlotResult
    where
        DB::ErrorType: 'static,
    {
        let r = self.0;
        let mss = f64::from(r.mss);
        let root =
            root.titled("Slow start: cwnd doubles every round trip (10 Mb/s, RTT 100 ms, NewReno)", title_style())?;
        let (left, right) = root.split_horizontally(640);
        let samples = analysis::samples(&r.trace);
        let pts: Vec<(f64, f64)> = samples.iter().map(|(t, s)| (secs(*t), f64::from(s.cwnd) / mss)).collect();
        let t_end = pts.last().map_or(1.0, |p| p.0);
        let y_max = max_f(pts.iter().map(|p| p.1)) * 1.08;
        let mut c = ChartBuilder::on(&left)
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .caption("cwnd over time", ("sans-serif", 19))
            .build_cartesian_2d(0.0..t_end, 0.0..y_max)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("cwnd (segments of 1448 B)")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        c.draw_series(LineSeries::new(steps(&pts), BLUE.stroke_width(2)))?
            .label("cwnd (after each ACK)")
            .legend(legend_line(BLUE));
        c.draw_series(r.rounds.iter().map(|x| Circle::new((secs(x.end), f64::from(x.cwnd) / mss), 5, RED_.filled())))?
            .label("end of a round trip")
            .legend(legend_dot(RED_));
        for x in &r.rounds {
            let label = format!("{:.0}", f64::from(x.cwnd) / mss);
            // Left of the point, above the rising line.
            let pos = (secs(x.end) - t_end * 0.055, f64::from(x.cwnd) / mss + y_max * 0.01);
            c.draw_series(std::iter::once(Text::new(label, pos, ("sans-serif", 14).into_font().color(&RED_))))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;

        // Right: cwnd at the end of each round on a log2 scale, against 10 * 2^k.
        let n = r.rounds.len().max(1);
        let first = r.rounds.first().map_or(20.0, |x| f64::from(x.cwnd) / mss / 2.0);
        let top = max_f(r.rounds.iter().map(|x| f64::from(x.cwnd) / mss)).max(first * 2.0) * 1.6;
        let mut c = ChartBuilder::on(&right)
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(60)
            .caption("cwnd per round trip (log scale)", ("sans-serif", 19))
            .build_cartesian_2d(
                0.5..(n as f64 + 0.5),
                (first * 0.8..top)
                    .log_scale()
                    .with_key_points(vec![5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]),
            )?;
        c.configure_mesh()
            .x_desc("round trip")
            .y_desc("cwnd at its end (segments)")
            .x_labels(n)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .draw()?;
        let ideal: Vec<(f64, f64)> = (0..=n).map(|k| (k as f64 + 0.5, first * 2f64.powf(k as f64 + 0.5))).collect();
        c.draw_series(DashedLineSeries::new(ideal, 8, 6, GREY.stroke_width(2)))?
            .label(format!("{:.0} × 2^k (doubling)", first))
            .legend(legend_dashed(GREY, 8, 6));
        let measured: Vec<(f64, f64)> =
            r.rounds.iter().enumerate().map(|(i, x)| ((i + 1) as f64, f64::from(x.cwnd) / mss)).collect();
        c.draw_series(LineSeries::new(measured.clone(), BLUE.stroke_width(2)))?;
        c.draw_series(measured.iter().map(|&p| Circle::new(p, 5, RED_.filled())))?
            .label("measured")
            .legend(legend_dot(RED_));
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------

pub struct FastRecoveryFig<'a>(pub &'a FastRecovery);

impl Figure for FastRecoveryFig<'_> {
    fn name(&self) -> String {
        "fast-recovery".into()
    }

    fn size(&self) -> (u32, u32) {
        (1300, 1000)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> PlotResult
    where
        DB::ErrorType: 'static,
    {
        let r = self.0;
        let Some(e) = &r.episode else {
            root.draw(&Text::new("no fast recovery happened", (50, 50), ("sans-serif", 24)))?;
            return Ok(());
        };
        let mss = f64::from(r.mss);
        let seg = |s: u64| (s as f64 - 1.0) / mss;
        let w = e.window(r.mss);
        let end = e.end.unwrap_or(e.start);
        let sent = analysis::sent(&r.trace);
        let acks = analysis::acks(&r.trace);
        // The original transmission of the lost segment opens the view.
        let lost_at = sent.iter().find(|s| s.seq == e.una && !s.retransmit).map_or(e.start, |s| s.time);
        let rtt = end.saturating_duration_since(e.start).as_secs_f64();
        let x0 = secs(lost_at) - 0.15 * rtt;
        let x1 = secs(end) + 0.9 * rtt;
        let in_view = |t: Instant| secs(t) >= x0 && secs(t) <= x1;
        // Low enough for the ACK line, which trails the segments by a window.
        let y0 = seg(e.una) - w * 1.05;
        let y1 = sent.iter().filter(|s| in_view(s.time)).map(|s| seg(s.seq + u64::from(s.len))).fold(0.0, f64::max)
            + w * 0.08;
        let title = format!(
            "Fast retransmit and recovery, one loss in a window of W = {w:.0} ({}; 10 Mb/s, RTT 80 ms)",
            if r.sack { "NewReno+SACK" } else { "NewReno, window inflation" }
        );
        let root = root.titled(&title, title_style())?;
        let (top, bottom) = root.split_vertically(700);

        let mut c = ChartBuilder::on(&top)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .caption("time-sequence diagram (sender's view, as tcptrace draws it)", ("sans-serif", 19))
            .build_cartesian_2d(x0..x1, y0..y1)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("sequence number (segments of 1448 B)")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        // Recovery period, shaded.
        c.draw_series(std::iter::once(Rectangle::new(
            [(secs(e.start), y0), (secs(end), y1)],
            RGBColor(255, 240, 200).mix(0.6).filled(),
        )))?
        .label("in fast recovery")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 22, y + 6)], RGBColor(255, 240, 200).filled()));
        // The ACK line: cumulative ACK as a step function; duplicate ACKs as dots.
        let ack_pts: Vec<(f64, f64)> =
            acks.iter().filter(|a| in_view(a.time)).map(|a| (secs(a.time), seg(a.ack))).collect();
        c.draw_series(LineSeries::new(steps(&ack_pts), GREEN.stroke_width(2)))?
            .label("cumulative ACK")
            .legend(legend_line(GREEN));
        let mut prev = None;
        let dups: Vec<(f64, f64)> = acks
            .iter()
            .filter_map(|a| {
                let dup = prev == Some(a.ack);
                prev = Some(a.ack);
                (dup && in_view(a.time)).then(|| (secs(a.time), seg(a.ack)))
            })
            .collect();
        c.draw_series(dups.iter().map(|&p| Circle::new(p, 2, GREEN.filled())))?
            .label(format!("duplicate ACK ({} in all)", dups.len()))
            .legend(legend_dot(GREEN));
        if r.sack {
            let blocks: Vec<(f64, f64, f64)> = acks
                .iter()
                .filter(|a| in_view(a.time))
                .flat_map(|a| a.sack.iter().map(move |&(l, h)| (secs(a.time), seg(l), seg(h))))
                .collect();
            c.draw_series(blocks.iter().map(|&(t, l, h)| PathElement::new(vec![(t, l), (t, h)], PURPLE.mix(0.35))))?
                .label("SACK blocks")
                .legend(legend_line(PURPLE));
        }
        // Segments sent: vertical ticks from seq to seq + len; retransmissions in red.
        let new_style = BLACK.stroke_width(2);
        c.draw_series(sent.iter().filter(|s| in_view(s.time) && !s.retransmit).map(|s| {
            PathElement::new(vec![(secs(s.time), seg(s.seq)), (secs(s.time), seg(s.seq + u64::from(s.len)))], new_style)
        }))?
        .label("segment sent")
        .legend(legend_line(BLACK));
        c.draw_series(sent.iter().filter(|s| in_view(s.time) && s.retransmit).map(|s| {
            PathElement::new(
                vec![(secs(s.time), seg(s.seq) - 1.5), (secs(s.time), seg(s.seq + u64::from(s.len)) + 1.5)],
                RED_.stroke_width(5),
            )
        }))?
        .label("retransmission")
        .legend(legend_line(RED_));
        // The dropped transmission.
        let lost = (secs(lost_at), seg(e.una) + 0.5);
        c.draw_series(std::iter::once(Cross::new(lost, 7, RED_.stroke_width(2))))?
            .label("dropped by the network")
            .legend(|(x, y)| Cross::new((x + 11, y), 6, RED_.stroke_width(2)));
        // Annotations.
        let font = ("sans-serif", 16).into_font();
        let dy = (y1 - y0) * 0.04;
        let notes = [
            (format!("segment {:.0} lost", seg(e.una)), (secs(lost_at) + 0.02 * rtt, seg(e.una) - 1.5 * dy)),
            (
                "3rd dup ACK: fast retransmit, ssthresh = W/2".to_string(),
                (secs(e.start) + 0.02 * rtt, seg(e.una) - 1.5 * dy),
            ),
            ("the first W/2 dup ACKs send nothing,".to_string(), (secs(e.start) + 0.03 * rtt, seg(e.una) + 0.62 * w)),
            (
                format!("the others send {} new segments (≈ W/2−1)", e.new_segments),
                (secs(e.start) + 0.03 * rtt, seg(e.una) + 0.62 * w - 1.3 * dy),
            ),
            (
                format!(
                    "recovery ACK: {} segment{} sent, no burst",
                    e.burst_at_end,
                    if e.burst_at_end == 1 { "" } else { "s" }
                ),
                (secs(end) + 0.03 * rtt, seg(e.point) - 1.0 * dy),
            ),
        ];
        for (text, pos) in notes {
            c.draw_series(std::iter::once(Text::new(text, pos, font.clone())))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;

        // Bottom: cwnd (with inflation) and ssthresh over the same time.
        let samples = analysis::samples(&r.trace);
        let cw: Vec<(f64, f64)> =
            samples.iter().filter(|(t, _)| in_view(*t)).map(|(t, s)| (secs(*t), f64::from(s.cwnd) / mss)).collect();
        let fl: Vec<(f64, f64)> =
            samples.iter().filter(|(t, _)| in_view(*t)).map(|(t, s)| (secs(*t), f64::from(s.flight) / mss)).collect();
        let ss: Vec<(f64, f64)> = samples
            .iter()
            .filter(|(t, s)| in_view(*t) && s.ssthresh < u32::MAX / 2)
            .map(|(t, s)| (secs(*t), f64::from(s.ssthresh) / mss))
            .collect();
        let ymax = max_f(cw.iter().chain(&fl).map(|p| p.1)) * 1.1;
        let mut c = ChartBuilder::on(&bottom)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .build_cartesian_2d(x0..x1, 0.0..ymax)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("segments")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        c.draw_series(LineSeries::new(steps(&cw), BLUE.stroke_width(2)))?
            .label(if r.sack {
                "cwnd (RFC 6675: not inflated; the pipe estimate limits sending)"
            } else {
                "cwnd (inflated by dup ACKs in recovery)"
            })
            .legend(legend_line(BLUE));
        c.draw_series(LineSeries::new(steps(&fl), GREY.stroke_width(2)))?
            .label("data in flight (snd.max − snd.una)")
            .legend(legend_line(GREY));
        if !ss.is_empty() {
            c.draw_series(DashedLineSeries::new(steps(&ss), 8, 5, ORANGE.stroke_width(2)))?
                .label("ssthresh")
                .legend(legend_dashed(ORANGE, 8, 5));
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------

pub struct TimeoutFig<'a>(pub &'a Timeout);

impl Figure for TimeoutFig<'_> {
    fn name(&self) -> String {
        "timeout".into()
    }

    fn size(&self) -> (u32, u32) {
        (1300, 950)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> PlotResult
    where
        DB::ErrorType: 'static,
    {
        let r = self.0;
        let mss = f64::from(r.mss);
        let root = root.titled(
            "Retransmission timeout: cwnd to 1 segment, slow start to ssthresh, then congestion avoidance",
            title_style(),
        )?;
        let (top, bottom) = root.split_vertically(600);
        let samples = analysis::samples(&r.trace);
        let t_end = samples.last().map_or(1.0, |s| secs(s.0));
        let cw: Vec<(f64, f64)> = samples.iter().map(|(t, s)| (secs(*t), f64::from(s.cwnd) / mss)).collect();
        let ss: Vec<(f64, f64)> = samples
            .iter()
            .filter(|(_, s)| s.ssthresh < u32::MAX / 2)
            .map(|(t, s)| (secs(*t), f64::from(s.ssthresh) / mss))
            .collect();
        let ymax = max_f(cw.iter().map(|p| p.1)).max(max_f(ss.iter().map(|p| p.1))) * 1.15;
        let (o0, o1) = (secs(r.outage.0), secs(r.outage.1));
        let mut c = ChartBuilder::on(&top)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .caption("congestion window (10 Mb/s, RTT 80 ms, queue 66 frames, NewReno+SACK)", ("sans-serif", 19))
            .build_cartesian_2d(0.0..t_end, 0.0..ymax)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("segments of 1448 B")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        let shade = RGBColor(200, 200, 200);
        c.draw_series(std::iter::once(Rectangle::new([(o0, 0.0), (o1, ymax)], shade.mix(0.6).filled())))?
            .label("path outage (all data lost)")
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 22, y + 6)], shade.filled()));
        c.draw_series(LineSeries::new(steps(&cw), BLUE.stroke_width(2)))?.label("cwnd").legend(legend_line(BLUE));
        c.draw_series(DashedLineSeries::new(steps(&ss), 8, 5, ORANGE.stroke_width(2)))?
            .label("ssthresh")
            .legend(legend_dashed(ORANGE, 8, 5));
        for &t in &r.rtos {
            c.draw_series(std::iter::once(PathElement::new(
                vec![(secs(t), 0.0), (secs(t), ymax)],
                RED_.stroke_width(2),
            )))?;
        }
        c.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
            .label("retransmission timeout")
            .legend(legend_line(RED_));
        let font = ("sans-serif", 16).into_font();
        if let Some(&rto) = r.rtos.first() {
            let ss_after = r.rounds_after.first().map_or(0.0, |x| f64::from(x.ssthresh) / mss);
            c.draw_series(std::iter::once(Text::new(
                format!("RTO: cwnd = 1, ssthresh = {ss_after:.1} (half the flight)"),
                (secs(rto) + 0.04, ymax * 0.93),
                font.clone(),
            )))?;
            if let Some(ca) = r.rounds_after.iter().find(|x| x.cwnd >= x.ssthresh) {
                c.draw_series(std::iter::once(Text::new(
                    "slow start ends at ssthresh → +1 segment per RTT",
                    (secs(ca.end) + 0.05, f64::from(ca.cwnd) / mss - ymax * 0.07),
                    font.clone(),
                )))?;
            }
        }
        let first_ep = analysis::episodes(&r.trace, ackclock::time::Duration::from_millis(80)).into_iter().next();
        if let Some(ep) = first_ep {
            c.draw_series(std::iter::once(Text::new(
                "fast recovery (one loss): cwnd = ssthresh = W/2",
                (secs(ep.start) + 0.05, f64::from(ep.ssthresh) / mss - ymax * 0.07),
                font.clone(),
            )))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;

        // Bottom: RTO and SRTT.
        let rto: Vec<(f64, f64)> = samples.iter().map(|(t, s)| (secs(*t), s.rto_us as f64 / 1e3)).collect();
        let srtt: Vec<(f64, f64)> =
            samples.iter().filter(|(_, s)| s.srtt_us > 0).map(|(t, s)| (secs(*t), s.srtt_us as f64 / 1e3)).collect();
        let ymax = max_f(rto.iter().map(|p| p.1)) * 1.15;
        let mut c = ChartBuilder::on(&bottom)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .build_cartesian_2d(0.0..t_end, 0.0..ymax)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("milliseconds")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        c.draw_series(std::iter::once(Rectangle::new([(o0, 0.0), (o1, ymax)], shade.mix(0.6).filled())))?;
        c.draw_series(LineSeries::new(steps(&rto), RED_.stroke_width(2)))?
            .label("RTO (doubles on expiry; min 200 ms)")
            .legend(legend_line(RED_));
        c.draw_series(LineSeries::new(steps(&srtt), BLUE.stroke_width(2)))?
            .label("smoothed RTT")
            .legend(legend_line(BLUE));
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------

pub struct SharingFig<'a>(pub &'a Sharing);

impl Figure for SharingFig<'_> {
    fn name(&self) -> String {
        "sharing".into()
    }

    fn size(&self) -> (u32, u32) {
        (1300, 950)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> PlotResult
    where
        DB::ErrorType: 'static,
    {
        let r = self.0;
        let mss = f64::from(r.mss);
        let title = format!(
            "{} {} flows on a 10 Mb/s, 40 ms bottleneck: Jain's index {:.3} over the last half",
            r.flows,
            algo_label(r.algorithm),
            r.jain
        );
        let root = root.titled(&title, title_style())?;
        let (top, bottom) = root.split_vertically(470);
        let t_end = r.duration.as_secs_f64();
        let series: Vec<Vec<(f64, f64)>> = r
            .samples
            .iter()
            .map(|s| thin(&s.iter().map(|(t, x)| (secs(*t), f64::from(x.cwnd) / mss)).collect::<Vec<_>>(), 3000))
            .collect();
        // Scaled to the shared phase: the first flow's slow start, alone on the link, can
        // reach several times the window the flows settle at and would flatten the rest.
        let peak = max_f(series.iter().flatten().map(|p| p.1));
        let settled = max_f(series.iter().flatten().filter(|p| p.0 >= t_end / 2.0).map(|p| p.1));
        let ymax = if settled > 0.0 { peak.min(2.0 * settled) } else { peak } * 1.1;
        let cut = peak > ymax;
        let series: Vec<Vec<(f64, f64)>> =
            series.into_iter().map(|s| s.into_iter().map(|(t, y)| (t, y.min(ymax))).collect()).collect();
        let caption = if cut {
            "congestion window of each flow (flow i starts at 2i s; early peaks cut off at the top)".to_string()
        } else {
            "congestion window of each flow (flow i starts at 2i s)".to_string()
        };
        let mut c = ChartBuilder::on(&top)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .caption(caption, ("sans-serif", 19))
            .build_cartesian_2d(0.0..t_end, 0.0..ymax)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("cwnd (segments)")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            let col = PALETTE[i % PALETTE.len()];
            c.draw_series(LineSeries::new(s.iter().copied(), col.stroke_width(1)))?
                .label(format!("flow {i}"))
                .legend(legend_line(col));
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;

        // Goodput per bin, and the fair share.
        let bin = r.bin.as_secs_f64();
        let half = r.bytes.first().map_or(0, Vec::len) / 2;
        let rate = r.bottleneck_bps as f64 / 1e6;
        let mut c = ChartBuilder::on(&bottom)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .caption(
                format!(
                    "goodput of each flow (averaged over {:.0} ms); shaded: the half used for Jain's index",
                    bin * 1e3
                ),
                ("sans-serif", 19),
            )
            .build_cartesian_2d(0.0..t_end, 0.0..rate * 1.05)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("goodput (Mb/s)")
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        c.draw_series(std::iter::once(Rectangle::new(
            [(half as f64 * bin, 0.0), (t_end, rate * 1.05)],
            RGBColor(230, 230, 230).mix(0.5).filled(),
        )))?;
        for (i, b) in r.bytes.iter().enumerate() {
            let col = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> =
                b.iter().enumerate().map(|(k, &n)| ((k as f64 + 1.0) * bin, n as f64 * 8.0 / bin / 1e6)).collect();
            c.draw_series(polyline(&pts, col.stroke_width(2)))?
                .label(format!("flow {i}: {:.2} Mb/s in the last half", r.last_half_bps[i] / 1e6))
                .legend(legend_line(col));
        }
        // The most goodput the bottleneck carries: a full frame is the payload plus 90 bytes
        // on the wire (TCP 20 + timestamps 12, IPv4 20, Ethernet 14 + FCS 4, preamble 8,
        // inter-frame gap 12); the ACKs go the other way.
        let ceiling = rate * mss / (mss + 90.0);
        let fair = ceiling / r.flows as f64;
        c.draw_series(DashedLineSeries::new(vec![(0.0, fair), (t_end, fair)], 8, 6, BLACK.stroke_width(2)))?
            .label(format!("fair share {fair:.2} Mb/s ({ceiling:.2} Mb/s of goodput / {})", r.flows))
            .legend(legend_dashed(BLACK, 8, 6));
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------

pub struct SweepFig<'a> {
    pub series: &'a [SweepSeries],
    pub rate_bps: u64,
    pub mss: u32,
}

impl Figure for SweepFig<'_> {
    fn name(&self) -> String {
        "loss-sweep".into()
    }

    fn size(&self) -> (u32, u32) {
        (1600, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> PlotResult
    where
        DB::ErrorType: 'static,
    {
        let root = root.titled(
            "Goodput against random loss, beside the Mathis et al. model (MSS/RTT)·√(3/2)/√p — 10 Mb/s link",
            title_style(),
        )?;
        let mut rtts: Vec<_> = self.series.iter().map(|s| s.rtt).collect();
        rtts.dedup();
        let panels = root.split_evenly((1, rtts.len().max(1)));
        let p_min = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(1.0, f64::min);
        let p_max = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(0.0, f64::max);
        let (x0, x1) = (p_min * 0.7 * 100.0, p_max * 1.4 * 100.0);
        let rate = self.rate_bps as f64 / 1e6;
        let colours = [BLUE, ORANGE, GREEN, PURPLE, BROWN];
        for (panel, rtt) in panels.iter().zip(&rtts) {
            let bdp = self.rate_bps as f64 * rtt.as_secs_f64() / 8.0 / f64::from(self.mss);
            let mut c = ChartBuilder::on(panel)
                .margin(15)
                .x_label_area_size(50)
                .y_label_area_size(65)
                .caption(format!("RTT {} ms (BDP {:.0} segments)", rtt.as_millis(), bdp), ("sans-serif", 19))
                .build_cartesian_2d(
                    (x0..x1).log_scale().with_key_points(vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]),
                    (0.2..rate * 2.2).log_scale().with_key_points(vec![0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0]),
                )?;
            c.configure_mesh()
                .x_desc("loss probability (%)")
                .y_desc("goodput (Mb/s)")
                .x_label_formatter(&|x| trim(*x))
                .y_label_formatter(&|y| trim(*y))
                .label_style(("sans-serif", LABEL))
                .axis_desc_style(("sans-serif", DESC))
                .draw()?;
            let model: Vec<(f64, f64)> = (0..=60)
                .map(|i| {
                    let pct = x0 * (x1 / x0).powf(i as f64 / 60.0);
                    let bps = analysis::mathis(f64::from(self.mss), rtt.as_secs_f64(), pct / 100.0) * 8.0;
                    (pct, bps / 1e6)
                })
                .filter(|p| p.1 < rate * 2.2)
                .collect();
            c.draw_series(DashedLineSeries::new(model, 9, 6, BLACK.stroke_width(2)))?
                .label("Mathis model")
                .legend(legend_dashed(BLACK, 9, 6));
            c.draw_series(DashedLineSeries::new(vec![(x0, rate), (x1, rate)], 3, 4, GREY.stroke_width(2)))?
                .label("link rate")
                .legend(legend_dashed(GREY, 3, 4));
            for (i, s) in self.series.iter().filter(|s| s.rtt == *rtt).enumerate() {
                let col = colours[i % colours.len()];
                let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.0 * 100.0, (p.1 / 1e6).max(0.2))).collect();
                c.draw_series(polyline(&pts, col.stroke_width(2)))?.label(s.label).legend(legend_line(col));
                c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled())))?;
            }
            c.configure_series_labels()
                .position(SeriesLabelPosition::LowerLeft)
                .label_font(("sans-serif", LEGEND))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .draw()?;
        }
        Ok(())
    }
}

/// A number for a log axis: no trailing zeros.
fn trim(x: f64) -> String {
    let s = if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else if x >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------

pub struct RttFig<'a>(pub &'a RttRun);

impl Figure for RttFig<'_> {
    fn name(&self) -> String {
        "rtt".into()
    }

    fn size(&self) -> (u32, u32) {
        (1400, 800)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> PlotResult
    where
        DB::ErrorType: 'static,
    {
        let r = self.0;
        let root = root.titled(
            "RTT estimation (Jacobson and Karels 1988): SRTT ← 7/8·SRTT + 1/8·R, RTTVAR ← 3/4·RTTVAR + 1/4·|SRTT − R|, RTO = SRTT + 4·RTTVAR",
            ("sans-serif", 21),
        )?;
        let t_end = r.phases.last().map_or(1.0, |p| secs(p.to));
        let ms = |us: u64| us as f64 / 1e3;
        let samples: Vec<(f64, f64)> = r.points.iter().map(|p| (secs(p.time), ms(p.rtt_us))).collect();
        let srtt: Vec<(f64, f64)> = r.points.iter().map(|p| (secs(p.time), ms(p.srtt_us))).collect();
        let est: Vec<(f64, f64)> =
            r.points.iter().map(|p| (secs(p.time), ms(p.srtt_us) + 4.0 * ms(p.rttvar_us))).collect();
        let rto: Vec<(f64, f64)> = r.points.iter().map(|p| (secs(p.time), ms(p.rto_us))).collect();
        let ymax = max_f(samples.iter().chain(&rto).chain(&est).map(|p| p.1)) * 1.12;
        let mut c = ChartBuilder::on(&root)
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(75)
            .caption(
                format!(
                    "10 Mb/s path, {} ms base RTT; the data direction's delay varies by phase; {} RTT samples",
                    r.base_rtt.as_millis(),
                    r.points.len()
                ),
                ("sans-serif", 18),
            )
            .build_cartesian_2d(0.0..t_end, 0.0..ymax)?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc("milliseconds")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", LABEL))
            .axis_desc_style(("sans-serif", DESC))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, p) in r.phases.iter().enumerate() {
            if i % 2 == 1 {
                c.draw_series(std::iter::once(Rectangle::new(
                    [(secs(p.from), 0.0), (secs(p.to), ymax)],
                    RGBColor(235, 235, 235).mix(0.7).filled(),
                )))?;
            }
            c.draw_series(std::iter::once(Text::new(
                p.name,
                (secs(p.from) + 0.1, ymax * 0.97),
                ("sans-serif", 16).into_font(),
            )))?;
        }
        c.draw_series(samples.iter().map(|&p| Circle::new(p, 2, GREY.filled())))?
            .label("measured RTT samples")
            .legend(legend_dot(GREY));
        c.draw_series(polyline(&srtt, BLUE.stroke_width(2)))?.label("SRTT").legend(legend_line(BLUE));
        c.draw_series(DashedLineSeries::new(est, 6, 4, CYAN_.stroke_width(2)))?
            .label("SRTT + 4·RTTVAR")
            .legend(legend_dashed(CYAN_, 6, 4));
        c.draw_series(polyline(&rto, RED_.stroke_width(2)))?.label("RTO (at least 200 ms)").legend(legend_line(RED_));
        for &t in &r.rtos {
            c.draw_series(std::iter::once(Cross::new((secs(t), ymax * 0.9), 8, RED_.stroke_width(3))))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::Coordinate(80, 60))
            .label_font(("sans-serif", LEGEND))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

fn algo_label(a: ackclock::tcp::cc::Algorithm) -> &'static str {
    match a {
        ackclock::tcp::cc::Algorithm::NewReno => "NewReno",
        ackclock::tcp::cc::Algorithm::Cubic { hystart: false } => "CUBIC",
        ackclock::tcp::cc::Algorithm::Cubic { hystart: true } => "CUBIC+HyStart++",
    }
}
