//! The three types: [`Buffer`] (flat, untyped bytes), [`NDBuffer`] (typed, strided views) and
//! [`BufferPrototype`] (where new memory comes from), [`VarLenBuffer`] (variable-length strings
//! and bytes in Arrow's layout), plus `.npy` files of NDBuffers and
//! sharing device buffers with other processes (CUDA IPC).

pub mod dlpack;
mod flat_buffer;
mod ipc;
mod lazy;
mod multi;
mod ndbuffer;
pub mod npy;
mod prototype;
mod resource;
mod varlen_buffer;
mod varlen_fixed;

pub use flat_buffer::{Buffer, HostBytes};
pub use ipc::IpcDescriptor;
pub(crate) use multi::join_worker;
pub use multi::{MultiBuffer, MultiNDBuffer, MultiPrototype, Placement};
pub(crate) use ndbuffer::CWindow;
pub use ndbuffer::{HostArrayView, HostArrayViewMut, NDBuffer};
pub use prototype::{Allocator, BufferPrototype, default_prototype, set_default_prototype};
pub use resource::MemoryResource;
pub use varlen_buffer::VarLenBuffer;
