//! CUDA IPC (`Buffer::ipc_descriptor`, `Buffer::from_ipc_descriptor`, `IpcDescriptor`):
//! every error path runs everywhere (host, pinned, pool and non-CUDA memory; malformed
//! descriptors of every kind); the export/import round trip across two processes runs where
//! a GPU is present and skips visibly otherwise (a failure under ZARRBUF_REQUIRE_GPU=1).

use crate::common::{Need, own_test, run_own_test, skip};
use zarrbuf::ipc::IpcDescriptor;
use zarrbuf::{Buffer, BufferPrototype, Device, Error};

/// A version-1 descriptor written by hand from the byte table in `IpcDescriptor`'s docs
/// (so the test pins the wire format), with a token no process has and a UUID no GPU has.
fn encode(
    ordinal: u32,
    uuid: [u8; 16],
    allocation_size: u64,
    offset: u64,
    len: u64,
    tweak: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"ZBUF-IPC");
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&ordinal.to_le_bytes());
    b.extend_from_slice(&uuid);
    b.extend_from_slice(&4321u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0x5eed_0000_0000_0001u64.to_le_bytes());
    b.extend_from_slice(&allocation_size.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&[0xab; 64]);
    tweak(&mut b);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn valid() -> Vec<u8> {
    encode(3, [0; 16], 1 << 20, 4096, 1000, |_| {})
}

/// The message of an `InvalidArgument`, or a panic naming what came instead.
fn invalid(r: zarrbuf::Result<IpcDescriptor>) -> String {
    match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn the_documented_byte_format_is_read() {
    let bytes = valid();
    assert_eq!(bytes.len(), IpcDescriptor::ENCODED_LEN);
    let d = IpcDescriptor::from_bytes(&bytes).unwrap();
    assert_eq!(d.device_ordinal(), 3);
    assert_eq!(d.device_uuid(), [0; 16]);
    assert_eq!(d.exporter_pid(), 4321);
    assert_eq!(
        (d.allocation_size(), d.offset(), d.len()),
        (1 << 20, 4096, 1000)
    );
    assert!(!d.is_empty() && !d.is_from_this_process());
    // Written back byte for byte, and through hex.
    assert_eq!(d.to_bytes(), bytes);
    assert_eq!(IpcDescriptor::from_hex(&d.to_hex()).unwrap(), d);
    // An empty view at the very end of the allocation is valid.
    let end = encode(0, [1; 16], 64, 64, 0, |_| {});
    assert!(IpcDescriptor::from_bytes(&end).unwrap().is_empty());
}

#[test]
fn garbage_is_invalid_argument() {
    for garbage in [
        &b""[..],
        b"x",
        b"hello world",
        &[0u8; 140],
        &[0xff; 140],
        &[0x5a; 4096],
    ] {
        let m = invalid(IpcDescriptor::from_bytes(garbage));
        assert!(m.contains("magic"), "{m}");
        assert!(m.contains("to_bytes"), "the message says what to pass: {m}");
    }
}

#[test]
fn truncated_and_padded_bytes_are_invalid_argument() {
    let bytes = valid();
    for n in [8, 9, 10, 12, 72, 136, 139] {
        let m = invalid(IpcDescriptor::from_bytes(&bytes[..n]));
        assert!(m.contains("truncated"), "{n} bytes: {m}");
    }
    let mut padded = bytes.clone();
    padded.push(0);
    let m = invalid(IpcDescriptor::from_bytes(&padded));
    assert!(m.contains("141 bytes") && m.contains("exactly 140"), "{m}");
}

#[test]
fn wrong_magic_and_version_are_invalid_argument() {
    let mut b = valid();
    b[0] = b'X';
    let m = invalid(IpcDescriptor::from_bytes(&b));
    assert!(m.contains("magic") && m.contains("0x58"), "{m}");
    for version in [0u16, 2, 0xffff] {
        let mut b = valid();
        b[8..10].copy_from_slice(&version.to_le_bytes());
        let m = invalid(IpcDescriptor::from_bytes(&b));
        assert!(
            m.contains(&format!("format version {version}")) && m.contains("same zarrbuf"),
            "{m}"
        );
    }
}

#[test]
fn damaged_bytes_fail_the_checksum() {
    let mut b = valid();
    b[100] ^= 0x10; // inside the handle
    let m = invalid(IpcDescriptor::from_bytes(&b));
    assert!(m.contains("checksum"), "{m}");
    let mut b = valid();
    b[139] ^= 1; // the checksum itself
    assert!(invalid(IpcDescriptor::from_bytes(&b)).contains("checksum"));
}

#[test]
fn reserved_fields_must_be_zero() {
    let b = encode(0, [0; 16], 64, 0, 64, |b| b[10] = 1);
    assert!(invalid(IpcDescriptor::from_bytes(&b)).contains("reserved"));
    let b = encode(0, [0; 16], 64, 0, 64, |b| b[38] = 1);
    assert!(invalid(IpcDescriptor::from_bytes(&b)).contains("reserved"));
}

#[test]
fn views_outside_the_allocation_are_invalid_argument() {
    for (size, offset, len) in [
        (100u64, 0u64, 101u64),
        (100, 100, 1),
        (100, 101, 0),
        (0, 0, 1),
        (u64::MAX, u64::MAX, 1),
        (u64::MAX, 1, u64::MAX),
        (10, u64::MAX, u64::MAX),
    ] {
        let b = encode(0, [0; 16], size, offset, len, |_| {});
        let m = invalid(IpcDescriptor::from_bytes(&b));
        assert!(
            m.contains("of an allocation of") && m.contains(&size.to_string()),
            "{size} {offset} {len}: {m}"
        );
        if offset.checked_add(len).is_none() {
            assert!(m.contains("overflow"), "{m}");
        }
    }
}

#[test]
fn bad_hex_is_invalid_argument() {
    for text in ["", "0", "abc", "zz", "0g", "é1"] {
        let _ = invalid(IpcDescriptor::from_hex(text));
    }
    let hex = IpcDescriptor::from_bytes(&valid()).unwrap().to_hex();
    let m = invalid(IpcDescriptor::from_hex(&hex[..hex.len() - 1]));
    assert!(m.contains("odd"), "{m}");
    let m = invalid(IpcDescriptor::from_hex(&hex[..hex.len() - 2]));
    assert!(m.contains("truncated"), "{m}");
}

#[test]
fn random_bytes_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let good = valid();
    for _ in 0..20_000 {
        let mut b = if rng.random_bool(0.5) {
            good.clone()
        } else {
            let n = rng.random_range(0..300);
            (0..n).map(|_| rng.random()).collect()
        };
        if !b.is_empty() {
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random();
            }
        }
        if rng.random_bool(0.2) {
            let n = rng.random_range(0..=b.len());
            b.truncate(n);
        }
        let _ = IpcDescriptor::from_bytes(&b);
    }
}

#[test]
fn host_memory_cannot_be_exported() {
    let b = Buffer::from_vec(vec![1u8; 64]);
    for buf in [b.clone(), b.slice(8..16)] {
        match buf.ipc_descriptor() {
            Err(Error::Unsupported(m)) => {
                assert!(
                    m.contains("host memory") && m.contains("ipc_shareable"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(!b.is_ipc_shareable());
    match b.to_ipc_shareable() {
        Err(Error::Unsupported(m)) => assert!(m.contains("copy_to_new"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn lazy_host_buffers_are_refused_before_they_get_memory() {
    let lazy = Buffer::lazy(64, &BufferPrototype::cpu());
    assert!(matches!(lazy.ipc_descriptor(), Err(Error::Unsupported(_))));
    assert!(!lazy.is_allocated());
    assert!(!lazy.is_ipc_shareable());
}

#[test]
fn ipc_shareable_host_and_pinned_prototypes_are_unsupported() {
    match Buffer::zeros(16, &BufferPrototype::cpu().ipc_shareable()) {
        Err(Error::Unsupported(m)) => assert!(m.contains("cuda(n).ipc_shareable"), "{m}"),
        other => panic!("{other:?}"),
    }
    match Buffer::zeros(16, &BufferPrototype::pinned(0).ipc_shareable()) {
        Err(Error::Unsupported(m)) => assert!(m.contains("CUDA device memory"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Some(buffer) on a GPU machine; None (after a visible skip) without one, where the
/// allocation must have failed with DeviceUnavailable.
fn on_gpu(what: &str, r: zarrbuf::Result<Buffer>) -> Option<Buffer> {
    match r {
        Ok(b) => Some(b),
        Err(Error::DeviceUnavailable(why)) => {
            assert!(!Device::Cuda(0).is_available());
            skip(Need::Gpu, what, &why);
            None
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

#[test]
fn pinned_memory_cannot_be_exported() {
    let Some(b) = on_gpu(
        "pinned export",
        Buffer::zeros(64, &BufferPrototype::pinned(0)),
    ) else {
        return;
    };
    match b.ipc_descriptor() {
        Err(Error::Unsupported(m)) => {
            assert!(m.contains("pinned") && m.contains("ipc_shareable"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn pool_memory_cannot_be_exported() {
    let Some(b) = on_gpu("pool export", Buffer::zeros(64, &BufferPrototype::cuda(0))) else {
        return;
    };
    assert!(!b.is_ipc_shareable());
    match b.ipc_descriptor() {
        Err(Error::Unsupported(m)) => {
            assert!(
                m.contains("memory pool") && m.contains("ipc_shareable()"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    // to_ipc_shareable copies it into exportable memory.
    let shareable = b.to_ipc_shareable().unwrap();
    assert!(shareable.is_ipc_shareable());
    assert_ne!(shareable.storage_id(), b.storage_id());
    assert!(shareable.ipc_descriptor().is_ok());
    assert_eq!(
        shareable.to_ipc_shareable().unwrap().storage_id(),
        shareable.storage_id()
    );
}

#[test]
fn importing_needs_the_exporters_gpu() {
    // Valid bytes, another process's token, a UUID no GPU has: without CUDA the import is
    // DeviceUnavailable, and with it, too (this process cannot see that GPU).
    let d = IpcDescriptor::from_bytes(&valid()).unwrap();
    match Buffer::from_ipc_descriptor(&d) {
        Err(Error::DeviceUnavailable(m)) => {
            if Device::Cuda(0).is_available() {
                assert!(
                    m.contains("GPU-00000000-0000") && m.contains("not visible"),
                    "{m}"
                );
            }
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn own_descriptors_cannot_be_imported() {
    let Some(b) = on_gpu(
        "same-process import",
        Buffer::zeros(1 << 16, &BufferPrototype::cuda(0).ipc_shareable()),
    ) else {
        return;
    };
    assert!(b.is_ipc_shareable());
    let d = b.slice(100..300).ipc_descriptor().unwrap();
    assert_eq!((d.offset(), d.len(), d.device_ordinal()), (100, 200, 0));
    assert!(d.allocation_size() >= 1 << 16);
    assert!(d.is_from_this_process());
    assert_eq!(d.exporter_pid(), std::process::id());
    match Buffer::from_ipc_descriptor(&d) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("this very process"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// The parent half of the two-process round trip: fills an exportable buffer, runs
/// `ipc_child` in a child process with the hex descriptor of a slice, and checks what the
/// child wrote.
#[test]
fn export_to_another_process_and_back() {
    let n = 1 << 20;
    let Some(mut b) = on_gpu(
        "two-process IPC round trip",
        Buffer::zeros(n, &BufferPrototype::cuda(0).ipc_shareable()),
    ) else {
        return;
    };
    let pattern: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    b.copy_from(&Buffer::from_vec(pattern.clone())).unwrap();
    let (start, end) = (4096, 4096 + 65536);
    let desc = b.slice(start..end).ipc_descriptor().unwrap();
    let (status, out) = run_own_test(
        &own_test!("ipc_child"),
        &[("ZARRBUF_TEST_IPC_DESCRIPTOR", &desc.to_hex())],
        &[],
    );
    assert!(status.success(), "the child failed:\n{out}");
    assert!(
        out.contains("ipc child: ok"),
        "the child did not run:\n{out}"
    );
    let got = b.to_vec().unwrap();
    let mut want = pattern;
    for (i, w) in want[start + 1000..start + 3000].iter_mut().enumerate() {
        *w = 255 - (i % 256) as u8;
    }
    assert!(got == want, "the exporter does not see the child's write");
}

/// The child half (does nothing unless the parent set the descriptor): imports twice,
/// drops one import early, verifies the pattern, writes bytes 1000..3000 of the view.
#[test]
fn ipc_child() {
    let Ok(hex) = std::env::var("ZARRBUF_TEST_IPC_DESCRIPTOR") else {
        return;
    };
    let desc = IpcDescriptor::from_hex(&hex).unwrap();
    assert!(!desc.is_from_this_process());
    let first = Buffer::from_ipc_descriptor(&desc).unwrap();
    let second = Buffer::from_ipc_descriptor(&desc).unwrap();
    assert_eq!(first.len(), desc.len());
    assert_eq!(first.memory(), zarrbuf::Memory::Cuda(0));
    let want: Vec<u8> = (desc.offset()..desc.offset() + desc.len())
        .map(|i| (i % 251) as u8)
        .collect();
    assert!(
        first.to_vec().unwrap() == want,
        "the child sees other bytes"
    );
    drop(first); // an import dropped early: the other stays mapped
    assert!(second.to_vec().unwrap() == want);
    let write: Vec<u8> = (0..2000).map(|i| 255 - (i % 256) as u8).collect();
    let mut part = second.slice(1000..3000);
    part.copy_from(&Buffer::from_vec(write)).unwrap();
    second.sync().unwrap();
    drop(part);
    drop(second);
    // The context still works after both mappings are closed.
    let b = Buffer::from_slice(&[1, 2, 3], &BufferPrototype::cuda(0)).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![1, 2, 3]);
    // Straight to the stderr handle: libtest captures println! of a passing test.
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(b"ipc child: ok\n");
}
