//! Whether large host buffers are advised for transparent huge pages.
//!
//! A 2 MiB page is one fault and one TLB entry where 512 small pages are 512, so zarrbuf
//! asks for huge pages on its large host buffers (and its binaries' allocators do on their
//! arenas). A virtual machine whose balloon device reports free pages to its host is the
//! exception for a short-lived process: the guest hands every free block of 2 MiB or more
//! back after about two seconds, and the host must allocate and zero it again when a huge
//! page is next faulted. Measured on such a machine (a Firecracker guest, 2 cores; a fresh
//! process touching 512 MiB): small pages 0.20 s whatever came before, huge pages 0.05 s
//! when freed a moment earlier but 0.84–1.16 s when freed more than two seconds earlier. A
//! fresh `zarrbuf read` of a 256 MiB array from a local HTTP server took 0.66–0.98 s with
//! huge pages and 0.33–0.40 s without, so the CLI, which reads once per process, keeps to
//! small pages there ([`host_returns_free_pages`]). A long-lived process faults its buffers
//! in once and reuses them (the block cache, the allocator's arenas), and there huge pages
//! won: `zarrbuf.open(url).read()` repeated in one process, 0.191–0.198 s with huge pages
//! against 0.201–0.213 s without. So the library keeps advising them. What a long-lived
//! process does not reuse is the output a caller hands it for each read: zarr-python
//! allocates a new NumPy array per read, which NumPy advises for huge pages, so a read from
//! an object store advises such an output for small pages before it prefaults it
//! ([`fresh_memory_keeps_small_pages`]): zarr-python with zarrbuf's pipeline reading a
//! 256 MiB array, reads 2.5 s apart, 0.31–1.36 s before and 0.28–0.55 s after.
//!
//! `ZARRBUF_HUGE_PAGES` decides for both when set: `on` or `off` (`auto`, the default, is
//! as above).

use std::sync::OnceLock;

/// The environment variable that overrides the detection.
pub const HUGE_PAGES_ENV: &str = "ZARRBUF_HUGE_PAGES";

/// `VIRTIO_BALLOON_F_REPORTING`: the balloon device takes free page reports (virtio 1.2,
/// 5.15.2). In sysfs a virtio device's `features` file is one `0`/`1` per feature bit.
const BALLOON_FREE_PAGE_REPORTING_BIT: usize = 5;

/// Where virtio balloon devices list their negotiated feature bits.
const BALLOON_DEVICES: &str = "/sys/bus/virtio/drivers/virtio_balloon";

/// Whether zarrbuf advises its large host buffers for transparent huge pages in this
/// process: `ZARRBUF_HUGE_PAGES` (`on`/`off`) when set to one of those, else yes (see the
/// module docs). Decided once per process.
pub fn huge_pages_advised() -> bool {
    static ADVISED: OnceLock<bool> = OnceLock::new();
    *ADVISED.get_or_init(|| huge_pages_setting().ok().flatten().unwrap_or(true))
}

/// Whether memory this process faults in fresh, read once and lets go should keep to
/// small pages: `ZARRBUF_HUGE_PAGES=off`, or when it is not set,
/// [`host_returns_free_pages`]. The CLI then keeps its whole process to small pages, and a
/// read from an object store into memory zarrbuf does not own (a NumPy array zarr-python
/// allocated for the read, which NumPy advises for huge pages) advises its output so before
/// faulting it in. Decided once per process.
pub fn fresh_memory_keeps_small_pages() -> bool {
    static SMALL: OnceLock<bool> = OnceLock::new();
    *SMALL.get_or_init(|| match huge_pages_setting() {
        Ok(Some(huge)) => !huge,
        Ok(None) | Err(_) => host_returns_free_pages(),
    })
}

/// `ZARRBUF_HUGE_PAGES` as a choice: `Some(true)` for `on`, `Some(false)` for `off`,
/// `None` when unset, empty or `auto`; an error naming the value for anything else (the
/// library then treats it as `auto`; the CLI reports it).
pub fn huge_pages_setting() -> crate::Result<Option<bool>> {
    let Some(value) = std::env::var_os(HUGE_PAGES_ENV) else {
        return Ok(None);
    };
    parse_setting(&value.to_string_lossy()).map_err(crate::Error::InvalidArgument)
}

fn parse_setting(value: &str) -> Result<Option<bool>, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "auto" => Ok(None),
        "on" | "1" | "true" | "yes" => Ok(Some(true)),
        "off" | "0" | "false" | "no" => Ok(Some(false)),
        _ => Err(format!(
            "{HUGE_PAGES_ENV}={value:?} is not a setting: use on, off or auto (the default: \
             huge pages, except in the CLI where a virtio balloon reports free pages to the \
             host)"
        )),
    }
}

/// Whether this machine hands free memory back to its host: a virtio balloon device with
/// free page reporting on (then a huge page freed a few seconds earlier is 4–20× slower
/// to fault in again than a small page; see the module docs).
pub fn host_returns_free_pages() -> bool {
    let Ok(devices) = std::fs::read_dir(BALLOON_DEVICES) else {
        return false;
    };
    devices.flatten().any(|device| {
        std::fs::read_to_string(device.path().join("features"))
            .is_ok_and(|features| reports_free_pages(&features))
    })
}

/// Whether a virtio `features` string has the free page reporting bit set.
fn reports_free_pages(features: &str) -> bool {
    features
        .trim()
        .as_bytes()
        .get(BALLOON_FREE_PAGE_REPORTING_BIT)
        == Some(&b'1')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_bad_ones_are_named() {
        assert_eq!(parse_setting("on"), Ok(Some(true)));
        assert_eq!(parse_setting(" OFF "), Ok(Some(false)));
        assert_eq!(parse_setting("auto"), Ok(None));
        assert_eq!(parse_setting(""), Ok(None));
        let err = parse_setting("sometimes").unwrap_err();
        assert!(
            err.contains("ZARRBUF_HUGE_PAGES") && err.contains("sometimes"),
            "{err}"
        );
        assert!(err.contains("on, off or auto"), "{err}");
    }

    #[test]
    fn the_reporting_bit_is_bit_five() {
        // The features of the Firecracker guest this was measured on: stats queue, deflate
        // on OOM, free page reporting, VERSION_1.
        let measured = "0110010100000000000000000000000010000000000000000000000000000000";
        assert!(reports_free_pages(measured));
        // The same device without reporting (bit 5 cleared), and short or empty strings.
        assert!(!reports_free_pages(
            "0110000100000000000000000000000010000000000000000000000000000000"
        ));
        assert!(!reports_free_pages("0110"));
        assert!(!reports_free_pages(""));
    }
}
