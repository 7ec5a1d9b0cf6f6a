//! The syscall filter (seccomp-bpf) every action installs as its last step
//! before `exec`: the main action, a verifier's peer, an image build's steps.
//!
//! It is a deny list, not an allow list: namespaces, capabilities, the
//! read-only view and the limits already confine what an action can reach,
//! and the filter takes away the kernel interfaces an action never needs and
//! that carry most of the kernel's exploitable surface (see [`DENIED`] for
//! each group and its reason). A denied call fails with `EPERM` (`clone3`
//! with `ENOSYS`, so that libc falls back to `clone`, whose flags the filter
//! can read), never with a kill, so a program that probes for a feature
//! degrades instead of dying.
//!
//! Three programs are stacked (the kernel runs all of them and takes the
//! strictest answer):
//! 1. on x86-64, every call entered through the x32 ABI (its number has
//!    bit 30 set) is refused: a filter keyed by x86-64 numbers would
//!    otherwise let every x32 alias of a denied call through;
//! 2. the `EPERM` list, built by `seccompiler`, whose architecture check
//!    kills a process that enters through another ABI (`int 0x80` on
//!    x86-64): a filter keyed by one ABI's numbers cannot judge another's;
//! 3. `clone3` → `ENOSYS`.
//!
//! The programs are built once per helper, before any fork; installing them
//! in the action (`install`) allocates nothing.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use super::error::{HelperError, Op, Result};

/// How a denied call is matched.
#[derive(Clone, Copy, Debug)]
pub enum Match {
    /// Always.
    Always,
    /// When argument `.0` has any of the namespace flags set
    /// ([`NAMESPACE_FLAGS`]).
    NamespaceFlags(u8),
    /// When argument `.0` (a pid) is 1: the action's init, which is not the
    /// action's and holds the helper's descriptors.
    PidOne(u8),
    /// When argument 0 is neither 0 (`PER_LINUX`) nor `0xffffffff` (a query).
    PersonalityChange,
}

/// One group of denied calls: why they are denied, and the calls (name,
/// number, how it is matched).
#[derive(Debug)]
pub struct DeniedGroup {
    /// The reason, as the README's table gives it.
    pub why: &'static str,
    /// The calls.
    pub calls: &'static [(&'static str, i64, Match)],
}

use Match::{Always, NamespaceFlags, PersonalityChange, PidOne};

/// Every call the filter refuses with `EPERM`, by group. The README's table
/// is checked against this list (`the_readme_lists_every_denied_call`).
pub const DENIED: &[DeniedGroup] = &[
    DeniedGroup {
        why: "loads programs or modules into the kernel, or replaces it",
        calls: &[
            ("bpf", libc::SYS_bpf, Always),
            ("perf_event_open", libc::SYS_perf_event_open, Always),
            ("kexec_load", libc::SYS_kexec_load, Always),
            ("kexec_file_load", libc::SYS_kexec_file_load, Always),
            ("init_module", libc::SYS_init_module, Always),
            ("finit_module", libc::SYS_finit_module, Always),
            ("delete_module", libc::SYS_delete_module, Always),
        ],
    },
    DeniedGroup {
        why: "kernel keyrings: not namespaced, a long record of kernel bugs",
        calls: &[
            ("keyctl", libc::SYS_keyctl, Always),
            ("add_key", libc::SYS_add_key, Always),
            ("request_key", libc::SYS_request_key, Always),
        ],
    },
    DeniedGroup {
        why: "userfaultfd stalls kernel code at a chosen instant (the usual race-exploit primitive)",
        calls: &[("userfaultfd", libc::SYS_userfaultfd, Always)],
    },
    DeniedGroup {
        why: "io_uring: its operations bypass this filter (they are not system calls), and it has \
              had more privilege-escalation bugs than any other interface in recent kernels; \
              programs fall back to ordinary I/O when setup fails",
        calls: &[
            ("io_uring_setup", libc::SYS_io_uring_setup, Always),
            ("io_uring_enter", libc::SYS_io_uring_enter, Always),
            ("io_uring_register", libc::SYS_io_uring_register, Always),
        ],
    },
    DeniedGroup {
        why: "ptrace and memory access to pid 1 of the action's pid namespace (its init, which \
              holds the helper's descriptors; the kernel's ptrace check already refuses it, \
              and the pid namespace hides every other process outside the action)",
        calls: &[
            ("ptrace", libc::SYS_ptrace, PidOne(1)),
            ("process_vm_readv", libc::SYS_process_vm_readv, PidOne(0)),
            ("process_vm_writev", libc::SYS_process_vm_writev, PidOne(0)),
            ("pidfd_open", libc::SYS_pidfd_open, PidOne(0)),
        ],
    },
    DeniedGroup {
        why: "mounts: the action's view of the filesystem is fixed",
        calls: &[
            ("mount", libc::SYS_mount, Always),
            ("umount2", libc::SYS_umount2, Always),
            ("pivot_root", libc::SYS_pivot_root, Always),
            ("move_mount", libc::SYS_move_mount, Always),
            ("open_tree", libc::SYS_open_tree, Always),
            ("fsopen", libc::SYS_fsopen, Always),
            ("fsconfig", libc::SYS_fsconfig, Always),
            ("fsmount", libc::SYS_fsmount, Always),
            ("fspick", libc::SYS_fspick, Always),
            ("mount_setattr", libc::SYS_mount_setattr, Always),
        ],
    },
    DeniedGroup {
        why: "new namespaces (a nested user namespace regains every capability inside it and \
              exposes the kernel code that checks them) and joining others",
        calls: &[
            ("unshare", libc::SYS_unshare, NamespaceFlags(0)),
            ("clone", libc::SYS_clone, NamespaceFlags(0)),
            ("setns", libc::SYS_setns, Always),
        ],
    },
    DeniedGroup {
        why: "personality changes (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE and the like weaken \
              the process's own protections); querying and PER_LINUX stay allowed",
        calls: &[("personality", libc::SYS_personality, PersonalityChange)],
    },
    DeniedGroup {
        why: "machine-wide state: accounting, swap, reboot, the clock",
        calls: &[
            ("acct", libc::SYS_acct, Always),
            ("swapon", libc::SYS_swapon, Always),
            ("swapoff", libc::SYS_swapoff, Always),
            ("reboot", libc::SYS_reboot, Always),
            ("settimeofday", libc::SYS_settimeofday, Always),
            ("clock_settime", libc::SYS_clock_settime, Always),
            ("clock_adjtime", libc::SYS_clock_adjtime, Always),
            ("adjtimex", libc::SYS_adjtimex, Always),
        ],
    },
    DeniedGroup {
        why: "file handles open any inode of a filesystem by number, past every mount and path \
              check (the Shocker escape)",
        calls: &[
            ("open_by_handle_at", libc::SYS_open_by_handle_at, Always),
            ("name_to_handle_at", libc::SYS_name_to_handle_at, Always),
        ],
    },
    DeniedGroup {
        why: "the host's kernel log and other legacy or host-wide interfaces",
        calls: &[
            ("syslog", libc::SYS_syslog, Always),
            ("lookup_dcookie", libc::SYS_lookup_dcookie, Always),
            ("quotactl", libc::SYS_quotactl, Always),
            ("nfsservctl", libc::SYS_nfsservctl, Always),
            #[cfg(target_arch = "x86_64")]
            ("uselib", libc::SYS_uselib, Always),
            #[cfg(target_arch = "x86_64")]
            ("iopl", libc::SYS_iopl, Always),
            #[cfg(target_arch = "x86_64")]
            ("ioperm", libc::SYS_ioperm, Always),
        ],
    },
];

/// Every namespace flag of `clone`/`unshare`.
pub const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWTIME as u64,
];

/// The built programs, in the order they are installed.
pub(super) struct SyscallFilter {
    programs: Vec<BpfProgram>,
}

fn built(message: String) -> HelperError {
    HelperError::Other {
        op: Op::SyscallFilter,
        path: None,
        message,
    }
}

fn rules(m: Match) -> std::result::Result<Vec<SeccompRule>, seccompiler::BackendError> {
    let arg = |index: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
    };
    Ok(match m {
        Always => Vec::new(),
        // Rules are or-ed: one per flag ("any of these bits is set").
        NamespaceFlags(index) => NAMESPACE_FLAGS
            .iter()
            .map(|&flag| SeccompRule::new(vec![arg(index, SeccompCmpOp::MaskedEq(flag), flag)?]))
            .collect::<std::result::Result<_, _>>()?,
        PidOne(index) => vec![SeccompRule::new(vec![arg(index, SeccompCmpOp::Eq, 1)?])?],
        // Conditions are and-ed.
        PersonalityChange => vec![SeccompRule::new(vec![
            arg(0, SeccompCmpOp::Ne, 0)?,
            arg(0, SeccompCmpOp::Ne, 0xffff_ffff)?,
        ])?],
    })
}

/// Classic BPF opcodes of the x32 program (`linux/bpf_common.h`).
#[cfg(target_arch = "x86_64")]
mod op {
    /// `BPF_LD | BPF_W | BPF_ABS` (BPF_LD and BPF_W are 0).
    pub const LD_W_ABS: u16 = 0x20;
    /// `BPF_JMP | BPF_JGE | BPF_K`.
    pub const JGE_K: u16 = 0x05 | 0x30;
    /// `BPF_RET | BPF_K`.
    pub const RET_K: u16 = 0x06;
}

/// Refuse every call entered through the x32 ABI (its number has
/// `__X32_SYSCALL_BIT` set), whether or not this kernel has that ABI.
#[cfg(target_arch = "x86_64")]
fn x32_entry() -> BpfProgram {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let insn = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        // seccomp_data.nr is at offset 0.
        insn(op::LD_W_ABS, 0, 0, 0),
        insn(op::JGE_K, 0, 1, X32_SYSCALL_BIT),
        insn(
            op::RET_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        insn(op::RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

impl SyscallFilter {
    /// The programs of this architecture, built on first use.
    pub fn get() -> Result<&'static SyscallFilter> {
        static FILTER: OnceLock<std::result::Result<SyscallFilter, String>> = OnceLock::new();
        FILTER
            .get_or_init(|| Self::build().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|m| built(m.clone()))
    }

    fn build() -> Result<SyscallFilter> {
        let arch = TargetArch::try_from(std::env::consts::ARCH)
            .map_err(|e| built(format!("architecture {}: {e}", std::env::consts::ARCH)))?;
        let deny = |calls: Vec<(i64, Match)>, action: SeccompAction| -> Result<BpfProgram> {
            let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
            for (nr, m) in calls {
                map.insert(nr, rules(m).map_err(|e| built(e.to_string()))?);
            }
            let filter = SeccompFilter::new(map, SeccompAction::Allow, action, arch)
                .map_err(|e| built(e.to_string()))?;
            filter
                .try_into()
                .map_err(|e: seccompiler::BackendError| built(e.to_string()))
        };
        let mut programs = Vec::new();
        #[cfg(target_arch = "x86_64")]
        programs.push(x32_entry());
        let eperm = DENIED
            .iter()
            .flat_map(|g| g.calls.iter().map(|&(_, nr, m)| (nr, m)))
            .collect();
        programs.push(deny(eperm, SeccompAction::Errno(libc::EPERM as u32))?);
        programs.push(deny(
            vec![(libc::SYS_clone3, Always)],
            SeccompAction::Errno(libc::ENOSYS as u32),
        )?);
        Ok(SyscallFilter { programs })
    }

    /// Install every program on the calling thread (sets no_new_privs
    /// first, which the action has already set). Allocates nothing.
    pub fn install(&self) -> std::result::Result<(), seccompiler::Error> {
        for p in &self.programs {
            seccompiler::apply_filter(p)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_builds_and_names_no_call_twice() {
        let f = SyscallFilter::get().unwrap();
        assert!(f.programs.iter().all(|p| !p.is_empty()));
        let mut names: Vec<&str> = DENIED
            .iter()
            .flat_map(|g| g.calls.iter().map(|c| c.0))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a call is listed twice");
        // The list (a call missing from DENIED fails here).
        for required in [
            "bpf",
            "perf_event_open",
            "kexec_load",
            "kexec_file_load",
            "init_module",
            "finit_module",
            "delete_module",
            "keyctl",
            "add_key",
            "request_key",
            "userfaultfd",
            "io_uring_setup",
            "ptrace",
            "mount",
            "umount2",
            "pivot_root",
            "move_mount",
            "fsopen",
            "unshare",
            "setns",
            "clone",
            "personality",
            "acct",
            "swapon",
            "swapoff",
            "reboot",
            "settimeofday",
            "clock_settime",
            "open_by_handle_at",
            "name_to_handle_at",
            "lookup_dcookie",
        ] {
            assert!(names.contains(&required), "{required} is not denied");
        }
    }

    #[test]
    fn the_readme_lists_every_denied_call() {
        // Read at compile time: the unprivileged run of the test binaries
        // cannot reach the checkout.
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
        let missing: Vec<&str> = DENIED
            .iter()
            .flat_map(|g| g.calls.iter().map(|c| c.0))
            .filter(|name| !readme.contains(&format!("`{name}`")))
            .collect();
        assert!(missing.is_empty(), "README lacks {missing:?}");
        // Positive control: a name that is not denied is not in the table.
        assert!(!readme.contains("`getpid`"));
    }
}
