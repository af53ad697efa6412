//! Fixed-size machine words with unaligned loads/stores and byte swaps, used by the row loops.

/// A plain word type the row loops copy in one load/store.
pub(crate) trait Word: Copy {
    /// Size in bytes.
    const SIZE: usize;
    /// Reverses the bytes of the word.
    fn swap(self) -> Self;
    /// Reads a word from `p`.
    ///
    /// # Safety
    ///
    /// `p..p + SIZE` must be readable.
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees SIZE readable bytes; read_unaligned has no alignment
        // requirement.
        unsafe { (p as *const Self).read_unaligned() }
    }
    /// Writes `self` to `p`.
    ///
    /// # Safety
    ///
    /// `p..p + SIZE` must be writable.
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees SIZE writable bytes; write_unaligned has no alignment
        // requirement.
        unsafe { (p as *mut Self).write_unaligned(self) }
    }
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn swap(self) -> Self {
                self.swap_bytes()
            }
        }
    )*};
}
word!(u8, u16, u32, u64, u128);
