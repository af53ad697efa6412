//! The crate's error type.

/// Everything that can go wrong in a codec kernel.
///
/// ```
/// use zarrbuf_codecs::{check_extent, CodecError, Strided};
/// let err = check_extent(8, Strided { offset: 0, strides: &[4] }, &[3], 4).unwrap_err();
/// assert!(matches!(err, CodecError::InvalidLayout(_)));
/// ```
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// A layout addresses bytes outside its region, shape and strides lengths disagree, too many
    /// dimensions remain after merging, an element size or swap unit is invalid, etc.
    #[error("invalid layout: {0}")]
    InvalidLayout(String),
    /// CUDA is unavailable, or a driver / NVRTC call failed; the message says which.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// The request is well-formed but this implementation does not support it.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// `Result` with [`CodecError`] as the default error type.
///
/// ```
/// fn f() -> zarrbuf_codecs::Result<u8> { Ok(1) }
/// assert_eq!(f().unwrap(), 1);
/// ```
pub type Result<T, E = CodecError> = std::result::Result<T, E>;

/// Shorthand for building an [`CodecError::InvalidLayout`].
pub(crate) fn invalid(msg: impl Into<String>) -> CodecError {
    CodecError::InvalidLayout(msg.into())
}
