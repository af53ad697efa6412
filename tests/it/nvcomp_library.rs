//! nvCOMP's own library, loaded on a machine without a GPU: zarrbuf asks its version,
//! resolves every batched function it declares, decompression and compression, and asks
//! each compressor, with every option set zarrbuf passes it, the largest output of a chunk
//! (a query that needs no GPU, through the same by-value options as the compression calls)
//! — what would otherwise first happen on a GPU machine. Needs `ZARRBUF_NVCOMP` naming
//! `libnvcomp.so.6` (`scripts/fetch-nvcomp.sh` takes it from the `nvidia-libnvcomp-cu13`
//! wheel; `.ci/run` does and sets `ZARRBUF_REQUIRE_NVCOMP=1`); without it the test skips
//! visibly.

use crate::common::{Need, skip};
use std::path::Path;

#[test]
fn nvcomp_6_loads_and_every_function_it_is_called_through_resolves() {
    let Some(path) = std::env::var_os("ZARRBUF_NVCOMP") else {
        skip(
            Need::Nvcomp,
            "loading nvCOMP's library",
            "ZARRBUF_NVCOMP does not name libnvcomp.so.6",
        );
        return;
    };
    let loaded = zarrbuf::cuda::nvcomp_library()
        .unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()));
    assert_eq!(Path::new(&loaded), Path::new(&path));
    let compressors = zarrbuf::cuda::nvcomp_compression()
        .unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()));
    assert_eq!(compressors, loaded);
}
