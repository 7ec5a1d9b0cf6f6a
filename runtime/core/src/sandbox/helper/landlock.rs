//! Landlock, where the kernel has it (ABI ≥ 1): an action may write only
//! beneath `/workspace` (and the image's `WorkingDir`, the workspace's other
//! mount point), `/tmp` and `/dev/shm`, and to the device nodes the sandbox
//! gives it ([`DEVICES`]). The read-only system view already refuses writes
//! elsewhere; Landlock also covers what a mount flag cannot: `/proc` (the
//! action's own `/proc/PID/mem`, `comm`, `attr`, `oom_score_adj`), and device
//! nodes made anywhere (`mknod` is refused everywhere).
//!
//! Where the kernel lacks Landlock the restriction is reported (by
//! [`abi`], in the helper's log and `arbor serve`'s banner) and not fatal.
//! An image build's step (its root is the workspace) is not restricted: the
//! whole root is what it builds.

use landlock::{
    ABI, AccessFs, BitFlags, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus,
    path_beneath_rules,
};

/// The device nodes every sandbox's `/dev` has (bound from the host's).
pub(super) const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// The directories an action may write beneath (besides a `WorkingDir`).
pub(super) const WRITABLE: [&str; 3] = ["/workspace", "/tmp", "/dev/shm"];

/// The newest ABI this code asks for; older kernels enforce what they can.
const WANTED: ABI = ABI::V3;

/// The write accesses handled: every one of [`WANTED`] but making device
/// nodes, which no rule grants.
fn handled() -> BitFlags<AccessFs> {
    AccessFs::from_write(WANTED)
}

fn granted() -> BitFlags<AccessFs> {
    handled() & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// Restrict the calling process (and everything it starts) to writing
/// beneath [`WRITABLE`] and `workdir`, and to the device nodes.
pub(super) fn restrict_writes(workdir: Option<&str>) -> Result<RulesetStatus, RulesetError> {
    let devices = DEVICES.map(|d| format!("/dev/{d}"));
    let status = Ruleset::default()
        .handle_access(handled())?
        .create()?
        .add_rules(path_beneath_rules(
            WRITABLE.iter().copied().chain(workdir),
            granted(),
        ))?
        .add_rules(path_beneath_rules(
            &devices,
            AccessFs::WriteFile | AccessFs::Truncate,
        ))?
        .restrict_self()?;
    Ok(status.ruleset)
}

/// The Landlock ABI of the running kernel (`None`: unavailable or disabled).
pub fn abi() -> Option<u32> {
    super::sys::landlock_abi()
}

/// One line for a log or a banner.
pub fn describe() -> String {
    match abi() {
        Some(v) => format!("landlock: ABI {v}, writes confined to /workspace, /tmp, /dev/shm"),
        None => "landlock: unavailable on this kernel (writes are confined by the read-only \
                 view only)"
            .to_owned(),
    }
}
