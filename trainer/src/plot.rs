//! PNG line charts (plotters' bitmap backend, DejaVu Sans for text).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

/// Where the font is looked for (Debian's `fonts-dejavu-core`).
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

pub(crate) fn register_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let bytes = FONT_PATHS
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .ok_or_else(|| {
                format!(
                    "no font for the chart: none of {} exists (Debian package fonts-dejavu-core)",
                    FONT_PATHS.join(", ")
                )
            })?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| "the font file could not be read".to_owned())
    })
    .clone()
}

/// Draw `series` (name, points) as lines with markers.
///
/// # Errors
/// No font, or drawing/writing failed.
pub fn curves(
    series: &[(String, Vec<(f64, f64)>)],
    x_label: &str,
    y_label: &str,
    path: &Path,
) -> Result<(), String> {
    register_font()?;
    let err = |e: &dyn std::fmt::Display| format!("chart {}: {e}", path.display());
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(1.0f64, f64::max);
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.1f64, f64::max)
        .min(1.0)
        * 1.1;
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(20)
        .caption("Success against training budget", ("sans-serif", 22))
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
    ];
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(3)))
            .map_err(|e| err(&e))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart
            .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 4, c.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
