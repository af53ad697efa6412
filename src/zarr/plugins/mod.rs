//! zarrbuf's plugins for zarrs: the numcodecs and zarr-python codecs zarrs lacks, and zarrs'
//! compressors behind zarrbuf's bounded decoders (`codecs/`), and the data types zarrs does
//! not read (`dtypes/`). They are registered in zarrs' plugin registries, so that every
//! array zarrs opens in a process that links zarrbuf reads them.

pub(crate) mod codecs;
pub(crate) mod dtypes;
