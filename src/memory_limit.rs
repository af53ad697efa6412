//! How much host memory this process may still take: the default limit on a read's output
//! and on any single decode whose size the data alone would decide.
//!
//! The least of: the memory the system has available (`MemAvailable` in `/proc/meminfo`),
//! the room left under the memory limit of the process's cgroup and of every cgroup above it
//! (cgroup v2 `memory.max` less `memory.current`), and the room left under the process's
//! address-space and data-segment limits (`ulimit -v`, `prlimit --as`, `--data`). Off Linux,
//! or where none of these can be read, there is no limit.

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

/// The least room under `memory.max` of this process's cgroup (v2) and its ancestors.
fn cgroup_room() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let mut dir = std::path::PathBuf::from("/sys/fs/cgroup");
    dir.push(path.trim_start_matches('/'));
    let mut room: Option<u64> = None;
    loop {
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        if let (Some(max), Some(current)) = (read("memory.max"), read("memory.current"))
            && let (Ok(max), Ok(current)) =
                (max.trim().parse::<u64>(), current.trim().parse::<u64>())
        {
            let here = max.saturating_sub(current);
            room = Some(room.map_or(here, |r| r.min(here)));
        }
        if dir == std::path::Path::new("/sys/fs/cgroup") || !dir.pop() {
            break;
        }
    }
    room
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
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let used = |name: &str| status.as_deref().and_then(|s| kb_field(s, name));
    [
        (libc::RLIMIT_AS, used("VmSize")),
        (libc::RLIMIT_DATA, used("VmData")),
    ]
    .into_iter()
    .filter_map(|(resource, used)| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` into the struct it is given, which lives on
        // this stack frame for the call.
        let ok = unsafe { libc::getrlimit(resource, &mut limit) } == 0;
        (ok && limit.rlim_cur != libc::RLIM_INFINITY).then(|| {
            // rlim_t is u64 on the 64-bit Linux targets; the conversion is for the others.
            #[allow(clippy::useless_conversion)]
            let cur = u64::from(limit.rlim_cur);
            cur.saturating_sub(used.unwrap_or(0))
        })
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
