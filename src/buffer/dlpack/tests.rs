use super::*;
use crate::buffer::{Buffer, NDBuffer};
use crate::data_types::{ByteOrder, DataType};
use crate::errors::{Error, Result};
use crate::{BufferPrototype, Order};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn layout_of_views_round_trips() -> Result<()> {
    let a = NDBuffer::from_vec((0..24i32).collect(), &[2, 3, 4])?;
    for view in [
        a.clone(),
        a.transpose(&[2, 0, 1])?,
        a.get(&[1..2, 0..3, 1..3])?,
        a.get(&[0..2, 2..3, 0..4])?.transpose(&[1, 2, 0])?,
    ] {
        let t = view.to_dlpack()?;
        assert_eq!(t.device().device_type, DLDeviceType::CPU);
        assert_eq!(t.dl_tensor().byte_offset as usize, view.offset());
        let want: Vec<i64> = view.strides().iter().map(|&s| s as i64 / 4).collect();
        assert_eq!(t.strides(), Some(&want[..]));
        let back = NDBuffer::from_dlpack(t)?;
        assert_eq!(back.shape(), view.shape());
        assert_eq!(back.strides(), view.strides());
        assert_eq!(back.to_vec::<i32>()?, view.to_vec::<i32>()?);
        // Same memory: a write through the import is seen by the original.
        assert_eq!(back.buffer().host_ptr(), view.buffer().host_ptr());

        let back = NDBuffer::from_dlpack_legacy(view.to_dlpack_legacy()?)?;
        assert_eq!(back.to_vec::<i32>()?, view.to_vec::<i32>()?);
    }
    Ok(())
}

#[test]
fn writes_through_the_import_reach_the_original() -> Result<()> {
    let a = NDBuffer::from_vec(vec![0u16; 6], &[2, 3])?;
    let mut b = NDBuffer::from_dlpack(a.to_dlpack()?)?;
    b.fill(&9u16.to_ne_bytes())?;
    drop(b);
    assert_eq!(a.to_vec::<u16>()?, vec![9; 6]);
    Ok(())
}

#[test]
fn every_dlpack_dtype_round_trips() -> Result<()> {
    let proto = BufferPrototype::cpu();
    for dt in DataType::ALL {
        let a = NDBuffer::zeros(&[3, 2], dt, Order::F, &proto)?;
        let t = a.to_dlpack()?;
        assert_eq!(t.dtype().bits as usize, dt.size() * 8);
        let b = NDBuffer::from_dlpack(t)?;
        assert_eq!(
            (b.dtype(), b.shape(), b.strides()),
            (dt, a.shape(), a.strides())
        );
    }
    Ok(())
}

#[test]
fn types_without_a_dlpack_code_are_errors() -> Result<()> {
    for dt in [
        DataType::RawBits(3),
        DataType::FixedBytes(4),
        DataType::FixedUtf32(2),
        DataType::DateTime64(crate::data_types::TimeUnit::Second, 1),
    ] {
        let a = NDBuffer::zeros(&[2], dt, Order::C, &BufferPrototype::cpu())?;
        let e = a.to_dlpack().unwrap_err();
        assert!(matches!(e, Error::DataType(_)), "{dt}: {e}");
        assert!(e.to_string().contains("no DLPack data type"), "{e}");
        assert!(a.to_dlpack_legacy().is_err());
    }
    Ok(())
}

#[test]
fn non_native_byte_order_is_an_error_not_a_copy() -> Result<()> {
    let other = match ByteOrder::native() {
        ByteOrder::Little => ByteOrder::Big,
        ByteOrder::Big => ByteOrder::Little,
    };
    let b = Buffer::from_vec(vec![0u8; 8]);
    let a = NDBuffer::from_parts(b.clone(), DataType::Int32, &[2], &[4], 0, other)?;
    let e = a.to_dlpack().unwrap_err();
    assert!(e.to_string().contains("byte order"), "{e}");
    // Single bytes have no byte order.
    let u = NDBuffer::from_parts(b, DataType::UInt8, &[8], &[1], 0, other)?;
    assert!(u.to_dlpack().is_ok());
    Ok(())
}

#[test]
fn byte_strides_that_are_not_whole_elements_are_errors() -> Result<()> {
    let b = Buffer::from_vec(vec![0u8; 16]);
    let a = NDBuffer::from_parts(b, DataType::Int32, &[2], &[6], 0, ByteOrder::native())?;
    let e = a.to_dlpack().unwrap_err();
    assert!(e.to_string().contains("not a multiple"), "{e}");
    Ok(())
}

#[test]
fn the_owner_lives_until_the_deleter_runs() -> Result<()> {
    let a = NDBuffer::from_vec(vec![5i64; 4], &[4])?;
    let t = a.to_dlpack()?;
    let ptr = t.dl_tensor().data as *const i64;
    drop(a);
    // SAFETY: the tensor owns a clone of the NDBuffer, so the memory is still alive.
    assert_eq!(unsafe { *ptr.add(3) }, 5);
    let raw = t.into_raw();
    // SAFETY: `raw` came from into_raw; the deleter runs once, here.
    unsafe { ((*raw).deleter.unwrap())(raw) };
    Ok(())
}

/// A producer that is not zarrbuf: counts its deleter calls.
#[repr(C)]
struct Foreign {
    managed: DLManagedTensorVersioned,
    data: Vec<f32>,
    shape: Vec<i64>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn foreign_deleter(p: *mut DLManagedTensorVersioned) {
    // SAFETY: the test made `p` as the first field of a boxed `Foreign`.
    let f = unsafe { Box::from_raw(p.cast::<Foreign>()) };
    f.deleted.fetch_add(1, Ordering::SeqCst);
}

fn foreign(flags: u64, deleted: &Arc<AtomicUsize>) -> DlpackVersioned {
    let mut f = Box::new(Foreign {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(foreign_deleter),
            flags,
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice {
                    device_type: DLDeviceType::CPU,
                    device_id: 0,
                },
                ndim: 2,
                dtype: dlpack_dtype(DataType::Float32).unwrap(),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(), // compact row-major
                byte_offset: 4,
            },
        },
        data: (0..7).map(|x| x as f32).collect(),
        shape: vec![2, 3],
        deleted: deleted.clone(),
    });
    f.managed.dl_tensor.data = f.data.as_mut_ptr().cast();
    f.managed.dl_tensor.shape = f.shape.as_mut_ptr();
    let raw = Box::into_raw(f);
    // SAFETY: a live, fully initialised tensor handed over once (repr(C) first field).
    unsafe { DlpackVersioned::from_raw(raw.cast()).unwrap() }
}

// `Foreign` must start with the managed tensor for the cast above.
const _: () = assert!(std::mem::offset_of!(Foreign, managed) == 0);

#[test]
fn foreign_tensors_import_without_copy_and_are_deleted_once() -> Result<()> {
    let deleted = Arc::new(AtomicUsize::new(0));
    let t = foreign(0, &deleted);
    let data = t.dl_tensor().data as usize;
    let a = NDBuffer::from_dlpack(t)?;
    assert_eq!(a.buffer().host_ptr().unwrap() as usize, data);
    assert_eq!(a.offset(), 4);
    assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let view = a.get(&[1..2, 0..3])?;
    drop(a);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    assert_eq!(view.to_vec::<f32>()?, vec![4.0, 5.0, 6.0]);
    drop(view);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    Ok(())
}

#[test]
fn read_only_imports_refuse_writes() -> Result<()> {
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut a = NDBuffer::from_dlpack(foreign(DLPACK_FLAG_BITMASK_READ_ONLY, &deleted))?;
    assert_eq!(a.to_vec::<f32>()?[0], 1.0);
    assert!(a.fill(&0f32.to_ne_bytes()).is_err());
    // Re-exported read-only: the flag survives, the legacy ABI refuses.
    let t = a.to_dlpack()?;
    assert_eq!(t.flags() & DLPACK_FLAG_BITMASK_READ_ONLY, 1);
    assert!(a.to_dlpack_legacy().is_err());
    drop((a, t));
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    Ok(())
}

#[test]
fn failed_imports_still_delete() {
    let deleted = Arc::new(AtomicUsize::new(0));
    let t = foreign(0, &deleted);
    // SAFETY: the handle is live; changing the device type makes the import fail.
    unsafe { (*t.as_raw()).dl_tensor.device.device_type = DLDeviceType(4) };
    let e = NDBuffer::from_dlpack(t).unwrap_err();
    assert!(e.to_string().contains("device type 4"), "{e}");
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn negative_strides_and_wrong_versions_are_errors() {
    let deleted = Arc::new(AtomicUsize::new(0));
    let t = foreign(0, &deleted);
    // SAFETY: the handle is live.
    unsafe { (*t.as_raw()).version.major = 2 };
    assert!(
        NDBuffer::from_dlpack(t)
            .unwrap_err()
            .to_string()
            .contains("DLPack 2.0")
    );
    let t = foreign(0, &deleted);
    let mut strides = [-3i64, 1];
    // SAFETY: the handle is live and `strides` outlives the import attempt.
    unsafe { (*t.as_raw()).dl_tensor.strides = strides.as_mut_ptr() };
    assert!(
        NDBuffer::from_dlpack(t)
            .unwrap_err()
            .to_string()
            .contains("negative strides")
    );
    assert_eq!(deleted.load(Ordering::SeqCst), 2);
}

#[test]
fn empty_and_scalar_arrays() -> Result<()> {
    let e = NDBuffer::zeros(
        &[0, 3],
        DataType::Float64,
        Order::C,
        &BufferPrototype::cpu(),
    )?;
    let b = NDBuffer::from_dlpack(e.to_dlpack()?)?;
    assert_eq!(b.shape(), &[0, 3]);
    let s = NDBuffer::from_vec(vec![42u32], &[])?;
    let t = s.to_dlpack()?;
    assert_eq!(t.shape(), &[] as &[i64]);
    assert_eq!(NDBuffer::from_dlpack(t)?.to_vec::<u32>()?, vec![42]);
    Ok(())
}

#[test]
fn struct_layouts_match_dlpack_h() {
    use std::mem::{offset_of, size_of};
    assert_eq!(size_of::<DLDevice>(), 8);
    assert_eq!(size_of::<DLDataType>(), 4);
    assert_eq!(offset_of!(DLTensor, device), 8);
    assert_eq!(offset_of!(DLTensor, ndim), 16);
    assert_eq!(offset_of!(DLTensor, dtype), 20);
    assert_eq!(offset_of!(DLTensor, shape), 24);
    assert_eq!(offset_of!(DLTensor, byte_offset), 40);
    assert_eq!(size_of::<DLTensor>(), 48);
    assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
    assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
    assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
}
