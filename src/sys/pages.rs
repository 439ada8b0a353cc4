//! Giving a long-lived, mostly idle process's pages back: a monitor touches most of
//! libcontainer's and serde's code once, to create its container, and then only its copy
//! loop for weeks. The pages stay mapped (RSS) and counted in its PSS (proportionally to the
//! processes that map them) until it exits; the deep calls of the creation leave its stack
//! pages allocated.

use std::fs;
use std::io;

/// Bytes of stack kept below the frame that plans a release: the frames of the calls it
/// makes until it applies it and right after (nothing below the stack pointer is live; the
/// x86-64 red zone is 128 bytes).
const STACK_MARGIN: usize = 16 * 1024;

/// One mapping of `/proc/self/smaps`.
#[derive(Debug, PartialEq)]
struct Mapping {
    start: usize,
    end: usize,
    perms: String,
    path: String,
    /// `Anonymous:` in kB: pages of a private file mapping that were written (copied).
    anonymous_kb: u64,
}

fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(first) = f.next() else { continue };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                let perms = f.next().unwrap_or_default().to_string();
                // offset, device, inode, then the path (may be absent or contain spaces).
                let path = f.skip(3).collect::<Vec<_>>().join(" ");
                out.push(Mapping {
                    start,
                    end,
                    perms,
                    path,
                    anonymous_kb: 0,
                });
                continue;
            }
        }
        if first == "Anonymous:" {
            if let Some(m) = out.last_mut() {
                m.anonymous_kb = f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            }
        }
    }
    out
}

/// The read-only mappings of the file that holds `addr`'s code whose pages were never
/// written: dropping them loses nothing (the relocated read-only data, written by the
/// dynamic loader before it was made read-only, has anonymous pages and is left alone).
fn clean_file_mappings(maps: &[Mapping], addr: usize) -> Vec<(usize, usize)> {
    let Some(code) = maps
        .iter()
        .find(|m| m.perms == "r-xp" && (m.start..m.end).contains(&addr) && !m.path.is_empty())
    else {
        return Vec::new();
    };
    maps.iter()
        .filter(|m| m.path == code.path && (m.perms == "r-xp" || m.perms == "r--p"))
        .filter(|m| m.anonymous_kb == 0)
        .map(|m| (m.start, m.end))
        .collect()
}

/// What [`Release::apply`] gives back: computed first (reading `/proc/self/smaps` runs a fair
/// amount of code), applied last, so that as little code as possible runs, and is mapped
/// back, between the release and the wait it precedes.
#[derive(Debug, Default)]
pub struct Release {
    ranges: Vec<(usize, usize)>,
}

impl Release {
    /// The process's own executable's code and read-only data (the mappings never written:
    /// dropping them loses nothing; the relocated read-only data, written by the dynamic
    /// loader before it was made read-only, has anonymous pages and is left alone), and with
    /// `stack` the main thread's stack pages more than 16 KiB below the current depth (call it
    /// from the main thread then: the depth an earlier deep call left allocated).
    pub fn plan(stack: bool) -> io::Result<Release> {
        let marker = 0u8;
        let sp = std::hint::black_box(std::ptr::addr_of!(marker)) as usize;
        let here = Release::plan as *const () as usize;
        let maps = parse_smaps(&fs::read_to_string("/proc/self/smaps")?);
        let mut ranges = clean_file_mappings(&maps, here);
        if ranges.is_empty() {
            return Err(io::Error::other("no mapping of this executable found"));
        }
        if stack {
            let Some(m) = maps.iter().find(|m| (m.start..m.end).contains(&sp)) else {
                return Err(io::Error::other("no mapping holds the stack pointer"));
            };
            if m.path != "[stack]" {
                return Err(io::Error::other("not on the main thread's stack"));
            }
            let top = sp.saturating_sub(STACK_MARGIN) & !4095;
            if top > m.start {
                ranges.push((m.start, top));
            }
        }
        Ok(Release { ranges })
    }

    /// Bytes of the ranges to release.
    pub fn bytes(&self) -> usize {
        self.ranges.iter().map(|(a, b)| b - a).sum()
    }

    /// `MADV_DONTNEED` on every range: file pages stay in the page cache and a page used
    /// again is mapped back by a minor fault (with its neighbours: the kernel maps up to 64
    /// KiB around a faulting file page); stack pages are zero-filled on their next use, as
    /// untouched stack pages are. Must be called from the frame that planned it or one above
    /// it (never deeper: the stack range ends 16 KiB below that frame).
    pub fn apply(&self) -> io::Result<()> {
        for &(start, end) in &self.ranges {
            // SAFETY: each range is either a whole private, read-only mapping of this
            // process's own binary without anonymous (written) pages, per /proc/self/smaps,
            // where MADV_DONTNEED only drops page table entries that a later access maps back
            // from the page cache (including the code this call returns into; a read-only
            // mapping cannot be written meanwhile); or main-stack pages more than 16 KiB below
            // the frame that planned the release, which holds no live frame.
            let r = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0a0000000-55d0a0100000 r--p 00000000 fe:01 42                         /usr/bin/podvisor
Size:               1024 kB
Anonymous:             0 kB
55d0a0100000-55d0a0800000 r-xp 00100000 fe:01 42                         /usr/bin/podvisor
Size:               7168 kB
Anonymous:             0 kB
55d0a0800000-55d0a0900000 r--p 00800000 fe:01 42                         /usr/bin/podvisor
Size:               1024 kB
Anonymous:           248 kB
55d0a0900000-55d0a0910000 rw-p 00900000 fe:01 42                         /usr/bin/podvisor
Anonymous:            12 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:01 7                          /usr/lib/libc.so.6
Anonymous:             0 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
Anonymous:            80 kB
";

    #[test]
    fn only_the_never_written_read_only_mappings_of_the_executable_are_chosen() {
        let maps = parse_smaps(SMAPS);
        assert_eq!(maps.len(), 6);
        assert_eq!(maps[5].path, "[stack]");
        assert_eq!(maps[2].anonymous_kb, 248);
        assert_eq!(
            clean_file_mappings(&maps, 0x55d0a0200000),
            vec![
                (0x55d0a0000000, 0x55d0a0100000),
                (0x55d0a0100000, 0x55d0a0800000)
            ]
        );
        // An address outside any code mapping of the executable: nothing.
        assert!(clean_file_mappings(&maps, 0x55d0a0900010).is_empty());
    }

    #[test]
    fn released_pages_come_back_when_used_again() {
        // In a forked child, so the test harness's own pages are not touched.
        let (r, w) = nix::unistd::pipe().expect("pipe");
        // SAFETY: the child releases its pages, runs code again, writes a line and _exits;
        // glibc's fork keeps malloc usable in the child.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            nix::unistd::ForkResult::Child => {
                let files = Release::plan(false)
                    .and_then(|r| r.apply().map(|()| r.bytes() > 0))
                    .unwrap_or(false);
                // The test runs on a thread of the harness: not the main thread's stack.
                let stack = Release::plan(true).is_err();
                // Code and read-only data are used again after the release.
                let deep = std::hint::black_box([7u8; 64 * 1024]);
                let text = format!("{} {} {}", u8::from(files), u8::from(stack), deep[1000]);
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
                assert_eq!(got, "1 1 7");
            }
        }
    }
}
