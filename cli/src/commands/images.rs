//! `arbor image import | ls | show | rm`: container images as layer chains
//! (see `arbor_runtime::image`).

use anyhow::Result;
use arbor_runtime::image::{BuildEvent, Image, ImageImport, ImageRecipe};
use arbor_runtime::layer::UntarLimits;
use arbor_runtime::store::{ImageRecord, ObjectId};
use serde::Serialize;

use super::Ctx;
use crate::args::ImageCommand;
use crate::output::{self, emit};
use crate::render::{format_bytes, plural, table};

#[derive(Serialize)]
struct ImportJson<'a> {
    image: ObjectId,
    name: &'a str,
    layers: usize,
    layers_new: usize,
    layers_shared: usize,
    bytes: u64,
    whiteouts: u64,
    specials_skipped: u64,
    setid_dropped: u64,
    format: &'a str,
}

#[derive(Serialize)]
struct ShowJson<'a> {
    image: ObjectId,
    names: Vec<String>,
    #[serde(flatten)]
    record: &'a ImageRecord,
    /// The ids actions run as (`null`: root), or why the `User` cannot be resolved.
    run_as: RunAs,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum RunAs {
    Ids { uid: u32, gid: u32 },
    Root,
    Unresolvable(String),
}

pub(super) fn run(ctx: &Ctx, command: ImageCommand) -> Result<i32> {
    match command {
        ImageCommand::Import {
            file,
            tag,
            max_layer_bytes,
        } => {
            let bar =
                output::progress_bar(ctx.json, 1, "importing the image (verifying every digest)");
            let imported = ctx.runtime.import_image(
                &file,
                &ImageImport {
                    name: tag,
                    limits: UntarLimits {
                        max_bytes: max_layer_bytes,
                        ..UntarLimits::default()
                    },
                },
            );
            bar.finish_and_clear();
            let i = imported?;
            let sum = |f: fn(&arbor_runtime::layer::UntarReport) -> u64| {
                i.reports.iter().map(f).sum::<u64>()
            };
            let j = ImportJson {
                image: i.id,
                name: &i.name,
                layers: i.record.layers.len(),
                layers_new: i.layers_new,
                layers_shared: i.layers_shared,
                bytes: i.record.bytes,
                whiteouts: sum(|r| r.whiteouts),
                specials_skipped: sum(|r| r.specials_skipped),
                setid_dropped: sum(|r| r.setid_dropped),
                format: &i.record.source.format,
            };
            emit(ctx.json, &j, || {
                format!(
                    "{} {} ({}, {} layer{}: {} new, {} already stored; {})\n",
                    j.name,
                    j.image.short(),
                    j.format,
                    j.layers,
                    plural(j.layers),
                    j.layers_new,
                    j.layers_shared,
                    format_bytes(j.bytes)
                )
            })?;
            Ok(0)
        }
        ImageCommand::Build {
            debian,
            packages,
            pip,
            run,
            allow_host,
            recipe,
            tag,
        } => {
            let recipe = match recipe {
                Some(path) => arbor_envs::read_image_recipe(&path)?,
                None => ImageRecipe {
                    debian: debian.unwrap_or_default(),
                    packages,
                    pip,
                    run,
                    allow_hosts: allow_host,
                },
            };
            build(ctx, &recipe, &tag)
        }
        ImageCommand::Ls => {
            let images = ctx.runtime.images()?;
            #[derive(Serialize)]
            struct Row<'a> {
                name: &'a str,
                image: ObjectId,
                layers: usize,
                bytes: u64,
                format: &'a str,
            }
            let rows: Vec<Row> = images
                .iter()
                .map(|(n, i)| Row {
                    name: n,
                    image: i.id,
                    layers: i.record.layers.len(),
                    bytes: i.record.bytes,
                    format: &i.record.source.format,
                })
                .collect();
            emit(ctx.json, &rows, || {
                table(
                    &["NAME", "IMAGE", "LAYERS", "SIZE", "FROM"],
                    &rows
                        .iter()
                        .map(|r| {
                            vec![
                                r.name.to_owned(),
                                r.image.short(),
                                r.layers.to_string(),
                                format_bytes(r.bytes),
                                r.format.to_owned(),
                            ]
                        })
                        .collect::<Vec<_>>(),
                )
            })?;
            Ok(0)
        }
        ImageCommand::Show { image } => {
            let img: Image = ctx.runtime.image(&image)?;
            let names: Vec<String> = ctx
                .store()
                .image_names()?
                .into_iter()
                .filter(|(_, id)| *id == img.id)
                .map(|(n, _)| n)
                .collect();
            let j = ShowJson {
                image: img.id,
                names,
                record: &img.record,
                run_as: match &img.user {
                    Ok(Some(u)) => RunAs::Ids {
                        uid: u.uid,
                        gid: u.gid,
                    },
                    Ok(None) => RunAs::Root,
                    Err(why) => RunAs::Unresolvable(why.clone()),
                },
            };
            emit(ctx.json, &j, || {
                let c = &img.record.config;
                let mut out = format!(
                    "image {}\nnames {}\nfrom {}{}\nsize {}\n",
                    img.id,
                    j.names.join(", "),
                    img.record.source.format,
                    img.record
                        .source
                        .manifest_digest
                        .as_deref()
                        .map(|d| format!(" (manifest {d})"))
                        .unwrap_or_default(),
                    format_bytes(img.record.bytes)
                );
                out.push_str("layers (bottom first):\n");
                for (i, l) in img.record.layers.iter().enumerate() {
                    match img.record.source.diff_ids.get(i) {
                        Some(d) => out.push_str(&format!("  {}  {d}\n", l.short())),
                        None => out.push_str(&format!("  {}\n", l.short())),
                    }
                }
                if let Some(r) = &img.record.source.recipe {
                    out.push_str(&format!("recipe {r}\n"));
                }
                for e in &c.env {
                    out.push_str(&format!("env {e}\n"));
                }
                if let Some(w) = &c.working_dir {
                    out.push_str(&format!(
                        "workdir {w} (the workspace appears there with `import --image I --workdir`)\n"
                    ));
                }
                if let Some(u) = &c.user {
                    match &img.user {
                        Ok(Some(ids)) => out.push_str(&format!(
                            "user {u} (actions run as uid {}, gid {})\n",
                            ids.uid, ids.gid
                        )),
                        Ok(None) => out.push_str(&format!("user {u} (root)\n")),
                        Err(why) => out.push_str(&format!(
                            "user {u} (cannot be resolved, no sandbox opens on the image: {why})\n"
                        )),
                    }
                }
                if let Some(e) = &c.entrypoint {
                    out.push_str(&format!("entrypoint {e:?}\n"));
                }
                if let Some(cmd) = &c.cmd {
                    out.push_str(&format!("cmd {cmd:?}\n"));
                }
                for (k, v) in &c.labels {
                    out.push_str(&format!("label {k}={v}\n"));
                }
                out
            })?;
            Ok(0)
        }
        ImageCommand::Rm { image } => {
            let (id, users) = ctx.runtime.remove_image(&image)?;
            #[derive(Serialize)]
            struct RmJson<'a> {
                name: &'a str,
                image: ObjectId,
                snapshots_using_it: usize,
            }
            let j = RmJson {
                name: &image,
                image: id,
                snapshots_using_it: users,
            };
            emit(ctx.json, &j, || {
                format!(
                    "removed the name {image} ({}); {users} listed snapshot{} still use{} it (its layers stay while they do; `arbor gc` frees the rest)\n",
                    id.short(),
                    plural(users),
                    if users == 1 { "s" } else { "" }
                )
            })?;
            Ok(0)
        }
    }
}

#[derive(Serialize)]
struct BuildStepJson {
    step: String,
    cached: bool,
    image: ObjectId,
    layer_bytes: u64,
    seconds: f64,
}

#[derive(Serialize)]
struct BuildJson<'a> {
    image: ObjectId,
    name: &'a str,
    layers: usize,
    bytes: u64,
    cached: bool,
    steps: Vec<BuildStepJson>,
}

/// `arbor image build`: every step reported on stderr as it starts and ends.
fn build(ctx: &Ctx, recipe: &ImageRecipe, tag: &str) -> Result<i32> {
    let steps = 1 + u64::from(!recipe.pip.is_empty()) + recipe.run.len() as u64;
    let bar = output::progress_bar(ctx.json, steps, "building the image");
    let mut on_event = |e: &BuildEvent| match e {
        BuildEvent::Started(step) => bar.set_message(step.to_string()),
        BuildEvent::Finished(r) => {
            bar.println(format!(
                "  {} {:.1}s {}{}",
                if r.cached { "cached" } else { "built " },
                r.seconds,
                r.step,
                if r.layer_bytes > 0 {
                    format!(" (+{})", format_bytes(r.layer_bytes))
                } else {
                    String::new()
                }
            ));
            bar.inc(1);
        }
    };
    let built = ctx.runtime.build_image(recipe, Some(tag), &mut on_event);
    bar.finish_and_clear();
    let built = built?;
    let j = BuildJson {
        image: built.image.id,
        name: tag,
        layers: built.image.record.layers.len(),
        bytes: built.image.record.bytes,
        cached: built.cached(),
        steps: built
            .steps
            .iter()
            .map(|s| BuildStepJson {
                step: s.step.to_string(),
                cached: s.cached,
                image: s.image,
                layer_bytes: s.layer_bytes,
                seconds: s.seconds,
            })
            .collect(),
    };
    emit(ctx.json, &j, || {
        let mut out = String::new();
        for s in &j.steps {
            out.push_str(&format!(
                "{} {:>7.1}s  {}\n",
                if s.cached { "cached" } else { "built " },
                s.seconds,
                s.step
            ));
        }
        out.push_str(&format!(
            "{} {} ({} layer{}, {}{})\n",
            j.name,
            j.image.short(),
            j.layers,
            plural(j.layers),
            format_bytes(j.bytes),
            if j.cached {
                "; every step from the cache"
            } else {
                ""
            }
        ));
        out
    })?;
    Ok(0)
}
