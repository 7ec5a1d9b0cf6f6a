//! The chart of `arbor credit eval`: one line per estimator against budget
//! on a log2 axis (PNG, plotters' bitmap backend, the font of
//! [`crate::plot`]).

use std::path::Path;

use plotters::prelude::*;

/// Ten distinguishable colours (matplotlib's tab10).
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draw `series` (name, points (x, y) with x > 0) with x on a log2 axis
/// (ticks labelled with powers of two) and y in [0, 1].
///
/// # Errors
/// No font, no positive x, or drawing or writing failed.
pub fn log2_curves(
    series: &[(String, Vec<(f64, f64)>)],
    caption: &str,
    x_label: &str,
    y_label: &str,
    path: &Path,
) -> Result<(), String> {
    crate::plot::register_font()?;
    let err = |e: &dyn std::fmt::Display| format!("chart {}: {e}", path.display());
    let mut ticks: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .filter(|x| *x > 0.0)
        .map(f64::log2)
        .collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let (Some(&lo), Some(&hi)) = (ticks.first(), ticks.last()) else {
        return Err(err(&"no point with a positive budget to draw"));
    };
    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(20)
        .caption(caption, ("sans-serif", 22))
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((lo - 0.25)..(hi + 0.25), 0.0..1.05)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(((hi - lo).ceil() as usize + 2).max(2))
        .x_label_formatter(&|x| format!("{:.0}", x.exp2()))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let pts: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| p.0 > 0.0)
            .map(|&(x, y)| (x.log2(), y))
            .collect();
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
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
