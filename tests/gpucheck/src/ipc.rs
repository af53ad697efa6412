//! The CUDA IPC check: this binary exports device memory and runs itself as the importing
//! child process.

use crate::Check;
use crate::args::IpcMode;
use std::ops::Range;
use std::time::Instant;
use zarrbuf::ipc::IpcDescriptor;
use zarrbuf::{Buffer, BufferPrototype, Device, Error};

/// The exporter's pattern: byte `i` of the allocation.
fn ipc_pattern(i: usize) -> u8 {
    (i * 7 % 251) as u8
}

/// What the `write` child writes: byte `i` of the bytes it writes.
fn ipc_child_byte(i: usize) -> u8 {
    0xa5 ^ (i % 256) as u8
}

/// Where, in the exported view, the `write` child writes.
const IPC_CHILD_WRITE: Range<usize> = 4096..4096 + 65536;
/// The exporter's fill before the `reopen` child runs.
const IPC_FILL: u8 = 0x3c;

/// CUDA IPC across two processes (this binary runs itself as the importing child): export a
/// slice of a `cuMemAlloc` buffer, the child checks it and writes part of it, the exporter
/// sees the write; then a child that drops its imports early (and reopens) while the
/// exporter keeps using the memory. Also the refusals in one process: pool and pinned
/// memory, and importing one's own descriptor.
pub(crate) fn ipc(table: &mut Vec<(String, String)>) -> Check {
    const NAME: &str = "CUDA IPC across processes";
    if !Device::Cuda(0).is_available() {
        let why = match zarrbuf::cuda::cuda_device_count() {
            Err(e) => e.to_string(),
            Ok(n) => format!("no cuda:0 ({n} devices)"),
        };
        if std::env::var("ZARRBUF_REQUIRE_GPU").as_deref() == Ok("1") {
            return Err(format!(
                "{NAME}: {why}, but ZARRBUF_REQUIRE_GPU=1 requires it"
            ));
        }
        table.push((NAME.into(), format!("skipped: {why}")));
        return Ok(());
    }
    let t = Instant::now();
    let e = |x: Error| format!("{NAME}: {x}");
    // Refusals, in this process.
    let pooled = Buffer::zeros(4096, &BufferPrototype::cuda(0)).map_err(e)?;
    match pooled.ipc_descriptor() {
        Err(Error::Unsupported(m)) if m.contains("ipc_shareable") => {}
        other => return Err(format!("{NAME}: pool memory exported: {other:?}")),
    }
    let pinned = Buffer::zeros(4096, &BufferPrototype::pinned(0)).map_err(e)?;
    match pinned.ipc_descriptor() {
        Err(Error::Unsupported(_)) => {}
        other => return Err(format!("{NAME}: pinned memory exported: {other:?}")),
    }

    let n = 16 << 20;
    let mut b = Buffer::zeros(n, &BufferPrototype::cuda(0).ipc_shareable()).map_err(e)?;
    if !b.is_ipc_shareable() {
        return Err(format!("{NAME}: an ipc_shareable buffer is not shareable"));
    }
    let pattern: Vec<u8> = (0..n).map(ipc_pattern).collect();
    b.copy_from(&Buffer::from_vec(pattern.clone())).map_err(e)?;
    let view = (1 << 20)..(5 << 20);
    let desc = b.slice(view.clone()).ipc_descriptor().map_err(e)?;
    if (desc.offset(), desc.len()) != (view.start, view.len()) || desc.allocation_size() < n {
        return Err(format!(
            "{NAME}: the descriptor says {desc:?} for bytes {view:?} of {n}"
        ));
    }
    match Buffer::from_ipc_descriptor(&desc) {
        Err(Error::InvalidArgument(m)) if m.contains("this very process") => {}
        other => return Err(format!("{NAME}: imported its own descriptor: {other:?}")),
    }
    // The descriptor travels as text on the child's command line.
    let child = run_ipc_child(&desc, IpcMode::Write)?;
    let got = b.to_vec().map_err(e)?;
    let mut want = pattern;
    let at = view.start + IPC_CHILD_WRITE.start;
    for (i, w) in want[at..at + IPC_CHILD_WRITE.len()].iter_mut().enumerate() {
        *w = ipc_child_byte(i);
    }
    if got != want {
        let first = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(0);
        return Err(format!(
            "{NAME}: after the child's write the exporter's byte {first} is {} (expected {})",
            got[first], want[first]
        ));
    }
    table.push((
        NAME.into(),
        format!(
            "ok: a {} MiB view at +{} MiB of a {} MiB cuMemAlloc buffer imported by pid {child}, \
             checked and written there, the write seen by the exporter; pool, pinned and \
             same-process imports refused ({:.1} s)",
            view.len() >> 20,
            view.start >> 20,
            n >> 20,
            t.elapsed().as_secs_f64()
        ),
    ));

    // Imports dropped before the exporter: the exporter fills, a child imports twice, drops
    // one early, imports again after closing both; the exporter keeps using the memory.
    let t = Instant::now();
    b.fill_bytes(IPC_FILL).map_err(e)?;
    let child = run_ipc_child(&desc, IpcMode::Reopen)?;
    b.fill_bytes(0x11).map_err(e)?;
    if b.to_vec().map_err(e)?.iter().any(|&x| x != 0x11) {
        return Err(format!(
            "{NAME}: the exporter's buffer is damaged after the import closed"
        ));
    }
    drop(b);
    table.push((
        "CUDA IPC imports dropped before the exporter".into(),
        format!(
            "ok: pid {child} imported twice, dropped one early, reopened after closing both; \
             the exporter kept writing and reading, then freed ({:.1} s)",
            t.elapsed().as_secs_f64()
        ),
    ));
    Ok(())
}

/// Runs this binary as the importing child; returns its pid, or its output when it failed.
fn run_ipc_child(desc: &IpcDescriptor, mode: IpcMode) -> Result<u32, String> {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().map_err(|x| format!("current_exe: {x}"))?;
    let mode_arg = match mode {
        IpcMode::Write => "write",
        IpcMode::Reopen => "reopen",
    };
    let mut child = Command::new(exe)
        .args(["--ipc-child", &desc.to_hex(), "--ipc-child-mode", mode_arg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|x| format!("CUDA IPC: starting the child: {x}"))?;
    let pid = child.id();
    let deadline = Instant::now() + std::time::Duration::from_secs(180);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "CUDA IPC: the {mode_arg} child (pid {pid}) hung; killed"
                ));
            }
            Err(x) => return Err(format!("CUDA IPC: waiting for the child: {x}")),
        }
    };
    let out = child
        .wait_with_output()
        .map_err(|x| format!("CUDA IPC: the child's output: {x}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !status.success() || !text.contains("ipc child: ok") {
        return Err(format!(
            "CUDA IPC: the {mode_arg} child (pid {pid}) failed ({status}): {}",
            text.trim().replace('\n', " / ")
        ));
    }
    Ok(pid)
}

/// The importing child (`--ipc-child HEX`).
pub(crate) fn ipc_child(hex: &str, mode: IpcMode) -> Check {
    let e = |x: Error| x.to_string();
    let desc = IpcDescriptor::from_hex(hex).map_err(e)?;
    if desc.is_from_this_process() {
        return Err("the descriptor claims to come from this process".into());
    }
    let expect = |b: &Buffer, what: &str, want: &dyn Fn(usize) -> u8| -> Check {
        let got = b.to_vec().map_err(e)?;
        match (0..got.len()).find(|&i| got[i] != want(i)) {
            None => Ok(()),
            Some(i) => Err(format!(
                "{what}: byte {i} of the imported view is {} (expected {})",
                got[i],
                want(i)
            )),
        }
    };
    let base = desc.offset();
    match mode {
        IpcMode::Write => {
            let shared = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            if shared.len() != desc.len() || shared.memory() != zarrbuf::Memory::Cuda(0) {
                return Err(format!("imported {shared:?} for {desc:?}"));
            }
            expect(&shared, "the exporter's pattern", &|i| {
                ipc_pattern(base + i)
            })?;
            let bytes: Vec<u8> = (0..IPC_CHILD_WRITE.len()).map(ipc_child_byte).collect();
            let mut part = shared.try_slice(IPC_CHILD_WRITE).map_err(e)?;
            part.copy_from(&Buffer::from_vec(bytes)).map_err(e)?;
            shared.sync().map_err(e)?;
        }
        IpcMode::Reopen => {
            let first = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            let second = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            drop(first);
            expect(&second, "after dropping the first import", &|_| IPC_FILL)?;
            drop(second);
            let again = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            expect(&again, "imported again after closing", &|_| IPC_FILL)?;
            drop(again);
            // The context still works once every mapping is closed.
            let b = Buffer::from_slice(&[1, 2, 3], &BufferPrototype::cuda(0)).map_err(e)?;
            if b.to_vec().map_err(e)? != [1, 2, 3] {
                return Err("a device round trip after closing the imports failed".into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipc_child_refuses_bad_descriptors() {
        for hex in ["", "zz", "00"] {
            let err = ipc_child(hex, IpcMode::Write).unwrap_err();
            assert!(err.contains("IPC descriptor"), "{err}");
        }
    }

    #[test]
    fn the_ipc_check_skips_without_a_gpu() {
        if Device::Cuda(0).is_available() {
            return;
        }
        let mut table = Vec::new();
        let r = ipc(&mut table);
        if std::env::var("ZARRBUF_REQUIRE_GPU").as_deref() == Ok("1") {
            assert!(r.unwrap_err().contains("ZARRBUF_REQUIRE_GPU=1"));
        } else {
            r.unwrap();
            assert_eq!(table.len(), 1);
            assert!(table[0].1.starts_with("skipped: "), "{table:?}");
        }
    }
}
