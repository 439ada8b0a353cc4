//! The command line `ps` shows (`/proc/<pid>/cmdline`) of a process forked without exec:
//! a monitor forked by the spawner would otherwise show the spawner's arguments. The
//! kernel reads the command line from the process's own memory, the strings `exec` put at
//! the top of its stack (`arg_start..arg_end` in `/proc/self/stat`); they are overwritten in
//! place, as `setproctitle(3)` does. `PR_SET_MM_ARG_START` would allow any length but needs
//! CAP_SYS_RESOURCE, which root lacks on some hosts: the spawner is exec'd with room for the
//! longest command line it will give a child instead ([`room_argument`]).

use std::fs;
use std::io;

/// The bounds of this process's argument strings (`arg_start`, `arg_end`: fields 48 and 49
/// of `/proc/self/stat`, Linux >= 3.5).
fn arg_area() -> io::Result<(usize, usize)> {
    let stat = fs::read_to_string("/proc/self/stat")?;
    let rest = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| io::Error::other("malformed /proc/self/stat"))?;
    // After the command name, field 3 (the state) comes first: field N is at N - 3.
    let mut fields = rest.split_whitespace().skip(48 - 3);
    let mut next = || -> io::Result<usize> {
        fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::other("no arg_start/arg_end in /proc/self/stat"))
    };
    let (start, end) = (next()?, next()?);
    if start == 0 || end <= start {
        return Err(io::Error::other("empty argument area"));
    }
    Ok((start, end))
}

/// An argument of `len` spaces: what a process that will call [`set_args`] (or whose forked
/// children will) is exec'd with as its last argument, to make room.
pub fn room_argument(len: usize) -> String {
    " ".repeat(len)
}

/// Replaces the arguments after `argv[0]` as `/proc/self/cmdline` shows them with `args`
/// (NUL-separated, the rest of the area zeroed). Arguments that do not fit are cut at the end
/// of the area: `Ok(false)`. Meant for a process forked without exec, before it does anything
/// else; `std::env::args()` returns the new arguments afterwards.
pub fn set_args(args: &[&str]) -> io::Result<bool> {
    let (start, end) = arg_area()?;
    let len = end - start;
    // SAFETY: `arg_start..arg_end` is this process's own argument area: mapped, writable (it
    // lies in the stack mapping exec set up) and `len` bytes long. Nothing in this program
    // holds a Rust reference into it (std keeps raw pointers and reads them only in
    // `env::args()`), and the process is single-threaded (a forked child), so nothing reads
    // it while it is rewritten.
    let area = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, len) };
    Ok(fill(area, args))
}

/// Writes `args` after the first NUL-terminated string of `area` (argv[0], kept: `ps` and the
/// VM scripts match the program name), each followed by a NUL, and zeroes the rest. The
/// area's last byte stays NUL (the kernel would read on into the environment otherwise), so
/// arguments that do not fit are cut: false then.
fn fill(area: &mut [u8], args: &[&str]) -> bool {
    let len = area.len();
    let mut pos = area.iter().position(|b| *b == 0).map_or(len, |i| i + 1);
    let mut fit = true;
    for a in args {
        let bytes = a.as_bytes();
        let n = bytes.len().min(len.saturating_sub(pos + 1));
        area[pos..pos + n].copy_from_slice(&bytes[..n]);
        fit &= n == bytes.len();
        pos += n;
        if pos < len {
            area[pos] = 0;
            pos += 1;
        }
    }
    area[pos.min(len)..].fill(0);
    fit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_argv0_and_the_rest_is_zeroed_or_cut() {
        let mut area = *b"podvisor\0shim\0spawner\0          ";
        assert!(fill(&mut area, &["shim", "run", "/x"]));
        let mut want = b"podvisor\0shim\0run\0/x\0".to_vec();
        want.resize(area.len(), 0);
        assert_eq!(&area[..], &want[..]);
        let mut small = *b"pv\0abcdefgh";
        assert!(!fill(&mut small, &["shim", "run", "/long/dir"]));
        assert_eq!(&small[..], b"pv\0shim\0ru\0");
        assert_eq!(*small.last().expect("last"), 0, "the area ends with a NUL");
    }

    #[test]
    fn a_forked_child_shows_its_own_arguments() {
        let before = fs::read("/proc/self/cmdline").expect("cmdline");
        let (start, end) = arg_area().expect("area");
        assert_eq!(
            before.len(),
            end - start,
            "the area is what the kernel shows"
        );
        let mut want = before.clone();
        let fits = fill(&mut want, &["shim", "run", "/x"]);
        let (r, w) = nix::unistd::pipe().expect("pipe");
        // SAFETY: the child only rewrites its own argument area, reads a /proc file, writes
        // to a pipe and _exits; glibc's fork keeps malloc usable in the child.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            nix::unistd::ForkResult::Child => {
                let ok = set_args(&["shim", "run", "/x"]).unwrap_or(false);
                let mut out = vec![u8::from(ok)];
                out.extend_from_slice(&fs::read("/proc/self/cmdline").unwrap_or_default());
                let _ = nix::unistd::write(&w, &out);
                // SAFETY: leaving the forked child without running the test harness.
                unsafe { libc::_exit(0) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(w);
                let mut got = Vec::new();
                std::io::Read::read_to_end(&mut fs::File::from(r), &mut got).expect("read");
                nix::sys::wait::waitpid(child, None).expect("wait");
                assert_eq!(got.first(), Some(&u8::from(fits)));
                assert_eq!(&got[1..], &want[..]);
                assert_eq!(fs::read("/proc/self/cmdline").expect("cmdline"), before);
            }
        }
    }
}
