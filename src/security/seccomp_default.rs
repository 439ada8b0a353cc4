//! seccomp_default: containerd's default seccomp profile — the one its CRI plugin installs for
//! `RuntimeDefault` (contrib/seccomp/seccomp_default.go, containerd main of 2026-04: Docker's
//! profile plus the AF_ALG/AF_VSOCK socket rules) — written down as data. [`super::seccomp`]
//! turns it into an OCI filter for one container.
//!
//! The profile is an allow-list (default action `SCMP_ACT_ERRNO`, EPERM) in rule groups, each
//! applying when its condition holds: always; from a kernel version on; on the host
//! architecture podvisor was built for (containerd decides by its own build architecture
//! too); when the container's bounding set has a capability; or when it lacks one (`clone`
//! without namespace flags and `clone3` answering ENOSYS, so that libcs fall back to
//! `clone`, unless CAP_SYS_ADMIN is held). Syscall names the host's libseccomp does not know
//! are skipped when the filter is loaded, as runc and containerd skip them.

use oci_spec::runtime::Capability;

use super::sysctl::KernelVersion;

/// The architecture podvisor runs on, as containerd's `runtime.GOARCH` switch sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostArch {
    X86_64,
    X86,
    Aarch64,
    Arm,
    Ppc64le,
    S390x,
    Riscv64,
    Other,
}

impl HostArch {
    /// The architecture of this build.
    pub const fn current() -> HostArch {
        if cfg!(target_arch = "x86_64") {
            HostArch::X86_64
        } else if cfg!(target_arch = "x86") {
            HostArch::X86
        } else if cfg!(target_arch = "aarch64") {
            HostArch::Aarch64
        } else if cfg!(target_arch = "arm") {
            HostArch::Arm
        } else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
            HostArch::Ppc64le
        } else if cfg!(target_arch = "s390x") {
            HostArch::S390x
        } else if cfg!(target_arch = "riscv64") {
            HostArch::Riscv64
        } else {
            HostArch::Other
        }
    }
}

/// A comparison of one syscall argument (OCI semantics: for `MaskedEq`, `value` is the mask
/// and `value_two` the expected result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCheck {
    pub index: u32,
    pub value: u64,
    pub value_two: u64,
    pub op: ArgOp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgOp {
    Eq,
    Lt,
    Gt,
    MaskedEq,
}

/// When a rule group applies. Every set field must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct When {
    /// Only on these host architectures (empty: any).
    pub arches: &'static [HostArch],
    /// Not on these host architectures.
    pub not_arches: &'static [HostArch],
    /// Only with this capability in the bounding set.
    pub cap: Option<Capability>,
    /// Only without this capability in the bounding set.
    pub without_cap: Option<Capability>,
    /// Only from this kernel on (an unknown kernel counts as new enough).
    pub min_kernel: Option<KernelVersion>,
}

const ALWAYS: When = When {
    arches: &[],
    not_arches: &[],
    cap: None,
    without_cap: None,
    min_kernel: None,
};

const fn on(arches: &'static [HostArch]) -> When {
    When { arches, ..ALWAYS }
}

const fn with_cap(cap: Capability) -> When {
    When {
        cap: Some(cap),
        ..ALWAYS
    }
}

/// One group of syscalls with the same action, arguments and condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub names: &'static [&'static str],
    /// `None`: allow; `Some(errno)`: fail with this errno.
    pub errno: Option<u32>,
    /// Conditions on arguments, all of which must hold (each check is one OCI arg entry).
    pub args: &'static [ArgCheck],
    pub when: When,
}

const fn allow(names: &'static [&'static str], when: When) -> Rule {
    Rule {
        names,
        errno: None,
        args: &[],
        when,
    }
}

const fn allow_if(name: &'static [&'static str], arg: &'static [ArgCheck]) -> Rule {
    Rule {
        names: name,
        errno: None,
        args: arg,
        when: ALWAYS,
    }
}

const fn arg0(op: ArgOp, value: u64) -> ArgCheck {
    ArgCheck {
        index: 0,
        value,
        value_two: 0,
        op,
    }
}

/// `socket(2)` address families that stay denied.
const AF_ALG: u64 = 38;
const AF_VSOCK: u64 = 40;

/// Every namespace flag of `clone(2)`: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
/// NEWPID, NEWNET.
pub const CLONE_NAMESPACE_FLAGS: u64 =
    0x0002_0000 | 0x0200_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000;

/// The default action's errno.
pub const DEFAULT_ERRNO: u32 = 1; // EPERM
/// `clone3` fails with ENOSYS without CAP_SYS_ADMIN.
const ENOSYS: u32 = 38;

/// Syscalls allowed to every container.
const ALLOWED: &[&str] = &[
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_adjtime",
    "clock_adjtime64",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "getxattrat",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "ioctl",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listmount",
    "listxattr",
    "listxattrat",
    "llistxattr",
    "_llseek",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lsm_get_self_attr",
    "lsm_list_modules",
    "lsm_set_self_attr",
    "lstat",
    "lstat64",
    "madvise",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "map_shadow_stack",
    "mmap",
    "mmap2",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "mseal",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "_newselect",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pselect6_time64",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "removexattrat",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "send",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setuid32",
    "setxattr",
    "setxattrat",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socketcall",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statmount",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "uretprobe",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
];

use HostArch::*;

/// The profile, in containerd's order.
pub const RULES: &[Rule] = &[
    allow(ALLOWED, ALWAYS),
    // socket(2) for every address family but AF_ALG and AF_VSOCK: three single-condition
    // rules (repeated conditions on one argument would be ANDed by some runtimes and ORed by
    // others).
    allow_if(&["socket"], &[arg0(ArgOp::Lt, AF_ALG)]),
    allow_if(&["socket"], &[arg0(ArgOp::Eq, AF_ALG + 1)]),
    allow_if(&["socket"], &[arg0(ArgOp::Gt, AF_VSOCK)]),
    // personality(2): PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, and the query.
    allow_if(&["personality"], &[arg0(ArgOp::Eq, 0x0)]),
    allow_if(&["personality"], &[arg0(ArgOp::Eq, 0x0008)]),
    allow_if(&["personality"], &[arg0(ArgOp::Eq, 0x20000)]),
    allow_if(&["personality"], &[arg0(ArgOp::Eq, 0x20008)]),
    allow_if(&["personality"], &[arg0(ArgOp::Eq, 0xffff_ffff)]),
    allow(
        &["process_vm_readv", "process_vm_writev", "ptrace"],
        When {
            min_kernel: Some(KernelVersion { major: 4, minor: 8 }),
            ..ALWAYS
        },
    ),
    allow(&["sync_file_range2", "swapcontext"], on(&[Ppc64le])),
    allow(
        &[
            "arm_fadvise64_64",
            "arm_sync_file_range",
            "sync_file_range2",
            "breakpoint",
            "cacheflush",
            "set_tls",
        ],
        on(&[Arm, Aarch64]),
    ),
    allow(&["arch_prctl", "modify_ldt"], on(&[X86_64])),
    allow(&["modify_ldt"], on(&[X86])),
    allow(
        &[
            "s390_pci_mmio_read",
            "s390_pci_mmio_write",
            "s390_runtime_instr",
        ],
        on(&[S390x]),
    ),
    allow(&["riscv_flush_icache", "riscv_hwprobe"], on(&[Riscv64])),
    allow(&["open_by_handle_at"], with_cap(Capability::DacReadSearch)),
    allow(
        &[
            "bpf",
            "clone",
            "clone3",
            "fanotify_init",
            "fsconfig",
            "fsmount",
            "fsopen",
            "fspick",
            "lookup_dcookie",
            "mount",
            "mount_setattr",
            "move_mount",
            "open_tree",
            "perf_event_open",
            "quotactl",
            "quotactl_fd",
            "setdomainname",
            "sethostname",
            "setns",
            "syslog",
            "umount",
            "umount2",
            "unshare",
        ],
        with_cap(Capability::SysAdmin),
    ),
    allow(&["reboot"], with_cap(Capability::SysBoot)),
    allow(&["chroot"], with_cap(Capability::SysChroot)),
    allow(
        &["delete_module", "init_module", "finit_module"],
        with_cap(Capability::SysModule),
    ),
    allow(&["acct"], with_cap(Capability::SysPacct)),
    allow(
        &[
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "process_vm_readv",
            "process_vm_writev",
            "ptrace",
        ],
        with_cap(Capability::SysPtrace),
    ),
    allow(&["iopl", "ioperm"], with_cap(Capability::SysRawio)),
    allow(
        &["settimeofday", "stime", "clock_settime", "clock_settime64"],
        with_cap(Capability::SysTime),
    ),
    allow(&["vhangup"], with_cap(Capability::SysTtyConfig)),
    allow(
        &[
            "get_mempolicy",
            "mbind",
            "set_mempolicy",
            "set_mempolicy_home_node",
        ],
        with_cap(Capability::SysNice),
    ),
    allow(&["syslog"], with_cap(Capability::Syslog)),
    allow(&["bpf"], with_cap(Capability::Bpf)),
    allow(&["perf_event_open"], with_cap(Capability::Perfmon)),
    // Without CAP_SYS_ADMIN: clone(2) without namespace flags (its flags are argument 1 on
    // s390, 0 elsewhere), and clone3 fails with ENOSYS (its flags sit in a struct seccomp
    // cannot read), so that libcs fall back to clone.
    Rule {
        names: &["clone"],
        errno: None,
        args: &[ArgCheck {
            index: 0,
            value: CLONE_NAMESPACE_FLAGS,
            value_two: 0,
            op: ArgOp::MaskedEq,
        }],
        when: When {
            not_arches: &[S390x],
            without_cap: Some(Capability::SysAdmin),
            ..ALWAYS
        },
    },
    Rule {
        names: &["clone"],
        errno: None,
        args: &[ArgCheck {
            index: 1,
            value: CLONE_NAMESPACE_FLAGS,
            value_two: 0,
            op: ArgOp::MaskedEq,
        }],
        when: When {
            arches: &[S390x],
            without_cap: Some(Capability::SysAdmin),
            ..ALWAYS
        },
    },
    Rule {
        names: &["clone3"],
        errno: Some(ENOSYS),
        args: &[],
        when: When {
            without_cap: Some(Capability::SysAdmin),
            ..ALWAYS
        },
    },
];
