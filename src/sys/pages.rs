//! Giving a long-lived, mostly idle process's pages back: a monitor touches most of
//! libcontainer's and serde's code once, to create its container, and then only its copy
//! loop for weeks. The code pages stay mapped (RSS) and are counted in its PSS
//! (proportionally to the processes that map them) until it exits.

use std::fs;
use std::io;

/// Unmaps this process's pages of the executable's code (the `r-xp` mapping that holds this
/// function) with `MADV_DONTNEED`. They stay in the page cache; a page the process runs again
/// is mapped back in by a minor fault. Only the code is dropped: it is never written, so
/// nothing is lost (`MADV_DONTNEED` on a private mapping discards written pages, which is why
/// data and relocated read-only mappings are left alone). Returns the bytes unmapped.
pub fn release_code_pages() -> io::Result<usize> {
    let here = release_code_pages as *const () as usize;
    let maps = fs::read_to_string("/proc/self/maps")?;
    let Some((start, end)) = code_mapping(&maps, here) else {
        return Err(io::Error::other("no executable mapping holds this code"));
    };
    // SAFETY: `start..end` is a whole private, read-only, executable mapping of this
    // process's own binary (from /proc/self/maps): never written, so MADV_DONTNEED only drops
    // page table entries that a later access faults back in from the page cache, including
    // the page this call returns into.
    let r = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(end - start)
}

/// The bounds of the `r-xp` mapping in `maps` (the format of `/proc/<pid>/maps`) that
/// contains `addr`.
fn code_mapping(maps: &str, addr: usize) -> Option<(usize, usize)> {
    maps.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (range, perms) = (f.next()?, f.next()?);
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        (perms == "r-xp" && (a..b).contains(&addr)).then_some((a, b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_mapping_holding_an_address_is_found() {
        let maps = "\
55d0a0000000-55d0a0100000 r--p 00000000 fe:01 42 /usr/bin/podvisor
55d0a0100000-55d0a0800000 r-xp 00100000 fe:01 42 /usr/bin/podvisor
55d0a0800000-55d0a0900000 r--p 00800000 fe:01 42 /usr/bin/podvisor
55d0a0900000-55d0a0910000 rw-p 00900000 fe:01 42 /usr/bin/podvisor
";
        assert_eq!(
            code_mapping(maps, 0x55d0a0200000),
            Some((0x55d0a0100000, 0x55d0a0800000))
        );
        // Read-only data and writable data are never chosen.
        assert_eq!(code_mapping(maps, 0x55d0a0000010), None);
        assert_eq!(code_mapping(maps, 0x55d0a0900010), None);
    }

    #[test]
    fn code_pages_come_back_when_run_again() {
        // In a forked child, so the test harness's own pages are not touched.
        let (r, w) = nix::unistd::pipe().expect("pipe");
        // SAFETY: the child releases its code pages, runs code again, writes one byte and
        // _exits; glibc's fork keeps malloc usable in the child.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            nix::unistd::ForkResult::Child => {
                let ok = release_code_pages().map(|n| n > 0).unwrap_or(false);
                // Code runs again after the release (formatting, a syscall).
                let text = format!("{}", u8::from(ok));
                let _ = nix::unistd::write(&w, text.as_bytes());
                // SAFETY: leaving the forked child without running the test harness.
                unsafe { libc::_exit(0) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(w);
                let mut got = String::new();
                std::io::Read::read_to_string(&mut fs::File::from(r), &mut got).expect("read");
                let st = nix::sys::wait::waitpid(child, None).expect("wait");
                assert_eq!(st, nix::sys::wait::WaitStatus::Exited(child, 0));
                assert_eq!(got, "1");
            }
        }
    }
}
