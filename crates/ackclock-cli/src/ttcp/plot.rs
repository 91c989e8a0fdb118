//! The sweep's heatmap: task-to-task throughput over the send x receive buffer grid, as PNG
//! and SVG. Text is drawn with an embedded DejaVu Sans subset, so no system font (nor
//! fontconfig) is needed.

use super::sweep::Cell;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans-subset.ttf");
const FAMILY: &str = "sans-serif";
const SIZE: (u32, u32) = (1100, 960);

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            let _ = plotters::style::register_font(FAMILY, style, FONT);
        }
    });
}

/// `prefix` with `ext` appended (not replacing an extension the prefix may have).
fn with_suffix(prefix: &Path, ext: &str) -> PathBuf {
    let mut s = OsString::from(prefix.as_os_str());
    s.push(ext);
    PathBuf::from(s)
}

/// Render `cells` (missing ones grey) to `prefix.png` and `prefix.svg`; returns the files.
pub fn heatmap(prefix: &Path, title: &str, cells: &[Cell], max: u32, ceiling: f64) -> Result<Vec<PathBuf>, String> {
    register_font();
    let png = with_suffix(prefix, ".png");
    let svg = with_suffix(prefix, ".svg");
    draw(BitMapBackend::new(&png, SIZE).into_drawing_area(), title, cells, max, ceiling)
        .map_err(|e| format!("{}: {e}", png.display()))?;
    draw(SVGBackend::new(&svg, SIZE).into_drawing_area(), title, cells, max, ceiling)
        .map_err(|e| format!("{}: {e}", svg.display()))?;
    Ok(vec![png, svg])
}

/// Viridis, from a few of its stops: dark blue (low) to yellow (high).
fn viridis(t: f64) -> RGBColor {
    const STOPS: [(f64, [f64; 3]); 9] = [
        (0.000, [68.0, 1.0, 84.0]),
        (0.125, [72.0, 36.0, 117.0]),
        (0.250, [59.0, 82.0, 139.0]),
        (0.375, [44.0, 114.0, 142.0]),
        (0.500, [33.0, 145.0, 140.0]),
        (0.625, [40.0, 174.0, 128.0]),
        (0.750, [94.0, 201.0, 98.0]),
        (0.875, [170.0, 220.0, 50.0]),
        (1.000, [253.0, 231.0, 37.0]),
    ];
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let i = STOPS.iter().position(|s| s.0 >= t).unwrap_or(STOPS.len() - 1).max(1);
    let (t0, a) = STOPS[i - 1];
    let (t1, b) = STOPS[i];
    let f = (t - t0) / (t1 - t0);
    let c = |k: usize| (a[k] + (b[k] - a[k]) * f).round() as u8;
    RGBColor(c(0), c(1), c(2))
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    cells: &[Cell],
    max: u32,
    ceiling: f64,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FAMILY, 26).into_font().style(FontStyle::Bold)).map_err(err)?;
    let (main, bar) = root.split_horizontally(SIZE.0 - 170);

    let mut chart = ChartBuilder::on(&main)
        .margin(20)
        .x_label_area_size(70)
        .y_label_area_size(80)
        .build_cartesian_2d((1u32..max).into_segmented(), (1u32..max).into_segmented())
        .map_err(err)?;
    let label = |v: &SegmentValue<u32>| match v {
        SegmentValue::CenterOf(v) if *v <= max => v.to_string(),
        _ => String::new(),
    };
    // A cell's corners: the left edge of its segment, and the next one's (or the end).
    let edge = |v: u32| if v > max { SegmentValue::Last } else { SegmentValue::Exact(v) };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(max as usize)
        .y_labels(max as usize)
        .x_label_formatter(&label)
        .y_label_formatter(&label)
        .x_desc("receive buffer (packets)")
        .y_desc("send buffer (packets)")
        .label_style((FAMILY, 18))
        .axis_desc_style((FAMILY, 22))
        .draw()
        .map_err(err)?;

    // Cell values: a third of a cell high, within reason.
    let cell = chart.plotting_area().dim_in_pixel().0 as f64 / max as f64;
    let value_size = (cell / 3.2).clamp(8.0, 24.0) as u32;
    for c in cells {
        let t = c.task_kbps / ceiling;
        let color = viridis(t);
        let rect = Rectangle::new([(edge(c.rcv), edge(c.snd)), (edge(c.rcv + 1), edge(c.snd + 1))], color.filled());
        chart.draw_series(std::iter::once(rect)).map_err(err)?;
        let ink = if t > 0.6 { BLACK } else { WHITE };
        let style =
            TextStyle::from((FAMILY, value_size).into_font()).color(&ink).pos(Pos::new(HPos::Center, VPos::Center));
        let text = Text::new(
            format!("{:.0}", c.task_kbps),
            (SegmentValue::CenterOf(c.rcv), SegmentValue::CenterOf(c.snd)),
            style,
        );
        chart.draw_series(std::iter::once(text)).map_err(err)?;
    }
    // Cells with no run (--diagonal) in grey.
    for snd in 1..=max {
        for rcv in 1..=max {
            if !cells.iter().any(|c| c.snd == snd && c.rcv == rcv) {
                let rect = Rectangle::new(
                    [(edge(rcv), edge(snd)), (edge(rcv + 1), edge(snd + 1))],
                    RGBColor(225, 225, 225).filled(),
                );
                chart.draw_series(std::iter::once(rect)).map_err(err)?;
            }
        }
    }
    colorbar(&bar, ceiling).map_err(err)?;
    root.present().map_err(err)
}

/// A vertical colour scale from 0 to the ceiling, KB/s.
fn colorbar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    ceiling: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let mut chart = ChartBuilder::on(area)
        .margin_top(20)
        .margin_bottom(90)
        .margin_right(10)
        .y_label_area_size(70)
        .build_cartesian_2d(0u32..1u32, 0f64..ceiling)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(12)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc(format!("task-to-task KB/s (max {ceiling:.0})"))
        .label_style((FAMILY, 16))
        .axis_desc_style((FAMILY, 18))
        .draw()?;
    let steps = 200;
    chart.draw_series((0..steps).map(|i| {
        let lo = ceiling * i as f64 / steps as f64;
        let hi = ceiling * (i + 1) as f64 / steps as f64;
        Rectangle::new([(0, lo), (1, hi)], viridis((i as f64 + 0.5) / steps as f64).filled())
    }))?;
    Ok(())
}
