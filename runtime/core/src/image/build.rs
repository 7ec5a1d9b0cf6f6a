//! `arbor image build`: images built from Debian's packages, then from
//! steps run in sandboxes on them.
//!
//! A [`ImageRecipe`] names a Debian suite and packages, pip requirements and
//! shell commands. The build is a chain of cached steps, each one layer:
//!
//! 1. **base**: `mmdebstrap` (in its `unshare` mode: the packages' maintainer
//!    scripts run in a user namespace, never as the host's root) writes the
//!    suite's `minbase` root filesystem with the packages as a tar stream,
//!    which becomes one layer through the same translation and refusals as an
//!    imported image layer ([`crate::layer::untar_layer`]).
//! 2. **pip**: `python3 -m pip install` of the pinned requirements, one
//!    layer, in a sandbox allowed to reach exactly pip's default index and
//!    file host (asked of the image's own pip, never written down here).
//! 3. **run**: each command, one layer, in a sandbox allowed the recipe's
//!    `allow_hosts` (none by default: loopback only).
//!
//! A step runs as an ordinary action of a sandbox whose *workspace* is the
//! image so far and whose action root is that workspace
//! ([`crate::sandbox::ActionRoot::Workspace`]): the namespaces, limits,
//! capabilities and egress rules of every sandbox apply, and sealing the
//! workspace (the one seal protocol) makes the step's layer. The snapshots
//! this takes are unlisted again at once; the image keeps their layers.
//!
//! Every step is cached under the hash of the recipe up to and including it
//! (`refs/image-builds/<key>`), so a second build of the same recipe is a
//! lookup, and a recipe that only adds a step reuses every step before it.
//! Cache entries are not gc roots: an entry whose image was collected is
//! rebuilt.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Image, ImageError};
use crate::layer::{self, UntarLimits};
use crate::runtime::{Result, Runtime};
use crate::sandbox::{ActionRoot, ExecOptions, ReadOnlyMount};
use crate::store::{
    Action, ImageConfig, ImageRecord, ImageSource, LayerId, Manifest, ObjectId, SessionState,
    validate_image_name,
};

/// What to build: a Debian suite with packages, then pip requirements, then
/// commands. The `[image]` table of a task's `task.toml` has these fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRecipe {
    /// The Debian suite (`bookworm`, `trixie`, `stable`, ...).
    pub debian: String,
    /// Debian packages installed into the base (`--include`).
    #[serde(default)]
    pub packages: Vec<String>,
    /// pip requirements (`name==version`, ...), installed in one step.
    #[serde(default)]
    pub pip: Vec<String>,
    /// Shell commands, each its own step and layer.
    #[serde(default)]
    pub run: Vec<String>,
    /// Host names the `run` steps may reach through the egress proxy.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

/// How long one pip or run step may take.
pub const STEP_TIMEOUT_MS: u64 = 30 * 60 * 1000;

fn bad(field: &'static str, why: String) -> ImageError {
    ImageError::BadRecipe { field, why }
}

fn is_debian_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+.-".contains(&b))
}

/// A pip requirement as a recipe may give it: a project name, optional
/// extras, an optional version constraint; never an option or a path or URL.
fn is_pip_requirement(s: &str) -> bool {
    let name_end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(s.len());
    let (name, mut rest) = s.split_at(name_end);
    if name.is_empty() || !name.as_bytes()[0].is_ascii_alphanumeric() || s.len() > 200 {
        return false;
    }
    if let Some(extras) = rest.strip_prefix('[') {
        let Some((inner, after)) = extras.split_once(']') else {
            return false;
        };
        if inner.is_empty()
            || !inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ",._-".contains(c))
        {
            return false;
        }
        rest = after;
    }
    if rest.is_empty() {
        return true;
    }
    let Some(version) = ["===", "==", ">=", "<=", "~=", "!=", ">", "<"]
        .iter()
        .find_map(|op| rest.strip_prefix(op))
    else {
        return false;
    };
    !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".*+!_-".contains(c))
}

impl ImageRecipe {
    /// Check every field; the error names the field and the value.
    pub fn validate(&self) -> std::result::Result<(), ImageError> {
        if !is_debian_word(&self.debian) {
            return Err(bad(
                "debian",
                format!("{:?} is not a Debian suite name", self.debian),
            ));
        }
        for p in &self.packages {
            let name = p.split_once('=').map_or(p.as_str(), |(n, _)| n);
            if !is_debian_word(name) || p.split_once('=').is_some_and(|(_, v)| v.is_empty()) {
                return Err(bad(
                    "packages",
                    format!("{p:?} is not a Debian package name (NAME or NAME=VERSION)"),
                ));
            }
        }
        for r in &self.pip {
            if !is_pip_requirement(r) {
                return Err(bad(
                    "pip",
                    format!(
                        "{r:?} is not a requirement (NAME[extras]==VERSION; no options, paths or URLs)"
                    ),
                ));
            }
        }
        for c in &self.run {
            if c.trim().is_empty() {
                return Err(bad("run", "an empty command".to_owned()));
            }
            if c.contains('\0') {
                return Err(bad("run", format!("{c:?} contains a NUL byte")));
            }
        }
        for h in &self.allow_hosts {
            crate::sandbox::egress::check_host_name(h)
                .map_err(|why| bad("allow_hosts", format!("{h:?}: {why}")))?;
        }
        if !self.allow_hosts.is_empty() && self.run.is_empty() {
            return Err(bad(
                "allow_hosts",
                "only `run` steps use allow_hosts, and the recipe has none".to_owned(),
            ));
        }
        Ok(())
    }

    /// The recipe as canonical JSON (packages sorted and deduplicated; the
    /// order of `pip` and `run` is kept: it is the build's order).
    pub fn canonical(&self) -> String {
        let mut r = self.clone();
        r.packages.sort();
        r.packages.dedup();
        r.allow_hosts.sort();
        r.allow_hosts.dedup();
        serde_json::to_string(&r).unwrap_or_default()
    }
}

/// One step of a build, as reported to a progress callback and in the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildStep {
    /// The Debian base.
    Base {
        /// The suite.
        suite: String,
    },
    /// The pip step.
    Pip,
    /// The `n`th run step (0-based) and its command.
    Run {
        /// Its index among the run steps.
        n: usize,
        /// The command.
        command: String,
    },
}

impl std::fmt::Display for BuildStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Base { suite } => write!(f, "debian {suite}"),
            Self::Pip => write!(f, "pip install"),
            Self::Run { n, command } => write!(f, "run {}: {command}", n + 1),
        }
    }
}

/// What one step did.
#[derive(Clone, Debug)]
pub struct StepReport {
    /// The step.
    pub step: BuildStep,
    /// Whether the cache had it (nothing ran).
    pub cached: bool,
    /// The image after the step.
    pub image: ObjectId,
    /// Bytes of the step's own layer (0 when it changed nothing).
    pub layer_bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// A progress event of [`Runtime::build_image`].
#[derive(Clone, Debug)]
pub enum BuildEvent {
    /// A step is about to run (or be looked up).
    Started(BuildStep),
    /// A step is done.
    Finished(StepReport),
}

/// What [`Runtime::build_image`] made.
#[derive(Clone, Debug)]
pub struct BuiltImage {
    /// The image.
    pub image: Image,
    /// The name given to it, if one was asked for.
    pub name: Option<String>,
    /// Every step, in order.
    pub steps: Vec<StepReport>,
}

impl BuiltImage {
    /// Whether every step came from the cache.
    pub fn cached(&self) -> bool {
        self.steps.iter().all(|s| s.cached)
    }
}

fn cache_key(parts: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"arbor image build v1\n");
    h.update(std::env::consts::ARCH.as_bytes());
    for p in parts {
        h.update(b"\n");
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// The builder program (`mmdebstrap`, else `$ARBOR_MMDEBSTRAP`).
fn mmdebstrap() -> PathBuf {
    std::env::var_os("ARBOR_MMDEBSTRAP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("mmdebstrap"))
}

/// Serialises builds within one process (two tasks on one recipe build it once).
static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Runtime {
    /// Build (or look up) the image of `recipe`, naming it `name` if given.
    /// See the module documentation. `on_event` sees each step start and end.
    pub fn build_image(
        &self,
        recipe: &ImageRecipe,
        name: Option<&str>,
        on_event: &mut dyn FnMut(&BuildEvent),
    ) -> Result<BuiltImage> {
        recipe.validate()?;
        if let Some(n) = name {
            validate_image_name(n)?;
        }
        let _one_at_a_time = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
        let mut packages = recipe.packages.clone();
        packages.sort();
        packages.dedup();
        let mut steps = Vec::new();

        // 1. The base.
        let base_recipe = ImageRecipe {
            debian: recipe.debian.clone(),
            packages: packages.clone(),
            ..ImageRecipe::default()
        };
        let mut key = cache_key(&["base", &base_recipe.canonical()]);
        let step = BuildStep::Base {
            suite: recipe.debian.clone(),
        };
        let mut image = self.cached_step(&key, step, &mut steps, on_event, |rt| {
            rt.build_base(&base_recipe)
        })?;

        // 2. pip, 3. run.
        let mut partial = base_recipe;
        if !recipe.pip.is_empty() {
            partial.pip = recipe.pip.clone();
            key = cache_key(&[
                &key,
                "pip",
                &serde_json::to_string(&recipe.pip).unwrap_or_default(),
            ]);
            let recipe_text = partial.canonical();
            image = self.cached_step(&key, BuildStep::Pip, &mut steps, on_event, |rt| {
                let hosts = rt.pip_index_hosts(&image)?;
                let mut command = String::from(
                    "python3 -m pip install --no-input --no-cache-dir --disable-pip-version-check --root-user-action=ignore --break-system-packages",
                );
                for r in &recipe.pip {
                    command.push_str(" '");
                    command.push_str(r);
                    command.push('\'');
                }
                rt.build_step(&image, &command, &hosts, &recipe_text)
            })?;
        }
        let mut hosts = recipe.allow_hosts.clone();
        hosts.sort();
        hosts.dedup();
        for (n, command) in recipe.run.iter().enumerate() {
            partial.run.push(command.clone());
            partial.allow_hosts = hosts.clone();
            key = cache_key(&[&key, "run", command, &hosts.join(",")]);
            let recipe_text = partial.canonical();
            let step = BuildStep::Run {
                n,
                command: command.clone(),
            };
            image = self.cached_step(&key, step, &mut steps, on_event, |rt| {
                rt.build_step(&image, command, &hosts, &recipe_text)
            })?;
        }
        if let Some(n) = name {
            self.store().set_image_name(n, &image.id)?;
        }
        Ok(BuiltImage {
            image,
            name: name.map(str::to_owned),
            steps,
        })
    }

    /// Look `key` up in the build cache, else run `build` and record it.
    fn cached_step(
        &self,
        key: &str,
        step: BuildStep,
        steps: &mut Vec<StepReport>,
        on_event: &mut dyn FnMut(&BuildEvent),
        build: impl FnOnce(&Runtime) -> Result<(Image, u64)>,
    ) -> Result<Image> {
        on_event(&BuildEvent::Started(step.clone()));
        let started = Instant::now();
        let store = self.store();
        let hit = match store.build_cache_get(key)? {
            Some(id) => match self.image_by_id(&id) {
                Ok(img)
                    if img
                        .record
                        .layers
                        .iter()
                        .all(|l| store.layer_dir(l).is_dir()) =>
                {
                    Some(img)
                }
                _ => {
                    // Collected since: build it again.
                    store.build_cache_remove(key)?;
                    None
                }
            },
            None => None,
        };
        let (image, cached, layer_bytes) = match hit {
            Some(img) => (img, true, 0),
            None => {
                let (img, bytes) = build(self)?;
                store.build_cache_set(key, &img.id)?;
                (img, false, bytes)
            }
        };
        let report = StepReport {
            step,
            cached,
            image: image.id,
            layer_bytes,
            seconds: started.elapsed().as_secs_f64(),
        };
        on_event(&BuildEvent::Finished(report.clone()));
        steps.push(report);
        Ok(image)
    }

    /// The Debian base: `mmdebstrap` to a tar file in the store's `tmp/`,
    /// unpacked as one layer.
    fn build_base(&self, recipe: &ImageRecipe) -> Result<(Image, u64)> {
        let store = self.store();
        let _lock = store.lock_shared()?;
        let tar = store.new_temp_path("debian.tar");
        let staged = store.new_temp_path("debian-layer");
        let result = (|| {
            let mut cmd = Command::new(mmdebstrap());
            cmd.args([
                "--mode=unshare",
                "--variant=minbase",
                "--format=tar",
                "--skip=output/dev",
                "--quiet",
            ]);
            if !recipe.packages.is_empty() {
                cmd.arg(format!("--include={}", recipe.packages.join(",")));
            }
            cmd.arg(&recipe.debian).arg(&tar);
            // Reproducible timestamps where mmdebstrap honours them.
            cmd.env("SOURCE_DATE_EPOCH", "0");
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let out = cmd.output().map_err(|e| ImageError::Builder {
                program: mmdebstrap(),
                why: format!("cannot run it: {e} (install Debian's mmdebstrap package)"),
            })?;
            if !out.status.success() {
                return Err(ImageError::Builder {
                    program: mmdebstrap(),
                    why: format!(
                        "{} building {} with [{}]: {}",
                        out.status,
                        recipe.debian,
                        recipe.packages.join(", "),
                        tail(&out.stderr)
                    ),
                }
                .into());
            }
            std::fs::create_dir(&staged).map_err(|source| ImageError::Io {
                path: staged.clone(),
                source,
            })?;
            let file = std::fs::File::open(&tar).map_err(|source| ImageError::Io {
                path: tar.clone(),
                source,
            })?;
            let owners = self.owner_map();
            let what = format!("debian {} base", recipe.debian);
            let report = layer::untar_layer(
                std::io::BufReader::with_capacity(1 << 16, file),
                &staged,
                &|_| false,
                &owners,
                &UntarLimits::default(),
                &what,
            )?;
            let tree = layer::tree_of_dir(&staged, &owners)?;
            crate::store::validate_tree(&tree)?;
            let (layer, _new) = super::store_layer(store, &staged, &tree)?;
            let record = ImageRecord {
                layers: vec![layer],
                config: ImageConfig::default(),
                source: ImageSource {
                    format: "debian".to_owned(),
                    manifest_digest: None,
                    config_digest: String::new(),
                    diff_ids: Vec::new(),
                    name: None,
                    recipe: Some(recipe.canonical()),
                },
                bytes: report.bytes,
            };
            let id = store.put_image(&record)?;
            Ok((self.image_by_id(&id)?, report.bytes))
        })();
        for t in [&tar, &staged] {
            if t.is_dir() {
                crate::cleanup::remove_dir_forcefully(t);
            } else {
                let _ = std::fs::remove_file(t);
            }
        }
        result
    }

    /// pip's default index host and file host, as the image's own pip says.
    fn pip_index_hosts(&self, image: &Image) -> Result<Vec<String>> {
        let probe = "python3 -c 'from pip._internal.models.index import PyPI; print(PyPI.netloc); print(PyPI.file_storage_domain)'";
        let (obs, _) = self.run_on_image(image, probe, &[], false)?;
        let out = String::from_utf8_lossy(&obs.stdout).into_owned();
        let hosts: Vec<String> = out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        if obs.code() != Some(0) || hosts.len() != 2 {
            return Err(ImageError::StepFailed {
                step: "pip install".to_owned(),
                why: format!(
                    "the image has no usable pip (add python3-pip to the packages): {}{}",
                    out.trim(),
                    tail(&obs.stderr)
                ),
            }
            .into());
        }
        Ok(hosts)
    }

    /// Run one build step on `image`; returns the image with the step's layer.
    fn build_step(
        &self,
        image: &Image,
        command: &str,
        hosts: &[String],
        recipe_text: &str,
    ) -> Result<(Image, u64)> {
        let (obs, layers) = self.run_on_image(image, command, hosts, true)?;
        if obs.code() != Some(0) {
            return Err(ImageError::StepFailed {
                step: command.to_owned(),
                why: format!(
                    "{:?}; stdout: {} stderr: {}",
                    obs.exit,
                    tail(&obs.stdout),
                    tail(&obs.stderr)
                ),
            }
            .into());
        }
        let layers = layers.unwrap_or_else(|| image.record.layers.clone());
        let new_bytes = match layers.last() {
            Some(top) if layers.len() > image.record.layers.len() => {
                layer::dir_size(&self.store().layer_dir(top))?
            }
            _ => 0,
        };
        let mut source = image.record.source.clone();
        source.recipe = Some(recipe_text.to_owned());
        let record = ImageRecord {
            layers,
            config: image.record.config.clone(),
            source,
            bytes: image.record.bytes + new_bytes,
        };
        let id = self.store().put_image(&record)?;
        Ok((self.image_by_id(&id)?, new_bytes))
    }

    /// Run `command` in a sandbox whose workspace is `image`'s root
    /// filesystem: as its root (`as_root`, sealed afterwards: returns the new
    /// layer chain) or as an ordinary action on the image's system view.
    fn run_on_image(
        &self,
        image: &Image,
        command: &str,
        hosts: &[String],
        as_root: bool,
    ) -> Result<(crate::Observation, Option<Vec<LayerId>>)> {
        let store = self.store();
        let manifest = Manifest {
            layers: image.record.layers.clone(),
            session: SessionState {
                cwd: "/".to_owned(),
                ..SessionState::default()
            },
            parent: None,
            action: Some(Action::Import {
                source: format!("image build step on image {}", image.id),
            }),
            observations: Vec::new(),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            killed_background: Vec::new(),
            image: Some(image.id),
            workdir: None,
        };
        let id = store.put_manifest(&manifest)?;
        store.list_snapshot(&id)?;
        let snap = crate::Snapshot::new(self.clone(), id, manifest);
        let result = (|| {
            let mut sb = snap.open()?;
            if !hosts.is_empty() {
                sb.allow_egress(hosts)?;
            }
            let mut opts = ExecOptions {
                timeout_ms: STEP_TIMEOUT_MS,
                root: if as_root {
                    ActionRoot::Workspace
                } else {
                    ActionRoot::System
                },
                ..ExecOptions::default()
            };
            if as_root
                && !hosts.is_empty()
                && let Some(ca) = self.host_ca_layer()?
            {
                opts.mounts = vec![ReadOnlyMount::of_layer(ca, HOST_CA_TARGET)];
                let file = format!("/run/arbor/{HOST_CA_TARGET}/{HOST_CA_FILE}");
                for var in [
                    "SSL_CERT_FILE",
                    "PIP_CERT",
                    "REQUESTS_CA_BUNDLE",
                    "CURL_CA_BUNDLE",
                    "GIT_SSL_CAINFO",
                ] {
                    opts.env.push((var.to_owned(), file.clone()));
                }
            }
            let obs = sb.exec(command, &opts)?;
            if !as_root || obs.code() != Some(0) {
                return Ok((obs, None));
            }
            let after = sb.snapshot()?;
            if after.id() != &id {
                store.unlist_snapshot(after.id())?;
            }
            Ok((obs, Some(after.manifest().layers.clone())))
        })();
        store.unlist_snapshot(&id)?;
        result
    }
}

/// Where a build step with egress finds the host's CA bundle: a per-action
/// read-only mount, at `/run/arbor/<target>/<file>` in the step's root.
const HOST_CA_TARGET: &str = "verifier/host-ca";
const HOST_CA_FILE: &str = "ca-certificates.crt";

impl Runtime {
    /// The host's CA bundle (`$SSL_CERT_FILE`, else Debian's
    /// `/etc/ssl/certs/ca-certificates.crt`) as a one-file layer, so that a
    /// build step's TLS trusts what the host trusts (a registry behind a
    /// TLS-inspecting proxy, say). Mounted read-only for the step alone; it
    /// is never part of an image. `None` when the host has no bundle.
    fn host_ca_layer(&self) -> Result<Option<LayerId>> {
        let path = std::env::var_os("SSL_CERT_FILE")
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(None);
        };
        let store = self.store();
        let staged = store.new_temp_path("host-ca");
        let result = (|| {
            let io = |source| ImageError::Io {
                path: staged.clone(),
                source,
            };
            std::fs::create_dir(&staged).map_err(io)?;
            let file = staged.join(HOST_CA_FILE);
            std::fs::write(&file, &bytes).map_err(io)?;
            let owners = self.owner_map();
            let (uid, gid) = owners.to_host(0, 0);
            for p in [&staged, &file] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid)).map_err(io)?;
            }
            let tree = layer::tree_of_dir(&staged, &owners)?;
            let (id, _) = super::store_layer(store, &staged, &tree)?;
            Ok(Some(id))
        })();
        if staged.exists() {
            crate::cleanup::remove_dir_forcefully(&staged);
        }
        result
    }
}

/// The last lines of a program's output, for an error message.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(12);
    lines[start..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe() -> ImageRecipe {
        ImageRecipe {
            debian: "bookworm".into(),
            packages: vec!["python3".into(), "python3-pip".into()],
            pip: vec!["attrs==23.2.0".into()],
            run: vec!["echo hi > /etc/greeting".into()],
            allow_hosts: Vec::new(),
        }
    }

    #[test]
    fn a_valid_recipe_passes_and_each_bad_field_is_named() {
        recipe().validate().unwrap();
        type Edit = Box<dyn Fn(&mut ImageRecipe)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("debian", Box::new(|r| r.debian = "../etc".into())),
            ("debian", Box::new(|r| r.debian = String::new())),
            (
                "packages",
                Box::new(|r| r.packages.push("--allow-unauthenticated".into())),
            ),
            ("packages", Box::new(|r| r.packages.push("Py Thon".into()))),
            (
                "pip",
                Box::new(|r| r.pip.push("--index-url=http://evil".into())),
            ),
            ("pip", Box::new(|r| r.pip.push("./local/path".into()))),
            (
                "pip",
                Box::new(|r| r.pip.push("x @ https://host/x.whl".into())),
            ),
            (
                "pip",
                Box::new(|r| r.pip.push("six==1.16.0; rm -rf /".into())),
            ),
            ("run", Box::new(|r| r.run.push("  ".into()))),
            (
                "allow_hosts",
                Box::new(|r| r.allow_hosts.push("10.0.0.1".into())),
            ),
            (
                "allow_hosts",
                Box::new(|r| {
                    r.run.clear();
                    r.allow_hosts.push("example.com".into());
                }),
            ),
        ];
        for (field, edit) in cases {
            let mut r = recipe();
            edit(&mut r);
            match r.validate() {
                Err(ImageError::BadRecipe { field: f, .. }) => assert_eq!(f, field, "{r:?}"),
                other => panic!("{r:?}: expected a bad {field}, got {other:?}"),
            }
        }
        // Controls: the forms a recipe may use.
        for ok in [
            "six",
            "six==1.16.0",
            "attrs[tests]>=23.1",
            "a.b-c_d~=1.0",
            "x!=2.*",
        ] {
            assert!(is_pip_requirement(ok), "{ok}");
        }
    }

    #[test]
    fn the_cache_key_follows_the_recipe_not_the_order_of_packages() {
        let a = recipe();
        let mut b = recipe();
        b.packages.reverse();
        b.packages.push("python3".into());
        assert_eq!(a.canonical(), b.canonical());
        let mut c = recipe();
        c.run[0].push('!');
        assert_ne!(a.canonical(), c.canonical());
        assert_ne!(cache_key(&["a", "bc"]), cache_key(&["ab", "c"]));
    }
}
