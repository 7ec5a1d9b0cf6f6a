//! The commands on the store itself: `ls`, `tag`, `rm`, `gc`, `fsck`.
//! They read records, not states, so they list, tag, collect and check
//! snapshots of both backends in any build.

use std::collections::BTreeMap;

use anyhow::Result;
use arbor_runtime::store::{Action, FsckProblem, SnapshotId, Store};
use serde::Serialize;

use super::{Ctx, tags_by_snapshot};
use crate::error::{EXIT_FAILURE, UsageError};
use crate::output::emit;
use crate::render::{format_bytes, format_time, one_line, plural, table};

/// One row of `arbor ls`.
#[derive(Serialize)]
struct LsEntry {
    id: SnapshotId,
    created_at: u64,
    parent: Option<SnapshotId>,
    tags: Vec<String>,
    summary: String,
    layers: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The `ls` row of a WebAssembly session snapshot, read from its record's
/// JSON (so that any build lists sessions).
fn session_ls_entry(store: &Store, id: SnapshotId, tags: Vec<String>) -> LsEntry {
    let unreadable = |e: String| LsEntry {
        id,
        created_at: 0,
        parent: None,
        tags: tags.clone(),
        summary: String::new(),
        layers: 0,
        error: Some(e),
    };
    let record: serde_json::Value = match store
        .get_wasm_manifest(&id)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => return unreadable(e),
    };
    let steps: Vec<String> = record["actions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| match x["type"].as_str() {
                    Some("step") => format!(">>> {}", one_line(x["code"].as_str().unwrap_or(""))),
                    Some(other) => format!("{other} {}", x["path"].as_str().unwrap_or("")),
                    None => "?".to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    let summary = if record["boot"].is_object() {
        format!(
            "[wasm] import --wasm {}",
            record["boot"]["args"][0].as_str().unwrap_or("?")
        )
    } else {
        match steps.as_slice() {
            [] => "[wasm] (no action)".to_owned(),
            [one] => format!("[wasm] {one}"),
            [first, ..] => format!("[wasm] {} steps: {first}, ...", steps.len()),
        }
    };
    LsEntry {
        id,
        created_at: record["created_at"].as_u64().unwrap_or(0),
        parent: record["parent"].as_str().and_then(|p| p.parse().ok()),
        tags,
        summary,
        layers: record["layers"].as_array().map_or(0, Vec::len),
        error: None,
    }
}

#[derive(Serialize)]
struct LsJson {
    snapshots: Vec<LsEntry>,
}

pub(super) fn ls(ctx: &Ctx) -> Result<i32> {
    let mut tags = tags_by_snapshot(ctx.store())?;
    let mut snapshots: Vec<LsEntry> = ctx
        .store()
        .snapshots()?
        .into_iter()
        .map(|id| {
            let tags = tags.remove(&id).unwrap_or_default();
            if ctx.store().is_wasm_snapshot(&id) {
                return session_ls_entry(ctx.store(), id, tags);
            }
            match ctx.store().get_manifest(&id) {
                Ok(m) => LsEntry {
                    id,
                    created_at: m.created_at,
                    parent: m.parent,
                    tags,
                    summary: m
                        .action
                        .as_ref()
                        .map_or_else(|| "(no action)".to_owned(), Action::summary),
                    layers: m.layers.len(),
                    error: None,
                },
                Err(e) => LsEntry {
                    id,
                    created_at: 0,
                    parent: None,
                    tags,
                    summary: String::new(),
                    layers: 0,
                    error: Some(e.to_string()),
                },
            }
        })
        .collect();
    // Seconds tie often; within one second, ancestors come first.
    let parents: BTreeMap<SnapshotId, Option<SnapshotId>> =
        snapshots.iter().map(|e| (e.id, e.parent)).collect();
    let depth = |id: &SnapshotId| {
        let mut depth = 0usize;
        let mut cur = parents.get(id).copied().flatten();
        while let Some(p) = cur {
            depth += 1;
            if depth > parents.len() {
                break;
            }
            cur = parents.get(&p).copied().flatten();
        }
        depth
    };
    snapshots.sort_by_cached_key(|e| (e.created_at, depth(&e.id), e.id));
    let result = LsJson { snapshots };
    emit(ctx.json, &result, || {
        if result.snapshots.is_empty() {
            return "no snapshots (create one with `arbor import DIR`)\n".to_owned();
        }
        let rows: Vec<Vec<String>> = result
            .snapshots
            .iter()
            .map(|e| {
                let created = if e.error.is_some() {
                    "?".to_owned()
                } else {
                    format_time(e.created_at)
                };
                let action = e
                    .error
                    .as_ref()
                    .map_or_else(|| e.summary.clone(), |err| format!("unreadable: {err}"));
                vec![
                    e.id.short(),
                    created,
                    e.parent.map_or_else(|| "-".to_owned(), |p| p.short()),
                    if e.tags.is_empty() {
                        "-".to_owned()
                    } else {
                        e.tags.join(",")
                    },
                    crate::render::clip(&action, 80),
                ]
            })
            .collect();
        table(
            &["SNAPSHOT", "CREATED (UTC)", "PARENT", "TAGS", "ACTION"],
            &rows,
        )
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct TagJson<'a> {
    tag: &'a str,
    snapshot: SnapshotId,
    deleted: bool,
}

#[derive(Serialize)]
struct TagsJson {
    tags: BTreeMap<String, SnapshotId>,
}

pub(super) fn tag(
    ctx: &Ctx,
    snapshot: Option<&str>,
    name: Option<&str>,
    delete: Option<&str>,
) -> Result<i32> {
    let store = ctx.store();
    if let Some(name) = delete {
        let Some(id) = store.get_tag(name)? else {
            return Err(arbor_runtime::store::StoreError::UnknownTag(name.to_owned()).into());
        };
        store.delete_tag(name)?;
        emit(
            ctx.json,
            &TagJson {
                tag: name,
                snapshot: id,
                deleted: true,
            },
            || format!("deleted tag {name} (was {})\n", id.short()),
        )?;
        return Ok(0);
    }
    match (snapshot, name) {
        (Some(snapshot), Some(name)) => {
            let id = ctx.store().resolve(snapshot)?;
            store.set_tag(name, &id)?;
            emit(
                ctx.json,
                &TagJson {
                    tag: name,
                    snapshot: id,
                    deleted: false,
                },
                || format!("tagged {} as {name}\n", id.short()),
            )?;
        }
        (Some(_), None) => {
            return Err(UsageError(
                "missing the tag NAME: use `arbor tag SNAP NAME` or `arbor tag --delete NAME`"
                    .into(),
            )
            .into());
        }
        _ => {
            let tags = store.tags()?;
            emit(ctx.json, &TagsJson { tags: tags.clone() }, || {
                if tags.is_empty() {
                    return "no tags\n".to_owned();
                }
                let rows: Vec<Vec<String>> = tags
                    .iter()
                    .map(|(n, id)| vec![n.clone(), id.short()])
                    .collect();
                table(&["TAG", "SNAPSHOT"], &rows)
            })?;
        }
    }
    Ok(0)
}

#[derive(Serialize)]
struct RmJson {
    snapshot: SnapshotId,
    tags_deleted: Vec<String>,
}

pub(super) fn rm(ctx: &Ctx, snapshot: &str) -> Result<i32> {
    let id = ctx.store().resolve(snapshot)?;
    let tags_deleted = ctx.store().remove_snapshot(&id)?;
    let result = RmJson {
        snapshot: id,
        tags_deleted,
    };
    emit(ctx.json, &result, || {
        let tags = if result.tags_deleted.is_empty() {
            String::new()
        } else {
            format!(
                " and deleted its tag{} {}",
                plural(result.tags_deleted.len()),
                result.tags_deleted.join(", ")
            )
        };
        format!(
            "removed snapshot {} from the list{tags}; its data is freed by `arbor gc` \
             (unless a tagged snapshot builds on it)\n",
            id.short()
        )
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct GcJson {
    snapshots_unlisted: usize,
    objects_removed: usize,
    layers_removed: usize,
    squash_removed: usize,
    tmp_removed: usize,
    run_dirs_removed: usize,
    bytes_freed: u64,
    skipped: Vec<String>,
}

pub(super) fn gc(ctx: &Ctx) -> Result<i32> {
    let r = ctx.store().gc()?;
    let result = GcJson {
        snapshots_unlisted: r.snapshots_unlisted,
        objects_removed: r.objects_removed,
        layers_removed: r.layers_removed,
        squash_removed: r.squash_removed,
        tmp_removed: r.tmp_removed,
        run_dirs_removed: r.run_dirs_removed,
        bytes_freed: r.bytes_freed,
        skipped: r.skipped,
    };
    emit(ctx.json, &result, || {
        let rows = [
            (
                "snapshots unlisted (no tag reaches them)",
                result.snapshots_unlisted.to_string(),
            ),
            ("objects removed", result.objects_removed.to_string()),
            ("layers removed", result.layers_removed.to_string()),
            ("squash caches removed", result.squash_removed.to_string()),
            ("stale temp entries removed", result.tmp_removed.to_string()),
            (
                "dead sandbox dirs removed",
                result.run_dirs_removed.to_string(),
            ),
            (
                "freed",
                format!(
                    "{} ({} bytes)",
                    format_bytes(result.bytes_freed),
                    result.bytes_freed
                ),
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut text: String = rows
            .iter()
            .map(|(k, v)| format!("{k:<width$}  {v}\n"))
            .collect();
        for s in &result.skipped {
            text.push_str(&format!("left in place: {s}\n"));
        }
        text
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct ProblemJson {
    path: String,
    what: String,
}

impl From<&FsckProblem> for ProblemJson {
    fn from(p: &FsckProblem) -> Self {
        Self {
            path: p.object_or_path.clone(),
            what: p.what.clone(),
        }
    }
}

#[derive(Serialize)]
struct FsckJson {
    clean: bool,
    objects_checked: usize,
    layers_checked: usize,
    files_checked: usize,
    problems: Vec<ProblemJson>,
    garbage: Vec<String>,
}

pub(super) fn fsck(ctx: &Ctx) -> Result<i32> {
    let r = ctx.store().fsck()?;
    let result = FsckJson {
        clean: r.is_clean(),
        objects_checked: r.objects_checked,
        layers_checked: r.layers_checked,
        files_checked: r.files_checked,
        problems: r.problems.iter().map(ProblemJson::from).collect(),
        garbage: r.garbage.clone(),
    };
    emit(ctx.json, &result, || {
        let mut text = format!(
            "checked {} object{}, {} layer{}, {} layer entr{}\n",
            r.objects_checked,
            plural(r.objects_checked),
            r.layers_checked,
            plural(r.layers_checked),
            r.files_checked,
            if r.files_checked == 1 { "y" } else { "ies" },
        );
        for g in &r.garbage {
            text.push_str(&format!("info: garbage (gc removes it): {g}\n"));
        }
        for p in &r.problems {
            text.push_str(&format!("problem: {p}\n"));
        }
        if r.is_clean() {
            text.push_str("fsck: clean\n");
        } else {
            let n = r.problems.len();
            text.push_str(&format!("fsck: {n} problem{} found\n", plural(n)));
        }
        text
    })?;
    Ok(if r.is_clean() { 0 } else { EXIT_FAILURE })
}
