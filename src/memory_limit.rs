//! How much host memory this process may still take: the default limit on a read's output
//! and on any single decode whose size the data alone would decide.
//!
//! The least of: the memory the system has available (`MemAvailable` in `/proc/meminfo`),
//! the room left under the memory limit of the process's cgroup and of every cgroup above it
//! (cgroup v2 `memory.max` less `memory.current`; cgroup v1 `memory.limit_in_bytes` and the
//! `hierarchical_memory_limit` of `memory.stat`, less `memory.usage_in_bytes`), and the room
//! left under the process's address-space and data-segment limits (`ulimit -v`, `prlimit
//! --as`, `--data`). The cgroups are found through `/proc/self/cgroup` and where
//! `/proc/self/mountinfo` says each hierarchy is mounted (`/sys/fs/cgroup` and
//! `/sys/fs/cgroup/memory` where it does not say). Off Linux, or where none of these can be
//! read, there is no limit. The parsing reads files through one function, so the tests feed
//! it fixture text.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The answer is kept this long: reads and decodes ask often, and the inputs change slowly.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// The host memory this process may still take, in bytes: the least of the system's
/// available memory, the room under its cgroup's memory limit (and its parents') and under
/// its address-space and data-segment limits; `None` where none of these can be read (off
/// Linux). It is the default limit of a read's output (`ReadOptions::max_bytes`).
///
/// ```
/// if cfg!(target_os = "linux") {
///     assert!(zarrbuf::alloc::available_memory().unwrap() > 0);
/// }
/// ```
pub fn available_bytes() -> Option<u64> {
    static LAST: Mutex<Option<(Instant, Option<u64>)>> = Mutex::new(None);
    if let Ok(last) = LAST.lock()
        && let Some((at, bytes)) = *last
        && at.elapsed() < FRESH_FOR
    {
        return bytes;
    }
    let bytes = measure();
    if let Ok(mut last) = LAST.lock() {
        *last = Some((Instant::now(), bytes));
    }
    bytes
}

thread_local! {
    /// A narrower budget for the decodes running on this thread ([`with_decode_cap`]).
    static DECODE_CAP: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every decode on this thread whose size the data alone decides (a
/// variable-length chunk) held to at most `cap` bytes ([`decode_room`]): a read's own
/// budget (`ReadOptions::max_bytes`, less what it already holds) is often narrower than the
/// process's memory. The cap in force before is restored afterwards, also on a panic.
pub(crate) fn with_decode_cap<R>(cap: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DECODE_CAP.with(|c| c.set(self.0));
        }
    }
    let before = DECODE_CAP.with(|c| c.replace(Some(cap)));
    let _restore = Restore(before);
    f()
}

/// The most bytes a decode on this thread may produce when the data alone decides its size:
/// the memory this process may still take ([`available_bytes`]), or less under
/// [`with_decode_cap`]; `None` where neither is known.
pub(crate) fn decode_room() -> Option<u64> {
    let cap = DECODE_CAP.with(std::cell::Cell::get);
    match (available_bytes(), cap) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

fn measure() -> Option<u64> {
    [mem_available(), cgroup_room(), rlimit_room()]
        .into_iter()
        .flatten()
        .min()
}

/// A `/proc` line's value in kB, as bytes: `Name:   123 kB`.
fn kb_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb.saturating_mul(1024))
}

fn mem_available() -> Option<u64> {
    kb_field(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
        "MemAvailable",
    )
}

/// Reads a file's text: the file system, or fixtures in the tests.
type ReadText<'a> = &'a dyn Fn(&Path) -> Option<String>;

fn read_file(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The least room under the memory limits of this process's cgroups (v2 and v1) and their
/// ancestors.
fn cgroup_room() -> Option<u64> {
    cgroup_room_from(&read_file)
}

fn cgroup_room_from(read: ReadText<'_>) -> Option<u64> {
    let own = read(Path::new("/proc/self/cgroup"))?;
    let mounts = read(Path::new("/proc/self/mountinfo")).unwrap_or_default();
    [v2_room(&own, &mounts, read), v1_room(&own, &mounts, read)]
        .into_iter()
        .flatten()
        .min()
}

/// The mount root and mount point of the first cgroup file system of type `fstype` whose
/// super options satisfy `wanted` (a line of `/proc/self/mountinfo`: `id parent dev root
/// point options [tags] - fstype source super-options`).
fn cgroup_mount(
    mountinfo: &str,
    fstype: &str,
    wanted: impl Fn(&str) -> bool,
) -> Option<(String, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (head, tail) = line.split_once(" - ")?;
        let mut tail = tail.split_whitespace();
        let (kind, _source, options) = (tail.next()?, tail.next()?, tail.next()?);
        if kind != fstype || !wanted(options) {
            return None;
        }
        let head: Vec<&str> = head.split_whitespace().collect();
        Some((head.get(3)?.to_string(), PathBuf::from(head.get(4)?)))
    })
}

/// The directory of cgroup `path` in a hierarchy mounted at `point` (showing the cgroup
/// `root`; a container sees its own cgroup as the root).
fn cgroup_dir(point: &Path, root: &str, path: &str) -> PathBuf {
    let below = if root == "/" {
        path
    } else {
        path.strip_prefix(root).unwrap_or(path)
    };
    point.join(below.trim_start_matches('/'))
}

/// The least of `here` over the cgroup directory `dir` and every directory above it up to
/// the mount point `point`.
fn least_up_to(point: &Path, mut dir: PathBuf, here: impl Fn(&Path) -> Option<u64>) -> Option<u64> {
    let mut room: Option<u64> = None;
    loop {
        if let Some(n) = here(&dir) {
            room = Some(room.map_or(n, |r| r.min(n)));
        }
        if dir == point || !dir.starts_with(point) || !dir.pop() {
            break;
        }
    }
    room
}

fn number(text: Option<String>) -> Option<u64> {
    text?.trim().parse().ok()
}

/// cgroup v2: `memory.max` less `memory.current` (`max` is no limit).
fn v2_room(own: &str, mounts: &str, read: ReadText<'_>) -> Option<u64> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let (root, point) = cgroup_mount(mounts, "cgroup2", |_| true)
        .unwrap_or_else(|| ("/".into(), PathBuf::from("/sys/fs/cgroup")));
    least_up_to(&point, cgroup_dir(&point, &root, path), |dir| {
        let max = number(read(&dir.join("memory.max")))?;
        let current = number(read(&dir.join("memory.current")))?;
        Some(max.saturating_sub(current))
    })
}

/// cgroup v1: the least of `memory.limit_in_bytes` and `memory.stat`'s
/// `hierarchical_memory_limit`, less `memory.usage_in_bytes` (an unlimited group shows a
/// limit near 2^63, which is no limit in practice).
fn v1_room(own: &str, mounts: &str, read: ReadText<'_>) -> Option<u64> {
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })?;
    let path = path.trim();
    let (root, point) = cgroup_mount(mounts, "cgroup", |o| o.split(',').any(|o| o == "memory"))
        .unwrap_or_else(|| ("/".into(), PathBuf::from("/sys/fs/cgroup/memory")));
    least_up_to(&point, cgroup_dir(&point, &root, path), |dir| {
        let usage = number(read(&dir.join("memory.usage_in_bytes")))?;
        let hierarchical = read(&dir.join("memory.stat")).and_then(|stat| {
            stat.lines()
                .find_map(|l| l.strip_prefix("hierarchical_memory_limit "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        });
        let limit = [
            number(read(&dir.join("memory.limit_in_bytes"))),
            hierarchical,
        ]
        .into_iter()
        .flatten()
        .min()?;
        Some(limit.saturating_sub(usage))
    })
}

/// No address-space limits are read off Linux.
#[cfg(not(target_os = "linux"))]
fn rlimit_room() -> Option<u64> {
    None
}

/// The least room under the address-space and data-segment limits, given the process's
/// current virtual and data sizes.
#[cfg(target_os = "linux")]
fn rlimit_room() -> Option<u64> {
    let limit_of = |resource| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` into the struct it is given, which lives on
        // this stack frame for the call.
        let ok = unsafe { libc::getrlimit(resource, &mut limit) } == 0;
        // rlim_t is u64 on the 64-bit Linux targets; the conversion is for the others.
        #[allow(clippy::useless_conversion)]
        let cur = u64::from(limit.rlim_cur);
        (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(cur)
    };
    let status = read_file(Path::new("/proc/self/status")).unwrap_or_default();
    rlimit_room_of(
        limit_of(libc::RLIMIT_AS),
        limit_of(libc::RLIMIT_DATA),
        &status,
    )
}

/// The least room under an address-space limit `as_limit` and a data-segment limit
/// `data_limit` (`None`: unlimited), given `/proc/self/status` (`VmSize`, `VmData`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn rlimit_room_of(as_limit: Option<u64>, data_limit: Option<u64>, status: &str) -> Option<u64> {
    [(as_limit, "VmSize"), (data_limit, "VmData")]
        .into_iter()
        .filter_map(|(limit, used)| {
            Some(limit?.saturating_sub(kb_field(status, used).unwrap_or(0)))
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_parse_as_bytes() {
        let text = "MemTotal:       16303148 kB\nMemAvailable:    9000 kB\n";
        assert_eq!(kb_field(text, "MemAvailable"), Some(9000 * 1024));
        assert_eq!(kb_field(text, "MemFree"), None);
    }

    /// A file system of fixture files.
    fn fixture(files: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let files: std::collections::HashMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_string()))
            .collect();
        move |p: &Path| files.get(p).cloned()
    }

    const V1_CGROUP: &str = "12:pids:/user.slice\n\
        9:memory:/user.slice/job\n\
        4:cpu,cpuacct:/user.slice\n\
        0::/user.slice/job\n";

    #[test]
    fn cgroup_v1_limits_are_read_below_the_memory_mount() {
        let read = fixture(&[
            ("/proc/self/cgroup", V1_CGROUP),
            (
                "/proc/self/mountinfo",
                "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n",
            ),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.limit_in_bytes",
                "2147483648\n",
            ),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.usage_in_bytes",
                "536870912\n",
            ),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.stat",
                "cache 0\nhierarchical_memory_limit 9223372036854771712\n",
            ),
            // An unlimited parent.
            (
                "/sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/user.slice/memory.usage_in_bytes",
                "1073741824\n",
            ),
        ]);
        assert_eq!(cgroup_room_from(&read), Some(2147483648 - 536870912));
    }

    #[test]
    fn cgroup_v1_parents_and_hierarchical_limits_count() {
        // The group's own limit is unset; a parent's hierarchical limit binds.
        let read = fixture(&[
            ("/proc/self/cgroup", V1_CGROUP),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.limit_in_bytes",
                "9223372036854771712",
            ),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.usage_in_bytes",
                "100",
            ),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.stat",
                "hierarchical_memory_limit 1000\n",
            ),
        ]);
        assert_eq!(cgroup_room_from(&read), Some(900));
    }

    #[test]
    fn a_container_sees_its_cgroup_at_the_mount_root() {
        // /proc/self/cgroup names the host's path; the mount shows that group as its root.
        let read = fixture(&[
            ("/proc/self/cgroup", "7:memory:/docker/abc\n"),
            (
                "/proc/self/mountinfo",
                "40 30 0:33 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
            ),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "104857600"),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "4857600"),
        ]);
        assert_eq!(cgroup_room_from(&read), Some(100_000_000));
    }

    #[test]
    fn cgroup_v2_limits_and_the_least_of_both() {
        let v2 = "0::/user.slice/job\n";
        let files = [
            ("/proc/self/cgroup", v2),
            ("/sys/fs/cgroup/user.slice/job/memory.max", "max\n"),
            ("/sys/fs/cgroup/user.slice/job/memory.current", "10\n"),
            ("/sys/fs/cgroup/user.slice/memory.max", "5000\n"),
            ("/sys/fs/cgroup/user.slice/memory.current", "3000\n"),
        ];
        assert_eq!(cgroup_room_from(&fixture(&files)), Some(2000));
        // A mount elsewhere, and v1 alongside v2 (hybrid): the least room counts.
        let read = fixture(&[
            ("/proc/self/cgroup", V1_CGROUP),
            (
                "/proc/self/mountinfo",
                "1 0 0:1 / /cg2 rw - cgroup2 cgroup2 rw\n\
                 2 0 0:2 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
            ),
            ("/cg2/user.slice/job/memory.max", "800"),
            ("/cg2/user.slice/job/memory.current", "100"),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.limit_in_bytes",
                "600",
            ),
            (
                "/sys/fs/cgroup/memory/user.slice/job/memory.usage_in_bytes",
                "100",
            ),
        ]);
        assert_eq!(cgroup_room_from(&read), Some(500));
        // Nothing readable: no limit from cgroups.
        assert_eq!(cgroup_room_from(&fixture(&[])), None);
        assert_eq!(
            cgroup_room_from(&fixture(&[("/proc/self/cgroup", "0::/\n")])),
            None
        );
    }

    #[test]
    fn rlimits_leave_room_above_what_the_process_uses() {
        let status = "VmSize:  2048 kB\nVmData:  1024 kB\n";
        assert_eq!(rlimit_room_of(None, None, status), None);
        assert_eq!(
            rlimit_room_of(Some(10 << 20), None, status),
            Some((10 << 20) - (2 << 20))
        );
        assert_eq!(
            rlimit_room_of(Some(10 << 20), Some(2 << 20), status),
            Some((2 << 20) - (1 << 20))
        );
        assert_eq!(rlimit_room_of(Some(1024), None, status), Some(0));
    }

    #[test]
    fn a_decode_cap_narrows_the_room_on_its_thread_only() {
        let outside = decode_room();
        let inside = with_decode_cap(1000, || {
            let nested = with_decode_cap(10, decode_room);
            assert_eq!(nested, Some(10));
            decode_room()
        });
        assert_eq!(inside, Some(1000));
        assert_eq!(decode_room(), outside);
    }

    #[test]
    fn a_linux_process_knows_its_room() {
        if cfg!(target_os = "linux") {
            let n = available_bytes().expect("MemAvailable is readable on Linux");
            assert!(n > 0);
        }
    }
}
