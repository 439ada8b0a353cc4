//! Giving a long-lived, mostly idle process's pages back: a monitor touches most of
//! libcontainer's and serde's code once, to create its container, and then only its copy
//! loop for weeks. The pages stay mapped (RSS) and counted in its PSS (proportionally to the
//! processes that map them) until it exits; the deep calls of the creation leave its stack
//! pages allocated.
//!
//! The daemon is the other case: its periodic work (resyncs, GC and eviction passes, status)
//! runs about 1.5-2 MB of its ~6.5 MB of code, scattered through the binary. The kernel maps
//! up to 64 KiB around every faulting file page (`fault_around_bytes`), so within seconds of
//! a release about 5 MB of code was mapped again. [`IdleRelease`] confines that: it cuts the
//! binary's mappings into one-page mappings (a flag that changes nothing else, alternating,
//! keeps the kernel from merging them), and the kernel never maps around a fault beyond the
//! faulting mapping; then only the pages the daemon runs come back.

use std::fs;
use std::io;

/// An address range, start inclusive, end exclusive.
type Range = (usize, usize);

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
    /// `Rss:` in kB: pages mapped.
    rss_kb: u64,
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
                    rss_kb: 0,
                });
                continue;
            }
        }
        let mut kb = || f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        match (first, out.last_mut()) {
            ("Anonymous:", Some(m)) => m.anonymous_kb = kb(),
            ("Rss:", Some(m)) => m.rss_kb = kb(),
            _ => {}
        }
    }
    out
}

/// The read-only mappings of the file that holds `addr`'s code whose pages were never
/// written: dropping them loses nothing (the relocated read-only data, written by the
/// dynamic loader before it was made read-only, has anonymous pages and is left alone).
fn clean_file_mappings(maps: &[Mapping], addr: usize) -> Vec<Range> {
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
    ranges: Vec<Range>,
}

impl Release {
    /// The process's own executable's code and read-only data (the mappings never written:
    /// dropping them loses nothing; the relocated read-only data, written by the dynamic
    /// loader before it was made read-only, has anonymous pages and is left alone), and with
    /// `stack` the main thread's stack pages more than 16 KiB below the current depth (call it
    /// from the main thread then: the depth an earlier deep call left allocated).
    pub fn plan(stack: bool) -> io::Result<Release> {
        let sp = stack_pointer();
        let (maps, mut ranges) = executable_mappings(Release::plan as *const () as usize)?;
        if stack {
            let start = main_stack_start(&maps, sp)?;
            ranges.extend(stack_below(start, sp, page_size()));
        }
        Ok(Release { ranges })
    }

    /// Bytes of the ranges to release.
    pub fn bytes(&self) -> usize {
        self.ranges.iter().map(|(a, b)| b - a).sum()
    }

    /// `MADV_DONTNEED` on every range (see [`dont_need`]): file pages stay in the page cache
    /// and a page used again is mapped back by a minor fault (with its neighbours: the kernel maps up to 64
    /// KiB around a faulting file page); stack pages are zero-filled on their next use, as
    /// untouched stack pages are. Must be called from the frame that planned it or one above
    /// it (never deeper: the stack range ends 16 KiB below that frame).
    pub fn apply(&self) -> io::Result<()> {
        dont_need(&self.ranges)
    }
}

/// `MADV_DONTNEED` on each range. Every range must be either a private, read-only mapping
/// of this process's own binary without anonymous (written) pages, or main-stack pages more
/// than [`STACK_MARGIN`] below a live frame of the caller's.
fn dont_need(ranges: &[Range]) -> io::Result<()> {
    for &(start, end) in ranges {
        // SAFETY: per this function's contract, each range is either a never-written
        // read-only mapping of this process's own binary, per /proc/self/smaps, where
        // MADV_DONTNEED only drops page table entries that a later access maps back from the
        // page cache (including the code this call returns into; a read-only mapping cannot
        // be written meanwhile); or main-stack pages more than 16 KiB below a live frame of
        // the caller's, which hold no live frame.
        let r =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// An address in the caller's frame: its stack depth.
#[inline(always)]
fn stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(std::ptr::addr_of!(marker)) as usize
}

/// This process's mappings, and its executable's never-written read-only ones (see
/// [`clean_file_mappings`]; `here`: an address of its code).
fn executable_mappings(here: usize) -> io::Result<(Vec<Mapping>, Vec<Range>)> {
    let maps = parse_smaps(&fs::read_to_string("/proc/self/smaps")?);
    let files = clean_file_mappings(&maps, here);
    if files.is_empty() {
        return Err(io::Error::other("no mapping of this executable found"));
    }
    Ok((maps, files))
}

/// The start of the main thread's stack mapping, which holds `sp`.
fn main_stack_start(maps: &[Mapping], sp: usize) -> io::Result<usize> {
    let Some(m) = maps.iter().find(|m| (m.start..m.end).contains(&sp)) else {
        return Err(io::Error::other("no mapping holds the stack pointer"));
    };
    if m.path != "[stack]" {
        return Err(io::Error::other("not on the main thread's stack"));
    }
    Ok(m.start)
}

/// The main stack's pages from `start` to [`STACK_MARGIN`] below `sp`, aligned to `page`
/// (a power of two).
fn stack_below(start: usize, sp: usize, page: usize) -> Option<Range> {
    let top = sp.saturating_sub(STACK_MARGIN) & !(page - 1);
    (top > start).then_some((start, top))
}

/// The kernel's page size (4 KiB on x86-64; 4, 16 or 64 KiB on arm64 kernels).
fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => 4096,
    }
}

/// Adjacent ranges joined (one `madvise` covers several mappings).
fn coalesce(mut ranges: Vec<Range>) -> Vec<Range> {
    ranges.sort_unstable();
    let mut out: Vec<Range> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => out.push((a, b)),
        }
    }
    out
}

/// The pages to mark so that `range` becomes one mapping per page: every other page,
/// starting with the second (the kernel merges neighbouring mappings only when their flags
/// are equal). The first page of the binary (its ELF header) is never marked.
fn odd_pages(range: Range, page: usize) -> Vec<Range> {
    let mut out = Vec::new();
    let mut a = range.0 + page;
    while a < range.1 {
        out.push((a, (a + page).min(range.1)));
        a += 2 * page;
    }
    out
}

/// Whether cutting `pages` more mappings keeps the process well under the kernel's limit
/// (`vm.max_map_count`, 65530 by default): at most half of it in all.
fn room_for_mappings(current: usize, pages: usize, max_map_count: usize) -> bool {
    current + pages <= max_map_count / 2
}

/// Why the binary's code was not cut into one-page mappings ([`IdleRelease::confined`]).
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("{more} mappings more would pass half of vm.max_map_count ({max})")]
    MapCount { more: usize, max: usize },
    #[error("madvise after {pages} pages: {source}")]
    Madvise { pages: usize, source: io::Error },
}

/// The daemon's periodic release ([`IdleRelease::release`]), planned once: after the cut
/// into one-page mappings, `/proc/self/smaps` has a few thousand entries, and reading it at
/// every release would cost milliseconds and a heap of its size.
#[derive(Debug)]
pub struct IdleRelease {
    /// The binary's never-written read-only mappings, joined.
    files: Vec<Range>,
    /// The main stack mapping's start when planned (it only grows downwards: pages it grew
    /// since are not released).
    stack_start: Option<usize>,
    /// The kernel's page size.
    page: usize,
    /// One-page mappings made, or why not.
    pub confined: Result<usize, ConfineError>,
}

impl IdleRelease {
    /// Plans the release of the binary's code and read-only data and, with `stack`, of the
    /// main stack below the caller's depth (then call it, and [`IdleRelease::release`], from
    /// the main thread). Cuts the code and read-only data into one-page mappings, so that a
    /// page used again is mapped back alone, not with up to 64 KiB around it. Stops cutting,
    /// with the reason in `confined`, when a cut fails or would take the process's
    /// mappings past half of `vm.max_map_count`; what was cut stays cut.
    pub fn new(stack: bool) -> io::Result<IdleRelease> {
        let sp = stack_pointer();
        let (maps, files) = executable_mappings(IdleRelease::new as *const () as usize)?;
        let files = coalesce(files);
        let stack_start = if stack {
            Some(main_stack_start(&maps, sp)?)
        } else {
            None
        };
        let page = page_size();
        let confined = confine(&files, page, maps.len());
        Ok(IdleRelease {
            files,
            stack_start,
            page,
            confined,
        })
    }

    /// Gives back the planned mappings' pages and the main stack's below this call's depth.
    pub fn release(&self) -> io::Result<()> {
        let sp = stack_pointer();
        dont_need(&self.files)?;
        match self
            .stack_start
            .and_then(|start| stack_below(start, sp, self.page))
        {
            Some(r) => dont_need(&[r]),
            None => Ok(()),
        }
    }
}

/// Cuts `files` into one-page mappings (see [`odd_pages`]) with `MADV_DONTDUMP`, which only
/// keeps a page out of core dumps: the kernel leaves private file mappings out of them
/// unless `coredump_filter` asks for them. Returns the number of pages marked.
fn confine(files: &[Range], page: usize, current_mappings: usize) -> Result<usize, ConfineError> {
    let marks: Vec<Range> = files.iter().flat_map(|&r| odd_pages(r, page)).collect();
    let max = fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65530);
    // Each mark makes two more mappings (itself and the rest after it).
    if !room_for_mappings(current_mappings, 2 * marks.len(), max) {
        return Err(ConfineError::MapCount {
            more: 2 * marks.len(),
            max,
        });
    }
    for (i, &(a, b)) in marks.iter().enumerate() {
        // SAFETY: (a, b) is a page-aligned range inside a never-written read-only mapping of
        // this process's own binary; MADV_DONTDUMP only sets a flag on the range's mapping
        // (splitting it), which changes nothing but core dumps.
        let r = unsafe { libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_DONTDUMP) };
        if r != 0 {
            return Err(ConfineError::Madvise {
                pages: i,
                source: io::Error::last_os_error(),
            });
        }
    }
    Ok(marks.len())
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
    fn adjacent_ranges_are_joined() {
        let cases: &[(&[Range], &[Range])] = &[
            (&[], &[]),
            (&[(0x3000, 0x4000), (0x1000, 0x3000)], &[(0x1000, 0x4000)]),
            (
                &[(0x1000, 0x2000), (0x3000, 0x4000)],
                &[(0x1000, 0x2000), (0x3000, 0x4000)],
            ),
            (
                &[(0x1000, 0x2000), (0x2000, 0x3000), (0x5000, 0x6000)],
                &[(0x1000, 0x3000), (0x5000, 0x6000)],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(coalesce(input.to_vec()), want.to_vec(), "{input:x?}");
        }
    }

    #[test]
    fn every_other_page_is_marked_from_the_second() {
        let p = 0x1000;
        let cases: &[(Range, &[Range])] = &[
            ((0x10000, 0x11000), &[]),
            ((0x10000, 0x12000), &[(0x11000, 0x12000)]),
            ((0x10000, 0x13000), &[(0x11000, 0x12000)]),
            (
                (0x10000, 0x15000),
                &[(0x11000, 0x12000), (0x13000, 0x14000)],
            ),
        ];
        for (range, want) in cases {
            assert_eq!(odd_pages(*range, p), want.to_vec(), "{range:x?}");
        }
        // 16 KiB pages (arm64 kernels).
        assert_eq!(
            odd_pages((0x40000, 0x50000), 0x4000),
            vec![(0x44000, 0x48000), (0x4c000, 0x50000)]
        );
    }

    #[test]
    fn cuts_stay_under_half_the_kernels_mapping_limit() {
        assert!(room_for_mappings(100, 5000, 65530));
        assert!(room_for_mappings(100, 32665, 65530));
        assert!(!room_for_mappings(100, 32666, 65530));
        assert!(!room_for_mappings(100, 5000, 8192));
    }

    #[test]
    fn the_stack_is_released_below_a_margin_and_page_aligned() {
        // 0x7000_0000 .. sp: the part more than 16 KiB below sp, down to a page boundary.
        assert_eq!(
            stack_below(0x7000_0000, 0x7010_0800, 0x1000),
            Some((0x7000_0000, 0x700f_c000))
        );
        assert_eq!(
            stack_below(0x7000_0000, 0x7010_0800, 0x4000),
            Some((0x7000_0000, 0x700f_c000))
        );
        assert_eq!(
            stack_below(0x7000_0000, 0x7010_2800, 0x4000),
            Some((0x7000_0000, 0x700f_c000))
        );
        // Less than the margin deep: nothing.
        assert_eq!(stack_below(0x7000_0000, 0x7000_3000, 0x1000), None);
    }

    /// Runs `f` in a forked child (the test harness's own pages stay as they are) and
    /// returns what it wrote.
    fn in_child(f: impl FnOnce() -> String) -> String {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        // SAFETY: the child runs `f`, writes its answer and _exits; glibc's fork keeps malloc
        // usable in the child.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            nix::unistd::ForkResult::Child => {
                let text = f();
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
                got
            }
        }
    }

    /// kB of this executable's code and read-only data mapped (Rss), the number of its
    /// mappings and the size of the one holding `addr`.
    fn exe_footprint(addr: usize) -> (u64, usize, usize) {
        let maps = parse_smaps(&fs::read_to_string("/proc/self/smaps").expect("smaps"));
        let exe = fs::read_link("/proc/self/exe").expect("exe");
        let mine: Vec<&Mapping> = maps
            .iter()
            .filter(|m| m.path == exe.to_string_lossy() && (m.perms == "r-xp" || m.perms == "r--p"))
            .collect();
        let holder = mine
            .iter()
            .find(|m| (m.start..m.end).contains(&addr))
            .map_or(0, |m| m.end - m.start);
        (mine.iter().map(|m| m.rss_kb).sum(), mine.len(), holder)
    }

    #[test]
    fn a_confined_release_maps_back_only_the_pages_used() {
        let here = exe_footprint as *const () as usize;
        // The same work after each release: reading smaps runs the same code either way.
        let plain = in_child(|| {
            let ok = Release::plan(false).and_then(|r| r.apply()).is_ok();
            let (rss, n, holder) = exe_footprint(here);
            format!("{} {rss} {n} {holder}", u8::from(ok))
        });
        let confined = in_child(|| {
            let r = IdleRelease::new(false).expect("plan");
            let marked = r.confined.as_ref().map_or(0, |n| *n);
            // Released twice: the second time as the daemon does, long after the cut.
            let ok = r.release().is_ok() && r.release().is_ok();
            let (rss, n, holder) = exe_footprint(here);
            format!("{} {rss} {n} {holder} {marked}", u8::from(ok))
        });
        let p: Vec<usize> = plain
            .split(' ')
            .map(|v| v.parse().expect("number"))
            .collect();
        let c: Vec<usize> = confined
            .split(' ')
            .map(|v| v.parse().expect("number"))
            .collect();
        let page = page_size();
        assert_eq!((p[0], c[0]), (1, 1), "{plain} / {confined}");
        // Cut: one mapping per page, twice as many mappings as pages marked, at least.
        assert!(c[4] > 100, "{confined}");
        assert!(c[2] >= 2 * c[4], "{confined}");
        assert_eq!(c[3], page, "{confined}");
        assert!(p[3] > 16 * page, "{plain}");
        // Without fault-around, fewer pages come back for the same work (in this debug
        // test binary 1.4 against 2.5 MB: its unoptimised code touches more pages itself).
        assert!(c[1] * 4 < p[1] * 3, "confined {c:?} vs plain {p:?}");
    }

    #[test]
    fn released_pages_come_back_when_used_again() {
        // In a forked child, so the test harness's own pages are not touched.
        let got = in_child(|| {
            let files = Release::plan(false)
                .and_then(|r| r.apply().map(|()| r.bytes() > 0))
                .unwrap_or(false);
            // The test runs on a thread of the harness: not the main thread's stack.
            let stack = Release::plan(true).is_err();
            // Code and read-only data are used again after the release.
            let deep = std::hint::black_box([7u8; 64 * 1024]);
            format!("{} {} {}", u8::from(files), u8::from(stack), deep[1000])
        });
        assert_eq!(got, "1 1 7");
    }
}
