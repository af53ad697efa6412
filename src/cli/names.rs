//! How the command line names stores and arrays in messages.

/// A short label for messages: `store` or `store:path`.
pub(crate) fn label(location: &str, array_path: &str) -> String {
    let p = array_path.trim_matches('/');
    if p.is_empty() {
        location.to_string()
    } else {
        format!("{location}:{p}")
    }
}
