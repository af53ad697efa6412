//! The staged write: the engine (`staged_write.rs`), its driver (`write_driver.rs`), the
//! device's compression batches (`write_batches.rs`), what the workers do with each chunk
//! (`chunk_writer.rs`), where finished chunks go (`chunk_sink.rs`) and the store threads
//! (`store_queue.rs`).

pub(super) mod chunk_sink;
pub(super) mod chunk_writer;
pub(super) mod staged_write;
pub(super) mod store_queue;
pub(super) mod write_batches;
pub(super) mod write_driver;
