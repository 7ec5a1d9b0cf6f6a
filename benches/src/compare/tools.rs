//! The external tools of the comparison: finding them, probing that they
//! run here (with the error when they do not), and small helpers for running
//! commands and measuring disk use.
//!
//! (~700 lines: one probe per external tool, each independent and short.)

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, bail};

use super::MethodId;

/// Whether a tool can be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolState {
    /// Found, and the probe ran.
    Ready,
    /// Not found on `PATH`; the text says what to install.
    NotInstalled(String),
    /// Found, but the probe failed; the text holds the error.
    CannotRun(String),
}

/// What was found of one tool, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolReport {
    /// The tool as the report names it.
    pub tool: &'static str,
    /// The methods that need it.
    pub methods: Vec<MethodId>,
    /// Whether it can be used.
    pub state: ToolState,
    /// The first line of its `--version`, when found.
    pub version: Option<String>,
    /// How it was run, or what was worked around.
    pub note: Option<String>,
}

impl ToolReport {
    /// One line: state, version and note.
    pub fn summary(&self) -> String {
        let mut s = match &self.state {
            ToolState::Ready => "ready".to_owned(),
            ToolState::NotInstalled(why) => format!("not installed ({why})"),
            ToolState::CannotRun(why) => format!("cannot run: {why}"),
        };
        if let Some(v) = &self.version {
            s.push_str(&format!("; {v}"));
        }
        if let Some(n) = &self.note {
            s.push_str(&format!("; {n}"));
        }
        s
    }
}

/// How a top-level system directory (`/bin`, `/lib64`, ...) appears in the
/// isolated views of bubblewrap and podman: the same symlink as on the host
/// (merged /usr), or a read-only bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SystemEntry {
    /// `/name` is a symlink to `target` on the host.
    Symlink {
        /// The directory name under `/`.
        name: String,
        /// The link's target.
        target: String,
    },
    /// `/name` is a directory on the host, bound read-only.
    Bind {
        /// The directory name under `/`.
        name: String,
    },
}

/// The host's system directories other than `/usr` that exist.
pub fn system_entries() -> Vec<SystemEntry> {
    ["bin", "sbin", "lib", "lib32", "lib64", "libx32"]
        .iter()
        .filter_map(|name| {
            let path = Path::new("/").join(name);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).ok()?;
                Some(SystemEntry::Symlink {
                    name: (*name).to_owned(),
                    target: target.to_string_lossy().into_owned(),
                })
            } else if meta.is_dir() {
                Some(SystemEntry::Bind {
                    name: (*name).to_owned(),
                })
            } else {
                None
            }
        })
        .collect()
}

/// The podman command line this host needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Podman {
    /// The `podman` binary.
    pub program: PathBuf,
    /// Private storage (`--root`), so the run never touches the user's images.
    pub root: PathBuf,
    /// Private run state (`--runroot`).
    pub runroot: PathBuf,
    /// `--runtime` when the default OCI runtime cannot run here.
    pub runtime: Option<String>,
    /// Options of every `podman run`: no network, the host's /usr read-only,
    /// rlimits the caller may set.
    pub run_options: Vec<String>,
}

impl Podman {
    /// `podman` with the global options.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.arg("--root")
            .arg(&self.root)
            .arg("--runroot")
            .arg(&self.runroot)
            .args(["--log-level", "error", "--events-backend", "file"]);
        if let Some(rt) = &self.runtime {
            cmd.args(["--runtime", rt]);
        }
        cmd
    }

    /// Import `rootfs` (a directory) as image `name`, streaming `tar` into
    /// `podman import`.
    pub fn import_dir(&self, rootfs: &Path, name: &str) -> Result<()> {
        let mut tar = Command::new("tar")
            .arg("-cf")
            .arg("-")
            .arg("-C")
            .arg(rootfs)
            .arg(".")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("run tar for podman import")?;
        let tar_out = tar.stdout.take().context("tar's stdout")?;
        let imported = self
            .command()
            .args(["import", "-q", "--change", "WORKDIR=/workspace", "-", name])
            .stdin(Stdio::from(tar_out))
            .output()
            .context("run podman import");
        let tar_done = tar.wait_with_output().context("wait for tar")?;
        let imported = imported?;
        if !tar_done.status.success() {
            bail!(
                "tar of {} failed: {}",
                rootfs.display(),
                tail(&tar_done.stderr)
            );
        }
        if !imported.status.success() {
            bail!(
                "podman import failed ({}): {}",
                imported.status,
                tail(&imported.stderr)
            );
        }
        Ok(())
    }

    /// Build the skeleton root filesystem of an image in `dir` (absent):
    /// the host's system directory links, empty mount points, a minimal
    /// `/etc/passwd`, and `workspace/` hard-linked from `ws` when given.
    pub fn skeleton(dir: &Path, ws: Option<&Path>) -> Result<()> {
        for sub in ["usr", "tmp", "proc", "dev", "sys", "etc", "root"] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).with_context(|| format!("create {}", p.display()))?;
        }
        std::fs::set_permissions(
            dir.join("tmp"),
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        )
        .context("chmod the skeleton's /tmp")?;
        for entry in system_entries() {
            match entry {
                SystemEntry::Symlink { name, target } => {
                    std::os::unix::fs::symlink(&target, dir.join(&name))
                        .with_context(|| format!("link /{name} in the skeleton"))?;
                }
                SystemEntry::Bind { name } => {
                    std::fs::create_dir_all(dir.join(&name))
                        .with_context(|| format!("create /{name} in the skeleton"))?;
                }
            }
        }
        std::fs::write(
            dir.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
        )
        .context("write the skeleton's /etc/passwd")?;
        std::fs::write(dir.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n")
            .context("write the skeleton's /etc/group")?;
        let workspace = dir.join("workspace");
        match ws {
            Some(ws) => {
                run_checked(Command::new("cp").arg("-al").arg(ws).arg(&workspace))
                    .context("hard-link the workspace into the image's root")?;
            }
            None => std::fs::create_dir(&workspace)
                .with_context(|| format!("create {}", workspace.display()))?,
        }
        Ok(())
    }
}

/// Every tool found, with its probe result.
#[derive(Debug)]
pub struct Toolbox {
    /// One entry per tool, in report order.
    pub reports: Vec<ToolReport>,
    /// `/usr/bin/python3`, when present (sandboxes see the host's `/usr`).
    pub python: Option<PathBuf>,
    /// Podman, when it runs.
    pub podman: Option<Podman>,
    /// bubblewrap's arguments for the system view (before the workspace bind).
    pub bwrap_system: Vec<String>,
    /// The directory the probes (and podman's storage) live in.
    dir: PathBuf,
}

/// The Python interpreter every method runs (sandboxes see the host's `/usr`).
pub const PYTHON: &str = "/usr/bin/python3";

impl Toolbox {
    /// Find and probe every tool; probes run in `dir` (created).
    pub fn detect(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let mut reports = Vec::new();
        let python = Path::new(PYTHON).is_file().then(|| PathBuf::from(PYTHON));
        reports.push(ToolReport {
            tool: "python3",
            methods: vec![],
            state: if python.is_some() {
                ToolState::Ready
            } else {
                ToolState::NotInstalled("apt-get install python3".into())
            },
            version: first_line_of(PYTHON, &["--version"]),
            note: Some("/usr/bin/python3 for every method (the Python test)".into()),
        });
        for (tool, method, package) in [
            ("cp", MethodId::Cp, "coreutils"),
            ("tar", MethodId::Tar, "tar"),
            ("git", MethodId::Git, "git"),
        ] {
            let found = find_in_path(tool);
            reports.push(ToolReport {
                tool,
                methods: vec![method],
                state: match found {
                    Some(_) => ToolState::Ready,
                    None => ToolState::NotInstalled(format!("apt-get install {package}")),
                },
                version: found.and_then(|p| first_line_of(&p, &["--version"])),
                note: (method == MethodId::Git).then(|| {
                    "core.compression=0, core.looseCompression=0 (git's fastest; the default \
                     zlib level makes add and checkout several times slower)"
                        .to_owned()
                }),
            });
        }
        reports.push(probe_floor(&dir.join("floor")));
        let bwrap_system = bwrap_system_args();
        reports.push(probe_bwrap(&dir.join("bwrap"), &bwrap_system));
        let (podman_report, podman) = probe_podman(&dir.join("podman"));
        reports.push(podman_report);
        Ok(Self {
            reports,
            python,
            podman,
            bwrap_system,
            dir: dir.to_owned(),
        })
    }

    /// Whether `method` can run.
    pub fn state(&self, method: MethodId) -> ToolState {
        self.reports
            .iter()
            .find(|r| r.methods.contains(&method))
            .map(|r| r.state.clone())
            .unwrap_or(ToolState::Ready)
    }

    /// Remove podman's private storage and the probe files.
    pub fn cleanup(&self) -> Result<()> {
        if let Some(podman) = &self.podman {
            // Best effort: containers first, then images, then the storage.
            let _ = podman.command().args(["rm", "-fa"]).output();
            let _ = podman
                .command()
                .args(["system", "reset", "--force"])
                .output();
        }
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)
                .with_context(|| format!("remove {}", self.dir.display()))?;
        }
        Ok(())
    }
}

/// The command of the floor: a new user and mount namespace, an overlay of
/// `lowers` (topmost first) with `upper` and `work` mounted on `merged`, and
/// then `script` (a shell command) run in `merged`.
pub fn floor_command(
    lowers: &str,
    upper: &Path,
    work: &Path,
    merged: &Path,
    script: &str,
) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(format!(
            "mount -t overlay overlay -o userxattr,lowerdir=\"$1\",upperdir=\"$2\",workdir=\"$3\" \"$4\" && cd \"$4\" && {script}"
        ))
        .arg("sh")
        .arg(lowers)
        .arg(upper)
        .arg(work)
        .arg(merged);
    cmd
}

fn probe_floor(dir: &Path) -> ToolReport {
    let mut report = ToolReport {
        tool: "unshare + overlay",
        methods: vec![MethodId::OverlayFloor],
        state: ToolState::Ready,
        version: first_line_of("unshare", &["--version"]),
        note: Some("unshare --user --map-root-user --mount, mount -t overlay (userxattr)".into()),
    };
    if find_in_path("unshare").is_none() {
        report.state = ToolState::NotInstalled("apt-get install util-linux".into());
        return report;
    }
    let probe = || -> Result<()> {
        for sub in ["lower", "upper", "work", "merged"] {
            std::fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("create {}", dir.join(sub).display()))?;
        }
        std::fs::write(dir.join("lower/probe"), "probe\n").context("write the probe file")?;
        let lower = dir.join("lower");
        run_checked(&mut floor_command(
            &lower.to_string_lossy(),
            &dir.join("upper"),
            &dir.join("work"),
            &dir.join("merged"),
            "test -f probe && exec true",
        ))?;
        Ok(())
    };
    if let Err(e) = probe() {
        report.state = ToolState::CannotRun(format!("{e:#}"));
    }
    report
}

/// bubblewrap's system view: new namespaces (network included), the host's
/// /usr read-only, the merged-/usr links, /proc, /dev, a private /tmp.
fn bwrap_system_args() -> Vec<String> {
    let mut args: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for entry in system_entries() {
        match entry {
            SystemEntry::Symlink { name, target } => {
                args.extend(["--symlink".to_owned(), target, format!("/{name}")]);
            }
            SystemEntry::Bind { name } => {
                args.extend([
                    "--ro-bind".to_owned(),
                    format!("/{name}"),
                    format!("/{name}"),
                ]);
            }
        }
    }
    args.extend(
        ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    args
}

/// `bwrap` running `argv` with `dir` bound at `/workspace` as the cwd.
pub fn bwrap_command(system: &[String], dir: &Path, argv: &[&str]) -> Command {
    let mut cmd = Command::new("bwrap");
    cmd.args(system)
        .arg("--bind")
        .arg(dir)
        .arg("/workspace")
        .args(["--chdir", "/workspace"])
        .args(["--setenv", "PYTHONDONTWRITEBYTECODE", "1"])
        .args(argv);
    cmd
}

fn probe_bwrap(dir: &Path, system: &[String]) -> ToolReport {
    let mut report = ToolReport {
        tool: "bwrap",
        methods: vec![MethodId::Bubblewrap],
        state: ToolState::Ready,
        version: first_line_of("bwrap", &["--version"]),
        note: None,
    };
    if find_in_path("bwrap").is_none() {
        report.state = ToolState::NotInstalled("apt-get install bubblewrap".into());
        return report;
    }
    let overlay = Command::new("bwrap")
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--overlay-src"))
        .unwrap_or(false);
    report.note = Some(if overlay {
        "runs one command isolated over a workspace directory (its --overlay is not used)".into()
    } else {
        "runs one command isolated over a workspace directory; this version has no --overlay \
         (containers/bubblewrap PR #547, later releases), so it cannot fork"
            .into()
    });
    let probe = || -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        run_checked(&mut bwrap_command(system, dir, &["true"]))?;
        Ok(())
    };
    if let Err(e) = probe() {
        report.state = ToolState::CannotRun(format!("{e:#}"));
    }
    report
}

fn probe_podman(dir: &Path) -> (ToolReport, Option<Podman>) {
    let mut report = ToolReport {
        tool: "podman",
        methods: vec![MethodId::Podman],
        state: ToolState::Ready,
        version: first_line_of("podman", &["--version"]),
        note: None,
    };
    let Some(program) = find_in_path("podman") else {
        report.state = ToolState::NotInstalled("apt-get install podman (and runc)".into());
        return (report, None);
    };
    let mut run_options: Vec<String> = [
        "--network=none",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
        "-v",
        "/usr:/usr:ro",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for entry in system_entries() {
        if let SystemEntry::Bind { name } = entry {
            run_options.extend(["-v".to_owned(), format!("/{name}:/{name}:ro")]);
        }
    }
    let mut podman = Podman {
        program,
        root: dir.join("storage"),
        runroot: dir.join("run"),
        runtime: None,
        run_options,
    };
    let rootless = effective_uid() != 0;
    let mode = if rootless { "rootless" } else { "as root" };
    let image = "localhost/arbor-bench-probe:latest";
    let setup = || -> Result<()> {
        let rootfs = dir.join("rootfs");
        Podman::skeleton(&rootfs, None)?;
        podman.import_dir(&rootfs, image)?;
        Ok(())
    };
    if let Err(e) = setup() {
        report.state = ToolState::CannotRun(format!("{mode}: {e:#}"));
        return (report, None);
    }
    let mut errors = Vec::new();
    let mut candidates: Vec<Option<String>> = vec![None];
    if find_in_path("runc").is_some() {
        candidates.push(Some("runc".to_owned()));
    }
    for runtime in candidates {
        podman.runtime = runtime.clone();
        let result = podman
            .command()
            .args(["run", "--rm"])
            .args(&podman.run_options)
            .args([image, "/bin/true"])
            .stdin(Stdio::null())
            .output();
        match result {
            Ok(out) if out.status.success() => {
                let mut note = format!("{mode}, private storage, overlay driver");
                if let Some(rt) = &runtime {
                    note.push_str(&format!("; --runtime {rt}"));
                }
                if !errors.is_empty() {
                    note.push_str(&format!(" because {}", errors.join("; ")));
                }
                note.push_str(
                    "; --ulimit nofile/nproc=1024 (podman's defaults exceed what this host lets it set)",
                );
                report.note = Some(note);
                let _ = podman.command().args(["rmi", "-f", image]).output();
                return (report, Some(podman));
            }
            Ok(out) => errors.push(format!(
                "`podman run` with {} failed ({}): {}",
                runtime
                    .as_deref()
                    .map_or("the default runtime".to_owned(), |r| format!(
                        "--runtime {r}"
                    )),
                out.status,
                tail(&out.stderr)
            )),
            Err(e) => errors.push(format!("could not run podman: {e}")),
        }
    }
    let _ = podman.command().args(["rmi", "-f", image]).output();
    let _ = podman
        .command()
        .args(["system", "reset", "--force"])
        .output();
    report.state = ToolState::CannotRun(format!("{mode}: {}", errors.join("; ")));
    (report, None)
}

/// The executable `name` on `PATH`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// The first line of `program args`' output, if it ran.
pub fn first_line_of(program: impl AsRef<OsStr>, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
}

/// The effective uid (from `/proc/self/status`; 0 if unreadable).
pub fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1))
                .and_then(|euid| euid.parse().ok())
        })
        .unwrap_or(0)
}

/// `/proc/loadavg`'s 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

/// The last 400 characters of a command's stderr, trimmed.
pub fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let start = text
        .char_indices()
        .rev()
        .nth(399)
        .map(|(i, _)| i)
        .unwrap_or(0);
    text[start..].replace('\n', " | ")
}

/// The command line, for error messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        let arg = arg.to_string_lossy();
        if s.len() > 160 {
            s.push_str(" ...");
            break;
        }
        s.push(' ');
        s.push_str(&arg);
    }
    s
}

/// Run `cmd` with output captured; an error (with the end of stderr) unless
/// it exits 0.
pub fn run_checked(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("run {}", describe(cmd)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            describe(cmd),
            out.status,
            tail(&out.stderr)
        );
    }
    Ok(out)
}

/// Bytes allocated on disk under `paths` (like `du -s --total`: directories
/// included, symlinks not followed, each hard-linked inode counted once).
pub fn disk_usage(paths: &[PathBuf]) -> Result<u64> {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut stack: Vec<PathBuf> = paths.to_vec();
    while let Some(path) = stack.pop() {
        let meta =
            std::fs::symlink_metadata(&path).with_context(|| format!("stat {}", path.display()))?;
        if !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        total += meta.blocks() * 512;
        if meta.is_dir() {
            for entry in
                std::fs::read_dir(&path).with_context(|| format!("read {}", path.display()))?
            {
                let entry = entry.with_context(|| format!("read {}", path.display()))?;
                stack.push(entry.path());
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_hard_links_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = tmp.path().join("a");
        std::fs::create_dir(&a).expect("mkdir");
        std::fs::write(a.join("f"), vec![b'x'; 100_000]).expect("write");
        let one = disk_usage(std::slice::from_ref(&a)).expect("du");
        assert!(one >= 100_000, "{one}");
        std::fs::hard_link(a.join("f"), a.join("g")).expect("link");
        assert_eq!(disk_usage(std::slice::from_ref(&a)).expect("du"), one);
    }

    #[test]
    fn tail_keeps_the_end() {
        let long = "x".repeat(1000) + "end";
        assert!(tail(long.as_bytes()).ends_with("end"));
        assert_eq!(tail(long.as_bytes()).chars().count(), 400);
        assert_eq!(tail(b"a\nb\n"), "a | b");
    }

    #[test]
    fn finds_sh() {
        assert!(find_in_path("sh").is_some());
        assert!(find_in_path("no-such-tool-arbor").is_none());
    }
}
